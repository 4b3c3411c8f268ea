//! The service's records and how they are laid out in the tables.
//!
//! One table (`Shop` by default) holds every tenant's data:
//!
//! | PartitionKey | RowKey | row |
//! |---|---|---|
//! | `acme` | `CUST_c1` | customer `c1` |
//! | `acme` | `email_ann@example.com` | the unique email index: a copy of the customer |
//! | `acme` | `ORD_c1\|0000000007` | its order 7 |
//! | `acme` | `ORD_c1\|0000000007_LINE_0000000001` | the order's line 1, right after it |
//! | `acme` | `ATT_c1\|invoice.pdf` | an attachment; its bytes are in the blob store |
//! | `acme` | `NAME_ann smith\|CUST_c1` | the name search's entry of customer `c1`, kept from the change feed |
//! | `acme` | `NAMEOF_CUST_c1` | where customer `c1`'s name entry is |
//! | `acme` | `~tk\|change\|…`, `~tk\|changes` | the customers' change feed (tablekit's rows) |
//! | `city_acme` | `city_Oslo\|CUST_c1` | the city index, kept through the outbox |
//! | `acme\|ann` | `USER_` | user `ann` of tenant `acme` |
//! | `acme\|ann` | `ACT_2516067891445256764_0000000000` | her activity, newest first |
//!
//! The audit log goes into one table per day (`Audit20261124`), dropped
//! whole when it ages out.

use tablekit::key::{CaseInsensitive, InvertedTime, Verbatim};
use tablekit::{DateTime, EntityKinds, TableEntity};

/// A customer of a tenant.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "CUST", changes)]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "city", tag = "city", partition = "city"))]
pub struct Customer {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The customer's id within the tenant.
    #[tablekit(row_key)]
    pub id: String,
    /// The customer's name.
    pub name: String,
    /// The email address, stored as given and unique within the tenant
    /// whatever its case: `Ann@Example.com` and `ann@example.com` are one
    /// address (the index holds it case-folded).
    #[tablekit(unique = "email")]
    pub email: CaseInsensitive,
    /// Where the customer lives; found across the tenant by the city index.
    #[tablekit(index = "city")]
    pub city: String,
    /// Tells this customer from an earlier one of the same id (deleted, and
    /// made again): set when it is created, kept by every write. What is
    /// attached to a customer names it, so that nothing of an earlier
    /// customer is ever served as this one's. Empty in rows written before
    /// it was kept.
    #[tablekit(default)]
    pub incarnation: String,
}

/// A customer as the name search finds it: kept by the search projection
/// ([`NameSearch`](super::NameSearch)) from the customers' change feed, in
/// the tenant's partition. Its RowKey starts with the name in lower case,
/// so a prefix of a name is a range of rows.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "NAME")]
pub struct NameEntry {
    /// The tenant's partition, as stored (the change feed names it so).
    #[tablekit(partition_key)]
    pub partition: Verbatim,
    /// The name in lower case, `|`, and the customer's stored RowKey.
    #[tablekit(row_key)]
    pub key: String,
    /// The customer's id.
    pub id: String,
    /// The customer's name, as written.
    pub name: String,
    /// The customer's city.
    pub city: String,
}

/// Where a customer's [`NameEntry`] is, by the customer's stored RowKey:
/// written with the entry in one transaction, so the projection finds the
/// entry to replace when the name changes, and to delete with the customer.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "NAMEOF")]
pub struct NamePointer {
    /// The tenant's partition, as stored.
    #[tablekit(partition_key)]
    pub partition: Verbatim,
    /// The customer's stored RowKey.
    #[tablekit(row_key)]
    pub customer: Verbatim,
    /// The RowKey field of its name entry.
    pub key: String,
}

/// The row an order touches in its transaction, beside its customer: made
/// with the customer and deleted with it, so that an order placed while its
/// customer is deleted cannot outlive it, while the customer's own ETag
/// moves only when the customer changes (an edit guarded by `If-Match`
/// still holds after an order). A customer written before guards were kept
/// is given one by its next order.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "CGUARD")]
pub struct CustomerGuard {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The customer's id within the tenant.
    #[tablekit(row_key)]
    pub id: String,
}

/// An order of a customer: the head of a collection of lines.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "ORD", collection)]
pub struct Order {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The customer.
    #[tablekit(row_key)]
    pub customer: String,
    /// The order's number.
    #[tablekit(row_key)]
    pub number: u32,
    /// When it was placed.
    pub placed: DateTime,
    /// Its total, in cents.
    pub total_cents: i64,
}

/// A line of an order, stored right after it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "LINE", parent = Order)]
pub struct Line {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The customer.
    #[tablekit(row_key)]
    pub customer: String,
    /// The order.
    #[tablekit(row_key)]
    pub number: u32,
    /// The line's number within the order.
    #[tablekit(row_key)]
    pub line: u32,
    /// What was bought.
    pub sku: String,
    /// How many.
    pub quantity: i32,
    /// The price of one, in cents.
    pub price_cents: i64,
}

/// The rows of an order's collection: read with one range query.
#[derive(EntityKinds, Debug, Clone)]
pub enum OrderRows {
    /// The order.
    Order(Order),
    /// One of its lines.
    Line(Line),
}

/// A user of a tenant, in a partition of its own (`tenant|user`).
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "USER")]
pub struct User {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The user.
    #[tablekit(partition_key)]
    pub user: String,
    /// The user's display name.
    pub name: String,
}

/// One event of a user's activity feed, read newest first.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "ACT")]
pub struct Activity {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The user.
    #[tablekit(partition_key)]
    pub user: String,
    /// When it happened: newest first.
    #[tablekit(row_key)]
    pub at: InvertedTime,
    /// Tells apart events of the same tick.
    #[tablekit(row_key)]
    pub nonce: u32,
    /// What happened.
    pub text: String,
}

/// A file attached to a customer; its bytes live in the blob store.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "ATT")]
pub struct Attachment {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// The customer.
    #[tablekit(row_key)]
    pub customer: String,
    /// The file's name.
    #[tablekit(row_key)]
    pub name: String,
    /// Its media type.
    pub content_type: String,
    /// Its bytes.
    #[tablekit(blob)]
    pub content: Vec<u8>,
    /// The [incarnation](Customer::incarnation) of the customer it was
    /// attached to: served only while that customer is the one of its id.
    #[tablekit(default)]
    pub incarnation: String,
}

/// One write the service made, in the table of its day.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Audit", kind = "AUD", buckets = "day")]
pub struct AuditEntry {
    /// The tenant.
    #[tablekit(partition_key)]
    pub tenant: String,
    /// When.
    #[tablekit(row_key)]
    #[tablekit(bucket)]
    pub at: DateTime,
    /// The request's id.
    #[tablekit(row_key)]
    pub request: String,
    /// What was done (`POST /tenants/acme/customers`).
    pub action: String,
    /// The answer's status code.
    pub status: i32,
}

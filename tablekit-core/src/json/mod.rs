//! The JSON wire form of an entity (OData v3, `minimalmetadata`), as the Table
//! service reads and writes it.
//!
//! Writing follows the advice in the service's payload-format reference and the
//! official SDKs: a JSON string or `true`/`false` is read back as String or
//! Boolean and needs no annotation, an integer JSON number is Int32; every other
//! type carries a `Name@odata.type` annotation, Int64 travels as a string of
//! digits, and doubles are always annotated (Azurite would otherwise turn an
//! integral double such as `1.0` into an Int32). Non-finite doubles are the
//! annotated strings `"NaN"`, `"Infinity"` and `"-Infinity"`.
//!
//! Reading accepts the minimal-metadata responses of the service and Azurite:
//! `odata.etag` becomes the ETag, `Timestamp` the timestamp, other `odata.*`
//! members are ignored, `null` means absent.
//!
//! Two readers, by what a text is:
//! - a **document**, to be written ([`from_str`], and
//!   `tablekit::schema::from_json` for a typed value), is
//!   taken only if tablekit could have written it: keys, names, values, the
//!   number of properties and the entity's size are checked as a write checks
//!   them, so what is read can be written back;
//! - a **row as a store sent it** ([`row_from_str`], [`entities_from_str`]) is
//!   checked only by the JSON's own rules. A store's limits are the store's
//!   to keep, and some keep less than the service: Azurite stores property
//!   names the service refuses, and such a row must stay readable.
//!
//! Typed entities skip the [`Entity`](crate::Entity): [`EntityWriter`] writes the text
//! straight from their fields (`tablekit::schema::to_json`),
//! and `tablekit::schema::from_json` reads each member
//! into its field.
//!
//! ```
//! use tablekit::{json, Entity};
//! let e = Entity::new("p", "r1").with("I64", 9_223_372_036_854_775_807_i64);
//! let text = json::to_string(&e);
//! assert_eq!(text, r#"{"PartitionKey":"p","RowKey":"r1","I64":"9223372036854775807","I64@odata.type":"Edm.Int64"}"#);
//! assert_eq!(json::from_str(&text)?, e);
//! # Ok::<(), tablekit::InvalidInput>(())
//! ```

mod members;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use members::{UndecodableRow, value_from_json};
#[doc(hidden)]
pub use read::{SlotBuffer, fields_from_str, members_from_str, row_from_json};
pub use read::{entities_from_str, from_json, from_str, row_from_str};
pub use write::{
    EntityWriter, encoded_len, encoded_len_bound, to_json, to_string, value_to_json, write,
};

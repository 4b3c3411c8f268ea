//! Collections: related kinds side by side in one RowKey range.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::unique_table;
use tablekit::TableBackendExt;
use tablekit::backend::TableBackend;
use tablekit::layer::{FaultInjection, Operation};
use tablekit::schema::UnknownKind;
use tablekit::table::{Loaded, Table};

/// A customer, the head of a collection.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Shop", kind = "C", collection)]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: String,
    name: String,
}

/// An order, nested under its customer and heading its lines.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit( table = "Shop", kind = "ORD", parent = Customer, collection)]
struct Order {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key = 0)]
    customer: String,
    #[tablekit(row_key = 1)]
    order: u32,
    total: i64,
}

/// A line of an order.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit( table = "Shop", kind = "LINE", parent = Order)]
struct Line {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key = 0)]
    customer: String,
    #[tablekit(row_key = 1)]
    order: u32,
    #[tablekit(row_key = 2)]
    line: u16,
    sku: String,
}

/// A note on a customer: one per customer, no key of its own.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit( table = "Shop", kind = "NOTE", parent = Customer)]
struct Note {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: String,
    text: String,
}

#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]

enum CustomerRows {
    Customer(Customer),
    Order(Order),
    Line(Line),
    Note(Note),
}

/// Customers whose keys start alike: none of their collections may reach
/// another's.
const CUSTOMERS: [&str; 6] = ["acme", "acme2", "acme corp", "acme|eu", "acme/eu", "50%"];

/// Every customer of [`CUSTOMERS`] in partition `t1`, each with a note, two
/// orders and two lines per order, written in reverse key order.
async fn write_customers(
    customers: &Table<Customer>,
    orders: &Table<Order>,
    lines: &Table<Line>,
    notes: &Table<Note>,
) {
    for customer in CUSTOMERS {
        let c = customer.to_string();
        customers
            .insert(&Customer {
                tenant: "t1".into(),
                customer: c.clone(),
                name: format!("{customer} Ltd"),
            })
            .await
            .expect("insert customer");
        notes
            .insert(&Note {
                tenant: "t1".into(),
                customer: c.clone(),
                text: "pays late".into(),
            })
            .await
            .expect("insert note");
        for order in [2u32, 1] {
            orders
                .insert(&Order {
                    tenant: "t1".into(),
                    customer: c.clone(),
                    order,
                    total: i64::from(order) * 100,
                })
                .await
                .expect("insert order");
            for line in [1u16, 0] {
                lines
                    .insert(&Line {
                        tenant: "t1".into(),
                        customer: c.clone(),
                        order,
                        line,
                        sku: format!("{customer}-{order}-{line}"),
                    })
                    .await
                    .expect("insert line");
            }
        }
    }
}

/// Point reads, writes and deletes address each kind's own row: an order
/// replaced leaves its customer and note as they were, a line deleted
/// leaves its order's collection with the order and one line.
async fn points_address_their_own_row(
    customers: &Table<Customer>,
    orders: &Table<Order>,
    lines: &Table<Line>,
    notes: &Table<Note>,
) {
    let kinds = customers.of::<CustomerRows>();
    let mut order = orders
        .get("t1", ("acme corp", 2u32))
        .await
        .expect("get order")
        .expect("stored");
    order.total += 1;
    orders.replace(&mut order).await.expect("replace order");
    assert!(
        customers
            .get("t1", "acme corp")
            .await
            .expect("get customer")
            .is_some_and(|c| c.name == "acme corp Ltd")
    );
    assert!(
        notes
            .get("t1", "acme corp")
            .await
            .expect("get note")
            .is_some()
    );
    lines
        .delete_unconditionally("t1", ("acme corp", 2u32, 1u16))
        .await
        .expect("delete line");
    let left: Vec<Loaded<CustomerRows>> = kinds
        .read_collection::<Order>("t1", ("acme corp", 2u32), UnknownKind::Fail)
        .try_collect()
        .await
        .expect("order collection");
    assert_eq!(left.len(), 2);
    assert!(matches!(&*left[0], CustomerRows::Order(o) if o.total == 201));
}

/// In partition `t1`, each kind's queries see that kind only: customers,
/// orders (all, one customer's by prefix, a range), and one order's lines.
async fn queries_see_their_kind_only(
    customers: &Table<Customer>,
    orders: &Table<Order>,
    lines: &Table<Line>,
) {
    let all_customers = customers
        .query()
        .partition("t1")
        .collect()
        .await
        .expect("customers");
    assert_eq!(all_customers.len(), CUSTOMERS.len());
    let all_orders = orders
        .query()
        .partition("t1")
        .collect()
        .await
        .expect("orders");
    assert_eq!(all_orders.len(), 2 * CUSTOMERS.len());
    let acme_orders = orders
        .query()
        .partition("t1")
        .row_prefix(("acme",))
        .collect()
        .await
        .expect("orders of acme");
    let numbers: Vec<(String, u32)> = acme_orders
        .iter()
        .map(|o| (o.customer.clone(), o.order))
        .collect();
    assert_eq!(numbers, [("acme".into(), 1), ("acme".into(), 2)]);
    let first = orders
        .query()
        .partition("t1")
        .rows(("acme|eu".to_string(), 0)..("acme|eu".to_string(), 2))
        .collect()
        .await
        .expect("a range of orders");
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].customer.as_str(), first[0].order), ("acme|eu", 1));
    let all_lines = lines
        .query()
        .partition("t1")
        .row_prefix(("acme/eu", 2u32))
        .collect()
        .await
        .expect("lines of one order");
    assert_eq!(all_lines.len(), 2);
}

/// A customer with its note, orders and lines, written through the typed
/// API: a collection is read with one range query, in tree order (each row
/// right before the rows nested under it), never reaching a customer whose
/// key starts alike; each kind's own queries see only that kind; the keys
/// read as a person would write them.
pub async fn collections_read_related_kinds_in_one_range(backend: Arc<dyn TableBackend>) {
    let name = unique_table("collections");
    let counted = Arc::new(FaultInjection::new(Arc::clone(&backend)));
    let calls = counted.handle();
    let customers: Table<Customer> =
        Table::from_arc(Arc::clone(&counted) as Arc<dyn TableBackend>, &name);
    customers.create_if_missing().await.expect("create table");
    let (orders, lines, notes) = (
        customers.of::<Order>(),
        customers.of::<Line>(),
        customers.of::<Note>(),
    );
    write_customers(&customers, &orders, &lines, &notes).await;
    let whole_pages = stored_as_one_range(&*backend, &name).await;

    let kinds = customers.of::<CustomerRows>();
    for customer in CUSTOMERS {
        let before = calls.calls(Operation::QueryEntities);
        let rows: Vec<Loaded<CustomerRows>> = kinds
            .read_collection::<Customer>("t1", customer, UnknownKind::Fail)
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("collection of {customer:?}: {e}"));
        if whole_pages {
            assert_eq!(
                calls.calls(Operation::QueryEntities) - before,
                1,
                "one range query reads a collection of {customer:?}"
            );
        }
        let shape: Vec<String> = rows
            .iter()
            .map(|row| match &**row {
                CustomerRows::Customer(c) => format!("C {}", c.customer),
                CustomerRows::Note(n) => format!("NOTE {}", n.customer),
                CustomerRows::Order(o) => format!("ORD {} {}", o.customer, o.order),
                CustomerRows::Line(l) => format!("LINE {} {} {}", l.customer, l.order, l.line),
            })
            .collect();
        let c = customer;
        assert_eq!(
            shape,
            [
                format!("C {c}"),
                format!("NOTE {c}"),
                format!("ORD {c} 1"),
                format!("LINE {c} 1 0"),
                format!("LINE {c} 1 1"),
                format!("ORD {c} 2"),
                format!("LINE {c} 2 0"),
                format!("LINE {c} 2 1"),
            ],
            "the collection of {customer:?}"
        );
        // An order's own collection: the order and its lines.
        let order: Vec<Loaded<CustomerRows>> = kinds
            .read_collection::<Order>("t1", (customer, 2u32), UnknownKind::Fail)
            .try_collect()
            .await
            .expect("order collection");
        assert_eq!(order.len(), 3);
        assert!(matches!(&*order[0], CustomerRows::Order(o) if o.total == 200));
    }

    // Each kind's queries see that kind only.
    queries_see_their_kind_only(&customers, &orders, &lines).await;

    // Point reads, writes and deletes address each kind's own row.
    points_address_their_own_row(&customers, &orders, &lines, &notes).await;

    // The whole partition, typed by kind.
    let partition: Vec<Loaded<CustomerRows>> = kinds
        .read_partition("t1", UnknownKind::Fail)
        .try_collect()
        .await
        .expect("partition");
    assert_eq!(partition.len(), 8 * CUSTOMERS.len() - 1);
    backend.delete_table(&name).await.expect("delete table");
}

/// The collection's rows are stored as one range, in the order a storage
/// browser shows them. Whether the backend answers that range in one page.
async fn stored_as_one_range(backend: &dyn TableBackend, name: &str) -> bool {
    // The keys as a storage browser shows them.
    let range = tablekit::Query::new().filter(
        tablekit::filter::Filter::row_key().ge("C_acme|")
            & tablekit::filter::Filter::row_key().lt("C_acme}"),
    );
    // A backend that splits its answers into short pages (as the service
    // may) takes more than one request for any query.
    let whole_pages = backend
        .query_entities(name, &range)
        .await
        .expect("raw query")
        .continuation
        .is_none();
    let raw: Vec<String> = backend
        .query_all(name, range)
        .await
        .expect("raw query")
        .into_iter()
        .map(|row| row.row_key)
        .collect();
    assert_eq!(
        raw,
        [
            "C_acme|",
            "C_acme|NOTE_",
            "C_acme|ORD_0000000001",
            "C_acme|ORD_0000000001_LINE_00000",
            "C_acme|ORD_0000000001_LINE_00001",
            "C_acme|ORD_0000000002",
            "C_acme|ORD_0000000002_LINE_00000",
            "C_acme|ORD_0000000002_LINE_00001",
        ]
    );
    whole_pages
}

/// The seed's employee and reviews: an employee and every review of theirs,
/// by year, form one range.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP", collection)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit( table = "Staff", kind = "REV", parent = Employee)]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    year: u16,
    rating: i32,
}

#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]

enum EmployeeRows {
    Employee(Employee),
    Review(Review),
}

/// An employee and their reviews by year, read with one range query, and
/// stored under keys a person reads (`EMP_0000000223_REV_02012`).
pub async fn employee_and_reviews_form_one_range(backend: Arc<dyn TableBackend>) {
    let name = unique_table("staffreviews");
    let staff: Table<Employee> = Table::from_arc(Arc::clone(&backend), &name);
    staff.create_if_missing().await.expect("create table");
    let reviews = staff.of::<Review>();
    for id in [223u32, 22, 2230] {
        staff
            .insert(&Employee {
                department: "Sales".into(),
                id,
                name: format!("employee {id}"),
            })
            .await
            .expect("insert employee");
        for year in [2012u16, 2011, 2013] {
            reviews
                .insert(&Review {
                    department: "Sales".into(),
                    employee: id,
                    year,
                    rating: i32::from(year % 5),
                })
                .await
                .expect("insert review");
        }
    }
    let stored = backend
        .get_entity(
            &name,
            "Sales",
            "EMP_0000000223_REV_02012",
            &Default::default(),
        )
        .await
        .expect("a review under its readable key");
    assert_eq!(
        stored.properties.get("rating"),
        Some(&tablekit::Value::Int32(2))
    );
    let rows: Vec<Loaded<EmployeeRows>> = staff
        .of::<EmployeeRows>()
        .read_collection::<Employee>("Sales", 223u32, UnknownKind::Fail)
        .try_collect()
        .await
        .expect("collection");
    let read: Vec<String> = rows
        .iter()
        .map(|row| match &**row {
            EmployeeRows::Employee(e) => format!("EMP {}", e.id),
            EmployeeRows::Review(r) => format!("REV {} {}", r.employee, r.year),
        })
        .collect();
    assert_eq!(
        read,
        ["EMP 223", "REV 223 2011", "REV 223 2012", "REV 223 2013"]
    );
    let recent = reviews
        .query()
        .partition("Sales")
        .rows((223u32, 2012u16)..)
        .collect()
        .await
        .expect("reviews from 2012");
    let years: Vec<(u32, u16)> = recent.iter().map(|r| (r.employee, r.year)).collect();
    assert_eq!(
        years,
        [
            (223, 2012),
            (223, 2013),
            (2230, 2011),
            (2230, 2012),
            (2230, 2013)
        ]
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// A row in a collection kind's RowKey range that lacks `_Kind` (written by
/// another program) is read by a typed query the way a point read reads it:
/// as the kind when it decodes, as a row error under the query's policy when
/// it does not, and never left out unseen. Rows that name another kind stay
/// out.
pub async fn collection_rows_without_a_kind_are_read_like_get(backend: Arc<dyn TableBackend>) {
    let name = unique_table("kindless");
    let staff: Table<Employee> = Table::from_arc(Arc::clone(&backend), &name);
    staff.create_if_missing().await.expect("create table");
    staff
        .insert(&Employee {
            department: "Sales".into(),
            id: 1,
            name: "typed".into(),
        })
        .await
        .expect("insert employee");
    staff
        .of::<Review>()
        .insert(&Review {
            department: "Sales".into(),
            employee: 1,
            year: 2020,
            rating: 4,
        })
        .await
        .expect("insert review");
    // Written by someone else: no `_Kind`, one readable, one without a field.
    let mut readable = tablekit::Entity::new("Sales", "EMP_0000000002");
    readable.properties.insert("name", "foreign");
    backend
        .insert_entity(&name, &readable)
        .await
        .expect("insert a row without _Kind");
    let mut unreadable = tablekit::Entity::new("Sales", "EMP_0000000003");
    unreadable.properties.insert("title", "no name");
    backend
        .insert_entity(&name, &unreadable)
        .await
        .expect("insert a row without _Kind or name");

    let got = staff
        .get("Sales", 2u32)
        .await
        .expect("point read")
        .expect("the row without _Kind");
    assert_eq!(got.name, "foreign");
    assert!(
        staff.get("Sales", 3u32).await.is_err(),
        "a point read refuses the row without its field"
    );

    let yielded: Vec<tablekit::Result<Loaded<Employee>>> = staff
        .query()
        .partition("Sales")
        .on_row_error(tablekit::table::RowErrors::Yield)
        .stream()
        .collect()
        .await;
    let read: Vec<Result<(u32, String), String>> = yielded
        .iter()
        .map(|row| match row {
            Ok(e) => Ok((e.id, e.name.clone())),
            Err(e) => Err(e.to_string()),
        })
        .collect();
    assert_eq!(read.len(), 3, "{read:?}");
    assert_eq!(read[0], Ok((1, "typed".into())));
    assert_eq!(read[1], Ok((2, "foreign".into())));
    let error = read[2].as_ref().expect_err("the row without its field");
    assert!(error.contains("EMP_0000000003"), "{error}");

    let failed = staff.query().partition("Sales").collect().await;
    assert!(failed.is_err(), "the default policy fails on that row");
    let skipped = tablekit::table::SkippedRows::default();
    let kept = staff
        .query()
        .partition("Sales")
        .on_row_error(tablekit::table::RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .expect("skip");
    assert_eq!(kept.len(), 2);
    assert_eq!(skipped.count(), 1);
    backend.delete_table(&name).await.expect("delete table");
}

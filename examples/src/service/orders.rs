//! Orders and their lines: one collection, written in one transaction.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};
use tablekit::{DateTime, Error, Loaded, UnknownKind};

use super::App;
use super::audit::{WriteAudit, audited};
use super::error::{ApiError, ApiResult};
use super::http::{ATTEMPTS, Body, Page, PageParams, check, page};
use super::model::{CustomerGuard, Line, Order, OrderRows};

#[derive(Deserialize)]
#[serde(expecting = "an order: an object with `number` and `lines`")]
pub(super) struct OrderBody {
    number: u32,
    lines: Vec<LineBody>,
}

#[derive(Deserialize)]
#[serde(expecting = "a line: an object with `sku`, `quantity` and `price_cents`")]
pub(super) struct LineBody {
    sku: String,
    quantity: i32,
    price_cents: i64,
}

/// The most lines an order has: the order, its lines, the touch of its
/// customer's guard and the request's audit entry are written in one
/// transaction, of at most 100 operations.
pub(super) const MAX_LINES: usize = 97;

pub(super) fn order_json(order: &Order, lines: &[Line]) -> JsonValue {
    json!({
        "number": order.number,
        "placed": order.placed.to_string(),
        "total_cents": order.total_cents,
        "lines": lines.iter().map(|l| json!({
            "line": l.line, "sku": l.sku, "quantity": l.quantity, "price_cents": l.price_cents,
        })).collect::<Vec<_>>(),
    })
}

pub(super) async fn post_order(
    State(app): State<App>,
    Path((tenant, customer)): Path<(String, String)>,
    audit: WriteAudit,
    Body(body): Body<OrderBody>,
) -> ApiResult<Response> {
    check(
        (1..=MAX_LINES).contains(&body.lines.len()),
        "an order has 1 to 97 lines (the order, its lines, the guard on its customer and the audit entry go in one transaction of at most 100 operations)",
    )?;
    for line in &body.lines {
        check(
            line.quantity > 0 && line.price_cents >= 0,
            "quantities are positive and prices not negative",
        )?;
        check(!line.sku.is_empty(), "sku must not be empty")?;
    }
    let total = body.lines.iter().try_fold(0i64, |sum, l| {
        l.price_cents
            .checked_mul(i64::from(l.quantity))
            .and_then(|n| sum.checked_add(n))
    });
    let total = total.ok_or_else(|| ApiError::BadRequest("the total overflows".into()))?;
    let order = Order {
        tenant: tenant.clone(),
        customer: customer.clone(),
        number: body.number,
        placed: DateTime::now(),
        total_cents: total,
    };
    let lines: Vec<Line> = body
        .lines
        .into_iter()
        .zip(1u32..)
        .map(|(l, line)| Line {
            tenant: tenant.clone(),
            customer: customer.clone(),
            number: body.number,
            line,
            sku: l.sku,
            quantity: l.quantity,
            price_cents: l.price_cents,
        })
        .collect();
    // The order and its lines: one transaction, all or nothing, which also
    // touches the customer's guard under the ETag read: if the customer is
    // deleted meanwhile, the order is not placed (or is tried again), and a
    // delete of the customer sees the order. The customer's own row, and
    // so its ETag, is left as it is.
    let mut placed = None;
    for _ in 0..ATTEMPTS {
        let Some(guard) = app.guards.get(tenant.as_str(), customer.as_str()).await? else {
            give_guard(&app, &tenant, &customer).await?;
            continue;
        };
        let mut transaction = app.orders.transaction();
        transaction.push_raw(touch(&guard)?);
        transaction.insert(&order)?;
        for line in &lines {
            transaction.insert(line)?;
        }
        audit
            .record(&app, &mut transaction, StatusCode::CREATED)
            .await?;
        match transaction.submit().await {
            Ok(etags) => {
                placed = Some(etags);
                break;
            }
            Err(Error::BatchFailed { index: 0, source })
                if matches!(*source, Error::PreconditionFailed { .. }) => {}
            Err(Error::BatchFailed { index: 0, source })
                if matches!(*source, Error::EntityNotFound { .. }) =>
            {
                return Err(ApiError::NotFound);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut etags = placed.ok_or_else(|| {
        ApiError::Status(
            StatusCode::CONFLICT,
            "busy",
            "the customer kept changing; try again".into(),
        )
    })?;
    etags.remove(0);
    let mut response = (StatusCode::CREATED, Json(order_json(&order, &lines))).into_response();
    if let Some(Some(etag)) = etags.first()
        && let Ok(value) = HeaderValue::from_str(etag.as_str())
    {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(audited(response))
}

/// A merge of nothing into `row` under its ETag: the row stays as it is,
/// its ETag moves, and the transaction fails if the row changed or went.
fn touch<T: tablekit::TableEntity>(row: &Loaded<T>) -> ApiResult<tablekit::BatchOperation> {
    Ok(tablekit::BatchOperation::Update {
        entity: tablekit::Entity::new(
            tablekit::schema::partition_key_of(&**row)?,
            tablekit::schema::row_key_of(&**row)?,
        ),
        mode: tablekit::UpdateMode::Merge,
        if_match: tablekit::IfMatch::ETag(Loaded::etag(row).clone()),
    })
}

/// Gives a customer written before guards were kept its guard, in a
/// transaction that touches the customer under the ETag read (so that a
/// delete under way sees it, and goes round again). A lost race (the
/// customer changed or went, another order gave the guard) is left to the
/// caller's next round; a missing customer is 404.
async fn give_guard(app: &App, tenant: &str, customer: &str) -> ApiResult<()> {
    let owner = app
        .customers
        .get(tenant, customer)
        .await?
        .ok_or(ApiError::NotFound)?;
    let mut transaction = app.customers.transaction();
    transaction.push_raw(touch(&owner)?);
    transaction.insert(&CustomerGuard {
        tenant: tenant.to_owned(),
        id: customer.to_owned(),
    })?;
    match transaction.submit().await {
        Ok(_) => Ok(()),
        Err(Error::BatchFailed { source, .. })
            if matches!(
                *source,
                Error::PreconditionFailed { .. }
                    | Error::EntityNotFound { .. }
                    | Error::EntityAlreadyExists { .. }
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn get_order(
    State(app): State<App>,
    Path((tenant, customer, number)): Path<(String, String, u32)>,
) -> ApiResult<Json<JsonValue>> {
    // The order and its lines are one range: one query.
    let rows: Vec<Loaded<OrderRows>> = app
        .orders
        .of::<OrderRows>()
        .read_collection::<Order>(
            tenant.as_str(),
            (customer.as_str(), number),
            UnknownKind::Skip,
        )
        .try_collect()
        .await?;
    let mut order = None;
    let mut lines = Vec::new();
    for row in rows {
        match Loaded::into_inner(row) {
            OrderRows::Order(o) => order = Some(o),
            OrderRows::Line(l) => lines.push(l),
        }
    }
    let order = order.ok_or(ApiError::NotFound)?;
    Ok(Json(order_json(&order, &lines)))
}

pub(super) async fn list_orders(
    State(app): State<App>,
    Path((tenant, customer)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app
        .orders
        .query()
        .partition(tenant.as_str())
        .row_prefix((customer.as_str(),));
    page(query, &params, |o| order_json(o, &[])).await
}

//! Customers: create, read, replace, delete (with their orders and
//! attachments), list, and find by email or city.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};
use tablekit::{Error, Loaded, TableEntity as _, UnknownKind};

use super::App;
use super::audit::{WriteAudit, audited};
use super::error::{ApiError, ApiResult};
use super::http::{ATTEMPTS, Body, Page, PageParams, check, if_match, page, segment, with_etag};
use super::model::{Attachment, Customer, CustomerGuard, Line, Order, OrderRows};

#[derive(Deserialize)]
#[serde(expecting = "a customer: an object with `name`, `email`, `city` and, to create one, `id`")]
pub(super) struct CustomerBody {
    id: Option<String>,
    name: String,
    email: String,
    city: String,
}

impl CustomerBody {
    fn check(&self) -> ApiResult<()> {
        check(!self.name.trim().is_empty(), "name must not be empty")?;
        check(
            self.email.contains('@') && !self.email.contains('/'),
            "email must be an address",
        )?;
        check(!self.city.trim().is_empty(), "city must not be empty")
    }
}

pub(super) fn customer_json(c: &Customer) -> JsonValue {
    json!({ "id": c.id, "name": c.name, "email": c.email.as_str(), "city": c.city })
}

pub(super) async fn post_customer(
    State(app): State<App>,
    Path(tenant): Path<String>,
    audit: WriteAudit,
    Body(body): Body<CustomerBody>,
) -> ApiResult<Response> {
    body.check()?;
    let id = body
        .id
        .clone()
        .ok_or_else(|| ApiError::BadRequest("id is required".into()))?;
    check(!id.is_empty(), "id must not be empty")?;
    super::search::check_searchable(&tenant, &id, &body.name)?;
    let customer = Customer {
        tenant,
        id,
        name: body.name,
        email: body.email.into(),
        city: body.city,
        incarnation: new_incarnation(),
    };
    let mut transaction = app.customers.transaction();
    transaction.insert(&customer)?;
    transaction.upsert(&CustomerGuard {
        tenant: customer.tenant.clone(),
        id: customer.id.clone(),
    })?;
    audit
        .record(&app, &mut transaction, StatusCode::CREATED)
        .await?;
    let etag = first_etag(transaction.submit().await?)?;
    let mut response = with_etag(&etag, customer_json(&customer), StatusCode::CREATED);
    let location = format!(
        "/tenants/{}/customers/{}",
        segment(&customer.tenant),
        segment(&customer.id)
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(audited(response))
}

/// The ETag of a transaction's first write (an insert or a replace has one).
pub(super) fn first_etag(etags: Vec<Option<tablekit::ETag>>) -> ApiResult<tablekit::ETag> {
    etags.into_iter().next().flatten().ok_or_else(|| {
        ApiError::Store(Error::Decode {
            message: "the store answered a write without its ETag".into(),
        })
    })
}

/// A text no earlier customer of the same id had: 128 random bits.
fn new_incarnation() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

pub(super) async fn get_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let found = app
        .customers
        .get(tenant.as_str(), id.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(with_etag(
        Loaded::etag(&found),
        customer_json(&found),
        StatusCode::OK,
    ))
}

pub(super) async fn put_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
    headers: HeaderMap,
    audit: WriteAudit,
    Body(body): Body<CustomerBody>,
) -> ApiResult<Response> {
    body.check()?;
    super::search::check_searchable(&tenant, &id, &body.name)?;
    if body.id.as_ref().is_some_and(|given| *given != id) {
        return Err(ApiError::BadRequest(
            "the body's id is not the path's".into(),
        ));
    }
    // The version read keeps what the body does not give (the customer's
    // incarnation). With If-Match, the write is guarded by the client's
    // ETag; without, by the ETag of the version read here, and a write that
    // lost a race with another one reads again and writes over it (the
    // client asked for no condition).
    let condition = if_match(&headers)?;
    let attempts = if condition.is_absent() { ATTEMPTS } else { 1 };
    for _ in 0..attempts {
        let current = app
            .customers
            .get(tenant.as_str(), id.as_str())
            .await?
            .ok_or(ApiError::NotFound)?;
        let customer = Customer {
            tenant: tenant.clone(),
            id: id.clone(),
            name: body.name.clone(),
            email: body.email.clone().into(),
            city: body.city.clone(),
            incarnation: current.incarnation.clone(),
        };
        let etag = condition
            .guard(Some(Loaded::etag(&current)))?
            .unwrap_or_else(|| Loaded::etag(&current).clone());
        // What the stored row holds beyond the type's fields is kept.
        let mut loaded = current;
        *loaded = customer;
        Loaded::set_etag(&mut loaded, etag);
        let mut transaction = app.customers.transaction();
        transaction.replace(&loaded)?;
        audit.record(&app, &mut transaction, StatusCode::OK).await?;
        match transaction.submit().await {
            Ok(etags) => {
                return Ok(audited(with_etag(
                    &first_etag(etags)?,
                    customer_json(&loaded),
                    StatusCode::OK,
                )));
            }
            Err(Error::BatchFailed { source, .. })
                if condition.is_absent() && matches!(*source, Error::PreconditionFailed { .. }) => {
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Status(
        StatusCode::CONFLICT,
        "busy",
        "the customer kept changing while it was being written; try again".into(),
    ))
}

/// Deletes a customer with everything under it: its attachments (each with
/// its blob), then its orders and their lines, the last of them in one
/// transaction with the customer itself, guarded by the customer's ETag.
/// Every order is placed in a transaction that also touches the customer's
/// row (see [`post_order`]), so an order placed while the delete runs
/// changes that ETag: the delete then reads again and takes it too, and no
/// order outlives its customer.
pub(super) async fn delete_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
    headers: HeaderMap,
    audit: WriteAudit,
) -> ApiResult<Response> {
    let given = if_match(&headers)?;
    for _ in 0..ATTEMPTS {
        let current = app
            .customers
            .get(tenant.as_str(), id.as_str())
            .await?
            .ok_or(ApiError::NotFound)?;
        given.guard(Some(Loaded::etag(&current)))?;
        // The guard orders touch: deleted last, under the ETag read here,
        // so that an order placed meanwhile sends the delete round again.
        let guard = app.guards.get(tenant.as_str(), id.as_str()).await?;
        let attachments: Vec<Loaded<Attachment>> = app
            .attachments
            .query()
            .partition(tenant.as_str())
            .row_prefix((id.as_str(),))
            .collect()
            .await?;
        for attachment in &attachments {
            match app.attachments.delete(attachment).await {
                Ok(()) | Err(Error::EntityNotFound { .. } | Error::PreconditionFailed { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The orders and their lines, as keys.
        let orders: Vec<Loaded<Order>> = app
            .orders
            .query()
            .partition(tenant.as_str())
            .row_prefix((id.as_str(),))
            .collect()
            .await?;
        let mut rows: Vec<(u32, Option<u32>)> = Vec::new();
        for order in &orders {
            rows.push((order.number, None));
            let lines: Vec<Loaded<OrderRows>> = app
                .orders
                .of::<OrderRows>()
                .read_collection::<Order>(
                    tenant.as_str(),
                    (id.as_str(), order.number),
                    UnknownKind::Skip,
                )
                .try_collect()
                .await?;
            rows.extend(lines.iter().filter_map(|row| match &**row {
                OrderRows::Line(line) => Some((line.number, Some(line.line))),
                OrderRows::Order(_) => None,
            }));
        }
        // A transaction holds 100 rows: the customer and its index rows
        // take a few.
        let (rest, last) = rows.split_at(rows.len().saturating_sub(90));
        // Each transaction carries the request's entry: a delete stopped
        // half way is audited for what it deleted.
        for chunk in rest.chunks(90) {
            let mut transaction = app.orders.transaction();
            for row in chunk {
                delete_order_row(&mut transaction, &tenant, &id, *row)?;
            }
            audit
                .record(&app, &mut transaction, StatusCode::NO_CONTENT)
                .await?;
            transaction.submit().await?;
        }
        let mut transaction = app.orders.transaction();
        for row in last {
            delete_order_row(&mut transaction, &tenant, &id, *row)?;
        }
        transaction.delete(&current)?;
        if let Some(guard) = &guard {
            transaction.delete(guard)?;
        }
        audit
            .record(&app, &mut transaction, StatusCode::NO_CONTENT)
            .await?;
        match transaction.submit().await {
            Ok(_) => return Ok(audited(StatusCode::NO_CONTENT.into_response())),
            // An order placed meanwhile changed the guard (or the customer
            // was changed): again (an If-Match that named the version read
            // then refuses it).
            Err(Error::BatchFailed { source, .. })
                if matches!(*source, Error::PreconditionFailed { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Status(
        StatusCode::CONFLICT,
        "busy",
        "the customer kept changing while it was being deleted; try again".into(),
    ))
}

/// Adds the delete of an order (`line` is `None`) or one of its lines.
pub(super) fn delete_order_row(
    transaction: &mut tablekit::Transaction,
    tenant: &str,
    customer: &str,
    (number, line): (u32, Option<u32>),
) -> ApiResult<()> {
    match line {
        None => transaction.delete_unconditionally::<Order>(tenant, (customer, number))?,
        Some(line) => {
            transaction.delete_unconditionally::<Line>(tenant, (customer, number, line))?
        }
    };
    Ok(())
}

pub(super) async fn list_customers(
    State(app): State<App>,
    Path(tenant): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app.customers.query().partition(tenant.as_str());
    page(query, &params, customer_json).await
}

pub(super) async fn customer_by_email(
    State(app): State<App>,
    Path((tenant, email)): Path<(String, String)>,
) -> ApiResult<Json<JsonValue>> {
    let found = app
        .customers
        .index(Customer::indexes().email)
        .get(tenant.as_str(), email.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(customer_json(&found)))
}

pub(super) async fn customers_by_city(
    State(app): State<App>,
    Path((tenant, city)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let found = app
        .customers
        .remote_index(Customer::indexes().city)
        .find_page(
            tenant.as_str(),
            city.as_str(),
            params.limit(),
            params.cursor()?.as_ref(),
        )
        .await?;
    Ok(Json(Page {
        items: found.items.iter().map(customer_json).collect(),
        next: found.next.map(|c| c.to_string()),
    }))
}

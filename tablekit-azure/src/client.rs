//! The HTTP client: `TableBackend` over the Table service's REST API.

use std::sync::Arc;
use std::time::SystemTime;

use crate::transport::Method;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use tablekit_core::{
    BatchOperation, ETag, Entity, EntityWrite, Error, GetOptions, IfMatch, ListTablesOptions,
    Query, QueryOrder, QueryPage, Result, TableBackend, TablePage, UndecodableRow, UpdateMode,
    json, validate,
};

use crate::auth;
use crate::batch::{self, BatchOutcome};
use crate::config::{Account, ClientOptions, ConfigError, Credentials};
use crate::errors::{self, Target};
use crate::policy::{self, Idempotence, RetryPolicy, SasRange};
use crate::transport::{Failure, Route, Signing};
use crate::url;

/// The service version spoken (JSON payloads need ≥ 2015-12-11, bearer
/// tokens ≥ 2019-02-02).
pub const SERVICE_VERSION: &str = "2019-02-02";

// The names of the headers every request carries, made once (a name
// given as text is parsed and copied for each request).
const X_MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");
const X_MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
const DATA_SERVICE_VERSION: HeaderName = HeaderName::from_static("dataserviceversion");
const MAX_DATA_SERVICE_VERSION: HeaderName = HeaderName::from_static("maxdataserviceversion");

/// A Table service account as a [`TableBackend`]: Azure Table Storage,
/// Cosmos DB for Table, or Azurite. Clones share one connection pool.
#[derive(Clone, Debug)]
pub struct AzureTables {
    inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
struct Inner {
    account: Account,
    http: crate::transport::Http,
    retry: RetryPolicy,
    sas_range: Option<SasRange>,
    /// The path the endpoint adds before every resource (`/devstoreaccount1`
    /// for the emulator's path-style URLs, empty in the cloud).
    path_prefix: String,
    /// Check merged entities on the client (see [`AzureTables::with_merge_checks`]).
    verify_merges: bool,
    /// Send entities in ASCII alone (see [`AzureTables::with_ascii_bodies`]).
    ascii_bodies: bool,
    /// The order of query results (see [`AzureTables::with_query_order`]).
    query_order: QueryOrder,
    /// The account's pacing, shared by every writer through this client.
    pacing: tablekit_core::pacing::Pacing,
    /// What the store is, for spans and metrics.
    store: tablekit_core::telemetry::StoreInfo,
    /// How requests are signed: key, SAS or token.
    signing: Arc<Signing>,
    /// The secondary endpoint and its path prefix, where reads may go.
    secondary: Option<(String, String)>,
}

/// A request before it is signed and sent.
struct Call<'a> {
    method: Method,
    /// The path after the endpoint, as encoded in the URL.
    path: String,
    query: Vec<(&'a str, String)>,
    headers: Vec<(&'static str, String)>,
    /// Content type and body; `Bytes`, so a retry sends it again without a copy.
    body: Option<(String, Bytes)>,
    idempotence: Idempotence,
    target: Target<'a>,
}

/// A response that succeeded.
struct Reply {
    headers: http::HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// A continuation header: absent, or text. One that is there but not
    /// text is an error, never read as absent: that would end a listing or
    /// a query early, as if it were whole.
    fn continuation(&self, name: &str) -> Result<Option<&str>> {
        self.headers
            .get(name)
            .map(|value| {
                value.to_str().map_err(|_| Error::Decode {
                    message: format!("the response's `{name}` header is not text"),
                })
            })
            .transpose()
    }

    fn etag(&self) -> Result<ETag> {
        self.header("etag")
            .map(ETag::new)
            .ok_or_else(|| Error::Decode {
                message: "the response has no ETag".into(),
            })
    }
}

impl AzureTables {
    /// A client for `account` with the default [`ClientOptions::tables`].
    pub fn new(account: Account) -> Result<AzureTables, ConfigError> {
        AzureTables::with_options(account, ClientOptions::tables())
    }

    /// A client for `account` with the given timeouts and retry policy.
    pub fn with_options(
        account: Account,
        options: ClientOptions,
    ) -> Result<AzureTables, ConfigError> {
        let path_prefix = crate::url::path_prefix(&account.table_endpoint);
        let sas_range = match &account.credentials {
            Credentials::Sas(token) => Some(SasRange::from_token(token)),
            _ => None,
        };
        let http = crate::transport::Http::from_options(&options, &account.table_endpoint)?;
        let verify_merges = account.is_emulator(&account.table_endpoint);
        let signing = Signing::new(&account.credentials, &account.table_endpoint, &options)?;
        let query_order = query_order_of(&account.table_endpoint);
        let system = match query_order {
            QueryOrder::Unspecified => "azure.cosmosdb",
            _ => "azure.tables",
        };
        let store = crate::transport::store_info(
            system,
            &account.name,
            &account.table_endpoint,
            "Microsoft.Tables",
        );
        let pacing = tablekit_core::pacing::Pacing::service_targets().for_account(&account.name);
        let secondary = account
            .table_secondary_endpoint
            .clone()
            .filter(|_| options.secondary_reads)
            .map(|e| (crate::url::path_prefix(&e), e))
            .map(|(prefix, e)| (e, prefix));
        Ok(AzureTables {
            inner: Arc::new(Inner {
                account,
                http,
                retry: options.retry,
                sas_range,
                path_prefix,
                verify_merges,
                ascii_bodies: verify_merges,
                query_order,
                pacing,
                store,
                signing: Arc::new(signing),
                secondary,
            }),
        })
    }

    /// A client from a connection string: its account settings
    /// ([`Account::from_connection_string`]) and its client settings
    /// ([`ClientOptions::with_connection_string`]).
    pub fn from_connection_string(text: &str) -> Result<AzureTables, ConfigError> {
        AzureTables::with_options(
            Account::from_connection_string(text)?,
            ClientOptions::tables().with_connection_string(text)?,
        )
    }

    /// The account.
    pub fn account(&self) -> &Account {
        &self.inner.account
    }

    /// Refuses keys outside the SAS's range before anything is sent (the
    /// service would refuse them; Azurite would not).
    fn check_range(&self, pk: &str, rk: &str) -> Result<()> {
        match &self.inner.sas_range {
            Some(range) if !range.allows(pk, rk) => Err(outside_range(format!(
                "({pk:?}, {rk:?}) is outside the key range of this client's SAS"
            ))),
            _ => Ok(()),
        }
    }

    async fn send(&self, call: Call<'_>) -> Result<Reply> {
        let read = call.method == Method::GET;
        crate::transport::with_retries(
            self.inner.store.system(),
            &self.inner.retry,
            call.idempotence,
            &call.method,
            read && self.inner.secondary.is_some(),
            |route| self.send_once(&call, route),
        )
        .await
    }

    async fn send_once(&self, call: &Call<'_>, route: Route) -> Result<Reply, Failure> {
        let inner = &self.inner;
        let (endpoint, path_prefix) = match (&inner.secondary, route.secondary) {
            (Some((endpoint, prefix)), true) => (endpoint, prefix),
            _ => (&inner.account.table_endpoint, &inner.path_prefix),
        };
        let address = crate::transport::address(
            endpoint,
            &call.path,
            &call.query,
            &inner.account.credentials,
        );
        let date = httpdate::fmt_http_date(SystemTime::now());
        let content_type = call.body.as_ref().map_or("", |(t, _)| t.as_str());
        let mut request = inner
            .http
            .request(call.method.clone(), &address)
            .header(X_MS_DATE, &date)
            .header(X_MS_VERSION, HeaderValue::from_static(SERVICE_VERSION))
            .header(
                crate::transport::CLIENT_REQUEST_ID,
                crate::transport::new_client_request_id(),
            )
            .header(DATA_SERVICE_VERSION, HeaderValue::from_static("3.0;NetFx"))
            .header(
                MAX_DATA_SERVICE_VERSION,
                HeaderValue::from_static("3.0;NetFx"),
            )
            .header(
                http::header::ACCEPT,
                HeaderValue::from_static("application/json;odata=minimalmetadata"),
            );
        for (name, value) in &call.headers {
            request = request.header(*name, value);
        }
        let bearer = inner.signing.bearer().await?;
        if let Some(bearer) = &bearer {
            request = request.header("Authorization", bearer.clone());
        }
        if let Some(signer) = inner.signing.signer() {
            let resource = auth::table_resource(
                &inner.account.name,
                &format!("{path_prefix}{}", call.path),
                None,
            );
            let text = auth::table_string_to_sign(
                call.method.as_str(),
                "",
                content_type,
                &date,
                &resource,
            );
            request = request.header(
                "Authorization",
                signer.shared_key_header(&inner.account.name, &text),
            );
        }
        if let Some((content_type, body)) = &call.body {
            request = request
                .header("Content-Type", content_type)
                .body(body.clone());
        }
        let (_, headers, body) = crate::transport::execute(
            request,
            &call.method,
            &call.path,
            call.target,
            errors::table_error_body,
        )
        .await
        .map_err(|failure| inner.signing.after_failure(failure, bearer.as_ref()))?;
        // Into a `Vec` without a copy when the response owns its buffer.
        let body = String::from_utf8(Vec::from(body))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Ok(Reply { headers, body })
    }

    fn call<'a>(
        &self,
        method: Method,
        path: String,
        target: Target<'a>,
        idempotence: Idempotence,
    ) -> Call<'a> {
        Call {
            method,
            path,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            idempotence,
            target,
        }
    }

    /// A request for one entity, its table name and keys checked first.
    fn entity_call<'a>(
        &self,
        method: Method,
        table: &'a str,
        partition_key: &'a str,
        row_key: &'a str,
        idempotence: Idempotence,
    ) -> Result<Call<'a>> {
        self.check_range(partition_key, row_key)?;
        Ok(self.call(
            method,
            url::entity_path(table, partition_key, row_key),
            Target::entity(table, partition_key, row_key),
            idempotence,
        ))
    }

    /// An insert: `POST /t`.
    async fn insert(&self, table: &str, entity: &Entity) -> Result<ETag> {
        self.check_range(&entity.partition_key, &entity.row_key)?;
        let target = Target::entity(table, &entity.partition_key, &entity.row_key);
        let mut call = self.call(
            Method::POST,
            format!("/{table}"),
            target,
            Idempotence::NotIdempotent,
        );
        call.headers.push(("Prefer", "return-no-content".into()));
        call.body = Some(("application/json".into(), self.entity_body(entity)));
        self.send(call).await?.etag()
    }

    /// A delete under `if_match`: `DELETE /t(…)`.
    async fn delete(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        let mut call = self.entity_call(
            Method::DELETE,
            table,
            partition_key,
            row_key,
            Idempotence::NotIdempotent,
        )?;
        call.headers.push(("If-Match", if_match_value(if_match)));
        self.send(call).await.map(drop)
    }

    /// A replace or merge, under `if_match` or whatever is stored.
    async fn write(
        &self,
        table: &str,
        entity: &Entity,
        method: Method,
        if_match: Option<&IfMatch>,
    ) -> Result<ETag> {
        let (pk, rk) = (&entity.partition_key, &entity.row_key);
        self.check_range(pk, rk)?;
        let target = Target::entity(table, pk, rk);
        if method == merge() && self.inner.verify_merges {
            self.check_merge(table, entity).await?;
        }
        let body = self.entity_body(entity);
        if self.inner.ascii_bodies && body.len() > EMULATOR_UPDATE_BODY {
            let operation = one_operation(entity, &method, if_match);
            return self.write_in_transaction(table, operation).await;
        }
        let idempotence = if if_match.is_none() {
            Idempotence::Idempotent
        } else {
            Idempotence::NotIdempotent
        };
        let mut call = self.call(method, url::entity_path(table, pk, rk), target, idempotence);
        if let Some(if_match) = if_match {
            call.headers.push(("If-Match", if_match_value(if_match)));
        }
        call.body = Some(("application/json".into(), body));
        self.send(call).await?.etag()
    }

    /// An update or upsert sent as an entity group transaction of one
    /// `operation`. For the emulator, when the entity's body in ASCII alone
    /// passes the 1 MiB it takes for an update's body, where the service
    /// takes the entity: the emulator reads a transaction whole, so its
    /// text goes as it is, and its failure is the update's own.
    async fn write_in_transaction(&self, table: &str, operation: BatchOperation) -> Result<ETag> {
        match self.submit_transaction(table, &[operation]).await {
            Ok(mut etags) => etags.pop().flatten().ok_or_else(|| Error::Decode {
                message: "a transaction's answer without the ETag of its update".into(),
            }),
            Err(Error::BatchFailed { source, .. }) => Err(*source),
            Err(other) => Err(other),
        }
    }
}

/// The write of `entity` by `method` (a merge or a replace), under
/// `if_match` or as an upsert without it, as a transaction's operation.
fn one_operation(entity: &Entity, method: &Method, if_match: Option<&IfMatch>) -> BatchOperation {
    let mode = if *method == merge() {
        UpdateMode::Merge
    } else {
        UpdateMode::Replace
    };
    let entity = entity.clone();
    match if_match {
        Some(if_match) => BatchOperation::Update {
            entity,
            mode,
            if_match: if_match.clone(),
        },
        None => BatchOperation::Upsert { entity, mode },
    }
}

/// The longest body the emulator takes for an update or merge of one entity
/// (Azurite checks the body's UTF-8 bytes; the service checks the entity).
const EMULATOR_UPDATE_BODY: usize = 1024 * 1024;

impl AzureTables {
    /// Reads the stored entity and checks that merging `changes` into it
    /// stays within one entity's limits. The service checks this itself;
    /// Azurite does not, so against the emulator the
    /// client does, and the same merge gets the same error on every backend.
    /// (A writer adding properties between this read and the merge is not
    /// seen: good enough for an emulator.)
    async fn check_merge(&self, table: &str, changes: &Entity) -> Result<()> {
        let stored = match self
            .get_entity(
                table,
                &changes.partition_key,
                &changes.row_key,
                &GetOptions::default(),
            )
            .await
        {
            Ok(stored) => stored,
            Err(Error::EntityNotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut merged = Entity::new(changes.partition_key.clone(), changes.row_key.clone());
        merged.properties = stored.properties;
        for (name, value) in changes.properties.entries() {
            merged.properties.insert(name.clone(), value.clone());
        }
        validate::entity(&merged)?;
        Ok(())
    }

    /// The order the store returns query results in. Told from the endpoint
    /// by default: [`QueryOrder::Unspecified`] for Cosmos DB for Table
    /// (`*.table.cosmos.azure.com`), [`QueryOrder::Keys`] otherwise. Set it
    /// for a Cosmos DB endpoint under another name, such as its emulator;
    /// tablekit then sorts ordered reads on the client (see
    /// `tablekit::TableBackendExt::query_stream`).
    pub fn with_query_order(self, order: QueryOrder) -> AzureTables {
        let mut inner = (*self.inner).clone();
        inner.query_order = order;
        AzureTables {
            inner: Arc::new(inner),
        }
    }

    /// Whether entities are sent in ASCII alone, every other character of
    /// their JSON escaped (`\u00e9`). On by default for the emulator
    /// ([`Account::is_emulator`]), off for the service.
    ///
    /// Azurite decodes each piece of a request body as it arrives, so a
    /// character of several bytes that falls across two pieces is stored as
    /// replacement characters, with no error (Azure/Azurite#2670): bodies
    /// past 64 KiB on loopback, smaller ones across a network. An ASCII body
    /// has no such character. It is longer (up to three times, for text far
    /// from ASCII); an update whose escaped body passes the 1 MiB Azurite
    /// takes for one goes as an entity group transaction of one operation
    /// instead. Entity group transactions are read whole by Azurite and are
    /// sent as they are.
    pub fn with_ascii_bodies(self, on: bool) -> AzureTables {
        let mut inner = (*self.inner).clone();
        inner.ascii_bodies = on;
        AzureTables {
            inner: Arc::new(inner),
        }
    }

    /// The JSON body that writes `entity`.
    fn entity_body(&self, entity: &Entity) -> Bytes {
        let json = json::to_string(entity);
        match self.inner.ascii_bodies {
            true => crate::ascii::json(json).into(),
            false => json.into(),
        }
    }

    /// Whether merges are checked against the stored entity before they are
    /// sent (on by default for the emulator, off for the service, which
    /// checks them itself).
    pub fn with_merge_checks(self, on: bool) -> AzureTables {
        let mut inner = (*self.inner).clone();
        inner.verify_merges = on;
        AzureTables {
            inner: Arc::new(inner),
        }
    }
}

/// The order a store returns query results in, told by its endpoint:
/// Cosmos DB for Table (`*.table.cosmos.azure.com`, and the older
/// `*.table.cosmosdb.azure.com`, in every cloud) promises none.
fn query_order_of(endpoint: &str) -> QueryOrder {
    let host = url::host_of(endpoint).to_ascii_lowercase();
    if host.contains(".table.cosmos.") || host.contains(".table.cosmosdb.") {
        QueryOrder::Unspecified
    } else {
        QueryOrder::Keys
    }
}

fn if_match_value(if_match: &IfMatch) -> String {
    match if_match {
        IfMatch::Any => "*".into(),
        IfMatch::ETag(tag) => tag.as_str().to_owned(),
    }
}

/// The method of an update or upsert (see [`batch::update_verb`]).
fn update_method(mode: UpdateMode) -> Method {
    match mode {
        UpdateMode::Replace => Method::PUT,
        UpdateMode::Merge => merge(),
    }
}

fn merge() -> Method {
    // A valid token: from_bytes cannot fail for it.
    Method::from_bytes(b"MERGE").unwrap_or(Method::PATCH)
}

/// The rows of a query response: the entities, and the rows that are not
/// valid entities (each with its reason, so they cost no other row).
fn decode_entities(body: &str) -> Result<(Vec<Entity>, Vec<UndecodableRow>)> {
    json::entities_from_str(body).map_err(|e| Error::Decode {
        message: e.to_string(),
    })
}

tablekit_core::serve!(AzureTables, info: |this| this.inner.store.clone(), contracts: [TableBackend]);

impl tablekit_core::layer::RawTables for AzureTables {
    async fn create_table(&self, table: &str) -> Result<()> {
        let target = Target::table(table);
        let mut call = self.call(
            Method::POST,
            "/Tables".into(),
            target,
            Idempotence::NotIdempotent,
        );
        call.headers.push(("Prefer", "return-no-content".into()));
        call.body = Some((
            "application/json".into(),
            serde_json::json!({ "TableName": table }).to_string().into(),
        ));
        self.send(call).await.map(drop)
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        let target = Target::table(table);
        let call = self.call(
            Method::DELETE,
            url::table_path(table),
            target,
            Idempotence::NotIdempotent,
        );
        self.send(call).await.map(drop)
    }

    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage> {
        let mut call = self.call(
            Method::GET,
            "/Tables".into(),
            Target::default(),
            Idempotence::Idempotent,
        );
        if let Some(top) = options.top {
            call.query.push(("$top", top.to_string()));
        }
        if let Some(token) = &options.continuation {
            call.query
                .push(("NextTableName", token.next_partition_key().to_owned()));
        }
        if let Some(prefix) = &options.prefix {
            // Letters and digits only (the door checked), so the literal
            // needs no escaping; `{` sorts after every letter and digit.
            call.query.push((
                "$filter",
                format!("TableName ge '{prefix}' and TableName lt '{prefix}{{'"),
            ));
        }
        let reply = self.send(call).await?;
        let mut tables = decode_table_names(&reply.body)?;
        if let Some(prefix) = &options.prefix {
            tables.retain(|name| name.starts_with(prefix.as_str()));
        }
        let continuation = reply
            .continuation("x-ms-continuation-nexttablename")?
            .map(|next| tablekit_core::ContinuationToken::new(next, None));
        Ok(TablePage {
            tables,
            continuation,
        })
    }

    async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        options: &GetOptions,
    ) -> Result<Entity> {
        let mut call = self.entity_call(
            Method::GET,
            table,
            partition_key,
            row_key,
            Idempotence::Idempotent,
        )?;
        if let Some(select) = &options.select {
            let query = Query::new().select(select.iter().cloned());
            call.query.extend(policy::query_parameters(&query));
        }
        let reply = self.send(call).await?;
        let mut entity = json::row_from_str(&reply.body).map_err(|e| Error::Decode {
            message: e.to_string(),
        })?;
        if entity.etag.is_none() {
            entity.etag = reply.header("etag").map(ETag::new);
        }
        Ok(entity)
    }

    fn store_info(&self) -> tablekit_core::telemetry::StoreInfo {
        self.inner.store.clone()
    }

    fn query_order(&self) -> QueryOrder {
        self.inner.query_order
    }

    /// One adaptive pacing per client, shared by its clones: every writer
    /// of the account through this client keeps to the account's rate.
    fn pacing(&self) -> Option<tablekit_core::pacing::Pacing> {
        Some(self.inner.pacing.clone())
    }

    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage> {
        // A client scoped to a key range sees only that range, as the service
        // enforces it (Azurite does not): a query that can only reach outside
        // is refused, the rest is narrowed, and anything outside that still
        // comes back is dropped.
        let range = self.inner.sas_range.as_ref().filter(|r| r.is_bounded());
        let narrowed;
        let query = match range {
            Some(range) => {
                if !range.may_reach(query.filter.as_ref()) {
                    return Err(outside_range(format!(
                        "the query's filter reaches only keys outside the key range of this client's SAS (table `{table}`)"
                    )));
                }
                narrowed = range.narrow(query);
                &narrowed
            }
            None => query,
        };
        let target = Target::table(table);
        let mut call = self.call(
            Method::GET,
            format!("/{table}()"),
            target,
            Idempotence::Idempotent,
        );
        call.query = policy::query_parameters(query);
        let reply = self.send(call).await?;
        let (mut entities, mut undecodable) = decode_entities(&reply.body)?;
        if let Some(range) = range {
            entities.retain(|e| range.allows(&e.partition_key, &e.row_key));
            undecodable.retain(|row| range.allows(&row.partition_key, &row.row_key));
        }
        let continuation = policy::continuation(
            reply.continuation("x-ms-continuation-nextpartitionkey")?,
            reply.continuation("x-ms-continuation-nextrowkey")?,
        );
        let mut page = QueryPage::new(entities, continuation);
        page.undecodable = undecodable;
        Ok(page)
    }

    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>> {
        match write {
            EntityWrite::Insert(entity) => self.insert(table, entity).await.map(Some),
            EntityWrite::Update(entity, mode, if_match) => self
                .write(table, entity, update_method(mode), Some(if_match))
                .await
                .map(Some),
            EntityWrite::Upsert(entity, mode) => self
                .write(table, entity, update_method(mode), None)
                .await
                .map(Some),
            EntityWrite::Delete(partition_key, row_key, if_match) => self
                .delete(table, partition_key, row_key, if_match)
                .await
                .map(|()| None),
        }
    }

    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>> {
        for (index, op) in operations.iter().enumerate() {
            let (pk, rk) = op.keys();
            self.check_range(pk, rk).map_err(|e| e.in_batch(index))?;
        }
        let id = format!("{:032x}", fastrand::u128(..));
        let request = batch::build(&self.inner.account.table_endpoint, table, operations, &id);
        let target = Target::table(table);
        let mut call = self.call(
            Method::POST,
            "/$batch".into(),
            target,
            Idempotence::NotIdempotent,
        );
        call.body = Some((request.content_type, request.body.into()));
        let reply = self.send(call).await?;
        let content_type = reply.header("content-type").unwrap_or_default().to_owned();
        match batch::parse(&content_type, &reply.body, operations).map_err(|e| Error::Decode {
            message: e.to_string(),
        })? {
            BatchOutcome::Applied(etags) => Ok(etags),
            BatchOutcome::Failed {
                index,
                response,
                code,
                message,
            } => {
                let (pk, rk) = operations.get(index).map_or(("", ""), BatchOperation::keys);
                let target = Target::entity(table, pk, rk);
                let cause = errors::map(response.status, &code, &message, target, None);
                Err(cause.in_batch(index))
            }
        }
    }
}

/// What the service answers for keys outside a SAS's range.
fn outside_range(message: String) -> Error {
    Error::Service {
        status: 403,
        code: "AuthorizationFailure".into(),
        message,
    }
}

/// The table names of a Query Tables response, `{"value":[{"TableName":…}]}`.
/// A response without `value`, with `value` twice, or with an item that has no
/// name is refused, never read as fewer tables.
fn decode_table_names(body: &str) -> Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Page {
        value: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(rename = "TableName")]
        table_name: String,
    }
    let page: Page = serde_json::from_str(body).map_err(|e| Error::Decode {
        message: format!("a Query Tables response: {e}"),
    })?;
    Ok(page.value.into_iter().map(|item| item.table_name).collect())
}

#[cfg(test)]
mod tests {
    use super::{AzureTables, QueryOrder, decode_table_names, query_order_of};
    use tablekit_core::TableBackend as _;

    #[test]
    fn cosmos_endpoints_are_known_not_to_sort() {
        for cosmos in [
            "https://acme.table.cosmos.azure.com:443/",
            "https://ACME.Table.Cosmos.Azure.com",
            "https://acme.table.cosmosdb.azure.com",
            "https://acme.table.cosmos.azure.cn:443",
        ] {
            assert_eq!(query_order_of(cosmos), QueryOrder::Unspecified, "{cosmos}");
        }
        for storage in [
            "https://acme.table.core.windows.net",
            "http://127.0.0.1:10002/devstoreaccount1",
            "https://cosmos.table.core.windows.net/",
            "https://acme.table.core.windows.net/table.cosmos.x",
        ] {
            assert_eq!(query_order_of(storage), QueryOrder::Keys, "{storage}");
        }
        let key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
        let cosmos = AzureTables::from_connection_string(&format!(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={key};TableEndpoint=https://acme.table.cosmos.azure.com:443/;"
        ))
        .expect("client");
        assert_eq!(cosmos.query_order(), QueryOrder::Unspecified);
        let pinned = cosmos.with_query_order(QueryOrder::Keys);
        assert_eq!(pinned.query_order(), QueryOrder::Keys);
    }

    #[test]
    fn table_listings_are_read_strictly() {
        assert_eq!(
            decode_table_names(r#"{"odata.metadata":"x","value":[{"TableName":"a"},{"TableName":"b","odata.id":"y"}]}"#).unwrap(),
            ["a", "b"]
        );
        for bad in [
            r#"{"value":[{"TableName":"a"}],"value":[]}"#,
            r#"{"value":[],"value":[{"TableName":"a"}]}"#,
            r#"{"odata.metadata":"x"}"#,
            r#"{"value":[{"Name":"a"}]}"#,
            r#"{"value":[{"TableName":"a","TableName":"b"}]}"#,
        ] {
            assert!(decode_table_names(bad).is_err(), "{bad} accepted");
        }
    }
}

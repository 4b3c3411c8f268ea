//! What the blob and the queue client share: one request of a storage
//! service signed with the Blob/Queue form of Shared Key (or a SAS), sent
//! with retries, its XML error read.

use std::time::SystemTime;

use crate::transport::Method;
use bytes::Bytes;
use tablekit_core::Result;

use crate::auth::{self, BlobSignedHeaders};
use crate::config::Account;
use crate::errors::{self, Target};
use crate::policy::{Idempotence, RetryPolicy};
use crate::transport::{Failure, Route, Signing};

/// A client of one storage service (Blob or Queue) of an account: where
/// it is, the HTTP client and retry policy, and the version it speaks.
#[derive(Debug)]
pub(crate) struct Service {
    pub(crate) account: Account,
    /// The service's endpoint, without a trailing `/`.
    endpoint: String,
    /// The path the endpoint puts before every resource.
    path_prefix: String,
    /// The secondary endpoint and its path prefix, where reads may go.
    secondary: Option<(String, String)>,
    http: crate::transport::Http,
    retry: RetryPolicy,
    /// The `x-ms-version` spoken (both services take tokens from
    /// 2017-11-09 on).
    version: &'static str,
    signing: Signing,
    /// What the store is, for spans and metrics.
    pub(crate) store: tablekit_core::telemetry::StoreInfo,
}

impl Service {
    /// The client of the service at `endpoint` of `account`; reads go to
    /// `secondary` too when the options ask for it.
    pub(crate) fn new(
        account: Account,
        endpoint: String,
        secondary: Option<String>,
        options: &crate::config::ClientOptions,
        version: &'static str,
        system: &'static str,
    ) -> Result<Service, crate::config::ConfigError> {
        let store =
            crate::transport::store_info(system, &account.name, &endpoint, "Microsoft.Storage");
        let secondary = secondary
            .filter(|_| options.secondary_reads)
            .map(|e| (crate::url::path_prefix(&e), e))
            .map(|(prefix, e)| (e, prefix));
        Ok(Service {
            signing: Signing::new(&account.credentials, &endpoint, options)?,
            path_prefix: crate::url::path_prefix(&endpoint),
            http: crate::transport::Http::from_options(options, &endpoint)?,
            retry: options.retry.clone(),
            account,
            endpoint,
            secondary,
            version,
            store,
        })
    }

    /// Sends `call`, retrying as the policy allows.
    pub(crate) async fn send(&self, call: Call<'_>) -> Result<Reply> {
        let read = call.method == Method::GET || call.method == Method::HEAD;
        crate::transport::with_retries(
            self.store.system(),
            &self.retry,
            call.idempotence,
            &call.method,
            read && self.secondary.is_some(),
            |route| send_once(self, &call, route),
        )
        .await
    }
}

/// One request before it is signed.
pub(crate) struct Call<'a> {
    pub(crate) method: Method,
    /// The path after the endpoint (`/container/blob`), encoded.
    pub(crate) path: String,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) headers: Vec<(&'static str, String)>,
    /// `Bytes`, so a retry sends the body again without a copy.
    pub(crate) body: Bytes,
    /// The body's `Content-Type`, when there is a body.
    pub(crate) content_type: &'static str,
    pub(crate) content_md5: String,
    pub(crate) if_match: String,
    pub(crate) if_none_match: String,
    pub(crate) idempotence: Idempotence,
    pub(crate) target: Target<'a>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(
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
            body: Bytes::new(),
            content_type: "application/octet-stream",
            content_md5: String::new(),
            if_match: String::new(),
            if_none_match: String::new(),
            idempotence,
            target,
        }
    }

    /// Makes this call a listing (`comp=list`) with the paging both
    /// services share: a name prefix, a page size (checked by the method's
    /// door), a marker.
    pub(crate) fn list(
        &mut self,
        prefix: Option<&String>,
        max_results: Option<u32>,
        marker: Option<&String>,
    ) {
        self.query.push(("comp", "list".into()));
        if let Some(prefix) = prefix {
            self.query.push(("prefix", prefix.clone()));
        }
        // The page size was checked by the method's door.
        if let Some(max) = max_results {
            self.query.push(("maxresults", max.to_string()));
        }
        if let Some(marker) = marker {
            self.query.push(("marker", marker.clone()));
        }
    }
}

/// A successful response.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn send_once(service: &Service, call: &Call<'_>, route: Route) -> Result<Reply, Failure> {
    let account = &service.account;
    let (endpoint, path_prefix) = match (&service.secondary, route.secondary) {
        (Some((endpoint, prefix)), true) => (endpoint, prefix),
        _ => (&service.endpoint, &service.path_prefix),
    };
    let address =
        crate::transport::address(endpoint, &call.path, &call.query, &account.credentials);
    let date = httpdate::fmt_http_date(SystemTime::now());
    let client_request_id = crate::transport::new_client_request_id();
    // Every `x-ms-` header is signed with a shared key, the request's id too.
    let mut ms_headers: Vec<(&str, &str)> = vec![
        (crate::transport::CLIENT_REQUEST_ID, &client_request_id),
        ("x-ms-date", &date),
        ("x-ms-version", service.version),
    ];
    ms_headers.extend(
        call.headers
            .iter()
            .filter(|(n, _)| n.starts_with("x-ms-"))
            .map(|(n, v)| (*n, v.as_str())),
    );
    let content_type = if call.body.is_empty() {
        ""
    } else {
        call.content_type
    };
    let mut request = service
        .http
        .request(call.method.clone(), &address)
        .header("x-ms-date", &date)
        .header("x-ms-version", service.version)
        .header(crate::transport::CLIENT_REQUEST_ID, &client_request_id);
    for (name, value) in &call.headers {
        request = request.header(*name, value);
    }
    if !call.content_md5.is_empty() {
        request = request.header("Content-MD5", &call.content_md5);
    }
    if !call.if_match.is_empty() {
        request = request.header("If-Match", &call.if_match);
    }
    if !call.if_none_match.is_empty() {
        request = request.header("If-None-Match", &call.if_none_match);
    }
    let bearer = service.signing.bearer().await?;
    if let Some(bearer) = &bearer {
        request = request.header("Authorization", bearer.clone());
    }
    if let Some(signer) = service.signing.signer() {
        let headers = BlobSignedHeaders {
            content_length: call.body.len() as u64,
            content_md5: &call.content_md5,
            content_type,
            if_match: &call.if_match,
            if_none_match: &call.if_none_match,
            ..BlobSignedHeaders::default()
        };
        let params: Vec<(&str, &str)> = call.query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let path = format!("{path_prefix}{}", call.path);
        let text = auth::blob_string_to_sign(
            call.method.as_str(),
            &headers,
            &ms_headers,
            &account.name,
            &path,
            &params,
        );
        request = request.header(
            "Authorization",
            signer.shared_key_header(&account.name, &text),
        );
    }
    if !call.body.is_empty() {
        request = request
            .header("Content-Type", content_type)
            .body(call.body.clone());
    } else if call.method == Method::PUT || call.method == Method::POST {
        request = request.header("Content-Length", "0");
    }
    let (status, headers, body) = crate::transport::execute(
        request,
        &call.method,
        &call.path,
        call.target,
        errors::blob_error_body,
    )
    .await
    .map_err(|failure| service.signing.after_failure(failure, bearer.as_ref()))?;
    Ok(Reply {
        status,
        headers,
        body: Vec::from(body),
    })
}

//! Entity group transactions on the wire: one `POST /$batch` holding one
//! change set in `multipart/mixed`, and the response's parts.

use tablekit_core::{BatchOperation, ETag, IfMatch, UpdateMode, json};

use crate::url::entity_path;

/// A built batch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRequest {
    /// The request's `Content-Type` (carries the batch boundary).
    pub content_type: String,
    /// The request body.
    pub body: String,
}

fn if_match_header(if_match: &IfMatch) -> String {
    match if_match {
        // Sent explicitly: Azurite would take a missing If-Match as `*`, the
        // service may not.
        IfMatch::Any => "If-Match: *\r\n".to_owned(),
        IfMatch::ETag(tag) => format!("If-Match: {}\r\n", tag.as_str()),
    }
}

/// The verb of an update or upsert: `PUT` replaces, `MERGE` merges.
pub fn update_verb(mode: UpdateMode) -> &'static str {
    match mode {
        UpdateMode::Replace => "PUT",
        UpdateMode::Merge => "MERGE",
    }
}

/// Builds the body of a batch on `table` at `endpoint` (the Table service
/// endpoint, no trailing `/`). `id` makes the boundaries unique.
pub fn build(endpoint: &str, table: &str, operations: &[BatchOperation], id: &str) -> BatchRequest {
    let batch = format!("batch_{id}");
    let changeset = format!("changeset_{id}");
    let mut body =
        format!("--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n");
    for op in operations {
        let (pk, rk) = op.keys();
        let (method, url, condition, entity) = match op {
            BatchOperation::Insert(e) => ("POST", format!("{endpoint}/{table}"), None, Some(e)),
            BatchOperation::Update {
                entity,
                mode,
                if_match,
            } => (
                update_verb(*mode),
                format!("{endpoint}{}", entity_path(table, pk, rk)),
                Some(if_match),
                Some(entity),
            ),
            BatchOperation::Upsert { entity, mode } => (
                update_verb(*mode),
                format!("{endpoint}{}", entity_path(table, pk, rk)),
                None,
                Some(entity),
            ),
            BatchOperation::Delete { if_match, .. } => (
                "DELETE",
                format!("{endpoint}{}", entity_path(table, pk, rk)),
                Some(if_match),
                None,
            ),
        };
        body.push_str(&format!(
            "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n{method} {url} HTTP/1.1\r\nAccept: application/json;odata=minimalmetadata\r\nDataServiceVersion: 3.0\r\n"
        ));
        if let Some(if_match) = condition {
            body.push_str(&if_match_header(if_match));
        }
        match entity {
            Some(e) => {
                body.push_str(
                    "Content-Type: application/json\r\nPrefer: return-no-content\r\n\r\n",
                );
                body.push_str(&json::to_string(e));
                body.push_str("\r\n");
            }
            None => body.push_str("\r\n"),
        }
    }
    body.push_str(&format!("--{changeset}--\r\n--{batch}--\r\n"));
    BatchRequest {
        content_type: format!("multipart/mixed; boundary={batch}"),
        body,
    }
}

/// One operation's response inside a batch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body (empty for 204).
    pub body: String,
}

impl PartResponse {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a batch response says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every operation succeeded: one ETag per operation (`None` for deletes).
    Applied(Vec<Option<ETag>>),
    /// Operation `index` failed; nothing was applied.
    Failed {
        /// 0-based index of the failing operation, from the error message's `N:` prefix.
        index: usize,
        /// Its response.
        response: PartResponse,
        /// The service's error code (`odata.error.code`).
        code: String,
        /// The message, without the index prefix.
        message: String,
    },
}

/// Why a batch response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed batch response: {0}")]
pub struct MalformedResponse(pub String);

fn boundary(content_type: &str) -> Option<&str> {
    content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
}

/// The parts between `--boundary` lines (the closing `--boundary--` ends them).
fn parts<'a>(body: &'a str, boundary: &str) -> Vec<&'a str> {
    let delimiter = format!("--{boundary}");
    body.split(delimiter.as_str())
        .skip(1)
        .take_while(|p| !p.starts_with("--"))
        .map(|p| p.trim_start_matches(['\r', '\n']))
        .collect()
}

/// Splits headers from body at the first blank line (CRLF or LF).
fn split_head(text: &str) -> (&str, &str) {
    for sep in ["\r\n\r\n", "\n\n"] {
        if let Some(at) = text.find(sep) {
            return (&text[..at], &text[at + sep.len()..]);
        }
    }
    (text, "")
}

fn header_lines(head: &str) -> Vec<(String, String)> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect()
}

/// Reads a batch response (`content_type` is its `Content-Type`) for a batch
/// of `operations` operations.
pub fn parse(
    content_type: &str,
    body: &str,
    operations: &[BatchOperation],
) -> Result<BatchOutcome, MalformedResponse> {
    let bad = |what: &str| MalformedResponse(what.to_owned());
    let outer = boundary(content_type).ok_or_else(|| bad("no boundary in the Content-Type"))?;
    let first = *parts(body, outer).first().ok_or_else(|| bad("no part"))?;
    let (head, inner_body) = split_head(first);
    let inner_type = header_lines(head)
        .into_iter()
        .find(|(n, _)| n == "content-type")
        .map(|(_, v)| v)
        .ok_or_else(|| bad("the change set has no Content-Type"))?;
    let changeset = boundary(&inner_type)
        .ok_or_else(|| bad("no change set boundary"))?
        .to_owned();
    let mut responses = Vec::new();
    for part in parts(inner_body, &changeset) {
        // MIME headers of the part, then the HTTP response.
        let (_, http) = split_head(part);
        let (status_and_headers, body) = split_head(http);
        let mut lines = status_and_headers.lines();
        let status_line = lines
            .next()
            .ok_or_else(|| bad("a part has no status line"))?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("a part has no status"))?;
        let headers = header_lines(&lines.collect::<Vec<_>>().join("\n"));
        responses.push(PartResponse {
            status,
            headers,
            body: body.trim_end_matches(['\r', '\n']).to_owned(),
        });
    }
    if let Some(failed) = responses.iter().find(|r| r.status >= 400) {
        let error: serde_json::Value =
            serde_json::from_str(&failed.body).unwrap_or(serde_json::Value::Null);
        let code = error["odata.error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let full = error["odata.error"]["message"]["value"]
            .as_str()
            .unwrap_or_default();
        let (index, message) = match full.split_once(':') {
            Some((n, rest)) if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => {
                (n.parse().unwrap_or(0), rest.to_owned())
            }
            _ => (0, full.to_owned()),
        };
        return Ok(BatchOutcome::Failed {
            index,
            response: failed.clone(),
            code,
            message,
        });
    }
    if responses.len() != operations.len() {
        return Err(bad(&format!(
            "{} responses for {} operations",
            responses.len(),
            operations.len()
        )));
    }
    Ok(BatchOutcome::Applied(
        responses
            .iter()
            .zip(operations)
            .map(|(r, op)| match op {
                BatchOperation::Delete { .. } => None,
                _ => r.header("etag").map(ETag::new),
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use tablekit_core::Entity;

    use super::*;

    fn ops() -> Vec<BatchOperation> {
        vec![
            BatchOperation::Insert(Entity::new("p", "1").with("v", 1)),
            BatchOperation::Update {
                entity: Entity::new("p", "o'k").with("v", 2),
                mode: UpdateMode::Merge,
                if_match: IfMatch::ETag(ETag::new(
                    "W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"",
                )),
            },
            BatchOperation::Delete {
                partition_key: "p".into(),
                row_key: "2".into(),
                if_match: IfMatch::Any,
            },
        ]
    }

    #[test]
    fn builds_one_change_set() {
        let request = build(
            "http://127.0.0.1:20002/devstoreaccount1",
            "btx",
            &ops(),
            "B1",
        );
        assert_eq!(request.content_type, "multipart/mixed; boundary=batch_B1");
        let body = &request.body;
        assert!(body.starts_with("--batch_B1\r\nContent-Type: multipart/mixed; boundary=changeset_B1\r\n\r\n--changeset_B1\r\n"));
        assert!(body.contains("POST http://127.0.0.1:20002/devstoreaccount1/btx HTTP/1.1\r\n"));
        assert!(body.contains("\r\n\r\n{\"PartitionKey\":\"p\",\"RowKey\":\"1\",\"v\":1}\r\n"));
        assert!(body.contains("MERGE http://127.0.0.1:20002/devstoreaccount1/btx(PartitionKey='p',RowKey='o%27%27k') HTTP/1.1\r\n"));
        assert!(body.contains("If-Match: W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"\r\n"));
        assert!(body.contains("DELETE http://127.0.0.1:20002/devstoreaccount1/btx(PartitionKey='p',RowKey='2') HTTP/1.1\r\n"));
        assert!(
            body.contains("If-Match: *\r\n"),
            "an unconditional delete says so"
        );
        assert!(body.ends_with("--changeset_B1--\r\n--batch_B1--\r\n"));
        assert_eq!(body.matches("--changeset_B1\r\n").count(), 3);
    }

    /// Azurite's failure response for insert, insert of an
    /// existing entity, delete.
    #[test]
    fn reads_the_failing_index() {
        let body = "--batchresponse_B1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_C1\r\n\r\n--changesetresponse_C1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-ID: 2\r\nDataServiceVersion: 3.0;\r\nContent-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\\nRequestId:x\\nTime:y\"}}}\r\n--changesetresponse_C1--\r\n--batchresponse_B1--\r\n";
        match parse("multipart/mixed; boundary=batchresponse_B1", body, &ops()).unwrap() {
            BatchOutcome::Failed {
                index,
                code,
                response,
                message,
            } => {
                assert_eq!(
                    (index, code.as_str(), response.status),
                    (1, "EntityAlreadyExists", 409)
                );
                assert!(message.starts_with("The specified entity already exists."));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A batch success response (captured from Azurite), one part per operation.
    #[test]
    fn reads_etags_of_a_success() {
        let part = |status: &str, etag: &str| {
            format!(
                "--changesetresponse_C1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 {status}\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\n{etag}\r\n"
            )
        };
        let body = format!(
            "--batchresponse_B1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_C1\r\n\r\n{}{}{}--changesetresponse_C1--\r\n--batchresponse_B1--\r\n",
            part(
                "201 Created",
                "ETag: W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"\r\n"
            ),
            part(
                "204 No Content",
                "ETag: W/\"datetime'2026-11-21T22%3A39%3A04.2843443Z'\"\r\n"
            ),
            part("204 No Content", ""),
        );
        match parse("multipart/mixed; boundary=batchresponse_B1", &body, &ops()).unwrap() {
            BatchOutcome::Applied(etags) => {
                assert_eq!(
                    etags[0].as_ref().map(ETag::as_str),
                    Some("W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"")
                );
                assert!(etags[1].is_some() && etags[2].is_none());
            }
            other => panic!("{other:?}"),
        }
        // LF-only line endings read the same.
        let lf = body.replace("\r\n", "\n");
        assert!(matches!(
            parse("multipart/mixed; boundary=batchresponse_B1", &lf, &ops()),
            Ok(BatchOutcome::Applied(_))
        ));
        assert!(parse("multipart/mixed", &body, &ops()).is_err());
        assert!(
            parse(
                "multipart/mixed; boundary=batchresponse_B1",
                "garbage",
                &ops()
            )
            .is_err()
        );
    }
}

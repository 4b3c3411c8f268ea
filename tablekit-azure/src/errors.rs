//! Mapping the services' error responses onto tablekit's one error enum.

use std::time::Duration;

use tablekit_core::Error;

/// What a request addressed, to name it in the error.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// The table.
    pub table: &'a str,
    /// The PartitionKey, for entity requests.
    pub partition_key: &'a str,
    /// The RowKey, for entity requests.
    pub row_key: &'a str,
    /// The blob container, for blob requests.
    pub container: &'a str,
    /// The blob name, for blob requests.
    pub blob: &'a str,
    /// The queue, for queue requests.
    pub queue: &'a str,
    /// The message id, for requests on one message.
    pub message: &'a str,
    /// Whether the request addressed one entity: its keys may both be
    /// empty, so they cannot say so.
    pub entity: bool,
}

impl<'a> Target<'a> {
    /// A table.
    pub fn table(table: &'a str) -> Target<'a> {
        Target {
            table,
            ..Target::default()
        }
    }

    /// An entity of a table.
    pub fn entity(table: &'a str, partition_key: &'a str, row_key: &'a str) -> Target<'a> {
        Target {
            table,
            partition_key,
            row_key,
            entity: true,
            ..Target::default()
        }
    }

    /// A blob container.
    pub fn container(container: &'a str) -> Target<'a> {
        Target {
            container,
            ..Target::default()
        }
    }

    /// A blob.
    pub fn blob(container: &'a str, blob: &'a str) -> Target<'a> {
        Target {
            container,
            blob,
            ..Target::default()
        }
    }

    /// A queue.
    pub fn queue(queue: &'a str) -> Target<'a> {
        Target {
            queue,
            ..Target::default()
        }
    }

    /// A message of a queue.
    pub fn message(queue: &'a str, message: &'a str) -> Target<'a> {
        Target {
            queue,
            message,
            ..Target::default()
        }
    }
}

/// The error code and message of a Table service error body:
/// `{"odata.error":{"code":…,"message":{"value":…}}}`, or of the XML body
/// the services send where they answer before reading the request's
/// format (a refused sign-in). The service's reason for a refused sign-in
/// (`AuthenticationErrorDetail`, "Invalid token audience.") ends the
/// message.
pub fn table_error_body(body: &str) -> (String, String) {
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let error = &json["odata.error"];
    let Some(code) = error["code"].as_str() else {
        return blob_error_body(body);
    };
    let message = error["message"]["value"].as_str().unwrap_or_default();
    let detail = error["AuthenticationErrorDetail"]
        .as_str()
        .unwrap_or_default();
    (code.to_owned(), with_detail(message, detail))
}

/// The error code and message of a Blob or Queue service error body:
/// `<Error><Code>…</Code><Message>…</Message></Error>`, with the reason
/// for a refused sign-in (`AuthenticationErrorDetail`) at the end.
pub fn blob_error_body(body: &str) -> (String, String) {
    // Hand-read: a few fixed elements of a tiny, flat document.
    let element = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        body.split_once(&open)
            .and_then(|(_, rest)| rest.split_once(&close))
            .map(|(text, _)| text.trim().to_owned())
            .unwrap_or_default()
    };
    (
        element("Code"),
        with_detail(&element("Message"), &element("AuthenticationErrorDetail")),
    )
}

/// `message`, and then `detail` when there is one.
fn with_detail(message: &str, detail: &str) -> String {
    match (message.trim(), detail.trim()) {
        (message, "") => message.to_owned(),
        ("", detail) => detail.to_owned(),
        (message, detail) => format!("{message} ({detail})"),
    }
}

/// The error for a failed response: by `x-ms-error-code` (or the body's code)
/// first, then by status. `retry_after` is the `Retry-After` header, if any.
pub fn map(
    status: u16,
    code: &str,
    message: &str,
    target: Target<'_>,
    retry_after: Option<Duration>,
) -> Error {
    let table = target.table.to_owned();
    let entity = |make: fn(String, String, String) -> Error| {
        make(
            table.clone(),
            target.partition_key.to_owned(),
            target.row_key.to_owned(),
        )
    };
    let blob = |make: fn(String, String) -> Error| {
        make(target.container.to_owned(), target.blob.to_owned())
    };
    if let Some(error) = blob_or_queue_error(code, &target) {
        return error;
    }
    match (status, code) {
        (_, "TableNotFound") => Error::TableNotFound { table },
        (_, "TableAlreadyExists") => Error::TableAlreadyExists { table },
        (_, "TableBeingDeleted") => Error::TableBeingDeleted { table },
        (_, "EntityAlreadyExists") => {
            entity(|table, partition_key, row_key| Error::EntityAlreadyExists {
                table,
                partition_key,
                row_key,
            })
        }
        (_, "UpdateConditionNotSatisfied") => {
            entity(|table, partition_key, row_key| Error::PreconditionFailed {
                table,
                partition_key,
                row_key,
            })
        }
        // Entity not found is `ResourceNotFound` on the live service.
        (404, "ResourceNotFound")
            if target.entity || !target.row_key.is_empty() || !target.partition_key.is_empty() =>
        {
            entity(|table, partition_key, row_key| Error::EntityNotFound {
                table,
                partition_key,
                row_key,
            })
        }
        (404, "ResourceNotFound") => Error::TableNotFound { table },
        (412, _) if !target.blob.is_empty() => {
            blob(|container, name| Error::BlobConditionNotMet { container, name })
        }
        (412, _) => entity(|table, partition_key, row_key| Error::PreconditionFailed {
            table,
            partition_key,
            row_key,
        }),
        // The service's own limit checks, for what the client cannot see
        // coming (a merge that pushes the stored entity over a limit).
        (_, "TooManyProperties") => {
            Error::Invalid(tablekit_core::InvalidInput::TooManyProperties {
                partition_key: target.partition_key.to_owned(),
                row_key: target.row_key.to_owned(),
                count: tablekit_core::validate::limits::MAX_PROPERTIES + 1,
                max: tablekit_core::validate::limits::MAX_PROPERTIES,
            })
        }
        (_, "EntityTooLarge") => Error::Invalid(tablekit_core::InvalidInput::EntityTooLarge {
            partition_key: target.partition_key.to_owned(),
            row_key: target.row_key.to_owned(),
            size: tablekit_core::validate::limits::MAX_ENTITY_SIZE + 1,
            max: tablekit_core::validate::limits::MAX_ENTITY_SIZE,
        }),
        // A proxy on the way wants credentials the client did not give.
        (407, _) => Error::Configuration {
            message: format!("the proxy asks for credentials (407): {message}"),
        },
        // 503 Server Busy from the service; 429 from Cosmos DB for Table,
        // with the time to wait in `x-ms-retry-after-ms`.
        (429 | 503, _) | (_, "ServerBusy" | "TooManyRequests") => Error::Throttled { retry_after },
        (408 | 500 | 502 | 504, _) | (_, "OperationTimedOut" | "InternalError") => {
            Error::Transient {
                message: format!("{status} {code}: {message}"),
            }
        }
        _ => Error::Service {
            status,
            code: code.to_owned(),
            message: message.to_owned(),
        },
    }
}

/// The error for a Blob or Queue service's own error code, if `code` is one.
fn blob_or_queue_error(code: &str, target: &Target<'_>) -> Option<Error> {
    let blob = |make: fn(String, String) -> Error| {
        make(target.container.to_owned(), target.blob.to_owned())
    };
    Some(match code {
        "ContainerNotFound" => Error::ContainerNotFound {
            container: target.container.to_owned(),
        },
        "ContainerAlreadyExists" => Error::ContainerAlreadyExists {
            container: target.container.to_owned(),
        },
        "BlobNotFound" => blob(|container, name| Error::BlobNotFound { container, name }),
        "BlobAlreadyExists" => blob(|container, name| Error::BlobAlreadyExists { container, name }),
        "ConditionNotMet" => blob(|container, name| Error::BlobConditionNotMet { container, name }),
        "QueueNotFound" => Error::QueueNotFound {
            queue: target.queue.to_owned(),
        },
        "QueueBeingDeleted" => Error::QueueBeingDeleted {
            queue: target.queue.to_owned(),
        },
        "MessageNotFound" => Error::MessageNotFound {
            queue: target.queue.to_owned(),
            id: target.message.to_owned(),
        },
        "PopReceiptMismatch" => Error::PopReceiptMismatch {
            queue: target.queue.to_owned(),
            id: target.message.to_owned(),
        },
        "MessageTooLarge" => Error::Invalid(tablekit_core::InvalidInput::MessageTooLarge {
            bytes: tablekit_core::queue::MAX_MESSAGE_BYTES + 1,
            max: tablekit_core::queue::MAX_MESSAGE_BYTES,
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_the_documented_codes() {
        // A JSON error body, as the service sends it.
        let body = r#"{"odata.error":{"code":"EntityAlreadyExists","message":{"lang":"en-US","value":"The specified entity already exists.\nRequestId:x\nTime:y"}}}"#;
        let (code, message) = table_error_body(body);
        assert_eq!(code, "EntityAlreadyExists");
        assert!(message.starts_with("The specified entity already exists."));
        let entity = Target {
            table: "ops",
            partition_key: "p",
            row_key: "r1",
            ..Target::default()
        };
        assert!(
            matches!(map(409, &code, &message, entity, None), Error::EntityAlreadyExists { ref row_key, .. } if row_key == "r1")
        );
        assert!(matches!(
            map(412, "UpdateConditionNotSatisfied", "", entity, None),
            Error::PreconditionFailed { .. }
        ));
        assert!(matches!(
            map(404, "ResourceNotFound", "", entity, None),
            Error::EntityNotFound { .. }
        ));
        let table = Target {
            table: "ops",
            ..Target::default()
        };
        assert!(matches!(
            map(404, "ResourceNotFound", "", table, None),
            Error::TableNotFound { .. }
        ));
        assert!(matches!(
            map(404, "TableNotFound", "", entity, None),
            Error::TableNotFound { .. }
        ));
        assert!(matches!(
            map(409, "TableBeingDeleted", "", table, None),
            Error::TableBeingDeleted { .. }
        ));
        assert!(matches!(
            map(503, "ServerBusy", "", table, Some(Duration::from_secs(2))),
            Error::Throttled {
                retry_after: Some(_)
            }
        ));
        assert!(matches!(
            map(429, "TooManyRequests", "", table, Some(Duration::from_millis(120))),
            Error::Throttled { retry_after: Some(d) } if d == Duration::from_millis(120)
        ));
        assert!(map(500, "InternalError", "", table, None).is_transient());
        assert!(matches!(
            map(400, "InvalidInput", "bad", table, None),
            Error::Service { status: 400, .. }
        ));
    }

    #[test]
    fn blob_errors() {
        // The Blob service's XML error bodies.
        let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>BlobAlreadyExists</Code><Message>The specified blob already exists.</Message></Error>";
        let (code, message) = blob_error_body(body);
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("BlobAlreadyExists", "The specified blob already exists.")
        );
        let target = Target {
            container: "c",
            blob: "b",
            ..Target::default()
        };
        assert!(matches!(
            map(409, &code, &message, target, None),
            Error::BlobAlreadyExists { .. }
        ));
        assert!(matches!(
            map(412, "ConditionNotMet", "", target, None),
            Error::BlobConditionNotMet { .. }
        ));
        assert!(matches!(
            map(404, "BlobNotFound", "", target, None),
            Error::BlobNotFound { .. }
        ));
        assert!(matches!(
            map(404, "ContainerNotFound", "", target, None),
            Error::ContainerNotFound { .. }
        ));
        assert_eq!(blob_error_body("not xml"), (String::new(), String::new()));
    }

    #[test]
    fn a_refused_sign_in_keeps_the_services_reason() {
        let json = r#"{"odata.error":{"code":"AuthenticationFailed","message":{"lang":"en-US","value":"Server failed to authenticate the request."},"AuthenticationErrorDetail":"Invalid token audience."}}"#;
        assert_eq!(
            table_error_body(json),
            (
                "AuthenticationFailed".to_owned(),
                "Server failed to authenticate the request. (Invalid token audience.)".to_owned()
            )
        );
        // The XML form, where a table request is answered before its
        // format is read.
        let xml = "<?xml version=\"1.0\"?><Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request.</Message><AuthenticationErrorDetail>Invalid token audience.</AuthenticationErrorDetail></Error>";
        assert_eq!(table_error_body(xml), table_error_body(json));
        assert_eq!(blob_error_body(xml), table_error_body(json));
        let bare = "<Error><Code>AuthenticationFailed</Code><AuthenticationErrorDetail>Token expired.</AuthenticationErrorDetail></Error>";
        assert_eq!(blob_error_body(bare).1, "Token expired.");
        assert_eq!(table_error_body(""), (String::new(), String::new()));
    }
}

//! The Queue client's requests, byte for byte, against a mock server:
//! receipts and ids encoded, texts escaped, requests signed; the service's
//! errors typed; a put never sent twice.

mod mock;

use std::time::Duration;

use tablekit::Error;
use tablekit::queue::{MessageTtl, PutMessageOptions, QueueStore};
use tablekit_azure::AzureQueues;
use tablekit_azure::auth::{self, BlobSignedHeaders};
use tablekit_azure::config::Credentials;

use mock::{Answer, Mock, respond};

fn queues(mock: &Mock) -> AzureQueues {
    AzureQueues::with_options(mock.account.clone(), mock::fast_retries()).unwrap()
}

fn xml_error(status: &str, code: &str) -> Answer {
    respond(
        status,
        &[
            ("Content-Type", "application/xml"),
            ("x-ms-error-code", code),
        ],
        &format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code><Message>{code}</Message></Error>"
        ),
    )
}

const SENT: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage><MessageId>m-1</MessageId><InsertionTime>Mon, 23 Nov 2026 10:00:00 GMT</InsertionTime><ExpirationTime>Mon, 30 Nov 2026 10:00:00 GMT</ExpirationTime><PopReceipt>AgAAAA+/=</PopReceipt><TimeNextVisible>Mon, 23 Nov 2026 10:00:05 GMT</TimeNextVisible></QueueMessage></QueueMessagesList>";

#[tokio::test]
async fn puts_escape_the_text_and_sign_the_request() {
    let mock = Mock::start(vec![respond("201 Created", &[], SENT)]).await;
    let options = PutMessageOptions::default()
        .delay(Duration::from_secs(5))
        .ttl(MessageTtl::Never);
    let sent = queues(&mock)
        .put_message("jobs", "a<b>&c\r\n", &options)
        .await
        .unwrap();
    assert_eq!(sent.id, "m-1");
    assert_eq!(sent.pop_receipt, "AgAAAA+/=");
    let seen = mock.seen();
    let request = &seen[0];
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.target,
        "/jobs/messages?visibilitytimeout=5&messagettl=-1"
    );
    assert_eq!(
        request.body,
        "<QueueMessage><MessageText>a&lt;b&gt;&amp;c&#xD;\n</MessageText></QueueMessage>"
    );
    // Signed as the Blob and Queue services document it.
    let key = match &mock.account.credentials {
        Credentials::SharedKey { key } => key.clone(),
        _ => unreachable!("the mock signs with a key"),
    };
    let date = request.header("x-ms-date").unwrap();
    let version = request.header("x-ms-version").unwrap();
    // The request's id is an `x-ms-` header: signed too.
    let id = request.header("x-ms-client-request-id").unwrap();
    assert!(tablekit::uuid::Uuid::parse_str(id).is_ok(), "{id}");
    let headers = BlobSignedHeaders {
        content_length: request.body.len() as u64,
        content_type: "application/xml",
        ..BlobSignedHeaders::default()
    };
    let text = auth::blob_string_to_sign(
        "POST",
        &headers,
        &[
            ("x-ms-client-request-id", id),
            ("x-ms-date", date),
            ("x-ms-version", version),
        ],
        "mockacct",
        "/jobs/messages",
        &[("visibilitytimeout", "5"), ("messagettl", "-1")],
    );
    assert_eq!(
        request.header("authorization"),
        Some(auth::shared_key_header("mockacct", &key, &text).as_str())
    );
}

#[tokio::test]
async fn receipts_and_ids_are_encoded() {
    let mock = Mock::start(vec![
        respond(
            "204 No Content",
            &[
                ("x-ms-popreceipt", "new+/="),
                ("x-ms-time-next-visible", "Mon, 23 Nov 2026 10:00:30 GMT"),
            ],
            "",
        ),
        respond("204 No Content", &[], ""),
    ])
    .await;
    let queues = queues(&mock);
    let update = queues
        .update_message(
            "jobs",
            "id with space",
            "r+/=",
            Duration::from_secs(30),
            None,
        )
        .await
        .unwrap();
    assert_eq!(update.pop_receipt, "new+/=");
    queues
        .delete_message("jobs", "id", &update.pop_receipt)
        .await
        .unwrap();
    let seen = mock.seen();
    assert_eq!(
        seen[0].target,
        "/jobs/messages/id%20with%20space?popreceipt=r%2B%2F%3D&visibilitytimeout=30"
    );
    assert_eq!(seen[0].method, "PUT");
    assert_eq!(seen[1].target, "/jobs/messages/id?popreceipt=new%2B%2F%3D");
    assert_eq!(seen[1].method, "DELETE");
}

#[tokio::test]
async fn service_errors_are_typed() {
    let mock = Mock::start(vec![
        xml_error("404 The specified queue does not exist.", "QueueNotFound"),
        xml_error(
            "404 The specified message does not exist.",
            "MessageNotFound",
        ),
        xml_error(
            "400 The specified pop receipt did not match.",
            "PopReceiptMismatch",
        ),
        xml_error(
            "409 The specified queue is being deleted.",
            "QueueBeingDeleted",
        ),
    ])
    .await;
    let queues = queues(&mock);
    assert!(matches!(
        queues.peek_messages("jobs", 1).await,
        Err(Error::QueueNotFound { queue }) if queue == "jobs"
    ));
    assert!(matches!(
        queues.delete_message("jobs", "m-1", "r").await,
        Err(Error::MessageNotFound { queue, id }) if queue == "jobs" && id == "m-1"
    ));
    assert!(matches!(
        queues.delete_message("jobs", "m-1", "r").await,
        Err(Error::PopReceiptMismatch { id, .. }) if id == "m-1"
    ));
    assert!(matches!(
        queues.create_queue("jobs").await,
        Err(Error::QueueBeingDeleted { .. })
    ));
}

/// A put that may have reached the service is not sent again: that could
/// put the message twice. A peek is.
#[tokio::test]
async fn puts_are_never_sent_twice() {
    let mock = Mock::start(vec![
        xml_error("500 Internal Server Error", "InternalError"),
        xml_error("500 Internal Server Error", "InternalError"),
        respond("200 OK", &[], "<QueueMessagesList></QueueMessagesList>"),
    ])
    .await;
    let queues = queues(&mock);
    assert!(matches!(
        queues
            .put_message("jobs", "once", &PutMessageOptions::default())
            .await,
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(mock.seen().len(), 1);
    assert!(queues.peek_messages("jobs", 1).await.unwrap().is_empty());
    assert_eq!(mock.seen().len(), 3, "the peek was retried");
}

#[tokio::test]
async fn invalid_input_is_refused_before_anything_is_sent() {
    let mock = Mock::start(vec![]).await;
    let queues = queues(&mock);
    assert!(matches!(
        queues.create_queue("Bad_Name").await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        queues
            .put_message("jobs", "\u{0}", &PutMessageOptions::default())
            .await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        queues
            .get_messages("jobs", 33, Duration::from_secs(30))
            .await,
        Err(Error::Invalid(_))
    ));
    assert!(mock.seen().is_empty());
}

//! `QueueStore` over the Queue service's REST API.
//!
//! Written here rather than taken from the `azure_storage_queue` crate: it
//! shares this crate's transport (one HTTP client, the retry policy, the
//! request spans, the Shared Key signer the Blob service already uses, SAS
//! tokens and the emulator's path-style URLs), and adds no SDK stack to
//! the build.

use std::sync::Arc;
use std::time::Duration;

use crate::transport::Method;
use bytes::Bytes;
use tablekit_core::queue::{
    ListQueuesOptions, MessageTtl, MessageUpdate, PeekedMessage, PutMessageOptions, QueueMessage,
    QueuePage, SentMessage,
};
use tablekit_core::{DateTime, Error, Result};

use crate::config::{Account, ClientOptions, ConfigError};
use crate::errors::Target;
use crate::policy::Idempotence;
use crate::storage::{Call, Reply, Service};
use crate::url;

/// The Queue service version spoken.
pub const QUEUE_VERSION: &str = "2021-08-06";

/// A Queue service account as a [`QueueStore`](tablekit_core::QueueStore). Clones share one
/// connection pool.
///
/// ```
/// let queues = tablekit_azure::AzureQueues::from_connection_string("UseDevelopmentStorage=true")?;
/// # Ok::<(), tablekit_azure::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct AzureQueues {
    service: Arc<Service>,
    /// Send message texts in ASCII alone (see [`AzureQueues::with_ascii_bodies`]).
    ascii_bodies: bool,
}

impl AzureQueues {
    /// A client for `account` with the default [`ClientOptions::tables`]
    /// timeouts and retries.
    ///
    /// Fails with [`ConfigError::Missing`] when the account has no queue
    /// endpoint (a SAS connection string that names none).
    pub fn new(account: Account) -> Result<AzureQueues, ConfigError> {
        AzureQueues::with_options(account, ClientOptions::tables())
    }

    /// A client from a connection string: its `QueueEndpoint`, or the one
    /// the account name implies.
    pub fn from_connection_string(text: &str) -> Result<AzureQueues, ConfigError> {
        AzureQueues::with_options(
            Account::from_connection_string(text)?,
            ClientOptions::tables().with_connection_string(text)?,
        )
    }

    /// A client for `account` with the given timeouts and retry policy.
    pub fn with_options(
        account: Account,
        options: ClientOptions,
    ) -> Result<AzureQueues, ConfigError> {
        let endpoint = account
            .queue_endpoint
            .clone()
            .ok_or(ConfigError::Missing("QueueEndpoint"))?;
        let ascii_bodies = account.is_emulator(&endpoint);
        Ok(AzureQueues {
            ascii_bodies,
            // Getting messages is a GET that changes them: nothing goes to
            // a read-only secondary.
            service: Arc::new(Service::new(
                account,
                endpoint,
                None,
                &options,
                QUEUE_VERSION,
                "azure.queues",
            )?),
        })
    }

    /// The account this client talks to.
    pub fn account(&self) -> &Account {
        &self.service.account
    }

    /// Whether message texts are sent in ASCII alone, every other
    /// character written as an XML character reference (`&#xE9;`). On by
    /// default for the emulator ([`Account::is_emulator`]), off for the
    /// service.
    ///
    /// Azurite decodes each piece of a request body as it arrives, so a
    /// character of several bytes that falls across two pieces is stored as
    /// replacement characters, with no error (Azure/Azurite#2670); a
    /// message near 64 KiB is then even refused as too large. An ASCII
    /// body has no such character, and the text it carries is the same.
    pub fn with_ascii_bodies(mut self, on: bool) -> AzureQueues {
        self.ascii_bodies = on;
        self
    }

    async fn send(&self, call: Call<'_>) -> Result<Reply> {
        self.service.send(call).await
    }
}

fn messages_path(queue: &str) -> String {
    format!("/{queue}/messages")
}

fn message_path(queue: &str, id: &str) -> String {
    format!("/{queue}/messages/{}", url::encode(id))
}

/// A message's text as the body of a put or update. Besides the five
/// entities, a carriage return is written as a character reference: an XML
/// reader turns a literal one (and `\r\n`) into `\n`, which would change
/// the text. With `ascii`, so is every character outside ASCII.
fn message_body(text: &str, ascii: bool) -> Bytes {
    let mut body = String::with_capacity(text.len() + 64);
    body.push_str("<QueueMessage><MessageText>");
    for c in text.chars() {
        match c {
            '&' => body.push_str("&amp;"),
            '<' => body.push_str("&lt;"),
            '>' => body.push_str("&gt;"),
            '\r' => body.push_str("&#xD;"),
            c if ascii => crate::ascii::push_xml_char(&mut body, c),
            c => body.push(c),
        }
    }
    body.push_str("</MessageText></QueueMessage>");
    Bytes::from(body)
}

fn decode_error(what: &str) -> Error {
    Error::Decode {
        message: format!("a queue response without a readable {what}"),
    }
}

/// The raw text of the first `<name>…</name>` in `xml`, or of `<name/>`
/// (empty).
fn element<'x>(xml: &'x str, name: &str) -> Option<&'x str> {
    if xml.contains(&format!("<{name} />")) || xml.contains(&format!("<{name}/>")) {
        return Some("");
    }
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let (_, rest) = xml.split_once(&open)?;
    rest.split_once(&close).map(|(text, _)| text)
}

/// The text of element `name`, unescaped (entities and character
/// references, through quick-xml).
fn text_of(xml: &str, name: &str) -> Result<String> {
    let raw = element(xml, name).ok_or_else(|| decode_error(name))?;
    quick_xml::escape::unescape(raw)
        .map(|text| text.into_owned())
        .map_err(|e| Error::Decode {
            message: format!("the {name} of a queue response: {e}"),
        })
}

fn time_of(xml: &str, name: &str) -> Result<DateTime> {
    let text = element(xml, name).ok_or_else(|| decode_error(name))?;
    httpdate::parse_http_date(text.trim())
        .map(DateTime::from)
        .map_err(|_| decode_error(name))
}

fn count_of(xml: &str) -> Result<u32> {
    element(xml, "DequeueCount")
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| decode_error("DequeueCount"))
}

/// The `<QueueMessage>` blocks of a `<QueueMessagesList>`. Hand-split: the
/// list is flat, and a message's text cannot hold `<`, which is escaped.
fn message_blocks(xml: &str) -> impl Iterator<Item = &str> {
    xml.split("<QueueMessage>")
        .skip(1)
        .map(|block| block.split("</QueueMessage>").next().unwrap_or_default())
}

fn parse_sent(xml: &str) -> Result<SentMessage> {
    let block = message_blocks(xml)
        .next()
        .ok_or_else(|| decode_error("QueueMessage"))?;
    Ok(SentMessage {
        id: text_of(block, "MessageId")?,
        pop_receipt: text_of(block, "PopReceipt")?,
        inserted: time_of(block, "InsertionTime")?,
        expires: time_of(block, "ExpirationTime")?,
        next_visible: time_of(block, "TimeNextVisible")?,
    })
}

fn parse_messages(xml: &str) -> Result<Vec<QueueMessage>> {
    message_blocks(xml)
        .map(|block| {
            Ok(QueueMessage {
                id: text_of(block, "MessageId")?,
                pop_receipt: text_of(block, "PopReceipt")?,
                dequeue_count: count_of(block)?,
                inserted: time_of(block, "InsertionTime")?,
                expires: time_of(block, "ExpirationTime")?,
                next_visible: time_of(block, "TimeNextVisible")?,
                text: text_of(block, "MessageText")?,
            })
        })
        .collect()
}

fn parse_peeked(xml: &str) -> Result<Vec<PeekedMessage>> {
    message_blocks(xml)
        .map(|block| {
            Ok(PeekedMessage {
                id: text_of(block, "MessageId")?,
                dequeue_count: count_of(block)?,
                inserted: time_of(block, "InsertionTime")?,
                expires: time_of(block, "ExpirationTime")?,
                text: text_of(block, "MessageText")?,
            })
        })
        .collect()
}

fn parse_listing(xml: &str) -> Result<QueuePage> {
    let mut page = QueuePage::default();
    for block in xml.split("<Queue>").skip(1) {
        let block = block.split("</Queue>").next().unwrap_or_default();
        page.queues.push(text_of(block, "Name")?);
    }
    page.next_marker = element(xml, "NextMarker")
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    Ok(page)
}

fn seconds(duration: Duration) -> String {
    duration.as_secs().to_string()
}

tablekit_core::serve!(AzureQueues, info: |this| this.service.store.clone(), contracts: [QueueStore]);

impl tablekit_core::layer::RawQueues for AzureQueues {
    async fn create_queue(&self, queue: &str) -> Result<bool> {
        let call = Call::new(
            Method::PUT,
            format!("/{queue}"),
            Target::queue(queue),
            Idempotence::Idempotent,
        );
        // 201: created; 204: it existed.
        Ok(self.send(call).await?.status == 201)
    }

    async fn delete_queue(&self, queue: &str) -> Result<()> {
        let call = Call::new(
            Method::DELETE,
            format!("/{queue}"),
            Target::queue(queue),
            Idempotence::NotIdempotent,
        );
        self.send(call).await.map(drop)
    }

    async fn list_queues(&self, options: &ListQueuesOptions) -> Result<QueuePage> {
        let mut call = Call::new(
            Method::GET,
            "/".into(),
            Target::default(),
            Idempotence::Idempotent,
        );
        call.list(
            options.prefix.as_ref(),
            options.max_results,
            options.marker.as_ref(),
        );
        let reply = self.send(call).await?;
        parse_listing(&String::from_utf8_lossy(&reply.body))
    }

    async fn put_message(
        &self,
        queue: &str,
        text: &str,
        options: &PutMessageOptions,
    ) -> Result<SentMessage> {
        // A put sent twice is two messages: it is not retried once it may
        // have reached the service.
        let mut call = Call::new(
            Method::POST,
            messages_path(queue),
            Target::queue(queue),
            Idempotence::NotIdempotent,
        );
        call.query
            .push(("visibilitytimeout", seconds(options.visibility_delay)));
        match options.ttl {
            MessageTtl::Default => {}
            MessageTtl::After(ttl) => call.query.push(("messagettl", seconds(ttl))),
            MessageTtl::Never => call.query.push(("messagettl", "-1".into())),
        }
        call.content_type = "application/xml";
        call.body = message_body(text, self.ascii_bodies);
        let reply = self.send(call).await?;
        parse_sent(&String::from_utf8_lossy(&reply.body))
    }

    async fn get_messages(
        &self,
        queue: &str,
        count: u32,
        visibility_timeout: Duration,
    ) -> Result<Vec<QueueMessage>> {
        // Sent again after a lost answer, a get hides other messages (or
        // the same ones again) for the timeout: they come back later, as
        // at-least-once delivery allows.
        let mut call = Call::new(
            Method::GET,
            messages_path(queue),
            Target::queue(queue),
            Idempotence::Idempotent,
        );
        call.query.push(("numofmessages", count.to_string()));
        call.query
            .push(("visibilitytimeout", seconds(visibility_timeout)));
        let reply = self.send(call).await?;
        parse_messages(&String::from_utf8_lossy(&reply.body))
    }

    async fn peek_messages(&self, queue: &str, count: u32) -> Result<Vec<PeekedMessage>> {
        let mut call = Call::new(
            Method::GET,
            messages_path(queue),
            Target::queue(queue),
            Idempotence::Idempotent,
        );
        call.query.push(("peekonly", "true".into()));
        call.query.push(("numofmessages", count.to_string()));
        let reply = self.send(call).await?;
        parse_peeked(&String::from_utf8_lossy(&reply.body))
    }

    async fn update_message(
        &self,
        queue: &str,
        id: &str,
        pop_receipt: &str,
        visibility_timeout: Duration,
        text: Option<&str>,
    ) -> Result<MessageUpdate> {
        // Not retried: a retry would carry the receipt the first attempt
        // used up.
        let mut call = Call::new(
            Method::PUT,
            message_path(queue, id),
            Target::message(queue, id),
            Idempotence::NotIdempotent,
        );
        call.query.push(("popreceipt", pop_receipt.to_owned()));
        call.query
            .push(("visibilitytimeout", seconds(visibility_timeout)));
        if let Some(text) = text {
            call.content_type = "application/xml";
            call.body = message_body(text, self.ascii_bodies);
        }
        let reply = self.send(call).await?;
        let pop_receipt = reply
            .header("x-ms-popreceipt")
            .ok_or_else(|| decode_error("x-ms-popreceipt"))?
            .to_owned();
        let next_visible = reply
            .header("x-ms-time-next-visible")
            .and_then(|t| httpdate::parse_http_date(t).ok())
            .map(DateTime::from)
            .ok_or_else(|| decode_error("x-ms-time-next-visible"))?;
        Ok(MessageUpdate {
            pop_receipt,
            next_visible,
        })
    }

    async fn delete_message(&self, queue: &str, id: &str, pop_receipt: &str) -> Result<()> {
        let mut call = Call::new(
            Method::DELETE,
            message_path(queue, id),
            Target::message(queue, id),
            Idempotence::NotIdempotent,
        );
        call.query.push(("popreceipt", pop_receipt.to_owned()));
        self.send(call).await.map(drop)
    }

    async fn clear_messages(&self, queue: &str) -> Result<()> {
        let call = Call::new(
            Method::DELETE,
            messages_path(queue),
            Target::queue(queue),
            Idempotence::Idempotent,
        );
        self.send(call).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_bodies_keep_every_character() {
        let body = message_body("a<b>&c\r\n\"d'\u{e9}", false);
        assert_eq!(
            &body[..],
            "<QueueMessage><MessageText>a&lt;b&gt;&amp;c&#xD;\n\"d'\u{e9}</MessageText></QueueMessage>".as_bytes()
        );
        let body = message_body("a<\r\u{e9}\u{1f600}", true);
        assert_eq!(
            &body[..],
            b"<QueueMessage><MessageText>a&lt;&#xD;&#xE9;&#x1F600;</MessageText></QueueMessage>"
        );
    }

    /// Responses in the service's documented form.
    #[test]
    fn reads_messages_and_listings() {
        let got = "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage><MessageId>5974b586-0df3-4e2d-ad0c-18e3892bfca2</MessageId><InsertionTime>Fri, 09 Oct 2009 21:04:30 GMT</InsertionTime><ExpirationTime>Fri, 16 Oct 2009 21:04:30 GMT</ExpirationTime><PopReceipt>YzQ4Yzg1MDItYTc0Ny00OWNjLTkxYTUtZGM0MDFiZDAwYzEw</PopReceipt><TimeNextVisible>Fri, 09 Oct 2009 23:29:20 GMT</TimeNextVisible><DequeueCount>2</DequeueCount><MessageText>a&amp;b&#xD;&#13;&lt;</MessageText></QueueMessage></QueueMessagesList>";
        let messages = parse_messages(got).unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].id, "5974b586-0df3-4e2d-ad0c-18e3892bfca2");
        assert_eq!(messages[0].dequeue_count, 2);
        assert_eq!(messages[0].text, "a&b\r\r<");
        assert_eq!(
            messages[0].inserted,
            DateTime::parse("2009-10-09T21:04:30Z").unwrap()
        );
        let peeked = parse_peeked(got).unwrap();
        assert_eq!(peeked[0].text, "a&b\r\r<");
        let sent = parse_sent(got).unwrap();
        assert_eq!(
            sent.pop_receipt,
            "YzQ4Yzg1MDItYTc0Ny00OWNjLTkxYTUtZGM0MDFiZDAwYzEw"
        );
        assert!(
            parse_messages("<QueueMessagesList />").unwrap().is_empty(),
            "no messages"
        );
        let empty_text = parse_messages(&got.replace("a&amp;b&#xD;&#13;&lt;", "")).unwrap();
        assert_eq!(empty_text[0].text, "");
        assert!(matches!(
            parse_messages(&got.replace("<DequeueCount>2", "<DequeueCount>x")),
            Err(Error::Decode { .. })
        ));
        let listing = "<EnumerationResults ServiceEndpoint=\"x\"><Prefix>a</Prefix><MaxResults>2</MaxResults><Queues><Queue><Name>a-1</Name></Queue><Queue><Name>a-2</Name></Queue></Queues><NextMarker>/devstoreaccount1/a-3</NextMarker></EnumerationResults>";
        let page = parse_listing(listing).unwrap();
        assert_eq!(page.queues, ["a-1", "a-2"]);
        assert_eq!(page.next_marker.as_deref(), Some("/devstoreaccount1/a-3"));
        let last =
            parse_listing("<EnumerationResults><Queues /><NextMarker /></EnumerationResults>")
                .unwrap();
        assert!(last.queues.is_empty() && last.next_marker.is_none());
    }
}

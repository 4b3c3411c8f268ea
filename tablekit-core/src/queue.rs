//! The queue contract: one method per Queue service operation, like
//! [`TableBackend`](crate::TableBackend) for tables and
//! [`BlobStore`](crate::BlobStore) for blobs.
//!
//! A queue carries the changes that one entity group transaction cannot
//! make: steps in other partitions or tables, applied later by a worker.
//! Its delivery is **at least once** and not strictly in order:
//!
//! - [`get_messages`](QueueStore::get_messages) hides the messages it
//!   returns for a visibility timeout, raises their dequeue count and gives
//!   each a new pop receipt;
//! - a message that is not deleted (with its latest pop receipt) before the
//!   timeout ends is delivered again, to the same or another receiver;
//! - so whatever a message asks for must be safe to do twice.
//!
//! ```
//! use std::time::Duration;
//! use tablekit::queue::{PutMessageOptions, QueueStore};
//! use tablekit_mem::MemQueueStore;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let queues = MemQueueStore::new();
//! queues.create_queue("moves").await?;
//! queues.put_message("moves", "employee 223 to Sales", &PutMessageOptions::default()).await?;
//! let got = queues.get_messages("moves", 32, Duration::from_secs(30)).await?;
//! assert_eq!(got[0].text, "employee 223 to Sales");
//! assert_eq!(got[0].dequeue_count, 1);
//! // Done with it: delete it with the receipt of this delivery.
//! queues.delete_message("moves", &got[0].id, &got[0].pop_receipt).await?;
//! # Ok(())
//! # }
//! ```

use std::fmt;

use std::time::Duration;

use async_trait::async_trait;

use crate::datetime::DateTime;
use crate::error::Result;

pub use crate::validate::limits::{
    DEFAULT_TTL, MAX_MESSAGE_BYTES, MAX_MESSAGES_PER_GET, MAX_VISIBILITY,
};
/// The visibility timeout of a get that names none, as on the service.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a message lives in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageTtl {
    /// The service's default: 7 days.
    #[default]
    Default,
    /// This long (whole seconds, at least 1).
    After(Duration),
    /// Until it is deleted.
    Never,
}

/// Options of [`put_message`](QueueStore::put_message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PutMessageOptions {
    /// How long the message stays invisible after the put (whole seconds,
    /// 0 to 7 days, and less than its time to live).
    pub visibility_delay: Duration,
    /// How long the message lives.
    pub ttl: MessageTtl,
}

impl PutMessageOptions {
    /// Delays the message's first delivery by `delay`.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> PutMessageOptions {
        self.visibility_delay = delay;
        self
    }

    /// Sets how long the message lives.
    #[must_use]
    pub fn ttl(mut self, ttl: MessageTtl) -> PutMessageOptions {
        self.ttl = ttl;
        self
    }
}

/// What a put returns: the new message's id and a pop receipt that can
/// update or delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// The message's id.
    pub id: String,
    /// A receipt for [`update_message`](QueueStore::update_message) and
    /// [`delete_message`](QueueStore::delete_message).
    pub pop_receipt: String,
    /// When it was put.
    pub inserted: DateTime,
    /// When it expires ([`DateTime::MAX`]'s day for a message that never does).
    pub expires: DateTime,
    /// When it becomes visible.
    pub next_visible: DateTime,
}

/// A message as [`get_messages`](QueueStore::get_messages) delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// The message's id, the same on every delivery.
    pub id: String,
    /// The receipt of this delivery; the only one that can update or delete
    /// the message until it is delivered again or updated.
    pub pop_receipt: String,
    /// How many times it has been delivered, this time included.
    pub dequeue_count: u32,
    /// When it was put.
    pub inserted: DateTime,
    /// When it expires.
    pub expires: DateTime,
    /// When it becomes visible again unless deleted or updated.
    pub next_visible: DateTime,
    /// Its text.
    pub text: String,
}

/// A message as [`peek_messages`](QueueStore::peek_messages) shows it: no
/// receipt, visibility unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekedMessage {
    /// The message's id.
    pub id: String,
    /// How many times it has been delivered.
    pub dequeue_count: u32,
    /// When it was put.
    pub inserted: DateTime,
    /// When it expires.
    pub expires: DateTime,
    /// Its text.
    pub text: String,
}

/// What an update returns: the message's new receipt and visibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageUpdate {
    /// The new receipt; the one the update used no longer works.
    pub pop_receipt: String,
    /// When the message becomes visible again.
    pub next_visible: DateTime,
}

/// Options of a queue listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListQueuesOptions {
    /// Only names starting with this.
    pub prefix: Option<String>,
    /// At most this many in one page (1–5,000).
    pub max_results: Option<u32>,
    /// Where to resume, from a previous page's `next_marker`.
    pub marker: Option<String>,
}

impl ListQueuesOptions {
    /// The page size asked for: `max_results`, or 5,000 (at most 5,000).
    pub fn page_size(&self) -> u32 {
        let max = crate::validate::limits::MAX_LIST_RESULTS;
        self.max_results.unwrap_or(max).min(max)
    }

    /// Lists names starting with `prefix`.
    pub fn prefix(prefix: impl Into<String>) -> ListQueuesOptions {
        ListQueuesOptions {
            prefix: Some(prefix.into()),
            ..ListQueuesOptions::default()
        }
    }
}

/// One page of a queue listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueuePage {
    /// Queue names, sorted.
    pub queues: Vec<String>,
    /// Where the next page starts; `None` when this was the last page.
    pub next_marker: Option<String>,
}

/// A queue service, one method per REST operation.
///
/// # Contract
/// Run the validators of [`crate::validate`] (`queue_name`,
/// `message_text`, `message_count`, `visibility`) and of [`checks`]
/// (`put_message`, `message_ttl`) first, so
/// that bad input gets the same typed error on every backend; map the
/// service's errors onto [`Error`](crate::Error)'s queue variants.
#[async_trait]
pub trait QueueStore: Send + Sync + fmt::Debug {
    /// Creates a queue: `true` if it was created, `false` if it existed.
    /// REST: `PUT /{queue}` (201 or 204).
    ///
    /// Errors: [`QueueBeingDeleted`](crate::Error::QueueBeingDeleted).
    async fn create_queue(&self, queue: &str) -> Result<bool>;

    /// Deletes a queue and its messages. REST: `DELETE /{queue}`.
    ///
    /// Errors: [`QueueNotFound`](crate::Error::QueueNotFound).
    async fn delete_queue(&self, queue: &str) -> Result<()>;

    /// Lists queues by name prefix, one page at a time. REST:
    /// `GET /?comp=list&prefix=…&maxresults=…&marker=…`.
    async fn list_queues(&self, options: &ListQueuesOptions) -> Result<QueuePage>;

    /// Puts a message. REST: `POST /{queue}/messages?visibilitytimeout=…&messagettl=…`.
    ///
    /// Errors: [`QueueNotFound`](crate::Error::QueueNotFound).
    async fn put_message(
        &self,
        queue: &str,
        text: &str,
        options: &PutMessageOptions,
    ) -> Result<SentMessage>;

    /// Delivers up to `count` (1–32) visible messages, hiding each for
    /// `visibility_timeout` (1 s to 7 days). REST:
    /// `GET /{queue}/messages?numofmessages=…&visibilitytimeout=…`.
    ///
    /// Fewer than `count` is normal; none is an empty list.
    async fn get_messages(
        &self,
        queue: &str,
        count: u32,
        visibility_timeout: Duration,
    ) -> Result<Vec<QueueMessage>>;

    /// Shows up to `count` (1–32) visible messages without delivering
    /// them. REST: `GET /{queue}/messages?peekonly=true&numofmessages=…`.
    async fn peek_messages(&self, queue: &str, count: u32) -> Result<Vec<PeekedMessage>>;

    /// Hides a delivered message again for `visibility_timeout` (0 to 7
    /// days), and replaces its text if `text` is given. REST:
    /// `PUT /{queue}/messages/{id}?popreceipt=…&visibilitytimeout=…`.
    ///
    /// Errors: [`MessageNotFound`](crate::Error::MessageNotFound) when the
    /// message is gone, [`PopReceiptMismatch`](crate::Error::PopReceiptMismatch)
    /// when `pop_receipt` is not its latest.
    async fn update_message(
        &self,
        queue: &str,
        id: &str,
        pop_receipt: &str,
        visibility_timeout: Duration,
        text: Option<&str>,
    ) -> Result<MessageUpdate>;

    /// Deletes a message. REST: `DELETE /{queue}/messages/{id}?popreceipt=…`.
    ///
    /// Errors: as [`update_message`](QueueStore::update_message).
    async fn delete_message(&self, queue: &str, id: &str, pop_receipt: &str) -> Result<()>;

    /// Deletes every message of a queue. REST: `DELETE /{queue}/messages`.
    async fn clear_messages(&self, queue: &str) -> Result<()>;
}

/// The methods of [`QueueStore`], listed once, as
/// [`table_methods`](crate::backend) lists those of `TableBackend`.
#[doc(hidden)]
#[macro_export]
macro_rules! queue_methods {
    ($($generate:tt)::+ ! ($($args:tt)*)) => {
        $($generate)::+! { $($args)*
            async create_queue(queue: &str) -> $crate::error::Result<bool>, [$crate::backend::Operation::CreateQueue], [false];
            async delete_queue(queue: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::DeleteQueue], [false];
            async list_queues(options: &$crate::queue::ListQueuesOptions)
                -> $crate::error::Result<$crate::queue::QueuePage>, [$crate::backend::Operation::ListQueues], [false];
            async put_message(queue: &str, text: &str, options: &$crate::queue::PutMessageOptions)
                -> $crate::error::Result<$crate::queue::SentMessage>, [$crate::backend::Operation::PutMessage], [false];
            async get_messages(queue: &str, count: u32, visibility_timeout: std::time::Duration)
                -> $crate::error::Result<Vec<$crate::queue::QueueMessage>>, [$crate::backend::Operation::GetMessages], [false];
            async peek_messages(queue: &str, count: u32)
                -> $crate::error::Result<Vec<$crate::queue::PeekedMessage>>, [$crate::backend::Operation::PeekMessages], [false];
            async update_message(
                queue: &str,
                id: &str,
                pop_receipt: &str,
                visibility_timeout: std::time::Duration,
                text: Option<&str>
            ) -> $crate::error::Result<$crate::queue::MessageUpdate>, [$crate::backend::Operation::UpdateMessage], [false];
            async delete_message(queue: &str, id: &str, pop_receipt: &str)
                -> $crate::error::Result<()>, [$crate::backend::Operation::DeleteMessage], [false];
            async clear_messages(queue: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::ClearMessages], [false];
        }
    };
}
pub(crate) use crate::queue_methods;

queue_methods!(crate::backend::forward_impls!(QueueStore));

/// The door checks of the queue contract: one function per method of
/// [`QueueStore`], named as the method and taking its arguments, holding
/// every check its input must pass on every backend, as
/// [`backend::door`](crate::backend::door) does for tables. The
/// [`Served`](crate::layer::Served) layer calls them; no backend does.
pub mod door {
    use std::time::Duration;

    use super::{ListQueuesOptions, PutMessageOptions};
    use crate::error::InvalidInput;
    use crate::validate;

    /// [`create_queue`](super::QueueStore::create_queue): the queue's name.
    pub fn create_queue(queue: &str) -> Result<(), InvalidInput> {
        validate::queue_name(queue)
    }

    /// [`delete_queue`](super::QueueStore::delete_queue): the queue's name.
    pub fn delete_queue(queue: &str) -> Result<(), InvalidInput> {
        validate::queue_name(queue)
    }

    /// [`clear_messages`](super::QueueStore::clear_messages): the queue's
    /// name.
    pub fn clear_messages(queue: &str) -> Result<(), InvalidInput> {
        validate::queue_name(queue)
    }

    /// [`list_queues`](super::QueueStore::list_queues): the page size
    /// (1–5,000).
    pub fn list_queues(options: &ListQueuesOptions) -> Result<(), InvalidInput> {
        validate::list_page_size(options.max_results).map(drop)
    }

    /// [`put_message`](super::QueueStore::put_message): the queue's name,
    /// the text, the delay and the time to live.
    pub fn put_message(
        queue: &str,
        text: &str,
        options: &PutMessageOptions,
    ) -> Result<(), InvalidInput> {
        super::checks::put_message(queue, text, options)
    }

    /// [`get_messages`](super::QueueStore::get_messages): the queue's name,
    /// the count (1–32) and the visibility timeout.
    pub fn get_messages(
        queue: &str,
        count: u32,
        visibility_timeout: Duration,
    ) -> Result<(), InvalidInput> {
        validate::get_messages(queue, count, visibility_timeout)
    }

    /// [`peek_messages`](super::QueueStore::peek_messages): the queue's
    /// name and the count (1–32).
    pub fn peek_messages(queue: &str, count: u32) -> Result<(), InvalidInput> {
        validate::peek_messages(queue, count)
    }

    /// [`update_message`](super::QueueStore::update_message): the queue's
    /// name, the message's id and pop receipt, the visibility timeout and
    /// the new text.
    pub fn update_message(
        queue: &str,
        id: &str,
        pop_receipt: &str,
        visibility_timeout: Duration,
        text: Option<&str>,
    ) -> Result<(), InvalidInput> {
        validate::update_message(queue, id, pop_receipt, visibility_timeout, text)
    }

    /// [`delete_message`](super::QueueStore::delete_message): the queue's
    /// name, the message's id and pop receipt.
    pub fn delete_message(queue: &str, id: &str, pop_receipt: &str) -> Result<(), InvalidInput> {
        validate::delete_message(queue, id, pop_receipt)
    }
}

/// The checks of a put that need the queue's own types (the others are in
/// [`validate`](crate::validate)).
pub mod checks {
    use crate::error::InvalidInput;

    /// Checks a put's time to live and its visibility delay together: the TTL
    /// in whole seconds, at least 1; the delay as [`visibility`](crate::validate::visibility) allows it and
    /// shorter than the TTL.
    pub fn message_ttl(
        ttl: super::MessageTtl,
        delay: std::time::Duration,
    ) -> Result<(), InvalidInput> {
        use super::{DEFAULT_TTL, MessageTtl};
        crate::validate::visibility("visibility delay", delay, std::time::Duration::ZERO)?;
        let lifetime = match ttl {
            MessageTtl::Default => DEFAULT_TTL,
            MessageTtl::Never => return Ok(()),
            MessageTtl::After(lifetime) => lifetime,
        };
        let bad = |reason| {
            Err(InvalidInput::QueueDuration {
                what: "time to live",
                duration: lifetime,
                reason,
            })
        };
        if lifetime.subsec_nanos() != 0 {
            return bad("must be whole seconds");
        }
        if lifetime.is_zero() {
            return bad("must be at least 1 second");
        }
        if i64::try_from(lifetime.as_secs()).is_err() {
            return bad("is too long");
        }
        if delay >= lifetime {
            return Err(InvalidInput::QueueDuration {
                what: "visibility delay",
                duration: delay,
                reason: "must be shorter than the message's time to live",
            });
        }
        Ok(())
    }

    /// Checks a Put Message: the queue's name, the text, the delay and the
    /// time to live.
    pub fn put_message(
        queue: &str,
        text: &str,
        options: &super::PutMessageOptions,
    ) -> Result<(), InvalidInput> {
        crate::validate::queue_name(queue)?;
        crate::validate::message_text(text)?;
        message_ttl(options.ttl, options.visibility_delay)
    }
}

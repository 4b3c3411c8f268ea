//! The in-memory queue store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use parking_lot::Mutex;
use tablekit_core::clock::{Clock, SystemClock};
use tablekit_core::queue::{
    DEFAULT_TTL, ListQueuesOptions, MessageTtl, MessageUpdate, PeekedMessage, PutMessageOptions,
    QueueMessage, QueuePage, SentMessage,
};
use tablekit_core::{DateTime, Error, InvalidInput, Result};

/// How long a deleted queue's name cannot be used again.
const QUEUE_DELETION_DELAY: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Message {
    id: String,
    pop_receipt: String,
    dequeue_count: u32,
    inserted: DateTime,
    expires: DateTime,
    next_visible: DateTime,
    text: Arc<str>,
}

#[derive(Debug, Default)]
struct Queue {
    /// In the order they were put.
    messages: VecDeque<Message>,
}

impl Queue {
    /// Drops the messages that have expired by `now`.
    fn expire(&mut self, now: DateTime) {
        self.messages.retain(|m| m.expires > now);
    }
}

#[derive(Debug, Default)]
struct State {
    queues: BTreeMap<String, Queue>,
    /// Deleted queues, by the time of their deletion.
    deleted: HashMap<String, DateTime>,
    random: Random,
}

impl State {
    fn queue(&mut self, name: &str, now: DateTime) -> Result<&mut Queue> {
        queue_in(&mut self.queues, name, now)
    }
}

/// The queue `name` of `queues`, its expired messages dropped.
fn queue_in<'q>(
    queues: &'q mut BTreeMap<String, Queue>,
    name: &str,
    now: DateTime,
) -> Result<&'q mut Queue> {
    let queue = queues
        .get_mut(name)
        .ok_or_else(|| Error::QueueNotFound { queue: name.into() })?;
    queue.expire(now);
    Ok(queue)
}

/// The source of message ids and pop receipts.
#[derive(Debug, Default)]
struct Random(Option<fastrand::Rng>);

impl Random {
    fn bytes(&mut self) -> [u8; 16] {
        let rng = self.0.get_or_insert_with(fastrand::Rng::new);
        rng.u128(..).to_le_bytes()
    }

    /// A new pop receipt: random, like the service's, and never repeated.
    fn receipt(&mut self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.bytes())
    }

    /// A new message id: a random GUID, like the service's.
    fn message_id(&mut self) -> String {
        tablekit_core::uuid::Builder::from_random_bytes(self.bytes())
            .into_uuid()
            .to_string()
    }
}

/// An in-memory [`QueueStore`](tablekit_core::QueueStore) with the Queue service's semantics: at-least-
/// once delivery with visibility timeouts, dequeue counts, a new pop
/// receipt on every get and update (a stale one is refused as the service
/// refuses it), expiry, and a deleted queue's name unusable for 30 seconds.
///
/// Time is the [`Clock`] it is built with: [`SystemClock`] by default, or a
/// [`ManualClock`](tablekit_core::clock::ManualClock) that tests move by hand,
/// so visibility timeouts and expiry are tested without sleeping. Clones
/// share the same queues.
///
/// ```
/// use std::time::Duration;
/// use tablekit::clock::ManualClock;
/// use tablekit::queue::{PutMessageOptions, QueueStore};
/// use tablekit_mem::MemQueueStore;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tablekit::Result<()> {
/// let clock = ManualClock::new();
/// let queues = MemQueueStore::with_clock(clock.clone());
/// queues.create_queue("jobs").await?;
/// queues.put_message("jobs", "work", &PutMessageOptions::default()).await?;
/// let first = queues.get_messages("jobs", 1, Duration::from_secs(30)).await?;
/// assert!(queues.get_messages("jobs", 1, Duration::from_secs(30)).await?.is_empty());
/// clock.advance(Duration::from_secs(30));
/// let again = queues.get_messages("jobs", 1, Duration::from_secs(30)).await?;
/// assert_eq!((again[0].id.as_str(), again[0].dequeue_count), (first[0].id.as_str(), 2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MemQueueStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn Clock>,
}

impl Default for MemQueueStore {
    fn default() -> MemQueueStore {
        MemQueueStore::new()
    }
}

impl MemQueueStore {
    /// A store with no queues, on the system clock.
    pub fn new() -> MemQueueStore {
        MemQueueStore::with_clock(SystemClock)
    }

    /// A store with no queues whose time is `clock`.
    pub fn with_clock(clock: impl Clock + 'static) -> MemQueueStore {
        MemQueueStore {
            state: Arc::new(Mutex::new(State::default())),
            clock: Arc::new(clock),
        }
    }

    /// The clock the store runs on.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// How many messages `queue` holds, visible or not (expired ones not
    /// counted); `None` if there is no such queue. For tests.
    pub fn len(&self, queue: &str) -> Option<usize> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        state.queue(queue, now).ok().map(|q| q.messages.len())
    }
}

fn not_found(queue: &str, id: &str) -> Error {
    Error::MessageNotFound {
        queue: queue.into(),
        id: id.into(),
    }
}

/// Finds a message by id and receipt, as Update and Delete Message do.
fn held<'q>(
    messages: &'q mut VecDeque<Message>,
    queue: &str,
    id: &str,
    pop_receipt: &str,
) -> Result<(usize, &'q mut Message)> {
    let (at, message) = messages
        .iter_mut()
        .enumerate()
        .find(|(_, m)| m.id == id)
        .ok_or_else(|| not_found(queue, id))?;
    if message.pop_receipt != pop_receipt {
        return Err(Error::PopReceiptMismatch {
            queue: queue.into(),
            id: id.into(),
        });
    }
    Ok((at, message))
}

tablekit_core::serve!(MemQueueStore, info: |_this| crate::store_info(), contracts: [QueueStore]);

impl tablekit_core::layer::RawQueues for MemQueueStore {
    async fn create_queue(&self, queue: &str) -> Result<bool> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        if let Some(&deleted) = state.deleted.get(queue) {
            if now < deleted.saturating_add(QUEUE_DELETION_DELAY) {
                return Err(Error::QueueBeingDeleted {
                    queue: queue.into(),
                });
            }
            state.deleted.remove(queue);
        }
        if state.queues.contains_key(queue) {
            return Ok(false);
        }
        state.queues.insert(queue.into(), Queue::default());
        Ok(true)
    }

    async fn delete_queue(&self, queue: &str) -> Result<()> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        if state.queues.remove(queue).is_none() {
            return Err(Error::QueueNotFound {
                queue: queue.into(),
            });
        }
        state.deleted.insert(queue.into(), now);
        Ok(())
    }

    async fn list_queues(&self, options: &ListQueuesOptions) -> Result<QueuePage> {
        let limit = options.page_size();
        let state = self.state.lock();
        let (entries, next_marker) = crate::listing::page(
            &state.queues,
            options.prefix.as_deref(),
            options.marker.as_deref(),
            limit,
        );
        Ok(QueuePage {
            queues: entries.into_iter().map(|(name, _)| name.clone()).collect(),
            next_marker,
        })
    }

    async fn put_message(
        &self,
        queue: &str,
        text: &str,
        options: &PutMessageOptions,
    ) -> Result<SentMessage> {
        let now = self.clock.now();
        let expires = match options.ttl {
            MessageTtl::Default => now.saturating_add(DEFAULT_TTL),
            MessageTtl::After(ttl) => now.saturating_add(ttl),
            MessageTtl::Never => DateTime::MAX,
        };
        let mut state = self.state.lock();
        let pop_receipt = state.random.receipt();
        let message = Message {
            id: state.random.message_id(),
            pop_receipt,
            dequeue_count: 0,
            inserted: now,
            expires,
            next_visible: now.saturating_add(options.visibility_delay),
            text: Arc::from(text),
        };
        let sent = SentMessage {
            id: message.id.clone(),
            pop_receipt: message.pop_receipt.clone(),
            inserted: message.inserted,
            expires: message.expires,
            next_visible: message.next_visible,
        };
        state.queue(queue, now)?.messages.push_back(message);
        Ok(sent)
    }

    async fn get_messages(
        &self,
        queue: &str,
        count: u32,
        visibility_timeout: Duration,
    ) -> Result<Vec<QueueMessage>> {
        let now = self.clock.now();
        let next_visible = now.saturating_add(visibility_timeout);
        let mut state = self.state.lock();
        let State { queues, random, .. } = &mut *state;
        let messages = &mut queue_in(queues, queue, now)?.messages;
        let mut got = Vec::new();
        for message in messages
            .iter_mut()
            .filter(|m| m.next_visible <= now)
            .take(count as usize)
        {
            message.dequeue_count += 1;
            message.pop_receipt = random.receipt();
            message.next_visible = next_visible;
            got.push(QueueMessage {
                id: message.id.clone(),
                pop_receipt: message.pop_receipt.clone(),
                dequeue_count: message.dequeue_count,
                inserted: message.inserted,
                expires: message.expires,
                next_visible,
                text: message.text.to_string(),
            });
        }
        Ok(got)
    }

    async fn peek_messages(&self, queue: &str, count: u32) -> Result<Vec<PeekedMessage>> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        let messages = &state.queue(queue, now)?.messages;
        Ok(messages
            .iter()
            .filter(|m| m.next_visible <= now)
            .take(count as usize)
            .map(|m| PeekedMessage {
                id: m.id.clone(),
                dequeue_count: m.dequeue_count,
                inserted: m.inserted,
                expires: m.expires,
                text: m.text.to_string(),
            })
            .collect())
    }

    async fn update_message(
        &self,
        queue: &str,
        id: &str,
        pop_receipt: &str,
        visibility_timeout: Duration,
        text: Option<&str>,
    ) -> Result<MessageUpdate> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        let new_receipt = state.random.receipt();
        let messages = &mut state.queue(queue, now)?.messages;
        let (_, message) = held(messages, queue, id, pop_receipt)?;
        let next_visible = now.saturating_add(visibility_timeout);
        if next_visible >= message.expires {
            return Err(InvalidInput::QueueDuration {
                what: "visibility timeout",
                duration: visibility_timeout,
                reason: "must end before the message expires",
            }
            .into());
        }
        message.pop_receipt = new_receipt;
        message.next_visible = next_visible;
        if let Some(text) = text {
            message.text = Arc::from(text);
        }
        Ok(MessageUpdate {
            pop_receipt: message.pop_receipt.clone(),
            next_visible,
        })
    }

    async fn delete_message(&self, queue: &str, id: &str, pop_receipt: &str) -> Result<()> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        let messages = &mut state.queue(queue, now)?.messages;
        let (at, _) = held(messages, queue, id, pop_receipt)?;
        messages.remove(at);
        Ok(())
    }

    async fn clear_messages(&self, queue: &str) -> Result<()> {
        let now = self.clock.now();
        let mut state = self.state.lock();
        state.queue(queue, now)?.messages.clear();
        Ok(())
    }
}

//! The queue store: queues, their messages in the order they were put, and
//! an index of message ids.

use std::ops::Bound;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use redb::{ReadableTable, TableDefinition};

use crate::logged::{LoggedTable, Txn};
use tablekit_core::queue::{
    DEFAULT_TTL, ListQueuesOptions, MessageTtl, MessageUpdate, PeekedMessage, PutMessageOptions,
    QueueMessage, QueuePage, SentMessage,
};
use tablekit_core::{DateTime, Error, InvalidInput, Result};

use crate::LocalStorage;

/// How long a deleted queue's name cannot be used again.
const QUEUE_DELETION_DELAY: Duration = Duration::from_secs(30);

/// Queues, with the sequence number of the next message.
const QUEUES: TableDefinition<'static, &str, u64> = TableDefinition::new("queues");
/// Deleted queues, with the time of deletion in ticks (on the store's clock).
const DELETED: TableDefinition<'static, &str, i64> = TableDefinition::new("queues_deleted");
/// Messages by (queue, sequence number): see [`message_key`].
const MESSAGES: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("messages");
/// Message ids (`queue/id`) to their sequence numbers.
const IDS: TableDefinition<'static, &str, u64> = TableDefinition::new("message_ids");

/// The names of the engine tables [`create_system_tables`] makes, for the
/// check of the engine's list of its tables.
pub(crate) fn system_tables() -> [String; 4] {
    use redb::TableHandle;
    [
        QUEUES.name().to_owned(),
        DELETED.name().to_owned(),
        MESSAGES.name().to_owned(),
        IDS.name().to_owned(),
    ]
}

pub(crate) fn create_system_tables(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(QUEUES)?;
    txn.open_table(DELETED)?;
    txn.open_table(MESSAGES)?;
    txn.open_table(IDS)?;
    Ok(())
}

/// The engine key of a message: the queue's name, a zero byte (queue names
/// are ASCII letters, digits and hyphens), the sequence number big-endian.
fn message_key(queue: &str, seq: u64) -> Vec<u8> {
    [queue.as_bytes(), &[0], &seq.to_be_bytes()].concat()
}

/// The keys of every message of `queue`.
fn queue_range(queue: &str) -> (Vec<u8>, Vec<u8>) {
    (
        [queue.as_bytes(), &[0]].concat(),
        [queue.as_bytes(), &[1]].concat(),
    )
}

fn id_key(queue: &str, id: &str) -> String {
    format!("{queue}/{id}")
}

/// A message as stored.
#[derive(Debug, Clone)]
struct Message {
    id: [u8; 16],
    receipt: [u8; 16],
    dequeue_count: u32,
    inserted: DateTime,
    expires: DateTime,
    next_visible: DateTime,
    text: String,
}

impl Message {
    /// The message as stored under `key` (its [`message_key`]), checksum
    /// first.
    fn encode(&self, key: &[u8]) -> Vec<u8> {
        let body = [
            &self.id[..],
            &self.receipt,
            &self.dequeue_count.to_le_bytes(),
            &self.inserted.ticks().to_le_bytes(),
            &self.expires.ticks().to_le_bytes(),
            &self.next_visible.ticks().to_le_bytes(),
            self.text.as_bytes(),
        ]
        .concat();
        crate::seal::sealed(key, &body)
    }

    /// The message stored under `key`; `None` when it fails its checksum
    /// (the file was changed, or the message is not this key's) or does not
    /// decode.
    fn decode(key: &[u8], stored: &[u8]) -> Option<Message> {
        let bytes = crate::seal::checked(key, stored)?;
        let ticks = |at: usize| -> Option<DateTime> {
            let raw = i64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
            DateTime::from_ticks(raw).ok()
        };
        Some(Message {
            id: bytes.get(0..16)?.try_into().ok()?,
            receipt: bytes.get(16..32)?.try_into().ok()?,
            dequeue_count: u32::from_le_bytes(bytes.get(32..36)?.try_into().ok()?),
            inserted: ticks(36)?,
            expires: ticks(44)?,
            next_visible: ticks(52)?,
            text: std::str::from_utf8(bytes.get(60..)?).ok()?.to_owned(),
        })
    }

    /// The id as the service shows it: a GUID.
    fn id_text(&self) -> String {
        tablekit_core::uuid::Uuid::from_bytes(self.id).to_string()
    }

    fn receipt_text(&self) -> String {
        BASE64.encode(self.receipt)
    }
}

/// [`check`](LocalStorage::check)'s part for queues: every message
/// against its checksum, and decoded.
pub(crate) fn check(txn: &redb::ReadTransaction, report: &mut crate::check::CheckReport) {
    crate::check::walk(
        txn,
        QUEUES,
        crate::check::Presence::Optional,
        "the catalogue of queues",
        report,
        |r, _, _| {
            r.queues += 1;
        },
    );
    crate::check::walk(
        txn,
        MESSAGES,
        crate::check::Presence::Optional,
        "the queue messages",
        report,
        |report, key, stored| {
            report.messages += 1;
            if Message::decode(key, stored).is_none() {
                let at = key.iter().position(|&b| b == 0).unwrap_or(key.len());
                let queue = String::from_utf8_lossy(&key[..at]);
                let seq = key
                    .get(at + 1..)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_be_bytes);
                let place = match seq {
                    Some(seq) => format!("message {seq} of queue `{queue}`"),
                    None => format!("a message of queue `{queue}`"),
                };
                report.damage(place, "does not match its checksum or does not decode");
            }
        },
    );
}

/// Sixteen random bytes, for ids and pop receipts.
fn random() -> [u8; 16] {
    fastrand::u128(..).to_le_bytes()
}

/// A random GUID's bytes (version 4).
fn random_id() -> [u8; 16] {
    *tablekit_core::uuid::Builder::from_random_bytes(random())
        .into_uuid()
        .as_bytes()
}

type Messages<'t> = LoggedTable<'t, &'static [u8], &'static [u8]>;

impl LocalStorage {
    /// Stores `message` as number `seq` of `queue`, with its checksum.
    fn store_message(
        &self,
        messages: &mut LoggedTable<'_, &'static [u8], &'static [u8]>,
        queue: &str,
        seq: u64,
        message: &Message,
    ) -> Result<()> {
        let key = message_key(queue, seq);
        messages
            .insert(key.as_slice(), message.encode(&key).as_slice())
            .map_err(|e| self.error(e.into()))?;
        Ok(())
    }

    /// Fails unless `queue` exists.
    fn check_queue(&self, txn: &Txn<'_>, queue: &str) -> Result<()> {
        let queues = txn.open_table(QUEUES).map_err(|e| self.error(e.into()))?;
        match queues.get(queue).map_err(|e| self.error(e.into()))? {
            Some(_) => Ok(()),
            None => Err(Error::QueueNotFound {
                queue: queue.into(),
            }),
        }
    }

    /// The live messages of `queue` in order, with their sequence numbers;
    /// the expired ones are removed on the way (with their ids).
    fn live_messages(
        &self,
        txn: &Txn<'_>,
        messages: &mut Messages<'_>,
        queue: &str,
        now: DateTime,
    ) -> Result<Vec<(u64, Message)>> {
        let (from, to) = queue_range(queue);
        let mut live = Vec::new();
        let mut expired = Vec::new();
        for item in messages
            .range::<&[u8]>(from.as_slice()..to.as_slice())
            .map_err(|e| self.error(e.into()))?
        {
            let (key, value) = item.map_err(|e| self.error(e.into()))?;
            let seq = key
                .value()
                .get(from.len()..)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| self.damaged("a message key"))?;
            let message = Message::decode(key.value(), value.value())
                .ok_or_else(|| self.damaged("a message"))?;
            if message.expires > now {
                live.push((seq, message));
            } else {
                expired.push((seq, message.id_text()));
            }
        }
        if !expired.is_empty() {
            let mut ids = txn.open_table(IDS).map_err(|e| self.error(e.into()))?;
            for (seq, id) in expired {
                messages
                    .remove(message_key(queue, seq).as_slice())
                    .map_err(|e| self.error(e.into()))?;
                ids.remove(id_key(queue, &id).as_str())
                    .map_err(|e| self.error(e.into()))?;
            }
        }
        Ok(live)
    }

    /// The message `id` of `queue`, if `pop_receipt` is its current receipt,
    /// with its sequence number.
    fn held(
        &self,
        txn: &Txn<'_>,
        queue: &str,
        id: &str,
        pop_receipt: &str,
        now: DateTime,
    ) -> Result<(u64, Message)> {
        self.check_queue(txn, queue)?;
        let not_found = || Error::MessageNotFound {
            queue: queue.into(),
            id: id.into(),
        };
        let ids = txn.open_table(IDS).map_err(|e| self.error(e.into()))?;
        let seq = ids
            .get(id_key(queue, id).as_str())
            .map_err(|e| self.error(e.into()))?
            .ok_or_else(not_found)?
            .value();
        let messages = txn.open_table(MESSAGES).map_err(|e| self.error(e.into()))?;
        let key = message_key(queue, seq);
        let message = messages
            .get(key.as_slice())
            .map_err(|e| self.error(e.into()))?
            .ok_or_else(|| self.damaged("a message id without its message"))?;
        let message =
            Message::decode(&key, message.value()).ok_or_else(|| self.damaged("a message"))?;
        if message.expires <= now {
            return Err(not_found());
        }
        if message.receipt_text() != pop_receipt {
            return Err(Error::PopReceiptMismatch {
                queue: queue.into(),
                id: id.into(),
            });
        }
        Ok((seq, message))
    }

    /// Removes every message of `queue` and its id.
    fn remove_messages(&self, txn: &Txn<'_>, queue: &str) -> Result<()> {
        let (from, to) = queue_range(queue);
        let mut messages = txn.open_table(MESSAGES).map_err(|e| self.error(e.into()))?;
        messages
            .remove_range(from.as_slice(), to.as_slice())
            .map_err(|e| self.error(e.into()))?;
        let (from, to) = (format!("{queue}/"), format!("{queue}0"));
        let mut ids = txn.open_table(IDS).map_err(|e| self.error(e.into()))?;
        ids.remove_range(from.as_str(), to.as_str())
            .map_err(|e| self.error(e.into()))
    }
}

impl tablekit_core::layer::RawQueues for LocalStorage {
    async fn create_queue(&self, queue: &str) -> Result<bool> {
        let now = self.shared.clock.now();
        // Read-only: a queue that exists is answered as one.
        if self.shared.read_only {
            return self.guarded(|| {
                let txn = self.begin_read()?;
                let queues = txn.open_table(QUEUES).map_err(|e| self.error(e.into()))?;
                match queues.get(queue).map_err(|e| self.error(e.into()))? {
                    Some(_) => Ok(false),
                    None => Err(self.read_only_error()),
                }
            });
        }
        let queue = queue.to_owned();
        self.write(move |store, txn| {
            let mut deleted = txn.open_table(DELETED).map_err(|e| store.error(e.into()))?;
            let at = deleted
                .get(queue.as_str())
                .map_err(|e| store.error(e.into()))?
                .map(|v| v.value());
            if let Some(at) = at {
                let at = DateTime::from_ticks(at).map_err(|_| store.damaged("a deletion time"))?;
                if now < at.saturating_add(QUEUE_DELETION_DELAY) {
                    return Err(Error::QueueBeingDeleted {
                        queue: queue.clone(),
                    });
                }
                deleted
                    .remove(queue.as_str())
                    .map_err(|e| store.error(e.into()))?;
            }
            let mut queues = txn.open_table(QUEUES).map_err(|e| store.error(e.into()))?;
            if queues
                .get(queue.as_str())
                .map_err(|e| store.error(e.into()))?
                .is_some()
            {
                return Ok(false);
            }
            queues
                .insert(queue.as_str(), 0)
                .map_err(|e| store.error(e.into()))?;
            Ok(true)
        })
        .await
    }

    async fn delete_queue(&self, queue: &str) -> Result<()> {
        let now = self.shared.clock.now();
        let queue = queue.to_owned();
        self.write(move |store, txn| {
            {
                let mut queues = txn.open_table(QUEUES).map_err(|e| store.error(e.into()))?;
                if !queues
                    .remove(queue.as_str())
                    .map_err(|e| store.error(e.into()))?
                {
                    return Err(Error::QueueNotFound {
                        queue: queue.clone(),
                    });
                }
                let mut deleted = txn.open_table(DELETED).map_err(|e| store.error(e.into()))?;
                deleted
                    .insert(queue.as_str(), now.ticks())
                    .map_err(|e| store.error(e.into()))?;
            }
            store.remove_messages(txn, &queue)
        })
        .await
    }

    async fn list_queues(&self, options: &ListQueuesOptions) -> Result<QueuePage> {
        self.guarded(|| {
            let limit = options.page_size() as usize;
            let prefix = options.prefix.as_deref().unwrap_or("");
            let start = options.marker.as_deref().unwrap_or(prefix).max(prefix);
            let txn = self.begin_read()?;
            let queues = txn.open_table(QUEUES).map_err(|e| self.error(e.into()))?;
            let mut page = QueuePage::default();
            for item in queues
                .range::<&str>((Bound::Included(start), Bound::Unbounded))
                .map_err(|e| self.error(e.into()))?
            {
                let (name, _) = item.map_err(|e| self.error(e.into()))?;
                let name = name.value();
                if !name.starts_with(prefix) {
                    break;
                }
                if page.queues.len() == limit {
                    page.next_marker = Some(name.to_owned());
                    break;
                }
                page.queues.push(name.to_owned());
            }
            Ok(page)
        })
    }

    async fn put_message(
        &self,
        queue: &str,
        text: &str,
        options: &PutMessageOptions,
    ) -> Result<SentMessage> {
        let now = self.shared.clock.now();
        let expires = match options.ttl {
            MessageTtl::Default => now.saturating_add(DEFAULT_TTL),
            MessageTtl::After(ttl) => now.saturating_add(ttl),
            MessageTtl::Never => DateTime::MAX,
        };
        let message = Message {
            id: random_id(),
            receipt: random(),
            dequeue_count: 0,
            inserted: now,
            expires,
            next_visible: now.saturating_add(options.visibility_delay),
            text: text.to_owned(),
        };
        let queue = queue.to_owned();
        self.write(move |store, txn| {
            let mut queues = txn.open_table(QUEUES).map_err(|e| store.error(e.into()))?;
            let seq = queues
                .get(queue.as_str())
                .map_err(|e| store.error(e.into()))?
                .ok_or_else(|| Error::QueueNotFound {
                    queue: queue.clone(),
                })?
                .value();
            queues
                .insert(queue.as_str(), seq + 1)
                .map_err(|e| store.error(e.into()))?;
            let mut messages = txn
                .open_table(MESSAGES)
                .map_err(|e| store.error(e.into()))?;
            store.store_message(&mut messages, &queue, seq, &message)?;
            let mut ids = txn.open_table(IDS).map_err(|e| store.error(e.into()))?;
            ids.insert(id_key(&queue, &message.id_text()).as_str(), seq)
                .map_err(|e| store.error(e.into()))?;
            Ok(SentMessage {
                id: message.id_text(),
                pop_receipt: message.receipt_text(),
                inserted: message.inserted,
                expires: message.expires,
                next_visible: message.next_visible,
            })
        })
        .await
    }

    async fn get_messages(
        &self,
        queue: &str,
        count: u32,
        visibility_timeout: Duration,
    ) -> Result<Vec<QueueMessage>> {
        let now = self.shared.clock.now();
        let next_visible = now.saturating_add(visibility_timeout);
        let queue = queue.to_owned();
        self.write(move |store, txn| {
            store.check_queue(txn, &queue)?;
            let mut got = Vec::new();
            {
                let mut messages = txn
                    .open_table(MESSAGES)
                    .map_err(|e| store.error(e.into()))?;
                let live = store.live_messages(txn, &mut messages, &queue, now)?;
                for (seq, mut message) in live
                    .into_iter()
                    .filter(|(_, m)| m.next_visible <= now)
                    .take(count as usize)
                {
                    message.dequeue_count += 1;
                    message.receipt = random();
                    message.next_visible = next_visible;
                    store.store_message(&mut messages, &queue, seq, &message)?;
                    got.push(QueueMessage {
                        id: message.id_text(),
                        pop_receipt: message.receipt_text(),
                        dequeue_count: message.dequeue_count,
                        inserted: message.inserted,
                        expires: message.expires,
                        next_visible,
                        text: message.text,
                    });
                }
            }
            Ok(got)
        })
        .await
    }

    async fn peek_messages(&self, queue: &str, count: u32) -> Result<Vec<PeekedMessage>> {
        self.guarded(|| {
            let now = self.shared.clock.now();
            // A read: expired messages are skipped here, removed by the next write.
            let txn = self.begin_read()?;
            let queues = txn.open_table(QUEUES).map_err(|e| self.error(e.into()))?;
            if queues
                .get(queue)
                .map_err(|e| self.error(e.into()))?
                .is_none()
            {
                return Err(Error::QueueNotFound {
                    queue: queue.into(),
                });
            }
            let messages = txn.open_table(MESSAGES).map_err(|e| self.error(e.into()))?;
            let (from, to) = queue_range(queue);
            let mut peeked = Vec::new();
            for item in messages
                .range::<&[u8]>(from.as_slice()..to.as_slice())
                .map_err(|e| self.error(e.into()))?
            {
                if peeked.len() == count as usize {
                    break;
                }
                let (key, value) = item.map_err(|e| self.error(e.into()))?;
                let m = Message::decode(key.value(), value.value())
                    .ok_or_else(|| self.damaged("a message"))?;
                if m.expires > now && m.next_visible <= now {
                    peeked.push(PeekedMessage {
                        id: m.id_text(),
                        dequeue_count: m.dequeue_count,
                        inserted: m.inserted,
                        expires: m.expires,
                        text: m.text,
                    });
                }
            }
            Ok(peeked)
        })
    }

    async fn update_message(
        &self,
        queue: &str,
        id: &str,
        pop_receipt: &str,
        visibility_timeout: Duration,
        text: Option<&str>,
    ) -> Result<MessageUpdate> {
        let now = self.shared.clock.now();
        let (queue, id, pop_receipt, text) = (
            queue.to_owned(),
            id.to_owned(),
            pop_receipt.to_owned(),
            text.map(str::to_owned),
        );
        self.write(move |store, txn| {
            let (seq, mut message) = store.held(txn, &queue, &id, &pop_receipt, now)?;
            let next_visible = now.saturating_add(visibility_timeout);
            if next_visible >= message.expires {
                return Err(InvalidInput::QueueDuration {
                    what: "visibility timeout",
                    duration: visibility_timeout,
                    reason: "must end before the message expires",
                }
                .into());
            }
            message.receipt = random();
            message.next_visible = next_visible;
            if let Some(text) = &text {
                message.text.clone_from(text);
            }
            {
                let mut messages = txn
                    .open_table(MESSAGES)
                    .map_err(|e| store.error(e.into()))?;
                store.store_message(&mut messages, &queue, seq, &message)?;
            }
            Ok(MessageUpdate {
                pop_receipt: message.receipt_text(),
                next_visible,
            })
        })
        .await
    }

    async fn delete_message(&self, queue: &str, id: &str, pop_receipt: &str) -> Result<()> {
        let now = self.shared.clock.now();
        let (queue, id, pop_receipt) = (queue.to_owned(), id.to_owned(), pop_receipt.to_owned());
        self.write(move |store, txn| {
            let (seq, _) = store.held(txn, &queue, &id, &pop_receipt, now)?;
            let mut messages = txn
                .open_table(MESSAGES)
                .map_err(|e| store.error(e.into()))?;
            messages
                .remove(message_key(&queue, seq).as_slice())
                .map_err(|e| store.error(e.into()))?;
            let mut ids = txn.open_table(IDS).map_err(|e| store.error(e.into()))?;
            ids.remove(id_key(&queue, &id).as_str())
                .map_err(|e| store.error(e.into()))?;
            Ok(())
        })
        .await
    }

    async fn clear_messages(&self, queue: &str) -> Result<()> {
        let queue = queue.to_owned();
        self.write(move |store, txn| {
            store.check_queue(txn, &queue)?;
            store.remove_messages(txn, &queue)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_damage_is_refused() {
        let message = Message {
            id: random_id(),
            receipt: random(),
            dequeue_count: 3,
            inserted: DateTime::MIN,
            expires: DateTime::MAX,
            next_visible: DateTime::MIN,
            text: "héllo".into(),
        };
        let key = message_key("jobs", 7);
        let bytes = message.encode(&key);
        let back = Message::decode(&key, &bytes).unwrap();
        assert_eq!(
            (back.id, back.receipt, back.dequeue_count),
            (message.id, message.receipt, 3)
        );
        assert_eq!((back.expires, back.text.as_str()), (DateTime::MAX, "héllo"));
        assert!(Message::decode(&key, &bytes[..63]).is_none());
        // Any byte changed, or the message read under another key, is caught
        // by the checksum.
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x04;
            assert!(Message::decode(&key, &damaged).is_none(), "byte {at}");
        }
        assert!(Message::decode(&message_key("jobs", 8), &bytes).is_none());
    }
}

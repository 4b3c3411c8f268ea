//! Queue store operations: queues, at-least-once delivery, visibility,
//! receipts, expiry, and the validators.

use std::collections::BTreeSet;
use std::time::Duration;

use super::assert_invalid;
use tablekit::clock::ManualClock;
use tablekit::queue::{
    ListQueuesOptions, MAX_MESSAGE_BYTES, MessageTtl, PutMessageOptions, QueueStore,
};
use tablekit::{Error, InvalidInput};

/// How a queue test lets time pass: a store on a [`ManualClock`] is moved
/// by hand; a real service is waited for, with a margin for its clock's
/// whole seconds.
#[derive(Debug, Clone)]
pub enum QueueTime {
    /// The store runs on the system clock: wait.
    Real,
    /// The store runs on this clock: move it.
    Manual(ManualClock),
}

impl QueueTime {
    /// Lets `duration` pass for the store.
    pub async fn pass(&self, duration: Duration) {
        match self {
            QueueTime::Real => tokio::time::sleep(duration + Duration::from_millis(1200)).await,
            QueueTime::Manual(clock) => clock.advance(duration + Duration::from_millis(1)),
        }
    }
}

/// A fresh queue name.
fn unique_queue(tag: &str) -> String {
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(10)
        .collect();
    format!("tk-{tag}-{suffix}")
}

async fn fresh_queue(store: &dyn QueueStore, tag: &str) -> String {
    let queue = unique_queue(tag);
    assert!(
        store.create_queue(&queue).await.expect("create queue"),
        "a new queue is created"
    );
    queue
}

const HIDE: Duration = Duration::from_secs(30);

fn put_options() -> PutMessageOptions {
    PutMessageOptions::default()
}

/// Create (twice: the second finds it), list by prefix in pages, delete;
/// a missing queue is reported by every operation.
pub async fn queues_create_list_delete(store: &dyn QueueStore, _time: &QueueTime) {
    let prefix = unique_queue("ls");
    let names: Vec<String> = (0..3).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        assert!(store.create_queue(name).await.expect("create"));
    }
    assert!(
        !store.create_queue(&names[0]).await.expect("create again"),
        "creating an existing queue reports that it existed"
    );
    let mut options = ListQueuesOptions::prefix(prefix.clone());
    options.max_results = Some(2);
    let mut listed = Vec::new();
    loop {
        let page = store.list_queues(&options).await.expect("list");
        assert!(page.queues.len() <= 2, "a page holds at most max_results");
        listed.extend(page.queues);
        match page.next_marker {
            Some(marker) => options.marker = Some(marker),
            None => break,
        }
    }
    assert_eq!(listed, names, "every queue of the prefix, once, in order");
    store.delete_queue(&names[0]).await.expect("delete");
    let missing = &names[0];
    assert!(
        matches!(store.delete_queue(missing).await, Err(Error::QueueNotFound { queue }) if &queue == missing),
        "deleting a missing queue"
    );
    assert!(matches!(
        store.put_message(missing, "x", &put_options()).await,
        Err(Error::QueueNotFound { .. })
    ));
    assert!(matches!(
        store.get_messages(missing, 1, HIDE).await,
        Err(Error::QueueNotFound { .. })
    ));
    assert!(matches!(
        store.peek_messages(missing, 1).await,
        Err(Error::QueueNotFound { .. })
    ));
    for name in &names[1..] {
        store.delete_queue(name).await.expect("delete");
    }
}

/// Texts come back exactly as put: markup, line ends, every plane of
/// Unicode, the empty text and the longest allowed.
pub async fn message_texts_round_trip(store: &dyn QueueStore, _time: &QueueTime) {
    let queue = fresh_queue(store, "text").await;
    let longest = "x".repeat(MAX_MESSAGE_BYTES);
    let texts = [
        "plain".to_owned(),
        "<QueueMessage>&amp;</MessageText> \"quoted\" 'single'".to_owned(),
        "line\r\nends\rand\nbare\tTabs".to_owned(),
        "ünïcödé ✓ 𝄞 😀 \u{fffd}".to_owned(),
        "  spaces around  ".to_owned(),
        String::new(),
        longest,
    ];
    for text in &texts {
        store
            .put_message(&queue, text, &put_options())
            .await
            .unwrap_or_else(|e| panic!("put {:?}: {e}", &text[..text.len().min(40)]));
    }
    let mut got = Vec::new();
    while got.len() < texts.len() {
        let batch = store.get_messages(&queue, 32, HIDE).await.expect("get");
        assert!(!batch.is_empty(), "every message put is delivered");
        got.extend(batch);
    }
    let sent: BTreeSet<&str> = texts.iter().map(String::as_str).collect();
    let received: BTreeSet<&str> = got.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(received, sent, "texts round trip exactly");
    store.delete_queue(&queue).await.expect("delete queue");
}

/// Get hides what it delivers and counts it; delete with the receipt ends
/// it; peek shows without delivering.
pub async fn messages_put_get_delete(store: &dyn QueueStore, _time: &QueueTime) {
    let queue = fresh_queue(store, "msg").await;
    let mut ids = BTreeSet::new();
    for i in 0..5 {
        let sent = store
            .put_message(&queue, &format!("m{i}"), &put_options())
            .await
            .expect("put");
        assert!(sent.next_visible <= sent.expires);
        assert!(!sent.pop_receipt.is_empty());
        ids.insert(sent.id);
    }
    assert_eq!(ids.len(), 5, "every message has its own id");
    let peeked = store.peek_messages(&queue, 32).await.expect("peek");
    assert_eq!(peeked.len(), 5);
    assert!(
        peeked.iter().all(|m| m.dequeue_count == 0),
        "a peek is no delivery"
    );
    let first = store.get_messages(&queue, 2, HIDE).await.expect("get");
    assert_eq!(first.len(), 2, "a get returns at most what it asks for");
    let rest = store.get_messages(&queue, 32, HIDE).await.expect("get");
    assert_eq!(
        rest.len(),
        3,
        "delivered messages are hidden from the next get"
    );
    assert!(
        store
            .get_messages(&queue, 32, HIDE)
            .await
            .expect("get")
            .is_empty(),
        "nothing visible is an empty list"
    );
    assert!(
        store
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "a peek sees only visible messages"
    );
    let delivered: BTreeSet<String> = first.iter().chain(&rest).map(|m| m.id.clone()).collect();
    assert_eq!(delivered, ids);
    for message in first.iter().chain(&rest) {
        assert_eq!(message.dequeue_count, 1);
        assert!(message.next_visible > message.inserted);
        store
            .delete_message(&queue, &message.id, &message.pop_receipt)
            .await
            .expect("delete with the receipt of the delivery");
    }
    let gone = &first[0];
    assert!(
        matches!(
            store.delete_message(&queue, &gone.id, &gone.pop_receipt).await,
            Err(Error::MessageNotFound { id, .. }) if id == gone.id
        ),
        "a deleted message is not found"
    );
    store
        .put_message(&queue, "left", &put_options())
        .await
        .expect("put");
    store.clear_messages(&queue).await.expect("clear");
    assert!(
        store
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty()
    );
    store.delete_queue(&queue).await.expect("delete queue");
}

/// A message not deleted within its visibility timeout is delivered again,
/// with a higher dequeue count and a new receipt; the old receipt is
/// refused, the new one works.
pub async fn undeleted_messages_come_back(store: &dyn QueueStore, time: &QueueTime) {
    let queue = fresh_queue(store, "again").await;
    store
        .put_message(&queue, "job", &put_options())
        .await
        .expect("put");
    let first = store
        .get_messages(&queue, 1, Duration::from_secs(1))
        .await
        .expect("get");
    assert_eq!(first.len(), 1);
    time.pass(Duration::from_secs(1)).await;
    let second = store.get_messages(&queue, 1, HIDE).await.expect("get");
    assert_eq!(second.len(), 1, "delivered again after the timeout");
    let (first, second) = (&first[0], &second[0]);
    assert_eq!(second.id, first.id);
    assert_eq!(second.dequeue_count, 2);
    assert_ne!(
        second.pop_receipt, first.pop_receipt,
        "a new receipt per delivery"
    );
    assert!(
        matches!(
            store
                .delete_message(&queue, &first.id, &first.pop_receipt)
                .await,
            Err(Error::PopReceiptMismatch { .. })
        ),
        "the receipt of an earlier delivery no longer deletes"
    );
    assert!(matches!(
        store
            .update_message(&queue, &first.id, &first.pop_receipt, HIDE, None)
            .await,
        Err(Error::PopReceiptMismatch { .. })
    ));
    store
        .delete_message(&queue, &second.id, &second.pop_receipt)
        .await
        .expect("the latest receipt deletes");
    store.delete_queue(&queue).await.expect("delete queue");
}

/// Update hides a message again (or shows it at once) and may replace its
/// text; it returns the receipt that works from then on.
pub async fn updates_renew_receipts(store: &dyn QueueStore, time: &QueueTime) {
    let queue = fresh_queue(store, "upd").await;
    store
        .put_message(&queue, "v1", &put_options())
        .await
        .expect("put");
    let got = store
        .get_messages(&queue, 1, Duration::from_secs(1))
        .await
        .expect("get");
    let message = &got[0];
    // Renewed before the timeout ends: still hidden after it.
    let renewed = store
        .update_message(&queue, &message.id, &message.pop_receipt, HIDE, None)
        .await
        .expect("renew");
    assert_ne!(renewed.pop_receipt, message.pop_receipt);
    time.pass(Duration::from_secs(1)).await;
    assert!(
        store
            .peek_messages(&queue, 1)
            .await
            .expect("peek")
            .is_empty(),
        "a renewed message stays hidden"
    );
    assert!(
        matches!(
            store
                .update_message(&queue, &message.id, &message.pop_receipt, HIDE, None)
                .await,
            Err(Error::PopReceiptMismatch { .. })
        ),
        "the receipt an update used is spent"
    );
    let shown = store
        .update_message(
            &queue,
            &message.id,
            &renewed.pop_receipt,
            Duration::ZERO,
            Some("v2 <&>"),
        )
        .await
        .expect("show again with a new text");
    let peeked = store.peek_messages(&queue, 1).await.expect("peek");
    assert_eq!(peeked.len(), 1, "visible at once");
    assert_eq!(peeked[0].text, "v2 <&>");
    assert_eq!(peeked[0].dequeue_count, 1, "an update is no delivery");
    store
        .delete_message(&queue, &message.id, &shown.pop_receipt)
        .await
        .expect("the update's receipt deletes");
    store.delete_queue(&queue).await.expect("delete queue");
}

/// A delayed message is invisible until its delay passes; a message past
/// its time to live is gone.
pub async fn delays_and_expiry(store: &dyn QueueStore, time: &QueueTime) {
    let queue = fresh_queue(store, "ttl").await;
    store
        .put_message(
            &queue,
            "later",
            &put_options().delay(Duration::from_secs(1)),
        )
        .await
        .expect("put delayed");
    let short = store
        .put_message(
            &queue,
            "brief",
            &put_options().ttl(MessageTtl::After(Duration::from_secs(1))),
        )
        .await
        .expect("put short-lived");
    let forever = store
        .put_message(&queue, "forever", &put_options().ttl(MessageTtl::Never))
        .await
        .expect("put never-expiring");
    assert!(forever.expires > short.expires);
    let visible: Vec<String> = store
        .peek_messages(&queue, 32)
        .await
        .expect("peek")
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert!(
        !visible.contains(&"later".to_owned()),
        "a delayed message is hidden"
    );
    time.pass(Duration::from_secs(1)).await;
    let mut visible: Vec<String> = store
        .peek_messages(&queue, 32)
        .await
        .expect("peek")
        .into_iter()
        .map(|m| m.text)
        .collect();
    visible.sort();
    assert_eq!(
        visible,
        ["forever", "later"],
        "the delay has passed and the short-lived message expired"
    );
    assert!(matches!(
        store
            .delete_message(&queue, &short.id, &short.pop_receipt)
            .await,
        Err(Error::MessageNotFound { .. })
    ));
    store.delete_queue(&queue).await.expect("delete queue");
}

/// Bad input is refused before anything is sent, with a typed error.
pub async fn queue_input_is_validated(store: &dyn QueueStore, _time: &QueueTime) {
    for bad in [
        "ab",
        "Upper",
        "has_underscore",
        "-lead",
        "trail-",
        "two--dashes",
        &"q".repeat(64),
    ] {
        assert_invalid(store.create_queue(bad).await, bad, |e| {
            matches!(e, InvalidInput::QueueName { .. })
        });
    }
    let queue = fresh_queue(store, "val").await;
    let too_long = "x".repeat(MAX_MESSAGE_BYTES + 1);
    assert_invalid(
        store.put_message(&queue, &too_long, &put_options()).await,
        "64 KiB + 1",
        |e| matches!(e, InvalidInput::MessageTooLarge { .. }),
    );
    // Multi-byte characters count as their UTF-8 bytes.
    let wide = "é".repeat(MAX_MESSAGE_BYTES / 2 + 1);
    assert_invalid(
        store.put_message(&queue, &wide, &put_options()).await,
        "64 KiB of UTF-8",
        |e| matches!(e, InvalidInput::MessageTooLarge { .. }),
    );
    for text in ["nul\u{0}", "bell\u{7}", "esc\u{1b}", "nonchar\u{ffff}"] {
        assert_invalid(
            store.put_message(&queue, text, &put_options()).await,
            "a control character",
            |e| matches!(e, InvalidInput::MessageCharacter { .. }),
        );
    }
    for count in [0, 33] {
        assert_invalid(
            store.get_messages(&queue, count, HIDE).await,
            "count",
            |e| matches!(e, InvalidInput::MessageCount { .. }),
        );
        assert_invalid(store.peek_messages(&queue, count).await, "count", |e| {
            matches!(e, InvalidInput::MessageCount { .. })
        });
    }
    let week = Duration::from_secs(7 * 24 * 3600);
    for timeout in [
        Duration::ZERO,
        Duration::from_millis(1500),
        week + Duration::from_secs(1),
    ] {
        assert_invalid(
            store.get_messages(&queue, 1, timeout).await,
            "get timeout",
            |e| matches!(e, InvalidInput::QueueDuration { .. }),
        );
    }
    let bad_puts = [
        put_options().delay(week + Duration::from_secs(1)),
        put_options().delay(Duration::from_millis(10)),
        put_options().ttl(MessageTtl::After(Duration::ZERO)),
        put_options().ttl(MessageTtl::After(Duration::from_millis(1500))),
        put_options()
            .delay(Duration::from_secs(10))
            .ttl(MessageTtl::After(Duration::from_secs(10))),
    ];
    for options in bad_puts {
        assert_invalid(
            store.put_message(&queue, "x", &options).await,
            "put timing",
            |e| matches!(e, InvalidInput::QueueDuration { .. }),
        );
    }
    assert_invalid(
        store.delete_message(&queue, "", "receipt").await,
        "empty id",
        |e| matches!(e, InvalidInput::MessageHandle { .. }),
    );
    assert_invalid(
        store.update_message(&queue, "id", "", HIDE, None).await,
        "empty receipt",
        |e| matches!(e, InvalidInput::MessageHandle { .. }),
    );
    assert!(
        store
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "nothing refused was put"
    );
    store.delete_queue(&queue).await.expect("delete queue");
}

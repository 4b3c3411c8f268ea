//! What the in-memory queue store does beyond the conformance suite, where
//! it follows the service and Azurite does not: a deleted queue's name is
//! unusable for 30 seconds. And its clock: time passes only when moved.

use std::time::Duration;

use tablekit::Error;
use tablekit::clock::{Clock, ManualClock};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::queue::{MessageTtl, PutMessageOptions, QueueStore};
use tablekit_mem::MemQueueStore;

#[tokio::test]
async fn a_deleted_queue_name_waits_thirty_seconds() {
    let clock = ManualClock::new();
    let queues = MemQueueStore::with_clock(clock.clone());
    assert!(queues.create_queue("gone").await.unwrap());
    queues.delete_queue("gone").await.unwrap();
    assert!(matches!(
        queues.create_queue("gone").await,
        Err(Error::QueueBeingDeleted { queue }) if queue == "gone"
    ));
    clock.advance(Duration::from_secs(29));
    assert!(matches!(
        queues.create_queue("gone").await,
        Err(Error::QueueBeingDeleted { .. })
    ));
    clock.advance(Duration::from_secs(1));
    assert!(queues.create_queue("gone").await.unwrap());
    assert_eq!(queues.len("gone"), Some(0), "a new queue holds nothing");
}

#[tokio::test]
async fn visibility_and_expiry_follow_the_clock_exactly() {
    let clock = ManualClock::new();
    let queues = MemQueueStore::with_clock(clock.clone());
    queues.create_queue("exact").await.unwrap();
    let start = clock.now();
    let options = PutMessageOptions::default().ttl(MessageTtl::After(Duration::from_secs(100)));
    let sent = queues.put_message("exact", "m", &options).await.unwrap();
    assert_eq!(sent.inserted, start);
    assert_eq!(sent.expires, start.saturating_add(Duration::from_secs(100)));
    let got = queues
        .get_messages("exact", 1, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        got[0].next_visible,
        start.saturating_add(Duration::from_secs(10))
    );
    clock.advance(Duration::from_secs(9));
    assert!(queues.peek_messages("exact", 1).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    assert_eq!(queues.peek_messages("exact", 1).await.unwrap().len(), 1);
    // An update may not hide a message past its expiry.
    assert!(matches!(
        queues
            .update_message(
                "exact",
                &got[0].id,
                &got[0].pop_receipt,
                Duration::from_secs(90),
                None
            )
            .await,
        Err(Error::Invalid(tablekit::InvalidInput::QueueDuration { .. }))
    ));
    clock.advance(Duration::from_secs(90));
    assert_eq!(queues.len("exact"), Some(0), "expired at its TTL");
}

/// A get whose answer is lost still hid its messages: they come back after
/// the visibility timeout, counted twice.
#[tokio::test]
async fn a_lost_get_hides_until_the_timeout() {
    let clock = ManualClock::new();
    let layer = FaultInjection::new(MemQueueStore::with_clock(clock.clone()));
    layer.create_queue("lost").await.unwrap();
    layer
        .put_message("lost", "m", &PutMessageOptions::default())
        .await
        .unwrap();
    layer
        .handle()
        .inject(Injection::on(Operation::GetMessages).fault(Fault::LostResponse));
    assert!(matches!(
        layer.get_messages("lost", 1, Duration::from_secs(30)).await,
        Err(Error::OutcomeUnknown { .. })
    ));
    assert!(
        layer
            .get_messages("lost", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    clock.advance(Duration::from_secs(30));
    let again = layer
        .get_messages("lost", 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again[0].dequeue_count, 2);
}

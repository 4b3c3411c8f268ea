//! # tablekit-conformance
//!
//! The conformance suite of [tablekit]: the rules every backend must follow,
//! as public async tests over `&dyn TableBackend`, `&dyn BlobStore` and
//! `&dyn QueueStore`, and the typed client and its patterns run on them.
//! Backends take it as a dev-dependency.
//!
//! Each test makes its own table (or container) with a unique name, so tests
//! can share one backend and run in parallel. A failure panics with a message
//! that names the rule.
//!
//! A backend crate runs the whole suite with [`table_conformance_tests!`](crate::table_conformance_tests) and
//! [`blob_conformance_tests!`](crate::blob_conformance_tests), which expand to
//! one `#[tokio::test]` per test (the crate needs `tokio` with `macros` and
//! `rt-multi-thread` as a dev-dependency):
//!
//! ```
//! # fn main() {}
//! mod conformance {
//!     tablekit_conformance::table_conformance_tests!(tablekit_mem::MemBackend::new());
//!     tablekit_conformance::blob_conformance_tests!(tablekit_mem::MemBlobStore::new());
//! }
//! ```
//!
//! [`TABLE_TESTS`] and [`BLOB_TESTS`] list the same tests as data, for runners
//! of their own.

mod batch;
mod blobs;
mod cancel;
pub mod change_bench;
pub mod change_model;
mod changes;
mod collections;
mod encrypted;
mod encrypted_index;
mod encrypted_large;
mod entities;
mod expiry;
mod expiry_indexed;
mod expiry_model;
mod foreign;
mod indexes;
mod keys;
mod large;
mod queries;
mod queues;
mod scale;
mod spanning;
mod tables;
mod updates;
mod validation;
mod versions;
mod yielding;

use futures::future::BoxFuture;

/// The library, for the suite's macros to name from a backend's tests.
#[doc(hidden)]
pub use tablekit as __tablekit;

use tablekit::backend::TableBackend;
use tablekit::blob::BlobStore;
use tablekit::queue::QueueStore;
use tablekit::{Error, InvalidInput};

pub use batch::*;
pub use blobs::*;
pub use cancel::*;
pub use change_model::{ChangeModelOutcomes, change_feed_model_runs};
pub use changes::*;
pub use collections::*;
pub use encrypted::*;
pub use encrypted_index::*;
pub use encrypted_large::*;
pub use entities::*;
pub use expiry::*;
pub use expiry_indexed::*;
pub use expiry_model::*;
pub use foreign::*;
pub use indexes::*;
pub use keys::*;
pub use large::*;
pub use queries::*;
pub use queues::*;
pub use scale::*;
pub use spanning::*;
pub use tables::*;
pub use updates::*;
pub use validation::*;
pub use versions::*;
pub use yielding::*;

/// A table test, as data.
pub type TableTest = for<'a> fn(&'a dyn TableBackend) -> BoxFuture<'a, ()>;
/// A blob test, as data.
pub type BlobTest = for<'a> fn(&'a dyn BlobStore) -> BoxFuture<'a, ()>;
/// A queue test, as data: the store, and how time passes for it.
pub type QueueTest = for<'a> fn(&'a dyn QueueStore, &'a QueueTime) -> BoxFuture<'a, ()>;

/// Calls `$callback!` with the names of every table test.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_table_tests {
    ($callback:ident!($($args:tt)*)) => {
        $crate::$callback! { ($($args)*)
            tables_create_list_delete
            table_names_are_validated
            missing_table_is_reported
            list_tables_pages
            list_tables_by_prefix
            insert_and_get_every_type
            insert_conflicts
            get_missing_entity
            empty_keys_are_allowed
            special_characters_in_keys
            etags_and_timestamps_change_on_every_write
            replace_drops_and_merge_keeps
            update_and_delete_conditions
            upserts_create_and_update
            projections
            keys_sort_by_utf16_code_units
            queries_page_and_resume
            top_limits_each_page
            filters_follow_the_service_rules
            filter_values_cannot_inject
            filter_names_cannot_inject
            random_filters_agree_with_the_evaluator
            borrowed_rows_are_the_entities
            batches_apply_all_operations
            batches_are_atomic
            batch_rules_are_enforced
            key_limits_are_enforced
            property_limits_are_enforced
            value_and_entity_limits_are_enforced
            merged_entities_must_fit
            query_limits_are_enforced
        }
    };
}

/// Calls `$callback!` with the names of every blob test.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_blob_tests {
    ($callback:ident!($($args:tt)*)) => {
        $crate::$callback! { ($($args)*)
            blob_put_get_list_delete
            blob_conditions
            blob_names_are_validated
        }
    };
}

/// Calls `$callback!` with the names of every queue test.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_queue_tests {
    ($callback:ident!($($args:tt)*)) => {
        $crate::$callback! { ($($args)*)
            queues_create_list_delete
            message_texts_round_trip
            messages_put_get_delete
            undeleted_messages_come_back
            updates_renew_receipts
            delays_and_expiry
            queue_input_is_validated
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __queue_tokio_tests {
    (($make:expr) $($name:ident)*) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let (store, time) = $make;
            $crate::$name(&store, &time).await;
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __queue_tests_as_data {
    (() $($name:ident)*) => {
        &[$((stringify!($name), {
            fn __wrap<'a>(
                store: &'a dyn $crate::__tablekit::queue::QueueStore,
                time: &'a $crate::QueueTime,
            ) -> ::futures::future::BoxFuture<'a, ()> {
                ::std::boxed::Box::pin($crate::$name(store, time))
            }
            __wrap as $crate::QueueTest
        })),*]
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __table_tokio_tests {
    (($make:expr) $($name:ident)*) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let backend = $make;
            $crate::$name(&backend).await;
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tests_as_data {
    (($kind:ty, $dyn:ty) $($name:ident)*) => {
        &[$((stringify!($name), {
            fn __wrap<'a>(b: &'a $dyn) -> ::futures::future::BoxFuture<'a, ()> {
                ::std::boxed::Box::pin($crate::$name(b))
            }
            __wrap as $kind
        })),*]
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __typed_tokio_tests {
    (($backend:expr, $blobs:expr) [$($table:ident)*] [$($both:ident)*]) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $table() {
                $crate::$table($backend).await;
            }
        )*
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $both() {
                $crate::$both($backend, $blobs).await;
            }
        )*
    };
}

/// Expands to one `#[tokio::test]` per typed conformance test (data series,
/// wide entities, blob offload), each running on the `Arc<dyn TableBackend>`
/// and `Arc<dyn BlobStore>` that the two expressions evaluate to.
#[macro_export]
macro_rules! typed_conformance_tests {
    ($backend:expr, $blobs:expr) => {
        $crate::__typed_tokio_tests! {
            ($backend, $blobs)
            [inserts_freeing_expired_holders_are_safe_to_drop wide_entities_expire_whole expired_holders_free_their_index_values sweeps_take_index_rows_and_record_expiries migrations_bring_a_changed_time_to_live_to_stored_rows expiring_rows_stay_in_step_under_faults time_to_live_counts_from_each_write expired_rows_are_passed_by_every_read expired_rows_are_swept_by_their_index a_stores_own_time_to_live_does_not_fight_the_sweep sweeps_are_safe_to_drop wide_entities_seal_their_encrypted_fields rewraps_rotate_keys_without_touching_values encrypted_values_are_found_through_hashed_index_rows encrypted_index_rows_follow_every_write encrypted_indexes_need_their_index_key change_feeds_carry_encrypted_values_sealed projections_of_encrypted_entities_read_and_never_write index_rows_copy_encrypted_values_sealed encrypted_fields_read_back_and_are_stored_sealed changed_encrypted_rows_never_read_as_values encrypted_rows_read_under_every_key_of_a_ring foreign_columns_survive_typed_writes kinds_told_apart_by_a_property long_work_gives_the_thread_back wide_entities_span_rows wide_entities_are_never_half_written series_elements_merge_alone wide_part_keys_cannot_collide counter_increments_land_exactly_once resent_writes_apply_once lost_answers_of_typed_writes_are_settled bulk_reports_match_the_store_under_faults foreign_rows_read_back_typed verbatim_keys_map_existing_rows rows_that_do_not_fit_follow_the_policy existing_layouts_map_exactly key_templates_map_other_layouts cursor_pages_cover_every_item_once row_prefix_ranges_need_no_sentinels collections_read_related_kinds_in_one_range employee_and_reviews_form_one_range collection_rows_without_a_kind_are_read_like_get indexes_follow_every_write deletes_take_their_index_rows stale_unique_rows_are_taken_over indexes_stay_in_step_under_faults transactions_span_kinds_and_indexes index_repair_finds_and_fixes raw_audits_find_orphans_stale_copies_and_dangling_lists index_entities_list_entities index_pages_cover_every_entity_once case_insensitive_values_share_one_unique_row optional_values_have_rows_only_when_given older_versions_read_through_upgrades migrations_rewrite_older_rows wide_migrations_resume_after_each_entity migrations_through_projections_are_refused renamed_kinds_read_and_move migrations_count_rows_made_current_meanwhile renamed_wide_kinds_move_whole sharded_partitions_spread_and_merge bucketed_tables_route_read_and_drop ordered_reads_hold_on_every_store changes_follow_every_write changes_ride_with_index_rows change_consumers_keep_their_own_place consumers_commit_their_own_batches_and_read_alone changes_match_commits_under_faults dropped_writes_record_changes_with_them changes_are_trimmed_behind_every_consumer consumer_instances_share_partitions_by_lease change_feed_requests_per_write migrations_record_their_changes previous_values_ride_with_their_changes a_killed_instance_is_taken_over_within_a_lease a_trim_dropped_half_way_is_finished_by_the_next idle_polls_read_no_partition partitions_are_read_until_their_announcement_settles leases_are_kept_with_one_write_per_instance writes_dropped_while_announcing_are_never_missed]
            [expired_entities_take_their_blobs sealed_blob_writes_are_safe_to_drop encrypted_values_offloaded_to_blobs_stay_sealed wide_and_offloaded_kinds_record_their_changes blob_offload_round_trips blob_offload_survives_failures indexes_of_wide_and_offloaded_entities logs_lose_nothing_under_faults logs_flush_by_size_age_and_shutdown]
        }
    };
}

/// Expands to one `#[tokio::test]` per table conformance test, each running on
/// the backend that `$make` evaluates to (a fresh one per test, or a clone of
/// a shared one).
#[macro_export]
macro_rules! table_conformance_tests {
    ($make:expr) => {
        $crate::__with_table_tests!(__table_tokio_tests!($make));
    };
}

/// Expands to one `#[tokio::test]` per blob conformance test, each running on
/// the store that `$make` evaluates to.
#[macro_export]
macro_rules! blob_conformance_tests {
    ($make:expr) => {
        $crate::__with_blob_tests!(__table_tokio_tests!($make));
    };
}

/// Expands to one `#[tokio::test]` per queue conformance test. `$make`
/// evaluates to a pair: the store, and the
/// [`QueueTime`](crate::QueueTime) that lets time pass for it.
///
/// ```
/// # fn main() {}
/// mod queues {
///     use tablekit::clock::ManualClock;
///     use tablekit_conformance::QueueTime;
///     tablekit_conformance::queue_conformance_tests!({
///         let clock = ManualClock::new();
///         (tablekit_mem::MemQueueStore::with_clock(clock.clone()), QueueTime::Manual(clock))
///     });
/// }
/// ```
#[macro_export]
macro_rules! queue_conformance_tests {
    ($make:expr) => {
        $crate::__with_queue_tests!(__queue_tokio_tests!($make));
    };
}

/// Expands to one `#[tokio::test]` per test of changes that span
/// partitions through the outbox. `$make` evaluates to a triple: an
/// `Arc<dyn TableBackend>`, an `Arc<dyn QueueStore>`, and the
/// [`QueueTime`](crate::QueueTime) of the queue store.
/// [`outbox_model_runs`](crate::outbox_model_runs) is run on
/// its own, with a number of runs to suit the backend.
#[macro_export]
macro_rules! outbox_conformance_tests {
    ($make:expr) => {
        $crate::__outbox_tokio_tests! { ($make) moves_cross_partitions moves_meeting_a_change_lose_nothing steps_are_fenced remote_indexes_follow_writes remote_index_repair_finds_and_fixes transactions_put_elsewhere_once_they_commit expired_entities_leave_no_rows_elsewhere }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __outbox_tokio_tests {
    (($make:expr) $($name:ident)*) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let (tables, queues, time) = $make;
            $crate::$name(tables, queues, time).await;
        }
    )*};
}

/// Every queue test with its name.
pub const QUEUE_TESTS: &[(&str, QueueTest)] = __with_queue_tests!(__queue_tests_as_data!());

/// Every table test with its name.
pub const TABLE_TESTS: &[(&str, TableTest)] =
    __with_table_tests!(__tests_as_data!(TableTest, dyn TableBackend));

/// Every blob test with its name.
pub const BLOB_TESTS: &[(&str, BlobTest)] =
    __with_blob_tests!(__tests_as_data!(BlobTest, dyn BlobStore));

/// A fresh table name: `tk`, a tag, and random letters, so tests never collide.
pub fn unique_table(tag: &str) -> String {
    let suffix: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(10)
        .collect();
    format!("tk{tag}{suffix}")
}

/// Creates a fresh table and returns its name.
pub async fn fresh_table(backend: &dyn TableBackend, tag: &str) -> String {
    let name = unique_table(tag);
    backend
        .create_table(&name)
        .await
        .unwrap_or_else(|e| panic!("create table {name}: {e}"));
    name
}

/// Asserts that `result` is the invalid-input error `check` accepts.
#[track_caller]
pub fn assert_invalid<T: std::fmt::Debug>(
    result: Result<T, Error>,
    what: &str,
    check: impl Fn(&InvalidInput) -> bool,
) {
    match result {
        Err(Error::Invalid(invalid)) if check(&invalid) => {}
        other => panic!("{what}: expected a specific invalid-input error, got {other:?}"),
    }
}

/// Waits for the finishing work that dropped writes left running (it runs
/// as tasks of its own) to end.
pub(crate) async fn settle() {
    for _ in 0..10_000 {
        if tablekit::__conformance::detached_in_flight() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("finishing work still runs after 10 s");
}

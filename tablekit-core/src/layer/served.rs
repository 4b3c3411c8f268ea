//! The checks and the telemetry of every call, made once for every store.
//!
//! A backend implements what its store does, and nothing else, as a *raw*
//! contract: [`RawTables`], [`RawBlobs`], [`RawQueues`], the methods of
//! [`TableBackend`], [`BlobStore`] and [`QueueStore`] without their checks.
//! Its public type then implements the contracts with [`serve!`](crate::serve):
//! each call makes the method's door check ([`backend::door`](crate::backend::door),
//! [`blob::door`](crate::blob::door), [`queue::door`](crate::queue::door))
//! and runs the raw method as a storage call of the telemetry
//! ([`Call::storage`](crate::telemetry::Call::storage)). So bad input gets
//! the same error, and every call the same span and metrics, on every
//! backend, and no backend makes either by hand. [`Served`] does the same
//! for a raw implementation written elsewhere.
//!
//! Everything here is generated from the contracts' method lists, as the
//! fault layer is. The raw methods return their futures unboxed, so a
//! served call costs one boxed future, as a call of a backend written
//! straight against the contract does.

use crate::backend::{TableBackend, door as table_door};
use crate::blob::{BlobStore, door as blob_door};
use crate::queue::{QueueStore, door as queue_door};
use crate::telemetry::StoreInfo;

/// A raw implementation ([`RawTables`], [`RawBlobs`], [`RawQueues`]),
/// served: it implements the contracts over it, each call checked at the
/// door ([`backend::door`](crate::backend::door), [`blob::door`](crate::blob::door),
/// [`queue::door`](crate::queue::door)) and run as a storage call of the
/// telemetry, as every backend of this workspace is. For a store written
/// outside it.
pub struct Served<B> {
    inner: B,
    info: fn(&B) -> StoreInfo,
}

impl<B> Served<B> {
    /// Serves `inner`, which `info` describes for the telemetry (asked
    /// only when a span or a metric is recorded).
    pub fn new(inner: B, info: fn(&B) -> StoreInfo) -> Served<B> {
        Served { inner, info }
    }

    /// The raw implementation served.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Served<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Served").field(&self.inner).finish()
    }
}

/// Declares a raw contract from a contract's list of methods: each async
/// method returns its future unboxed; `read_rows`, `read_row`, `reads_rows`,
/// `query_order`, `pacing` and `store_info` keep the contract's defaults.
macro_rules! raw_trait {
    ($raw:ident, $contract:ident, $doc:literal
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[doc = $doc]
        pub trait $raw: Send + Sync + std::fmt::Debug {
            $(raw_trait!(@async $contract $name ($($arg: $ty),*) -> $out);)*
            $(raw_trait!(@sync $contract $sync ($($sarg: $sty),*) -> $sync_out);)*
        }
    };
    (@async $contract:ident read_rows ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        raw_trait!(@refused $contract read_rows ($($arg: $ty),*) -> $out);
    };
    (@async $contract:ident read_row ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        raw_trait!(@refused $contract read_row ($($arg: $ty),*) -> $out);
    };
    // A method a store implements only if it can (rows passed by reference).
    (@refused $contract:ident $name:ident ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::", stringify!($name), "`], unchecked: by default, refused.")]
        fn $name(&self, $($arg: $ty),*) -> impl Future<Output = $out> + Send {
            let _ = ($($arg),*);
            std::future::ready(Err(crate::error::Error::NotSupported {
                operation: stringify!($name),
            }))
        }
    };
    (@async $contract:ident $name:ident ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::", stringify!($name), "`], unchecked and unrecorded.")]
        fn $name(&self, $($arg: $ty),*) -> impl Future<Output = $out> + Send;
    };
    (@sync $contract:ident reads_rows ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::reads_rows`]: by default, no query.")]
        fn reads_rows(&self, $($arg: $ty),*) -> $out {
            let _ = ($($arg),*);
            false
        }
    };
    (@sync $contract:ident query_order () -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::query_order`]: by default, key order.")]
        fn query_order(&self) -> $out {
            crate::backend::QueryOrder::Keys
        }
    };
    (@sync $contract:ident pacing () -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::pacing`]: by default, none.")]
        fn pacing(&self) -> $out {
            None
        }
    };
    (@sync $contract:ident store_info () -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::store_info`]: by default, unknown.")]
        fn store_info(&self) -> $out {
            StoreInfo::unknown()
        }
    };
    (@sync $contract:ident $name:ident ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        #[doc = concat!("[`", stringify!($contract), "::", stringify!($name), "`].")]
        fn $name(&self, $($arg: $ty),*) -> $out;
    };
}

crate::backend::table_methods!(raw_trait!(
    RawTables,
    TableBackend,
    "A table store's own work: [`TableBackend`] without its door checks and telemetry, which [`serve!`](crate::serve) and [`Served`] add."
));
crate::blob::blob_methods!(raw_trait!(
    RawBlobs,
    BlobStore,
    "A blob store's own work: [`BlobStore`] without its door checks and telemetry, which [`serve!`](crate::serve) and [`Served`] add."
));
crate::queue::queue_methods!(raw_trait!(
    RawQueues,
    QueueStore,
    "A queue store's own work: [`QueueStore`] without its door checks and telemetry, which [`serve!`](crate::serve) and [`Served`] add."
));

/// Implements a contract over a raw implementation, from the contract's
/// list of methods: each async call is a storage call of the telemetry,
/// named by its `Operation`, that runs the method's door check
/// (`$door::$name`, taking the method's arguments), then the raw method of
/// `$inner` (`|this| …`, `this` being `self`). Sync methods pass on.
#[doc(hidden)]
#[macro_export]
macro_rules! served_impl {
    ([$($header:tt)*], $raw:ident, $door:ident, |$this:ident| $inner:expr, |$info_this:ident| $info:expr,
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[$crate::__async_trait]
        $($header)* {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    let $this = self;
                    let op: $crate::backend::Operation = $op;
                    let subject = $crate::served_impl!(@subject $name; $($arg),*);
                    let call = $crate::telemetry::Call::storage(
                        || {
                            let $info_this = self;
                            $info
                        },
                        op.name(),
                        subject,
                    );
                    $crate::served_impl!(@run $name; $raw; $door; $inner; call; $($arg),*)
                }
            )*
            $(
                fn $sync(&self, $($sarg: $sty),*) -> $sync_out {
                    let $this = self;
                    $raw::$sync($inner, $($sarg),*)
                }
            )*
        }
    };
    // The collection a call names: the table, container or queue; none
    // for a listing of tables or queues.
    (@subject list_tables; $($arg:ident),*) => { "" };
    (@subject list_queues; $($arg:ident),*) => { "" };
    (@subject $name:ident; $first:ident $(, $rest:ident)*) => { $first };
    // A transaction records its size; a query page its rows.
    (@run submit_transaction; $raw:ident; $door:ident; $inner:expr; $call:ident; $table:ident, $operations:ident) => {
        $call
            .batch_size($operations.len())
            .run(async {
                $door::submit_transaction($table, $operations)?;
                $raw::submit_transaction($inner, $table, $operations).await
            })
            .await
    };
    (@run query_entities; $raw:ident; $door:ident; $inner:expr; $call:ident; $table:ident, $query:ident) => {
        $call
            .run_counted(
                async {
                    $door::query_entities($table, $query)?;
                    $raw::query_entities($inner, $table, $query).await
                },
                |page| Some(page.entities.len()),
            )
            .await
    };
    (@run read_rows; $raw:ident; $door:ident; $inner:expr; $call:ident; $table:ident, $query:ident, $read:ident) => {{
        let passed = std::sync::atomic::AtomicUsize::new(0);
        let mut counted = |row: $crate::backend::RowRef<'_>| {
            passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            $read(row)
        };
        $call
            .run_counted(
                async {
                    $door::read_rows($table, $query, &mut counted)?;
                    // A query the store does not pass by reference is
                    // refused here, for every store, nothing read.
                    if !$raw::reads_rows($inner, $query) {
                        return Err($crate::error::Error::NotSupported {
                            operation: "read_rows of a query the store does not pass by reference",
                        });
                    }
                    $raw::read_rows($inner, $table, $query, &mut counted).await
                },
                |_| Some(passed.load(std::sync::atomic::Ordering::Relaxed)),
            )
            .await
    }};
    // A put's data is checked by reference, then moved on.
    (@run put_blob; $raw:ident; $door:ident; $inner:expr; $call:ident; $container:ident, $name:ident, $data:ident, $condition:ident) => {
        $call
            .run(async {
                $door::put_blob($container, $name, &$data, $condition)?;
                $raw::put_blob($inner, $container, $name, $data, $condition).await
            })
            .await
    };
    (@run $name:ident; $raw:ident; $door:ident; $inner:expr; $call:ident; $($arg:ident),*) => {
        $call
            .run(async {
                $door::$name($($arg),*)?;
                $raw::$name($inner, $($arg),*).await
            })
            .await
    };
}

crate::backend::table_methods!(crate::served_impl!(
    [impl<B: RawTables> TableBackend for Served<B>],
    RawTables,
    table_door,
    |this| &this.inner,
    |this| (this.info)(&this.inner),
));
crate::blob::blob_methods!(crate::served_impl!(
    [impl<B: RawBlobs> BlobStore for Served<B>],
    RawBlobs,
    blob_door,
    |this| &this.inner,
    |this| (this.info)(&this.inner),
));
crate::queue::queue_methods!(crate::served_impl!(
    [impl<B: RawQueues> QueueStore for Served<B>],
    RawQueues,
    queue_door,
    |this| &this.inner,
    |this| (this.info)(&this.inner),
));

/// Serves a backend's public type: implements each contract listed for it
/// over its raw implementation of that contract ([`RawTables`],
/// [`RawBlobs`], [`RawQueues`]), with the door checks and the telemetry of
/// every call; `info` (`|this| …`) describes the store for the telemetry.
/// For backend crates; hidden from the docs.
///
/// ```text
/// tablekit_core::serve!(MemBackend, info: |this| crate::store_info(), contracts: [TableBackend]);
/// impl RawTables for MemBackend { /* the store's own work */ }
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! serve {
    ($public:ty, info: |$this:ident| $info:expr, contracts: [$($contract:ident),+ $(,)?]) => {
        $($crate::serve!(@one $contract, $public, |$this| $info);)+
    };
    (@one TableBackend, $public:ty, |$this:ident| $info:expr) => {
        $crate::serve!(@impl TableBackend, backend, RawTables, table_methods, $public, |$this| $info);
    };
    (@one BlobStore, $public:ty, |$this:ident| $info:expr) => {
        $crate::serve!(@impl BlobStore, blob, RawBlobs, blob_methods, $public, |$this| $info);
    };
    (@one QueueStore, $public:ty, |$this:ident| $info:expr) => {
        $crate::serve!(@impl QueueStore, queue, RawQueues, queue_methods, $public, |$this| $info);
    };
    // A contract, its module (with its `door`), its raw contract and its
    // method list.
    (@impl $contract:ident, $module:ident, $raw:ident, $methods:ident, $public:ty,
        |$this:ident| $info:expr) => {
        const _: () = {
            use $crate::$module::door as __door;
            use $crate::layer::$raw as __Raw;
            $crate::$methods!($crate::served_impl!(
                [impl $crate::__contracts::$contract for $public], __Raw, __door,
                |this| this, |$this| $info,
            ));
        };
    };
}

#[cfg(test)]
mod tests {
    use std::future::{Future, ready};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::backend::{
        BatchOperation, EntityWrite, GetOptions, ListTablesOptions, Query, QueryPage, TablePage,
    };
    use crate::entity::{ETag, Entity, IfMatch};
    use crate::error::{Error, InvalidInput, Result};

    /// A raw store that counts the calls that reach it and does nothing.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl Counting {
        fn reached<T: Send>(&self, value: T) -> impl Future<Output = Result<T>> + Send {
            self.0.fetch_add(1, Ordering::SeqCst);
            ready(Ok(value))
        }
    }

    impl RawTables for Counting {
        fn create_table(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
            self.reached(())
        }
        fn delete_table(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
            self.reached(())
        }
        fn list_tables(
            &self,
            _: &ListTablesOptions,
        ) -> impl Future<Output = Result<TablePage>> + Send {
            self.reached(TablePage {
                tables: Vec::new(),
                continuation: None,
            })
        }
        fn get_entity(
            &self,
            _: &str,
            pk: &str,
            rk: &str,
            _: &GetOptions,
        ) -> impl Future<Output = Result<Entity>> + Send {
            self.reached(Entity::new(pk, rk))
        }
        fn query_entities(
            &self,
            _: &str,
            _: &Query,
        ) -> impl Future<Output = Result<QueryPage>> + Send {
            self.reached(QueryPage::new(Vec::new(), None))
        }
        fn write_entity(
            &self,
            _: &str,
            _: EntityWrite<'_>,
        ) -> impl Future<Output = Result<Option<ETag>>> + Send {
            self.reached(Some(ETag::new("e")))
        }
        fn submit_transaction(
            &self,
            _: &str,
            operations: &[BatchOperation],
        ) -> impl Future<Output = Result<Vec<Option<ETag>>>> + Send {
            self.reached(vec![None; operations.len()])
        }
    }

    fn run<T>(call: impl Future<Output = T>) -> T {
        futures::executor::block_on(call)
    }

    /// A call is checked at the door before it reaches the raw store; a
    /// call that passes reaches it once.
    #[test]
    fn served_calls_are_checked_before_they_reach_the_store() {
        let served = Served::new(Counting::default(), |_| StoreInfo::unknown());
        let reached = || served.inner().0.load(Ordering::SeqCst);
        assert!(matches!(
            run(served.create_table("no spaces")),
            Err(Error::Invalid(InvalidInput::TableName { .. }))
        ));
        let bad = Entity::new("p", "r/").with("v", 1);
        assert!(run(served.write_entity("Good", EntityWrite::Insert(&bad))).is_err());
        let delete = EntityWrite::Delete("p", "r#", &IfMatch::Any);
        assert!(run(served.write_entity("Good", delete)).is_err());
        assert_eq!(reached(), 0, "refused at the door");

        run(served.create_table("Good")).unwrap();
        let good = Entity::new("p", "r").with("v", 1);
        let written = run(served.write_entity("Good", EntityWrite::Insert(&good))).unwrap();
        assert_eq!(written, Some(ETag::new("e")));
        assert_eq!(served.query_order(), crate::backend::QueryOrder::Keys);
        assert_eq!(reached(), 2);
    }
}

//! [`Served`]: the layer every store stands behind. It makes the door
//! checks of each call ([`backend::door`](crate::backend::door),
//! [`blob::door`](crate::blob::door), [`queue::door`](crate::queue::door))
//! and records it as a storage call in the telemetry
//! ([`Call::storage`]), so that no backend does either by hand: a backend
//! implements what its store does, and bad input gets the same error, and
//! every call the same span and metrics, on every backend.
//!
//! A backend's public type implements the contracts by passing each call to
//! `Served` around its own implementation, with [`forward_to!`](crate::forward_to).

use async_trait::async_trait;

use crate::backend::{Operation, TableBackend, door as table_door};
use crate::blob::{BlobStore, door as blob_door};
use crate::queue::{QueueStore, door as queue_door};
use crate::telemetry::{Call, StoreInfo};

/// The checks and telemetry of each call, around a store that makes
/// neither: the door checks of each call, and its span and metrics.
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

    /// The store served.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Served<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Served").field(&self.inner).finish()
    }
}

/// Implements a contract for [`Served`] from the contract's list of
/// methods: each async call is a storage call of the telemetry, named by
/// its [`Operation`], that runs the method's door check (`$door::$name`,
/// taking the method's arguments), then the inner store's method. Sync
/// methods pass on.
macro_rules! served_impl {
    ($contract:ident, $door:ident
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<B: $contract> $contract for Served<B> {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    let op: Operation = $op;
                    let subject = served_impl!(@subject $name; $($arg),*);
                    let call = Call::storage(|| (self.info)(&self.inner), op.name(), subject);
                    served_impl!(@run $name; self; call; $door; $($arg),*)
                }
            )*
            $(
                fn $sync(&self, $($sarg: $sty),*) -> $sync_out {
                    self.inner.$sync($($sarg),*)
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
    (@run submit_transaction; $self:ident; $call:ident; $door:ident; $table:ident, $operations:ident) => {
        $call
            .batch_size($operations.len())
            .run(async {
                $door::submit_transaction($table, $operations)?;
                $self.inner.submit_transaction($table, $operations).await
            })
            .await
    };
    (@run query_entities; $self:ident; $call:ident; $door:ident; $table:ident, $query:ident) => {
        $call
            .run_counted(
                async {
                    $door::query_entities($table, $query)?;
                    $self.inner.query_entities($table, $query).await
                },
                |page| Some(page.entities.len()),
            )
            .await
    };
    (@run read_rows; $self:ident; $call:ident; $door:ident; $table:ident, $query:ident, $read:ident) => {{
        let lent = std::sync::atomic::AtomicUsize::new(0);
        let mut counted = |row: $crate::backend::LentRow<'_>| {
            lent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            $read(row)
        };
        $call
            .run_counted(
                async {
                    $door::read_rows($table, $query, &mut counted)?;
                    $self.inner.read_rows($table, $query, &mut counted).await
                },
                |_| Some(lent.load(std::sync::atomic::Ordering::Relaxed)),
            )
            .await
    }};
    // A put's data is checked by reference, then moved on.
    (@run put_blob; $self:ident; $call:ident; $door:ident; $container:ident, $name:ident, $data:ident, $condition:ident) => {
        $call
            .run(async {
                $door::put_blob($container, $name, &$data, $condition)?;
                $self.inner.put_blob($container, $name, $data, $condition).await
            })
            .await
    };
    (@run $name:ident; $self:ident; $call:ident; $door:ident; $($arg:ident),*) => {
        $call
            .run(async {
                $door::$name($($arg),*)?;
                $self.inner.$name($($arg),*).await
            })
            .await
    };
}

crate::backend::table_methods!(served_impl!(TableBackend, table_door));
crate::blob::blob_methods!(served_impl!(BlobStore, blob_door));
crate::queue::queue_methods!(served_impl!(QueueStore, queue_door));

/// Serves a backend's public type: declares `$raw`, the backend's own
/// implementation of its contracts (a borrow of the public value that
/// derefs to it, for the backend to implement the contracts on), and
/// implements each contract listed for the public type by passing every
/// call to a [`Served`] around `$raw` that `info` describes. For backend
/// crates; hidden from the docs.
///
/// ```text
/// tablekit_core::serve!(Raw for MemBackend, info: |raw| raw.store_info(), contracts: [TableBackend]);
/// impl TableBackend for Raw<'_> { /* the store's own work */ }
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! serve {
    ($vis:vis $raw:ident for $public:ty, info: $info:expr, contracts: [$($contract:ident),+ $(,)?]) => {
        /// The store's own implementation of its contracts, which its public
        /// type serves behind the door checks and the telemetry
        /// (`tablekit_core::layer::Served`).
        #[derive(Debug)]
        $vis struct $raw<'a>(&'a $public);

        impl std::ops::Deref for $raw<'_> {
            type Target = $public;
            fn deref(&self) -> &$public {
                self.0
            }
        }

        impl $public {
            /// This store, served: each call checked at the door and recorded.
            fn served(&self) -> $crate::layer::Served<$raw<'_>> {
                $crate::layer::Served::new($raw(self), $info)
            }
        }

        $($crate::forward_to!($contract for $public, |this| this.served());)+
    };
}

/// Implements a contract for a backend's public type by passing each call
/// to the value `$via` makes of it (`|this| …`, with `this` the public
/// value): in practice a [`Served`] around the backend's own
/// implementation. For backend crates; hidden from the docs.
#[doc(hidden)]
#[macro_export]
macro_rules! forward_to {
    (TableBackend for $target:ty, |$this:ident| $via:expr) => {
        $crate::table_methods!($crate::forward_to!(@impl TableBackend, $target, $this, $via,));
    };
    (BlobStore for $target:ty, |$this:ident| $via:expr) => {
        $crate::blob_methods!($crate::forward_to!(@impl BlobStore, $target, $this, $via,));
    };
    (QueueStore for $target:ty, |$this:ident| $via:expr) => {
        $crate::queue_methods!($crate::forward_to!(@impl QueueStore, $target, $this, $via,));
    };
    (@impl $contract:ident, $target:ty, $this:ident, $via:expr,
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[$crate::__async_trait]
        impl $crate::__contracts::$contract for $target {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    let $this = self;
                    $via.$name($($arg),*).await
                }
            )*
            $(
                fn $sync(&self, $($sarg: $sty),*) -> $sync_out {
                    let $this = self;
                    $via.$sync($($sarg),*)
                }
            )*
        }
    };
}

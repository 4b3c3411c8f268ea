//! Layers: wrappers around any backend, blob store or queue store that
//! change what they need to and forward the rest.
//!
//! [`FaultInjection`] makes chosen operations fail with transient errors, lose
//! their response after being applied, or run late, so that client code is
//! tested against what the real service may do.
//!
//! [`Served`] is the layer every store stands behind: a store implements
//! its own work as a raw contract ([`RawTables`], [`RawBlobs`],
//! [`RawQueues`]: the contract's methods without their checks), and
//! `Served` implements the contract over it, checking each call at the
//! door and recording it in the [telemetry](crate::telemetry). The
//! backends of this workspace are served so.
//!
//! ```
//! # async fn demo(backend: impl tablekit::TableBackend) {
//! use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
//! let faulty = FaultInjection::new(backend);
//! // The 2nd insert is applied, but its response is lost.
//! faulty.handle().inject(Injection::on(Operation::InsertEntity).skip(1).fault(Fault::LostResponse));
//! # }
//! ```

mod served;

pub use crate::backend::Operation;
pub use served::{RawBlobs, RawQueues, RawTables, Served};

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::backend::TableBackend;
use crate::blob::BlobStore;
use crate::error::{Error, Result};
use crate::queue::QueueStore;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fail with [`Error::Transient`] without reaching the backend.
    Transient,
    /// Fail with [`Error::Throttled`] without reaching the backend.
    Throttled,
    /// Let the backend act, then fail as if the response was lost on the way
    /// back: a write fails with [`Error::OutcomeUnknown`] (whether the backend
    /// applied it or refused it), a read with [`Error::Transient`].
    LostResponse,
    /// Let the backend act, then fail with [`Error::Transient`] whatever it
    /// did: a proxy's or the service's 5xx that comes after the write was
    /// applied, which a caller takes for a failure it may try again.
    FailsAfterApply,
    /// Let the backend act, then send the same call again and answer with
    /// what the second gave: a transport that resends a write the store
    /// applied, after a proxy's 503 that came once it was applied (the
    /// resend then meets the write's own change: a 412, a 409). Calls that
    /// are not table writes fail as [`Fault::Transient`] does.
    Resent,
}

/// A rule: which calls of which operation fail, and how.
#[derive(Debug, Clone)]
pub struct Injection {
    operation: Option<Operation>,
    skip: usize,
    times: usize,
    probability: f64,
    fault: Fault,
}

impl Injection {
    /// Aims at every call of `operation`: by default the next call fails once
    /// with [`Fault::Transient`].
    pub fn on(operation: Operation) -> Injection {
        Injection {
            operation: Some(operation),
            skip: 0,
            times: 1,
            probability: 1.0,
            fault: Fault::Transient,
        }
    }

    /// Aims at calls of any operation.
    pub fn any() -> Injection {
        Injection {
            operation: None,
            ..Injection::on(Operation::CreateTable)
        }
    }

    /// Lets the first `n` matching calls through first.
    pub fn skip(mut self, n: usize) -> Injection {
        self.skip = n;
        self
    }

    /// Fails this many matching calls (after the skipped ones); `usize::MAX` for always.
    pub fn times(mut self, n: usize) -> Injection {
        self.times = n;
        self
    }

    /// Fails each matching call only with this probability (0.0–1.0), drawn
    /// from the handle's seeded generator.
    pub fn probability(mut self, p: f64) -> Injection {
        self.probability = p;
        self
    }

    /// What the fault does.
    pub fn fault(mut self, fault: Fault) -> Injection {
        self.fault = fault;
        self
    }
}

#[derive(Debug)]
struct Plan {
    rules: Vec<Injection>,
    latency: Option<Duration>,
    yields: bool,
    calls: HashMap<Operation, usize>,
    rng: fastrand::Rng,
}

/// Controls a [`FaultInjection`] layer, also after the layer was moved into an
/// `Arc<dyn TableBackend>`. Clones control the same layer.
#[derive(Debug, Clone)]
pub struct FaultHandle {
    plan: Arc<Mutex<Plan>>,
}

impl FaultHandle {
    /// Adds a rule. Rules are consulted in order; the first that fires decides.
    pub fn inject(&self, injection: Injection) {
        self.plan.lock().rules.push(injection);
    }

    /// Removes every rule, the latency and the yields.
    pub fn clear(&self) {
        let mut plan = self.plan.lock();
        plan.rules.clear();
        plan.latency = None;
        plan.yields = false;
    }

    /// Makes every call give way to the executor once before it reaches the
    /// store and once after (the store has applied it, the answer is still
    /// on its way), as a call over a network does. Those are the points
    /// where a caller's future can be dropped: see `drop_after_polls` in the
    /// `tablekit-conformance` crate, which drops a write after each of them.
    pub fn set_yields(&self, yields: bool) {
        self.plan.lock().yields = yields;
    }

    /// Delays every call by `latency` (`None` for no delay).
    pub fn set_latency(&self, latency: Option<Duration>) {
        self.plan.lock().latency = latency;
    }

    /// Reseeds the generator behind [`Injection::probability`].
    pub fn seed(&self, seed: u64) {
        self.plan.lock().rng.seed(seed);
    }

    /// How many calls of `operation` the layer has seen (faulted ones included).
    pub fn calls(&self, operation: Operation) -> usize {
        self.plan.lock().calls.get(&operation).copied().unwrap_or(0)
    }

    /// Counts the call and decides its fault, if any.
    fn decide(&self, operation: Operation) -> (Option<Duration>, bool, Option<Fault>) {
        let mut plan = self.plan.lock();
        *plan.calls.entry(operation).or_default() += 1;
        let latency = plan.latency;
        let yields = plan.yields;
        let Plan { rules, rng, .. } = &mut *plan;
        for rule in rules.iter_mut() {
            if rule.operation.is_some_and(|op| op != operation) || rule.times == 0 {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if rule.probability < 1.0 && rng.f64() >= rule.probability {
                continue;
            }
            rule.times -= 1;
            return (latency, yields, Some(rule.fault));
        }
        (latency, yields, None)
    }

    /// Runs `call` under the plan for `operation`; `again`, where given
    /// (a table write), makes the same call once more, for [`Fault::Resent`].
    async fn run_resendable<T, F: Future<Output = Result<T>>>(
        &self,
        operation: Operation,
        call: impl Future<Output = Result<T>>,
        again: Option<impl FnOnce() -> F>,
    ) -> Result<T> {
        let (latency, yields, fault) = self.decide(operation);
        let (fault, call) = match (fault, again) {
            (Some(Fault::Resent), Some(again)) => {
                let _ = call.await;
                (None, futures::future::Either::Left(again()))
            }
            (Some(Fault::Resent), None) => {
                (Some(Fault::Transient), futures::future::Either::Right(call))
            }
            (fault, _) => (fault, futures::future::Either::Right(call)),
        };
        if let Some(delay) = latency {
            tokio::time::sleep(delay).await;
        }
        if yields {
            YieldOnce(false).await;
            let outcome = Box::pin(self.run_decided(operation, fault, call)).await;
            YieldOnce(false).await;
            return outcome;
        }
        self.run_decided(operation, fault, call).await
    }

    /// Runs `call` with the fault decided for it.
    async fn run_decided<T>(
        &self,
        operation: Operation,
        fault: Option<Fault>,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let injected = |what: &str| Error::Transient {
            message: format!("injected fault: {what} of {operation:?}"),
        };
        match fault {
            None => call.await,
            Some(Fault::Transient) => Err(injected("failure")),
            Some(Fault::Throttled) => Err(Error::Throttled { retry_after: None }),
            // Settled by `run_resendable` before it comes here.
            Some(Fault::Resent) => Err(injected("resend")),
            Some(Fault::FailsAfterApply) => {
                let _ = call.await;
                Err(injected("failure after the call was applied"))
            }
            Some(Fault::LostResponse) => {
                // The outcome is dropped on purpose: the caller cannot know it.
                let _ = call.await;
                if operation.is_write() {
                    Err(Error::OutcomeUnknown {
                        message: format!("injected fault: lost response of {operation:?}"),
                    })
                } else {
                    Err(injected("lost response"))
                }
            }
        }
    }
}

/// Returns `Pending` once (waking itself at once), then `Ready`: a point
/// where the executor may run something else, or drop the future.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// A layer that injects faults and latency into any backend, blob store or
/// queue store.
pub struct FaultInjection<B> {
    inner: B,
    handle: FaultHandle,
}

impl<B> FaultInjection<B> {
    /// Wraps `inner`, with no faults yet.
    pub fn new(inner: B) -> FaultInjection<B> {
        FaultInjection {
            inner,
            handle: FaultHandle {
                plan: Arc::new(Mutex::new(Plan {
                    rules: Vec::new(),
                    latency: None,
                    yields: false,
                    calls: HashMap::new(),
                    rng: fastrand::Rng::with_seed(0x7AB1E),
                })),
            },
        }
    }

    /// The handle that controls this layer.
    pub fn handle(&self) -> FaultHandle {
        self.handle.clone()
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: fmt::Debug> fmt::Debug for FaultInjection<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjection")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Implements a contract for [`FaultInjection`] from the contract's list of
/// methods (`table_methods!` in `backend.rs`, and those of the blob and
/// queue contracts): every async call runs under the plan for its
/// [`Operation`], sent twice for [`Fault::Resent`] where the list says
/// `resend`; the others pass on to the inner store.
macro_rules! fault_impl {
    ($contract:ident
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<B: $contract> $contract for FaultInjection<B> {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    let call = self.inner.$name($($arg),*);
                    fault_impl!(@run [$($resend)*], self, $op, call, || self.inner.$name($($arg),*))
                }
            )*
            $(
                fn $sync(&self, $($sarg: $sty),*) -> $sync_out {
                    self.inner.$sync($($sarg),*)
                }
            )*
        }
    };
    // Never sent twice: no second call is made.
    (@run [false], $self:ident, $op:expr, $call:ident, $again:expr) => {
        $self
            .handle
            .run_resendable($op, $call, None::<fn() -> std::future::Pending<_>>)
            .await
    };
    // Sent twice where the list's expression says so.
    (@run [$($resend:tt)*], $self:ident, $op:expr, $call:ident, $again:expr) => {
        $self
            .handle
            .run_resendable($op, $call, ($($resend)*).then_some($again))
            .await
    };
}

crate::backend::table_methods!(fault_impl!(TableBackend));
crate::blob::blob_methods!(fault_impl!(BlobStore));
crate::queue::queue_methods!(fault_impl!(QueueStore));

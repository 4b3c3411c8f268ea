//! The engine's panics, contained and kept off standard error.
//!
//! redb can panic on a damaged page (an `unreachable!` in its cursor, a
//! slice index out of range) instead of returning `Corrupted`. The store
//! catches such a panic at its boundary and reports the file as damaged
//! ([`contain_panics`]). Rust's panic hook would still print the panic
//! (`thread '…' panicked at …redb…`) on the application's standard error,
//! for a panic the application never had. So the first containment puts a
//! hook in front of the one installed (the default, or the application's
//! own), which says nothing of a panic raised while the store contains
//! one on this thread (it is logged at `debug` instead) and hands every
//! other panic to the hook before it. The application's own code run from
//! inside (a row reader given to `read_rows`) runs [`outside`] that, so
//! its panics are printed as ever.
//!
//! Written by hand: no maintained crate silences the hook for a scope.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// How many containments this thread is inside.
    static CONTAINING: Cell<u32> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

/// Puts the quiet hook in front of the installed one, once per process.
fn install_hook() {
    // The hook cannot be changed from a thread that is panicking (a store
    // closed by a drop during an unwind): it is put in place by a later
    // containment instead.
    if std::thread::panicking() {
        return;
    }
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(Cell::get) > 0 {
                tracing::debug!(panic = %info, "the storage engine panicked; the store reports it as damage");
                return;
            }
            before(info);
        }));
    });
}

/// Sets the thread's count of containments for as long as it lives, and
/// puts the one it found back when dropped (also when unwinding).
struct Depth(u32);

impl Depth {
    fn set(depth: u32) -> Depth {
        Depth(CONTAINING.with(|c| c.replace(depth)))
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        CONTAINING.with(|c| c.set(self.0));
    }
}

/// Runs `operation`, catching a panic of the engine: the panic's message,
/// never printed, is the error (the caller reports it as
/// [`StorageFailure::Damaged`](tablekit_core::StorageFailure::Damaged)).
pub(crate) fn contain_panics<T>(operation: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let depth = Depth::set(CONTAINING.with(Cell::get) + 1);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(operation));
    drop(depth);
    caught.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned())
    })
}

/// Runs the application's `code` from inside a containment, where a panic
/// of its own is printed as usual.
pub(crate) fn outside<T>(code: impl FnOnce() -> T) -> T {
    let _depth = Depth::set(0);
    code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_is_counted_per_thread_and_outside_resets_it() {
        let depth = || CONTAINING.with(Cell::get);
        assert_eq!(depth(), 0);
        let inside = contain_panics(|| {
            let here = depth();
            let user = outside(depth);
            let nested = contain_panics(depth).unwrap();
            (here, user, nested)
        });
        assert_eq!(inside.unwrap(), (1, 0, 2));
        // Put back after a panic too, of the engine's or the user's.
        assert_eq!(
            contain_panics(|| panic!("engine page")).unwrap_err(),
            "engine page"
        );
        assert_eq!(depth(), 0);
        let user = contain_panics(|| {
            std::panic::catch_unwind(|| outside(|| panic!("the reader's own"))).is_err()
                && depth() == 1
        });
        assert_eq!(user, Ok(true));
        assert_eq!(depth(), 0);
    }
}

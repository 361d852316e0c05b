//! The lock on top of a [`LockStore`](crate::store::LockStore): the handle, the guard
//! whose life is the critical section, how a waiter waits, and the watchdog.

mod backoff;
mod fairness;
mod fencing;
mod guard;
mod held;
mod hold_token;
mod local;
mod local_turn;
mod mutex;
mod release_on_drop;
pub(crate) mod section;
mod waiter;
mod watchdog;

pub use fairness::Fairness;
pub use fencing::Fencing;
pub use guard::MutexGuard;
pub use hold_token::HoldToken;
pub(crate) use local::LocalLocks;
pub use mutex::Mutex;
pub use release_on_drop::finish_background_releases;
pub(crate) use release_on_drop::{ReleaseOnDrop, spawn_release};
pub(crate) use waiter::Won;

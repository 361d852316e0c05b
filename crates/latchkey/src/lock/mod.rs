//! The lock on top of a [`LockStore`](crate::store::LockStore): the handle, the guard
//! whose life is the critical section, and how a waiter waits.

mod backoff;
mod guard;
mod mutex;
mod release_on_drop;

pub use guard::MutexGuard;
pub use mutex::Mutex;

//! Distributed locks on Redis that get the details right.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
//! let guard = client.mutex("orders:42")?.lock().await?;
//! println!("holding orders:42 with fencing token {}", guard.fence());
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! What every lock does:
//!
//! - **Leases.** A lock is held for a TTL ([`Ttl::DEFAULT`] is 30 s). A holder that
//!   crashes blocks others for at most that long.
//! - **Owner tokens.** Each acquisition carries a fresh 128-bit token from the OS
//!   CSPRNG. Release is compare-and-delete and extend is compare-and-PEXPIRE, so a
//!   holder whose lease ended can never free or extend the next holder's lock.
//! - **Fencing tokens.** [`MutexGuard::fence`] grows strictly with every acquisition,
//!   even across a restart of a Redis that kept nothing on disk. Pass it to the
//!   resource you protect so a holder that stalled past its lease cannot overwrite
//!   newer work.
//! - **Cancel safety.** Dropping a waiting future or a guard never leaves the lock
//!   held: the release runs in the background on the same runtime.
//! - **Interop.** The lock key holds exactly the owner token with a PX expiry, the
//!   layout of `SET key token NX PX ttl`, so redis-py's `Lock`, redsync and
//!   node-redlock on the same key exclude latchkey and are excluded by it.
//!
//! Synchronous callers use [`blocking`]. The key layout and the Lua scripts are
//! described in [`LockKey`] and in the `scripts/` folder of the source.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The redis-rs crate latchkey is built on, so a critical section can touch data
/// with the same version: `latchkey::redis::AsyncCommands`.
pub use redis;

pub mod blocking;
mod client;
mod error;
mod key;
mod lease;
mod lock;
pub mod ratelimit;
mod scripts;
pub mod store;
mod token;

pub use client::Client;
pub use error::{Cause, Error, Result};
pub use key::{LockKey, Prefix};
pub use lease::{Lease, Ttl};
pub use lock::{Fairness, LockStatus, Mutex, MutexGuard, finish_background_releases};
pub use token::OwnerToken;

//! Locks over a quorum of independent Redis masters (Redlock), with fencing tokens
//! that hold across the quorum.
//!
//! [`QuorumStore`] is a store like [`RedisStore`](crate::store::RedisStore): the
//! same [`Mutex`](crate::Mutex), guard, watchdog and CLI work on it. A lock is held
//! when a majority of the masters hold it; a minority may be down, slow or
//! restarted without delaying anything.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::open_quorum(&[
//!     "redis://10.0.0.1:6379",
//!     "redis://10.0.0.2:6379",
//!     "redis://10.0.0.3:6379",
//! ])
//! .await?;
//! let guard = client.mutex("nightly-report")?.lock().await?;
//! println!("fence {}", guard.fence().await?);
//! # Ok(()) }
//! ```
//!
//! How the pieces fit (in the source): `round.rs` asks every node at once and
//! settles on a majority; `tally.rs` is the arithmetic (a majority, the fencing
//! token), free of I/O, so the exhaustive model check (`model.rs`, a test) runs the
//! same code; `attempts.rs` gives each attempt a value of its own; what every node
//! said ends up in [`Error::NoQuorum`](crate::Error::NoQuorum) ([`NodeReport`]).

mod attempts;
#[cfg(test)]
mod model;
mod report;
mod round;
mod store;
mod tally;

pub use report::{NodeAnswer, NodeReport};
pub use store::QuorumStore;

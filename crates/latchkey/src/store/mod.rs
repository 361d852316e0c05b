//! The store: the few atomic operations a lock needs, behind one small trait.
//!
//! Like `lock_api`'s raw traits, [`LockStore`] does only the atomic work; the guard,
//! waiting and cancellation logic in [`crate::lock`] is written once on top of it and
//! does not know whether it talks to one node, a quorum or a cluster.

mod connection;
mod single_node;

use std::future::Future;
use std::time::Duration;

pub use connection::Connection;
pub use single_node::SingleNode;

use crate::error::Result;
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::token::OwnerToken;

/// What one acquire attempt found.
///
/// ```
/// use latchkey::store::Attempt;
/// let a = Attempt::Busy { pttl: None };
/// assert!(!matches!(a, Attempt::Acquired { .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    Acquired {
        /// Strictly larger than every token handed out for this lock before.
        fence: u64,
    },
    /// Someone else holds it.
    Busy {
        /// The holder's remaining lease; `None` when the holder set no expiry.
        pttl: Option<Duration>,
    },
}

/// The atomic operations behind a lock.
///
/// Every method is one atomic step on the server side; implementations map server
/// errors to [`crate::Error`] with the node and key for context.
///
/// ```no_run
/// use latchkey::store::{Attempt, LockStore, SingleNode};
/// use latchkey::{LockKey, OwnerToken, Prefix, Ttl};
///
/// # async fn demo() -> latchkey::Result<()> {
/// let store = SingleNode::open("redis://127.0.0.1:6379").await?;
/// let key = LockKey::new(&Prefix::default(), "raw-demo")?;
/// let me = OwnerToken::generate()?;
/// if let Attempt::Acquired { fence } = store.try_acquire(&key, &me, Ttl::DEFAULT).await? {
///     println!("fence {fence}");
///     store.release(&key, &me).await?;
/// }
/// # Ok(()) }
/// ```
pub trait LockStore: Clone + Send + Sync + 'static {
    /// Sets `owner` on `key` with a lease of `ttl` if the key is free.
    fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        ttl: Ttl,
    ) -> impl Future<Output = Result<Attempt>> + Send;

    /// Deletes `key` if it holds `owner`; true when it did.
    fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Resets `key`'s lease to `ttl` if it holds `owner`; true when it did.
    fn extend(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        ttl: Ttl,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// The value the lock key holds now (the holder's token), if any.
    fn owner(&self, key: &LockKey) -> impl Future<Output = Result<Option<String>>> + Send;
}

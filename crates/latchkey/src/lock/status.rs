//! What `latchkey status` shows: who holds a lock, for how long, who waits.

use std::time::Duration;

use crate::token::{is_latchkey_owner, mask_owner};

/// A snapshot of one lock, read atomically.
///
/// ```
/// use latchkey::LockStatus;
/// let free = LockStatus { holder: None, ttl: None, fence: Some(7), waiters: 0 };
/// assert!(!free.is_held());
/// assert_eq!(free.masked_holder(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatus {
    /// The holder's owner token (full: mask it before showing it, see
    /// [`masked_holder`](Self::masked_holder)); `None` when the lock is free.
    pub holder: Option<String>,
    /// The holder's remaining lease; `None` when free or held without expiry.
    pub ttl: Option<Duration>,
    /// The last fencing token handed out for this lock, if any; `None` while another
    /// library holds it (that holder got no fencing token).
    pub fence: Option<u64>,
    /// Waiters in the queue (including any whose waiter lease ran out but that no
    /// release has swept yet).
    pub waiters: u64,
}

impl LockStatus {
    /// Whether someone holds the lock.
    pub fn is_held(&self) -> bool {
        self.holder.is_some()
    }

    /// Whether the holder is a latchkey client (`false` when free, or when another
    /// library such as redis-py or redsync holds the lock).
    ///
    /// ```
    /// use latchkey::LockStatus;
    /// let theirs = LockStatus { holder: Some("5f0c9e1a2b3c".into()), ttl: None, fence: None, waiters: 0 };
    /// assert!(theirs.is_held() && !theirs.is_held_by_latchkey());
    /// ```
    pub fn is_held_by_latchkey(&self) -> bool {
        self.holder.as_deref().is_some_and(is_latchkey_owner)
    }

    /// The holder's token, masked for display.
    pub fn masked_holder(&self) -> Option<String> {
        self.holder.as_deref().map(mask_owner)
    }
}

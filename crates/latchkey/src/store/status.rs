//! What a store reads of one lock (and `latchkey status` shows): who holds it, for
//! how long, who waits.

use std::time::Duration;

use crate::token::{is_latchkey_owner, mask_owner};

/// `scripts/look/lock.lua`'s reply: holder, pttl, last fence, waiters.
/// Bytes, not text: another application's value may be anything.
pub(crate) type LockReply = (Option<Vec<u8>>, i64, Option<Vec<u8>>, u64);

/// A snapshot of one lock, read atomically by [`Mutex::status`](crate::Mutex::status)
/// and [`Client::list`](crate::Client::list).
///
/// ```
/// use latchkey::LockStatus;
/// let free = LockStatus::new(None, None, Some(7), 0);
/// assert!(!free.is_held());
/// assert_eq!(free.masked_holder(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The holder's owner token (full: mask it before showing it, see
    /// [`masked_holder`](Self::masked_holder)); `None` when the lock is free.
    pub holder: Option<String>,
    /// The holder's remaining lease; `None` when free or held without expiry.
    pub ttl: Option<Duration>,
    /// The last fencing token handed out for this lock, if any. The counter expires
    /// one lease after the grant it fenced, so it may be `None` during a long hold
    /// (see [Fencing](crate#fencing)); it is `None` while another library holds the
    /// lock (that holder got no fencing token).
    pub fence: Option<u64>,
    /// Waiters in the queue (including any whose waiter lease ran out but that no
    /// release has swept yet).
    pub waiters: u64,
}

impl LockStatus {
    /// A status, as a store read it (see the fields).
    ///
    /// ```
    /// let held = latchkey::LockStatus::new(Some("3cd1…".into()), None, Some(4), 2);
    /// assert_eq!(held.waiters, 2);
    /// ```
    pub fn new(
        holder: Option<String>,
        ttl: Option<Duration>,
        fence: Option<u64>,
        waiters: u64,
    ) -> Self {
        LockStatus {
            holder,
            ttl,
            fence,
            waiters,
        }
    }

    /// Whether someone holds the lock (latchkey or another library, or a waiter the
    /// lock was handed to, from the moment of the handover).
    ///
    /// ```
    /// let held = latchkey::LockStatus::new(Some("3cd1…".into()), None, None, 2);
    /// assert!(held.is_held());
    /// ```
    pub fn is_held(&self) -> bool {
        self.holder.is_some()
    }

    /// Whether the holder is a latchkey client (`false` when free, or when another
    /// library such as redis-py or redsync holds the lock).
    ///
    /// ```
    /// use latchkey::LockStatus;
    /// let theirs = LockStatus::new(Some("5f0c9e1a2b3c".into()), None, None, 0);
    /// assert!(theirs.is_held() && !theirs.is_held_by_latchkey());
    /// ```
    pub fn is_held_by_latchkey(&self) -> bool {
        self.holder.as_deref().is_some_and(is_latchkey_owner)
    }

    /// The holder's token, masked for display: its first 4 characters and "…"
    /// ("(hidden)" for a value of 8 characters or fewer, so a short one is not
    /// half shown).
    ///
    /// ```
    /// let holder = "3cd1a5e09f7b4c2d8e6f1a0b9c8d7e6f".to_owned();
    /// let status = latchkey::LockStatus::new(Some(holder), None, None, 0);
    /// assert_eq!(status.masked_holder().as_deref(), Some("3cd1…"));
    /// let short = latchkey::LockStatus::new(Some("1".to_owned()), None, None, 0);
    /// assert_eq!(short.masked_holder().as_deref(), Some("(hidden)"));
    /// ```
    pub fn masked_holder(&self) -> Option<String> {
        self.holder.as_deref().map(mask_owner)
    }

    /// Builds a status from the reply of `scripts/look/lock.lua`.
    pub(crate) fn from_reply((holder, pttl, fence, waiters): LockReply) -> Self {
        let holder = holder.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        // A counter someone overwrote with text is no fence.
        let fence = fence.and_then(|bytes| std::str::from_utf8(&bytes).ok()?.parse().ok());
        // The counter belongs to latchkey's holders: another library's holder got
        // no fence, and showing an earlier holder's as if it were current misleads.
        let fence = match holder.as_deref().is_some_and(|h| !is_latchkey_owner(h)) {
            true => None,
            false => fence,
        };
        let ttl = u64::try_from(pttl).ok().map(Duration::from_millis);
        LockStatus::new(holder, ttl, fence, waiters)
    }
}

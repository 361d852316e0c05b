//! What `latchkey status` shows of a semaphore or a read-write lock.

use std::time::Duration;

use crate::token::mask_owner;

/// A snapshot of a [`Semaphore`](crate::Semaphore) (or a [`RwLock`](crate::RwLock),
/// whose writer holds every permit), read atomically by
/// [`Client::inspect`](crate::Client::inspect). Only live leases count, at the
/// server's time of reading.
///
/// ```
/// let status = latchkey::semaphore::SemaphoreStatus::default();
/// assert!(!status.is_held());
/// assert_eq!(status.available(), None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreStatus {
    /// The permit count stored while anyone holds or waits (see
    /// [`Client::semaphore`](crate::Client::semaphore)); `None` when nobody does.
    pub permits: Option<u64>,
    /// The weight the live permits hold.
    pub used: u64,
    /// How many live permits there are (each acquisition is one, whatever its weight).
    pub live: u64,
    /// The first live permits by lease end, at most [`HOLDERS_SHOWN`](Self::HOLDERS_SHOWN).
    pub holders: Vec<PermitHolder>,
    /// Waiters in line (including any whose waiter lease ran out but that no
    /// release has swept yet).
    pub waiters: u64,
    /// The last fencing token handed out, if the counter is still there.
    pub fence: Option<u64>,
}

impl SemaphoreStatus {
    /// The most holders a status lists; [`live`](Self::live) counts them all.
    pub const HOLDERS_SHOWN: usize = 100;

    /// Whether any permit is held.
    ///
    /// ```
    /// assert!(!latchkey::semaphore::SemaphoreStatus::default().is_held());
    /// ```
    pub fn is_held(&self) -> bool {
        self.live > 0
    }

    /// Permits free now, when the count is known.
    ///
    /// ```
    /// let status = latchkey::semaphore::SemaphoreStatus::default();
    /// assert_eq!(status.available(), None);
    /// ```
    pub fn available(&self) -> Option<u64> {
        self.permits
            .map(|permits| permits.saturating_sub(self.used))
    }

    /// Builds a status from the reply of `scripts/look/permits.lua`.
    pub(crate) fn from_reply(reply: PermitsReply) -> Self {
        let (permits, fence, waiters, live, used, listed) = reply;
        SemaphoreStatus {
            permits,
            used,
            live,
            holders: listed
                .into_iter()
                .filter_map(PermitHolder::from_member)
                .collect(),
            waiters,
            fence,
        }
    }
}

/// `scripts/look/permits.lua`'s reply: count, fence, waiters, live, used, and
/// `(member, ms left)` for the first holders.
pub(crate) type PermitsReply = (Option<u64>, Option<u64>, u64, u64, u64, Vec<(String, i64)>);

/// One live permit of a semaphore or read-write lock.
///
/// ```
/// # fn show(holder: &latchkey::semaphore::PermitHolder) {
/// println!("{} holds {} for {:?} more", holder.masked_owner(), holder.weight, holder.ttl);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitHolder {
    /// The holder's owner token (full: mask it before showing it, see
    /// [`masked_owner`](Self::masked_owner)).
    pub owner: String,
    /// Permits it holds (a read-write lock's writer holds them all).
    pub weight: u64,
    /// What is left of its lease.
    pub ttl: Duration,
}

impl PermitHolder {
    /// The owner token, masked for display: its first 4 characters and "…".
    ///
    /// ```
    /// # fn show(holder: &latchkey::semaphore::PermitHolder) {
    /// println!("held by {}", holder.masked_owner());
    /// # }
    /// ```
    pub fn masked_owner(&self) -> String {
        mask_owner(&self.owner)
    }

    /// A holder from its member (`<weight>*<owner>`) and its ms left; `None` for a
    /// member latchkey did not write.
    pub(crate) fn from_member((member, left): (String, i64)) -> Option<Self> {
        let (weight, owner) = member.split_once('*')?;
        Some(PermitHolder {
            owner: owner.to_owned(),
            weight: weight.parse().ok()?,
            ttl: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
        })
    }
}

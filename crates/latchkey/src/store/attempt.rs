//! What one acquire attempt asks a store for, and what it answers.

use std::time::Duration;

use crate::lease::Ttl;

/// What one acquire attempt asks for: a plain try by default; [`fair`](Self::fair)
/// and [`queued`](Self::queued) change it.
///
/// ```
/// use latchkey::store::AcquireRequest;
/// let once = AcquireRequest::new(latchkey::Ttl::DEFAULT);
/// assert!(!once.fair && once.queue_lease.is_none());
/// let waiting = once.fair(true).queued(Some(latchkey::Ttl::DEFAULT));
/// assert!(waiting.fair && waiting.queue_lease.is_some());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireRequest {
    /// The lease to hold the lock for.
    pub ttl: Ttl,
    /// Fair (FIFO) waiters never overtake live waiters queued before them; plain
    /// ones may take a free lock whoever waits.
    pub fair: bool,
    /// `Some(lease)`: join (or stay in) the lock's wait queue, as a waiter that
    /// counts as dead if it does not try again within `lease`. `None`: just try.
    pub queue_lease: Option<Ttl>,
    /// Compute the fencing token with the grant. Without it a store may grant
    /// without one ([`Attempt::Acquired`] with `fence: None`), to be computed only if
    /// the holder asks ([`LockStore::fence`](super::LockStore::fence)): the
    /// uncontended path then costs what `SET NX PX` costs.
    pub fenced: bool,
}

impl AcquireRequest {
    /// A plain try for a lease of `ttl`, without joining the queue.
    ///
    /// ```
    /// let once = latchkey::store::AcquireRequest::new(latchkey::Ttl::DEFAULT);
    /// assert_eq!(once.ttl, latchkey::Ttl::DEFAULT);
    /// ```
    pub fn new(ttl: Ttl) -> Self {
        AcquireRequest {
            ttl,
            fair: false,
            queue_lease: None,
            fenced: false,
        }
    }

    /// The same request, fair (FIFO) or plain.
    ///
    /// ```
    /// assert!(latchkey::store::AcquireRequest::new(latchkey::Ttl::DEFAULT).fair(true).fair);
    /// ```
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// The same request, joining (or staying in) the queue with a waiter lease of
    /// `lease`, or just trying with `None`.
    ///
    /// ```
    /// use latchkey::{store::AcquireRequest, Ttl};
    /// let waiting = AcquireRequest::new(Ttl::DEFAULT).queued(Some(Ttl::DEFAULT));
    /// assert_eq!(waiting.queue_lease, Some(Ttl::DEFAULT));
    /// ```
    pub fn queued(mut self, lease: Option<Ttl>) -> Self {
        self.queue_lease = lease;
        self
    }

    /// The same request, asking for the fencing token with the grant (`true`) or
    /// leaving it to the store (`false`).
    ///
    /// ```
    /// assert!(latchkey::store::AcquireRequest::new(latchkey::Ttl::DEFAULT).fenced(true).fenced);
    /// ```
    pub fn fenced(mut self, fenced: bool) -> Self {
        self.fenced = fenced;
        self
    }
}

/// What one acquire attempt found.
///
/// ```
/// use latchkey::store::Attempt;
/// let a = Attempt::busy(None, None);
/// assert!(!matches!(a, Attempt::Acquired { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    #[non_exhaustive]
    Acquired {
        /// Strictly larger than every token handed out for this lock before; `None`
        /// when the store granted without one (the request was not
        /// [`fenced`](AcquireRequest::fenced)): ask
        /// [`LockStore::fence`](super::LockStore::fence) if one is needed.
        fence: Option<u64>,
        /// Others in the lock's wait queue when it was granted (0 when the attempt
        /// did not look): while they wait, a task of this process gets the lock only
        /// by a pass ahead of them (see [`Pass`](super::Pass)).
        queued: u64,
        /// Replicas that confirmed the grant (`WAIT`), from a store asked to wait
        /// for them; `None` otherwise.
        replicas: Option<u32>,
    },
    /// Someone else holds it.
    #[non_exhaustive]
    Busy {
        /// The holder's remaining lease; `None` when the holder set no expiry.
        pttl: Option<Duration>,
        /// The holder's owner value (full: mask it before showing it); `None` when
        /// the lock is free but owed to a fair waiter.
        holder: Option<String>,
        /// From an attempt that joined (or stayed in) the queue: every fencing token
        /// granted after it is larger, and so is the server clock (µs) at every later
        /// handover, so a wake-up that hands this waiter a number at or below it (see
        /// [`Handed::fence`](super::Handed::fence)) is stale: the lock it handed has
        /// been lost since. 0 otherwise.
        fence_floor: u64,
        /// From an attempt that joined (or stayed in) the queue: when the waiter lease
        /// it set ends (server ms). A wake-up whose
        /// [`Handed::waiter_lease_end`](super::Handed::waiter_lease_end) is older
        /// comes from a server that lost this attempt. 0 otherwise.
        waiter_lease_end: u64,
    },
}

impl Attempt {
    /// The lock is ours with fencing token `fence`; `queued` others wait for it.
    ///
    /// ```
    /// let won = latchkey::store::Attempt::acquired(7, 0);
    /// assert!(matches!(won, latchkey::store::Attempt::Acquired { fence: Some(7), .. }));
    /// ```
    pub fn acquired(fence: u64, queued: u64) -> Self {
        Attempt::Acquired {
            fence: Some(fence),
            queued,
            replicas: None,
        }
    }

    /// The lock is ours, with no fencing token yet; `queued` others wait for it.
    ///
    /// ```
    /// let won = latchkey::store::Attempt::unfenced(0);
    /// assert!(matches!(won, latchkey::store::Attempt::Acquired { fence: None, .. }));
    /// ```
    pub fn unfenced(queued: u64) -> Self {
        Attempt::Acquired {
            fence: None,
            queued,
            replicas: None,
        }
    }

    /// Someone else holds it (`holder`, for `pttl` more), or it is owed to a fair
    /// waiter (`holder` is `None`). A store that hands wake-ups with fencing tokens
    /// adds the queue's floor with [`queued_at`](Self::queued_at).
    ///
    /// ```
    /// use std::time::Duration;
    /// let busy = latchkey::store::Attempt::busy(Some(Duration::from_secs(3)), Some("3cd1…".into()));
    /// assert!(matches!(busy, latchkey::store::Attempt::Busy { fence_floor: 0, .. }));
    /// ```
    pub fn busy(pttl: Option<Duration>, holder: Option<String>) -> Self {
        Attempt::Busy {
            pttl,
            holder,
            fence_floor: 0,
            waiter_lease_end: 0,
        }
    }

    /// An acquired answer that `replicas` replicas confirmed (see
    /// [`Acquired::replicas`](Self::Acquired)); a busy one is returned unchanged.
    ///
    /// ```
    /// let won = latchkey::store::Attempt::acquired(7, 0).confirmed_by(1);
    /// assert!(matches!(won, latchkey::store::Attempt::Acquired { replicas: Some(1), .. }));
    /// ```
    pub fn confirmed_by(self, replicas: u32) -> Self {
        match self {
            Attempt::Acquired { fence, queued, .. } => Attempt::Acquired {
                fence,
                queued,
                replicas: Some(replicas),
            },
            busy => busy,
        }
    }

    /// A busy answer to a queued attempt, with its fence floor and the end of the
    /// waiter lease it set (see the fields of [`Busy`](Self::Busy)); an acquired one
    /// is returned unchanged.
    ///
    /// ```
    /// let busy = latchkey::store::Attempt::busy(None, None).queued_at(41, 1_700_000_000_000);
    /// assert!(matches!(busy, latchkey::store::Attempt::Busy { fence_floor: 41, .. }));
    /// ```
    pub fn queued_at(self, fence_floor: u64, waiter_lease_end: u64) -> Self {
        match self {
            Attempt::Busy { pttl, holder, .. } => Attempt::Busy {
                pttl,
                holder,
                fence_floor,
                waiter_lease_end,
            },
            acquired => acquired,
        }
    }
}

/// What [`LockStore::try_acquire_all`](super::LockStore::try_acquire_all) did with
/// several locks: took every one, or none because one was busy.
///
/// ```
/// use latchkey::store::AllOrNone;
/// let busy = AllOrNone::Busy { index: 1, pttl: None, holder: Some("3cd1…".into()) };
/// assert_ne!(busy, AllOrNone::Taken);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllOrNone {
    /// Every lock is now held by its owner.
    Taken,
    /// None was taken: the lock at `index` (in the order given) is held by
    /// `holder`, for `pttl` more (`None`: no expiry).
    Busy {
        /// Which lock, in the order given.
        index: usize,
        /// Its holder's remaining lease.
        pttl: Option<Duration>,
        /// Its holder's owner token (full: mask it before showing it).
        holder: Option<String>,
    },
}

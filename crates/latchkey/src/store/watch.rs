//! A waiter's registration for its wake-up, as any store can make one.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

/// How often a listener reads while subscribed, at least (see
/// [`Watch::recheck_within`]).
pub(crate) const RECHECK_AT_MOST: Duration = Duration::from_secs(10);
/// How often a listener reads while its subscription is down.
pub(crate) const RECHECK_UNSUBSCRIBED: Duration = Duration::from_secs(1);

/// A waiter's registration for its wake-up. Dropping it unregisters.
///
/// A store with pub/sub makes one per waiter from [`WakeUps::watch`](super::WakeUps);
/// a store of your own makes one with [`Watch::pair`] and wakes it through the
/// [`Notifier`].
///
/// ```no_run
/// use latchkey::store::WakeUps;
/// # async fn demo(store: latchkey::store::RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
/// let me = latchkey::OwnerToken::generate()?;
/// let watch = store.watch(&key, &me).await?;
/// watch.notified().await; // a release picked us
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Watch {
    /// `None`: never fires.
    wakeup: Option<Arc<Wakeup>>,
    /// A pub/sub registration: live while its subscription is confirmed. `None`
    /// with a wake-up: made by [`Watch::pair`], live while its notifier exists.
    subscription: Option<Box<dyn Subscription>>,
    /// Handovers only wake the waiter, which then claims the lock with a try of its
    /// own (a store that must have replicas confirm every grant it makes).
    wake_only: bool,
    /// A watch on several nodes: it fires when any of these does.
    any_of: Vec<Watch>,
}

/// A registration on a subscriber connection; dropping it unregisters.
pub(crate) trait Subscription: Send + Sync + std::fmt::Debug {
    /// Whether the server confirmed the subscription on the current connection.
    fn is_live(&self) -> bool;
}

impl Watch {
    /// A watch that never fires, for stores without wake-ups.
    ///
    /// ```
    /// assert!(!latchkey::store::Watch::never().is_live());
    /// ```
    pub fn never() -> Self {
        Watch::default()
    }

    /// A watch and the notifier that wakes it, for a store that delivers wake-ups
    /// itself (in memory, or over its own transport). The watch is live while the
    /// notifier exists.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let (watch, notifier) = latchkey::store::Watch::pair();
    /// assert!(watch.is_live());
    /// notifier.wake(None);
    /// watch.notified().await; // kept until awaited
    /// drop(notifier);
    /// assert!(!watch.is_live());
    /// # }
    /// ```
    pub fn pair() -> (Watch, Notifier) {
        let wakeup = Arc::new(Wakeup::default());
        let notifier = Notifier(Arc::downgrade(&wakeup));
        let watch = Watch {
            wakeup: Some(wakeup),
            ..Watch::default()
        };
        (watch, notifier)
    }

    /// A watch woken through `wakeup`, live while `subscription` is confirmed.
    pub(crate) fn subscribed(
        wakeup: Arc<Wakeup>,
        subscription: impl Subscription + 'static,
    ) -> Self {
        Watch {
            wakeup: Some(wakeup),
            subscription: Some(Box::new(subscription)),
            ..Watch::default()
        }
    }

    /// One watch over several (a store on several nodes watches each of them): it
    /// fires when any of them fires, and is live while any of them is. It only
    /// wakes: [`take_handed`](Self::take_handed) returns `None`.
    ///
    /// ```
    /// use latchkey::store::Watch;
    /// let (first, wake_first) = Watch::pair();
    /// let (second, _wake_second) = Watch::pair();
    /// let both = Watch::any(vec![first, second]);
    /// assert!(both.is_live());
    /// wake_first.wake(None);
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// both.notified().await; // returns at once: the first one fired
    /// # });
    /// ```
    pub fn any(watches: Vec<Watch>) -> Self {
        Watch {
            any_of: watches,
            wake_only: true,
            ..Watch::default()
        }
    }

    /// The same watch, for which a handover only wakes the waiter (see
    /// [`take_handed`](Self::take_handed)).
    pub(crate) fn wake_only(mut self) -> Self {
        self.wake_only = true;
        self
    }

    /// Whether wake-ups can arrive now: the server confirmed the subscription on the
    /// current subscriber connection (or, for [`pair`](Self::pair), the notifier
    /// exists). While not, a waiter must re-check on its own.
    ///
    /// ```no_run
    /// # fn demo(watch: latchkey::store::Watch) {
    /// let recheck_in = if watch.is_live() { 1_000 } else { 50 }; // ms
    /// # }
    /// ```
    pub fn is_live(&self) -> bool {
        if !self.any_of.is_empty() {
            return self.any_of.iter().any(Watch::is_live);
        }
        let Some(wakeup) = &self.wakeup else {
            return false;
        };
        match &self.subscription {
            Some(subscription) => subscription.is_live(),
            None => Arc::weak_count(wakeup) > 0,
        }
    }

    /// The longest a listener that wants to see a change without polling (an
    /// election's observer, a latch's waiter) may go without reading: it re-reads
    /// at least this often in case a message was missed, every
    /// [`RECHECK_UNSUBSCRIBED`] while the subscription is down, every
    /// [`RECHECK_AT_MOST`] otherwise.
    pub(crate) fn recheck_within(&self) -> Duration {
        match self.is_live() {
            true => RECHECK_AT_MOST,
            false => RECHECK_UNSUBSCRIBED,
        }
    }

    /// Resolves when a release named this waiter, or the subscriber connection was
    /// lost and re-established (re-check the lock either way). A wake-up that came
    /// while nobody awaited is kept for the next call. Never resolves for
    /// [`never`](Self::never).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future loses no wake-up.
    ///
    /// ```no_run
    /// # async fn demo(watch: latchkey::store::Watch) {
    /// tokio::select! {
    ///     () = watch.notified() => println!("a release named us"),
    ///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => println!("re-check anyway"),
    /// }
    /// # }
    /// ```
    pub async fn notified(&self) {
        if !self.any_of.is_empty() {
            let each = self.any_of.iter().map(|watch| Box::pin(watch.notified()));
            futures_util::future::select_all(each).await;
            return;
        }
        match &self.wakeup {
            Some(wakeup) => wakeup.notify.notified().await,
            None => std::future::pending().await,
        }
    }

    /// The lock a release handed to this waiter, if one did since the last call: the
    /// lock is then the waiter's, for the lease it asked for or what was left of its
    /// waiter lease when the release ran, whichever was shorter. Taken: the next call
    /// says `None` until another release names this waiter. Always `None` from a
    /// store that waits for replicas to confirm a grant: the release did not, so
    /// the waiter's next try claims the lock (with a new fencing token) and waits.
    ///
    /// ```no_run
    /// # async fn demo(watch: latchkey::store::Watch) {
    /// watch.notified().await;
    /// if let Some(handed) = watch.take_handed() {
    ///     println!("the lock is ours, fencing token {:?}", handed.token());
    /// }
    /// # }
    /// ```
    pub fn take_handed(&self) -> Option<Handed> {
        let wakeup = self.wakeup.as_ref()?;
        let handed = wakeup
            .handed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        handed.filter(|_| !self.wake_only)
    }
}

/// Wakes the [`Watch`] made with it by [`Watch::pair`]; dropping it makes the watch
/// not live (its waiter then re-checks on its timer).
///
/// ```
/// let (watch, notifier) = latchkey::store::Watch::pair();
/// assert!(notifier.is_watched());
/// drop(watch);
/// assert!(!notifier.is_watched());
/// ```
#[derive(Clone, Debug)]
pub struct Notifier(Weak<Wakeup>);

impl Notifier {
    /// Wakes the waiter to re-check the lock, or, with `handed`, tells it a release
    /// granted it the lock (only for a store whose release grants to waiters, with a
    /// fencing token from the queued attempt's floor on: see [`Handed`]).
    ///
    /// ```
    /// let (watch, notifier) = latchkey::store::Watch::pair();
    /// notifier.wake(Some(latchkey::store::Handed::new(8, 1_700_000_000_000)));
    /// assert_eq!(watch.take_handed().map(|h| h.fence), Some(8));
    /// ```
    pub fn wake(&self, handed: Option<Handed>) {
        if let Some(wakeup) = self.0.upgrade() {
            wakeup.wake(handed);
        }
    }

    /// Whether the watch still exists (a store may forget notifiers that are not).
    ///
    /// ```
    /// let (watch, notifier) = latchkey::store::Watch::pair();
    /// assert!(notifier.is_watched());
    /// ```
    pub fn is_watched(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// A lock a release handed to a waiter, as the wake-up message told it.
///
/// ```
/// let handed = latchkey::store::Handed::new(12, 1_700_000_000_000);
/// println!("token {:?}, waiter lease ended at {} ms", handed.token(), handed.waiter_lease_end);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Handed {
    /// What orders this handover against the waiter's
    /// [`fence_floor`](super::Attempt::Busy): the fencing token the release granted,
    /// or, for a lock handed over without one (see [`fenced`](Self::fenced)), the
    /// server clock at the handover (µs), which does so just as a token would.
    pub fence: u64,
    /// Whether [`fence`](Self::fence) is a fencing token. False when the waiter
    /// asked for its token on demand (its request was not
    /// [`fenced`](super::AcquireRequest::fenced)): the holder computes it when it
    /// needs one ([`LockStore::fence`](super::LockStore::fence)).
    pub fenced: bool,
    /// When the waiter's lease ended as the release saw it (server ms): the handed
    /// lock lasts no longer. Older than the end the waiter's own last queued attempt
    /// set means the server lost that attempt (it restarted from older state), and
    /// the lock may end sooner than the waiter would count on.
    pub waiter_lease_end: u64,
}

impl Handed {
    /// A handover of fencing token `fence`, from a release that saw the waiter's
    /// lease end at `waiter_lease_end` (server ms).
    ///
    /// ```
    /// assert_eq!(latchkey::store::Handed::new(3, 9).token(), Some(3));
    /// ```
    pub fn new(fence: u64, waiter_lease_end: u64) -> Self {
        Handed {
            fence,
            fenced: true,
            waiter_lease_end,
        }
    }

    /// A handover without a fencing token, at server clock `clock_us` (µs), from a
    /// release that saw the waiter's lease end at `waiter_lease_end` (server ms).
    ///
    /// ```
    /// let handed = latchkey::store::Handed::unfenced(1_700_000_000_000_000, 9);
    /// assert_eq!(handed.token(), None);
    /// ```
    pub fn unfenced(clock_us: u64, waiter_lease_end: u64) -> Self {
        Handed {
            fence: clock_us,
            fenced: false,
            waiter_lease_end,
        }
    }

    /// The fencing token the release granted, if it granted one.
    ///
    /// ```
    /// assert_eq!(latchkey::store::Handed::new(12, 9).token(), Some(12));
    /// ```
    pub fn token(&self) -> Option<u64> {
        self.fenced.then_some(self.fence)
    }
}

/// What a release tells one waiter: wake up, and (from a release that granted it the
/// lock) what it was handed.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    /// `None`: nothing handed since the waiter last looked.
    handed: Mutex<Option<Handed>>,
}

impl Wakeup {
    pub(crate) fn wake(&self, handed: Option<Handed>) {
        if handed.is_some() {
            *self.handed.lock().unwrap_or_else(|p| p.into_inner()) = handed;
        }
        self.notify.notify_one();
    }
}

//! The store under a semaphore's permits: the lock's seam, on a set of holders.

use redis::Script;

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::scripts::{self, ScriptCall};
use crate::store::{
    AcquireRequest, Attempt, LockStore, Pass, RedisStore, WakeUps, Watch, fence_from,
    released_alone,
};
use crate::token::OwnerToken;

use super::{PermitHolder, SemaphoreStatus};

/// A [`LockStore`] whose "lock" is `weight` of a semaphore's `permits`: many
/// owners hold it at once while their weights fit, in strict FIFO order.
///
/// It is what lets [`Semaphore`](crate::Semaphore) and [`RwLock`](crate::RwLock)
/// reuse the lock's guard, watchdog, waiting and cancel safety unchanged: a permit is
/// a [`MutexGuard`](crate::MutexGuard) over this store. Each permit has its own
/// owner token, lease and fencing token. Made by those types, not by hand.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let pool = client.semaphore("db-pool", 10)?;
/// let permit: latchkey::MutexGuard<latchkey::semaphore::PermitStore> = pool.acquire(1).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PermitStore {
    inner: RedisStore,
    permits: u64,
    weight: u64,
    /// Waits at the head of the line, ahead of everyone (an upgradeable read's
    /// upgrade: see `RwLock::upgradeable_read`).
    front: bool,
}

impl PermitStore {
    pub(crate) fn new(inner: RedisStore, permits: u64, weight: u64) -> Self {
        PermitStore {
            inner,
            permits,
            weight,
            front: false,
        }
    }

    /// A refusal of the acquire script because the semaphore is in use with another
    /// permit count (`LKPERMITS n`), as a clear error; any other error as it is.
    fn other_count(&self, key: &LockKey, error: Error) -> Error {
        let text = error.to_string();
        let Some(agreed) = text
            .split_once("LKPERMITS ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        else {
            return error;
        };
        Error::InvalidArgument(format!(
            "the semaphore {:?} is in use with {agreed} permits, not {}: give every caller \
             the same count (it changes once nobody holds or waits for the semaphore)",
            key.name(),
            self.permits
        ))
    }

    /// How many permits each acquisition through this store holds.
    pub(crate) fn weight(&self) -> u64 {
        self.weight
    }

    /// Trades `owner`'s permits for those of `to` (fewer) under `new_owner`, with a
    /// lease of `ttl`, in one step that serves the line:
    /// `scripts/semaphore/downgrade.lua`. False when `owner`'s permits were no
    /// longer live (nothing done).
    pub(crate) async fn downgrade(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        (to, new_owner): (&PermitStore, &OwnerToken),
        ttl: Ttl,
    ) -> Result<bool> {
        let mut call = with_keys(&scripts::SEMAPHORE_DOWNGRADE, key);
        call.arg(self.member(owner))
            .arg(to.member(new_owner))
            .arg(self.permits)
            .arg(ttl.as_millis())
            .arg(self.inner.publish_mode());
        // With `with_wait_replicas`, replicas confirm the trade as they do a grant: a
        // failover must not bring the write back with nobody renewing it.
        let (traded, replicas): (i64, _) = self.inner.run_confirmed(&call, key).await?;
        if traded == 1 {
            self.inner.confirmed(key, replicas)?;
        }
        Ok(traded == 1)
    }

    /// The same store, whose waiters go to the head of the line: for a request
    /// nobody else can be granted ahead of anyway (an upgradeable read's upgrade,
    /// which no writer can pass), so that waiting behind one cannot deadlock.
    pub(crate) fn at_the_front(mut self) -> Self {
        self.front = true;
        self
    }

    /// The same store, for acquisitions of `weight` permits.
    pub(crate) fn with_weight(&self, weight: u64) -> PermitStore {
        PermitStore {
            weight,
            ..self.clone()
        }
    }

    /// The holders' member for `owner`: its weight and its token.
    fn member(&self, owner: &OwnerToken) -> String {
        format!("{}*{}", self.weight, owner.as_str())
    }

    /// Reads the live permits: weight held, waiters, the first holder, and whether
    /// `member` holds one.
    pub(crate) async fn look(&self, key: &LockKey, member: &str) -> Result<Look> {
        let mut call = ScriptCall::new(
            &scripts::SEMAPHORE_LOOK,
            &[key.as_str(), key.queue(), &key.companion(USED)],
        );
        call.arg(member);
        let (used, waiting, first, mine): (u64, u64, Option<String>, u8) =
            self.inner.run(&call, key).await?;
        let first = first.and_then(|m| m.split_once('*').map(|(_, owner)| owner.to_owned()));
        Ok(Look {
            used,
            waiting,
            first,
            mine: mine == 1,
        })
    }
}

impl PermitStore {
    /// Drops every live permit of the semaphore at `key` and serves its line;
    /// returns what was dropped.
    pub(crate) async fn force_release(
        store: &RedisStore,
        key: &LockKey,
    ) -> Result<SemaphoreStatus> {
        let mut call = with_keys(&scripts::SEMAPHORE_BREAK, key);
        call.arg(store.publish_mode());
        let dropped: Vec<(String, i64)> = store.run(&call, key).await?;
        let holders: Vec<_> = dropped
            .into_iter()
            .filter_map(PermitHolder::from_member)
            .collect();
        Ok(SemaphoreStatus {
            used: holders.iter().map(|h| h.weight).sum(),
            live: holders.len() as u64,
            holders,
            ..SemaphoreStatus::default()
        })
    }
}

impl PermitStore {
    /// A first try without a fence on a semaphore nobody waits for, when the
    /// permits fit: `scripts/semaphore/acquire_alone.lua`. `None` when the acquire
    /// script must answer.
    async fn acquire_alone(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Option<Attempt>> {
        let mut call = ScriptCall::new(
            &scripts::SEMAPHORE_ACQUIRE_ALONE,
            &[
                key.as_str(),
                &key.companion(USED),
                &key.companion(PERMITS),
                key.queue(),
            ],
        );
        call.arg(self.member(owner))
            .arg(request.ttl.as_millis())
            .arg(self.weight)
            .arg(self.permits);
        let (taken, replicas): (i64, _) = self.inner.run_confirmed(&call, key).await?;
        if taken != 1 {
            return Ok(None);
        }
        let won = Attempt::unfenced(0);
        let granted = self
            .inner
            .confirmed_grant(self, key, (owner, request), won, replicas);
        Ok(Some(granted.await?))
    }
}

/// What [`PermitStore::look`] read.
pub(crate) struct Look {
    pub(crate) used: u64,
    pub(crate) waiting: u64,
    pub(crate) first: Option<String>,
    pub(crate) mine: bool,
}

/// `script` with a semaphore's six keys.
fn with_keys(script: &'static Script, key: &LockKey) -> ScriptCall<'static> {
    let keys = [
        key.as_str(),
        key.fence(),
        key.queue(),
        key.leases(),
        key.channel(),
        &key.companion(USED),
        &key.companion(PERMITS),
    ];
    ScriptCall::new(script, &keys)
}

/// The companion beside the holders that keeps the weight they hold.
const USED: &str = "used";
/// The companion that keeps the permit count while the semaphore is in use.
pub(crate) const PERMITS: &str = "permits";

impl LockStore for PermitStore {
    fn node(&self) -> &str {
        self.inner.node()
    }

    fn deployment(&self) -> &'static str {
        self.inner.deployment()
    }

    fn units(&self) -> u64 {
        self.weight
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Attempt> {
        if request.queue_lease.is_none() && !request.fenced {
            if let Some(attempt) = self.acquire_alone(key, owner, request).await? {
                return Ok(attempt);
            }
        }
        let mut call = with_keys(&scripts::SEMAPHORE_ACQUIRE, key);
        call.arg(owner.as_str())
            .arg(request.ttl.as_millis())
            .arg(self.weight)
            .arg(self.permits)
            .arg(request.queue_lease.map_or(0, Ttl::as_millis))
            .arg(self.inner.publish_mode())
            .arg(if self.front { "front" } else { "" });
        // With `with_wait_replicas`, replicas confirm the grant as a lock's: a
        // failover must not forget permits and hand out more than N.
        let (reply, replicas) = self
            .inner
            .run_confirmed(&call, key)
            .await
            .map_err(|error| self.other_count(key, error))?;
        self.inner
            .attempt_from(self, key, (owner, request), reply, replicas)
            .await
    }

    async fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: Option<Ttl>,
    ) -> Result<bool> {
        let mut call = with_keys(&scripts::SEMAPHORE_RELEASE, key);
        call.arg(owner.as_str())
            .arg(self.weight)
            .arg(self.permits)
            .arg(leaving.map_or(String::new(), |ttl| ttl.as_millis().to_string()))
            .arg(self.inner.publish_mode());
        self.inner.run_release(&call, key).await
    }

    async fn release_alone(&self, key: &LockKey, owner: &OwnerToken) -> Result<Option<bool>> {
        let mut call = ScriptCall::new(
            &scripts::SEMAPHORE_RELEASE_ALONE,
            &[key.as_str(), &key.companion(USED), key.queue()],
        );
        call.arg(self.member(owner)).arg(self.weight);
        let released: i64 = self.inner.run_release(&call, key).await?;
        Ok(released_alone(released))
    }

    async fn fence(&self, key: &LockKey, owner: &OwnerToken) -> Result<Option<u64>> {
        let mut call = ScriptCall::new(&scripts::SEMAPHORE_FENCE, &[key.as_str(), key.fence()]);
        call.arg(self.member(owner));
        let fence: u64 = self.inner.run(&call, key).await?;
        Ok(fence_from(fence))
    }

    async fn extend(&self, key: &LockKey, owner: &OwnerToken, ttl: Ttl) -> Result<bool> {
        let mut call = ScriptCall::new(
            &scripts::SEMAPHORE_EXTEND,
            &[key.as_str(), &key.companion(USED), &key.companion(PERMITS)],
        );
        call.arg(self.member(owner)).arg(ttl.as_millis());
        let (extended, replicas) = self.inner.run_confirmed(&call, key).await?;
        if extended {
            self.inner.confirmed(key, replicas)?;
        }
        Ok(extended)
    }

    /// One holder of a live permit (the first by lease end), if any.
    async fn owner(&self, key: &LockKey) -> Result<Option<String>> {
        Ok(self.look(key, "").await?.first)
    }

    async fn holds(&self, key: &LockKey, owner: &OwnerToken) -> Result<bool> {
        Ok(self.look(key, &self.member(owner)).await?.mine)
    }
}

/// Permits are never passed between tasks: every waiter stands in the one line.
impl Pass for PermitStore {}

/// Waiters are woken as a lock's are: the release that serves them publishes on
/// the semaphore's channel.
impl WakeUps for PermitStore {
    async fn watch(&self, key: &LockKey, owner: &OwnerToken) -> Result<Watch> {
        self.inner.watch(key, owner).await
    }

    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        self.inner.join_watch(key, owner)
    }
}

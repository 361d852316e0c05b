//! The entry point: a connection (or store) plus a key prefix.

use crate::election::Election;
use crate::error::Result;
use crate::key::{Kind, LockKey, Prefix};
use crate::latch::{Barrier, Latch};
use crate::lock::LocalLocks;
use crate::lock::Mutex;
use crate::multilock::MultiLock;
use crate::quorum::QuorumStore;
use crate::ratelimit::{Policy, RateLimiter};
use crate::store::{Connection, Inspect, LockStatus, Pass, RateStore, RedisStore, WakeUps};
use crate::transaction::Transaction;
use crate::{RwLock, Semaphore};

/// Hands out locks on one store, all under one key prefix. Cheap to clone: clones
/// share the connection, the subscriber connection that wakes waiters, and the local
/// line in which the tasks of this process pass plain locks to each other (see
/// [Plain or fair](crate#plain-or-fair)).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?.with_prefix("myapp:")?;
/// let guard = client.mutex("invoice:7")?.try_lock().await?; // key "myapp:invoice:7"
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client<S = RedisStore> {
    store: S,
    prefix: Prefix,
    // Lets the client's mutex handles pass a lock between their tasks.
    local: LocalLocks,
}

impl Client<RedisStore> {
    /// Connects to one Redis server by URL (`redis://`, `rediss://` for TLS,
    /// `redis+unix://`). User name and password go in the URL. One PING checks the
    /// server and the credentials now, not at the first lock. The connection
    /// reconnects by itself and is replaced when a reply times out (see
    /// [Under faults](crate#under-faults)).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a URL that
    ///   cannot be parsed (the message never echoes the password);
    /// - [`Error::Unreachable`](crate::Error::Unreachable) when nothing answers within
    ///   the 2 s connect and 1 s reply timeouts;
    /// - [`Error::AuthFailed`](crate::Error::AuthFailed) for a wrong or missing password;
    /// - [`Error::AclDenied`](crate::Error::AclDenied) for a user that may not even PING;
    /// - [`Error::NotRedis`](crate::Error::NotRedis) when the port is not a Redis server;
    /// - [`Error::Tls`](crate::Error::Tls) for a TLS handshake that failed, an
    ///   untrusted certificate, or a `rediss://` URL whose server does not speak TLS;
    /// - [`Error::Redis`](crate::Error::Redis) for any other error reply.
    ///
    /// A replica is not detected here: the first lock answers
    /// [`Error::ReadOnly`](crate::Error::ReadOnly).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: no lock is involved yet.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open("redis://app:secret@127.0.0.1:6379/0").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(url: &str) -> Result<Self> {
        Ok(Client::with_store(RedisStore::open(url).await?))
    }

    /// Connects to a Redis Cluster through `seeds`, the URLs of some of its nodes
    /// (see [`RedisStore::open_cluster`]): the same locks, waiting and fencing, each
    /// lock on the primary that owns its hash slot, wake-ups by sharded pub/sub.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), and
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) without seeds.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open_cluster(&["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_cluster(seeds: &[impl AsRef<str>]) -> Result<Self> {
        Ok(Client::with_store(RedisStore::open_cluster(seeds).await?))
    }

    /// Connects to the primary Redis Sentinel names for `master`, asking the
    /// Sentinels at `sentinels` (see [`RedisStore::open_sentinel`]); after a
    /// failover, waiters and holders carry on against the new primary.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), and
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) without Sentinel URLs
    /// or with an empty master name.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open_sentinel("mymaster", &["redis://10.0.0.1:26379"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_sentinel(master: &str, sentinels: &[impl AsRef<str>]) -> Result<Self> {
        Ok(Client::with_store(
            RedisStore::open_sentinel(master, sentinels).await?,
        ))
    }

    /// Connects through a redis-rs client the application already configured (a
    /// private CA with [`redis::Client::build_with_tls`], a client certificate …).
    /// latchkey makes its own connections from it, with its own timeouts, as
    /// [`open`](Self::open) does.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), except that the URL was already parsed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let client = latchkey::Client::from_redis_client(redis).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_redis_client(client: redis::Client) -> Result<Self> {
        Ok(Client::with_store(RedisStore::from_client(client).await?))
    }

    /// The same client (sharing its connections), whose locks wait for `replicas`
    /// replicas to confirm every grant and renewal, at most `timeout` each (see
    /// [`RedisStore::with_wait_replicas`]). For some locks only, make them from a
    /// clone: `client.clone().with_wait_replicas(1, ms)?.mutex("payout")`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a `timeout`
    /// under 1 ms or over 500 ms.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let safer = client.with_wait_replicas(1, std::time::Duration::from_millis(100))?;
    /// let guard = safer.mutex("payout")?.lock().await?;
    /// println!("{:?} replicas have it", guard.replicas());
    /// # Ok(()) }
    /// ```
    pub fn with_wait_replicas(
        mut self,
        replicas: u32,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        self.store = self.store.with_wait_replicas(replicas, timeout)?;
        // A line of its own: a lock passed in-process is not confirmed by replicas.
        self.local = LocalLocks::default();
        Ok(self)
    }

    /// Shares a connection the application already has (a `ConnectionManager` or a
    /// `MultiplexedConnection`) instead of opening another.
    ///
    /// Nothing is sent yet, so a wrong address or password shows up at the first
    /// lock. The connection stays yours: latchkey does not replace it after a timeout,
    /// and its own timeouts apply (a plain `MultiplexedConnection` that broke stays
    /// broken). Such a client has no subscriber connection, so its waiters re-check
    /// the lock on a timer (a few ms, backing off to 100 ms) instead of being woken;
    /// for wake-ups, build the store with
    /// [`RedisStore::with_subscriber`](crate::store::RedisStore::with_subscriber) and
    /// use [`with_store`](Self::with_store).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let shared = redis.get_connection_manager().await?;
    /// let client = latchkey::Client::from_connection(shared.clone());
    /// # Ok(()) }
    /// ```
    pub fn from_connection(conn: impl Into<Connection>) -> Self {
        Client::with_store(RedisStore::from_connection(conn))
    }
}

impl Client<QuorumStore> {
    /// A client whose locks are held by a majority of independent Redis masters
    /// (Redlock; N odd, at least 3). See [`quorum`](crate::quorum) for what differs
    /// from one Redis: no fair locks, and a restarted node must stay out for a lease.
    ///
    /// # Errors
    ///
    /// As [`QuorumStore::open`].
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open_quorum(&[
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ])
    /// .await?;
    /// let guard = client.mutex("nightly-report")?.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_quorum(urls: &[impl AsRef<str>]) -> Result<Self> {
        Ok(Client::with_store(QuorumStore::open(urls).await?))
    }
}

impl<S> Client<S> {
    /// A client on any store (see [`store`](crate::store)), with no prefix. Sends
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = latchkey::store::RedisStore::open("redis://127.0.0.1:6379").await?;
    /// let client = latchkey::Client::with_store(store);
    /// # Ok(()) }
    /// ```
    pub fn with_store(store: S) -> Self {
        Client {
            store,
            prefix: Prefix::default(),
            local: LocalLocks::default(),
        }
    }

    /// The same client with every lock name prefixed by `prefix` (see [`Prefix`] for
    /// what a prefix may contain). It shares the connection with the client it came
    /// from.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a prefix
    /// [`Prefix::new`] refuses.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let billing = client.with_prefix("billing:")?;
    /// assert_eq!(billing.mutex("run")?.key().as_str(), "billing:run");
    /// # Ok(()) }
    /// ```
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self> {
        self.prefix = Prefix::new(prefix)?;
        Ok(self)
    }

    /// The key prefix.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) {
    /// println!("locks live under {:?}", client.prefix().as_str());
    /// # }
    /// ```
    pub fn prefix(&self) -> &Prefix {
        &self.prefix
    }

    /// The store locks are taken on.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) {
    /// println!("locks on {}", client.store().node());
    /// # }
    /// ```
    pub fn store(&self) -> &S {
        &self.store
    }
}

/// Locks, on any store a [`Mutex`] can use.
impl<S: Pass + WakeUps> Client<S> {
    /// A handle to the lock called `name` (key: prefix + name): plain, with a renewed
    /// 30 s lease; see [`Mutex`] for the settings. Nothing is sent to Redis until the
    /// lock is taken. Handles made by one client share a local line, so its tasks
    /// pass a plain lock to each other (see [Plain or fair](crate#plain-or-fair)).
    ///
    /// # Errors
    ///
    /// Only [`Error::InvalidArgument`](crate::Error::InvalidArgument), for a name
    /// [`LockKey::new`] refuses.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("deploy")?;
    /// # Ok(()) }
    /// ```
    pub fn mutex(&self, name: &str) -> Result<Mutex<S>> {
        let key = LockKey::new(&self.prefix, name)?;
        Ok(Mutex::with_local(
            self.store.clone(),
            key,
            self.local.clone(),
        ))
    }

    /// Several locks taken together, all or none, by name: see [`MultiLock`] for
    /// how, and why callers naming them in different orders never deadlock. Each
    /// is a lock as [`mutex`](Self::mutex) makes it (plain, renewed 30 s lease),
    /// and the same name given twice is one lock. On a Redis Cluster the names may
    /// hash to different slots.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no name, or a
    /// name [`LockKey::new`] refuses.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let transfer = client.multi_lock(["account:7", "account:3"])?;
    /// let both = transfer.lock().await?;
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<N: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = N>,
    ) -> Result<MultiLock<S>> {
        let mutexes = names
            .into_iter()
            .map(|name| self.mutex(name.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        MultiLock::new(mutexes)
    }
}

/// Listing locks, on stores that can look at them.
impl<S: Pass + WakeUps + Inspect> Client<S> {
    /// The locks under this client's prefix whose names match `pattern` (Redis glob
    /// syntax, `*` for all), with their status, sorted by name. Uses SCAN, never KEYS;
    /// every string key under the prefix counts (a rate-limit counter too, but not
    /// latchkey's companion keys), so keep locks under their own prefix. Each status
    /// is read on its own, after the SCAN: the list is not one snapshot. A key that
    /// disappears or changes type in between is left out.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`](crate::Error::Unreachable),
    /// [`Error::AclDenied`](crate::Error::AclDenied) (SCAN, or the script that reads a
    /// status), [`Error::Redis`](crate::Error::Redis) and the other errors a reply can
    /// carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// for (name, status) in client.list("deploy:*").await? {
    ///     println!("{name}: held {}", status.is_held());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, pattern: &str) -> Result<Vec<(String, LockStatus)>> {
        let prefix = self.prefix.as_str();
        let mut locks = Vec::new();
        for key in self
            .store
            .scan(&format!("{}{pattern}", crate::inspect::escape_glob(prefix)))
            .await?
        {
            let Some(name) = key.strip_prefix(prefix) else {
                continue;
            };
            // Keys another application wrote may not be valid lock names; skip them.
            let Ok(mutex) = self.mutex(name) else {
                continue;
            };
            match mutex.status().await {
                Ok(status) => locks.push((name.to_owned(), status)),
                // Gone or retyped between SCAN and the look: not a lock now.
                Err(crate::Error::WrongType { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(locks)
    }
}

/// Semaphores and read-write locks, on one Redis deployment.
impl Client<RedisStore> {
    /// A counting semaphore on `name` with `permits` permits. Nothing is sent to
    /// Redis until it is used.
    ///
    /// The count is stored with the semaphore while anyone holds or waits for it,
    /// and an acquire that gives another count is refused
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument), naming the count
    /// in use), so a process that says 2 never joins the holders of a one-permit
    /// semaphore. To change the count, give the new one once nobody holds or waits
    /// (stop the old processes, or let their leases end): the first acquire then
    /// stores it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name
    /// (see [`LockKey::new`]), or 0 permits or more than 2^50.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let checkout = client.semaphore("checkout", 3)?;
    /// let permit = checkout.acquire(1).await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str, permits: u64) -> Result<Semaphore> {
        let key = LockKey::namespaced(&self.prefix, name, Kind::Semaphore)?;
        Semaphore::new(self.store.clone(), key, permits)
    }

    /// The leader election called `name`: one leader at a time, with a term that
    /// grows from leader to leader (see [`election`](crate::election)). Nothing is
    /// sent to Redis until a campaign or a read.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name
    /// (see [`LockKey::new`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let leadership = client.election("scheduler")?.campaign("host-a").await?;
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: &str) -> Result<Election> {
        let key = LockKey::recipe(&self.prefix, name, Kind::Election.companion())?;
        Ok(Election::new(self.store.clone(), key, self.local.clone()))
    }

    /// The count-down latch called `name`, of `count`: it opens once `count` count
    /// downs have landed (see [`latch`](crate::latch)). Nothing is sent to Redis
    /// until it is counted down or read.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name
    /// (see [`LockKey::new`]), or a count of 0 or over [`latch::MAX_COUNT`](crate::latch::MAX_COUNT).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let loaded = client.latch("nightly:shards-loaded", 3)?;
    /// loaded.count_down().await?;
    /// # Ok(()) }
    /// ```
    pub fn latch(&self, name: &str, count: u64) -> Result<Latch> {
        let key = LockKey::recipe(&self.prefix, name, Kind::Latch.companion())?;
        Latch::new(self.store.clone(), key, count)
    }

    /// A barrier called `name` of `parties`: a latch each party counts down on
    /// arrival, then waits on (see [`latch`](crate::latch)). A barrier and a latch
    /// of one name are the same latch.
    ///
    /// # Errors
    ///
    /// As [`latch`](Self::latch).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// client.barrier("migration:stage-1", 4)?.arrive_and_wait().await?;
    /// # Ok(()) }
    /// ```
    pub fn barrier(&self, name: &str, parties: u64) -> Result<Barrier> {
        Ok(Barrier::new(self.latch(name, parties)?))
    }

    /// A read-write lock on `name`: many readers or one writer, writers first.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name
    /// (see [`LockKey::new`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?;
    /// let read = config.read().await?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        let key = LockKey::namespaced(&self.prefix, name, Kind::RwLock)?;
        RwLock::new(self.store.clone(), key)
    }

    /// An optimistic transaction on `keys` (Redis keys as given: the client's
    /// prefix is for latchkey's own keys). See [`Transaction`] for what it gets
    /// right.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no keys, or keys
    /// in different Redis Cluster hash slots.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let tx = client.transaction(&["{bank}:a", "{bank}:b"])?;
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self, keys: &[&str]) -> Result<Transaction> {
        Transaction::new(self.store.clone(), keys, None)
    }
}

/// Rate limits, on stores that make rate-limit decisions.
impl<S: RateStore> Client<S> {
    /// A rate limiter on `name` under `policy`. Nothing is sent to Redis until
    /// [`check`](RateLimiter::check) or [`peek`](RateLimiter::peek).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name
    /// (see [`LockKey::new`]).
    ///
    /// ```no_run
    /// use latchkey::ratelimit::Policy;
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let quota = client.rate_limiter("downloads:10.0.0.7", Policy::fixed_window(5, std::time::Duration::from_secs(600))?)?;
    /// assert!(quota.check(1).await?.allowed);
    /// # Ok(()) }
    /// ```
    pub fn rate_limiter(&self, name: &str, policy: Policy) -> Result<RateLimiter<S>> {
        let key = LockKey::new(&self.prefix, name)?;
        Ok(RateLimiter::new(self.store.clone(), key, policy))
    }
}

//! One Redis server (or the primary of a primary/replica set).

use std::sync::Arc;
use std::time::Duration;

use redis::{ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::dedicated::{Dedicated, DedicatedConn};
use super::subscriber::{Source, Subscriber};
use super::target::Target;
use super::uncontended::BareTake;
use super::{
    AcquireRequest, AllOrNone, Attempt, CONNECT_TIMEOUT, Connection, Inspect, LockStatus,
    LockStore, Pass, RESPONSE_TIMEOUT, RateStore, WakeUps, Watch,
};
use super::{cluster, fence_from, released_alone, sentinel};
use crate::error::{Error, Given, Result};
use crate::key::{LockKey, is_companion_key, slot};
use crate::lease::Ttl;
use crate::ratelimit::{Decision, Policy};
use crate::scripts::{self, ScriptCall, is_no_script};
use crate::token::OwnerToken;

/// Keys SCAN looks at per round trip.
const SCAN_BATCH: u64 = 500;
/// Shown as the node name when the user handed us a connection without an address.
const UNNAMED_NODE: &str = "(caller's connection)";

/// A lock store on one Redis server.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// let store = latchkey::store::RedisStore::open("redis://127.0.0.1:6379").await?;
/// assert_eq!(store.node(), "127.0.0.1:6379");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore(pub(super) Arc<Shared>);

/// What a store's clones share. One allocation, not a struct of seven handles:
/// every acquisition clones the store into its hold and moves the hold several
/// times, 3 % of an uncontended cycle's client instructions (callgrind). A builder
/// method on a store shared with clones changes a copy of its own.
#[derive(Clone)]
pub(super) struct Shared {
    conn: Connection,
    node: Arc<str>,
    // None for a caller's connection: we have no client to open a subscriber with.
    subscriber: Option<Subscriber>,
    /// Where our connections go (`None` for a caller's connection).
    target: Option<Target>,
    /// Replicas that must confirm every grant and renewal.
    replication: Option<Replication>,
    /// Connections of their own, for optimistic transactions.
    dedicated: Dedicated,
    /// Whether the server takes `SET … NX … GET` (Redis ≥ 7.0); see `uncontended.rs`.
    pub(super) bare_take: BareTake,
}

/// A grant script's reply: taken (1/0), the fence or the lease left, the holder,
/// others queued or the fence floor, the waiter lease's end.
pub(crate) type GrantReply = (i64, i64, Option<String>, u64, u64);

/// `WAIT replicas timeout` after every grant and renewal, in the same round trip.
#[derive(Clone)]
struct Replication {
    replicas: u32,
    timeout: Duration,
    /// A connection of their own for the grants and renewals that wait, and the
    /// releases that must reach the server after them: WAIT holds up everything
    /// behind it on a connection, and the store's other commands (status, rate
    /// limits) must not queue behind a slow replica.
    conn: Connection,
}

impl Replication {
    /// Adds the `WAIT` that makes the replicas confirm what `pipe` wrote.
    fn wait_behind(&self, pipe: &mut redis::Pipeline) {
        pipe.cmd("WAIT")
            .arg(self.replicas)
            .arg(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX));
    }
}

/// How our connections to one server time out and reconnect.
fn connection_config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

impl RedisStore {
    /// Connects to the server at `url` (`redis://`, `rediss://` for TLS, or
    /// `redis+unix://`), with a connection that reconnects by itself.
    ///
    /// User name and password go in the URL: `redis://user:secret@host:6379/0`.
    ///
    /// # Errors
    ///
    /// As [`Client::open`](crate::Client::open).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = latchkey::store::RedisStore::open("rediss://app:secret@redis.internal:6380").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(url: &str) -> Result<Self> {
        let client = redis::Client::open(url).map_err(|e| invalid_url(&e))?;
        Self::from_client(client).await
    }

    /// Connects through a redis-rs client the application already configured.
    ///
    /// # Errors
    ///
    /// As [`Client::open`](crate::Client::open), except that the URL was
    /// already parsed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let store = latchkey::store::RedisStore::from_client(redis).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_client(client: redis::Client) -> Result<Self> {
        let node = client.get_connection_info().addr().to_string();
        let db = client.get_connection_info().redis_settings().db();
        if db < 0 {
            return Err(Error::InvalidArgument(format!(
                "database number {db} in the URL: it must be 0 or more"
            )));
        }
        let tls = any_tls([client.get_connection_info()]);
        Self::server(client, node).checked(tls).await
    }

    /// A store on one server, not yet checked with a PING (a quorum checks its
    /// nodes together, and starts with some of them down).
    pub(crate) fn server(client: redis::Client, node: String) -> Self {
        let target = Target::Server(Arc::new(client));
        Self::unchecked(target.clone(), Source::Node(target), node)
    }

    /// Connects to the primary that Redis Sentinel names for `master`, asking the
    /// Sentinels at `sentinels` (URLs; one is enough, more help when one is down).
    /// After a failover, the next connection goes to the new primary: a command that
    /// finds the old one gone or demoted (a lost connection, a timeout, `READONLY`)
    /// fails, and the next one asks the Sentinels again; waits retry within their
    /// deadline. Wake-ups follow the same way. An old primary that still answers as a
    /// master (the Sentinels demote it only seconds after a failover) refuses
    /// nothing, so the store also asks the Sentinels every 500 ms which server is the
    /// primary and moves its connection when that changed: locks are never taken on
    /// the old primary for longer than that.
    ///
    /// The first URL's user, password, database and `rediss://` are used for the
    /// primary as well as for the Sentinels.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); [`Error::InvalidArgument`] without Sentinel URLs or
    /// with an empty master name; [`Error::Unreachable`] when no Sentinel answers or
    /// none names a reachable primary for `master` (a name they do not know reads
    /// the same as a primary that is down, since a failover may be under way).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"];
    /// let store = latchkey::store::RedisStore::open_sentinel("mymaster", &sentinels).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_sentinel(master: &str, sentinels: &[impl AsRef<str>]) -> Result<Self> {
        let sentinels = parse_urls(sentinels)?;
        let tls = any_tls(&sentinels);
        let (target, node) = sentinel::target(master, sentinels)?;
        Self::on_target(target.clone(), Source::Node(target), node, tls).await
    }

    /// A store whose connections (ours, replaced when they fail) go to `target`,
    /// woken through `wakeups`.
    async fn on_target(target: Target, wakeups: Source, node: String, tls: bool) -> Result<Self> {
        Self::unchecked(target, wakeups, node).checked(tls).await
    }

    fn unchecked(target: Target, wakeups: Source, node: String) -> Self {
        let node: Arc<str> = node.into();
        RedisStore(Arc::new(Shared {
            conn: Connection::replaceable(target.clone(), connection_config()),
            subscriber: Some(Subscriber::new(wakeups, node.clone())),
            node,
            target: Some(target),
            replication: None,
            dedicated: Dedicated::default(),
            bare_take: BareTake::default(),
        }))
    }

    /// Connects to a Redis Cluster through `seeds`, the URLs of some of its nodes
    /// (one is enough; more help when one is down), as `redis-cli -c` does. User
    /// name, password and `rediss://` go in the URLs as for [`open`](Self::open),
    /// the same on every one.
    ///
    /// Each command goes to the primary that owns the lock's hash slot (all keys of
    /// one lock share a slot); MOVED and ASK redirections and a failover are
    /// followed inside the call, and a wait retries what is left over while its
    /// deadline allows. Wake-ups use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`,
    /// Redis 7 or later), so a release's message stays within its lock's shard.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); [`Error::InvalidArgument`] without seeds.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let seeds = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"];
    /// let store = latchkey::store::RedisStore::open_cluster(&seeds).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_cluster(seeds: &[impl AsRef<str>]) -> Result<Self> {
        let seeds = parse_urls(seeds)?;
        let tls = any_tls(&seeds);
        let (target, wakeups, node) = cluster::target(&seeds)?;
        Self::on_target(target, wakeups, node, tls).await
    }

    /// The store once it answered a PING; a server that does not speak TLS on a
    /// `rediss://` URL is reported as a TLS failure, and a Redis Cluster node given
    /// as one server as [`Error::ClusterNode`].
    pub(crate) async fn checked(self, tls: bool) -> Result<Self> {
        match self.ping().await {
            Ok(()) if self.is_server() && self.about().await.is_some_and(|a| a.cluster) => {
                Err(Error::ClusterNode {
                    node: self.0.node.to_string(),
                })
            }
            Ok(()) => Ok(self),
            // A plain server reads a TLS hello as the start of a command and waits.
            Err(Error::Unreachable { node, source }) if tls && source.is_timeout() => {
                Err(Error::Tls {
                    node,
                    detail: format!(
                        "no TLS handshake within {CONNECT_TIMEOUT:?}: does the server speak TLS on this port?"
                    ),
                })
            }
            Err(error) => Err(error),
        }
    }

    /// Whether this store talks to one server given by its address (not through
    /// Sentinel or a cluster, not over a connection the caller made).
    fn is_server(&self) -> bool {
        matches!(self.0.target, Some(Target::Server(_)))
    }

    /// What the server says of itself (`INFO server cluster replication`), or
    /// `None` when it does not answer that (an ACL user without `INFO`).
    pub(crate) async fn about(&self) -> Option<About> {
        let mut conn = self.0.conn.clone();
        let info: String = redis::cmd("INFO")
            .arg("server")
            .arg("cluster")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .ok()?;
        Some(About::parse(&info))
    }

    /// One round trip, so a missing password (`NOAUTH`) or an ACL user that may not
    /// even PING shows up when the client is made, not at the first lock.
    async fn ping(&self) -> Result<()> {
        let mut conn = self.0.conn.clone();
        let reply: RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
        self.context(reply, "").map(drop)
    }

    /// Uses a connection the application already has (shares its socket).
    ///
    /// Such a store has no subscriber connection of its own, so waiters re-check the
    /// lock with backoff instead of being woken; add one with
    /// [`with_subscriber`](Self::with_subscriber).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let conn = redis.get_multiplexed_async_connection().await?;
    /// let store = latchkey::store::RedisStore::from_connection(conn);
    /// # Ok(()) }
    /// ```
    pub fn from_connection(conn: impl Into<Connection>) -> Self {
        let conn: Connection = conn.into();
        RedisStore(Arc::new(Shared {
            conn,
            node: UNNAMED_NODE.into(),
            subscriber: None,
            target: None,
            replication: None,
            dedicated: Dedicated::default(),
            bare_take: BareTake::default(),
        }))
    }

    /// Lets waiters be woken through one pub/sub connection opened from `client`
    /// (which should point at the same server as the store's connection).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let conn = redis.get_multiplexed_async_connection().await?;
    /// let store = latchkey::store::RedisStore::from_connection(conn).with_subscriber(redis);
    /// # Ok(()) }
    /// ```
    pub fn with_subscriber(mut self, client: redis::Client) -> Self {
        if self.0.conn.is_cluster() {
            // Releases on a cluster SPUBLISH: a SUBSCRIBE on one node would never hear.
            tracing::warn!(
                "with_subscriber is for one server; a cluster's waiters re-check on timers"
            );
            return self;
        }
        let target = Target::Server(Arc::new(client));
        let shared = Arc::make_mut(&mut self.0);
        shared.subscriber = Some(Subscriber::new(Source::Node(target), shared.node.clone()));
        self
    }

    /// Checks a replica wait without a server: from 1 ms to half the reply timeout
    /// (500 ms), since the script and its round trip come on top of `WAIT`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] outside that range.
    ///
    /// ```
    /// use std::time::Duration;
    /// use latchkey::store::RedisStore;
    ///
    /// assert!(RedisStore::check_replica_wait(Duration::from_millis(100)).is_ok());
    /// assert!(RedisStore::check_replica_wait(Duration::from_secs(2)).is_err());
    /// ```
    pub fn check_replica_wait(timeout: Duration) -> Result<()> {
        let longest = RESPONSE_TIMEOUT / 2;
        if timeout < Duration::from_millis(1) || timeout > longest {
            return Err(Error::InvalidArgument(format!(
                "a replica wait of {}: it must be from 1ms to {longest:?} (half the reply timeout)",
                Given(timeout)
            )));
        }
        Ok(())
    }

    /// The same store (sharing its subscriber), on which every grant and renewal of
    /// a lock waits until `replicas` replicas have it (`WAIT`, in the same round trip
    /// as the script), at most `timeout`. A grant fewer replicas confirm is released
    /// again and reported as [`Error::TooFewReplicas`] (which waits retry: a
    /// [`Mutex::lock`](crate::Mutex::lock) keeps trying until enough replicas are
    /// back); if that release fails too, the error is
    /// [`Error::Unreachable`] and the lock's guard-to-be releases it later, as after
    /// a lost reply. So a failover to a replica that confirmed cannot forget a fresh
    /// lock. A guard says how many confirmed
    /// ([`MutexGuard::replicas`](crate::MutexGuard::replicas)).
    ///
    /// The grants, renewals and releases go over a connection of their own, one
    /// after another (WAIT holds up what is behind it on a connection): other
    /// commands do not queue behind a slow replica, but many locks taken at once
    /// while replicas lag wait in turn, and a release waits behind the grants sent
    /// before it, each for at most `timeout` (so does a waiter's undo when it gives
    /// up: the lock it may have been granted is freed then, not at once). Releases
    /// go there so that the undo of a grant whose reply was lost reaches the server
    /// after that grant (unless that connection was replaced meanwhile, after a
    /// reply that took over 1 s).
    ///
    /// Handovers then stop at the wake-up: the waiter claims the lock itself, so its
    /// grant is confirmed too (one more round trip per handover), and tasks of one
    /// process no longer pass a lock to each other. `replicas` 0 turns waiting off.
    ///
    /// WAIT makes a lost grant unlikely, not impossible: Redis replication stays
    /// asynchronous, and a replica that confirmed may not be the one promoted.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a `timeout` under 1 ms or over 500 ms (half
    /// the 1 s reply timeout: the connection would give up on the reply first).
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// let store = latchkey::store::RedisStore::open("redis://127.0.0.1:6379").await?
    ///     .with_wait_replicas(1, Duration::from_millis(50))?;
    /// # Ok(()) }
    /// ```
    pub fn with_wait_replicas(mut self, replicas: u32, timeout: Duration) -> Result<Self> {
        Self::check_replica_wait(timeout)?;
        let conn = match &self.0.target {
            Some(target) => Connection::replaceable(target.clone(), connection_config()),
            None => self.0.conn.clone(),
        };
        Arc::make_mut(&mut self.0).replication = (replicas > 0).then_some(Replication {
            replicas,
            timeout,
            conn,
        });
        Ok(self)
    }

    /// Runs a lock script that may write, with `WAIT` behind it when replicas must
    /// confirm; returns its reply and how many did.
    pub(crate) async fn run_confirmed<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<(T, Option<u32>)> {
        let Some(replication) = &self.0.replication else {
            return Ok((self.run(call, key).await?, None));
        };
        // Boxed: a grant that waits for replicas pays a WAIT anyway, and the futures
        // of all the others, which await this one, stay the size of a plain run.
        Box::pin(self.run_waiting(replication, call, key)).await
    }

    /// [`Self::run_confirmed`] with `WAIT` behind the script.
    async fn run_waiting<T: FromRedisValue>(
        &self,
        replication: &Replication,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<(T, Option<u32>)> {
        let mut pipe = redis::pipe();
        pipe.add_command(call.cmd().clone());
        replication.wait_behind(&mut pipe);
        let mut conn = replication.conn.clone();
        let mut reply = pipe.query_async(&mut conn).await;
        // A pipeline does not load the script by itself.
        if reply.as_ref().is_err_and(is_no_script) {
            let loaded = call.load(&mut conn).await;
            self.context(loaded, key.as_str())?;
            reply = pipe.query_async(&mut conn).await;
        }
        let (value, acked): (T, u32) = self.script_context(reply, &mut conn, call, key).await?;
        Ok((value, Some(acked)))
    }

    /// A command that may write, with `WAIT` behind it when replicas must confirm;
    /// its reply and how many did. The error is Redis's own, for the caller to sort.
    pub(crate) async fn query_confirmed<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> RedisResult<(T, Option<u32>)> {
        let Some(replication) = &self.0.replication else {
            return Ok((self.query(cmd).await?, None));
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone());
        replication.wait_behind(&mut pipe);
        let (value, acked): (T, u32) = pipe.query_async(&mut replication.conn.clone()).await?;
        Ok((value, Some(acked)))
    }

    /// An error when fewer replicas than asked for confirmed a write to `key`.
    pub(crate) fn confirmed(&self, key: &LockKey, acked: Option<u32>) -> Result<()> {
        match (&self.0.replication, acked) {
            (Some(replication), Some(acked)) if acked < replication.replicas => {
                Err(Error::TooFewReplicas {
                    node: self.0.node.to_string(),
                    key: key.to_string(),
                    wanted: replication.replicas,
                    acked,
                })
            }
            _ => Ok(()),
        }
    }

    /// What a grant script's reply `{taken, fence or pttl, holder, fourth,
    /// lease end}` (see `scripts/lock/grant.lua`) means, given what the replicas
    /// confirmed. A grant too few replicas confirmed is undone through `store`'s
    /// own release (a lock's or a semaphore's, which knows its keys).
    pub(crate) async fn attempt_from<S: LockStore>(
        &self,
        store: &S,
        key: &LockKey,
        (owner, request): (&OwnerToken, AcquireRequest),
        reply: GrantReply,
        replicas: Option<u32>,
    ) -> Result<Attempt> {
        let (taken, value, holder, fourth, waiter_lease_end) = reply;
        if taken != 1 {
            let pttl = u64::try_from(value).ok().map(Duration::from_millis);
            return Ok(Attempt::busy(pttl, holder).queued_at(fourth, waiter_lease_end));
        }
        // 0: granted without a fencing token (the request was not fenced).
        let won = match u64::try_from(value) {
            Ok(fence) if fence > 0 => Attempt::acquired(fence, fourth),
            _ => Attempt::unfenced(fourth),
        };
        self.confirmed_grant(store, key, (owner, request), won, replicas)
            .await
    }

    /// A grant `won`, as confirmed by `replicas`; one that fewer replicas confirmed
    /// than asked for is undone through `store`'s own release (a lock's or a
    /// semaphore's, which knows its keys) and reported.
    pub(crate) async fn confirmed_grant<S: LockStore>(
        &self,
        store: &S,
        key: &LockKey,
        (owner, request): (&OwnerToken, AcquireRequest),
        won: Attempt,
        replicas: Option<u32>,
    ) -> Result<Attempt> {
        if let Err(too_few) = self.confirmed(key, replicas) {
            let leaving = request.queue_lease.map(|_| request.ttl);
            // Boxed: rare, and every grant's future awaits this one.
            return match Box::pin(store.release(key, owner, leaving)).await {
                Ok(_) => Err(too_few),
                // Still held, maybe: an outcome the caller's hold must undo.
                Err(undo) => Err(Error::grant_not_undone(&self.0.node, &undo)),
            };
        }
        Ok(match replicas {
            Some(confirmed) => won.confirmed_by(confirmed),
            None => won,
        })
    }

    /// The server's address, as shown in errors (never with credentials).
    ///
    /// ```no_run
    /// # fn demo(store: latchkey::store::RedisStore) {
    /// println!("locks on {}", store.node());
    /// # }
    /// ```
    pub fn node(&self) -> &str {
        &self.0.node
    }

    /// The `deployment` label of its metrics: `single` (one server, or a primary
    /// with replicas), `sentinel` or `cluster` (see [`crate::metrics`]).
    ///
    /// ```no_run
    /// # fn demo(store: latchkey::store::RedisStore) {
    /// println!("{} deployment", store.deployment());
    /// # }
    /// ```
    pub fn deployment(&self) -> &'static str {
        match &self.0.target {
            Some(Target::Sentinel(_)) => "sentinel",
            Some(Target::Cluster(_)) => "cluster",
            _ if self.0.conn.is_cluster() => "cluster",
            _ => "single",
        }
    }

    /// Runs a script on this store's connection; errors name the node and `key`.
    /// How a script on this store publishes to waiters: `sharded` (SPUBLISH, on a
    /// cluster, where waiters listen with SSUBSCRIBE in the key's shard) or ``.
    pub(crate) fn publish_mode(&self) -> &'static str {
        match self.0.conn.is_cluster() {
            true => "sharded",
            false => "",
        }
    }

    /// A connection no other task uses, for WATCH (see `dedicated.rs`); behind
    /// Sentinel, to the server named the primary at most `PRIMARY_CHECK` ago.
    pub(crate) async fn dedicated(&self) -> Result<DedicatedConn> {
        let primary = self.0.conn.primary().await;
        self.0
            .dedicated
            .take(self.0.target.as_ref(), &self.0.node, primary)
            .await
    }

    /// Whether `taken` still goes to the server named the primary (always, but
    /// behind Sentinel): checked again before EXEC, since a transaction's body may
    /// outlast a failover.
    pub(crate) async fn still_primary(&self, taken: &DedicatedConn) -> bool {
        taken.goes_to(self.0.conn.primary().await.as_deref())
    }

    fn follows_failover(&self) -> bool {
        self.0.target.as_ref().is_some_and(Target::follows_failover)
    }

    /// Drops the idle dedicated connections (one was found broken or stale).
    pub(crate) fn forget_dedicated(&self) {
        self.0.dedicated.clear();
    }

    /// Keeps a dedicated connection whose last command answered, for the next one.
    pub(crate) fn give_back(&self, conn: DedicatedConn) {
        self.0.dedicated.give_back(conn);
    }

    /// One command on the store's connection.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> RedisResult<T> {
        let mut conn = self.0.conn.clone();
        cmd.query_async(&mut conn).await
    }

    /// Sorts a failed reply into latchkey's errors, for callers outside the store.
    pub(crate) fn error(&self, error: redis::RedisError, key: &str) -> Error {
        self.context::<()>(Err(error), key).unwrap_err()
    }

    /// Runs a release (or the undo of an attempt): behind the grants
    /// that wait for replicas, on their connection, when they do. An undo must reach
    /// the server after the grant whose reply was lost: on another connection it may
    /// run first (a paused server holding both serves its connections in any
    /// order), find nothing to undo, and the grant then lands for nobody, for a
    /// whole lease. On one connection the server runs them in the order sent. (A
    /// copy on the store's connection for promptness would be unsafe: a waiter whose
    /// grant too few replicas confirmed undoes it and tries again under the same
    /// token, and a late copy would then free its new grant.)
    pub(crate) async fn run_release<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<T> {
        let conn = self
            .0
            .replication
            .as_ref()
            .map_or(&self.0.conn, |replication| &replication.conn);
        self.run_on(conn, call, key).await
    }

    /// Runs a lock script on the store's connection.
    ///
    /// A script the cluster refused without running it is sent again after a short
    /// pause ([`NOT_RUN_PAUSES`]): `TRYAGAIN` while its slot is being moved and
    /// some of its keys have moved already, or a redirection redis-rs did not
    /// follow. Sending it again cannot run it twice.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<T> {
        self.run_on(&self.0.conn, call, key).await
    }

    /// [`RedisStore::run`] on `conn`.
    async fn run_on<T: FromRedisValue>(
        &self,
        conn: &Connection,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<T> {
        let mut conn = conn.clone();
        let mut reply = call.invoke(&mut conn).await;
        for pause in NOT_RUN_PAUSES {
            if !reply.as_ref().is_err_and(not_run) {
                break;
            }
            tokio::time::sleep(pause).await;
            reply = call.invoke(&mut conn).await;
        }
        let reply = self.script_context(reply, &mut conn, call, key).await?;
        match T::from_redis_value(reply) {
            Ok(reply) => Ok(reply),
            // Boxed, as below: off every call's future.
            Err(error) => Err(Box::pin(self.unreadable(&mut conn, call, key, error)).await),
        }
    }

    /// The error for a reply of `call` its type does not fit: a key of another
    /// type than latchkey keeps there, if one is (the script passed on what
    /// another writer left), named as for a WRONGTYPE; else the reply itself,
    /// which is no protocol error (redis-rs gives both one kind).
    async fn unreadable(
        &self,
        conn: &mut Connection,
        call: &ScriptCall<'_>,
        key: &LockKey,
        error: redis::ParsingError,
    ) -> Error {
        if let Some(foreign) = self.foreign_key(conn, call).await {
            return Error::WrongType { key: foreign };
        }
        let detail = format!("a script about {} answered {error}", key.as_str());
        let unexpected = (
            ErrorKind::UnexpectedReturnType,
            "a reply latchkey cannot read",
            detail,
        );
        self.error(redis::RedisError::from(unexpected), key.as_str())
    }

    /// [`context`](Self::context) for a reply of `call`: a WRONGTYPE names the
    /// key that holds another type ([`foreign_key`](Self::foreign_key)).
    async fn script_context<T>(
        &self,
        reply: RedisResult<T>,
        conn: &mut Connection,
        call: &ScriptCall<'_>,
        key: &LockKey,
    ) -> Result<T> {
        match self.context(reply, key.as_str()) {
            // Boxed: the error path's pipeline stays out of every call's future.
            // Else its first key, whose content the scripts check (a rate limit's
            // count, a latch's "left:count").
            Err(Error::WrongType { key }) => {
                let foreign = Box::pin(self.foreign_key(conn, call)).await;
                let first = call.keys().next().map(str::to_owned);
                Err(Error::WrongType {
                    key: foreign.or(first).unwrap_or(key),
                })
            }
            reply => reply,
        }
    }

    /// The key of `call` that holds a type latchkey does not keep there, found by
    /// `TYPE` (a script's WRONGTYPE does not say which), if one does. Only on an
    /// error path: an operator told to clear "{pool}:lk:sem" must not be sent to
    /// a key that is fine.
    async fn foreign_key(&self, conn: &mut Connection, call: &ScriptCall<'_>) -> Option<String> {
        let keys: Vec<&str> = call.keys().collect();
        let foreign = foreign_in(conn, &keys).await.ok()?;
        foreign.first().map(|key| (*key).to_owned())
    }

    /// Those of `keys` that hold a type latchkey does not keep there (a missing
    /// key does not), read with one `TYPE` each, in one round trip.
    pub(crate) async fn foreign_keys<'k>(&self, keys: &[&'k str]) -> RedisResult<Vec<&'k str>> {
        foreign_in(&mut self.0.conn.clone(), keys).await
    }

    /// Sorts a failed reply into latchkey's errors, naming this node and `key`.
    pub(super) fn context<T>(&self, reply: RedisResult<T>, key: &str) -> Result<T> {
        let follows_failover = self.follows_failover();
        reply.map_err(|e| match Error::from_redis(e, &self.0.node, key) {
            Error::ReadOnly { node } if follows_failover => Error::demoted(&node),
            error => error,
        })
    }
}

/// [`RedisStore::foreign_keys`], on `conn`.
async fn foreign_in<'k>(conn: &mut Connection, keys: &[&'k str]) -> RedisResult<Vec<&'k str>> {
    let mut pipe = redis::pipe();
    for each in keys {
        pipe.cmd("TYPE").arg(*each);
    }
    let types: Vec<String> = pipe.query_async(conn).await?;
    let foreign = keys.iter().zip(&types).filter(|(each, found)| {
        found.as_str() != "none" && found.as_str() != crate::key::redis_type(each)
    });
    Ok(foreign.map(|(each, _)| *each).collect())
}

/// The pauses before sending again a script the cluster did not run: a slot
/// migration moves a lock's few keys within milliseconds.
const NOT_RUN_PAUSES: [Duration; 4] = [
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
];

/// How a request waits in the lock's line (`scripts/lock/queue.lua`): fair or plain,
/// handed the lock with its fencing token (lower case) or without (upper case: the
/// holder asks for it on demand, and a handover skips the counter).
fn queue_mode(request: AcquireRequest) -> &'static str {
    match (request.fair, request.fenced) {
        (true, true) => "f",
        (false, true) => "p",
        (true, false) => "F",
        (false, false) => "P",
    }
}

/// Whether a cluster refused a command without running it.
fn not_run(error: &redis::RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::TryAgain | ServerErrorKind::Moved | ServerErrorKind::Ask
        )
    )
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("node", &self.0.node)
            .finish()
    }
}

impl LockStore for RedisStore {
    fn node(&self) -> &str {
        RedisStore::node(self)
    }

    fn deployment(&self) -> &'static str {
        RedisStore::deployment(self)
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Attempt> {
        // A first try without a fence, the most common call, costs what `SET NX PX`
        // does (see `uncontended.rs`).
        if request.queue_lease.is_none() && !request.fenced {
            if let Some(attempt) = self.uncontended_take(key, owner, request).await? {
                return Ok(attempt);
            }
        }
        // A plain fenced first try needs no queue: the smallest script.
        let through_queue = request.fair || request.queue_lease.is_some();
        let mut call = match through_queue {
            false => ScriptCall::new(&scripts::TAKE, &[key.as_str(), key.fence()]),
            true => ScriptCall::new(
                &scripts::ACQUIRE,
                &[key.as_str(), key.fence(), key.queue(), key.leases()],
            ),
        };
        call.arg(owner.as_str()).arg(request.ttl.as_millis());
        if through_queue {
            call.arg(queue_mode(request))
                .arg(request.queue_lease.map_or(0, Ttl::as_millis));
        }
        // The fourth: others queued (granted), or the fence floor (refused).
        let (reply, replicas) = self.run_confirmed(&call, key).await?;
        self.attempt_from(self, key, (owner, request), reply, replicas)
            .await
    }

    async fn try_acquire_all(
        &self,
        takes: &[(&LockKey, &OwnerToken, AcquireRequest)],
    ) -> Result<Option<AllOrNone>> {
        // A grant replicas must confirm goes to the one-by-one tries, which wait for
        // them; on a cluster, one script cannot span hash slots.
        let mut slots = takes.iter().map(|(key, ..)| slot(key.as_str()));
        let first = slots.next();
        let one_slot = !self.0.conn.is_cluster() || slots.all(|other| Some(other) == first);
        if self.0.replication.is_some() || !one_slot {
            return Ok(None);
        }
        self.take_all(takes).await
    }

    fn is_same_store(&self, other: &Self) -> bool {
        // Every store made by a constructor names its node afresh, clones share it;
        // and a clone that waits for replicas makes other requests.
        Arc::ptr_eq(&self.0.node, &other.0.node)
            && self.0.replication.is_none() == other.0.replication.is_none()
    }

    async fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: Option<Ttl>,
    ) -> Result<bool> {
        let keys = [
            key.as_str(),
            key.fence(),
            key.queue(),
            key.leases(),
            key.channel(),
        ];
        let mut call = ScriptCall::new(&scripts::RELEASE, &keys);
        call.arg(owner.as_str())
            .arg(leaving.map_or(String::new(), |ttl| ttl.as_millis().to_string()))
            .arg(self.publish_mode());
        self.run_release(&call, key).await
    }

    async fn release_alone(&self, key: &LockKey, owner: &OwnerToken) -> Result<Option<bool>> {
        let mut call = ScriptCall::new(&scripts::RELEASE_ALONE, &[key.as_str(), key.queue()]);
        call.arg(owner.as_str());
        let released: i64 = self.run_release(&call, key).await?;
        Ok(released_alone(released))
    }

    async fn extend(&self, key: &LockKey, owner: &OwnerToken, ttl: Ttl) -> Result<bool> {
        let mut call = ScriptCall::new(&scripts::EXTEND, &[key.as_str()]);
        call.arg(owner.as_str()).arg(ttl.as_millis());
        let (extended, replicas) = self.run_confirmed(&call, key).await?;
        if extended {
            self.confirmed(key, replicas)?;
        }
        Ok(extended)
    }

    async fn owner(&self, key: &LockKey) -> Result<Option<String>> {
        let mut conn = self.0.conn.clone();
        let reply = redis::cmd("GET")
            .arg(key.as_str())
            .query_async(&mut conn)
            .await;
        self.context(reply, key.as_str())
    }

    async fn fence(&self, key: &LockKey, owner: &OwnerToken) -> Result<Option<u64>> {
        let mut call = ScriptCall::new(&scripts::FENCE, &[key.as_str(), key.fence()]);
        call.arg(owner.as_str());
        let fence: u64 = self.run(&call, key).await?;
        Ok(fence_from(fence))
    }
}

impl Pass for RedisStore {
    async fn pass(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        next: &OwnerToken,
        ttl: Ttl,
        ahead_of_queue: bool,
    ) -> Result<Option<u64>> {
        let keys = [key.as_str(), key.queue(), key.fence()];
        self.pass_with(&keys, key, (owner, next), ttl, ahead_of_queue)
            .await
    }

    async fn pass_unfenced(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        next: &OwnerToken,
        ttl: Ttl,
        ahead_of_queue: bool,
    ) -> Result<Option<Option<u64>>> {
        // Without the counter's key the script reads neither the counter nor the clock.
        let keys = [key.as_str(), key.queue()];
        let passed = self.pass_with(&keys, key, (owner, next), ttl, ahead_of_queue);
        Ok(passed.await?.map(|_| None))
    }

    fn hands_over(&self) -> bool {
        true
    }
}

impl RedisStore {
    /// A pass (`scripts/lock/pass.lua`) with these keys: the new fence, 1 from a
    /// pass without one, or `None` when not passed.
    async fn pass_with(
        &self,
        keys: &[&str],
        key: &LockKey,
        (owner, next): (&OwnerToken, &OwnerToken),
        ttl: Ttl,
        ahead_of_queue: bool,
    ) -> Result<Option<u64>> {
        // A pass is not confirmed by replicas: the next owner takes the lock itself.
        if self.0.replication.is_some() {
            return Ok(None);
        }
        let mut call = ScriptCall::new(&scripts::PASS, keys);
        call.arg(owner.as_str())
            .arg(next.as_str())
            .arg(ttl.as_millis())
            .arg(if ahead_of_queue { "1" } else { "0" });
        let fence: u64 = self.run(&call, key).await?;
        Ok(fence_from(fence))
    }
}

impl WakeUps for RedisStore {
    async fn watch(&self, key: &LockKey, owner: &OwnerToken) -> Result<Watch> {
        let watch = match &self.0.subscriber {
            Some(subscriber) => subscriber.watch(key.channel(), owner.waiter_id()).await?,
            None => Watch::never(),
        };
        Ok(self.handovers(watch))
    }

    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        let watch = self
            .0
            .subscriber
            .as_ref()?
            .join(key.channel(), || owner.waiter_id())?;
        Some(self.handovers(watch))
    }
}

impl RedisStore {
    /// A watch whose handovers the waiter may take as they come, unless replicas
    /// must confirm every grant (a release does not wait for them).
    fn handovers(&self, watch: Watch) -> Watch {
        match self.0.replication {
            Some(_) => watch.wake_only(),
            None => watch,
        }
    }
}

impl Inspect for RedisStore {
    async fn inspect(&self, key: &LockKey) -> Result<LockStatus> {
        let call = ScriptCall::new(&scripts::INSPECT, &[key.as_str(), key.fence(), key.queue()]);
        Ok(LockStatus::from_reply(self.run(&call, key).await?))
    }

    async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = self.scan_keys(pattern, Some("string")).await?;
        keys.retain(|key| !is_companion_key(key));
        Ok(keys)
    }
}

impl RedisStore {
    /// The keys matching `pattern` (of type `ty`, if given), by SCAN on the server
    /// (on a cluster, on every primary). Sorted, without duplicates.
    pub(crate) async fn scan_keys(&self, pattern: &str, ty: Option<&str>) -> Result<Vec<String>> {
        let mut conn = self.0.conn.clone();
        // On a cluster, every primary holds some of the keys.
        let nodes = match self.0.conn.is_cluster() {
            true => {
                let primaries = cluster::primaries(&mut conn).await;
                self.context(primaries, pattern)?
                    .into_iter()
                    .map(Some)
                    .collect()
            }
            false => vec![None],
        };
        let mut keys = Vec::new();
        for node in nodes {
            self.scan_node(&mut conn, node, (pattern, ty), &mut keys)
                .await?;
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    /// SCANs one server (on a cluster, the primary at `node`).
    async fn scan_node(
        &self,
        conn: &mut Connection,
        node: Option<(String, u16)>,
        (pattern, ty): (&str, Option<&str>),
        keys: &mut Vec<String>,
    ) -> Result<()> {
        let mut cursor = 0u64;
        loop {
            let scan = scan_command(cursor, Some(pattern), ty, SCAN_BATCH);
            let (next, batch) = self.scan_once(conn, node.as_ref(), scan, pattern).await?;
            keys.extend(batch);
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// One `SCAN` on the server (on a cluster, on the primary at `node`): the next
    /// cursor and the keys of this batch. A key that is not UTF-8 is none of
    /// latchkey's (its names are strings): it is skipped, not an error that would
    /// stop every walk at the same place.
    async fn scan_once(
        &self,
        conn: &mut Connection,
        node: Option<&(String, u16)>,
        scan: redis::Cmd,
        what: &str,
    ) -> Result<(u64, Vec<String>)> {
        let reply = match node {
            Some((host, port)) => conn
                .on_node(scan, host, *port)
                .await
                .and_then(|v| Ok(redis::from_redis_value(v)?)),
            None => scan.query_async(conn).await,
        };
        let (next, batch): (u64, Vec<Vec<u8>>) = self.context(reply, what)?;
        let keys = batch
            .into_iter()
            .filter_map(|key| String::from_utf8(key).ok());
        Ok((next, keys.collect()))
    }

    /// The next batch of a walk over every key (on a cluster, over every primary's),
    /// about `count` keys walked per server: one `SCAN` each, resumed from `walk`.
    /// Returns the keys, how many `SCAN`s it sent, and whether the walk came round
    /// to its start (the next call begins again, on a cluster with the primaries
    /// it has then).
    pub(crate) async fn scan_step(
        &self,
        walk: &mut KeyWalk,
        count: u64,
    ) -> Result<(Vec<String>, usize, bool)> {
        let mut conn = self.0.conn.clone();
        if walk.servers.is_empty() {
            walk.servers = match self.0.conn.is_cluster() {
                true => {
                    let primaries = cluster::primaries(&mut conn).await;
                    let primaries = self.context(primaries, "CLUSTER SLOTS")?;
                    primaries.into_iter().map(|p| (Some(p), 0)).collect()
                }
                false => vec![(None, 0)],
            };
        }
        let mut keys = Vec::new();
        for (node, cursor) in &mut walk.servers {
            let scan = scan_command(*cursor, None, None, count);
            let step = self.scan_once(&mut conn, node.as_ref(), scan, "SCAN").await;
            let Ok((next, batch)) = step else {
                // A primary gone (failed over, removed): the next step starts the
                // walk again with the primaries the cluster names then.
                walk.servers.clear();
                return step.map(|_| (keys, 0, false));
            };
            keys.extend(batch);
            *cursor = next;
        }
        let scans = walk.servers.len();
        walk.servers.retain(|(_, cursor)| *cursor != 0);
        Ok((keys, scans, walk.servers.is_empty()))
    }
}

/// Where a walk over a deployment's keys stands ([`RedisStore::scan_step`]): each
/// server still to finish, with its cursor.
#[derive(Clone, Debug, Default)]
pub struct KeyWalk {
    servers: Vec<(Option<(String, u16)>, u64)>,
}

fn scan_command(cursor: u64, pattern: Option<&str>, ty: Option<&str>, count: u64) -> redis::Cmd {
    let mut scan = redis::cmd("SCAN");
    scan.arg(cursor);
    if let Some(pattern) = pattern {
        scan.arg("MATCH").arg(pattern);
    }
    scan.arg("COUNT").arg(count);
    if let Some(ty) = ty {
        scan.arg("TYPE").arg(ty);
    }
    scan
}

impl RateStore for RedisStore {
    fn deployment(&self) -> &'static str {
        RedisStore::deployment(self)
    }

    async fn decide(
        &self,
        key: &LockKey,
        policy: &Policy,
        cost: u64,
        consume: bool,
    ) -> Result<Decision> {
        let call = policy.invocation(key, cost, consume);
        Ok(policy.decision(self.run(&call, key).await?, cost))
    }
}

/// Whether any of these URLs asks for TLS (`rediss://`).
pub(crate) fn any_tls<'a>(urls: impl IntoIterator<Item = &'a redis::ConnectionInfo>) -> bool {
    urls.into_iter()
        .any(|url| matches!(url.addr(), redis::ConnectionAddr::TcpTls { .. }))
}

/// Parses URLs (cluster seeds, Sentinels) without echoing a password in errors.
fn parse_urls(urls: &[impl AsRef<str>]) -> Result<Vec<redis::ConnectionInfo>> {
    urls.iter()
        .map(|url| {
            redis::IntoConnectionInfo::into_connection_info(url.as_ref())
                .map_err(|e| invalid_url(&e))
        })
        .collect()
}

/// redis-rs's parse errors can quote the URL, password included; say what is
/// expected instead of echoing it.
pub(crate) fn invalid_url(err: &redis::RedisError) -> Error {
    let what = err
        .detail()
        .filter(|d| !d.contains('@'))
        .unwrap_or("unparsable URL");
    Error::InvalidArgument(format!(
        "invalid Redis URL ({what}); expected redis://[user:password@]host[:port][/db] or rediss://… for TLS"
    ))
}

/// What a server says of itself in `INFO`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct About {
    /// Its run id: the same server under two names has one.
    pub(crate) run_id: Option<String>,
    /// A Redis Cluster node (`cluster_enabled:1`).
    pub(crate) cluster: bool,
    /// A replica (`role:slave`).
    pub(crate) replica: bool,
}

impl About {
    fn parse(info: &str) -> About {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_owned)
        };
        About {
            run_id: field("run_id"),
            cluster: field("cluster_enabled").as_deref() == Some("1"),
            replica: field("role").as_deref() == Some("slave"),
        }
    }
}

#[cfg(test)]
mod about_tests {
    use super::About;

    #[test]
    fn info_fields_are_read_by_name() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\n\r\n# Replication\r\nrole:slave\r\n# Cluster\r\ncluster_enabled:1\r\n";
        let about = About::parse(info);
        assert_eq!(about.run_id.as_deref(), Some("abc123"));
        assert!(about.cluster && about.replica);
        assert_eq!(
            About::parse("role:master\r\ncluster_enabled:0"),
            About::default()
        );
    }
}

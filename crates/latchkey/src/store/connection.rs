//! The connection a single-node store talks through: ours, or the user's own. What
//! users see of it is in the crate docs' `# Under faults` section.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncConnectionConfig;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::target::{Live, Target};

/// A cloneable, multiplexed connection to one Redis server, or to a Redis Cluster.
///
/// Build it from the connection your application already has, so latchkey shares its
/// socket instead of opening another. Such a connection stays yours: latchkey does
/// not replace it after a timeout, and its own timeouts apply. A `ConnectionManager`
/// reconnects by itself after a dropped socket; a plain `MultiplexedConnection` that
/// broke stays broken.
///
/// ```no_run
/// # async fn demo() -> redis::RedisResult<()> {
/// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
/// let manager = redis.get_connection_manager().await?;
/// let conn = latchkey::store::Connection::from(manager);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection(Link);

#[derive(Clone)]
enum Link {
    /// The caller's manager: reconnects by itself after a dropped socket.
    Manager(ConnectionManager),
    /// The caller's plain multiplexed connection: once broken, it stays broken.
    Multiplexed(MultiplexedConnection),
    /// Ours: also replaced when a reply times out.
    Replaced(Arc<Replaceable>),
    /// A cluster connection: routes each command to the node that owns its keys,
    /// follows MOVED and ASK, and reconnects to each node by itself.
    Cluster(ClusterConnection),
}

impl From<ClusterConnection> for Connection {
    fn from(conn: ClusterConnection) -> Self {
        Connection(Link::Cluster(conn))
    }
}

impl From<ConnectionManager> for Connection {
    fn from(conn: ConnectionManager) -> Self {
        Connection(Link::Manager(conn))
    }
}

impl From<MultiplexedConnection> for Connection {
    fn from(conn: MultiplexedConnection) -> Self {
        Connection(Link::Multiplexed(conn))
    }
}

impl Connection {
    /// Our own connection to `target`, made at the first command and made afresh
    /// whenever a reply times out or (to one server, or behind Sentinel) the
    /// connection drops; behind Sentinel, also after a failover.
    pub(crate) fn replaceable(target: Target, config: AsyncConnectionConfig) -> Self {
        let follows_failover = target.follows_failover();
        let replaceable = Arc::new(Replaceable {
            target,
            config,
            current: Mutex::new((0, None)),
            address: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(None),
            primary_check: PrimaryCheck::default(),
        });
        if follows_failover {
            watch_primary(Arc::downgrade(&replaceable));
        }
        Connection(Link::Replaced(replaceable))
    }

    /// Behind Sentinel, the server named the primary at most [`PRIMARY_CHECK`] ago
    /// (the Sentinels are asked first if it was longer); `None` for other targets
    /// or when the primary cannot be reached.
    pub(crate) async fn primary(&self) -> Option<String> {
        let Link::Replaced(replaceable) = &self.0 else {
            return None;
        };
        if !replaceable.target.follows_failover() {
            return None;
        }
        replaceable.current().await.ok()?;
        replaceable
            .address
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether this connection goes to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        match &self.0 {
            Link::Cluster(_) => true,
            Link::Replaced(r) => matches!(r.target, Target::Cluster(_)),
            Link::Manager(_) | Link::Multiplexed(_) => false,
        }
    }

    /// Runs `cmd` on the cluster node at `host:port` (on a connection to one server,
    /// on that server).
    pub(crate) async fn on_node(&mut self, cmd: Cmd, host: &str, port: u16) -> RedisResult<Value> {
        let node = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: host.to_owned(),
            port,
        });
        match &self.0 {
            Link::Cluster(conn) => conn.clone().route_command(cmd, node).await,
            Link::Replaced(r) => {
                let (generation, live) = r.current().await?;
                let reply = match live {
                    Live::Cluster(mut conn) => conn.route_command(cmd, node).await,
                    Live::Server(mut conn) => cmd.query_async(&mut conn).await,
                };
                r.replace_after(generation, &reply);
                reply
            }
            Link::Manager(_) | Link::Multiplexed(_) => cmd.query_async(self).await,
        }
    }
}

/// A connection of ours that is made afresh after a timeout.
///
/// redis-rs reconnects after a dropped socket, but a reply that times out leaves the
/// socket in place: behind a stalled network path (a peer that vanished without a
/// reset, a black-holed route) every later command would time out too, for ever
/// (on a cluster, redis-rs resends to the same node). Replacing the connection lets
/// the next command take a fresh path: behind Sentinel, to whichever server is the
/// primary then; on a cluster, with a fresh slot map.
struct Replaceable {
    target: Target,
    config: AsyncConnectionConfig,
    /// The connection in use (`None`: make one), numbered so that concurrent
    /// failures replace it once.
    current: Mutex<(u64, Option<Live>)>,
    /// The address the connection in use goes to (behind Sentinel: the primary it
    /// was named when connecting).
    address: Mutex<Option<String>>,
    /// Held while making a connection, so concurrent commands wait for one attempt
    /// instead of each asking the Sentinels (or reading the slot map) again; it keeps
    /// the last failed attempt (when it ended, and why), which those that waited for
    /// it share instead of each trying again in turn.
    connecting: tokio::sync::Mutex<Option<(Instant, redis::RedisError)>>,
    /// Behind Sentinel: when the Sentinels were last asked which server is the
    /// primary.
    primary_check: PrimaryCheck,
}

impl Replaceable {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Option<Live>)> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn in_use(&self) -> Option<(u64, Live)> {
        let current = self.lock();
        current.1.clone().map(|live| (current.0, live))
    }

    /// The connection in use, made first if there is none. Behind Sentinel, the
    /// server it goes to was named the primary at most [`PRIMARY_CHECK`] ago.
    ///
    /// Every command awaits this, so the common case (a connection in use, no
    /// question for the Sentinels due) takes no await, and the rest is boxed: its
    /// future (a connect, a lock of `connecting`) would otherwise be allocated and
    /// moved with every command's (about 1 % of an uncontended lock cycle's client
    /// instructions, callgrind).
    async fn current(&self) -> RedisResult<(u64, Live)> {
        if !self.must_ask_for_primary(PRIMARY_CHECK) {
            if let Some(in_use) = self.in_use() {
                return Ok(in_use);
            }
        }
        Box::pin(self.connect_or_follow()).await
    }

    /// [`Self::current`] when a connection must be made or the Sentinels asked.
    async fn connect_or_follow(&self) -> RedisResult<(u64, Live)> {
        if self.in_use().is_some() {
            self.follow_primary(PRIMARY_CHECK).await;
        }
        if let Some(in_use) = self.in_use() {
            return Ok(in_use);
        }
        let asked = Instant::now();
        let mut last_failure = self.connecting.lock().await;
        // Made by another command while this one waited.
        if let Some(in_use) = self.in_use() {
            return Ok(in_use);
        }
        // Another command's attempt failed while this one waited: so does this one.
        if let Some((failed_at, error)) = &*last_failure {
            if *failed_at >= asked {
                return Err(error.clone());
            }
        }
        let (fresh, address) = match self.target.connect(&self.config).await {
            Ok(fresh) => fresh,
            Err(error) => {
                *last_failure = Some((Instant::now(), error.clone()));
                return Err(error);
            }
        };
        tracing::debug!(address = address.as_deref(), "connected");
        *self.address.lock().unwrap_or_else(|p| p.into_inner()) = address;
        // Connecting asked the Sentinels (after `asked`) which server is the primary.
        self.primary_check.asked_at(asked, true);
        let mut current = self.lock();
        current.1 = Some(fresh.clone());
        Ok((current.0, fresh))
    }

    /// Drops the connection in use if it goes to another server than `primary`:
    /// the next command connects to the primary the Sentinels name now.
    fn follow(&self, primary: &str) {
        let connected = self
            .address
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if connected
            .as_deref()
            .is_none_or(|address| address == primary)
        {
            return;
        }
        let mut current = self.lock();
        if current.1.is_some() {
            tracing::debug!(primary, "the Sentinels name another primary: reconnecting");
            *current = (current.0 + 1, None);
        }
    }

    /// Drops connection number `generation` (if nobody did yet) after a `reply` that
    /// calls for a fresh connection; the next command makes one.
    fn replace_after<T>(&self, generation: u64, reply: &RedisResult<T>) {
        let Err(error) = reply else {
            return;
        };
        if !self.target.must_reconnect(error) {
            return;
        }
        let mut current = self.lock();
        if current.0 == generation {
            tracing::debug!(%error, "the next command uses a new connection");
            *current = (generation + 1, None);
        }
    }
}

/// How old the Sentinels' answer to "which server is the primary?" may be when a
/// command is sent (behind Sentinel).
const PRIMARY_CHECK: Duration = Duration::from_millis(500);

/// How often the watch of [`watch_primary`] asks: often enough that a command
/// rarely finds the last answer older than [`PRIMARY_CHECK`] and waits for one.
const PRIMARY_WATCH: Duration = Duration::from_millis(400);

impl Replaceable {
    /// Behind Sentinel, asks the Sentinels which server is the primary unless they
    /// answered in the last `max_age`, and drops the connection in use if it goes
    /// elsewhere. A failover does not stop the old primary from taking writes:
    /// until the Sentinels demote it (seconds later) it answers as a master, and
    /// locks taken there would overlap with those taken on the new one.
    ///
    /// Commands waiting meanwhile share one question. When no Sentinel answers, the
    /// command goes on with the connection it has (the Sentinels are asked again
    /// after `max_age`): refusing would make the lock unavailable whenever the
    /// Sentinels are, while the primary serves.
    async fn follow_primary(&self, max_age: Duration) {
        if !self.must_ask_for_primary(max_age) {
            return;
        }
        let _one_question = self.primary_check.asking.lock().await;
        if self.primary_check.asked_within(max_age) {
            return;
        }
        let asked = Instant::now();
        let primary = self.target.primary_now().await;
        self.primary_check.asked_at(asked, primary.is_some());
        match primary {
            Some(primary) => self.follow(&primary),
            None => tracing::debug!("no Sentinel named the primary: the connection stays"),
        }
    }

    /// Whether the connection follows a primary the Sentinels name and they were
    /// not asked in the last `max_age`.
    fn must_ask_for_primary(&self, max_age: Duration) -> bool {
        self.target.follows_failover() && !self.primary_check.asked_within(max_age)
    }
}

/// When the Sentinels were last asked which server is the primary.
#[derive(Default)]
struct PrimaryCheck {
    /// When the last question that was answered was sent (not when its answer came:
    /// a process frozen in between must not trust an answer from before the
    /// freeze), and when the last question was sent, answered or not.
    last: Mutex<(Option<Instant>, Option<Instant>)>,
    /// Held while asking, so concurrent commands ask once.
    asking: tokio::sync::Mutex<()>,
}

impl PrimaryCheck {
    /// Whether a question was answered, or one went unanswered, in the last `age`.
    fn asked_within(&self, age: Duration) -> bool {
        let (answered, tried) = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        let recent = |at: Option<Instant>| at.is_some_and(|at| at.elapsed() < age);
        recent(answered) || recent(tried)
    }

    fn asked_at(&self, at: Instant, answered: bool) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if answered {
            last.0 = Some(at);
        }
        last.1 = Some(at);
    }
}

/// Behind Sentinel, keeps the answer to "which server is the primary?" fresh, so
/// that commands seldom wait for it ([`Replaceable::follow_primary`]). Stops when
/// the connection is dropped.
fn watch_primary(replaceable: std::sync::Weak<Replaceable>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(PRIMARY_WATCH).await;
            let Some(replaceable) = replaceable.upgrade() else {
                return;
            };
            replaceable.follow_primary(PRIMARY_WATCH).await;
        }
    });
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            Link::Manager(c) => c.req_packed_command(cmd),
            Link::Multiplexed(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
            Link::Replaced(r) => Box::pin(async move {
                let (generation, live) = r.current().await?;
                let reply = match live {
                    Live::Server(mut conn) => conn.send_packed_command(cmd).await,
                    Live::Cluster(mut conn) => conn.req_packed_command(cmd).await,
                };
                r.replace_after(generation, &reply);
                reply
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            Link::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Multiplexed(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Replaced(r) => Box::pin(async move {
                let (generation, live) = r.current().await?;
                let reply = match live {
                    Live::Server(mut conn) => {
                        conn.send_packed_commands(pipeline, offset, count).await
                    }
                    Live::Cluster(mut conn) => {
                        conn.req_packed_commands(pipeline, offset, count).await
                    }
                };
                r.replace_after(generation, &reply);
                reply
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Link::Manager(c) => c.get_db(),
            Link::Multiplexed(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
            Link::Replaced(r) => match &r.lock().1 {
                Some(Live::Server(conn)) => conn.get_db(),
                Some(Live::Cluster(conn)) => conn.get_db(),
                None => 0,
            },
        }
    }
}

//! Typed errors: each says what happened and what the caller can do about it.

use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What an ACL user needs, as `ACL SETUSER` rules, where `P` stands for the key
/// prefix (with no prefix, `~* &*`). The scripts run their commands as the user, so
/// every command a script calls is listed, with those the client sends itself
/// (connecting, and `INFO` to tell a cluster node given as one server, scripts,
/// wake-ups, `list`, `--wait-replicas`, Redis Cluster, optimistic transactions). The README's ACL line is this one for the prefix
/// `myapp:`; a test checks it covers every command the scripts call, and runs every
/// CLI command through a user made from it.
///
/// ```
/// let rules = latchkey::ACL_RULES.replace('P', "myapp:");
/// assert!(rules.contains("~myapp:*") && rules.contains("+evalsha"));
/// ```
pub const ACL_RULES: &str = "resetkeys ~P* ~{P* resetchannels &P* &{P* -@all +ping +select \
     +hello +info +get +scan +evalsha +script|load +subscribe +unsubscribe +ssubscribe +sunsubscribe \
     +publish +spublish +time +type +del +exists +set +pexpire +pttl +zadd +zcard +zrange \
     +zrangebyscore +zrem +zremrangebyscore +zscore +hget +hset +hincrby +lpush +ltrim +lpos \
     +watch +unwatch +multi +exec +client|id +wait +cluster|slots";

/// `Result` with latchkey's [`Error`].
///
/// ```
/// fn check(name: &str) -> latchkey::Result<()> {
///     if name.is_empty() {
///         return Err(latchkey::Error::InvalidArgument("empty lock name".into()));
///     }
///     Ok(())
/// }
/// assert!(check("").is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// Errors never carry a password or a full owner token. The crate docs'
/// [Errors](crate#errors) section says when each variant comes and what to do about
/// it; each method's `# Errors` section lists the ones it returns.
///
/// ```
/// use std::time::Duration;
/// use latchkey::Error;
///
/// let err = Error::Busy {
///     kind: latchkey::Kind::Lock,
///     name: "jobs:nightly".into(),
///     key: "jobs:nightly".into(),
///     waited: Duration::from_secs(2),
///     holder: Some("3f2a…".into()),
///     retry_after: Some(Duration::from_secs(28)),
/// };
/// assert_eq!(
///     err.to_string(),
///     "lock \"jobs:nightly\" is busy: held by 3f2a… after waiting 2s; its lease has 28s left (unless renewed)"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Someone else held the lock (or the permits) for the whole wait (see
    /// [`Mutex::lock_timeout`](crate::Mutex::lock_timeout) for the details).
    #[error("{kind} {name:?} is busy: {}", busy_detail(*kind, *waited, holder.as_deref(), *retry_after))]
    Busy {
        /// What is busy: a lock, a semaphore or a read-write lock.
        kind: crate::Kind,
        /// Its name, prefix included, as it was made (`"pool"` for a semaphore
        /// whose holders are in the key `{pool}:lk:sem`).
        name: String,
        /// The Redis key of the lock (of a semaphore's or read-write lock's holders).
        key: String,
        /// How long the caller waited before giving up (for `try_lock`, the one round
        /// trip; zero for `force_release`).
        waited: Duration,
        /// The holder, masked (its first 4 characters); for a semaphore or a
        /// read-write lock, the holder whose lease ends first. `None` when the lock
        /// (or enough permits) was free but owed to waiters queued ahead.
        holder: Option<String>,
        /// The holder's remaining lease as Redis reported it, if it set one.
        retry_after: Option<Duration>,
    },

    /// An optimistic [`Transaction`](crate::transaction::Transaction) gave up: other
    /// writers changed its keys between its WATCH and its EXEC at every attempt, until
    /// its attempts or its deadline ran out. Nothing was written. Transient: try
    /// again later, or take a lock for this hot spot.
    #[error(
        "transaction on {keys} gave up after {attempts} attempts in {waited:?}: the keys changed under every one"
    )]
    Contended {
        /// The keys it watched, space-separated.
        keys: String,
        /// Attempts made.
        attempts: u32,
        /// Time from the first attempt to giving up.
        waited: Duration,
    },

    /// The lock is no longer ours: its lease expired (and it may have been taken by
    /// someone else) or an operator broke it. Whatever the critical section still
    /// does is no longer protected; use the fencing token to make late writes harmless.
    #[error("{kind} {name:?} is no longer held by this owner: its lease expired or it was broken")]
    LeaseLost {
        /// What was held: a lock, or a semaphore's or read-write lock's permits.
        kind: crate::Kind,
        /// Its name, prefix included, as it was made.
        name: String,
        /// The Redis key of the lock (of a semaphore's or read-write lock's holders).
        key: String,
    },

    /// The hold reached the limit its lease set
    /// ([`Lease::with_max_hold`](crate::Lease::with_max_hold)): the holder must
    /// stop counting on the lock, which is no longer renewed.
    #[error(
        "{kind} {name:?} reached its hold limit of {limit:?}: it is no longer renewed, and no longer protects this holder"
    )]
    HoldLimit {
        /// What was held: a lock, or a semaphore's or read-write lock's permits.
        kind: crate::Kind,
        /// Its name, prefix included, as it was made.
        name: String,
        /// The limit.
        limit: Duration,
    },

    /// Redis could not be reached, or did not answer in time (1 s for a reply, 2 s
    /// for a connect, on connections latchkey makes). Transient: waiting calls retry
    /// it. A request whose reply was lost may still have run.
    #[error("Redis at {node} is unreachable: {source}")]
    Unreachable {
        /// The server's address (never with credentials).
        node: String,
        /// What the connection reported.
        #[source]
        source: Cause,
    },

    /// The server refused the credentials (wrong password or ACL user).
    #[error("Redis at {node} refused authentication: check the user name and password in the URL")]
    AuthFailed {
        /// The server's address (never with credentials).
        node: String,
    },

    /// The ACL user may not run a command or touch a key latchkey needs.
    #[error(
        "Redis at {node} denied a command by ACL ({detail}){}; the user needs the ACL rules \
         `{ACL_RULES}`, where P is the key prefix",
        missing_rule(detail)
    )]
    AclDenied {
        /// The server's address.
        node: String,
        /// The server's message (which does not always name the command).
        detail: String,
    },

    /// The key holds a value that is not a lock (a hash, a list, ...): some other
    /// part of the application uses this name.
    #[error(
        "key {key:?} holds a value latchkey did not write (WRONGTYPE): pick another name or prefix"
    )]
    WrongType {
        /// The Redis key.
        key: String,
    },

    /// The server is a read-only replica; locks must be taken on the primary.
    #[error("Redis at {node} is a read-only replica: point latchkey at the primary")]
    ReadOnly {
        /// The server's address.
        node: String,
    },

    /// Fewer replicas than asked for confirmed a lock's grant or renewal within the
    /// time allowed (`WAIT`, see
    /// [`RedisStore::with_wait_replicas`](crate::store::RedisStore::with_wait_replicas)):
    /// a failover now could lose it. A grant is released again; a renewal stays on
    /// the primary. Transient: waiting calls retry it.
    #[error(
        "Redis at {node} has {acked} replica(s) confirming the lock {key:?}, fewer than the {wanted} asked for"
    )]
    TooFewReplicas {
        /// The primary's address.
        node: String,
        /// The Redis key of the lock.
        key: String,
        /// Replicas asked for.
        wanted: u32,
        /// Replicas that confirmed in time.
        acked: u32,
    },

    /// A quorum lock ([`QuorumStore`](crate::quorum::QuorumStore)) could not get a
    /// majority of its nodes to agree; each node's answer is listed, so the error
    /// names the nodes that were down, slow or held by someone else. Whatever the
    /// attempt set on any node has been released (or expires with its lease).
    ///
    /// Transient when every node that failed did so transiently (unreachable, slow,
    /// busy): waiting may help. An authentication or ACL failure on enough nodes to
    /// lose the majority is not.
    ///
    /// ```
    /// # fn demo(error: latchkey::Error) {
    /// if let latchkey::Error::NoQuorum { nodes, .. } = &error {
    ///     for report in nodes {
    ///         eprintln!("{report}");
    ///     }
    /// }
    /// # }
    /// ```
    #[error("{}", no_quorum_detail(key, *needed, nodes, *late))]
    NoQuorum {
        /// The lock's key.
        key: String,
        /// How many nodes had to agree (a majority).
        needed: usize,
        /// What each node answered, in the order the nodes were given.
        nodes: Vec<crate::quorum::NodeReport>,
        /// Set when a majority did grant the lock, but only after this long: past
        /// the lease's validity, so the grant was undone.
        late: Option<Duration>,
    },

    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The OS random number generator failed, so no owner token could be made.
    #[error("the OS random number generator failed: {0}")]
    Entropy(String),

    /// Redis answered with an error or a reply latchkey did not expect. Transient
    /// when the server is still loading its data, failing over or not yet ready
    /// (see [`is_transient`](Error::is_transient)).
    #[error("Redis at {node} answered with an error: {source}")]
    Redis {
        /// The server's address.
        node: String,
        /// What the server answered.
        #[source]
        source: Cause,
    },

    /// The server is a node of a Redis Cluster, opened as a single server: every
    /// lock would be redirected (`MOVED`) for ever. Open it with
    /// [`Client::open_cluster`](crate::Client::open_cluster) (CLI: `--cluster`,
    /// which `latchkey` picks by itself when given one cluster node).
    #[error(
        "{node} is a Redis Cluster node: open it as a cluster (Client::open_cluster; CLI: --cluster)"
    )]
    ClusterNode {
        /// The node's address.
        node: String,
    },

    /// Something answered at the address, but not in the Redis protocol: an HTTP
    /// server, a database of another kind, or the wrong port.
    #[error("{node} is not a Redis server: its reply is not the Redis protocol (wrong port?)")]
    NotRedis {
        /// The server's address.
        node: String,
    },

    /// The TLS handshake failed: the server does not speak TLS on that port, or its
    /// certificate is not trusted (for a private CA, build the client with
    /// [`redis::Client::build_with_tls`] and [`Client::from_redis_client`](crate::Client::from_redis_client)).
    #[error("TLS with Redis at {node} failed: {detail}")]
    Tls {
        /// The server's address.
        node: String,
        /// What went wrong.
        detail: String,
    },

    /// The [`blocking`](crate::blocking) API's own runtime could not start, has shut
    /// down, or a call on it panicked.
    #[error("latchkey's blocking runtime failed: {0}")]
    Runtime(String),
}

impl Error {
    /// Sorts a redis-rs error into the case the caller can act on.
    ///
    /// `node` names the server (no credentials), `key` the lock the command was about.
    pub(crate) fn from_redis(source: RedisError, node: &str, key: &str) -> Self {
        let node = node.to_owned();
        // Rendered once: several checks read the server's words.
        let text = source.to_string();
        if is_wrong_type(&source, &text) {
            return Error::WrongType {
                key: key.to_owned(),
            };
        }
        if is_acl_denial(&source, &text) {
            let detail = source.detail().unwrap_or("no detail").trim().to_owned();
            return Error::AclDenied { node, detail };
        }
        if let Some(detail) = tls_failure(&text) {
            return Error::Tls { node, detail };
        }
        if text.contains("cluster support disabled") {
            return Error::InvalidArgument(format!(
                "{node} is not a Redis Cluster node (its cluster support is disabled): open it as a single server (Client::open; CLI: without --cluster)"
            ));
        }
        if text.contains("DB index is out of range") {
            return Error::InvalidArgument(format!(
                "the database number in the URL does not exist on {node} (DB index is out of range)"
            ));
        }
        match source.kind() {
            ErrorKind::AuthenticationFailed => Error::AuthFailed { node },
            ErrorKind::Server(ServerErrorKind::ReadOnly) => Error::ReadOnly { node },
            ErrorKind::Parse => Error::NotRedis { node },
            _ if connection_failed(&source) => Error::Unreachable {
                node,
                source: Cause(source),
            },
            _ if is_auth_refusal(&source, &text) => Error::AuthFailed { node },
            _ => Error::Redis {
                node,
                source: Cause(source),
            },
        }
    }

    /// No reply came from `node` before a wait's deadline: the wait could not even
    /// learn whether the lock was busy.
    pub(crate) fn no_reply(node: &str) -> Self {
        Error::Unreachable {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Io,
                "no reply before the wait's deadline",
            ))),
        }
    }

    /// The reply granting a lock came from `node` only after the lease it granted,
    /// counted from when the request was sent, had ended: a connection made or a
    /// path stalled meanwhile. The wait tries again, and reports this if it ends.
    /// A lease shorter than a round trip can never be held: a wait without a
    /// deadline then keeps trying (backing off to a second between tries).
    pub(crate) fn granted_too_late(node: &str) -> Self {
        Error::Unreachable {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Io,
                "the grant's reply came after its lease had ended",
            ))),
        }
    }

    /// `node` is a replica now: behind Sentinel, a failover moved the primary, and the
    /// next command asks the Sentinels again (transient, unlike [`Error::ReadOnly`]).
    pub(crate) fn no_reply_within(node: &str, deadline: Duration) -> Self {
        Error::Unreachable {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Io,
                "no reply within the per-node deadline",
                format!("{deadline:?}"),
            ))),
        }
    }

    pub(crate) fn demoted(node: &str) -> Self {
        Error::Unreachable {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Io,
                "the server is a replica now (failover); asking the Sentinels for the primary",
            ))),
        }
    }

    /// A grant too few replicas confirmed, whose undo failed: it may still be held, so
    /// the caller must release it (an outcome it cannot know, as for a lost reply).
    pub(crate) fn grant_not_undone(node: &str, undo: &Error) -> Self {
        Error::Unreachable {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Io,
                "too few replicas confirmed a grant, and undoing it failed",
                undo.to_string(),
            ))),
        }
    }

    /// EXEC ran, but a command in it failed or its replies did not convert: the
    /// transaction's writes are in (Redis rolls nothing back), so it must not be
    /// run again as if nothing happened.
    pub(crate) fn committed(node: &str, error: &impl std::fmt::Display) -> Self {
        Error::Redis {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::UnexpectedReturnType,
                "the transaction ran",
                format!("the transaction ran (EXEC answered, its writes are in), but {error}"),
            ))),
        }
    }

    /// EXEC refused a transaction whole (EXECABORT): nothing ran.
    pub(crate) fn exec_refused(node: &str, error: &RedisError) -> Self {
        Error::Redis {
            node: node.to_owned(),
            source: Cause(RedisError::from((
                ErrorKind::Server(ServerErrorKind::ExecAbort),
                "EXEC refused the transaction",
                format!(
                    "EXEC refused the transaction whole, nothing ran (a write rejected when queued: a read-only replica after a failover?): {error}"
                ),
            ))),
        }
    }

    /// The error's kind as a metrics label (see [`crate::metrics`]).
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Error::Busy { .. } => "busy",
            Error::Contended { .. } => "contended",
            Error::LeaseLost { .. } => "lease_lost",
            Error::HoldLimit { .. } => "hold_limit",
            Error::Unreachable { .. } => "unreachable",
            Error::AuthFailed { .. } => "auth_failed",
            Error::AclDenied { .. } => "acl_denied",
            Error::WrongType { .. } => "wrong_type",
            Error::ReadOnly { .. } => "read_only",
            Error::TooFewReplicas { .. } => "too_few_replicas",
            Error::NoQuorum { .. } => "no_quorum",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::Entropy(_) => "entropy",
            Error::Redis { .. } | Error::ClusterNode { .. } => "redis",
            Error::NotRedis { .. } => "not_redis",
            Error::Tls { .. } => "tls",
            Error::Runtime(_) => "other",
        }
    }

    /// True when a request may or may not have run on the server (the reply was
    /// lost): anything it could have set must be undone.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::NoQuorum { nodes, .. } => nodes.iter().any(|n| n.answer.outcome_unknown()),
            _ => false,
        }
    }

    /// An ACL refusal of a command (not of a key): every name fails alike, so a
    /// walk over names must stop at it rather than pass the name over.
    pub(crate) fn denies_a_command(&self) -> bool {
        matches!(self, Error::AclDenied { detail, .. }
            if denied_command(detail).is_some() || detail.contains(SCRIPT_COMMAND_REFUSED))
    }

    /// True when the same call may succeed if tried again later: busy, unreachable,
    /// a server that is still loading its data, failing over or not yet ready, or a
    /// cluster slot that moved more often than one call follows.
    /// Waiting calls retry these themselves while their deadline allows. Everything
    /// else (credentials, ACL, a key of another type, a replica, a bad argument)
    /// needs a change before a retry can help.
    ///
    /// ```
    /// let err = latchkey::Error::InvalidArgument("zero TTL".into());
    /// assert!(!err.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Busy { .. }
            | Error::Unreachable { .. }
            | Error::TooFewReplicas { .. }
            | Error::Contended { .. } => true,
            Error::NoQuorum { nodes, .. } => nodes.iter().all(|n| n.answer.is_transient()),
            Error::Redis { source, .. } => matches!(
                source.0.kind(),
                ErrorKind::Server(
                    ServerErrorKind::BusyLoading
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::Moved
                        | ServerErrorKind::Ask
                )
            ),
            _ => false,
        }
    }
}

/// What the connection or the server reported, behind an opaque type so that
/// latchkey's API does not change with redis-rs's: display it, or log it.
///
/// ```
/// fn log(error: &latchkey::Error) {
///     if let latchkey::Error::Unreachable { node, source } = error {
///         eprintln!("{node}: {source}");
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Cause(RedisError);

impl std::fmt::Display for Cause {
    // The server's own words, without redis-rs's name for the error kind.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0.code(), self.0.detail()) {
            (Some(code), Some(detail)) => write!(f, "{code} {detail}"),
            (None, Some(detail)) => f.write_str(detail),
            // redis-rs writes an error made of a kind and words as "words - Io".
            _ => {
                let text = self.0.to_string();
                let kind = format!(" - {:?}", self.0.kind());
                f.write_str(text.strip_suffix(&kind).unwrap_or(&text))
            }
        }
    }
}

impl std::error::Error for Cause {}

impl Cause {
    pub(crate) fn is_timeout(&self) -> bool {
        self.0.is_timeout()
    }
}

/// The connection is gone or the server did not answer, as opposed to the server
/// refusing a command: whatever was sent may or may not have run.
pub(crate) fn connection_failed(err: &RedisError) -> bool {
    // A cluster client with no connection to the node that owns the slot (it died,
    // a failover is under way) could not send the command at all.
    err.kind() == ErrorKind::Io
        || err.kind() == ErrorKind::ClusterConnectionNotFound
        || err.is_timeout()
        || err.is_connection_dropped()
}

/// Errors raised inside a script keep the server's code in redis 7, but the text is
/// the only thing every version agrees on.
fn is_wrong_type(err: &RedisError, text: &str) -> bool {
    err.code() == Some("WRONGTYPE") || text.contains("WRONGTYPE")
}

/// How Redis (6 and 7.0) words an ACL refusal of a command inside a script, where
/// it names no command: "The user executing the script can't run this command or
/// subcommand".
const SCRIPT_COMMAND_REFUSED: &str = "can't run this command";

/// A NOPERM reply, or (inside a script, where redis 7 reports it as ERR) the text
/// of one: a command, key or channel the user may not touch.
fn is_acl_denial(err: &RedisError, text: &str) -> bool {
    let text = text.to_lowercase();
    err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
        || text.contains(SCRIPT_COMMAND_REFUSED)
        || text.contains("can't access at least one of the keys")
        || text.contains("no permissions to")
}

/// A certificate the server sent that we do not trust, or a handshake that failed.
fn tls_failure(text: &str) -> Option<String> {
    let is_tls = [
        "certificate",
        "CertificateUnknown",
        "TLS",
        "tls handshake",
        "HandshakeFailure",
        // A reply that is not TLS at all (a plain server, an HTTP server).
        "corrupt message",
        "InvalidContentType",
    ]
    .iter()
    .any(|mark| text.contains(mark));
    let advice = match text.contains("certificate") {
        true => {
            " (the client does not trust the server's certificate: for a private CA, give the client the CA's certificate)"
        }
        false => " (is it a TLS port?)",
    };
    is_tls.then(|| format!("{text}{advice}"))
}

/// Depending on the server version and the handshake step, a bad password comes back
/// as `WRONGPASS`, `NOAUTH` or an `ERR` mentioning AUTH.
fn is_auth_refusal(err: &RedisError, text: &str) -> bool {
    matches!(err.code(), Some("WRONGPASS") | Some("NOAUTH"))
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
}

/// Who holds the lock and for how long, as far as the last attempt saw.
impl Error {
    /// [`Error::LeaseLost`] for what `key` belongs to.
    pub(crate) fn lease_lost(key: &crate::LockKey) -> Self {
        Error::LeaseLost {
            kind: key.kind(),
            name: key.name().to_owned(),
            key: key.to_string(),
        }
    }

    /// [`Error::HoldLimit`] for what `key` belongs to.
    pub(crate) fn hold_limit(key: &crate::LockKey, limit: Duration) -> Self {
        Error::HoldLimit {
            kind: key.kind(),
            name: key.name().to_owned(),
            limit,
        }
    }

    /// [`Error::Busy`] for what `key` belongs to, its holder masked.
    pub(crate) fn busy(
        key: &crate::LockKey,
        waited: Duration,
        holder: Option<String>,
        retry_after: Option<Duration>,
    ) -> Self {
        Error::Busy {
            kind: key.kind(),
            name: key.name().to_owned(),
            key: key.to_string(),
            waited,
            holder,
            retry_after,
        }
    }
}

fn busy_detail(
    kind: crate::Kind,
    waited: Duration,
    holder: Option<&str>,
    left: Option<Duration>,
) -> String {
    // A `try_lock` does not wait; its one round trip is not worth mentioning.
    let waited = match waited < Duration::from_millis(1) {
        true => String::new(),
        false => format!(" after waiting {}", humanize(waited)),
    };
    let shared = matches!(kind, crate::Kind::Semaphore | crate::Kind::RwLock);
    let Some(holder) = holder else {
        let owed = match shared {
            true => "permits free but owed to waiters queued ahead",
            false => "free but owed to a queued waiter",
        };
        return format!("{owed}{waited}");
    };
    let left = left.map(|left| format!("{} left (unless renewed)", humanize(left)));
    match (shared, left) {
        (true, Some(left)) => {
            format!("no permit free{waited}; the first lease to end ({holder}) has {left}")
        }
        (true, None) => format!("no permit free{waited}"),
        (false, Some(left)) => format!("held by {holder}{waited}; its lease has {left}"),
        (false, None) => format!("held by {holder}{waited}; it was set without expiry"),
    }
}

fn no_quorum_detail(
    key: &str,
    needed: usize,
    nodes: &[crate::quorum::NodeReport],
    late: Option<Duration>,
) -> String {
    let answers = nodes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let what = match key.is_empty() {
        true => "the quorum's masters".to_owned(),
        false => format!("lock {key:?}"),
    };
    match late {
        Some(took) => format!(
            "{what}: a majority granted it only after {}, past the lease's validity, so it was released: {answers}",
            humanize(took)
        ),
        None => format!(
            "{what}: no majority: {needed} of {} nodes must answer; {answers}",
            nodes.len()
        ),
    }
}

/// A refused duration as its caller gave it: `Debug`'s units and fractions
/// ("1.5µs", "316224000s"), but zero as "0s", where `Debug` says "0ns".
pub(crate) struct Given(pub(crate) Duration);

impl std::fmt::Display for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.is_zero() {
            true => f.write_str("0s"),
            false => write!(f, "{:?}", self.0),
        }
    }
}

pub(crate) fn humanize(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    if d.subsec_millis() == 0 {
        return format!("{}s", d.as_secs());
    }
    format!("{:.1}s", d.as_secs_f64())
}

/// The rule to add for the command an ACL refusal names (`… to run the 'zadd'
/// command`), as advice in front of the whole set: `: add +zadd`.
fn missing_rule(detail: &str) -> String {
    match denied_command(detail) {
        Some(command) => format!(": add +{command}"),
        None => String::new(),
    }
}

/// The command an ACL refusal names, lower case; `None` for a refused key or
/// channel, which the server's message names no command for.
fn denied_command(detail: &str) -> Option<String> {
    let named = detail
        .split_once("to run the '")
        .and_then(|(_, rest)| rest.split_once('\''))
        .map(|(command, _)| command.to_ascii_lowercase());
    named.filter(|command| !command.is_empty())
}

#[cfg(test)]
mod tests {
    /// An error latchkey makes of a kind and words reads as the words, without
    /// redis-rs's " - Io" after them.
    #[test]
    fn a_cause_made_of_words_reads_as_the_words() {
        let error = super::Error::no_reply("127.0.0.1:6379");
        assert_eq!(
            error.to_string(),
            "Redis at 127.0.0.1:6379 is unreachable: no reply before the wait's deadline"
        );
    }
}

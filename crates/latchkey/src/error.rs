//! Typed errors: each says what happened and what the caller can do about it.

use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind};

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
/// Errors never carry a password or a full owner token.
///
/// ```
/// use std::time::Duration;
/// use latchkey::Error;
///
/// let err = Error::Busy { key: "jobs:nightly".into(), waited: Duration::from_secs(2), retry_after: None };
/// assert_eq!(err.to_string(), "lock \"jobs:nightly\" is busy: still held after waiting 2s");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Someone else held the lock for the whole wait.
    #[error("lock {key:?} is busy: still held after waiting {}", humanize(*waited))]
    Busy {
        /// The Redis key of the lock.
        key: String,
        /// How long the caller waited before giving up (zero for `try_lock`).
        waited: Duration,
        /// The holder's remaining lease as Redis reported it, if it set one.
        retry_after: Option<Duration>,
    },

    /// The lock is no longer ours: its lease expired (and it may have been taken by
    /// someone else) or an operator broke it. Whatever the critical section still
    /// does is no longer protected; use the fencing token to make late writes harmless.
    #[error("lock {key:?} is no longer held by this owner: its lease expired or it was broken")]
    LeaseLost {
        /// The Redis key of the lock.
        key: String,
    },

    /// Redis could not be reached, or did not answer in time.
    #[error("Redis at {node} is unreachable: {source}")]
    Unreachable {
        /// The server's address (never with credentials).
        node: String,
        /// What the connection reported.
        #[source]
        source: RedisError,
    },

    /// The server refused the credentials (wrong password or ACL user).
    #[error("Redis at {node} refused authentication: check the user name and password in the URL")]
    AuthFailed {
        /// The server's address (never with credentials).
        node: String,
    },

    /// The ACL user may not run a command or touch a key latchkey needs.
    #[error(
        "Redis at {node} denied a command by ACL: {detail} (the user needs EVALSHA, SCRIPT LOAD, GET and the lock's keys)"
    )]
    AclDenied {
        /// The server's address.
        node: String,
        /// The server's message.
        detail: String,
    },

    /// The key holds a value that is not a lock (a hash, a list, ...): some other
    /// part of the application uses this name.
    #[error(
        "key {key:?} holds a value that is not a lock (WRONGTYPE): pick another lock name or prefix"
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

    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The OS random number generator failed, so no owner token could be made.
    #[error("the OS random number generator failed: {0}")]
    Entropy(String),

    /// Redis answered with an error or a reply latchkey did not expect.
    #[error("Redis at {node} answered with an error: {source}")]
    Redis {
        /// The server's address.
        node: String,
        /// The error as redis-rs reported it.
        #[source]
        source: RedisError,
    },
}

impl Error {
    /// Sorts a redis-rs error into the case the caller can act on.
    ///
    /// `node` names the server (no credentials), `key` the lock the command was about.
    pub(crate) fn from_redis(source: RedisError, node: &str, key: &str) -> Self {
        let node = node.to_owned();
        if is_wrong_type(&source) {
            return Error::WrongType {
                key: key.to_owned(),
            };
        }
        match source.kind() {
            ErrorKind::AuthenticationFailed => Error::AuthFailed { node },
            ErrorKind::Server(ServerErrorKind::NoPerm) => Error::AclDenied {
                node,
                detail: source.detail().unwrap_or("no detail").to_owned(),
            },
            ErrorKind::Server(ServerErrorKind::ReadOnly) => Error::ReadOnly { node },
            _ if connection_failed(&source) => Error::Unreachable { node, source },
            _ if is_auth_refusal(&source) => Error::AuthFailed { node },
            _ => Error::Redis { node, source },
        }
    }

    /// True when a request may or may not have run on the server (the reply was
    /// lost): anything it could have set must be undone.
    pub(crate) fn outcome_unknown(&self) -> bool {
        matches!(self, Error::Unreachable { .. })
    }

    /// True when the same call may succeed if tried again later: busy, unreachable,
    /// or a server that is still loading its data, failing over or not yet ready.
    /// Waiting calls retry these themselves while their deadline allows.
    ///
    /// ```
    /// let err = latchkey::Error::InvalidArgument("zero TTL".into());
    /// assert!(!err.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Busy { .. } | Error::Unreachable { .. } => true,
            Error::Redis { source, .. } => matches!(
                source.kind(),
                ErrorKind::Server(
                    ServerErrorKind::BusyLoading
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ClusterDown
                )
            ),
            _ => false,
        }
    }
}

/// The connection is gone or the server did not answer, as opposed to the server
/// refusing a command: whatever was sent may or may not have run.
pub(crate) fn connection_failed(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Io || err.is_timeout() || err.is_connection_dropped()
}

/// Errors raised inside a script keep the server's code in redis 7, but the text is
/// the only thing every version agrees on.
fn is_wrong_type(err: &RedisError) -> bool {
    err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE")
}

/// Depending on the server version and the handshake step, a bad password comes back
/// as `WRONGPASS`, `NOAUTH` or an `ERR` mentioning AUTH.
fn is_auth_refusal(err: &RedisError) -> bool {
    matches!(err.code(), Some("WRONGPASS") | Some("NOAUTH"))
        || err.to_string().contains("WRONGPASS")
        || err.to_string().contains("NOAUTH")
}

fn humanize(d: Duration) -> String {
    if d.as_millis() % 1000 == 0 {
        return format!("{}s", d.as_secs());
    }
    format!("{}ms", d.as_millis())
}

//! Lock names, prefixes and the Redis keys they map to. The layout is described on
//! [`LockKey`], for users.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Longest lock name accepted, in bytes.
const MAX_NAME_LEN: usize = 1024;
/// Longest prefix accepted, in bytes.
const MAX_PREFIX_LEN: usize = 256;
/// Suffixes of companion keys (a lock name may not end with one), each with the
/// Redis type latchkey keeps there (`wake` is a pub/sub channel, no key).
const COMPANION_KINDS: [(&str, &str); 17] = [
    ("fence", "string"),
    ("queue", "zset"),
    ("leases", "zset"),
    ("wake", "none"),
    ("rate", "string"),
    ("cooldown", "string"),
    ("log", "zset"),
    ("tally", "hash"),
    ("gcra", "string"),
    ("sem", "zset"),
    ("rw", "zset"),
    ("used", "string"),
    ("ended", "list"),
    ("permits", "string"),
    ("elect", "string"),
    ("leader", "string"),
    ("latch", "string"),
];

/// What kind of latchkey primitive something is: named in messages
/// ([`Error::Busy`]) and in what [`Client::inspect`](crate::Client::inspect) and
/// [`Client::list_all`](crate::Client::list_all) find.
///
/// ```
/// assert_eq!(latchkey::Kind::RwLock.to_string(), "read-write lock");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A [`Mutex`](crate::Mutex) (or another library's plain lock).
    Lock,
    /// A [`Semaphore`](crate::Semaphore).
    Semaphore,
    /// A [`RwLock`](crate::RwLock).
    RwLock,
    /// A [`RateLimiter`](crate::ratelimit::RateLimiter)'s state.
    RateLimit,
    /// An [`Election`](crate::election::Election).
    Election,
    /// A [`Latch`](crate::latch::Latch) (or a barrier).
    Latch,
}

impl Kind {
    /// The companion under which a namespaced primitive keeps its holders, or a
    /// recipe its state (an election its lock, a latch its count).
    pub(crate) fn companion(self) -> &'static str {
        match self {
            Kind::Semaphore => "sem",
            Kind::RwLock => "rw",
            Kind::Election => "elect",
            Kind::Latch => "latch",
            Kind::Lock | Kind::RateLimit => "",
        }
    }

    /// The `primitive` label of its metrics (see [`crate::metrics`]).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Semaphore => "semaphore",
            Kind::RwLock => "rwlock",
            Kind::RateLimit => "ratelimit",
            Kind::Election => "election",
            Kind::Latch => "latch",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Lock => "lock",
            Kind::Semaphore => "semaphore",
            Kind::RwLock => "read-write lock",
            Kind::RateLimit => "rate limit",
            Kind::Election => "election",
            Kind::Latch => "latch",
        })
    }
}

/// A validated key prefix, prepended to every lock name of a client.
///
/// A prefix may be empty. It may not contain `{` or `}` (that would move every lock
/// to another hash slot), white space or control characters.
///
/// ```
/// use latchkey::Prefix;
///
/// assert_eq!(Prefix::new("myapp:locks:")?.as_str(), "myapp:locks:");
/// assert!(Prefix::new("my{app}").is_err());
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    /// Checks `prefix` and wraps it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a prefix longer than 256 bytes, or one with
    /// `{`, `}`, white space or a control character.
    ///
    /// ```
    /// let prefix = latchkey::Prefix::new("billing:")?;
    /// assert!(latchkey::Prefix::new("two words:").is_err());
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn new(prefix: &str) -> Result<Self> {
        if prefix.len() > MAX_PREFIX_LEN {
            return invalid(format!(
                "prefix is {} bytes long; the limit is {MAX_PREFIX_LEN}",
                prefix.len()
            ));
        }
        if let Some(c) = prefix
            .chars()
            .find(|c| matches!(c, '{' | '}') || c.is_whitespace() || c.is_control())
        {
            return invalid(format!(
                "prefix {prefix:?} contains {c:?}; braces, white space and control characters are not allowed"
            ));
        }
        Ok(Prefix(prefix.to_owned()))
    }

    /// The prefix text.
    ///
    /// ```
    /// assert_eq!(latchkey::Prefix::default().as_str(), "");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The Redis keys of one lock: the lock key and its companions.
///
/// A lock named `N` under prefix `P` lives at the key `K = P + N`, a plain string
/// that holds the owner token with a PX expiry (the layout of
/// `SET key token NX PX ttl`; see [Interop](crate#interop)). Its companion keys are
/// `tagged(K) + ":lk:" + kind`:
///
/// | kind | what |
/// |---|---|
/// | `fence` | the fencing counter: the last token handed out |
/// | `queue` | the wait queue: a sorted set of waiters by arrival |
/// | `leases` | the waiters' leases: when each counts as dead |
/// | `wake` | the pub/sub channel on which a waiter hears that it is next |
/// | `ended` | on a [quorum](crate::quorum), the values released lately, which a late request may not set again |
/// | `rate`, `cooldown`, `log`, `tally`, `gcra` | a [rate limiter](crate::ratelimit)'s state, one kind per algorithm |
/// | `sem`, `rw` | a [semaphore](crate::Semaphore)'s or [read-write lock](crate::RwLock)'s holders, with companions of their own (`{N}:lk:sem:lk:fence`, `{N}:lk:sem:lk:used`: the weight held …) |
///
/// `tagged(K)` is `K` itself when `K` already has a non-empty hash tag `{…}`, and
/// `{K}` otherwise. So the companions always sit in `K`'s hash slot, never equal `K`,
/// and differ for every lock even when several locks share a hash tag: the lock
/// `app:job` has the counter `{app:job}:lk:fence`, the lock `app:{user42}:cart` has
/// `app:{user42}:cart:lk:fence`.
///
/// Every companion key expires: the counter one lease after the grant it fenced, the
/// queue and the waiter leases at most twice the longest waiter lease in them after
/// their last use. So
/// per-entity locks (per order, user, IP) leave nothing behind once unused.
///
/// ```
/// use latchkey::{LockKey, Prefix};
///
/// let key = LockKey::new(&Prefix::new("app:")?, "nightly-report")?;
/// assert_eq!(key.as_str(), "app:nightly-report");
/// assert!(LockKey::new(&Prefix::default(), "").is_err());
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockKey(Arc<Names>);

/// A lock's key and its companions' names, built once per [`LockKey`] and shared by
/// its clones (every acquisition hands copies to its guard and its release).
#[derive(Clone, PartialEq, Eq)]
struct Names {
    kind: Kind,
    /// Its metrics carry its name (see [`crate::metrics`]).
    named_metrics: bool,
    /// The names one after another, in one allocation (a mutex is often made per
    /// call, and one string per name cost it eight allocations): see [`Name`].
    text: String,
    /// Where each [`Name`] ends in `text`.
    ends: [usize; NAMES],
}

/// The names kept in [`Names::text`], in order.
#[derive(Clone, Copy)]
enum Name {
    /// The name the primitive was made with, prefix included, for messages.
    Given,
    Key,
    Fence,
    Queue,
    Leases,
    Channel,
}

const NAMES: usize = 6;

impl Names {
    fn get(&self, name: Name) -> &str {
        let index = name as usize;
        let start = match index {
            0 => 0,
            _ => self.ends[index - 1],
        };
        &self.text[start..self.ends[index]]
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names")
            .field("kind", &self.kind)
            .field("named_metrics", &self.named_metrics)
            .field("name", &self.get(Name::Given))
            .field("key", &self.get(Name::Key))
            .field("fence", &self.get(Name::Fence))
            .field("queue", &self.get(Name::Queue))
            .field("leases", &self.get(Name::Leases))
            .field("channel", &self.get(Name::Channel))
            .finish()
    }
}

impl LockKey {
    /// Validates `name` and builds the keys of the lock `prefix + name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a name that is empty, longer than 1024 bytes,
    /// has a control character, or ends like a companion key (`:lk:fence`,
    /// `:lk:queue`, `:lk:leases`, `:lk:wake`, or a rate limiter's `:lk:rate`, `:lk:cooldown`,
    /// `:lk:log`, `:lk:tally`, `:lk:gcra`, a semaphore's `:lk:sem`, a read-write lock's `:lk:rw`);
    /// and for a key `prefix + name` with a
    /// `}` that does not close a valid hash tag (`x}y`), since Redis Cluster would hash
    /// it differently from its companions.
    ///
    /// ```
    /// use latchkey::{LockKey, Prefix};
    ///
    /// let cart = LockKey::new(&Prefix::new("app:")?, "{user42}:cart")?;
    /// assert_eq!(cart.as_str(), "app:{user42}:cart");
    /// assert!(LockKey::new(&Prefix::default(), "job:lk:fence").is_err());
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn new(prefix: &Prefix, name: &str) -> Result<Self> {
        validate_name(name)?;
        let key = [prefix.as_str(), name];
        let tagged = tagged(key)?;
        Ok(LockKey::with_companions(Kind::Lock, &key, &key, &tagged))
    }

    /// The keys of the primitive of `kind` (a semaphore or a read-write lock) named
    /// `prefix + name`: its main key is a companion of `prefix + name`
    /// (`{app:pool}:lk:sem`), and its own companions (fence, queue …) hang off that,
    /// in the same hash slot. So a semaphore, a read-write lock and a lock of one
    /// name never share a key.
    pub(crate) fn namespaced(prefix: &Prefix, name: &str, kind: Kind) -> Result<Self> {
        Ok(LockKey::new(prefix, name)?.sibling(kind))
    }

    /// The keys of the primitive of `kind` under this lock key's name (see
    /// [`namespaced`](Self::namespaced)).
    pub(crate) fn sibling(&self, kind: Kind) -> Self {
        let key = self.companion(kind.companion());
        LockKey::with_companions(kind, &[self.name()], &[&key], &[&key])
    }

    /// The companion `kind` of this key as a key of its own, with its own channel
    /// (an election's leader record, where observers listen apart from the
    /// candidates waiting for the lock).
    pub(crate) fn companion_key(&self, kind: &str) -> Self {
        let key = self.companion(kind);
        LockKey::with_companions(self.kind(), &[self.name()], &[&key], &[&key])
    }

    /// The keys of a recipe named `prefix + name` that keeps its state in the
    /// companion `kind` of that name (an election's lock `{app:jobs}:lk:elect`, a
    /// latch's count `{app:jobs}:lk:latch`), so it never shares a key with a lock of
    /// the name; its own companions (channel, fence, a leader record) hang off that
    /// key, in the same hash slot.
    pub(crate) fn recipe(prefix: &Prefix, name: &str, kind: &str) -> Result<Self> {
        Ok(LockKey::new(prefix, name)?.companion_key(kind))
    }

    /// The key `key` of the `kind` named `name`, its companions named after
    /// `tagged` (the key with a hash tag); each given as the pieces it is made of,
    /// so that no piece is put together apart before going into the one string.
    /// Plain loops over the pieces: with nested iterator adapters, building the
    /// names cost 5 % of an uncontended cycle's client instructions (callgrind) when
    /// the mutex is made per call, as it often is.
    fn with_companions(kind: Kind, name: &[&str], key: &[&str], tagged: &[&str]) -> Self {
        // The companions, in the order of `Name`.
        const COMPANIONS: [&str; NAMES - 2] = [":lk:fence", ":lk:queue", ":lk:leases", ":lk:wake"];
        let length = |pieces: &[&str]| pieces.iter().map(|piece| piece.len()).sum::<usize>();
        let tag_length = length(tagged);
        let companions_length: usize = COMPANIONS.iter().map(|c| tag_length + c.len()).sum();
        let mut text = String::with_capacity(length(name) + length(key) + companions_length);
        let mut ends = [0; NAMES];
        for (end, pieces) in ends.iter_mut().zip([name, key]) {
            for piece in pieces {
                text.push_str(piece);
            }
            *end = text.len();
        }
        for (end, companion) in ends[2..].iter_mut().zip(COMPANIONS) {
            for piece in tagged {
                text.push_str(piece);
            }
            text.push_str(companion);
            *end = text.len();
        }
        LockKey(Arc::new(Names {
            kind,
            named_metrics: false,
            text,
            ends,
        }))
    }

    /// The lock key: a string holding the owner token, with a PX expiry.
    ///
    /// ```
    /// let key = latchkey::LockKey::new(&latchkey::Prefix::default(), "deploy")?;
    /// assert_eq!(key.as_str(), "deploy");
    /// assert_eq!(key.to_string(), "deploy");
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn as_str(&self) -> &str {
        self.0.get(Name::Key)
    }

    /// What this key belongs to: a lock, or a semaphore's or read-write lock's
    /// holders.
    pub(crate) fn kind(&self) -> Kind {
        self.0.kind
    }

    /// The name the primitive was made with (prefix included): what messages show,
    /// never an internal key such as `{pool}:lk:sem`.
    pub(crate) fn name(&self) -> &str {
        self.0.get(Name::Given)
    }

    /// Whether its metrics carry its name (see [`crate::metrics`]).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn named_metrics(&self) -> bool {
        self.0.named_metrics
    }

    /// The same keys, with metrics that carry the name.
    pub(crate) fn with_named_metrics(&self) -> Self {
        let mut names = Names::clone(&self.0);
        names.named_metrics = true;
        LockKey(Arc::new(names))
    }

    /// The key of the lock's fencing counter.
    pub(crate) fn fence(&self) -> &str {
        self.0.get(Name::Fence)
    }

    /// The sorted set of waiters, in order of arrival.
    pub(crate) fn queue(&self) -> &str {
        self.0.get(Name::Queue)
    }

    /// The sorted set of waiter leases (when each waiter counts as dead).
    pub(crate) fn leases(&self) -> &str {
        self.0.get(Name::Leases)
    }

    /// The pub/sub channel on which waiters hear that it is their turn.
    pub(crate) fn channel(&self) -> &str {
        self.0.get(Name::Channel)
    }

    /// The companion key of `kind` (`rate`, `gcra` …): one of the keys a rate
    /// limiter or a future primitive keeps beside this name, in its hash slot, never
    /// equal to a lock's key.
    pub(crate) fn companion(&self, kind: &str) -> String {
        // Every companion is the tagged key, ":lk:" and its kind.
        let channel = self.channel();
        let tagged = channel.strip_suffix(":lk:wake").unwrap_or(channel);
        companion(tagged, kind)
    }
}

impl std::fmt::Display for LockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `key` is one of latchkey's companion keys (a fencing counter, a wait
/// queue …) rather than a lock.
pub(crate) fn is_companion_key(key: &str) -> bool {
    split_companion(key).is_some()
}

/// A companion key (`<rest>:lk:<kind>`) as its rest and its kind; `None` for
/// another key. Split at the last `:`, since no kind has one: a search for the
/// 4-byte `:lk:` cost every lock cycle 1 % of its client instructions, checking
/// its name.
pub(crate) fn split_companion(key: &str) -> Option<(&str, &str)> {
    let (head, kind) = key.rsplit_once(':')?;
    let rest = head.strip_suffix(":lk")?;
    companion_type(kind).map(|_| (rest, kind))
}

/// The Redis type latchkey keeps under a companion key of `kind` (`fence`, `sem`
/// …); `None` when `kind` names no companion.
fn companion_type(kind: &str) -> Option<&'static str> {
    let known = COMPANION_KINDS
        .iter()
        .find(|(companion, _)| *companion == kind);
    known.map(|(_, redis_type)| *redis_type)
}

/// The Redis type (as `TYPE` names it) latchkey keeps under `key`: a lock's key
/// holds a string, each companion the type of its kind. What tells, after a
/// `WRONGTYPE`, which key holds data latchkey did not write.
pub(crate) fn redis_type(key: &str) -> &'static str {
    let companion = split_companion(key).and_then(|(_, kind)| companion_type(kind));
    companion.unwrap_or("string")
}

fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return invalid("lock name is empty".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return invalid(format!(
            "lock name is {} bytes long; the limit is {MAX_NAME_LEN}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return invalid(format!("lock name {name:?} contains a control character"));
    }
    if is_companion_key(name) {
        return invalid(format!(
            "lock name {name:?} ends like latchkey's own keys (\":lk:fence\", \":lk:queue\" …)"
        ));
    }
    Ok(())
}

/// `key` if it already carries a non-empty hash tag, else `{key}`.
/// `tagged(K)` for the key `K = prefix + name`, in pieces. The prefix holds no
/// braces ([`Prefix::new`]), so the key's hash tag, if any, is the name's.
fn tagged([prefix, name]: [&str; 2]) -> Result<[&str; 4]> {
    let key = || [prefix, name].concat();
    if let Some(tag) = hash_tag(name) {
        // `{job}` would name the companions of the lock `job` (`{job}:lk:…`).
        if prefix.is_empty() && name.len() == tag.len() + 2 {
            let key = key();
            return invalid(format!(
                "lock key {key:?} is only a hash tag, which would share its keys with the lock {tag:?}: \
                 add something after the '}}' (\"{key}:lock\")"
            ));
        }
        return Ok(["", prefix, name, ""]);
    }
    // `{a}b}` would hash as `a`, not as the whole key.
    if name.contains('}') {
        let key = key();
        return invalid(format!(
            "lock key {key:?} contains '}}' without a valid hash tag; use a {{tag}} or drop the brace"
        ));
    }
    Ok(["{", prefix, name, "}"])
}

/// `concat`, not `format!`: some companions are named per call (a rate limiter's,
/// a quorum's `ended`), and the formatting machinery costs about four times as many
/// instructions.
fn companion(tagged: &str, kind: &str) -> String {
    [tagged, ":lk:", kind].concat()
}

/// The text Redis Cluster hashes: what is between the first `{` and the first `}`
/// after it, when that is not empty.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the
/// whole key without one, modulo 16384.
pub(crate) fn slot(key: &str) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed.as_bytes()) % 16384
}

fn invalid<T>(message: String) -> Result<T> {
    Err(Error::InvalidArgument(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(prefix: &str, name: &str) -> Result<LockKey> {
        LockKey::new(&Prefix::new(prefix)?, name)
    }

    #[test]
    fn untagged_keys_get_their_whole_name_as_tag() {
        let k = key("app:", "job").unwrap();
        assert_eq!(k.as_str(), "app:job");
        assert_eq!(k.fence(), "{app:job}:lk:fence");
        assert_eq!(hash_tag(k.fence()), Some("app:job"));
    }

    #[test]
    fn a_key_that_is_only_a_tag_is_refused_it_would_share_the_untagged_locks_keys() {
        let error = key("", "{u1}").unwrap_err().to_string();
        assert!(error.contains("only a hash tag"), "{error}");
        assert!(key("app:", "{u1}").is_ok(), "the prefix is part of the key");
        assert!(key("", "{u1}:lock").is_ok());
        assert_ne!(
            key("", "{u1}:lock").unwrap().fence(),
            key("", "u1").unwrap().fence()
        );
    }

    #[test]
    fn tagged_keys_keep_their_tag_and_stay_distinct() {
        let cart = key("app:", "{user42}:cart").unwrap();
        let profile = key("app:", "{user42}:profile").unwrap();
        assert_eq!(hash_tag(cart.fence()), Some("user42"));
        assert_ne!(cart.fence(), profile.fence());
        assert_ne!(cart.fence(), cart.as_str());
    }

    #[test]
    fn bad_names_and_prefixes_are_refused() {
        for (prefix, name) in [
            ("", ""),
            ("", "a\nb"),
            ("", "x}y"),
            ("", "job:lk:fence"),
            ("a b", "job"),
            ("{a}", "job"),
            ("a\0", "job"),
        ] {
            assert!(
                matches!(key(prefix, name), Err(Error::InvalidArgument(_))),
                "{prefix:?} {name:?}"
            );
        }
        assert!(key("", &"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(key(&"p".repeat(MAX_PREFIX_LEN + 1), "x").is_err());
    }

    #[test]
    fn companion_keys_are_told_from_lock_names() {
        // What `split_companion` rests on.
        assert!(COMPANION_KINDS.iter().all(|(kind, _)| !kind.contains(':')));
        assert_eq!(
            split_companion("{a}:lk:sem:lk:fence"),
            Some(("{a}:lk:sem", "fence"))
        );
        for companion in ["job:lk:fence", ":lk:queue", "{a}:lk:sem", "x:lk:a:lk:wake"] {
            assert!(is_companion_key(companion), "{companion}");
        }
        for name in [
            "job",
            "job:lk",
            "job:lk:",
            "job:lk:fence:x",
            "lk:fence",
            "job:lkfence",
        ] {
            assert!(!is_companion_key(name), "{name}");
        }
        for (name, key) in [
            ("job:lk:other", "job:lk:other"),
            ("a:lk:fence:b", "a:lk:fence:b"),
        ] {
            assert_eq!(
                LockKey::new(&Prefix::new("").unwrap(), name)
                    .unwrap()
                    .as_str(),
                key
            );
        }
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Values from CLUSTER KEYSLOT.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("123456789"), 12739);
    }

    #[test]
    fn hash_tags_follow_the_cluster_rule() {
        assert_eq!(hash_tag("{a}b"), Some("a"));
        assert_eq!(hash_tag("{}a{b}"), None);
        assert_eq!(hash_tag("x{a{b}c}"), Some("a{b"));
        assert_eq!(hash_tag("none"), None);
    }

    /// The type table names, for every key the primitives write, the type they
    /// write there: each primitive is used (a lock with a queue and a fence, a
    /// semaphore, a read-write lock, every rate limit, an election, a latch) and
    /// every key found is checked. A new companion or a script that changes a
    /// key's type must change the table, or a WRONGTYPE would name a sound key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_type_table_matches_the_keys_the_primitives_write() {
        use crate::ratelimit::Policy;
        use std::time::Duration;
        let server = latchkey_testkit::RedisServer::start().unwrap();
        let client = crate::Client::open(&server.url()).await.unwrap();
        let long = Duration::from_secs(60);
        let holder = client.mutex("l").unwrap().try_lock().await.unwrap();
        holder.fence().await.unwrap();
        // Another client: one client's own tasks wait in its local line, not in Redis.
        let other = crate::Client::open(&server.url()).await.unwrap();
        let waiter = other.mutex("l").unwrap();
        let waiting =
            tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(5)).await });
        let permit = client
            .semaphore("s", 2)
            .unwrap()
            .try_acquire(1)
            .await
            .unwrap();
        let read = client.rw_lock("r").unwrap().try_read().await.unwrap();
        for policy in [
            Policy::fixed_window(5, long),
            Policy::sliding_window(5, long),
            Policy::gcra(5, long, 1),
            Policy::cooldown(long),
        ] {
            let limiter = client.rate_limiter("t", policy.unwrap()).unwrap();
            limiter.check(1).await.unwrap();
        }
        let leading = client.election("e").unwrap().campaign("me").await.unwrap();
        client.latch("c", 2).unwrap().count_down().await.unwrap();
        // The waiter queued (its queue and waiter leases exist) before the look.
        let mut admin = server.connection().unwrap();
        let started = std::time::Instant::now();
        loop {
            let queued: Option<usize> = redis::cmd("ZCARD")
                .arg("{l}:lk:queue")
                .query(&mut admin)
                .ok();
            if queued.unwrap_or(0) > 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the waiter never queued"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        assert!(keys.len() >= 15, "{keys:?}");
        for key in &keys {
            let found: String = redis::cmd("TYPE").arg(key).query(&mut admin).unwrap();
            assert_eq!(found, redis_type(key), "{key}");
        }
        drop((permit, read, leading));
        holder.release().await.unwrap();
        waiting.await.unwrap().unwrap().release().await.unwrap();
    }
}

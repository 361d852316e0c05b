//! The entry point: a connection (or store) plus a key prefix.

use crate::error::Result;
use crate::key::{LockKey, Prefix};
use crate::lock::Mutex;
use crate::lock::{LocalLocks, LockStatus};
use crate::ratelimit::FixedWindow;
use crate::store::{Connection, LockStore, SingleNode};

/// Hands out locks on one store, all under one key prefix. Cheap to clone: clones
/// share the connection.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?.with_prefix("myapp:")?;
/// let guard = client.mutex("invoice:7")?.try_lock().await?; // key "myapp:invoice:7"
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client<S = SingleNode> {
    store: S,
    prefix: Prefix,
    // Lets the client's mutex handles pass a lock between their tasks.
    local: LocalLocks,
}

impl Client<SingleNode> {
    /// Connects to one Redis server by URL (`redis://`, `rediss://`, `redis+unix://`).
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open("redis://app:secret@127.0.0.1:6379/0").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(url: &str) -> Result<Self> {
        Ok(Client::with_store(SingleNode::open(url).await?))
    }

    /// Connects through a redis-rs client the application already configured.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let client = latchkey::Client::from_redis_client(redis).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_redis_client(client: redis::Client) -> Result<Self> {
        Ok(Client::with_store(SingleNode::from_client(client).await?))
    }

    /// Shares a connection the application already has (a `ConnectionManager` or a
    /// `MultiplexedConnection`).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
    /// let shared = redis.get_connection_manager().await?;
    /// let client = latchkey::Client::from_connection(shared.clone());
    /// # Ok(()) }
    /// ```
    pub fn from_connection(conn: impl Into<Connection>) -> Self {
        Client::with_store(SingleNode::from_connection(conn))
    }

    /// A fixed-window rate limit on `name` (key: prefix + name): `limit` calls per `per`.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let quota = client.fixed_window("downloads:10.0.0.7", 5, std::time::Duration::from_secs(600))?;
    /// assert!(quota.check().await?.allowed);
    /// # Ok(()) }
    /// ```
    pub fn fixed_window(
        &self,
        name: &str,
        limit: u64,
        per: std::time::Duration,
    ) -> Result<FixedWindow> {
        let key = LockKey::new(&self.prefix, name)?;
        FixedWindow::new(self.store.clone(), key, limit, per)
    }
}

impl<S: LockStore> Client<S> {
    /// A client on any [`LockStore`].
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = latchkey::store::SingleNode::open("redis://127.0.0.1:6379").await?;
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
    /// what a prefix may contain).
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self> {
        self.prefix = Prefix::new(prefix)?;
        Ok(self)
    }

    /// The key prefix.
    pub fn prefix(&self) -> &Prefix {
        &self.prefix
    }

    /// The store locks are taken on.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// A handle to the lock called `name` (key: prefix + name). Nothing is sent to
    /// Redis until the lock is taken. Errors only for an invalid name.
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

    /// The locks under this client's prefix whose names match `pattern` (Redis glob
    /// syntax, `*` for all), with their status, sorted by name. Uses SCAN, never KEYS;
    /// every string key under the prefix counts, so keep locks under their own prefix.
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
            .scan(&format!("{}{pattern}", escape_glob(prefix)))
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

/// Escapes glob metacharacters so the prefix matches only itself.
fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

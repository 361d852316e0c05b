//! What a transaction's body reads with: its own connection, under WATCH.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::MultiplexedConnection;
use redis::{Cmd, FromRedisValue};

use crate::error::Result;
use crate::store::RedisStore;

/// The reads of one attempt of a [`Transaction`](super::Transaction), on the
/// connection that holds its WATCH. Read what the decision needs; the writes go in
/// the pipeline the body returns. Only for the attempt it was given to: kept
/// beyond it, it would read on a connection another transaction may be using.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let tx = client.transaction(&["{shop}:stock"])?;
/// let sold: Option<(i64,)> = tx
///     .run(|reads| async move {
///         let stock: i64 = reads.get("{shop}:stock").await?;
///         if stock == 0 {
///             return Ok(None);
///         }
///         let mut writes = latchkey::redis::pipe();
///         writes.decr("{shop}:stock", 1);
///         Ok(Some(writes))
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Reads {
    conn: MultiplexedConnection,
    store: RedisStore,
    attempt: u32,
    /// Set when a read found the connection broken: the attempt may be tried again.
    broken: Arc<AtomicBool>,
}

impl Reads {
    pub(super) fn new(conn: MultiplexedConnection, store: RedisStore, attempt: u32) -> Self {
        Reads {
            conn,
            store,
            attempt,
            broken: Arc::default(),
        }
    }

    /// Whether a read found the connection broken.
    pub(super) fn broke(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// `GET key`, as `T` (an `Option` for a key that may be missing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType), [`Error::Redis`](crate::Error::Redis) for a value that is not a `T`, and the
    /// errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(reads: &latchkey::transaction::Reads) -> latchkey::Result<()> {
    /// let balance: Option<i64> = reads.get("{bank}:a").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get<T: FromRedisValue>(&self, key: &str) -> Result<T> {
        self.query(redis::cmd("GET").arg(key)).await
    }

    /// Any read command, as `T`.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// ```no_run
    /// # async fn demo(reads: &latchkey::transaction::Reads) -> latchkey::Result<()> {
    /// let fields: Vec<String> = reads.query(latchkey::redis::cmd("HKEYS").arg("{shop}:cart")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        // A clone of the attempt's own connection: the same socket, under its WATCH.
        let mut conn = self.conn.clone();
        let reply = cmd.query_async(&mut conn).await;
        reply.map_err(|error| {
            if is_broken(&error) {
                self.broken.store(true, Ordering::Relaxed);
            }
            self.store.error(error, "")
        })
    }

    /// Which attempt this is: 1, then 2 … after conflicts.
    ///
    /// ```no_run
    /// # fn demo(reads: &latchkey::transaction::Reads) {
    /// if reads.attempt() > 1 {
    ///     println!("someone wrote first; deciding again");
    /// }
    /// # }
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The id Redis gives this attempt's connection (`CLIENT ID`), to match it in
    /// `CLIENT LIST` or kill it in a test.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(reads: &latchkey::transaction::Reads) -> latchkey::Result<()> {
    /// println!("connection {}", reads.client_id().await?);
    /// # Ok(()) }
    /// ```
    pub async fn client_id(&self) -> Result<u64> {
        self.query(redis::cmd("CLIENT").arg("ID")).await
    }
}

impl std::fmt::Debug for Reads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reads")
            .field("attempt", &self.attempt)
            .finish()
    }
}

/// Whether `error` left the connection unusable (so nothing after it was sent).
pub(super) fn is_broken(error: &redis::RedisError) -> bool {
    error.is_io_error() || error.is_timeout() || error.is_connection_dropped()
}

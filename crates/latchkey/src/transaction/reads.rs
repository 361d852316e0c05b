//! What a transaction's body reads with: its own connection, under WATCH.

use redis::aio::MultiplexedConnection;
use redis::{Cmd, FromRedisValue};

use crate::error::Result;
use crate::store::RedisStore;

/// The reads of one attempt of a [`Transaction`](super::Transaction), on the
/// connection that holds its WATCH. Read what the decision needs; the writes go in
/// the pipeline the body returns.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let tx = client.transaction(&["{shop}:stock"])?;
/// let sold: Option<(i64,)> = tx
///     .run(async |reads| {
///         let stock: i64 = reads.get("{shop}:stock").await?;
///         if stock == 0 {
///             return Ok(None);
///         }
///         let mut writes = redis::pipe();
///         writes.decr("{shop}:stock", 1);
///         Ok(Some(writes))
///     })
///     .await?;
/// # Ok(()) }
/// ```
pub struct Reads<'a> {
    conn: &'a mut MultiplexedConnection,
    store: &'a RedisStore,
    attempt: u32,
    /// A read found the connection broken: the attempt may be tried again.
    pub(super) broken: bool,
}

impl<'a> Reads<'a> {
    pub(super) fn new(
        conn: &'a mut MultiplexedConnection,
        store: &'a RedisStore,
        attempt: u32,
    ) -> Self {
        Reads {
            conn,
            store,
            attempt,
            broken: false,
        }
    }

    /// `GET key`, as `T` (an `Option` for a key that may be missing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`] for a value that is not a `T`, and the
    /// errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(reads: &mut latchkey::transaction::Reads<'_>) -> latchkey::Result<()> {
    /// let balance: Option<i64> = reads.get("{bank}:a").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get<T: FromRedisValue>(&mut self, key: &str) -> Result<T> {
        self.query(redis::cmd("GET").arg(key)).await
    }

    /// Any read command, as `T`.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// ```no_run
    /// # async fn demo(reads: &mut latchkey::transaction::Reads<'_>) -> latchkey::Result<()> {
    /// let fields: Vec<String> = reads.query(redis::cmd("HKEYS").arg("{shop}:cart")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> Result<T> {
        let reply = cmd.query_async(self.conn).await;
        reply.map_err(|error| {
            self.broken |= is_broken(&error);
            self.store.error(error, "")
        })
    }

    /// Which attempt this is: 1, then 2 … after conflicts.
    ///
    /// ```no_run
    /// # fn demo(reads: &latchkey::transaction::Reads<'_>) {
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
    /// # async fn demo(reads: &mut latchkey::transaction::Reads<'_>) -> latchkey::Result<()> {
    /// println!("connection {}", reads.client_id().await?);
    /// # Ok(()) }
    /// ```
    pub async fn client_id(&mut self) -> Result<u64> {
        self.query(redis::cmd("CLIENT").arg("ID")).await
    }
}

impl std::fmt::Debug for Reads<'_> {
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

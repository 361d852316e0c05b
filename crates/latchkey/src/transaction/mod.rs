//! Optimistic transactions: WATCH, read, then MULTI/EXEC, tried again when someone
//! else wrote first.

mod reads;
mod retry;

use std::future::Future;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{FromRedisValue, Pipeline, Value};

pub use reads::Reads;
use reads::is_broken;
use retry::Retry;

use crate::error::{Error, Result};
use crate::key::slot;
use crate::metrics::transaction_attempt;
use crate::store::{DedicatedConn, RedisStore};

/// An optimistic transaction on some keys: [`run`](Self::run) WATCHes them, lets
/// you read, and commits your writes with MULTI/EXEC only if none of the keys
/// changed meanwhile; otherwise it reads and decides again, a bounded number of
/// times, with capped and jittered pauses between attempts, within a deadline.
/// Made by [`Client::transaction`](crate::Client::transaction), or by
/// [`MutexGuard::transaction`](crate::MutexGuard::transaction), which also
/// watches the lock.
///
/// Done right where the usual recipe is not:
///
/// - **A connection of its own.** WATCH belongs to a connection; on one that other
///   tasks share (a multiplexed connection, a pool without pinning), another task's
///   EXEC would consume or skip the watch. Each attempt takes a connection nobody
///   else uses while it runs.
/// - **No silent reconnect.** Those connections never reconnect: if the connection
///   broke between WATCH and EXEC (a network blip, `CLIENT KILL`), the EXEC fails
///   instead of running unguarded on a fresh socket. A failure before the EXEC is
///   tried again on a new connection; a failure at the EXEC itself is returned as
///   [`Error::Unreachable`] (it may or may not have run), never retried blindly.
/// - **Bounded.** [`Error::Contended`] after the attempts or the deadline, whichever
///   comes first (default: 16 attempts, 5 s), not a loop that retries forever.
/// - **One hash slot.** All keys must hash to one Redis Cluster slot (use a
///   `{tag}`), checked when it is made, so the keys stay valid for a cluster.
///   Transactions run on one server or a Sentinel-managed primary; on a cluster
///   they are refused with [`Error::InvalidArgument`] for now.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let transfer = client.transaction(&["{bank}:a", "{bank}:b"])?;
/// let moved: Option<(i64, i64)> = transfer
///     .run(|tx| async move {
///         let a: i64 = tx.get("{bank}:a").await?;
///         if a < 10 {
///             return Ok(None); // not enough: write nothing
///         }
///         let mut writes = latchkey::redis::pipe();
///         writes.decr("{bank}:a", 10).incr("{bank}:b", 10);
///         Ok(Some(writes))
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Transaction {
    store: RedisStore,
    keys: Vec<String>,
    held: Option<Held>,
    retry: Retry,
}

/// The lock a guard's transaction must still hold: its key and owner token.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub(crate) key: String,
    pub(crate) owner: String,
}

/// How one attempt ended, when it did not fail.
enum Attempted<T> {
    /// EXEC ran (`Some`), or the body chose to write nothing (`None`).
    Done(Option<T>),
    /// A watched key changed: EXEC was refused.
    Conflict,
    /// The connection failed before EXEC was sent: nothing was written.
    Broken(Error),
}

impl<T> Attempted<T> {
    /// How an attempt ended, as the `result` label of its metric.
    fn label(attempted: &Result<Self>) -> &'static str {
        match attempted {
            Ok(Attempted::Done(Some(_))) => "committed",
            Ok(Attempted::Done(None)) => "nothing_written",
            Ok(Attempted::Conflict) => "conflict",
            Ok(Attempted::Broken(_)) | Err(_) => "error",
        }
    }
}

impl Transaction {
    /// A transaction on `keys` (WATCHed as given), plus `watched_too` (the lock's
    /// keys, for a guard's transaction).
    pub(crate) fn new(
        store: RedisStore,
        keys: &[&str],
        held: Option<(Held, Vec<String>)>,
    ) -> Result<Self> {
        if keys.is_empty() {
            return Err(Error::InvalidArgument(
                "a transaction needs at least one key to watch".into(),
            ));
        }
        let mut watched: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let held = held.map(|(held, lock_keys)| {
            watched.extend(lock_keys);
            held
        });
        check_one_slot(&watched)?;
        Ok(Transaction {
            store,
            keys: watched,
            held,
            retry: Retry::default(),
        })
    }

    /// The same transaction, giving up with [`Error::Contended`] after `attempts`
    /// (at least 1; default 16).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let tx = client.transaction(&["{bank}:a"])?.with_attempts(3);
    /// # Ok(()) }
    /// ```
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.retry.attempts = attempts.max(1);
        self
    }

    /// The same transaction, starting no new attempt once `deadline` has passed
    /// since [`run`](Self::run) began (default 5 s).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let tx = client.transaction(&["{bank}:a"])?.with_deadline(std::time::Duration::from_millis(200));
    /// # Ok(()) }
    /// ```
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.retry.deadline = deadline;
        self
    }

    /// Runs `body` under WATCH and commits what it returns. `body` is a closure
    /// returning a future (`|reads| async move { … }`); it reads through its
    /// [`Reads`] (on the transaction's own connection) and returns the writes
    /// as a [`redis::Pipeline`] (without MULTI/EXEC: they are added here), or
    /// `None` to write nothing. It may run several times, so it should only read
    /// and decide. Returns EXEC's replies as `T`, or `None` if `body` wrote nothing.
    ///
    /// # Errors
    ///
    /// - [`Error::Contended`]: other writers changed the keys at every attempt.
    /// - [`Error::LeaseLost`] (a guard's transaction): the lock was no longer ours,
    ///   before the writes or at the EXEC; nothing was written.
    /// - [`Error::Unreachable`]: Redis did not answer; if it was the EXEC, it may
    ///   or may not have run.
    /// - [`Error::Redis`] saying "the transaction ran" when EXEC ran but a command
    ///   in it failed (Redis does not roll the others back) or its replies are not a
    ///   `T`: the writes are in; do not run it again.
    /// - An error `body` returned (not retried), and the errors a reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the EXEC was sent writes nothing; after, the
    /// writes may or may not have happened. The connection is dropped, not reused.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let counter = client.transaction(&["hits"])?;
    /// let (hits,): (i64,) = counter
    ///     .run(|tx| async move {
    ///         let hits: Option<i64> = tx.get("hits").await?;
    ///         let mut writes = latchkey::redis::pipe();
    ///         writes.set("hits", hits.unwrap_or(0) + 1).ignore().get("hits");
    ///         Ok(Some(writes))
    ///     })
    ///     .await?
    ///     .expect("always writes");
    /// # Ok(()) }
    /// ```
    pub async fn run<T, F, Fut>(&self, mut body: F) -> Result<Option<T>>
    where
        T: FromRedisValue,
        F: FnMut(Reads) -> Fut,
        Fut: Future<Output = Result<Option<Pipeline>>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let attempted = self.attempt(&mut body, attempt).await;
            transaction_attempt(self.store.deployment(), Attempted::label(&attempted));
            match attempted? {
                Attempted::Done(value) => return Ok(value),
                Attempted::Conflict => {}
                Attempted::Broken(error) => {
                    tracing::debug!(%error, attempt, "transaction attempt failed before EXEC; trying again");
                }
            }
            let pause = Retry::pause(attempt + 1);
            if attempt >= self.retry.attempts || started.elapsed() + pause >= self.retry.deadline {
                return Err(Error::Contended {
                    keys: self.keys.join(" "),
                    attempts: attempt,
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// One WATCH … EXEC on a connection of its own. The connection goes back for
    /// reuse only after a clean end; a failure drops it.
    async fn attempt<T, F, Fut>(&self, body: &mut F, attempt: u32) -> Result<Attempted<T>>
    where
        T: FromRedisValue,
        F: FnMut(Reads) -> Fut,
        Fut: Future<Output = Result<Option<Pipeline>>>,
    {
        let mut taken = match self.store.dedicated().await {
            Ok(taken) => taken,
            Err(error) if error.is_transient() => return Ok(self.broken(error)),
            Err(error) => return Err(error),
        };
        match self.watch(&mut taken.conn).await {
            Ok(()) => {}
            Err(error @ Error::Unreachable { .. }) => return Ok(self.broken(error)),
            Err(error) => return Err(error),
        }
        let reads = Reads::new(taken.conn.clone(), self.store.clone(), attempt);
        let decided = body(reads.clone()).await;
        if reads.broke() {
            // The connection broke under a read: nothing was sent after it.
            let error = decided
                .err()
                .unwrap_or_else(|| Error::no_reply(self.store.node()));
            return Ok(self.broken(error));
        }
        let mut writes = match decided {
            Ok(Some(writes)) => writes,
            Ok(None) => return self.unwatch(taken, Attempted::Done(None)).await,
            Err(error) => return self.unwatch(taken, ()).await.and(Err(error)),
        };
        // A failover while the body ran: EXEC on the old primary, still a writable
        // master until the Sentinels demote it, would commit what the demotion
        // throws away. Nothing was written yet: try again on the new one.
        if !self.store.still_primary(&taken).await {
            return Ok(self.broken(Error::demoted(self.store.node())));
        }
        let reply: Value = match writes.atomic().query_async(&mut taken.conn).await {
            Ok(reply) => reply,
            Err(error) => return Err(self.exec_failed(taken, error)),
        };
        self.store.give_back(taken);
        if matches!(reply, Value::Nil) {
            // A changed lock refused it: not contention to wait out.
            self.check_held(None).await?;
            return Ok(Attempted::Conflict);
        }
        match T::from_redis_value(reply) {
            Ok(replies) => Ok(Attempted::Done(Some(replies))),
            // EXEC ran: an error now must not read as "nothing happened".
            Err(error) => Err(Error::committed(self.store.node(), &error)),
        }
    }

    /// What a failed EXEC round trip means:
    /// - no answer (I/O, timeout): it may have run, and is never tried again
    ///   blindly ([`Error::Unreachable`]); the idle connections go too;
    /// - EXEC refused whole (EXECABORT: a write was rejected when queued, e.g. by a
    ///   primary demoted in a failover): nothing ran;
    /// - anything else came after EXEC answered: a write failed inside it (ignored
    ///   or not, the others ran; Redis rolls nothing back), or the replies did not
    ///   convert: the writes are in.
    fn exec_failed(&self, taken: DedicatedConn, error: redis::RedisError) -> Error {
        if is_broken(&error) {
            self.store.forget_dedicated();
            return self.store.error(error, &self.keys[0]);
        }
        self.store.give_back(taken);
        let refused = matches!(
            error.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort)
                | redis::ErrorKind::UnexpectedReturnType
        );
        match refused {
            true => {
                self.store.forget_dedicated();
                Error::exec_refused(self.store.node(), &error)
            }
            false => Error::committed(self.store.node(), &error),
        }
    }

    /// An attempt whose connection broke before EXEC was sent: the idle
    /// connections may be as stale (a restart, a failover), so they go too.
    fn broken<T>(&self, error: Error) -> Attempted<T> {
        self.store.forget_dedicated();
        Attempted::Broken(error)
    }

    /// WATCHes the keys and, for a guard's transaction, checks the lock is still
    /// ours (after the WATCH, so a change from then on refuses the EXEC).
    async fn watch(&self, conn: &mut MultiplexedConnection) -> Result<()> {
        let watched: redis::RedisResult<()> =
            redis::cmd("WATCH").arg(&self.keys).query_async(conn).await;
        watched.map_err(|e| self.store.error(e, &self.keys[0]))?;
        self.check_held(Some(conn)).await
    }

    /// [`Error::LeaseLost`] if this is a guard's transaction and the lock is not
    /// the guard's now (read on `conn`, or on the store's connection).
    async fn check_held(&self, conn: Option<&mut MultiplexedConnection>) -> Result<()> {
        let Some(held) = &self.held else {
            return Ok(());
        };
        let get = redis::cmd("GET").arg(&held.key).clone();
        let holder: redis::RedisResult<Option<String>> = match conn {
            Some(conn) => get.query_async(conn).await,
            None => self.store.query(&get).await,
        };
        let holder = holder.map_err(|e| self.store.error(e, &held.key))?;
        match holder.as_deref() == Some(held.owner.as_str()) {
            true => Ok(()),
            false => Err(Error::LeaseLost {
                kind: crate::Kind::Lock,
                name: held.key.clone(),
                key: held.key.clone(),
            }),
        }
    }

    /// Ends an attempt that writes nothing: UNWATCH, then the connection goes back.
    async fn unwatch<R>(&self, mut taken: DedicatedConn, outcome: R) -> Result<R> {
        let unwatched: redis::RedisResult<()> =
            redis::cmd("UNWATCH").query_async(&mut taken.conn).await;
        if unwatched.is_ok() {
            self.store.give_back(taken);
        }
        Ok(outcome)
    }
}

/// Checks that every key hashes to one Redis Cluster slot.
fn check_one_slot(keys: &[String]) -> Result<()> {
    let first = slot(&keys[0]);
    match keys.iter().find(|key| slot(key) != first) {
        None => Ok(()),
        Some(other) => Err(Error::InvalidArgument(format!(
            "{:?} and {other:?} hash to different Redis Cluster slots; a transaction's keys (and a guard's lock) must share one: give them one {{tag}}",
            keys[0]
        ))),
    }
}

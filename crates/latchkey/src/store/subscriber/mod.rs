//! One pub/sub connection per store, shared by every waiter of the process.
//!
//! Waiters register a [`Watch`] on their lock's channel under their waiter id (the
//! SHA-1 of their owner token). A background task owns the subscriber connection:
//! it subscribes to a channel while anyone watches it, routes each message to the
//! one waiter it names, and after a lost connection reconnects, resubscribes and
//! wakes every waiter so each re-checks the lock (messages sent meanwhile are lost).
//!
//! Every step on that connection has a time limit, and a heartbeat PING finds a
//! connection that stalled without closing: it is then replaced. Until a watch is
//! confirmed again, [`Watch::is_live`] says so and waiters re-check on short timers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::target::Target;
use super::watch::{Subscription, Wakeup};
use super::{Handed, RESPONSE_TIMEOUT, Watch};
use crate::error::{Error, Result};

mod node;
mod sharded;

/// Pause before reconnecting a lost subscriber connection; it doubles while
/// reconnecting fails, up to the cap, so a path that fails at once is not hammered.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
const RECONNECT_PAUSE_CAP: Duration = Duration::from_secs(2);
/// How often the subscriber checks with a PING that its connection still answers.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// The message that wakes every waiter of a channel (`scripts/quorum/release.lua`).
const EVERY_WAITER: &str = "*";
/// How often a refused subscription is logged at most.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Registration {
    shared: Weak<Shared>,
    channel: String,
    waiter: String,
}

impl Subscription for Registration {
    fn is_live(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|shared| shared.is_confirmed(&self.channel))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.unregister(&self.channel, &self.waiter);
        }
    }
}

/// The subscriber of one store; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    node: Arc<str>,
    channels: Mutex<HashMap<String, Channel>>,
    commands: mpsc::UnboundedSender<Command>,
    // Taken by the task when it starts (on the first watch, inside a runtime).
    pending: Mutex<Option<(Source, mpsc::UnboundedReceiver<Command>)>>,
    started: OnceLock<()>,
    /// When a refused subscription was last logged (retries must not flood the log).
    last_refusal_logged: Mutex<Option<std::time::Instant>>,
}

/// Where releases publish wake-ups, and so what to subscribe to.
#[derive(Debug)]
// Made once per store and moved into its task: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Source {
    /// One server (or the primary Sentinel names at each reconnect): `SUBSCRIBE`
    /// on a pub/sub connection.
    Node(Target),
    /// A cluster: `SSUBSCRIBE`, to the shard that owns each lock's channel; the
    /// client (RESP3) delivers messages to the receiver.
    Cluster(
        redis::cluster::ClusterClient,
        mpsc::UnboundedReceiver<redis::PushInfo>,
    ),
}

/// The local waiters of one channel, and whether the server confirmed our
/// subscription since the connection last came up.
#[derive(Debug, Default)]
struct Channel {
    waiters: HashMap<String, Arc<Wakeup>>,
    confirmed: bool,
}

#[derive(Debug)]
enum Command {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

impl Subscriber {
    pub(crate) fn new(source: Source, node: Arc<str>) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        Subscriber {
            shared: Arc::new(Shared {
                node,
                channels: Mutex::default(),
                commands,
                pending: Mutex::new(Some((source, receiver))),
                started: OnceLock::new(),
                last_refusal_logged: Mutex::default(),
            }),
        }
    }

    /// Registers `waiter` on `channel` and waits, at most [`RESPONSE_TIMEOUT`], until
    /// the server confirmed the subscription.
    pub(crate) async fn watch(&self, channel: &str, waiter: String) -> Result<Watch> {
        self.start();
        let watch = self.register(channel, waiter);
        // SUBSCRIBE is idempotent, and its confirmation is what makes the watch safe.
        let (ack, confirmed) = oneshot::channel();
        let subscribe = Command::Subscribe(channel.to_owned(), ack);
        let _ = self.shared.commands.send(subscribe);
        // The subscriber task marks the channel confirmed before it acknowledges (never
        // this waiter afterwards: the connection may have been lost in between).
        match tokio::time::timeout(RESPONSE_TIMEOUT, confirmed).await {
            Ok(Ok(())) => {}
            // The subscriber connection is down or stalled. The watch still works once
            // it is back (it resubscribes and wakes everyone); until then the waiter
            // sees `is_live() == false` and re-checks on its timer.
            _ => {
                tracing::debug!(node = %self.shared.node, channel, "subscription not confirmed; waiting on the timer")
            }
        }
        Ok(watch)
    }

    /// Registers `waiter` without a round trip if this process already holds a
    /// confirmed subscription to `channel` (other local waiters keep it open).
    pub(crate) fn join(&self, channel: &str, waiter: impl FnOnce() -> String) -> Option<Watch> {
        // Checked and registered under one lock: the last waiter cannot leave between.
        let mut channels = self.shared.lock_channels();
        let entry = channels.get_mut(channel).filter(|c| c.confirmed)?;
        Some(self.register_in(entry, channel, waiter()))
    }

    fn register(&self, channel: &str, waiter: String) -> Watch {
        let mut channels = self.shared.lock_channels();
        let entry = channels.entry(channel.to_owned()).or_default();
        self.register_in(entry, channel, waiter)
    }

    fn register_in(&self, entry: &mut Channel, channel: &str, waiter: String) -> Watch {
        let wakeup = Arc::new(Wakeup::default());
        entry.waiters.insert(waiter.clone(), wakeup.clone());
        let registration = Registration {
            shared: Arc::downgrade(&self.shared),
            channel: channel.to_owned(),
            waiter,
        };
        Watch::subscribed(wakeup, registration)
    }

    fn start(&self) {
        self.shared.started.get_or_init(|| {
            let pending = self.shared.pending.lock().ok().and_then(|mut p| p.take());
            let shared = Arc::downgrade(&self.shared);
            match pending {
                Some((Source::Node(target), commands)) => {
                    tokio::spawn(node::run(target, shared, commands));
                }
                Some((Source::Cluster(client, pushes), commands)) => {
                    tokio::spawn(sharded::run(client, pushes, shared, commands));
                }
                None => {}
            }
        });
    }
}

type Channels = HashMap<String, Channel>;

impl Shared {
    fn lock_channels(&self) -> std::sync::MutexGuard<'_, Channels> {
        // A panic elsewhere while holding the lock leaves plain data; keep using it.
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unregister(&self, channel: &str, waiter: &str) {
        let mut channels = self.lock_channels();
        let Some(entry) = channels.get_mut(channel) else {
            return;
        };
        entry.waiters.remove(waiter);
        if entry.waiters.is_empty() {
            channels.remove(channel);
            let _ = self.commands.send(Command::Unsubscribe(channel.to_owned()));
        }
    }

    /// Whether any local waiter watches `channel` (an UNSUBSCRIBE queued before a
    /// waiter came back to it must not run).
    fn is_watched(&self, channel: &str) -> bool {
        self.lock_channels().contains_key(channel)
    }

    fn is_confirmed(&self, channel: &str) -> bool {
        self.lock_channels()
            .get(channel)
            .is_some_and(|c| c.confirmed)
    }

    fn set_confirmed(&self, channel: &str) {
        if let Some(entry) = self.lock_channels().get_mut(channel) {
            entry.confirmed = true;
        }
    }

    /// Marks `channel` unconfirmed and wakes its waiters to re-check. `None` when
    /// nobody watches it, else whether it was confirmed.
    fn unconfirm(&self, channel: &str) -> Option<bool> {
        let mut channels = self.lock_channels();
        let entry = channels.get_mut(channel)?;
        let was_confirmed = std::mem::replace(&mut entry.confirmed, false);
        entry.waiters.values().for_each(|w| w.wake(None));
        Some(was_confirmed)
    }

    /// Channels someone watches whose subscription is not confirmed.
    fn unconfirmed(&self) -> Vec<String> {
        self.lock_channels()
            .iter()
            .filter(|(_, c)| !c.confirmed)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Marks every channel unconfirmed (the connection is new or gone, or each is
    /// subscribed again) and lists them.
    fn unconfirm_all(&self) -> Vec<String> {
        let mut channels = self.lock_channels();
        channels.values_mut().for_each(|c| c.confirmed = false);
        channels.keys().cloned().collect()
    }

    /// Marks every channel unconfirmed and wakes every waiter to re-check: a
    /// message may have been lost (a connection dropped, a subscription that may
    /// have gone unseen). Lists the channels.
    fn recheck_all(&self) -> Vec<String> {
        let channels = self.unconfirm_all();
        self.wake_all();
        channels
    }

    /// Wakes the waiter a release named in `message`: `id:fence:waiter_lease_end`
    /// (or `id:c<clock µs>:waiter_lease_end`, handed over without a fencing token)
    /// from a release that granted it the lock; anything else only wakes it to
    /// re-check. `*` wakes every waiter of the channel.
    fn wake(&self, channel: &str, message: &str) {
        let mut parts = message.split(':');
        let waiter = parts.next().unwrap_or_default();
        let handed = handed_in(parts.next(), parts.next());
        let channels = self.lock_channels();
        let Some(entry) = channels.get(channel) else {
            return;
        };
        // A quorum's release hands the lock to nobody: every waiter re-checks.
        if waiter == EVERY_WAITER {
            entry.waiters.values().for_each(|w| w.wake(None));
            return;
        }
        if let Some(wakeup) = entry.waiters.get(waiter) {
            wakeup.wake(handed);
        }
    }

    fn wake_all(&self) {
        for channel in self.lock_channels().values() {
            channel.waiters.values().for_each(|w| w.wake(None));
        }
    }
}

/// What a wake-up says was handed over, from its `fence` and `waiter_lease_end`
/// parts: a fencing token, or `c` and the server clock (µs) for a lock handed over
/// without one. `None` (a bare wake-up) for anything else.
fn handed_in(fence: Option<&str>, waiter_lease_end: Option<&str>) -> Option<Handed> {
    let waiter_lease_end = waiter_lease_end?.parse().ok()?;
    let fence = fence?;
    let (number, handed): (_, fn(u64, u64) -> Handed) = match fence.strip_prefix('c') {
        Some(clock) => (clock, Handed::unfenced),
        None => (fence, Handed::new),
    };
    let number = number.parse::<u64>().ok().filter(|n| *n > 0)?;
    Some(handed(number, waiter_lease_end))
}

/// Connects with `attempt` until it succeeds or the store is gone, pausing between
/// tries (100 ms, doubling up to 2 s) so a path that fails at once is not hammered;
/// then wakes every waiter to re-check, since anything published meanwhile is lost.
async fn connect_with<T, F, Fut>(shared: &Weak<Shared>, mut attempt: F) -> Option<T>
where
    F: FnMut(Arc<Shared>) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    let mut pause = RECONNECT_PAUSE;
    loop {
        let strong = shared.upgrade()?;
        match attempt(strong.clone()).await {
            Ok(connected) => {
                strong.wake_all();
                return Some(connected);
            }
            Err(error) => {
                let error = Error::from_redis(error, &strong.node, "");
                tracing::warn!(%error, "cannot open the subscriber connection; retrying");
            }
        }
        drop(strong);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RECONNECT_PAUSE_CAP);
    }
}

/// After a subscriber connection was lost: every waiter re-checks (and is not live
/// until subscribed again), and a pause before reconnecting. False when the store
/// is gone.
async fn after_loss(shared: &Weak<Shared>) -> bool {
    let Some(strong) = shared.upgrade() else {
        return false;
    };
    tracing::warn!(node = %strong.node, "subscriber connection lost; reconnecting");
    strong.recheck_all();
    drop(strong);
    tokio::time::sleep(RECONNECT_PAUSE).await;
    true
}

/// A refused (UN)SUBSCRIBE: say why, at most once a minute (the cluster subscriber
/// retries every second); waiters fall back to their timers, so waiting still works,
/// only slower.
fn refused(shared: &Shared, error: &redis::RedisError) {
    let now = std::time::Instant::now();
    {
        let mut last = shared
            .last_refusal_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| now.duration_since(at) < REFUSAL_LOG_EVERY) {
            return;
        }
        *last = Some(now);
    }
    let error = Error::from_redis(error.clone(), &shared.node, "");
    let hint = match &error {
        Error::AclDenied { .. } => " (grant the ACL user the `&` channel pattern)",
        _ => "",
    };
    tracing::warn!(%error, "Redis refused a subscription; waiters re-check on their timers instead{hint}");
}

/// `step`, failed with a timeout error if it takes longer than `limit`.
async fn within<T>(
    limit: Duration,
    step: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply in time").into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_says_a_token_a_clock_or_nothing_was_handed_over() {
        assert_eq!(handed_in(Some("12"), Some("9")), Some(Handed::new(12, 9)));
        assert_eq!(
            handed_in(Some("c1700"), Some("9")),
            Some(Handed::unfenced(1700, 9))
        );
        for (fence, end) in [("0", "9"), ("c0", "9"), ("x", "9"), ("c", "9"), ("12", "")] {
            assert_eq!(handed_in(Some(fence), Some(end)), None, "{fence}:{end}");
        }
        assert_eq!(handed_in(None, None), None);
    }
}

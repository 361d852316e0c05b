//! The subscriber connection to a cluster: `SSUBSCRIBE`, for the `SPUBLISH` of
//! releases, so a release's wake-up travels only within the shard that owns its
//! lock (a classic `PUBLISH` is broadcast to every node of the cluster).
//!
//! redis-rs's cluster connection sends each `SSUBSCRIBE` to the node that owns the
//! channel's slot and delivers messages, and the confirmations of subscriptions, as
//! RESP3 pushes; it resubscribes by itself after a node's connection drops. So a
//! channel counts as confirmed only when its confirmation push arrives,
//! in order with the pushes that say a connection dropped (which unconfirm every
//! channel and wake every waiter to re-check). Subscribing never blocks the task:
//! messages keep flowing while a subscription is on its way, and the heartbeat
//! sends again what was not confirmed. A node that gives up a slot says
//! `sunsubscribe`: its waiters re-check and the channel is subscribed again,
//! wherever its slot lives now. A heartbeat that fails three times in a row (a
//! stalled node, a slot map gone stale) makes the task build a new connection.
//!
//! redis-rs may also replace a node's connection without a push: repairing its slot
//! map after a failover, it replaces every node connection whose PING check fails,
//! a healthy but slow one included, and a subscription confirmed on the old
//! connection may be gone with it. So after the cluster's shape changed (a dropped
//! connection, a slot given up), the task subscribes every watched channel again
//! and wakes every waiter to re-check, a few times as the cluster settles
//! ([`Resync`]).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot};

use super::{Command, HEARTBEAT, Shared, after_loss, connect_with, refused, within};
use crate::error::connection_failed;
use crate::store::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};

/// Heartbeats that may fail in a row before the connection is built anew.
const HEARTBEAT_FAILURES: u32 = 3;

/// Waiters waiting for a channel's subscription to be confirmed.
type Pending = HashMap<String, Vec<oneshot::Sender<()>>>;

/// The first resubscription after the cluster's shape changed; each next one comes
/// twice as long after the one before, the last this long after it (at 2, 6, 14
/// and 30 s after the change).
const RESYNC_FIRST: Duration = Duration::from_secs(2);
const RESYNC_LAST: Duration = Duration::from_secs(16);

/// When to subscribe every watched channel again: a few times after the last push
/// that said the cluster's shape changed, while redis-rs may still be repairing
/// its connections, and never in a quiet cluster.
#[derive(Debug, Default)]
struct Resync {
    /// The next resubscription and the pause that led to it.
    next: Option<(Instant, Duration)>,
}

impl Resync {
    /// The cluster's shape changed at `now`: start over.
    fn restart(&mut self, now: Instant) {
        self.next = Some((now + RESYNC_FIRST, RESYNC_FIRST));
    }

    /// Whether a resubscription is due at `now`; if so, schedules the next one.
    fn due(&mut self, now: Instant) -> bool {
        let Some((at, pause)) = self.next else {
            return false;
        };
        if now < at {
            return false;
        }
        let pause = pause * 2;
        self.next = (pause <= RESYNC_LAST).then(|| (now + pause, pause));
        true
    }
}

/// The subscriber task of a cluster store: runs until every clone of the store is
/// gone. `client` was built with RESP3 and `pushes` as its push sender.
pub(super) async fn run(
    client: ClusterClient,
    mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    shared: Weak<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut pending = Pending::new();
    loop {
        let Some(conn) = connect(&client, &shared).await else {
            return;
        };
        let mut task = Task {
            shared: &shared,
            conn,
            pending: &mut pending,
            resync: Resync::default(),
        };
        if !task.serve(&mut pushes, &mut commands).await || !after_loss(&shared).await {
            return;
        }
    }
}

/// Connects to the cluster (reading its slot map) and subscribes every channel
/// still watched.
async fn connect(client: &ClusterClient, shared: &Weak<Shared>) -> Option<ClusterConnection> {
    connect_with(shared, |strong| async move {
        let conn = within(CONNECT_TIMEOUT * 2, client.get_async_connection()).await?;
        for channel in strong.unconfirm_all() {
            subscribe(shared, &conn, channel);
        }
        Ok(conn)
    })
    .await
}

/// Sends `SSUBSCRIBE channel` without waiting for it: the confirmation comes back as
/// a push.
fn subscribe(shared: &Weak<Shared>, conn: &ClusterConnection, channel: String) {
    let (shared, mut conn) = (shared.clone(), conn.clone());
    tokio::spawn(async move {
        let Err(error) = within(RESPONSE_TIMEOUT, conn.ssubscribe(&channel)).await else {
            return;
        };
        // A lost or slow connection: the heartbeat sends it again. A refusal: say why.
        if !connection_failed(&error) {
            if let Some(shared) = shared.upgrade() {
                refused(&shared, &error);
            }
        }
    });
}

/// Sends `SUNSUBSCRIBE channel` without waiting, unless a local waiter watches it.
fn unsubscribe(shared: &Shared, conn: &ClusterConnection, channel: String) {
    if shared.is_watched(&channel) {
        return;
    }
    let mut conn = conn.clone();
    tokio::spawn(async move {
        let _ = within(RESPONSE_TIMEOUT, conn.sunsubscribe(&channel)).await;
    });
}

/// One connection's life: routes pushes and commands until it stalls (`true`) or
/// the store is gone (`false`).
struct Task<'a> {
    shared: &'a Weak<Shared>,
    conn: ClusterConnection,
    pending: &'a mut Pending,
    resync: Resync,
}

impl Task<'_> {
    async fn serve(
        &mut self,
        pushes: &mut mpsc::UnboundedReceiver<PushInfo>,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> bool {
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = 0;
        loop {
            tokio::select! {
                _ = heartbeat.tick() => {
                    let ping = redis::cmd("PING");
                    match within(RESPONSE_TIMEOUT, ping.query_async::<Value>(&mut self.conn)).await {
                        Err(error) if connection_failed(&error) => failures += 1,
                        _ => failures = 0,
                    }
                    if failures >= HEARTBEAT_FAILURES {
                        return true;
                    }
                    let Some(strong) = self.shared.upgrade() else { return false };
                    self.retry_unconfirmed(&strong);
                    if self.resync.due(Instant::now()) {
                        self.resubscribe_all(&strong);
                    }
                }
                push = pushes.recv() => {
                    // The push sender lives as long as the client: never closed here.
                    let Some(push) = push else { return true };
                    let Some(strong) = self.shared.upgrade() else { return false };
                    self.on_push(&strong, push);
                }
                command = commands.recv() => {
                    let Some(command) = command else { return false };
                    let Some(strong) = self.shared.upgrade() else { return false };
                    self.on_command(&strong, command);
                }
            }
        }
    }

    /// Sends again the subscriptions not confirmed yet, and forgets waiters that
    /// stopped waiting for a confirmation.
    fn retry_unconfirmed(&mut self, shared: &Arc<Shared>) {
        for channel in shared.unconfirmed() {
            subscribe(self.shared, &self.conn, channel);
        }
        self.pending.retain(|_, acks| {
            acks.retain(|ack| !ack.is_closed());
            !acks.is_empty()
        });
    }

    /// Subscribes every watched channel again (a subscription may have been lost
    /// without a push) and wakes every waiter to re-check (a message may have been
    /// lost with it). Unconfirmed until the server confirms again, so a waiter that
    /// re-checks before then keeps re-checking on its short timer, and a release
    /// published in between is not missed (unless the confirmation of an earlier
    /// SSUBSCRIBE, still on its way, confirms the channel first: then the waiter's
    /// own re-check bounds it, as before).
    fn resubscribe_all(&self, shared: &Arc<Shared>) {
        for channel in shared.recheck_all() {
            subscribe(self.shared, &self.conn, channel);
        }
    }

    fn on_command(&mut self, shared: &Arc<Shared>, command: Command) {
        match command {
            Command::Subscribe(channel, ack) => {
                if shared.is_confirmed(&channel) {
                    let _ = ack.send(());
                    return;
                }
                self.pending.entry(channel.clone()).or_default().push(ack);
                subscribe(self.shared, &self.conn, channel);
            }
            Command::Unsubscribe(channel) => unsubscribe(shared, &self.conn, channel),
        }
    }

    fn on_push(&mut self, shared: &Arc<Shared>, push: PushInfo) {
        let text = |n: usize| match push.data.get(n) {
            Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        };
        match push.kind {
            PushKind::SMessage => {
                shared.wake(&text(0), &text(1));
                // A subscription nobody watches (an SSUBSCRIBE that overtook its
                // SUNSUBSCRIBE): drop it, or redis-rs keeps renewing it.
                unsubscribe(shared, &self.conn, text(0));
            }
            PushKind::SSubscribe => {
                let channel = text(0);
                unsubscribe(shared, &self.conn, channel.clone());
                shared.set_confirmed(&channel);
                for ack in self.pending.remove(&channel).unwrap_or_default() {
                    let _ = ack.send(());
                }
            }
            // A node's connection dropped: messages may have been lost. redis-rs
            // subscribes again; the confirmations (or the heartbeat) follow.
            PushKind::Disconnection => {
                shared.recheck_all();
                self.resync.restart(Instant::now());
            }
            // The node gave the slot up (failover, resharding): follow it, if watched.
            // Our own SUNSUBSCRIBE confirmed says nothing about the cluster: the
            // channel is unwatched then, or watched again and not yet confirmed.
            PushKind::SUnsubscribe => {
                let channel = text(0);
                let Some(was_confirmed) = shared.unconfirm(&channel) else {
                    return;
                };
                subscribe(self.shared, &self.conn, channel);
                if was_confirmed {
                    self.resync.restart(Instant::now());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resubscriptions_follow_a_change_a_few_times_then_stop() {
        let mut resync = Resync::default();
        let start = Instant::now();
        assert!(
            !resync.due(start + Duration::from_secs(60)),
            "none before a change"
        );
        resync.restart(start);
        let due: Vec<u64> = (0..=60)
            .filter(|s| resync.due(start + Duration::from_secs(*s)))
            .collect();
        assert_eq!(due, [2, 6, 14, 30]);
        // A new change starts over.
        resync.restart(start + Duration::from_secs(61));
        assert!(resync.due(start + Duration::from_secs(63)));
    }
}

//! The subscriber connection to a cluster: `SSUBSCRIBE`, for the `SPUBLISH` of
//! releases, so a release's wake-up travels only within the shard that owns its
//! lock (a classic `PUBLISH` is broadcast to every node of the cluster).
//!
//! redis-rs's cluster connection sends each `SSUBSCRIBE` to the node that owns the
//! channel's slot and delivers messages as RESP3 pushes. It says when a node's
//! connection dropped; a node that gives up a slot (failover, resharding) says
//! `sunsubscribe`. Either way the waiters concerned re-check the lock and the
//! channel is subscribed again, wherever its slot lives now.

use std::sync::Weak;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::{Command, HEARTBEAT, RECONNECT_PAUSE, RECONNECT_PAUSE_CAP, Shared, refused, within};
use crate::error::{Error, connection_failed};
use crate::store::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};

/// The subscriber task of a cluster store: runs until every clone of the store is
/// gone. `client` was built with RESP3 and `pushes` as its push sender.
pub(super) async fn run(
    client: ClusterClient,
    pushes: mpsc::UnboundedReceiver<PushInfo>,
    shared: Weak<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut pushes = pushes;
    loop {
        let Some(mut conn) = connect(&client, &shared).await else {
            return;
        };
        if !serve(&shared, &mut conn, &mut pushes, &mut commands).await {
            return;
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        tracing::warn!(node = %strong.node, "cluster subscriber connection lost; reconnecting");
        strong.unconfirm_all();
        strong.wake_all();
        drop(strong);
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// Connects to the cluster and subscribes every channel still watched.
async fn connect(client: &ClusterClient, shared: &Weak<Shared>) -> Option<ClusterConnection> {
    let mut pause = RECONNECT_PAUSE;
    loop {
        let strong = shared.upgrade()?;
        match within(CONNECT_TIMEOUT, client.get_async_connection()).await {
            Ok(mut conn) => {
                for channel in strong.unconfirm_all() {
                    subscribe(&strong, &mut conn, &channel).await;
                }
                // Anything published while we were away is lost: let everyone re-check.
                strong.wake_all();
                return Some(conn);
            }
            Err(error) => {
                let error = Error::from_redis(error, &strong.node, "");
                tracing::warn!(%error, "cannot open the cluster subscriber connection; retrying");
            }
        }
        drop(strong);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RECONNECT_PAUSE_CAP);
    }
}

/// `SSUBSCRIBE channel`; true once the owning node confirmed it.
async fn subscribe(shared: &Shared, conn: &mut ClusterConnection, channel: &str) -> bool {
    match within(RESPONSE_TIMEOUT, conn.ssubscribe(channel)).await {
        Ok(()) => {
            shared.set_confirmed(channel);
            true
        }
        Err(error) => {
            if !connection_failed(&error) {
                refused(shared, &error);
            }
            false
        }
    }
}

/// Routes pushes and (un)subscribes until the connection stalls (`true`) or the
/// store is gone (`false`).
async fn serve(
    shared: &Weak<Shared>,
    conn: &mut ClusterConnection,
    pushes: &mut mpsc::UnboundedReceiver<PushInfo>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> bool {
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                let ping = redis::cmd("PING");
                if let Err(error) = within(RESPONSE_TIMEOUT, ping.query_async::<Value>(conn)).await {
                    if connection_failed(&error) {
                        return true;
                    }
                }
            }
            push = pushes.recv() => {
                let Some(push) = push else { return true };
                let Some(strong) = shared.upgrade() else { return false };
                on_push(&strong, conn, push).await;
            }
            command = commands.recv() => {
                let Some(command) = command else { return false };
                let Some(strong) = shared.upgrade() else { return false };
                match command {
                    Command::Subscribe(channel, ack) => {
                        if subscribe(&strong, conn, &channel).await {
                            let _ = ack.send(());
                        }
                    }
                    Command::Unsubscribe(channel) => {
                        let _ = within(RESPONSE_TIMEOUT, conn.sunsubscribe(&channel)).await;
                    }
                }
            }
        }
    }
}

async fn on_push(shared: &Shared, conn: &mut ClusterConnection, push: PushInfo) {
    let text = |n: usize| match push.data.get(n) {
        Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    match push.kind {
        PushKind::SMessage => shared.wake(&text(0), &text(1)),
        // A node's connection dropped: its channels' messages may be lost.
        PushKind::Disconnection => {
            for channel in shared.unconfirm_all() {
                subscribe(shared, conn, &channel).await;
            }
            shared.wake_all();
        }
        // The node gave the slot up (failover, resharding): follow it, if watched.
        PushKind::SUnsubscribe => {
            let channel = text(0);
            if shared.unconfirm(&channel) {
                subscribe(shared, conn, &channel).await;
            }
        }
        _ => {}
    }
}

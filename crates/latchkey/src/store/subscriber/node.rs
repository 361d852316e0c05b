//! The subscriber connection to one server: `SUBSCRIBE`, for the `PUBLISH` of a
//! single node's releases.

use std::sync::Weak;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::mpsc;

use super::{Command, HEARTBEAT, Shared, after_loss, connect_with, refused, within};
use crate::error::connection_failed;
use crate::store::target::Target;
use crate::store::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};

/// The subscriber task: runs until every clone of the store is gone.
pub(super) async fn run(
    target: Target,
    shared: Weak<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    loop {
        let Some((mut sink, mut stream, address)) = connect(&target, &shared).await else {
            return;
        };
        let moved = moved_away(&target, address);
        if !serve(&shared, (&mut sink, &mut stream), &mut commands, moved).await
            || !after_loss(&shared).await
        {
            return;
        }
    }
}

/// Behind Sentinel, resolves once the Sentinels name another primary than the one
/// at `address` (asked every [`HEARTBEAT`]): a failover leaves the old primary up,
/// taking subscriptions but hearing none of the new primary's releases, so the
/// subscriber must move as the command connection does. Never, for other targets.
async fn moved_away(target: &Target, address: String) {
    if !target.follows_failover() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        if target
            .primary_now()
            .await
            .is_some_and(|primary| primary != address)
        {
            tracing::debug!(old = %address, "the Sentinels name another primary: the subscriber moves");
            return;
        }
    }
}

/// Opens the subscriber connection and resubscribes every channel still watched;
/// with the address connected to.
async fn connect(
    target: &Target,
    shared: &Weak<Shared>,
) -> Option<(PubSubSink, PubSubStream, String)> {
    connect_with(shared, |strong| async move {
        let client = target.client().await?;
        let address = client.get_connection_info().addr().to_string();
        let pubsub = within(CONNECT_TIMEOUT, client.get_async_pubsub()).await?;
        let (mut sink, stream) = pubsub.split();
        let wanted = strong.unconfirm_all();
        if !wanted.is_empty() {
            match within(RESPONSE_TIMEOUT, sink.subscribe(&wanted)).await {
                Ok(()) => wanted.iter().for_each(|c| strong.set_confirmed(c)),
                Err(error) if connection_failed(&error) => return Err(error),
                // Refused (an ACL without the channels): waiters use their timers.
                Err(error) => refused(&strong, &error),
            }
        }
        Ok((sink, stream, address))
    })
    .await
}

/// Routes messages and (un)subscribes until the connection drops or stalls, or
/// the primary `moved` (`true`), or the store is gone (`false`).
async fn serve(
    shared: &Weak<Shared>,
    (sink, stream): (&mut PubSubSink, &mut PubSubStream),
    commands: &mut mpsc::UnboundedReceiver<Command>,
    moved: impl Future<Output = ()>,
) -> bool {
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut moved = std::pin::pin!(moved);
    loop {
        tokio::select! {
            () = &mut moved => return true,
            _ = heartbeat.tick() => {
                // A connection that stalled without closing never ends the stream.
                if let Err(error) = within(RESPONSE_TIMEOUT, sink.ping::<redis::Value>()).await {
                    if connection_failed(&error) {
                        return true;
                    }
                }
            }
            message = stream.next() => {
                let Some(message) = message else { return true };
                let Some(strong) = shared.upgrade() else { return false };
                let payload = String::from_utf8_lossy(message.get_payload_bytes());
                strong.wake(message.get_channel_name(), &payload);
            }
            command = commands.recv() => {
                let Some(command) = command else { return false };
                let sent = match command {
                    Command::Subscribe(channel, ack) => within(RESPONSE_TIMEOUT, sink.subscribe(&channel)).await.map(|()| {
                        // Confirmed here, in order with the connection's losses.
                        if let Some(strong) = shared.upgrade() {
                            strong.set_confirmed(&channel);
                        }
                        let _ = ack.send(());
                    }),
                    // Watched again since it was queued: keep the subscription.
                    Command::Unsubscribe(channel) if shared.upgrade().is_some_and(|s| s.is_watched(&channel)) => Ok(()),
                    Command::Unsubscribe(channel) => within(RESPONSE_TIMEOUT, sink.unsubscribe(&channel)).await,
                };
                match sent {
                    Ok(()) => {}
                    Err(error) if connection_failed(&error) => return true,
                    Err(error) => {
                        let Some(strong) = shared.upgrade() else { return false };
                        refused(&strong, &error);
                    }
                }
            }
        }
    }
}

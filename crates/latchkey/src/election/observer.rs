//! Following an election's leader without polling.

use std::time::Duration;

use futures_util::stream::{self, Stream};

use super::ElectionStatus;
use super::Leader;
use super::record::Record;
use crate::error::Result;
use crate::store::WakeUps;
use crate::token::OwnerToken;

/// Read a moment after a leader's lease would end, not on the millisecond.
const PAST_THE_LEASE: Duration = Duration::from_millis(5);

/// Follows an election's leader, from [`Election::observe`](super::Election::observe).
///
/// It listens on the election's channel (one subscriber connection per client,
/// shared with the lock's waiters) and reads the record when told of a change,
/// when the leader's lease would end (a leader that crashed publishes nothing), and
/// at least every 10 s (every second while the subscription is down).
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let mut observer = client.election("scheduler")?.observe()?;
/// let now = observer.changed().await?;
/// println!("leader now: {now:?}");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Observer {
    record: Record,
    /// Whom the subscription wakes; observers are woken by the broadcast `*`.
    me: OwnerToken,
    /// The leader last returned; `None` before the first call.
    seen: Option<Option<Leader>>,
}

impl Observer {
    pub(super) fn new(record: Record, me: OwnerToken) -> Self {
        Observer {
            record,
            me,
            seen: None,
        }
    }

    /// The leader once it differs from the one last returned: a new leader, or
    /// `None` when nobody leads. The first call returns the current leader at once.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry ([`Error::Unreachable`](crate::Error::Unreachable)
    /// …); call again to go on observing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change not returned yet is returned by the next call.
    ///
    /// ```no_run
    /// # async fn demo(mut observer: latchkey::election::Observer) -> latchkey::Result<()> {
    /// while let Some(leader) = observer.changed().await? {
    ///     println!("{leader} leads");
    /// }
    /// println!("the leader is gone");
    /// # Ok(()) }
    /// ```
    pub async fn changed(&mut self) -> Result<Option<Leader>> {
        loop {
            // Listening before reading: a change after the read wakes the wait.
            let watch = self
                .record
                .store()
                .watch(self.record.key(), &self.me)
                .await?;
            let reading = self.record.read().await?;
            if self.seen.as_ref() != Some(&reading.leader) {
                self.seen = Some(reading.leader.clone());
                return Ok(reading.leader);
            }
            let recheck = recheck_after(&reading, watch.recheck_within());
            tokio::select! {
                _ = watch.notified() => {}
                _ = tokio::time::sleep(recheck) => {}
            }
        }
    }

    /// The changes as a stream (see [`changed`](Self::changed)); it never ends.
    ///
    /// ```no_run
    /// # async fn demo(observer: latchkey::election::Observer) -> latchkey::Result<()> {
    /// use futures_util::StreamExt;
    /// let mut changes = std::pin::pin!(observer.into_stream());
    /// while let Some(change) = changes.next().await {
    ///     println!("{:?}", change?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_stream(self) -> impl Stream<Item = Result<Option<Leader>>> + Send {
        stream::unfold(self, |mut observer| async move {
            let change = observer.changed().await;
            Some((change, observer))
        })
    }
}

/// When to read again without being told: when the leader's lease would end, and
/// at most `bound` from now (see [`Watch::recheck_within`](crate::store::Watch)).
fn recheck_after(reading: &ElectionStatus, bound: Duration) -> Duration {
    reading
        .lease_left
        .map_or(bound, |left| (left + PAST_THE_LEASE).min(bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observer_reads_again_when_the_lease_would_end_and_within_its_bounds() {
        // A subscribed watch's bound, and an unsubscribed one's.
        let (subscribed, unsubscribed) = (Duration::from_secs(10), Duration::from_secs(1));
        let reading = |ms| ElectionStatus {
            lease_left: Some(Duration::from_millis(ms)),
            ..ElectionStatus::default()
        };
        assert_eq!(
            recheck_after(&reading(300), subscribed),
            Duration::from_millis(305)
        );
        assert_eq!(recheck_after(&reading(30_000), subscribed), subscribed);
        assert_eq!(recheck_after(&reading(30_000), unsubscribed), unsubscribed);
        let free = ElectionStatus::default();
        assert_eq!(recheck_after(&free, subscribed), subscribed);
    }
}

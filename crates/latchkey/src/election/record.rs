//! The leader record beside an election's lock: who leads, written by the lock's
//! holder, read by everyone (`scripts/election/`).

use std::time::Duration;

use crate::election::{ElectionStatus, Leader};
use crate::error::Result;
use crate::key::LockKey;
use crate::scripts::{self, ScriptCall};
use crate::store::RedisStore;
use crate::token::OwnerToken;

/// The record of one election, and the store it lives in.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    store: RedisStore,
    /// The election's lock.
    lock: LockKey,
    /// The record's own key, in the lock's hash slot, with the channel observers
    /// listen on (apart from the lock's, so a change wakes no waiting candidate).
    record: LockKey,
}

impl Record {
    pub(crate) fn new(store: RedisStore, lock: LockKey) -> Self {
        let record = lock.companion_key(super::LEADER_RECORD);
        Record {
            store,
            lock,
            record,
        }
    }

    pub(crate) fn lock(&self) -> &LockKey {
        &self.lock
    }

    /// The record's key: [`WakeUps::watch`](crate::store::WakeUps::watch) it to
    /// hear of changes.
    pub(crate) fn key(&self) -> &LockKey {
        &self.record
    }

    pub(crate) fn store(&self) -> &RedisStore {
        &self.store
    }

    /// Writes `leader` as the holder `owner`'s record, kept for `lifetime`, and
    /// tells observers; or renews it if it stands. `false` when the lock is no
    /// longer `owner`'s.
    pub(crate) async fn proclaim(
        &self,
        owner: &OwnerToken,
        leader: &Leader,
        lifetime: Duration,
    ) -> Result<bool> {
        let mut call = ScriptCall::new(
            &scripts::ELECTION_PROCLAIM,
            &[
                self.lock.as_str(),
                self.record.as_str(),
                self.record.channel(),
            ],
        );
        call.arg(owner.as_str())
            .arg(leader.term)
            .arg(&leader.value)
            .arg(millis(lifetime))
            .arg(self.store.publish_mode());
        let proclaimed: u8 = self.store.run(&call, &self.lock).await?;
        Ok(proclaimed != 0)
    }

    /// Deletes `owner`'s record (a successor's stays) and tells observers.
    pub(crate) async fn withdraw(&self, owner: &OwnerToken) -> Result<bool> {
        let mut call = ScriptCall::new(
            &scripts::ELECTION_RESIGN,
            &[self.record.as_str(), self.record.channel()],
        );
        call.arg(owner.as_str()).arg(self.store.publish_mode());
        let withdrawn: u8 = self.store.run(&call, &self.lock).await?;
        Ok(withdrawn == 1)
    }

    /// Who leads now, and for how long at least if it stops renewing.
    pub(crate) async fn read(&self) -> Result<ElectionStatus> {
        let call = ScriptCall::new(
            &scripts::ELECTION_LEADER,
            &[self.lock.as_str(), self.record.as_str(), self.lock.queue()],
        );
        let reply = self.store.run(&call, &self.lock).await?;
        ElectionStatus::from_reply(reply, self.lock.name())
    }
}

/// `duration` in whole milliseconds, at least 1 (PX refuses 0).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

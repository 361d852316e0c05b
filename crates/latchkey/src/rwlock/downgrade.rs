//! A writer becoming a reader without letting another writer in between.

use std::time::Instant;

use crate::Mutex;
use crate::error::{Error, Result};
use crate::lock::{MutexGuard, ReleaseOnDrop, Won};
use crate::semaphore::{MAX_PERMITS, PermitStore, SemaphorePermit};
use crate::token::OwnerToken;

/// Trades `write` for a read permit as `reader` takes one, in one script: the
/// writer's permits give way to one under a new owner token, and readers waiting
/// behind the writer come in at once.
pub(super) async fn trade(
    write: SemaphorePermit,
    reader: &Mutex<PermitStore>,
) -> Result<SemaphorePermit> {
    let writer = write.store().clone();
    if write.key() != reader.key() || writer.weight() != MAX_PERMITS {
        return Err(Error::InvalidArgument(format!(
            "downgrade takes a write guard of the read-write lock {:?}",
            reader.key().name()
        )));
    }
    let key = reader.key().clone();
    let mut held = write.into_held()?;
    let owner = OwnerToken::generate()?;
    let lease = reader.lease();
    let ttl = lease.in_redis();
    // Set up before the trade is sent: if this future is dropped after it landed,
    // the read is released (and the write's release finds nothing); before, the
    // write's is (and the read's finds nothing).
    // On the writer's store (its server), whatever handle `reader` came from.
    let read_store = writer.with_weight(1);
    let mut read = ReleaseOnDrop::held(read_store.clone(), key.clone(), owner.clone(), None, ttl);
    let sent = Instant::now();
    let traded = writer
        .downgrade(&key, &held.hold.owner, (&read_store, &owner), ttl)
        .await?;
    if !traded {
        read.detach();
        held.lease.lose();
        return Err(Error::lease_lost(&key));
    }
    // The write's permits are gone from Redis: nothing left to release.
    held.hold.detach();
    let won = Won {
        hold: read,
        // No writer came in between: the write's token still orders the read.
        fence: held.fence.get().copied(),
        valid_until: ttl.valid_until(sent),
        top_up: false,
        replicas: None,
    };
    Ok(MutexGuard::new(won, lease))
}

//! A task's place behind this process's holder of a lock, and what leaving undoes.
//!
//! The holder passes the lock to the oldest local waiter in Redis first and tells it
//! afterwards, so by the time a waiter leaves (its deadline passed, its future was
//! dropped by `select!`, a timeout or an abort) the lock may already be in Redis
//! under its token. Leaving therefore reads what it was sent: a passed lock is
//! released (or passed on to the next local waiter), and a turn to go to Redis goes
//! to the next local waiter. Nothing is left held by nobody. The user-facing account
//! is the crate docs' `# Cancel safety` section.

use tokio::sync::oneshot;

use super::local::{LocalLocks, Passed, Turn};
use super::release_on_drop::ReleaseOnDrop;
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::store::{Pass, WakeUps};
use crate::token::OwnerToken;

/// A place in the local line; see the module docs for what dropping it does.
pub(crate) struct LocalTurn<S: Pass + WakeUps> {
    /// `None` once the turn was taken or left.
    turn: Option<oneshot::Receiver<Turn>>,
    store: S,
    key: LockKey,
    owner: OwnerToken,
    local: LocalLocks,
    /// The lease this waiter asked for, which a lock passed to it has.
    ttl: Ttl,
}

impl<S: Pass + WakeUps> LocalTurn<S> {
    pub(crate) fn new(
        turn: oneshot::Receiver<Turn>,
        store: &S,
        key: &LockKey,
        owner: &OwnerToken,
        local: &LocalLocks,
        ttl: Ttl,
    ) -> Self {
        LocalTurn {
            turn: Some(turn),
            store: store.clone(),
            key: key.clone(),
            owner: owner.clone(),
            local: local.clone(),
            ttl,
        }
    }

    /// Waits for the holder's word. `None` when there will be none (the holder's
    /// process state was dropped): go to Redis. Cancel-safe.
    pub(crate) async fn told(&mut self) -> Option<Turn> {
        let turn = self.turn.as_mut()?;
        let told = turn.await.ok();
        self.turn = None;
        told
    }

    /// Leaves the line: no word can arrive after this. Returns a lock passed to us in
    /// the meantime, which the caller now holds.
    pub(crate) fn leave(&mut self) -> Option<Passed> {
        let turn = self.turn.take()?;
        self.local.leave_line(&self.key, turn)
    }

    /// The hold of a lock passed to us. `with_line`: dropped, it passes the lock on
    /// to the next local waiter or releases it, as a dropped guard's hold does.
    pub(crate) fn hold(&self, with_line: bool) -> ReleaseOnDrop<S> {
        ReleaseOnDrop::held(
            self.store.clone(),
            self.key.clone(),
            self.owner.clone(),
            with_line.then(|| self.local.clone()),
            self.ttl,
        )
    }
}

impl<S: Pass + WakeUps> Drop for LocalTurn<S> {
    fn drop(&mut self) {
        if self.leave().is_none() {
            return;
        }
        // Passed to us after all, and nobody will use it: pass it on or release it,
        // in the background (see `ReleaseOnDrop`).
        drop(self.hold(true));
    }
}

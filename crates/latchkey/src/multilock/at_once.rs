//! A multi-lock's try of several locks in one step, all or none, where their store
//! can take them so ([`LockStore::try_acquire_all`](crate::store::LockStore::try_acquire_all):
//! on Redis, locks in one hash slot, always the case on one server): one round trip
//! and one script, and never part of the set held, not even between two replies.

use std::time::Instant;

use super::{MultiLock, Taking};
use crate::error::Error;
use crate::lock::{Mutex, ReleaseOnDrop};
use crate::store::{AllOrNone, Pass, WakeUps};

/// How a one-step try ended: `None` if the store could not take these locks in one
/// step (try them one by one); else the failure to report, as the one-by-one tries
/// would (`Some(None)`: every lock is in `taking`).
pub(super) type AtOnce = Option<Option<(usize, Error)>>;

impl<S: Pass + WakeUps> MultiLock<S> {
    /// Tries the locks `which` (indexes into the set) in one step, cut off at
    /// `cut_off` (then undone in the background); the locks won go into `taking`.
    pub(super) async fn take_at_once(
        &self,
        taking: &mut Taking<S>,
        which: &[usize],
        cut_off: Option<Instant>,
    ) -> AtOnce {
        let mutexes: Vec<&Mutex<S>> = which.iter().map(|&i| &self.mutexes[i]).collect();
        let store = mutexes.first()?.store();
        // One step needs one store (one server and database, the same requests):
        // the locks of a set may live on several.
        if which.len() < 2 || mutexes.iter().any(|m| !store.is_same_store(m.store())) {
            return None;
        }
        let mut holds = Vec::with_capacity(mutexes.len());
        for mutex in &mutexes {
            match mutex.trying() {
                Ok(hold) => holds.push(hold),
                Err(error) => return Some(Some((which[0], error))),
            }
        }
        let takes: Vec<_> = mutexes
            .iter()
            .zip(&holds)
            .map(|(mutex, hold)| (mutex.key(), &hold.owner, mutex.first_try()))
            .collect();
        let sent = Instant::now();
        let step = store.try_acquire_all(&takes);
        let answer = match cut_off {
            Some(at) => match tokio::time::timeout_at(at.into(), step).await {
                Ok(answer) => answer,
                // In flight: dropping the holds undoes whatever it does.
                Err(_) => return Some(Some((which[0], self.unanswered(which[0])))),
            },
            None => step.await,
        };
        let outcome = match answer {
            Ok(outcome) => outcome,
            Err(error) => return Some(Some((which[0], undone(holds, error)))),
        };
        let Some(outcome) = outcome else {
            holds.iter_mut().for_each(ReleaseOnDrop::not_taken);
            return None;
        };
        let AllOrNone::Busy {
            index,
            pttl,
            holder,
        } = outcome
        else {
            for (mutex, hold) in mutexes.iter().zip(holds) {
                taking.held.push(mutex.taken(hold, sent));
            }
            return Some(None);
        };
        holds.iter_mut().for_each(ReleaseOnDrop::not_taken);
        let busy = mutexes.get(index)?;
        let error = busy.found_busy(sent, pttl, holder.as_deref());
        Some(Some((which[index], error)))
    }
}

/// The error of a step that failed; whatever it may have set is undone in the
/// background as `holds` are dropped, unless Redis surely did nothing.
fn undone<S: Pass + WakeUps>(mut holds: Vec<ReleaseOnDrop<S>>, error: Error) -> Error {
    if !error.outcome_unknown() {
        holds.iter_mut().for_each(ReleaseOnDrop::not_taken);
    }
    error
}

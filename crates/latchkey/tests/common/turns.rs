//! Tasks taking turns at one lock, each hold recorded as its holder saw it, and
//! the check that no two holds overlapped and fences grew.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use latchkey::{Client, Fairness, Lease};

/// One hold, as its holder saw it: when it got the lock, until when the lock was
/// surely its own (released, or its validity ran out), and its fencing token.
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    pub from: Instant,
    pub until: Instant,
    pub fence: u64,
}

/// The holds of one lock, from every task.
pub type Holds = Arc<StdMutex<Vec<Hold>>>;

/// How a task takes its turns.
#[derive(Clone, Debug)]
pub struct Turns {
    pub name: String,
    pub fair: bool,
    pub rounds: usize,
    /// How long each hold lasts.
    pub work: Duration,
    /// The renewed lease.
    pub ttl: Duration,
}

/// Takes the lock `turns.rounds` times through `client`, recording each hold in
/// `holds`; returns how many attempts failed (transiently: a failover in progress).
pub async fn take_turns(client: Client, turns: Turns, holds: Holds) -> usize {
    let fairness = if turns.fair {
        Fairness::Fair
    } else {
        Fairness::Plain
    };
    let mutex = client
        .mutex(&turns.name)
        .unwrap()
        .with_fairness(fairness)
        .with_lease(Lease::renewed(turns.ttl).unwrap());
    let mut failures = 0;
    for _ in 0..turns.rounds {
        let guard = match mutex.lock_timeout(Duration::from_secs(10)).await {
            Ok(guard) => guard,
            Err(error) => {
                assert!(error.is_transient(), "{error}");
                failures += 1;
                continue;
            }
        };
        let from = Instant::now();
        tokio::time::sleep(turns.work).await;
        let until = Instant::now().min(guard.valid_until());
        let fence = guard.fence();
        holds.lock().unwrap().push(Hold { from, until, fence });
        let _ = guard.release().await;
    }
    failures
}

/// No two holds overlap, and fences grow in the order the holds started.
pub fn assert_exclusive_and_fenced(holds: &Holds) {
    let mut holds = holds.lock().unwrap().clone();
    holds.sort_by_key(|h| h.from);
    for pair in holds.windows(2) {
        assert!(pair[1].from >= pair[0].until, "overlapping holds: {pair:?}");
        assert!(
            pair[1].fence > pair[0].fence,
            "fence did not grow: {pair:?}"
        );
    }
}

/// Holds that started after `instant`.
pub fn started_after(holds: &Holds, instant: Instant) -> usize {
    holds
        .lock()
        .unwrap()
        .iter()
        .filter(|h| h.from > instant)
        .count()
}

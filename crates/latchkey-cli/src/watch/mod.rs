//! `top` and `exporter`: live views of a deployment, both refreshed from one
//! [`Survey`] (bounded SCAN per refresh), both showing
//! the same [`Row`]s.

#[cfg(feature = "exporter")]
pub mod exporter;
#[cfg(feature = "top")]
pub mod top;

use std::time::{Duration, Instant};

use latchkey::inspect::{Budget, Primitive, Refreshed, Sighting, Survey};
use latchkey::quorum::QuorumStore;
use latchkey::store::LockStore;
use latchkey::{Kind, LockStatus};

use crate::cli::{Global, WatchArgs};
use crate::connect::{self, Connected};
use crate::exit::Failure;

/// A survey of whichever deployment the options name.
pub enum AnySurvey {
    Redis(Survey),
    Quorum(Survey<QuorumStore>),
}

impl AnySurvey {
    /// Connects, and starts a survey with the budget and options of `args`; also
    /// says where it connected (host and port of each node, never a password).
    pub async fn connect(global: &Global, args: &WatchArgs) -> Result<(Self, String), Failure> {
        let budget = Budget {
            keys: args.scan_count,
            reads: args.reads,
            ..Budget::default()
        };
        Ok(
            match connect::retrying(None, || connect::connect(global)).await? {
                Connected::Redis(client) => {
                    let node = client.store().node().to_owned();
                    let survey = client.survey().with_budget(budget);
                    (AnySurvey::Redis(survey.with_foreign(args.foreign)), node)
                }
                Connected::Quorum(client) => {
                    let node = client.store().node().to_owned();
                    let survey = client.survey().with_budget(budget);
                    (AnySurvey::Quorum(survey.with_foreign(args.foreign)), node)
                }
            },
        )
    }

    /// One bounded refresh.
    pub async fn refresh(&mut self) -> latchkey::Result<Refreshed> {
        match self {
            AnySurvey::Redis(survey) => survey.refresh().await,
            AnySurvey::Quorum(survey) => survey.refresh().await,
        }
    }

    /// What the survey knows, one row per primitive in use.
    pub fn rows(&self) -> Vec<Row> {
        let sightings: Vec<Sighting> = match self {
            AnySurvey::Redis(survey) => survey.sightings().collect(),
            AnySurvey::Quorum(survey) => survey.sightings().collect(),
        };
        sightings.iter().map(Row::new).collect()
    }

    /// The deployment's kind, as the library's metrics name it.
    pub fn deployment(&self) -> &'static str {
        match self {
            AnySurvey::Redis(survey) => survey.deployment(),
            AnySurvey::Quorum(survey) => survey.deployment(),
        }
    }
}

/// One primitive in use, as `top` shows it and `exporter` exports it. Holders are
/// masked.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub kind: Kind,
    /// Who holds it (masked): a lock's holder, a read-write lock's writer, or how
    /// many hold permits ("3 holders", "2 readers").
    pub holder: Option<String>,
    /// How long this view has seen it held as it is (a lower bound of the hold's age).
    pub held_for: Duration,
    /// What is left of the lease: a lock's, or the soonest permit's.
    pub left: Option<Duration>,
    pub fence: Option<u64>,
    /// Permits used and in all (semaphores, read-write locks).
    pub permits: Option<(u64, Option<u64>)>,
    pub waiters: u64,
    /// A rate limit's algorithm.
    pub algorithm: Option<String>,
    /// A rate limit's cost units counted now (fixed, sliding, cooldown).
    pub used: Option<u64>,
    /// A GCRA limit's state ahead of the clock (0: full capacity).
    pub ahead: Option<Duration>,
    /// When this state was read.
    pub read_at: Instant,
}

impl Row {
    fn new(seen: &Sighting) -> Self {
        let mut row = Row {
            name: seen.name.clone(),
            kind: seen.primitive.kind(),
            holder: None,
            held_for: seen.held_for(),
            left: None,
            fence: None,
            permits: None,
            waiters: 0,
            algorithm: None,
            used: None,
            ahead: None,
            read_at: seen.read_at,
        };
        match &seen.primitive {
            Primitive::Lock(status) => row.lock(status),
            Primitive::Semaphore(status) | Primitive::RwLock(status) => {
                let writer = status
                    .holders
                    .iter()
                    .find(|h| row.kind == Kind::RwLock && Some(h.weight) == status.permits);
                row.holder = match (writer, row.kind, status.live) {
                    (_, _, 0) => None,
                    (Some(writer), _, _) => Some(format!("writer {}", writer.masked_owner())),
                    (None, Kind::RwLock, n) => Some(format!("{n} reader{}", plural(n))),
                    (None, _, n) => Some(format!("{n} holder{}", plural(n))),
                };
                row.left = status.holders.iter().map(|h| h.ttl).min();
                row.fence = status.fence;
                row.waiters = status.waiters;
                // A read-write lock's writer holds every permit: show it as 1 of 1.
                row.permits = match (row.kind, writer) {
                    (Kind::RwLock, Some(_)) => Some((1, Some(1))),
                    (Kind::RwLock, None) => Some((status.live, None)),
                    _ => Some((status.used, status.permits)),
                };
            }
            Primitive::RateLimit(status) => {
                row.algorithm = Some(status.algorithm.clone());
                row.left = status.resets_in;
                row.used = status.used;
                row.ahead = status.ahead;
            }
            // The leader as the holder, its term as the fence (both only grow).
            Primitive::Election(status) => {
                row.holder = Some(status.leader.as_ref().map_or_else(
                    || "a candidate, not proclaimed".to_owned(),
                    |leader| crate::output::printable(&leader.value),
                ));
                row.fence = status.leader.as_ref().map(|leader| leader.term);
                row.left = status.lease_left;
                row.waiters = status.waiters;
            }
            // Count downs landed, of the count.
            Primitive::Latch(status) => {
                // Saturating: the key may hold anything another program wrote.
                row.permits = Some((status.count.saturating_sub(status.left), Some(status.count)));
            }
            _ => {}
        }
        row
    }

    fn lock(&mut self, status: &LockStatus) {
        self.holder = status.masked_holder();
        self.left = status.ttl;
        self.fence = status.fence;
        self.waiters = status.waiters;
    }

    /// How close to its limit it is, for sorting: permits held, a rate limit's
    /// units used (a GCRA limit's time ahead, in ms).
    pub fn load(&self) -> u64 {
        let ahead = self
            .ahead
            .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
        self.used
            .or(ahead)
            .or(self.permits.map(|(used, _)| used))
            .unwrap_or(0)
    }

    /// Whether someone holds it now.
    pub fn is_held(&self) -> bool {
        self.holder.is_some()
    }
}

/// The oldest hold among `rows`, as long as this view has seen it: of a lock, a
/// semaphore or a read-write lock; not a leadership, which is meant to last (an
/// alert on old holds would fire on every healthy leader).
pub fn oldest_hold(rows: &[Row]) -> Option<Duration> {
    rows.iter()
        .filter(|r| r.is_held() && r.kind != Kind::Election)
        .map(|r| r.held_for)
        .max()
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A kind as the views name it.
pub fn kind_label(kind: Kind) -> &'static str {
    match kind {
        Kind::Lock => "lock",
        Kind::Semaphore => "semaphore",
        Kind::RwLock => "rw_lock",
        Kind::RateLimit => "rate_limit",
        Kind::Election => "election",
        Kind::Latch => "latch",
        _ => "other",
    }
}

/// A duration in a narrow column: `850ms`, `4.2s`, `3m07s`, `2h05m`.
pub fn short(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

//! `status`, `list` and `release --force`: looking at every primitive under a
//! name (locks, semaphores, read-write locks, rate limits, elections, latches)
//! and breaking them.
//!
//! `--json` prints one object per primitive, its schema in `View` (and the README):
//! every object has `name`, `kind` and `held`, and the fields of its kind.

use latchkey::inspect::Primitive;
use latchkey::semaphore::{PermitHolder, SemaphoreStatus};
use latchkey::{Kind, LockStatus};
use serde::Serialize;

use crate::cli::{Global, ListArgs, ReleaseArgs, StatusArgs};
use crate::connect::{self, Connected};
use crate::exit::Failure;
use crate::output;

/// The exit status of `status` when nothing under the name is held.
const FREE: u8 = 1;

/// One primitive as `status`, `list` and `release` print it. Owner tokens are
/// always masked.
#[derive(Serialize)]
struct View {
    name: String,
    #[serde(flatten)]
    what: What,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum What {
    Lock {
        held: bool,
        holder: Option<String>,
        /// False while another library (redis-py, redsync …) holds the lock.
        holder_is_latchkey: bool,
        fence: Option<u64>,
        ttl_ms: Option<u64>,
        waiters: u64,
    },
    Semaphore(Permits),
    RwLock(Permits),
    RateLimit {
        held: bool,
        algorithm: String,
        resets_in_ms: Option<u64>,
        /// Cost units counted now (fixed, sliding, cooldown); null for GCRA.
        used: Option<u64>,
        /// GCRA: how far ahead of the clock its state is (0: full capacity).
        ahead_ms: Option<u64>,
    },
    Election {
        /// Whether anyone holds the election's lock.
        held: bool,
        /// What the leader campaigned with; null until the lock's holder
        /// proclaimed itself (it just won, or it is another library's holder).
        leader: Option<String>,
        term: Option<u64>,
        /// The lock's lease left: when a leader that stopped renewing is gone.
        ttl_ms: Option<u64>,
    },
    Latch {
        held: bool,
        /// Count downs still to come (0: open).
        left: u64,
        count: u64,
        open: bool,
    },
}

/// A semaphore's or read-write lock's permits.
#[derive(Serialize)]
struct Permits {
    held: bool,
    /// The stored count (a read-write lock's writer holds all of them).
    permits: Option<u64>,
    used: u64,
    /// Live permits (one per acquisition); `holders` lists the first 100.
    live: u64,
    holders: Vec<Holder>,
    waiters: u64,
    fence: Option<u64>,
}

#[derive(Serialize)]
struct Holder {
    holder: String,
    weight: u64,
    ttl_ms: u64,
}

impl View {
    /// The view of `found`; `None` for a kind this CLI does not know.
    fn new(name: &str, found: &Primitive) -> Option<Self> {
        let what = match found {
            Primitive::Lock(status) => What::lock(status),
            Primitive::Semaphore(status) => What::Semaphore(Permits::new(status)),
            Primitive::RwLock(status) => What::RwLock(Permits::new(status)),
            Primitive::RateLimit(status) => What::RateLimit {
                held: false,
                algorithm: status.algorithm.clone(),
                resets_in_ms: status.resets_in.map(output::millis),
                used: status.used,
                ahead_ms: status.ahead.map(output::millis),
            },
            Primitive::Election(status) => What::Election {
                held: status.held,
                leader: status.leader.as_ref().map(|l| l.value.clone()),
                term: status.leader.as_ref().map(|l| l.term),
                ttl_ms: status.lease_left.map(output::millis),
            },
            Primitive::Latch(status) => What::Latch {
                held: false,
                left: status.left,
                count: status.count,
                open: status.is_open(),
            },
            _ => return None,
        };
        Some(View {
            name: name.to_owned(),
            what,
        })
    }

    fn held(&self) -> bool {
        match &self.what {
            What::Lock { held, .. }
            | What::RateLimit { held, .. }
            | What::Election { held, .. }
            | What::Latch { held, .. } => *held,
            What::Semaphore(permits) | What::RwLock(permits) => permits.held,
        }
    }

    /// The view as text: one line, and with `details` a line per holder of a
    /// semaphore or read-write lock.
    fn text(&self, details: bool) -> String {
        let name = &self.name;
        let (line, holders) = match &self.what {
            What::Lock { .. } => (format!("{name}: {}", self.lock_text()), None),
            What::Semaphore(p) => (
                format!("{name}: semaphore, {}", p.semaphore_text()),
                Some(p),
            ),
            What::RwLock(p) => (format!("{name}: read-write lock, {}", p.rw_text()), Some(p)),
            What::RateLimit {
                algorithm,
                resets_in_ms,
                used,
                ahead_ms,
                ..
            } => {
                let full = resets_in_ms.map_or("kept without expiry".to_owned(), |ms| {
                    format!("full again in {}", output::human_ms(ms))
                });
                let used = match (used, ahead_ms) {
                    (Some(used), _) => format!("{used} used, "),
                    (None, Some(ms)) => format!("{} ahead, ", output::human_ms(*ms)),
                    (None, None) => String::new(),
                };
                (
                    format!("{name}: rate limit ({algorithm}), {used}{full}"),
                    None,
                )
            }
            What::Election {
                leader,
                term,
                ttl_ms,
                ..
            } => (
                format!(
                    "{name}: election, {}",
                    election_text(leader, *term, *ttl_ms)
                ),
                None,
            ),
            What::Latch {
                left, count, open, ..
            } => {
                let state = match open {
                    true => "open".to_owned(),
                    false => format!("closed, {left} of {count} count downs to go"),
                };
                (format!("{name}: latch of {count}, {state}"), None)
            }
        };
        let Some(permits) = holders.filter(|_| details) else {
            return line;
        };
        let rw = matches!(self.what, What::RwLock(_));
        let mut text = line;
        for holder in &permits.holders {
            let holds = match (rw, permits.is_writer(holder)) {
                (true, true) => "writes".to_owned(),
                (true, false) => "reads".to_owned(),
                (false, _) => format!("holds {}", holder.weight),
            };
            text.push_str(&format!(
                "\n  {} {holds} ({} left)",
                holder.holder,
                output::human_ms(holder.ttl_ms)
            ));
        }
        if permits.live > permits.holders.len() as u64 {
            text.push_str(&format!(
                "\n  … and {} more",
                permits.live - permits.holders.len() as u64
            ));
        }
        text
    }

    fn lock_text(&self) -> String {
        let What::Lock {
            holder,
            holder_is_latchkey,
            fence,
            ttl_ms,
            waiters,
            ..
        } = &self.what
        else {
            return String::new();
        };
        let Some(holder) = holder else {
            let fence = fence.map_or("no fence".to_owned(), |f| format!("last fence {f}"));
            return format!("free ({fence}, {waiters} waiting)");
        };
        let left = ttl_ms.map_or("no expiry".to_owned(), |ms| {
            format!("{} left", output::human_ms(ms))
        });
        match holder_is_latchkey {
            false => format!(
                "held by {holder}, not a latchkey client (no fence, {left}, {waiters} waiting)"
            ),
            true => {
                let fence = fence.map_or("no fence".to_owned(), |f| format!("fence {f}"));
                format!("held by {holder} ({fence}, {left}, {waiters} waiting)")
            }
        }
    }
}

/// Who leads, as `status` and `list` say it.
fn election_text(leader: &Option<String>, term: Option<u64>, ttl_ms: Option<u64>) -> String {
    let left = ttl_ms.map_or("no expiry".to_owned(), |ms| {
        format!("{} left", output::human_ms(ms))
    });
    match (leader, term) {
        (Some(leader), Some(term)) => format!("led by {leader:?} (term {term}, {left})"),
        _ => format!("its lock held by a candidate not proclaimed yet ({left})"),
    }
}

impl What {
    fn lock(status: &LockStatus) -> Self {
        What::Lock {
            held: status.is_held(),
            holder: status.masked_holder(),
            holder_is_latchkey: status.is_held_by_latchkey(),
            fence: status.fence,
            ttl_ms: status.ttl.map(output::millis),
            waiters: status.waiters,
        }
    }
}

impl Permits {
    fn new(status: &SemaphoreStatus) -> Self {
        Permits {
            held: status.is_held(),
            permits: status.permits,
            used: status.used,
            live: status.live,
            holders: status.holders.iter().map(Holder::new).collect(),
            waiters: status.waiters,
            fence: status.fence,
        }
    }

    fn tail(&self) -> String {
        let fence = self.fence.map_or(String::new(), |f| format!(", fence {f}"));
        format!("{} waiting{fence}", self.waiters)
    }

    fn semaphore_text(&self) -> String {
        let permits = self.permits.map_or("?".to_owned(), |p| p.to_string());
        format!(
            "{} of {permits} permits held by {} holder{}, {}",
            self.used,
            self.live,
            plural(self.live),
            self.tail()
        )
    }

    /// Whether `holder` is a read-write lock's writer: it holds every permit.
    fn is_writer(&self, holder: &Holder) -> bool {
        Some(holder.weight) == self.permits
    }

    fn rw_text(&self) -> String {
        let writer = self.holders.iter().find(|h| self.is_writer(h));
        match (writer, self.live) {
            (Some(writer), _) => format!("written by {}, {}", writer.holder, self.tail()),
            (None, 0) => format!("free, {}", self.tail()),
            (None, readers) => format!(
                "read by {readers} reader{}, {}",
                plural(readers),
                self.tail()
            ),
        }
    }
}

impl Holder {
    fn new(holder: &PermitHolder) -> Self {
        Holder {
            holder: holder.masked_owner(),
            weight: holder.weight,
            ttl_ms: output::millis(holder.ttl),
        }
    }
}

/// Everything under `name`; a name with nothing shows as a free lock. A quorum
/// keeps only locks.
async fn inspect(global: &Global, name: &str) -> Result<Vec<Primitive>, Failure> {
    Ok(
        match connect::retrying(None, || connect::connect(global)).await? {
            Connected::Redis(client) => {
                let found = client.inspect(name).await?;
                if !found.is_empty() {
                    return Ok(found);
                }
                // Nothing of latchkey's: the lock's own status says "free", or that
                // the key holds another application's data (which `inspect` skips).
                vec![Primitive::Lock(client.mutex(name)?.status().await?)]
            }
            Connected::Quorum(client) => vec![Primitive::Lock(client.mutex(name)?.status().await?)],
        },
    )
}

/// `status NAME`: exit 0 when anything under the name is held, 1 when not.
pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let views: Vec<View> = inspect(global, name)
        .await?
        .iter()
        .filter_map(|found| View::new(name, found))
        .collect();
    for view in &views {
        match args.json {
            true => output::json(view)?,
            false => crate::output::outln!("{}", view.text(true)),
        }
    }
    Ok(match views.iter().any(View::held) {
        true => 0,
        false => FREE,
    })
}

pub async fn list(global: &Global, args: ListArgs) -> Result<u8, Failure> {
    let mut found = match connect::retrying(None, || connect::connect(global)).await? {
        // Boxed: the listing's future is deep enough to overflow the compiler's
        // layout query depth in a lean build.
        Connected::Redis(client) => Box::pin(client.list_all(&args.pattern)).await?,
        Connected::Quorum(client) => client
            .list(&args.pattern)
            .await?
            .into_iter()
            .map(|(name, status)| (name, Primitive::Lock(status)))
            .collect(),
    };
    // Any string key looks like a lock from outside: by default, only latchkey's.
    found.retain(|(_, found)| match found {
        Primitive::Lock(status) => args.foreign || status.is_held_by_latchkey(),
        _ => true,
    });
    let views: Vec<View> = found
        .iter()
        .filter_map(|(name, p)| View::new(name, p))
        .collect();
    if args.json {
        output::json(&views)?;
        return Ok(0);
    }
    for view in &views {
        crate::output::outln!("{}", view.text(false));
    }
    if views.is_empty() && !global.quiet {
        crate::output::errln!(
            "latchkey: nothing matches {:?} under prefix {:?}",
            args.pattern,
            global.prefix
        );
    }
    Ok(0)
}

/// What `inspect` found of latchkey's: nothing, where only another application's
/// data is (a break leaves that alone, and says what it found to break).
fn ours(found: latchkey::Result<Vec<Primitive>>) -> latchkey::Result<Vec<Primitive>> {
    match found {
        Err(latchkey::Error::WrongType { .. }) => Ok(Vec::new()),
        found => found,
    }
}

/// What `release --force` did to one kind of primitive under the name.
#[derive(Serialize)]
struct Broken {
    name: String,
    kind: &'static str,
    broken: bool,
    /// What it was when broken, as `status --json` shows it; absent if nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    was: Option<View>,
}

pub async fn release(global: &Global, args: ReleaseArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    if !args.force {
        return Err(Failure::usage(format!(
            "refusing to break {name:?} without --force (it may belong to a live process); \
             to release a hold `latchkey acquire` printed, give its --token"
        )));
    }
    connect::check_name(global, name)?;
    let (broken, unheld) = match connect::retrying(None, || connect::connect(global)).await? {
        Connected::Redis(client) => {
            break_in_redis(&client, name, args.kind.map(Kind::from)).await?
        }
        Connected::Quorum(client) => {
            if args.kind.is_some_and(|kind| Kind::from(kind) != Kind::Lock) {
                return Err(Failure::usage(
                    "a quorum of masters keeps only locks: drop --kind or give --kind lock"
                        .to_owned(),
                ));
            }
            let was = client.mutex(name)?.force_release().await?;
            (vec![(Kind::Lock, was.map(Primitive::Lock))], None)
        }
    };
    for (kind, was) in broken {
        let report = Broken {
            name: name.to_owned(),
            kind: json_kind(kind),
            broken: was.is_some(),
            was: was.as_ref().and_then(|was| View::new(name, was)),
        };
        match (args.json, &unheld) {
            (true, _) => output::json(&report)?,
            (false, Some(note)) if !report.broken => crate::output::outln!("{note}"),
            (false, _) => crate::output::outln!("{}", report.text(kind)),
        }
    }
    Ok(0)
}

/// Breaks `kind` under `name` (every kind held there, without one): what each
/// break found, and why nothing was broken when only what is not a hold is there.
async fn break_in_redis(
    client: &latchkey::Client,
    name: &str,
    kind: Option<Kind>,
) -> Result<(Vec<(Kind, Option<Primitive>)>, Option<String>), Failure> {
    let mut unheld = None;
    let kinds = match kind {
        Some(kind) => vec![kind],
        None => {
            let found = ours(client.inspect(name).await)?;
            unheld = unheld_note(name, &found);
            held_kinds(&found)
        }
    };
    let mut broken = Vec::new();
    for kind in kinds {
        if kind != Kind::RateLimit {
            broken.push((kind, client.force_release(name, kind).await?));
            continue;
        }
        // One reset clears every algorithm's state: each is reported.
        let before = ours(client.inspect(name).await)?;
        let was = client.force_release(name, kind).await?;
        let rates = before.into_iter().filter(|p| p.kind() == Kind::RateLimit);
        let rates: Vec<_> = rates.map(|rate| (kind, Some(rate))).collect();
        match was.is_some() && !rates.is_empty() {
            true => broken.extend(rates),
            false => broken.push((kind, was)),
        }
    }
    Ok((broken, unheld))
}

/// What to say instead of "lock NAME was not held" when the name keeps state that
/// is no hold: a latch's count, a rate limit's (reset only when asked for).
fn unheld_note(name: &str, found: &[Primitive]) -> Option<String> {
    if found.iter().any(Primitive::is_held) {
        return None;
    }
    let mut kept: Vec<&str> = found
        .iter()
        .filter_map(|found| match found.kind() {
            Kind::Latch => Some("a latch's count (not a hold: nothing to break)"),
            Kind::RateLimit => Some("a rate limit's state (reset it with --kind rate-limit)"),
            _ => None,
        })
        .collect();
    // One line for several algorithms' state.
    kept.dedup();
    if kept.is_empty() {
        return None;
    }
    Some(format!(
        "nothing held under {name}; it keeps {}",
        kept.join(" and ")
    ))
}

/// The kinds of primitive held under a name (a lock when none is), which a
/// `release --force` without `--kind` breaks. Rate limits are reset only when
/// asked for by `--kind rate-limit`: a count is not a hold.
fn held_kinds(found: &[Primitive]) -> Vec<Kind> {
    let held: Vec<Kind> = found
        .iter()
        .filter(|p| p.is_held())
        .map(Primitive::kind)
        .collect();
    match held.is_empty() {
        true => vec![Kind::Lock],
        false => held,
    }
}

/// A kind as `--json` names it.
fn json_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Semaphore => "semaphore",
        Kind::RwLock => "rw_lock",
        Kind::RateLimit => "rate_limit",
        Kind::Election => "election",
        Kind::Latch => "latch",
        _ => "lock",
    }
}

impl Broken {
    fn text(&self, kind: Kind) -> String {
        let name = &self.name;
        let Some(was) = &self.was else {
            return match kind {
                Kind::RateLimit => format!("rate limit {name} had no state"),
                _ => format!("{kind} {name} was not held"),
            };
        };
        match &was.what {
            What::Lock { holder, fence, .. } => {
                let holder = holder.as_deref().unwrap_or("nobody");
                let fence = fence.map_or(String::new(), |f| format!(" (fence {f})"));
                format!("broke lock {name} held by {holder}{fence}")
            }
            What::RwLock(p) => {
                let holders: Vec<&str> = p.holders.iter().map(|h| h.holder.as_str()).collect();
                match p.holders.iter().find(|h| p.is_writer(h)) {
                    Some(writer) => format!(
                        "broke read-write lock {name}: dropped its writer {}",
                        writer.holder
                    ),
                    None => format!(
                        "broke read-write lock {name}: dropped its {} reader{} ({})",
                        p.live,
                        plural(p.live),
                        holders.join(", ")
                    ),
                }
            }
            What::Semaphore(p) => {
                let holders: Vec<&str> = p.holders.iter().map(|h| h.holder.as_str()).collect();
                format!(
                    "broke {kind} {name}: dropped {} permit{} of {} holder{} ({})",
                    p.used,
                    plural(p.used),
                    p.live,
                    plural(p.live),
                    holders.join(", ")
                )
            }
            What::RateLimit { algorithm, .. } => {
                format!("reset rate limit {name} ({algorithm}): the limit is full again")
            }
            What::Election { leader, term, .. } => match (leader, term) {
                (Some(leader), Some(term)) => {
                    format!("deposed the leader of election {name}: {leader:?} (term {term})")
                }
                _ => {
                    format!("broke election {name}'s lock, held by a candidate not proclaimed yet")
                }
            },
            What::Latch { .. } => format!("latch {name}: nobody holds a latch, nothing broken"),
        }
    }
}

/// "s" unless there is one.
fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

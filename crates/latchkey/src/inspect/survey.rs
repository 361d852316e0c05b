//! A deployment's latchkey state, kept up to date in bounded steps: what
//! `latchkey top` and `latchkey exporter` refresh from.
//!
//! Each refresh walks the next stretch of the keyspace with `SCAN` (about
//! [`Budget::keys`] keys per server, resumed where the last one stopped, so a
//! keyspace larger than the budget is covered over several refreshes) and reads
//! the state of at most [`Budget::reads`] names within [`Budget::time`]: the
//! names in use, longest unread first, and the names the walk found. The walk
//! waits while more names than one refresh reads are waiting, so memory stays
//! bounded and every key found is read. A name whose state shows nothing in use
//! is forgotten until the walk passes its keys again.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use super::{Primitive, names, snapshot};
use crate::client::Client;
use crate::error::Result;
use crate::key::LockKey;
use crate::quorum::QuorumStore;
use crate::store::{Inspect, KeyWalk, RedisStore};

/// How much one [`Survey::refresh`] may ask of Redis.
///
/// ```
/// use std::time::Duration;
/// let budget = latchkey::inspect::Budget { keys: 200, reads: 200, time: Duration::from_secs(1) };
/// assert!(budget.keys < latchkey::inspect::Budget::default().keys);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Keys walked per server and refresh: the `COUNT` of one `SCAN` (on a
    /// cluster, one per primary; on a quorum, one per master). Redis walks about
    /// this many keys, whatever they are.
    pub keys: u64,
    /// Names whose state is read per refresh, at most: one script call each,
    /// reading that name's keys and nothing else. Half goes to the names in use
    /// (so a release shows), the rest to the names the walk found; either takes
    /// what the other leaves.
    pub reads: usize,
    /// How long the reads of one refresh may take: once it has passed, the names
    /// left wait for the next refresh (a slow or stopped server costs a refresh
    /// this long, not `reads` timeouts).
    pub time: Duration,
}

impl Default for Budget {
    /// 500 keys walked (per server), 500 names read, within 2 s, per refresh.
    fn default() -> Self {
        Budget {
            keys: 500,
            reads: 500,
            time: Duration::from_secs(2),
        }
    }
}

/// What a survey knows of one name.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let mut survey = client.survey();
/// survey.refresh().await?;
/// for seen in survey.sightings() {
///     println!("{} is a {}, held for at least {:?}", seen.name, seen.primitive.kind(), seen.held_for());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Sighting {
    /// The name, without the client's prefix.
    pub name: String,
    /// Its state when last read.
    pub primitive: Primitive,
    /// When this survey first saw it held as it is now (by the same holder, for a
    /// lock): the hold is at least this old. `None` while nothing holds it.
    pub held_since: Option<Instant>,
    /// When it was last read.
    pub read_at: Instant,
}

impl Sighting {
    /// How long this survey has seen it held as it is now: a lower bound of the
    /// hold's age (Redis keeps no start time). Zero while nothing holds it.
    ///
    /// ```
    /// # use latchkey::inspect::{Primitive, Sighting};
    /// # fn demo(seen: Sighting) {
    /// println!("held for at least {:?}", seen.held_for());
    /// # }
    /// ```
    pub fn held_for(&self) -> Duration {
        self.held_since
            .map_or(Duration::ZERO, |since| since.elapsed())
    }
}

/// What one refresh did, for the view to show what it costs.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let done = client.survey().refresh().await?;
/// println!("walked {} keys, read {} names", done.keys_walked, done.names_read);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refreshed {
    /// `SCAN` calls sent.
    pub scans: usize,
    /// Keys those calls returned.
    pub keys_walked: usize,
    /// Names whose state was read (one script call each).
    pub names_read: usize,
    /// Names found but left for a later refresh (over [`Budget::reads`] or
    /// [`Budget::time`]).
    pub names_waiting: usize,
    /// Whether the walk came round to its start in this refresh: every key that
    /// existed throughout the walk has been seen.
    pub walk_completed: bool,
}

/// A deployment that a [`Survey`] can walk and read. Sealed: implemented for
/// [`RedisStore`] (one server, Sentinel, Cluster) and [`QuorumStore`].
pub trait Surveyed: sealed::Sealed + Inspect + Clone + Send + Sync + 'static {}

mod sealed {
    use super::*;

    /// Where a walk over the deployment stands.
    pub trait Sealed {
        type Walk: Default + Send + Sync;

        /// The next batch of keys (about `count` per server) and whether the walk
        /// came round to its start; also how many `SCAN` calls it took.
        fn next_keys(
            &self,
            walk: &mut Self::Walk,
            count: u64,
        ) -> impl Future<Output = Result<(Vec<String>, usize, bool)>> + Send;

        /// Everything in use under the name of `key`.
        fn read_name(&self, key: &LockKey) -> impl Future<Output = Result<Vec<Primitive>>> + Send;
    }
}

impl Surveyed for RedisStore {}

impl sealed::Sealed for RedisStore {
    type Walk = KeyWalk;

    async fn next_keys(
        &self,
        walk: &mut KeyWalk,
        count: u64,
    ) -> Result<(Vec<String>, usize, bool)> {
        self.scan_step(walk, count).await
    }

    async fn read_name(&self, key: &LockKey) -> Result<Vec<Primitive>> {
        snapshot::read(self, key).await
    }
}

impl Surveyed for QuorumStore {}

/// Where a walk over a quorum's masters stands: each master's own walk, and
/// which came round since the survey last said the walk did.
#[derive(Default)]
pub struct QuorumWalk {
    nodes: Vec<KeyWalk>,
    came_round: Vec<bool>,
}

/// A quorum keeps only locks; its masters are walked each on its own, and a
/// master that does not answer is skipped while a majority does.
impl sealed::Sealed for QuorumStore {
    type Walk = QuorumWalk;

    async fn next_keys(
        &self,
        walk: &mut QuorumWalk,
        count: u64,
    ) -> Result<(Vec<String>, usize, bool)> {
        let nodes = self.nodes();
        walk.nodes.resize_with(nodes.len(), KeyWalk::default);
        walk.came_round.resize(nodes.len(), false);
        let steps = nodes
            .iter()
            .zip(walk.nodes.iter_mut())
            .map(|(node, walk)| node.scan_step(walk, count));
        let mut keys = Vec::new();
        let (mut answered, mut scans, mut last_error) = (0, 0, None);
        let steps = futures_util::future::join_all(steps).await;
        for (node, step) in steps.into_iter().enumerate() {
            match step {
                Ok((batch, sent, finished)) => {
                    keys.extend(batch);
                    answered += 1;
                    scans += sent;
                    walk.came_round[node] |= finished;
                }
                Err(error) => last_error = Some(error),
            }
        }
        if let (true, Some(error)) = (answered < self.majority(), last_error) {
            return Err(error);
        }
        // Round once every master's walk came round since the last time.
        let done = walk.came_round.iter().all(|&round| round);
        if done {
            walk.came_round.iter_mut().for_each(|round| *round = false);
        }
        Ok((keys, scans, done))
    }

    async fn read_name(&self, key: &LockKey) -> Result<Vec<Primitive>> {
        lock_in_use(self, key).await
    }
}

/// The lock under `key`, if held or waited for: all a name whose only key is its
/// lock key can be (about a third of the cost of reading a name whole).
async fn lock_in_use<S: Inspect>(store: &S, key: &LockKey) -> Result<Vec<Primitive>> {
    let status = store.inspect(key).await?;
    let in_use = status.is_held() || status.waiters > 0;
    Ok(in_use
        .then_some(Primitive::Lock(status))
        .into_iter()
        .collect())
}

/// A deployment's latchkey state, refreshed in bounded steps: the names in use
/// under a client's prefix (locks held or waited for, semaphores and read-write
/// locks with permits out or waiters, rate-limit state), with what each holds.
/// `latchkey top` and `latchkey exporter` are views of one.
///
/// Every key is walked, not only latchkey's, and any string key looks like a lock
/// from outside. By default a lock held by anything but a latchkey client (another
/// library's lock, or a string that is no lock at all) is read once per walk and
/// passed over, as is a key of another type; [`with_foreign`](Self::with_foreign)
/// keeps the strings.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use latchkey::inspect::Budget;
/// let mut survey = client.survey().with_budget(Budget { keys: 2_000, reads: 2_000, ..Budget::default() });
/// loop {
///     survey.refresh().await?;
///     let held = survey.sightings().filter(|seen| seen.primitive.is_held()).count();
///     println!("{held} held");
///     tokio::time::sleep(std::time::Duration::from_secs(1)).await;
/// }
/// # }
/// ```
pub struct Survey<S: Surveyed = RedisStore> {
    client: Client<S>,
    budget: Budget,
    foreign: bool,
    walk: <S as sealed::Sealed>::Walk,
    /// Names found by the walk, by full key (prefix included).
    known: BTreeMap<String, Known>,
    /// Names found so far, to order the reads of new ones.
    found: u64,
}

/// A name the walk found: what it held when last read, if it was read.
struct Known {
    /// Found by a companion key of something other than a lock (a semaphore's, a
    /// rate limit's): read whole. Otherwise it can only be a lock (or not
    /// latchkey's at all), and only that is read.
    whole: bool,
    /// When the walk found it (a count): names are first read in this order, so
    /// one found late is not put off by the names found after it.
    found: u64,
    read: Option<(Instant, Vec<Primitive>)>,
    /// When each of its primitives was first seen held as it is now, by the
    /// identity of that hold (see [`hold_of`]).
    held_since: Vec<(String, Instant)>,
}

impl<S: Surveyed> Client<S> {
    /// A survey of everything in use under this client's prefix, with the default
    /// [`Budget`]. Nothing is read until [`Survey::refresh`].
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mut survey = client.survey();
    /// survey.refresh().await?;
    /// println!("{} names in use", survey.sightings().count());
    /// # Ok(()) }
    /// ```
    pub fn survey(&self) -> Survey<S> {
        Survey {
            client: self.clone(),
            budget: Budget::default(),
            foreign: false,
            walk: Default::default(),
            known: BTreeMap::new(),
            found: 0,
        }
    }
}

impl<S: Surveyed> Survey<S> {
    /// The same survey with `budget` per refresh.
    ///
    /// A budget of 0 keys walks 1 per server, of 0 reads reads 1 name; a time of
    /// zero reads one name per refresh.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::Client) {
    /// use latchkey::inspect::Budget;
    /// let survey = client.survey().with_budget(Budget { keys: 100, reads: 100, ..Budget::default() });
    /// # }
    /// ```
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = Budget {
            keys: budget.keys.max(1),
            reads: budget.reads.max(1),
            time: budget.time,
        };
        self
    }

    /// The same survey, keeping locks held by other libraries (redsync,
    /// redis-py …) and any other string key under the prefix, which look alike
    /// from outside. Off by default: a keyspace full of another application's
    /// strings would take every read.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::Client) {
    /// let survey = client.survey().with_foreign(true);
    /// # }
    /// ```
    pub fn with_foreign(mut self, foreign: bool) -> Self {
        self.foreign = foreign;
        self
    }

    /// The kind of deployment surveyed, as the [metrics](crate::metrics) label it:
    /// `single`, `sentinel`, `cluster` or `quorum`.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::Client) {
    /// println!("{}", client.survey().deployment());
    /// # }
    /// ```
    pub fn deployment(&self) -> &'static str {
        self.client.store().deployment()
    }

    /// The budget of each refresh.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::Client) {
    /// assert_eq!(client.survey().budget(), latchkey::inspect::Budget::default());
    /// # }
    /// ```
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Walks the next stretch of the keyspace and reads the names found, within
    /// the budget.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry (a quorum fails only when fewer than a
    /// majority of its masters answer the walk). The survey keeps what it knew
    /// and the next refresh carries on.
    ///
    /// # Cancel safety
    ///
    /// It only reads. Dropping the future may skip a stretch of the walk.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mut survey = client.survey();
    /// let done = survey.refresh().await?;
    /// assert!(done.names_read <= survey.budget().reads);
    /// # Ok(()) }
    /// ```
    pub async fn refresh(&mut self) -> Result<Refreshed> {
        let store = self.client.store().clone();
        let mut done = Refreshed::default();
        // The walk waits while the names it found wait: what it finds is read.
        if self.unread() < self.budget.reads {
            let (keys, scans, completed) =
                store.next_keys(&mut self.walk, self.budget.keys).await?;
            (done.scans, done.keys_walked, done.walk_completed) = (scans, keys.len(), completed);
            for key in keys {
                self.found(&key);
            }
        }
        let due = self.due();
        let started = Instant::now();
        for full in &due {
            if done.names_read > 0 && started.elapsed() >= self.budget.time {
                break;
            }
            self.read(&store, full).await?;
            done.names_read += 1;
        }
        done.names_waiting = self.unread() + due.len().saturating_sub(done.names_read);
        Ok(done)
    }

    /// How many names the walk found that were never read.
    fn unread(&self) -> usize {
        self.known.values().filter(|k| k.read.is_none()).count()
    }

    /// What the survey knows: every name in use when last read, sorted by name
    /// (a name with several primitives, e.g. a lock and a rate limit, once each).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mut survey = client.survey();
    /// survey.refresh().await?;
    /// for seen in survey.sightings() {
    ///     println!("{}: {}", seen.name, seen.primitive.kind());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn sightings(&self) -> impl Iterator<Item = Sighting> + '_ {
        let prefix = self.client.prefix().as_str();
        self.known.iter().flat_map(move |(full, known)| {
            let name = full.strip_prefix(prefix).unwrap_or(full);
            let (read_at, found) = match &known.read {
                Some((at, found)) => (*at, found.as_slice()),
                None => (Instant::now(), &[][..]),
            };
            found.iter().map(move |primitive| Sighting {
                name: name.to_owned(),
                primitive: primitive.clone(),
                held_since: known.since(primitive),
                read_at,
            })
        })
    }

    /// Notes the name `key` may serve, if it is under the prefix.
    fn found(&mut self, key: &str) {
        let Some((full, whole)) = names::name_of(key) else {
            return;
        };
        if !full.starts_with(self.client.prefix().as_str()) {
            return;
        }
        match self.known.get_mut(full) {
            Some(known) => known.whole |= whole,
            None => {
                self.found += 1;
                let known = Known {
                    whole,
                    found: self.found,
                    read: None,
                    held_since: Vec::new(),
                };
                self.known.insert(full.to_owned(), known);
            }
        }
    }

    /// The names to read now: half the budget for the names in use (longest
    /// unread first), the rest for names never read; either share takes what the
    /// other leaves. In use first, so a release shows before a discovery does.
    fn due(&self) -> Vec<String> {
        let mut in_use: Vec<(Instant, &String)> = Vec::new();
        let mut unread: Vec<(u64, &String)> = Vec::new();
        for (full, known) in &self.known {
            match &known.read {
                Some((at, _)) => in_use.push((*at, full)),
                None => unread.push((known.found, full)),
            }
        }
        in_use.sort();
        unread.sort();
        let reads = self.budget.reads;
        let new = unread.len().min(reads - in_use.len().min(reads / 2));
        let again = (reads - new).min(in_use.len());
        let again = in_use.into_iter().take(again).map(|(_, full)| full);
        let new = unread.into_iter().take(new).map(|(_, full)| full);
        again.chain(new).cloned().collect()
    }

    /// Reads one name, and forgets it if nothing of it is in use (or it is not a
    /// valid name, or its key is another application's).
    async fn read(&mut self, store: &S, full: &str) -> Result<()> {
        let prefix = self.client.prefix().as_str();
        let name = full.strip_prefix(prefix).unwrap_or(full);
        let Ok(key) = LockKey::new(self.client.prefix(), name) else {
            self.known.remove(full);
            return Ok(());
        };
        let whole = self.known.get(full).is_some_and(|known| known.whole);
        let read = match whole {
            true => store.read_name(&key).await,
            false => lock_in_use(store, &key).await,
        };
        let found = match read {
            Ok(found) => found,
            // Trouble with the connection, the server or the ACL user's commands
            // (every name would fail alike): the refresh stops here.
            Err(error) if error.is_transient() || error.denies_a_command() => return Err(error),
            // Trouble with this name (another type, a key the ACL hides): it is
            // passed over, not retried on every refresh.
            Err(error) => {
                tracing::debug!(name = %full, %error, "survey passes over a name it cannot read");
                Vec::new()
            }
        };
        let foreign = self.foreign;
        let found: Vec<Primitive> = found
            .into_iter()
            .filter(|p| p.in_use() && (foreign || !is_foreign(p)))
            .collect();
        if found.is_empty() {
            self.known.remove(full);
            return Ok(());
        }
        if let Some(known) = self.known.get_mut(full) {
            known.saw(found);
        }
        Ok(())
    }
}

impl Known {
    /// Records a read, keeping the first sighting of each hold still there.
    fn saw(&mut self, found: Vec<Primitive>) {
        let now = Instant::now();
        let holds: Vec<String> = found.iter().flat_map(holds_of).collect();
        self.held_since.retain(|(hold, _)| holds.contains(hold));
        for hold in holds {
            if !self.held_since.iter().any(|(h, _)| *h == hold) {
                self.held_since.push((hold, now));
            }
        }
        self.read = Some((now, found));
    }

    /// Since when the oldest of `primitive`'s current holds has been seen.
    fn since(&self, primitive: &Primitive) -> Option<Instant> {
        let holds = holds_of(primitive);
        self.held_since
            .iter()
            .filter(|(h, _)| holds.contains(h))
            .map(|(_, since)| *since)
            .min()
    }
}

/// Whether `primitive` is a lock held by something other than latchkey.
fn is_foreign(primitive: &Primitive) -> bool {
    matches!(primitive, Primitive::Lock(status) if status.is_held() && !status.is_held_by_latchkey())
}

/// What identifies each hold of `primitive` across reads: a lock's holder, each
/// permit holder listed (a semaphore's first 100 by lease end), or for a
/// semaphore holding more than it lists, the kind itself.
fn holds_of(primitive: &Primitive) -> Vec<String> {
    if !primitive.is_held() {
        return Vec::new();
    }
    let kind = primitive.kind();
    match primitive {
        Primitive::Lock(status) => status
            .holder
            .iter()
            .map(|h| format!("{kind} {h}"))
            .collect(),
        Primitive::Semaphore(status) | Primitive::RwLock(status) if !status.holders.is_empty() => {
            status
                .holders
                .iter()
                .map(|h| format!("{kind} {}", h.owner))
                .collect()
        }
        // A leadership by its term: a new leader is a new hold.
        Primitive::Election(status) => status
            .leader
            .iter()
            .map(|leader| format!("{kind} {}", leader.term))
            .collect(),
        _ => vec![kind.to_string()],
    }
}

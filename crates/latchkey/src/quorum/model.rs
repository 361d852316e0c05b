//! An exhaustive check of the quorum protocol: every interleaving of a small
//! system, with the same settling and fencing arithmetic as the store
//! ([`tally`](super::tally)). docs/quorum-fencing.md gives the argument; this is
//! the check that it holds, and that the checker can see it fail.
//!
//! The system: 3 nodes and 2 (or 3) clients, each making one attempt. Time is
//! discrete; a tick may come between any two steps, so any step may be delayed by
//! any amount (a pause). Each request a client sends reaches its node at once,
//! later (at any point after, maybe after the client gave up on it: a late
//! request), or never (lost). A client decides whenever it likes, counting the
//! nodes that have not answered as failed (their deadline passed). A node may
//! crash, keeping its data (AOF) or losing it, and come back; one that lost its
//! data stays out for the restart delay. Locks expire on the nodes. Node clocks
//! are skewed against each other by more than the clock step, so the clock floors
//! of different nodes differ.
//!
//! Releases and write-backs reach each node at once or never (see
//! [`LAND_OR_NOT`]); takes may also land late.
//!
//! Not modelled (argued in docs/quorum-fencing.md instead): extends (the watchdog's
//! renewals, which take free nodes back only while the lock is surely ours), several
//! attempts by one client, and late releases (each attempt writes a value of its
//! own, so a late release deletes nothing of a later attempt).
//!
//! Checked in every state reached:
//! - **exclusion**: no two clients hold the lock within their validity;
//! - **fencing**: every token handed to a caller is larger than every token handed
//!   out before it (so a store that refuses tokens below the highest it saw orders
//!   all holders, the stale ones last).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::tally::{FencePlan, majority, settled};

const NODES: usize = 3;
/// The node clock's units per tick, and the step proposals are rounded down to
/// (the store: µs and 1 s).
const CLOCK_STEP: u64 = 10;

/// What is explored.
#[derive(Clone, Copy, Debug)]
struct Config {
    clients: usize,
    attempts: u8,
    /// The lease, in ticks.
    ttl: u8,
    /// Time stops here.
    horizon: u8,
    crashes: u8,
    /// How long a node that lost its data stays out (ticks).
    restart_delay: u8,
    /// The second round; without it the holder uses the largest proposal as is.
    write_back: bool,
    /// Fencing on demand: a take proposes nothing; a holder may ask for its token
    /// later, in a round of proposals from the nodes that still hold the lock for
    /// it, then the write-back.
    on_demand: bool,
    /// Each node's clock: `tick * CLOCK_STEP + skew`.
    skews: [u64; NODES],
}

const PROTOCOL: Config = Config {
    clients: 2,
    attempts: 1,
    ttl: 2,
    horizon: 2,
    crashes: 1,
    restart_delay: 2,
    write_back: true,
    on_demand: false,
    skews: [0, 5, 13],
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Take,
    Propose,
    Raise(u64),
    Release,
}

/// A request on its way to a node: from `client`'s attempt `value`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
struct Message {
    node: u8,
    client: u8,
    value: u8,
    op: Op,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Node {
    /// The holder's value and when its lease ends.
    lock: Option<(u8, u8)>,
    counter: u64,
    /// Down since, and whether the data was lost.
    down: Option<(u8, bool)>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Slot {
    Waiting,
    Yes(u64),
    No,
    NotAsked,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Round one: the take, sent to every node at `start`.
    Taking {
        value: u8,
        start: u8,
        slots: [Slot; NODES],
    },
    /// Fencing on demand, round one: a holder asks the nodes for proposals.
    Proposing {
        value: u8,
        valid_until: u8,
        slots: [Slot; NODES],
    },
    /// Round two: raising the counters of `slots` marked Waiting to `fence`.
    Raising {
        value: u8,
        valid_until: u8,
        fence: u64,
        needed: usize,
        slots: [Slot; NODES],
    },
    Holding {
        value: u8,
        valid_until: u8,
        /// Whether it was handed its token (on demand, it may ask later).
        fenced: bool,
    },
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Client {
    phase: Phase,
    attempts_left: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct State {
    now: u8,
    nodes: [Node; NODES],
    clients: Vec<Client>,
    /// Sorted, so equal sets hash alike.
    network: Vec<Message>,
    crashes_left: u8,
    /// The largest token handed to a caller so far.
    last_handed: u64,
}

/// What the search found.
#[derive(Debug)]
struct Outcome {
    states: usize,
    violation: Option<(String, Vec<String>)>,
}

/// What becomes of one request.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// It reaches its node at once.
    Now,
    /// It stays on its way, to land at any later point.
    Later,
    /// It never lands.
    Lost,
}

/// Every way `count` requests can fare, each one of `fates`.
fn fates(count: usize, fates: &[Fate]) -> Vec<Vec<Fate>> {
    let mut all = vec![Vec::new()];
    for _ in 0..count {
        all = all
            .into_iter()
            .flat_map(|done| {
                fates.iter().map(move |&fate| {
                    let mut more = done.clone();
                    more.push(fate);
                    more
                })
            })
            .collect();
    }
    all
}

/// A take may land late: on a node where another client got in first, or after
/// its client gave up.
const TAKE_FATES: &[Fate] = &[Fate::Now, Fate::Later, Fate::Lost];
/// Releases, proposals on demand and write-backs land at once or never. A late
/// release deletes only its own attempt's value (see above); a late proposal or
/// write-back only raises a counter while its attempt still holds the node, and a
/// higher counter only makes later tokens higher.
const LAND_OR_NOT: &[Fate] = &[Fate::Now, Fate::Lost];

impl State {
    fn initial(config: &Config) -> Self {
        let node = Node {
            lock: None,
            counter: 0,
            down: None,
        };
        State {
            now: 0,
            nodes: [node.clone(), node.clone(), node],
            clients: vec![
                Client {
                    phase: Phase::Idle,
                    attempts_left: config.attempts,
                };
                config.clients
            ],
            network: Vec::new(),
            crashes_left: config.crashes,
            last_handed: 0,
        }
    }

    /// Sends `op` of `client`'s attempt `value` to `nodes`, each request meeting
    /// its fate.
    fn send(&mut self, config: &Config, request: (usize, u8, Op), nodes: &[usize], fates: &[Fate]) {
        let (client, value, op) = request;
        for (&node, fate) in nodes.iter().zip(fates) {
            let message = Message {
                node: node as u8,
                client: client as u8,
                value,
                op: op.clone(),
            };
            match fate {
                Fate::Now => self.deliver(config, message),
                Fate::Later => self.network.push(message),
                Fate::Lost => {}
            }
        }
        self.network.sort();
        self.network.dedup();
    }

    /// The lock on `node` now, if its lease has not ended.
    fn holder(&self, node: usize) -> Option<u8> {
        let (value, ends) = self.nodes[node].lock?;
        (ends > self.now).then_some(value)
    }

    /// Runs `message` on its node (the node's script, atomically); the reply goes to
    /// the client if it still waits for it.
    fn deliver(&mut self, config: &Config, message: Message) {
        let node = message.node as usize;
        if self.nodes[node].down.is_some() {
            return; // lost with the node
        }
        let holder = self.holder(node);
        let ours = holder == Some(message.value);
        let reply = match message.op {
            Op::Take if holder.is_some() && !ours => Slot::No,
            Op::Take if config.on_demand => {
                self.nodes[node].lock = Some((message.value, self.now + config.ttl));
                Slot::Yes(0)
            }
            Op::Take => {
                self.nodes[node].lock = Some((message.value, self.now + config.ttl));
                Slot::Yes(self.propose(config, node))
            }
            Op::Propose if !ours => Slot::No,
            Op::Propose => Slot::Yes(self.propose(config, node)),
            Op::Raise(_) if !ours => Slot::No,
            Op::Raise(fence) => {
                self.nodes[node].counter = self.nodes[node].counter.max(fence);
                Slot::Yes(fence)
            }
            Op::Release => {
                if ours {
                    self.nodes[node].lock = None;
                }
                return;
            }
        };
        let client = &mut self.clients[message.client as usize];
        match (&mut client.phase, &message.op) {
            (Phase::Taking { value, slots, .. }, Op::Take)
            | (Phase::Proposing { value, slots, .. }, Op::Propose)
            | (Phase::Raising { value, slots, .. }, Op::Raise(_))
                if *value == message.value && slots[node] == Slot::Waiting =>
            {
                slots[node] = reply;
            }
            _ => {} // a late reply: the client moved on
        }
    }

    /// The node's proposal for a token (take.lua, propose.lua), stored as its counter.
    fn propose(&mut self, config: &Config, node: usize) -> u64 {
        let clock = self.now as u64 * CLOCK_STEP + config.skews[node];
        let proposal = (self.nodes[node].counter + 1).max(clock - clock % CLOCK_STEP);
        self.nodes[node].counter = proposal;
        proposal
    }

    /// Hands the lock to the caller if its validity lasts, with `fence` (a token
    /// on demand: `None` until asked for); checks both properties as it does.
    fn hand_out(
        &mut self,
        client: usize,
        value: u8,
        valid_until: u8,
        fence: Option<u64>,
    ) -> Handed {
        if self.now >= valid_until {
            return Handed::TooLate;
        }
        if let Some(fence) = fence {
            if fence <= self.last_handed {
                return Handed::Violation(format!(
                    "fencing: token {fence} handed out after {}",
                    self.last_handed
                ));
            }
            self.last_handed = fence;
        }
        self.clients[client].phase = Phase::Holding {
            value,
            valid_until,
            fenced: fence.is_some(),
        };
        let now = self.now;
        let holding = self
            .clients
            .iter()
            .filter(|c| matches!(c.phase, Phase::Holding { valid_until, .. } if valid_until > now))
            .count();
        if holding > 1 {
            return Handed::Violation(format!(
                "exclusion: {holding} clients hold the lock within their validity"
            ));
        }
        Handed::Yes
    }

    /// Locks whose lease ended are gone (so equal situations are one state).
    fn expire(&mut self) {
        let now = self.now;
        for node in &mut self.nodes {
            if node.lock.is_some_and(|(_, ends)| ends <= now) {
                node.lock = None;
            }
        }
    }

    fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

enum Handed {
    Yes,
    TooLate,
    Violation(String),
}

/// The states reached by one step, each with what happened, or the violation it
/// made.
type Steps = Vec<(String, Result<State, String>)>;

/// Every step possible from `state`.
fn successors(config: &Config, state: &State) -> Steps {
    let mut next = Steps::new();
    if state.now < config.horizon {
        let mut after = state.clone();
        after.now += 1;
        after.expire();
        next.push(("tick".into(), Ok(after)));
    }
    for index in 0..state.network.len() {
        let mut after = state.clone();
        let message = after.network.remove(index);
        let what = format!(
            "node {} runs the late {:?} of client {} (attempt {})",
            message.node, message.op, message.client, message.value
        );
        after.deliver(config, message);
        next.push((what, Ok(after)));
    }
    for client in 0..state.clients.len() {
        client_steps(config, state, client, &mut next);
    }
    for node in 0..NODES {
        node_steps(config, state, node, &mut next);
    }
    next
}

fn client_steps(config: &Config, state: &State, client: usize, next: &mut Steps) {
    let c = &state.clients[client];
    match c.phase.clone() {
        Phase::Idle if c.attempts_left > 0 => {
            let value = (client as u8) * 16 + c.attempts_left;
            for fates in fates(NODES, TAKE_FATES) {
                let mut after = state.clone();
                after.clients[client].attempts_left -= 1;
                after.clients[client].phase = Phase::Taking {
                    value,
                    start: state.now,
                    slots: [Slot::Waiting; NODES],
                };
                after.send(config, (client, value, Op::Take), &[0, 1, 2], &fates);
                next.push((
                    format!("client {client} starts attempt {value}, takes {fates:?}"),
                    Ok(after),
                ));
            }
        }
        Phase::Idle => {}
        // Deciding counts the nodes yet to answer as failed: their deadline passed.
        Phase::Taking {
            value,
            start,
            slots,
        } => {
            let valid_until = start + config.ttl;
            let Some(proposals) = majority_said_yes(&slots) else {
                return give_up(config, state, client, value, "too few grants", next);
            };
            match config.on_demand {
                true => hand_out(config, state, client, value, valid_until, None, next),
                false => write_back(config, state, client, value, valid_until, &proposals, next),
            }
        }
        Phase::Holding {
            value,
            valid_until,
            fenced: false,
        } => {
            give_up(config, state, client, value, "done", next);
            for fates in fates(NODES, LAND_OR_NOT) {
                let mut after = state.clone();
                after.clients[client].phase = Phase::Proposing {
                    value,
                    valid_until,
                    slots: [Slot::Waiting; NODES],
                };
                after.send(config, (client, value, Op::Propose), &[0, 1, 2], &fates);
                next.push((
                    format!("client {client} asks for its token: {fates:?}"),
                    Ok(after),
                ));
            }
        }
        Phase::Proposing {
            value,
            valid_until,
            slots,
        } => match majority_said_yes(&slots) {
            Some(proposals) => {
                write_back(config, state, client, value, valid_until, &proposals, next)
            }
            None => give_up(config, state, client, value, "too few proposals", next),
        },
        Phase::Raising {
            value,
            valid_until,
            fence,
            needed,
            slots,
        } => {
            let confirmed = slots.iter().filter(|s| matches!(s, Slot::Yes(_))).count();
            match confirmed >= needed {
                true => hand_out(config, state, client, value, valid_until, Some(fence), next),
                false => give_up(
                    config,
                    state,
                    client,
                    value,
                    "write-back not confirmed",
                    next,
                ),
            }
        }
        Phase::Holding { value, .. } => give_up(config, state, client, value, "done", next),
    }
}

/// The (node, proposal) of every node that said yes, if they are a majority.
fn majority_said_yes(slots: &[Slot; NODES]) -> Option<Vec<(usize, u64)>> {
    let proposals: Vec<(usize, u64)> = slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Slot::Yes(p) => Some((i, *p)),
            _ => None,
        })
        .collect();
    let decided = settled(
        NODES,
        majority(NODES),
        proposals.len(),
        NODES - proposals.len(),
    );
    (decided == Some(true)).then_some(proposals)
}

/// Takes the largest of `proposals` as the token and writes it back where it is
/// not yet (every fate of those requests), or hands it out if it needs no raise.
fn write_back(
    config: &Config,
    state: &State,
    client: usize,
    value: u8,
    valid_until: u8,
    proposals: &[(usize, u64)],
    next: &mut Steps,
) {
    let plan = FencePlan::new(proposals);
    let needed = plan.still_needed(NODES);
    if !config.write_back || needed == 0 {
        return hand_out(
            config,
            state,
            client,
            value,
            valid_until,
            Some(plan.fence),
            next,
        );
    }
    let mut slots = [Slot::NotAsked; NODES];
    for &node in &plan.raise {
        slots[node] = Slot::Waiting;
    }
    for fates in fates(plan.raise.len(), LAND_OR_NOT) {
        let mut after = state.clone();
        after.clients[client].phase = Phase::Raising {
            value,
            valid_until,
            fence: plan.fence,
            needed,
            slots,
        };
        let raise = (client, value, Op::Raise(plan.fence));
        after.send(config, raise, &plan.raise, &fates);
        next.push((
            format!(
                "client {client} writes back {} to {:?}: {fates:?}",
                plan.fence, plan.raise
            ),
            Ok(after),
        ));
    }
}

/// The client releases `value` on every node (each release lands or is lost) and
/// goes idle.
fn give_up(config: &Config, state: &State, client: usize, value: u8, why: &str, next: &mut Steps) {
    for fates in fates(NODES, LAND_OR_NOT) {
        let mut after = state.clone();
        after.clients[client].phase = Phase::Idle;
        after.send(config, (client, value, Op::Release), &[0, 1, 2], &fates);
        next.push((
            format!("client {client} releases attempt {value} ({why}): {fates:?}"),
            Ok(after),
        ));
    }
}

fn hand_out(
    config: &Config,
    state: &State,
    client: usize,
    value: u8,
    valid_until: u8,
    fence: Option<u64>,
    next: &mut Steps,
) {
    let mut after = state.clone();
    let what = match fence {
        Some(fence) => format!("client {client} holds the lock with token {fence}"),
        None => format!("client {client} holds the lock, no token yet"),
    };
    match after.hand_out(client, value, valid_until, fence) {
        Handed::Yes => next.push((what, Ok(after))),
        Handed::TooLate => give_up(config, state, client, value, "validity gone", next),
        Handed::Violation(violation) => next.push((what, Err(violation))),
    }
}

fn node_steps(config: &Config, state: &State, node: usize, next: &mut Steps) {
    match state.nodes[node].down {
        None if state.crashes_left > 0 => {
            for lose in [false, true] {
                let mut after = state.clone();
                after.crashes_left -= 1;
                after.nodes[node].down = Some((state.now, lose));
                if lose {
                    after.nodes[node].lock = None;
                    after.nodes[node].counter = 0;
                }
                next.push((
                    format!("node {node} crashes (data lost: {lose})"),
                    Ok(after),
                ));
            }
        }
        Some((since, lost)) if !lost || state.now >= since + config.restart_delay => {
            let mut after = state.clone();
            after.nodes[node].down = None;
            next.push((format!("node {node} restarts"), Ok(after)));
        }
        _ => {}
    }
}

/// Depth-first search of every state reachable from the initial one.
fn explore(config: &Config) -> Outcome {
    let mut seen = HashSet::new();
    let mut path = Vec::new();
    let initial = State::initial(config);
    seen.insert(initial.fingerprint());
    let violation = visit(config, &initial, &mut seen, &mut path);
    Outcome {
        states: seen.len(),
        violation,
    }
}

fn visit(
    config: &Config,
    state: &State,
    seen: &mut HashSet<u64>,
    path: &mut Vec<String>,
) -> Option<(String, Vec<String>)> {
    for (what, next) in successors(config, state) {
        path.push(what);
        let next = match next {
            Ok(next) => next,
            Err(violation) => return Some((violation, path.clone())),
        };
        if seen.insert(next.fingerprint()) {
            if let Some(found) = visit(config, &next, seen, path) {
                return Some(found);
            }
        }
        path.pop();
    }
    None
}

fn report(outcome: &Outcome) -> String {
    match &outcome.violation {
        None => format!("no violation in {} states", outcome.states),
        Some((violation, path)) => format!("{violation} after:\n  {}", path.join("\n  ")),
    }
}

/// Explores `config`: no violation, and enough states that the search did run.
fn assert_holds(config: &Config, at_least: usize) {
    let outcome = explore(config);
    eprintln!("{config:?}: {}", report(&outcome));
    assert!(outcome.violation.is_none(), "{}", report(&outcome));
    assert!(
        outcome.states >= at_least,
        "suspiciously few states: {}",
        outcome.states
    );
}

/// Two clients, pauses, late and lost requests, one crash with or without data
/// loss, leases running out: about 7 million states.
#[test]
fn the_protocol_keeps_exclusion_and_fencing_in_every_interleaving() {
    assert_holds(&PROTOCOL, 1_000_000);
}

/// Three clients racing within one instant (no ticks, no crash): about 2 million
/// states.
#[test]
fn three_clients_racing_keep_exclusion_and_fencing() {
    let racing = Config {
        clients: 3,
        horizon: 0,
        crashes: 0,
        ..PROTOCOL
    };
    assert_holds(&racing, 500_000);
}

/// Fencing on demand: takes propose nothing; a holder asks for its token later (or
/// never), and the proposals and write-back may land late, be lost or meet a node
/// that restarted.
#[test]
fn tokens_on_demand_keep_exclusion_and_fencing_in_every_interleaving() {
    let on_demand = Config {
        on_demand: true,
        ..PROTOCOL
    };
    assert_holds(&on_demand, 1_000_000);
}

/// Without the write-back, a token made later from another majority repeats or
/// goes back: whether the tokens come with the grant or on demand.
#[test]
fn without_the_write_back_tokens_repeat_or_go_back() {
    for on_demand in [false, true] {
        let outcome = explore(&Config {
            on_demand,
            write_back: false,
            crashes: 0,
            ..PROTOCOL
        });
        let (violation, _) = outcome
            .violation
            .expect("the search must find tokens out of order");
        assert!(
            violation.starts_with("fencing"),
            "on demand {on_demand}: {violation}"
        );
    }
}

#[test]
fn without_the_restart_delay_an_empty_node_lets_a_second_holder_in() {
    let outcome = explore(&Config {
        restart_delay: 0,
        ..PROTOCOL
    });
    let (violation, path) = outcome
        .violation
        .expect("the search must find Kleppmann's counterexample");
    assert!(
        path.iter().any(|step| step.contains("data lost: true")),
        "{violation}: {path:?}"
    );
}

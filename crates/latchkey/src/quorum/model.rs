//! An exhaustive check of the quorum protocol: every interleaving of a small
//! system, with the same settling and fencing arithmetic as the store
//! ([`tally`](super::tally)). docs/quorum-fencing.md gives the argument; this is
//! the check that it holds, and that the checker can see it fail.
//!
//! The system: 3 nodes and 2 (or 3) clients, each making a few attempts. Time is
//! discrete; a tick may come between any two steps, so any step may be delayed by
//! any amount (a pause). Every request is a message that the node runs whenever it
//! is delivered, maybe after the client gave up on it (a late request), or never
//! (lost). A node may crash, keeping its data (AOF) or losing it, and come back;
//! one that lost its data stays out for the restart delay. Locks expire on the
//! nodes. Node clocks are skewed against each other by more than the clock step,
//! so the clock floors of different nodes differ.
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
    /// Each node's clock: `tick * CLOCK_STEP + skew`.
    skews: [u64; NODES],
}

const PROTOCOL: Config = Config {
    clients: 2,
    attempts: 2,
    ttl: 2,
    horizon: 4,
    crashes: 1,
    restart_delay: 2,
    write_back: true,
    skews: [0, 5, 13],
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Take,
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
    Taking { value: u8, start: u8, slots: [Slot; NODES] },
    /// Round two: raising the counters of `slots` marked Waiting to `fence`.
    Raising { value: u8, start: u8, fence: u64, needed: usize, slots: [Slot; NODES] },
    Holding { value: u8, valid_until: u8 },
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

    fn send(&mut self, client: usize, value: u8, op: Op, to: impl Iterator<Item = usize>) {
        for node in to {
            self.network.push(Message {
                node: node as u8,
                client: client as u8,
                value,
                op: op.clone(),
            });
        }
        self.network.sort();
        self.network.dedup();
    }

    /// Undoes `client`'s attempt on every node, and goes idle.
    fn release_everywhere(&mut self, client: usize, value: u8) {
        self.send(client, value, Op::Release, 0..NODES);
        self.clients[client].phase = Phase::Idle;
    }

    /// The lock on `node` now, if its lease has not ended.
    fn holder(&self, node: usize) -> Option<u8> {
        let (value, ends) = self.nodes[node].lock?;
        (ends > self.now).then_some(value)
    }

    /// Runs `message` on its node (the node's script, atomically); the reply goes to
    /// the client if it still waits for it.
    fn deliver(&mut self, config: &Config, index: usize) {
        let message = self.network.remove(index);
        let node = message.node as usize;
        if self.nodes[node].down.is_some() {
            return; // lost with the node
        }
        let holder = self.holder(node);
        let ours = holder == Some(message.value);
        let reply = match message.op {
            Op::Take if holder.is_some() && !ours => Slot::No,
            Op::Take => {
                let clock = self.now as u64 * CLOCK_STEP + config.skews[node];
                let proposal = (self.nodes[node].counter + 1).max(clock - clock % CLOCK_STEP);
                self.nodes[node].lock = Some((message.value, self.now + config.ttl));
                self.nodes[node].counter = proposal;
                Slot::Yes(proposal)
            }
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
            | (Phase::Raising { value, slots, .. }, Op::Raise(_))
                if *value == message.value && slots[node] == Slot::Waiting =>
            {
                slots[node] = reply;
            }
            _ => {} // a late reply: the client moved on
        }
    }

    /// The client's round is settled: go on, or undo and go idle.
    fn decide(&mut self, config: &Config, client: usize) -> Result<(), String> {
        match self.clients[client].phase.clone() {
            Phase::Taking { value, start, slots } => {
                let proposals: Vec<(usize, u64)> = slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| match s {
                        Slot::Yes(p) => Some((i, *p)),
                        _ => None,
                    })
                    .collect();
                if proposals.len() < majority(NODES) {
                    self.release_everywhere(client, value);
                    return Ok(());
                }
                let plan = FencePlan::new(&proposals);
                let needed = plan.still_needed(NODES);
                if !config.write_back || needed == 0 {
                    return self.hand_out(config, client, value, start, plan.fence);
                }
                let mut slots = [Slot::NotAsked; NODES];
                for &node in &plan.raise {
                    slots[node] = Slot::Waiting;
                }
                self.send(client, value, Op::Raise(plan.fence), plan.raise.iter().copied());
                self.clients[client].phase = Phase::Raising {
                    value,
                    start,
                    fence: plan.fence,
                    needed,
                    slots,
                };
                Ok(())
            }
            Phase::Raising { value, start, fence, needed, slots } => {
                let (yes, _, _) = count(&slots);
                match yes >= needed {
                    true => self.hand_out(config, client, value, start, fence),
                    false => {
                        self.release_everywhere(client, value);
                        Ok(())
                    }
                }
            }
            _ => Ok(()),
        }
    }

    /// Hands `fence` to the caller if the lease is still valid.
    fn hand_out(&mut self, config: &Config, client: usize, value: u8, start: u8, fence: u64) -> Result<(), String> {
        let valid_until = start + config.ttl;
        if self.now >= valid_until {
            self.release_everywhere(client, value);
            return Ok(());
        }
        if fence <= self.last_handed {
            return Err(format!("fencing: token {fence} handed out after {}", self.last_handed));
        }
        self.last_handed = fence;
        self.clients[client].phase = Phase::Holding { value, valid_until };
        let holding = self
            .clients
            .iter()
            .filter(|c| matches!(c.phase, Phase::Holding { valid_until, .. } if valid_until > self.now))
            .count();
        if holding > 1 {
            return Err(format!("exclusion: {holding} clients hold the lock within their validity"));
        }
        Ok(())
    }

    /// Whether the client's current round is settled (it may act on it).
    fn is_settled(&self, client: usize) -> bool {
        match &self.clients[client].phase {
            Phase::Taking { slots, .. } => {
                let (yes, no, _) = count(slots);
                settled(NODES, majority(NODES), yes, no).is_some()
            }
            Phase::Raising { slots, needed, .. } => {
                let (yes, no, asked) = count(slots);
                settled(asked, *needed, yes, no).is_some()
            }
            _ => false,
        }
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

/// How many slots said yes, said no (or timed out), and were asked.
fn count(slots: &[Slot; NODES]) -> (usize, usize, usize) {
    let yes = slots.iter().filter(|s| matches!(s, Slot::Yes(_))).count();
    let no = slots.iter().filter(|s| **s == Slot::No).count();
    let asked = slots.iter().filter(|s| **s != Slot::NotAsked).count();
    (yes, no, asked)
}

/// Every step possible from `state`, as (what it was, the state after it).
fn successors(config: &Config, state: &State) -> Vec<(String, Result<State, String>)> {
    let mut next = Vec::new();
    let mut step = |what: String, change: &dyn Fn(&mut State) -> Result<(), String>| {
        let mut after = state.clone();
        let result = change(&mut after).map(|()| after);
        next.push((what, result));
    };
    if state.now < config.horizon {
        step("tick".into(), &|s| {
            s.now += 1;
            s.expire();
            Ok(())
        });
    }
    for index in 0..state.network.len() {
        let m = &state.network[index];
        step(format!("node {} runs {:?} of client {} (attempt {})", m.node, m.op, m.client, m.value), &|s| {
            s.deliver(config, index);
            Ok(())
        });
    }
    for client in 0..state.clients.len() {
        let c = &state.clients[client];
        match &c.phase {
            Phase::Idle if c.attempts_left > 0 => {
                step(format!("client {client} starts an attempt"), &|s| {
                    let c = &mut s.clients[client];
                    c.attempts_left -= 1;
                    let value = (client as u8) * 16 + c.attempts_left;
                    c.phase = Phase::Taking {
                        value,
                        start: s.now,
                        slots: [Slot::Waiting; NODES],
                    };
                    s.send(client, value, Op::Take, 0..NODES);
                    Ok(())
                });
            }
            Phase::Taking { slots, .. } | Phase::Raising { slots, .. } => {
                for node in (0..NODES).filter(|&n| slots[n] == Slot::Waiting) {
                    step(format!("client {client} gives up on node {node}"), &|s| {
                        if let Phase::Taking { slots, .. } | Phase::Raising { slots, .. } = &mut s.clients[client].phase {
                            slots[node] = Slot::No;
                        }
                        Ok(())
                    });
                }
                if state.is_settled(client) {
                    step(format!("client {client} decides"), &|s| s.decide(config, client));
                }
            }
            Phase::Holding { value, .. } => {
                let value = *value;
                step(format!("client {client} releases"), &|s| {
                    s.release_everywhere(client, value);
                    Ok(())
                });
            }
            Phase::Idle => {}
        }
    }
    for node in 0..NODES {
        match state.nodes[node].down {
            None if state.crashes_left > 0 => {
                for lose in [false, true] {
                    step(format!("node {node} crashes (data lost: {lose})"), &|s| {
                        s.crashes_left -= 1;
                        s.nodes[node].down = Some((s.now, lose));
                        if lose {
                            s.nodes[node].lock = None;
                            s.nodes[node].counter = 0;
                        }
                        Ok(())
                    });
                }
            }
            Some((since, lost)) if !lost || state.now >= since + config.restart_delay => {
                step(format!("node {node} restarts"), &|s| {
                    s.nodes[node].down = None;
                    Ok(())
                });
            }
            _ => {}
        }
    }
    next
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

fn visit(config: &Config, state: &State, seen: &mut HashSet<u64>, path: &mut Vec<String>) -> Option<(String, Vec<String>)> {
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

#[test]
fn the_protocol_keeps_exclusion_and_fencing_in_every_interleaving() {
    let outcome = explore(&PROTOCOL);
    assert!(outcome.violation.is_none(), "{}", report(&outcome));
    assert!(outcome.states > 10_000, "suspiciously few states: {}", outcome.states);
}

#[test]
fn without_the_write_back_tokens_repeat_or_go_back() {
    let outcome = explore(&Config {
        write_back: false,
        crashes: 0,
        ..PROTOCOL
    });
    let (violation, _) = outcome.violation.expect("the search must find the known counterexample");
    assert!(violation.starts_with("fencing"), "{violation}");
}

#[test]
fn without_the_restart_delay_an_empty_node_lets_a_second_holder_in() {
    let outcome = explore(&Config {
        restart_delay: 0,
        ..PROTOCOL
    });
    let (violation, path) = outcome.violation.expect("the search must find Kleppmann's counterexample");
    assert!(path.iter().any(|step| step.contains("data lost: true")), "{violation}: {path:?}");
}

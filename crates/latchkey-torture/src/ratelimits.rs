//! The rate-limit workload: every task calls `check(cost)` on keys of the four
//! algorithms and logs each call with when it was sent and answered; the checker
//! then holds every allowed call to its policy over the whole history.

use std::time::Duration;

use latchkey::ratelimit::Policy;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A rate limit's policy, as the checker reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// One call per `per_us`.
    Cooldown { per_us: u64 },
    /// `limit` units per window of `per_us` starting at its first allowed call.
    Fixed { limit: u64, per_us: u64 },
    /// `limit` units in any span of `per_us`.
    Sliding { limit: u64, per_us: u64 },
    /// `limit` units per `per_us`, evenly spaced, plus `burst` more at once.
    Gcra { limit: u64, per_us: u64, burst: u64 },
}

impl Rate {
    /// The policy of key index `l`: the four algorithms in turn, with periods short
    /// enough that a run crosses thousands of windows.
    pub fn of(l: usize) -> Rate {
        match l % 4 {
            0 => Rate::Cooldown { per_us: 100_000 },
            1 => Rate::Fixed {
                limit: 5,
                per_us: 500_000,
            },
            2 => Rate::Sliding {
                limit: 5,
                per_us: 500_000,
            },
            _ => Rate::Gcra {
                limit: 20,
                per_us: 1_000_000,
                burst: 3,
            },
        }
    }

    pub fn policy(self) -> latchkey::Result<Policy> {
        let us = Duration::from_micros;
        match self {
            Rate::Cooldown { per_us } => Policy::cooldown(us(per_us)),
            Rate::Fixed { limit, per_us } => Policy::fixed_window(limit, us(per_us)),
            Rate::Sliding { limit, per_us } => Policy::sliding_window(limit, us(per_us)),
            Rate::Gcra {
                limit,
                per_us,
                burst,
            } => Policy::gcra(limit, us(per_us), burst),
        }
    }

    /// A cost to ask for: mostly 1, sometimes 2 where the policy allows it.
    pub fn cost(self, rng: &mut impl Rng) -> u64 {
        match self {
            Rate::Cooldown { .. } => 1,
            _ if rng.random_bool(0.2) => 2,
            _ => 1,
        }
    }

    /// The span the checker looks across: one period.
    pub fn per_us(self) -> u64 {
        match self {
            Rate::Cooldown { per_us }
            | Rate::Fixed { per_us, .. }
            | Rate::Sliding { per_us, .. }
            | Rate::Gcra { per_us, .. } => per_us,
        }
    }

    /// The most units the policy can allow in a span that surely lasted less than
    /// `span_us`, whatever the server's exact times: a fixed window may fit two
    /// windows' worth across its boundary; GCRA its burst and one unit per emission
    /// interval begun.
    pub fn most_in(self, span_us: u64) -> u64 {
        match self {
            Rate::Cooldown { .. } => 1,
            Rate::Fixed { limit, .. } => 2 * limit,
            Rate::Sliding { limit, .. } => limit,
            Rate::Gcra {
                limit,
                per_us,
                burst,
            } => burst + 1 + span_us.div_ceil(per_us / limit),
        }
    }
}

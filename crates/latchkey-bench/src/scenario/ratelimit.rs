//! Rate-limit decisions from 50 tasks on one node, beside the floor they are held
//! to: a trivial one-command script (`EVALSHA` of an `INCR`) from the same tasks.
//!
//! Each row is 50 tasks, each on its own key (one limiter per user, as in an API),
//! calling `check(1)` in a loop; the rows alternate in rounds so that they share the
//! machine's ups and downs. Redis CPU and commands per decision come from INFO.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use latchkey::Client;
use latchkey::ratelimit::Policy;
use redis::Script;

use super::timed::TimedRun;
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::{commands_run, process_cpu, redis_cpu};

const SCENARIO: &str = "ratelimit";
const TASKS: usize = 50;
/// Alternating rounds per row.
const ROUNDS: u32 = 4;

/// Progress-bar steps: one per round.
pub(crate) const STEPS: u64 = ROUNDS as u64;

/// The floor a decision is held to: one script, one command.
static TRIVIAL: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new("return redis.call('INCR', KEYS[1])"));

/// The floor of any limiter that keeps a time on the server's clock (GCRA, a
/// cooldown): read the clock, read the state, write the state back, with no
/// arithmetic at all. It decides nothing; it shows what the three calls cost.
static CLOCK_FLOOR: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], t[1], 'PX', 60000) return 1",
    )
});

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decider {
    /// `EVALSHA` of `return redis.call('INCR', KEYS[1])`: the floor.
    TrivialScript,
    /// `EVALSHA` of a script of `TIME`, `GET` and `SET`: the floor of any limiter
    /// on the server's clock.
    ClockFloor,
    Gcra,
    FixedWindow,
    SlidingWindow,
    Cooldown,
}

impl Decider {
    const ALL: [Decider; 6] = [
        Decider::TrivialScript,
        Decider::ClockFloor,
        Decider::Gcra,
        Decider::FixedWindow,
        Decider::SlidingWindow,
        Decider::Cooldown,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Decider::TrivialScript => "evalsha-incr",
            Decider::ClockFloor => "evalsha-time-get-set",
            Decider::Gcra => "gcra",
            Decider::FixedWindow => "fixed-window",
            Decider::SlidingWindow => "sliding-window",
            Decider::Cooldown => "cooldown",
        }
    }

    /// A policy that allows about half the calls of a busy task, so both paths run.
    pub(crate) fn policy(self) -> Result<Option<Policy>, BenchError> {
        let second = Duration::from_secs(1);
        Ok(match self {
            Decider::TrivialScript | Decider::ClockFloor => None,
            Decider::Gcra => Some(Policy::gcra(1_000, second, 100)?),
            Decider::FixedWindow => Some(Policy::fixed_window(1_000, second)?),
            Decider::SlidingWindow => Some(Policy::sliding_window(1_000, second)?),
            Decider::Cooldown => Some(Policy::cooldown(Duration::from_millis(1))?),
        })
    }

    /// The script a floor runs instead of a policy.
    pub(crate) fn floor_script(self) -> &'static Script {
        match self {
            Decider::ClockFloor => &CLOCK_FLOOR,
            _ => &TRIVIAL,
        }
    }
}

/// One row's totals over every round.
#[derive(Default)]
struct Row {
    run: TimedRun,
    redis_cpu: Duration,
    commands: u64,
}

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let client = Client::open(url).await?;
    let mut admin = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut rows: Vec<Row> = Decider::ALL.iter().map(|_| Row::default()).collect();
    for round in 0..ROUNDS {
        progress.set_message(format!("{SCENARIO}: round {} of {ROUNDS}", round + 1));
        for (decider, row) in Decider::ALL.into_iter().zip(&mut rows) {
            let (cpu, commands) = (
                redis_cpu(&mut admin).await?,
                commands_run(&mut admin).await?,
            );
            row.run.add(
                measure(
                    &client,
                    url,
                    decider,
                    duration / ROUNDS / Decider::ALL.len() as u32,
                )
                .await?,
            );
            row.redis_cpu += redis_cpu(&mut admin).await?.saturating_sub(cpu);
            // Two INFO calls (cpu and commandstats) ran after `commands` was read.
            row.commands += commands_run(&mut admin).await?.saturating_sub(commands + 1);
        }
        progress.inc(1);
    }
    let figures: Vec<Figures> = Decider::ALL
        .into_iter()
        .zip(rows)
        .map(|(decider, row)| row.figures(decider))
        .collect();
    print_ratio(&figures);
    Ok(figures)
}

impl Row {
    fn figures(self, decider: Decider) -> Figures {
        let ops = self.run.latencies.len().max(1) as f64;
        let (redis_cpu, commands) = (self.redis_cpu, self.commands);
        let mut figures = self.run.figures(SCENARIO, decider.name());
        figures.redis_cpu_us_per_op = Some(redis_cpu.as_secs_f64() * 1e6 / ops);
        figures.redis_cmds_per_op = commands as f64 / ops;
        figures
    }
}

/// `TASKS` tasks, each on its own key, deciding for `duration`.
async fn measure(
    client: &Client,
    url: &str,
    decider: Decider,
    duration: Duration,
) -> Result<TimedRun, BenchError> {
    let policy = decider.policy()?;
    // Like the client's, one multiplexed connection that every task shares.
    let shared = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let started = Instant::now();
    let cpu_before = process_cpu();
    let stop = started + duration;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let key = format!("bench:rate:{}:{task}", decider.name());
        tasks.push(match &policy {
            Some(policy) => {
                let limiter = client.rate_limiter(&key, policy.clone())?;
                tokio::spawn(async move {
                    timed_loop(stop, || async { limiter.check(1).await.map(drop) }).await
                })
            }
            None => {
                let conn = shared.clone();
                tokio::spawn(async move {
                    timed_loop(stop, || {
                        let call = decider.floor_script().key(&key);
                        let mut conn = conn.clone();
                        async move { call.invoke_async::<i64>(&mut conn).await.map(drop) }
                    })
                    .await
                })
            }
        });
    }
    TimedRun::gather(tasks, started, cpu_before).await
}

/// Runs `decide` until `stop`, timing each call.
async fn timed_loop<F, Fut, E>(stop: Instant, mut decide: F) -> Result<Vec<Duration>, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    BenchError: From<E>,
{
    let mut latencies = Vec::new();
    while Instant::now() < stop {
        let asked = Instant::now();
        decide().await?;
        latencies.push(asked.elapsed());
    }
    Ok(latencies)
}

fn print_ratio(figures: &[Figures]) {
    let rate = |name: &str| {
        figures
            .iter()
            .find(|f| f.implementation == name)
            .map_or(f64::NAN, |f| f.ops_per_sec)
    };
    let incr = rate("evalsha-incr").max(1e-9);
    println!("\n{SCENARIO}, side by side ({TASKS} tasks, each its own key, one node):");
    println!(
        "  gcra / evalsha-incr: decisions/s ×{:.2} (target ≥ 0.6); the floor of any \
         limiter on the server's clock (TIME, GET, SET and nothing else) ×{:.2}",
        rate("gcra") / incr,
        rate("evalsha-time-get-set") / incr
    );
}

//! The money transfer from the seed post: tellers move money between accounts a and
//! b at once, each reading both balances, checking the source covers the amount,
//! and writing both back.
//!
//! Done bare, two tellers read the same source balance and the later write wipes
//! out the earlier withdrawal, while both deposits stay: money is created. Done as an optimistic transaction (WATCH,
//! read, MULTI/EXEC, tried again when the other wrote first) or under the lock,
//! the total never changes and no balance goes below zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latchkey::Client;
use redis::AsyncCommands;

use super::redis_failure;
use crate::exit::Failure;

/// Both accounts share the `{bank}` hash tag: one slot, as a transaction needs.
const A: &str = "latchkey-demo:{bank}:a";
const B: &str = "latchkey-demo:{bank}:b";
const LOCK_NAME: &str = "latchkey-demo:{bank}:lock";
const OPENING: i64 = 100;
const TELLERS: usize = 8;
const TRANSFERS: usize = 25;
/// Between reading the balances and writing them: the window a race needs.
const PROCESSING: Duration = Duration::from_millis(1);

/// How the tellers keep the books.
#[derive(Clone, Copy)]
enum Books {
    Bare,
    Optimistic,
    Locked,
}

/// What the tellers did.
#[derive(Default)]
struct Tally {
    made: AtomicU64,
    declined: AtomicU64,
    retries: AtomicU64,
}

pub async fn run(url: &str, quiet: bool, unprotected: bool) -> Result<(), Failure> {
    crate::output::outln!(
        "transfers: {TELLERS} tellers × {TRANSFERS} transfers of 10 to 60 between a and b, each starting at {OPENING}"
    );
    let client = Client::open(url).await?;
    let runs: &[Books] = match unprotected {
        true => &[Books::Bare],
        false => &[Books::Optimistic, Books::Locked],
    };
    let mut broken = false;
    for &books in runs {
        broken |= !books_balance(&client, url, books, quiet).await?;
    }
    match (broken, unprotected) {
        (true, false) => Err(Failure::software("the books did not balance".to_owned())),
        _ => Ok(()),
    }
}

/// One run: opens the accounts, lets the tellers loose, checks the books; true
/// when the total held and no balance went negative.
async fn books_balance(
    client: &Client,
    url: &str,
    books: Books,
    quiet: bool,
) -> Result<bool, Failure> {
    let mut conn = redis::Client::open(url)
        .map_err(redis_failure)?
        .get_multiplexed_async_connection()
        .await
        .map_err(redis_failure)?;
    let _: () = conn
        .mset(&[(A, OPENING), (B, OPENING)])
        .await
        .map_err(redis_failure)?;
    let tally = Arc::new(Tally::default());
    let mut tellers = Vec::new();
    for teller in 0..TELLERS {
        let (client, conn, tally) = (client.clone(), conn.clone(), tally.clone());
        tellers.push(tokio::spawn(async move {
            for round in 0..TRANSFERS {
                let (from, to, amount) = pick(teller, round);
                transfer(&client, conn.clone(), books, (from, to, amount), &tally).await?;
            }
            Ok::<(), Failure>(())
        }));
    }
    for teller in tellers {
        teller
            .await
            .map_err(|e| Failure::software(format!("a teller task failed: {e}")))??;
    }
    let (a, b): (i64, i64) = conn.mget(&[A, B]).await.map_err(redis_failure)?;
    let _: () = conn.del(&[A, B]).await.map_err(redis_failure)?;
    let total = a + b;
    let held = total == 2 * OPENING && a >= 0 && b >= 0;
    let how = match books {
        Books::Bare => "without protection (GET, check, SET, INCRBY)",
        Books::Optimistic => "optimistic transactions (WATCH, read, MULTI/EXEC)",
        Books::Locked => "under the lock",
    };
    if !quiet {
        crate::output::outln!(
            "{how}: {} made, {} declined (not enough money), {} retries after a conflict; a = {a}, b = {b}",
            tally.made.load(Ordering::Relaxed),
            tally.declined.load(Ordering::Relaxed),
            tally.retries.load(Ordering::Relaxed),
        );
    }
    let verdict = match held {
        true => "invariant held",
        false => "invariant broken",
    };
    crate::output::outln!(
        "{verdict}: total {total} (opened with {}), lowest balance {}",
        2 * OPENING,
        a.min(b)
    );
    Ok(held)
}

/// Transfer `round` of `teller`: which way, and how much (10 to 60), spread so
/// that tellers cross each other and some ask for more than the source has.
fn pick(teller: usize, round: usize) -> (&'static str, &'static str, i64) {
    let amount = 10 + ((teller * 7 + round * 13) % 51) as i64;
    match (teller + round) % 2 {
        0 => (A, B, amount),
        _ => (B, A, amount),
    }
}

async fn transfer(
    client: &Client,
    mut conn: redis::aio::MultiplexedConnection,
    books: Books,
    (from, to, amount): (&'static str, &'static str, i64),
    tally: &Tally,
) -> Result<(), Failure> {
    let made = match books {
        Books::Bare => read_check_write(&mut conn, from, to, amount).await?,
        Books::Locked => {
            let guard = client.mutex(LOCK_NAME)?.lock().await?;
            let made = read_check_write(&mut conn, from, to, amount).await?;
            guard.release().await?;
            made
        }
        Books::Optimistic => {
            let written: Option<()> = client
                .transaction(&[from, to])?
                .with_attempts(1_000)
                .with_deadline(Duration::from_secs(30))
                .run(|reads| async move {
                    if reads.attempt() > 1 {
                        tally.retries.fetch_add(1, Ordering::Relaxed);
                    }
                    let balance: i64 = reads.get(from).await?;
                    if balance < amount {
                        return Ok(None);
                    }
                    tokio::time::sleep(PROCESSING).await;
                    let mut writes = redis::pipe();
                    writes.decr(from, amount).ignore().incr(to, amount).ignore();
                    Ok(Some(writes))
                })
                .await?;
            written.is_some()
        }
    };
    let counter = match made {
        true => &tally.made,
        false => &tally.declined,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The naive recipe: read the source, check it covers the amount, write it back
/// lower, add to the target. Only safe when nobody else runs it at the same time:
/// two tellers that read the same source balance both write it back from that
/// reading, and one withdrawal vanishes while its deposit stays.
async fn read_check_write(
    conn: &mut redis::aio::MultiplexedConnection,
    from: &str,
    to: &str,
    amount: i64,
) -> Result<bool, Failure> {
    let source: i64 = conn.get(from).await.map_err(redis_failure)?;
    if source < amount {
        return Ok(false);
    }
    tokio::time::sleep(PROCESSING).await;
    let _: () = conn
        .set(from, source - amount)
        .await
        .map_err(redis_failure)?;
    let _: i64 = conn.incr(to, amount).await.map_err(redis_failure)?;
    Ok(true)
}

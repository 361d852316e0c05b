//! The flash sale from the seed post: 10 buyers, 5 items.
//!
//! Every buyer runs the same read-modify-write: read the stock, take the payment,
//! write the stock back one lower. Run bare, all buyers read the same stock before
//! anyone writes it back, and the shop sells items it does not have. Run inside
//! `client.mutex(...).lock()`, each buyer sees the stock the previous one left.
//!
//! With `--semaphore K` ([`checkout`]), the checkout has K lanes: a semaphore of K
//! permits keeps at most K buyers paying at once, and the stock is taken atomically.

use std::sync::Arc;
use std::time::Duration;

use latchkey::Client;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tokio::sync::Barrier;

use super::redis_failure;
use crate::exit::Failure;

const BUYERS: usize = 10;
const STOCK: i64 = 5;
/// Time between reading the stock and writing it back: the window a race needs.
const PAYMENT: Duration = Duration::from_millis(50);
/// No buyer waits longer than this for the lock.
const PATIENCE: Duration = Duration::from_secs(30);
const STOCK_KEY: &str = "latchkey-demo:flash-sale:stock";
const SALES_KEY: &str = "latchkey-demo:flash-sale:sales";
const LOCK_NAME: &str = "latchkey-demo:flash-sale:lock";

pub async fn run(url: &str, quiet: bool, unprotected: bool) -> Result<(), Failure> {
    crate::output::outln!(
        "flash sale: {BUYERS} buyers, {STOCK} items, each buyer in its own task with its own connection"
    );
    if !quiet {
        crate::output::outln!("\nwithout a lock (read stock, pay, write stock - 1):");
    }
    let bare = race(url, false, quiet).await?;
    crate::output::outln!(
        "without a lock: sold {}, oversold {}",
        bare.sold,
        bare.oversold()
    );
    if unprotected {
        return Ok(());
    }
    if !quiet {
        crate::output::outln!("\nwith latchkey (the same code inside mutex.lock()):");
    }
    let locked = race(url, true, quiet).await?;
    crate::output::outln!("sold {}, oversold {}", locked.sold, locked.oversold());
    if locked.oversold() != 0 {
        return Err(Failure::software(
            "the lock let an oversell through".to_owned(),
        ));
    }
    Ok(())
}

struct Outcome {
    sold: i64,
}

impl Outcome {
    fn oversold(&self) -> i64 {
        (self.sold - STOCK).max(0)
    }
}

/// Resets the shop, lets every buyer loose at once and counts the sales.
async fn race(url: &str, locked: bool, quiet: bool) -> Result<Outcome, Failure> {
    let mut conn = connect(url).await?;
    let _: () = conn.set(STOCK_KEY, STOCK).await.map_err(redis_failure)?;
    let _: () = conn.del(SALES_KEY).await.map_err(redis_failure)?;
    // Everyone is connected before the doors open, as at a real sale's start time.
    let doors = Arc::new(Barrier::new(BUYERS));
    let buyers: Vec<_> = (1..=BUYERS)
        .map(|id| tokio::spawn(buy(url.to_owned(), id, locked, doors.clone())))
        .collect();
    let mut visits = Vec::new();
    for buyer in buyers {
        visits.push(
            buyer
                .await
                .map_err(|e| Failure::software(format!("a buyer task failed: {e}")))??,
        );
    }
    // Under the lock, fencing tokens give the order in which buyers held it.
    visits.sort_by_key(|visit| visit.fence);
    for visit in visits.iter().filter(|_| !quiet) {
        crate::output::outln!("  {}", visit.line);
    }
    let sold: i64 = conn.llen(SALES_KEY).await.map_err(redis_failure)?;
    let _: () = conn
        .del(&[STOCK_KEY, SALES_KEY])
        .await
        .map_err(redis_failure)?;
    Ok(Outcome { sold })
}

/// What one buyer did, and the fencing token it held if it took the lock.
struct Visit {
    fence: Option<u64>,
    line: String,
}

/// One buyer's visit to the shop.
async fn buy(url: String, id: usize, locked: bool, doors: Arc<Barrier>) -> Result<Visit, Failure> {
    let mut conn = connect(&url).await?;
    doors.wait().await;
    // The lock shares the buyer's connection rather than opening another.
    let client = Client::from_connection(conn.clone());
    let guard = match locked {
        true => Some(client.mutex(LOCK_NAME)?.lock_timeout(PATIENCE).await?),
        false => None,
    };
    let stock: i64 = conn.get(STOCK_KEY).await.map_err(redis_failure)?;
    let line = if stock > 0 {
        tokio::time::sleep(PAYMENT).await;
        let _: () = conn
            .set(STOCK_KEY, stock - 1)
            .await
            .map_err(redis_failure)?;
        let _: () = conn.rpush(SALES_KEY, id).await.map_err(redis_failure)?;
        format!(
            "buyer {id:>2} bought item {} (saw stock {stock})",
            STOCK - stock + 1
        )
    } else {
        format!("buyer {id:>2} found it sold out")
    };
    let Some(guard) = guard else {
        return Ok(Visit { fence: None, line });
    };
    let fence = guard.fence().await?;
    if !guard.release().await? {
        return Err(Failure::software(format!(
            "buyer {id}'s lease ran out mid-purchase"
        )));
    }
    Ok(Visit {
        fence: Some(fence),
        line: format!("{line:<40} fencing token {fence}"),
    })
}

async fn connect(url: &str) -> Result<MultiplexedConnection, Failure> {
    let client = redis::Client::open(url).map_err(redis_failure)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(redis_failure)
}

/// Most lanes a checkout demo asks for: more than the buyers would show nothing.
const MOST_LANES: u64 = BUYERS as u64;
const AT_CHECKOUT_KEY: &str = "latchkey-demo:flash-sale:at-checkout";
const BUSIEST_KEY: &str = "latchkey-demo:flash-sale:busiest";
const LANES_NAME: &str = "latchkey-demo:flash-sale:checkout";

/// Counts a buyer in at the checkout and keeps the most seen at once.
const ENTER: &str = "local n = redis.call('INCR', KEYS[1]) \
    if n > tonumber(redis.call('GET', KEYS[2]) or 0) then redis.call('SET', KEYS[2], n) end \
    return n";
/// Takes one item if any is left: 1 if taken, 0 if sold out.
const TAKE_ITEM: &str = "if tonumber(redis.call('GET', KEYS[1]) or 0) > 0 then \
    redis.call('DECR', KEYS[1]) return 1 end return 0";

/// `--semaphore K`: every buyer pays at a checkout of `lanes` lanes.
pub async fn checkout(
    url: &str,
    quiet: bool,
    lanes: u64,
    unprotected: bool,
) -> Result<(), Failure> {
    let lanes = lanes.min(MOST_LANES);
    let guard = match unprotected {
        true => "no semaphore",
        false => "a semaphore of that many permits",
    };
    crate::output::outln!(
        "flash sale: {BUYERS} buyers, {STOCK} items, {lanes} checkout lanes, {guard}"
    );
    let mut conn = connect(url).await?;
    let _: () = conn.set(STOCK_KEY, STOCK).await.map_err(redis_failure)?;
    let _: () = conn
        .del(&[AT_CHECKOUT_KEY, BUSIEST_KEY, SALES_KEY])
        .await
        .map_err(redis_failure)?;
    let client = Client::open(url).await?;
    let semaphore = (!unprotected)
        .then(|| client.semaphore(LANES_NAME, lanes))
        .transpose()?;
    let doors = Arc::new(Barrier::new(BUYERS));
    let buyers: Vec<_> = (1..=BUYERS)
        .map(|id| {
            let (url, semaphore, doors) = (url.to_owned(), semaphore.clone(), doors.clone());
            tokio::spawn(async move { pay(&url, id, semaphore, doors).await })
        })
        .collect();
    for buyer in buyers {
        let line = buyer
            .await
            .map_err(|e| Failure::software(format!("a buyer task failed: {e}")))??;
        if !quiet {
            crate::output::outln!("  {line}");
        }
    }
    let busiest: u64 = conn.get(BUSIEST_KEY).await.map_err(redis_failure)?;
    let sold: i64 = conn.llen(SALES_KEY).await.map_err(redis_failure)?;
    let _: () = conn
        .del(&[STOCK_KEY, SALES_KEY, AT_CHECKOUT_KEY, BUSIEST_KEY])
        .await
        .map_err(redis_failure)?;
    let verdict = match busiest <= lanes {
        true => "held",
        false => "broken",
    };
    crate::output::outln!(
        "invariant {verdict}: at most {lanes} at checkout at once (busiest: {busiest}); sold {sold}, oversold {}",
        (sold - STOCK).max(0)
    );
    match (busiest <= lanes, unprotected) {
        (false, false) => Err(Failure::software(
            "the semaphore let too many buyers in".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// One buyer at the checkout: a lane (a permit) if there is a semaphore, then pay.
async fn pay(
    url: &str,
    id: usize,
    semaphore: Option<latchkey::Semaphore>,
    doors: Arc<Barrier>,
) -> Result<String, Failure> {
    let mut conn = connect(url).await?;
    doors.wait().await;
    let permit = match &semaphore {
        Some(lanes) => Some(lanes.acquire_timeout(1, PATIENCE).await?),
        None => None,
    };
    let others: i64 = redis::Script::new(ENTER)
        .key(AT_CHECKOUT_KEY)
        .key(BUSIEST_KEY)
        .invoke_async(&mut conn)
        .await
        .map_err(redis_failure)?;
    tokio::time::sleep(PAYMENT).await;
    let taken: i64 = redis::Script::new(TAKE_ITEM)
        .key(STOCK_KEY)
        .invoke_async(&mut conn)
        .await
        .map_err(redis_failure)?;
    if taken == 1 {
        let _: () = conn.rpush(SALES_KEY, id).await.map_err(redis_failure)?;
    }
    let _: i64 = conn.decr(AT_CHECKOUT_KEY, 1).await.map_err(redis_failure)?;
    let bought = match taken {
        1 => "bought an item",
        _ => "found it sold out",
    };
    let lane = match permit {
        Some(permit) => {
            let fence = permit.fence().await?;
            permit.release().await?;
            format!(", permit fence {fence}")
        }
        None => String::new(),
    };
    Ok(format!(
        "buyer {id:>2} {bought} ({others} at checkout{lane})"
    ))
}

//! `client-cost MODE URLS CYCLES`: 50 tasks, each taking and releasing a lock of
//! its own `CYCLES` times, for callgrind. MODE `latchkey` locks on the server at
//! URLS; `quorum` on the masters at URLS (comma-separated); `raw` runs the floor,
//! `SET NX PX` and a compare-and-delete script, on one multiplexed connection.
//! scripts/client-cost.sh runs two lengths and prints the cost of one cycle.

use std::time::Duration;

const TASKS: u64 = 50;
const LEASE: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: client-cost latchkey|quorum|raw URLS CYCLES";
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or(usage)?;
    let urls = args.next().ok_or(usage)?;
    let cycles: u64 = args.next().ok_or(usage)?.parse()?;
    let tasks: Vec<_> = match mode.as_str() {
        "raw" => raw(&urls, cycles).await?,
        "latchkey" => with_latchkey(latchkey::Client::open(&urls).await?, cycles),
        "quorum" => {
            let urls: Vec<&str> = urls.split(',').collect();
            with_latchkey(latchkey::Client::open_quorum(&urls).await?, cycles)
        }
        _ => return Err(usage.into()),
    };
    for task in tasks {
        task.await??;
    }
    Ok(())
}

type Task = tokio::task::JoinHandle<Result<(), String>>;

fn with_latchkey<S>(client: latchkey::Client<S>, cycles: u64) -> Vec<Task>
where
    S: latchkey::store::Pass + latchkey::store::WakeUps + Clone + Send + Sync + 'static,
{
    (0..TASKS)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                let lease = latchkey::Lease::fixed(LEASE).map_err(|e| e.to_string())?;
                let name = format!("client-cost:{task}");
                for _ in 0..cycles {
                    let mutex = client.mutex(&name).map_err(|e| e.to_string())?;
                    let guard = mutex
                        .with_lease(lease)
                        .lock()
                        .await
                        .map_err(|e| e.to_string())?;
                    guard.release().await.map_err(|e| e.to_string())?;
                }
                Ok(())
            })
        })
        .collect()
}

async fn raw(url: &str, cycles: u64) -> Result<Vec<Task>, redis::RedisError> {
    let conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let release = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    );
    Ok((0..TASKS)
        .map(|task| {
            let (mut conn, release) = (conn.clone(), release.clone());
            tokio::spawn(async move {
                let key = format!("client-cost:raw:{task}");
                for cycle in 0..cycles {
                    let token = (task << 40) | cycle;
                    let taken: Option<String> = redis::cmd("SET")
                        .arg(&key)
                        .arg(token)
                        .arg("NX")
                        .arg("PX")
                        .arg(LEASE.as_millis() as u64)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    taken.ok_or("the key was taken")?;
                    let _: i64 = release
                        .key(&key)
                        .arg(token)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
        })
        .collect())
}

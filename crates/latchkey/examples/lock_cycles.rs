//! Takes and releases one uncontended lock many times: what the metrics cost a
//! lock cycle in the client, counted by callgrind as the marginal cost of two run
//! lengths (start-up cancels out). docs/benchmarks.md (Metrics) has the figures.
//!
//! ```text
//! cargo build --release --example lock_cycles                          # metrics on
//! cargo build --release --example lock_cycles --no-default-features    # metrics off
//! valgrind --tool=callgrind target/release/examples/lock_cycles redis://127.0.0.1:6379 2000 [prometheus]
//! ```
//!
//! With `prometheus`, a Prometheus recorder is installed first (metrics recorded);
//! without, the facade's no-op recorder takes them (with the feature on).

use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let cycles: u64 = args.next().map_or(Ok(2_000), |n| n.parse())?;
    let prometheus = match args.next().as_deref() {
        Some("prometheus") => {
            Some(metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?)
        }
        Some(other) => return Err(format!("unknown recorder {other:?}").into()),
        None => None,
    };
    let client = latchkey::Client::open(&url).await?;
    let mutex = client.mutex("lock-cycles")?;
    let started = Instant::now();
    for _ in 0..cycles {
        mutex.lock().await?.release().await?;
    }
    let took = started.elapsed();
    println!(
        "{cycles} cycles in {took:?} ({:?} each); metrics recorded: {}",
        took / cycles.max(1) as u32,
        prometheus.is_some()
    );
    Ok(())
}

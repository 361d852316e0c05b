//! Takes and releases one uncontended lock `CYCLES` times (after 50 to warm up), for
//! callgrind: `metrics-cost URL CYCLES`. Built without features the `metrics`
//! feature is off; with `on`, on with no recorder; with `prometheus`, on with a
//! Prometheus recorder installed. scripts/metrics-cost.sh runs all three.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: metrics-cost URL CYCLES")?;
    let cycles: u64 = args
        .next()
        .ok_or("usage: metrics-cost URL CYCLES")?
        .parse()?;
    #[cfg(feature = "prometheus")]
    let _recorder = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    let client = latchkey::Client::open(&url).await?;
    let mutex = client.mutex("metrics-cost")?;
    for _ in 0..50 + cycles {
        mutex.lock().await?.release().await?;
    }
    Ok(())
}

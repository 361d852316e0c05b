//! The figures as printed tables, one per scenario, with latchkey's ratios to its
//! peers.

use crate::figures::Figures;

/// One scenario's figures as a table, then latchkey's ratios to the others.
pub(crate) fn print_table(scenario: &str, figures: &[Figures]) {
    if figures.iter().any(|f| f.instructions.is_some()) {
        return print_costs(scenario, figures);
    }
    println!("\n{scenario}");
    println!(
        "  {:<15} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9}",
        "impl",
        "ops/s",
        "p50 µs",
        "p99 µs",
        "max µs",
        "cmds/op",
        "cpu µs/op",
        "redis µs",
        "min/max",
        "gap p50",
        "extra"
    );
    for f in figures {
        let fairness = f
            .fairness
            .map_or("-".to_owned(), |x| format!("{}/{}", x.min, x.max));
        let gap = f
            .handoff_gap_us
            .map_or("-".to_owned(), |g| g.p50.to_string());
        let extra = match (f.connections, f.rss_bytes, f.ping_rtt_us) {
            (Some(c), Some(rss), _) => format!("{c} conns, {} MiB", rss >> 20),
            (_, _, Some(ping)) => format!("ping {ping}"),
            _ => String::new(),
        };
        let cpu = |us: Option<f64>| us.map_or("-".to_owned(), |us| format!("{us:.1}"));
        println!(
            "  {:<15} {:>10.0} {:>9} {:>9} {:>9} {:>9.2} {:>9} {:>9} {:>11} {:>9} {:>9}",
            f.implementation,
            f.ops_per_sec,
            f.latency_us.p50,
            f.latency_us.p99,
            f.latency_us.max,
            f.redis_cmds_per_op,
            cpu(f.client_cpu_us_per_op),
            cpu(f.redis_cpu_us_per_op),
            fairness,
            gap,
            extra
        );
    }
    let (ours, peers): (Vec<&Figures>, Vec<&Figures>) = figures
        .iter()
        .partition(|f| f.implementation.starts_with("latchkey"));
    for ours in &ours {
        for peer in &peers {
            println!(
                "  {} / {}: throughput ×{:.2}, max wait ×{:.2}",
                ours.implementation,
                peer.implementation,
                ours.ops_per_sec / peer.ops_per_sec.max(1e-9),
                ours.latency_us.max as f64 / peer.latency_us.max.max(1) as f64,
            );
        }
    }
}

/// The `cost` scenario: instructions and commands per cycle, and each one's ratio
/// to raw `SET NX PX` + compare-and-delete.
fn print_costs(scenario: &str, figures: &[Figures]) {
    println!("\n{scenario} (per uncontended acquire + release; ratio to raw)");
    println!(
        "  {:<20} {:>20} {:>20} {:>14}",
        "impl", "server instructions", "client instructions", "commands"
    );
    let raw = figures
        .iter()
        .find(|f| f.implementation == "raw")
        .and_then(|f| f.instructions);
    for f in figures {
        let Some(cost) = f.instructions else {
            continue;
        };
        let ratio = |ours: f64, theirs: Option<f64>| {
            theirs.map_or(String::new(), |theirs| {
                format!(" ×{:.2}", ours / theirs.max(1.0))
            })
        };
        println!(
            "  {:<20} {:>20} {:>20} {:>14.2}",
            f.implementation,
            format!(
                "{:.0}{}",
                cost.server,
                ratio(cost.server, raw.map(|r| r.server))
            ),
            format!(
                "{:.0}{}",
                cost.client,
                ratio(cost.client, raw.map(|r| r.client))
            ),
            f.redis_cmds_per_op,
        );
    }
}

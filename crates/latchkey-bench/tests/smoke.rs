//! Every scenario runs end to end on a private server and yields sane figures.

use latchkey_bench::{Options, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_and_reports_every_implementation() {
    let dir = tempfile::tempdir().unwrap();
    // contended-processes runs worker processes of the `latchkey` binary; the CLI's
    // tests run it.
    let scenarios = Scenario::ALL
        .into_iter()
        .filter(|s| *s != Scenario::ContendedProcesses)
        .collect();
    let mut options = Options::quick(scenarios);
    options.json = Some(dir.path().join("bench.json"));
    options.chart = Some(dir.path().join("bench.svg"));
    let report = latchkey_bench::run(&options).await.unwrap();

    for scenario in ["uncontended", "contended", "handoff"] {
        for implementation in ["latchkey", "latchkey-fair", "raw", "raw-fenced", "rslock"] {
            let figures = report
                .results
                .iter()
                .find(|f| f.scenario == scenario && f.implementation == implementation)
                .unwrap_or_else(|| panic!("no {implementation} figures for {scenario}"));
            assert!(figures.ops_per_sec > 0.0, "{scenario}/{implementation}");
            assert!(
                figures.redis_cmds_per_op > 0.0,
                "{scenario}/{implementation}"
            );
        }
    }
    for row in [
        "cycle/single",
        "cycle/cluster",
        "contended/single",
        "contended/cluster",
        "acquire/no-wait",
        "acquire/wait-1",
    ] {
        let figures = report
            .results
            .iter()
            .find(|f| f.scenario == "deployments" && f.implementation == row)
            .unwrap_or_else(|| panic!("no deployments figures for {row}"));
        assert!(
            figures.ops_per_sec > 0.0 && figures.latency_us.p50 > 0,
            "{row}"
        );
    }
    let waiters = report
        .results
        .iter()
        .find(|f| f.scenario == "waiters")
        .unwrap();
    assert!(
        waiters.connections.unwrap() <= 4,
        "{:?}",
        waiters.connections
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("bench.json")).unwrap())
            .unwrap();
    let first = &json["results"][0];
    for field in [
        "scenario",
        "impl",
        "ops_per_sec",
        "latency_us",
        "redis_cmds_per_op",
    ] {
        assert!(!first[field].is_null(), "JSON lacks {field}");
    }
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    let svg = std::fs::read_to_string(dir.path().join("bench.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("contended"));
}

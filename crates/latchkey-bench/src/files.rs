//! The files a run writes when asked: the report as JSON (`--json`) and the
//! throughput chart as SVG (`--chart`).

use std::path::Path;

use crate::figures::Report;
use crate::{BenchError, Options, chart};

/// Writes the JSON and the chart, if asked for.
pub(crate) fn write(report: &Report, options: &Options) -> Result<(), BenchError> {
    if let Some(path) = &options.json {
        let json =
            serde_json::to_string_pretty(report).map_err(|e| BenchError::Check(e.to_string()))?;
        save(path, json + "\n")?;
    }
    if let Some(path) = &options.chart {
        save(path, chart::svg(&report.results))?;
    }
    Ok(())
}

fn save(path: &Path, contents: String) -> Result<(), BenchError> {
    std::fs::write(path, contents).map_err(|source| BenchError::Write {
        path: path.to_owned(),
        source,
    })
}

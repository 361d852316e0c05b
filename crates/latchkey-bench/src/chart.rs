//! The throughput chart: one group of bars per scenario, scaled to the scenario's
//! fastest implementation, each labelled with its ops/s.
//!
//! Written as plain SVG: a bar chart is a few rectangles and labels, and plotters
//! would need a font backend just to place the labels.

use std::fmt::Write;

use crate::figures::Figures;

const BAR_HEIGHT: u32 = 18;
const GAP: u32 = 6;
const LABEL_WIDTH: u32 = 190;
const BAR_WIDTH: u32 = 420;

/// The chart of `results` as an SVG document.
pub(crate) fn svg(results: &[Figures]) -> String {
    let rows = results.len() as u32;
    let groups = scenarios(results);
    let height = rows * (BAR_HEIGHT + GAP) + groups.len() as u32 * 24 + 40;
    let width = LABEL_WIDTH + BAR_WIDTH + 120;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="10" y="20" font-size="14">throughput (ops/s), bars scaled to each scenario's fastest</text>"#
    );
    let mut y = 40;
    for scenario in groups {
        let group: Vec<&Figures> = results.iter().filter(|f| f.scenario == scenario).collect();
        let best = group
            .iter()
            .map(|f| f.ops_per_sec)
            .fold(0.0_f64, f64::max)
            .max(1e-9);
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-weight="bold">{scenario}</text>"#,
            y + 12
        );
        y += 20;
        for f in group {
            let length = ((f.ops_per_sec / best) * BAR_WIDTH as f64).round() as u32;
            let colour = if f.implementation.starts_with("latchkey") {
                "#2b6cb0"
            } else {
                "#a0aec0"
            };
            let _ = writeln!(
                out,
                r#"<text x="20" y="{}">{}</text>"#,
                y + 13,
                f.implementation
            );
            let _ = writeln!(
                out,
                r#"<rect x="{LABEL_WIDTH}" y="{y}" width="{length}" height="{BAR_HEIGHT}" fill="{colour}"/>"#
            );
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}">{:.0}</text>"#,
                LABEL_WIDTH + length + 6,
                y + 13,
                f.ops_per_sec
            );
            y += BAR_HEIGHT + GAP;
        }
        y += 4;
    }
    out.push_str("</svg>\n");
    out
}

fn scenarios(results: &[Figures]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for f in results {
        if !names.contains(&f.scenario) {
            names.push(f.scenario.clone());
        }
    }
    names
}

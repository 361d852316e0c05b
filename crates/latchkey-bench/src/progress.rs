//! The progress bar on stderr: one step per implementation per round of each
//! chosen scenario.

use indicatif::{ProgressBar, ProgressStyle};

use crate::Options;

/// A bar over every step of the chosen scenarios (hidden if not asked for).
pub(crate) fn bar(options: &Options) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let steps = options.scenarios.iter().map(|s| s.steps()).sum();
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

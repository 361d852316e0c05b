//! A budget of instructions per cycle (`--cost-budget FILE`): the `cost` scenario's
//! counts are repeatable, so CI holds the hot paths to them, and a change that makes
//! one dearer fails at once instead of showing up months later as a slower bench.
//!
//! The file maps an implementation's name to its budget, e.g.
//! `{"latchkey": {"server": 125000, "client": 52000, "commands": 10}}`; a count may
//! exceed its budget by [`TOLERANCE`] (callgrind's counts move a little with the
//! server's timers and the allocator).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::BenchError;
use crate::figures::Figures;

/// How far over its budget a count may be.
pub const TOLERANCE: f64 = 0.05;

/// One implementation's budget per cycle; a missing field is not checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Budget {
    server: Option<f64>,
    client: Option<f64>,
    commands: Option<f64>,
}

/// Checks the `cost` figures against the budget in `file`: an error naming every
/// count over it, and every budgeted implementation that was not measured.
pub(crate) fn check(file: &Path, figures: &[Figures]) -> Result<(), BenchError> {
    let unreadable = |why: String| BenchError::Check(format!("{}: {why}", file.display()));
    let text = std::fs::read_to_string(file).map_err(|e| unreadable(e.to_string()))?;
    let budgets: BTreeMap<String, Budget> =
        serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    let mut over = Vec::new();
    for (name, budget) in &budgets {
        let Some((row, cost)) = figures
            .iter()
            .find(|f| &f.implementation == name)
            .and_then(|f| f.instructions.map(|cost| (f, cost)))
        else {
            over.push(format!("{name}: not measured (is valgrind installed?)"));
            continue;
        };
        let counts = [
            ("server instructions", cost.server, budget.server),
            ("client instructions", cost.client, budget.client),
            ("commands", row.redis_cmds_per_op, budget.commands),
        ];
        for (what, measured, allowed) in counts {
            let Some(allowed) = allowed else {
                continue;
            };
            if measured > allowed * (1.0 + TOLERANCE) {
                over.push(format!(
                    "{name}: {what} per cycle {measured:.0}, budget {allowed:.0} (+{:.0} %)",
                    TOLERANCE * 100.0
                ));
            }
        }
    }
    match over.is_empty() {
        true => Ok(()),
        false => Err(BenchError::Check(format!(
            "over the cost budget in {}: {}",
            file.display(),
            over.join("; ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::figures::{Figures, Instructions};
    use crate::stats::Percentiles;

    fn measured(server: f64) -> Vec<Figures> {
        let mut row = Figures::timed("cost", "latchkey", 0.0, Percentiles::default());
        row.redis_cmds_per_op = 10.0;
        row.instructions = Some(Instructions {
            server,
            client: 50_000.0,
        });
        vec![row]
    }

    fn budget(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn a_count_over_its_budget_fails_and_one_within_it_passes() {
        let file = budget(r#"{"latchkey": {"server": 100000, "commands": 10}}"#);
        assert!(check(file.path(), &measured(104_000.0)).is_ok());
        let err = check(file.path(), &measured(106_000.0)).unwrap_err();
        assert!(err.to_string().contains("server instructions"), "{err}");
    }

    #[test]
    fn a_budgeted_implementation_not_measured_fails() {
        let file = budget(r#"{"rslock": {"server": 40000}}"#);
        let err = check(file.path(), &measured(1.0)).unwrap_err();
        assert!(err.to_string().contains("not measured"), "{err}");
    }

    #[test]
    fn a_malformed_budget_is_a_clear_error() {
        let file = budget(r#"{"latchkey": {"server_instructions": 1}}"#);
        let err = check(file.path(), &measured(1.0)).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}

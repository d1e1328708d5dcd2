//! The verdicts as Markdown: a heading with the counts, then one table row per invariant (a
//! scenario that could not run is one row saying why). Made for a CI job's summary page
//! (GitHub's `$GITHUB_STEP_SUMMARY`), where a table reads better than a log.

use super::Entry;

/// Text that stays inside one table cell: no line breaks, `|` escaped, HTML's `<` kept literal.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
}

/// Render runs as a Markdown summary.
pub fn render(entries: &[Entry<'_>], backend: &str, seed: u64) -> String {
    let (mut held, mut violated, mut errors) = (0, 0, 0);
    for e in entries {
        match &e.outcome {
            Ok(o) if o.held() => held += 1,
            Ok(_) => violated += 1,
            Err(_) => errors += 1,
        }
    }
    let seed = if backend == "sim" {
        format!(", seed {seed}")
    } else {
        String::new()
    };
    let mut out = format!(
        "### kubechaos: {} scenario(s) on {backend}{seed}: {held} held, {violated} violated, {errors} could not run\n\n",
        entries.len()
    );
    out.push_str("| | scenario | invariant | verdict |\n|---|---|---|---|\n");
    for e in entries {
        let name = cell(&e.scenario.name);
        match &e.outcome {
            Ok(o) => {
                for v in &o.verdicts {
                    out.push_str(&format!(
                        "| {} | {name} | {} | {} |\n",
                        match v.word() {
                            "FAIL" => "**FAIL**",
                            w => w,
                        },
                        cell(&v.label),
                        cell(&v.message)
                    ));
                }
            }
            Err(error) => out.push_str(&format!(
                "| **ERROR** | {name} | (could not run) | {} |\n",
                cell(&crate::error::chain(*error))
            )),
        }
    }
    let reports: Vec<String> = entries
        .iter()
        .filter_map(|e| e.report_path)
        .map(|p| format!("`{}`", p.display()))
        .collect();
    if !reports.is_empty() {
        out.push_str(&format!(
            "\nEach run's timeline, in the HTML reports among the artifacts: {}\n",
            reports.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_keep_a_table_whole() {
        assert_eq!(cell("a | b\nc"), "a \\| b c");
        assert_eq!(cell("<script>"), "&lt;script>");
    }
}

//! The README and the user guide cannot drift from the tool: every scenario file they show is
//! read and validated as the scenario format says (the manifests it names stubbed where the
//! guide's are the reader's own), and every `kubechaos` command they show is parsed by the
//! command line itself (each flag, subcommand and value must exist).

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::cli::Cli;

/// The README and every page of the user guide.
fn pages() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![repo.join("README.md")];
    let guide = repo.join("docs/guide");
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(&guide)
        .unwrap_or_else(|e| panic!("{}: {e}", guide.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    chapters.sort();
    pages.extend(chapters);
    pages
}

/// The fenced blocks of a Markdown page: (the fence's language, the line it starts at, text).
fn blocks(text: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some((lang.trim().to_owned(), n + 1, String::new(), indent))
            }
            (Some(_), Some(_)) => {
                let (lang, at, body, _) = open.take().expect("open block");
                out.push((lang, at, body));
            }
            (Some((_, _, body, indent)), None) => {
                body.push_str(line.get(*indent..).unwrap_or(line.trim_start()));
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Split a command line as a shell would (quotes, no expansion), up to the first unquoted `#`,
/// `|`, `>`, `<`, `;` or `&`.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#' | '|' | '>' | '<' | ';' | '&') => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The top-level keys of a YAML block, if it is a mapping written at column 0.
fn top_keys(body: &str) -> Vec<&str> {
    body.lines()
        .filter(|l| !l.starts_with([' ', '#', '-']) && !l.trim().is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect()
}

#[test]
fn every_scenario_the_docs_show_is_valid() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (lang, at, body) in blocks(&text) {
            let keys = top_keys(&body);
            let scenario = lang == "yaml"
                && !keys.is_empty()
                && keys.iter().all(|k| scenario::SCENARIO_KEYS.contains(k))
                && keys.iter().any(|k| ["faults", "expect"].contains(k));
            if !scenario {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let yaml = if keys.contains(&"name") {
                body.clone()
            } else {
                format!("name: doc-example\n{body}")
            };
            let name = yaml
                .lines()
                .find_map(|l| l.strip_prefix("name:"))
                .map(|n| n.trim().to_owned())
                .unwrap_or_default();
            // The manifests a guide's example names are the reader's: stand-ins here.
            let file = dir.path().join(format!("{name}.yaml"));
            std::fs::write(&file, &yaml).unwrap();
            let first = scenario::parse(&file, yaml.as_bytes());
            if let Err(e) = &first {
                for missing in e.to_string().lines().filter_map(|l| {
                    let rest = l.split("`cluster.manifests`: cannot read `").nth(1)?;
                    Some(rest.split('`').next()?.to_owned())
                }) {
                    let path = dir.path().join(&missing);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(
                        &path,
                        "apiVersion: v1\nkind: Namespace\nmetadata: {name: example}\n",
                    )
                    .unwrap();
                }
            }
            if let Err(e) = scenario::parse(&file, yaml.as_bytes()) {
                panic!(
                    "{}:{at}: the scenario shown there is not valid:\n{e}\n{yaml}",
                    page.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} scenarios found in the docs");
}

use kubechaos_core::scenario;

#[test]
fn every_command_the_docs_show_parses() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (lang, at, body) in blocks(&text) {
            if !["sh", "bash", "console", "shell"].contains(&lang.as_str()) {
                continue;
            }
            for (i, line) in body.lines().enumerate() {
                let line = line.trim().trim_start_matches("$ ");
                let args: Vec<String> = if let Some(rest) = line.strip_prefix("cargo run -- ") {
                    std::iter::once("kubechaos".to_owned())
                        .chain(words(rest))
                        .collect()
                } else if line.starts_with("kubechaos ") {
                    words(line)
                } else {
                    continue;
                };
                // What kubechaos prints (`kubechaos explore: topology ...`) is no command.
                if args.get(1).is_some_and(|a| a.ends_with(':')) {
                    continue;
                }
                if let Err(e) = Cli::try_parse_from(&args) {
                    use clap::error::ErrorKind;
                    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                        panic!(
                            "{}:{}: `{line}` is not a command kubechaos takes:\n{e}",
                            page.display(),
                            at + i + 1
                        );
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the docs");
}

#[test]
fn commands_split_as_a_shell_splits_them() {
    assert_eq!(
        words(r#"kubechaos suite chaos/ --markdown "$GITHUB_STEP_SUMMARY" # the table"#),
        [
            "kubechaos",
            "suite",
            "chaos/",
            "--markdown",
            "$GITHUB_STEP_SUMMARY"
        ]
    );
    assert_eq!(
        words("kubechaos completion bash > x"),
        ["kubechaos", "completion", "bash"]
    );
    assert_eq!(
        words("kubechaos agent --lease 'a b'"),
        ["kubechaos", "agent", "--lease", "a b"]
    );
}

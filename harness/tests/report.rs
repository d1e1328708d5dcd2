//! The HTML report in a real browser: headless Chromium (Debian's `chromium-headless-shell`, which
//! ci/test installs) opens the page a run wrote, runs its script, and the test reads the page it
//! made: no script error, a lane for everything the events file holds, the violation at the top,
//! an item's details shown when the address names it. Without Chromium the test fails: it is not
//! skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use kubechaos_core::events::{read_jsonl, EventKind};

mod common;

use common::{kubechaos, repo};

/// The browser: `$KUBECHAOS_CHROMIUM`, else Debian's headless shell, else full Chromium.
fn chromium() -> String {
    if let Some(c) = std::env::var_os("KUBECHAOS_CHROMIUM") {
        return c.to_string_lossy().into_owned();
    }
    for c in ["chromium-headless-shell", "chromium"] {
        let found = Process::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            return c.to_owned();
        }
    }
    panic!(
        "no headless Chromium: install Debian's chromium-headless-shell (ci/test does), or set \
         KUBECHAOS_CHROMIUM to a Chromium binary; this test is not skipped"
    );
}

/// Open `page` (with `fragment`) in headless Chromium; the DOM after its scripts ran, and what
/// the page wrote to the console.
fn open(page: &Path, fragment: &str) -> (String, Vec<String>) {
    open_with(page, fragment, &[])
}

fn open_with(page: &Path, fragment: &str, flags: &[&str]) -> (String, Vec<String>) {
    let url = format!("file://{}{fragment}", page.display());
    let profile = tempfile::tempdir().unwrap();
    let out = Process::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1400,1000",
            "--virtual-time-budget=2000",
        ])
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}\n{stderr}",
        out.status
    );
    // Console messages (an uncaught error is one) are logged as `...:CONSOLE...] "text"`.
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    (String::from_utf8(out.stdout).unwrap(), console)
}

/// The page's first script puts every uncaught error in a `data-errors` attribute of `<html>`.
fn assert_no_script_errors(dom: &str) {
    let start = dom.find("<html").expect("an html element");
    let tag = &dom[start..start + dom[start..].find('>').unwrap()];
    assert!(!tag.contains("data-errors"), "script errors: {tag}");
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The lanes a report of `events` must have: one per fault step, lease, process, node, pod and
/// invariant the file mentions (read here from the events, not from the report's own code).
fn expected_lanes(events: &[kubechaos_core::events::Event]) -> BTreeSet<String> {
    let mut lanes = BTreeSet::new();
    for e in events {
        let lane = match &e.kind {
            EventKind::FaultApplied { step, .. } => format!("fault:{step}"),
            EventKind::LeaseObserved { lease, .. } => format!("lease:{lease}"),
            EventKind::ProcessStarted { process, .. }
            | EventKind::ProcessExited { process, .. }
            | EventKind::ProcessNote { process, .. } => format!("process:{process}"),
            // What the observer could reach is drawn in kubechaos's own lane.
            EventKind::ApiReach { .. } | EventKind::LeasesRelisted { .. } => {
                "process:kubechaos".to_owned()
            }
            EventKind::NodeObserved { node, .. } => format!("node:{node}"),
            EventKind::ProbeCreated { pod, .. } | EventKind::PodBound { pod, .. } => {
                format!("pod:{pod}")
            }
            EventKind::DeploymentObserved { deployment, .. } => {
                format!("deployment:{deployment}")
            }
            EventKind::InvariantJudged { invariant, .. } => format!("invariant:{invariant}"),
            _ => continue,
        };
        lanes.insert(lane);
    }
    lanes
}

/// Lanes the page drew (`data-lane="..."`).
fn drawn_lanes(dom: &str) -> BTreeSet<String> {
    dom.split("data-lane=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// Play `scenario` on the sim with `--events` and `--report` in `dir`.
fn play(scenario: &str, dir: &Path, code: i32) -> (PathBuf, PathBuf) {
    let (events, report) = (dir.join("run.jsonl"), dir.join("run.html"));
    kubechaos()
        .args(["scenario", scenario, "--events"])
        .arg(&events)
        .arg("--report")
        .arg(&report)
        .assert()
        .code(code)
        .stdout(predicates::str::contains(format!(
            "report: {}",
            report.display()
        )));
    (events, report)
}

#[test]
#[ignore = "real tier: headless Chromium; ci/test runs it"]
fn a_shipped_scenarios_report_draws_every_lane_in_chromium_and_shows_an_items_details() {
    let dir = tempfile::tempdir().unwrap();
    let (events_path, report) = play("api-restart", dir.path(), 0);
    let events = read_jsonl(&std::fs::read_to_string(&events_path).unwrap()).unwrap();
    let (index, message) = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::InvariantJudged {
                invariant,
                label,
                message,
                ..
            } if label == "schedulable" => Some((*invariant, message.clone())),
            _ => None,
        })
        .expect("api-restart judges schedulable");

    let item = format!("invariant:{index}@s0");
    let fragment = format!("#item={}", item.replace(':', "%3A").replace('@', "%40"));
    let (dom, console) = open(&report, &fragment);
    assert!(console.is_empty(), "the page logged: {console:#?}");
    assert_no_script_errors(&dom);

    let expected = expected_lanes(&events);
    assert!(
        expected.len() > 20
            && expected.contains("lease:kube-system/kube-scheduler")
            && expected.contains("process:api-server")
            && expected.contains("node:node-0")
            && expected.contains("fault:0"),
        "api-restart's events should name faults, leases, processes and nodes: {expected:?}"
    );
    assert_eq!(drawn_lanes(&dom), expected);
    assert!(
        dom.contains(&format!("data-rendered=\"{}\"", expected.len())),
        "the script did not finish drawing"
    );
    assert!(dom.contains("every invariant held"));

    // The address named the schedulable window: its details are in the panel.
    let details = &dom[dom.find("<aside id=\"details\"").expect("details panel")..];
    let details = &details[..details.find("</aside>").unwrap()];
    assert!(
        details.contains(&format!("data-item=\"{item}\"")),
        "{details}"
    );
    assert!(details.contains(&escape(&message)), "{details}");

    // Zoomed in by the address (as a drag does, and keeps it there): the window still shown,
    // every lane still drawn.
    let zoomed = format!("{fragment}&zoom=130000-200000");
    let (dom, console) = open(&report, &zoomed);
    assert!(console.is_empty(), "the page logged: {console:#?}");
    assert_no_script_errors(&dom);
    assert!(dom.contains("data-zoom=\"130000-200000\""), "not zoomed");
    assert!(dom.contains("Whole run"), "no way back from the zoom");
    assert_eq!(drawn_lanes(&dom), expected);
    assert!(dom.contains(&format!(
        "<aside id=\"details\" aria-live=\"polite\" data-item=\"{item}\""
    )));

    // The same events file renders the same page.
    let again = dir.path().join("again.html");
    kubechaos()
        .arg("report")
        .arg(&events_path)
        .arg("-o")
        .arg(&again)
        .assert()
        .code(0);
    assert_eq!(
        std::fs::read(&report).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
#[ignore = "real tier: headless Chromium; ci/test runs it"]
fn a_violation_is_at_the_top_of_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let trap = repo().join("harness/tests/fixtures/trap-schedulers.yaml");
    let (events_path, report) = play(trap.to_str().unwrap(), dir.path(), 1);
    let events = read_jsonl(&std::fs::read_to_string(&events_path).unwrap()).unwrap();
    let violations: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::InvariantJudged {
                held: false,
                label,
                message,
                ..
            } => Some(format!("{label}: {message}")),
            _ => None,
        })
        .collect();
    assert!(!violations.is_empty(), "the trap must be violated");

    let (dom, console) = open(&report, "");
    assert!(console.is_empty(), "the page logged: {console:#?}");
    assert_no_script_errors(&dom);
    assert_eq!(drawn_lanes(&dom), expected_lanes(&events));
    let top = &dom[dom.find("<section id=\"violations\"").unwrap()..];
    let top = &top[..top.find("</section>").unwrap()];
    for v in &violations {
        assert!(top.contains(&escape(v)), "{v} not in {top}");
    }
    assert!(dom.contains(&format!("{} violated", violations.len())));
    // Above the chart.
    assert!(dom.find("id=\"violations\"").unwrap() < dom.find("id=\"chart\"").unwrap());
}

#[test]
fn report_says_what_is_wrong_with_an_events_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"t_ms\":0,\"event\":\"run-ended\"}\n{\"t_ms\": 1, \"event\": \"no-such\"}\n",
    )
    .unwrap();
    kubechaos()
        .arg("report")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(format!("{}:2:", bad.display())))
        .stderr(predicates::str::contains("no-such"))
        .stderr(predicates::str::contains(
            "kubechaos scenario --events FILE",
        ));
    assert!(!dir.path().join("bad.html").exists());

    let no_start = dir.path().join("no-start.jsonl");
    std::fs::write(&no_start, "{\"t_ms\":0,\"event\":\"run-ended\"}\n").unwrap();
    kubechaos()
        .arg("report")
        .arg(&no_start)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no run-started event"));

    // One file for two reports is refused before anything runs.
    let same = dir.path().join("same.out");
    kubechaos()
        .args(["scenario", "api-restart", "--events"])
        .arg(&same)
        .arg("--report")
        .arg(&same)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is given for two reports"));
    assert!(!same.exists());

    kubechaos()
        .arg("report")
        .arg(dir.path().join("missing.jsonl"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read"));
}

/// A page that opens the report in a frame and works it as a person would, with the mouse:
/// hover over an item (the tooltip), click it (the details, the address), drag across the
/// chart (zoom), double-click (the whole run again). What it saw is written into its own page
/// as JSON, for the test to read from the DOM.
const DRIVER: &str = r##"<!DOCTYPE html>
<html><body>
<iframe id="f" src="run.html" width="1400" height="1000"></iframe>
<pre id="out"></pre>
<script>
document.getElementById("f").addEventListener("load", function () {
  var out = {};
  try {
    var w = this.contentWindow, d = w.document;
    var fire = function (el, type, x, y) {
      el.dispatchEvent(new w.MouseEvent(type, { bubbles: true, cancelable: true, clientX: x, clientY: y, button: 0 }));
    };
    var item = d.querySelector('[data-item="ITEM"]');
    var r = item.getBoundingClientRect();
    var x = r.left + Math.min(r.width / 2, 12), y = r.top + r.height / 2;
    fire(item, "mousemove", x, y);
    var tip = d.getElementById("tip");
    out.tip_shown = tip.style.display;
    out.tip = tip.textContent;
    fire(item, "mousedown", x, y);
    fire(item, "mouseup", x, y);
    fire(item, "click", x, y);
    out.details = d.getElementById("details").getAttribute("data-item");
    out.hash = w.location.hash;
    var svg = d.querySelector("#chart svg");
    var s = svg.getBoundingClientRect();
    var x0 = s.left + 400, x1 = s.left + 700, yy = s.top + 60;
    fire(svg, "mousedown", x0, yy);
    fire(d, "mousemove", x1, yy);
    fire(d, "mouseup", x1, yy);
    fire(svg, "click", x1, yy);
    out.zoom = d.getElementById("chart").getAttribute("data-zoom");
    out.zoom_hash = w.location.hash;
    out.still_selected = d.getElementById("details").getAttribute("data-item");
    fire(d.querySelector("#chart svg"), "dblclick", x1, yy);
    out.unzoomed = d.getElementById("chart").getAttribute("data-zoom");
    out.errors = d.documentElement.getAttribute("data-errors");
  } catch (e) {
    out.error = String(e);
  }
  document.getElementById("out").textContent = JSON.stringify(out);
});
</script>
</body></html>
"##;

#[test]
#[ignore = "real tier: headless Chromium; ci/test runs it"]
fn hovering_clicking_and_dragging_work_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let (_, report) = play("api-restart", dir.path(), 0);
    let item = "lease:kube-system/kube-scheduler@s0";
    let driver = dir.path().join("driver.html");
    std::fs::write(&driver, DRIVER.replace("ITEM", item)).unwrap();
    assert_eq!(report.file_name().unwrap(), "run.html");

    // The frame is another file: Chromium lets the driver reach into it only with this flag.
    let (dom, console) = open_with(&driver, "", &["--allow-file-access-from-files"]);
    assert!(console.is_empty(), "the pages logged: {console:#?}");
    let start = dom.find("<pre id=\"out\">").expect("driver output") + "<pre id=\"out\">".len();
    let json = dom[start..start + dom[start..].find("</pre>").unwrap()]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let out: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!(out["error"], serde_json::Value::Null, "{out:#}");
    assert_eq!(out["errors"], serde_json::Value::Null, "{out:#}");

    // Hover: the tooltip shows the holder bar's details.
    assert_eq!(out["tip_shown"], "block", "{out:#}");
    let tip = out["tip"].as_str().unwrap();
    assert!(
        tip.contains("kube-system/kube-scheduler · holder")
            && tip.contains("held by kube-scheduler-0"),
        "{tip}"
    );
    // Click: kept in the panel, and in the address.
    assert_eq!(out["details"], item, "{out:#}");
    assert_eq!(
        out["hash"], "#item=lease%3Akube-system%2Fkube-scheduler%40s0",
        "{out:#}"
    );
    // Drag: zoomed into part of the run; the address says so; the selection stays.
    let end = out["unzoomed"].as_str().unwrap().to_owned();
    let zoom = out["zoom"].as_str().unwrap();
    let (from, to) = zoom.split_once('-').unwrap();
    let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
    assert!(from > 0 && from < to && format!("0-{to}") != end, "{out:#}");
    assert!(
        out["zoom_hash"]
            .as_str()
            .unwrap()
            .ends_with(&format!("&zoom={from}-{to}")),
        "{out:#}"
    );
    assert_eq!(out["still_selected"], item, "{out:#}");
    // Double click: the whole run again.
    assert!(end.starts_with("0-"), "{out:#}");
}

//! Property: the elector never yields two simultaneous leaders, under arbitrary partitions
//! (both ways and one way), API-server restarts and process kills. Each case is a simulated run
//! of three reference-agent replicas; leadership is judged from what each replica reported
//! about itself, not from the Lease object.

use std::path::Path;

use kubechaos_core::invariants::judge;
use kubechaos_core::scenario;
use kubechaos_engine::backend::sim::run as sim;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Fault {
    Partition { replica: u8, oneway: Option<bool> },
    PartitionLeader,
    Kill { replica: u8 },
    ApiRestart,
    ApiStop,
}

/// The faults under which client-go's election promises one leader at a time. Not a cut of the
/// API server's answers alone (`oneway: Some(false)`): a renewal taken while its answer is held
/// reaches its leader late, the leader counts its renew deadline from the answer, and another
/// candidate, counting from the write, may take over before it stops (client-go's package doc:
/// "does not guarantee that only one client is acting as a leader"). That case is pinned in
/// `sim_models.rs` (`a_renewal_answered_late_makes_two_leaders_as_client_go_does`), found here.
fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        (0u8..3, prop_oneof![Just(None), Just(Some(true))])
            .prop_map(|(replica, oneway)| Fault::Partition { replica, oneway }),
        Just(Fault::PartitionLeader),
        (0u8..3).prop_map(|replica| Fault::Kill { replica }),
        Just(Fault::ApiRestart),
        Just(Fault::ApiStop),
    ]
}

fn scenario_yaml(faults: &[(u32, u32, Fault)]) -> String {
    let mut y = String::from(
        "name: prop\ncluster:\n  nodes: 0\n  agents:\n    - {name: agent, replicas: 3, lease: default/agent-lock, mode: correct}\nfaults:\n",
    );
    for (at, dur, f) in faults {
        let step = match f {
            Fault::Partition {
                replica,
                oneway: None,
            } => format!("partition: [agent/agent/{replica}, api-server], for: {dur}s"),
            Fault::Partition {
                replica,
                oneway: Some(true),
            } => format!("partition: {{from: agent/agent/{replica}, to: api-server}}, for: {dur}s"),
            Fault::Partition {
                replica,
                oneway: Some(false),
            } => format!("partition: {{from: api-server, to: agent/agent/{replica}}}, for: {dur}s"),
            Fault::PartitionLeader => {
                format!("partition: [agent/agent/leader, api-server], for: {dur}s")
            }
            Fault::Kill { replica } => format!("kill: agent/agent/{replica}"),
            Fault::ApiRestart => "api-server: restart".to_owned(),
            Fault::ApiStop => format!("api-server: stop, for: {dur}s"),
        };
        y.push_str(&format!("  - {{at: {at}s, {step}}}\n"));
    }
    y.push_str("expect:\n  - single-leader: {lease: default/agent-lock}\n  - leader-reacquired: {lease: default/agent-lock, within: 90s}\n");
    y
}

proptest! {
    // A fixed seed: the same 24 cases every run, as CI needs (a random one once failed CI with a
    // case no change had made). Explore more with another seed and more cases here.
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(1),
        ..ProptestConfig::default()
    })]

    #[test]
    fn never_two_leaders_at_once(
        faults in prop::collection::vec((5u32..120, 3u32..60, fault()), 1..6),
        seed in any::<u64>(),
    ) {
        let yaml = scenario_yaml(&faults);
        let s = scenario::parse(Path::new("prop.yaml"), yaml.as_bytes()).expect("generated scenario is valid");
        let outcome = sim(&s, seed).expect("sim runs");
        let verdicts = judge(&s, &outcome.events);
        prop_assert!(verdicts[0].held, "single-leader violated: {}\n{yaml}", verdicts[0].message);
        // Liveness, for correct agents: someone leads again after the last fault.
        prop_assert!(verdicts[1].held, "leader-reacquired violated: {}\n{yaml}", verdicts[1].message);
    }
}

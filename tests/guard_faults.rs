//! A failed ADD leaves nothing that could later read as enforced: with a fault injected at
//! each step (`WEFT_GUARD_FAULT`, a test hook that can only make ADD fail), ADD fails with
//! a CNI error, no `weft_guard` table remains in the pod, no state record remains, and a
//! later CHECK reports the pod as not enforced.

mod guard_support;

use guard_support::*;
use serde_json::json;

const STEPS: [&str; 5] = [
    "state-write",
    "before-install",
    "in-batch",
    "after-install",
    "verify",
];

fn state_files(lab: &Lab) -> Vec<String> {
    let dir = lab.state_dir().join("guardnet");
    match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_fault_at_any_step_fails_add_and_leaves_nothing_enforced() {
    let lab = Lab::new("ft");
    let bridge_only = lab.chain("1.0.0", vec![lab.bridge(false)]);
    for step in STEPS {
        let pod = lab.pod("faulty").with_annotations(opted_in(PROXY_UID));
        let prev = bridge_only.add(&pod.att).expect("bridge ADD");
        let request = lab.guard_request("1.0.0", json!({}), &pod, Some(&prev));

        let reply = lab.run_guard("ADD", Some(&pod), &request, &[("WEFT_GUARD_FAULT", step)]);
        let (code, msg) = reply.failure(&format!("ADD with a fault at {step}"));
        eprintln!("ADD with a fault at {step}: code {code}: {msg}");
        assert!(code >= 100, "{step}: code {code}: {msg}");
        assert!(!lab.has_fence(&pod), "{step}: a weft_guard table remains");
        assert!(
            state_files(&lab).is_empty(),
            "{step}: state remains: {:?}",
            state_files(&lab)
        );

        let check = lab.run_guard("CHECK", Some(&pod), &request, &[]);
        let (code, msg) = check.failure(&format!("CHECK after a fault at {step}"));
        assert_eq!(code, 100, "{step}: {msg}");
        assert!(
            msg.contains("table inet weft_guard is missing"),
            "{step}: {msg}"
        );

        bridge_only.del(&pod.att, Some(&prev)).expect("bridge DEL");
    }
}

#[test]
fn without_a_fault_the_same_requests_enforce() {
    let lab = Lab::new("fo");
    let bridge_only = lab.chain("1.0.0", vec![lab.bridge(false)]);
    let pod = lab.pod("healthy").with_annotations(opted_in(PROXY_UID));
    let prev = bridge_only.add(&pod.att).expect("bridge ADD");
    let request = lab.guard_request("1.0.0", json!({}), &pod, Some(&prev));
    // An unknown step name is ignored: the hook can only ever make a known step fail.
    let reply = lab.run_guard(
        "ADD",
        Some(&pod),
        &request,
        &[("WEFT_GUARD_FAULT", "no-such-step")],
    );
    assert!(reply.success(), "{reply:#?}");
    assert!(lab.has_fence(&pod));
    assert_eq!(state_files(&lab).len(), 1);
    assert!(lab.run_guard("CHECK", Some(&pod), &request, &[]).success());
    assert!(lab.run_guard("DEL", Some(&pod), &request, &[]).success());
    assert!(!lab.has_fence(&pod));
    assert!(state_files(&lab).is_empty());
    bridge_only.del(&pod.att, Some(&prev)).expect("bridge DEL");
}

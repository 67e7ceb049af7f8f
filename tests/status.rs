//! `weft status` on a lab node: healthy when everything is in place, failing and saying
//! why when something the node's configuration uses is missing. Root only.

use weft::lab::netns;

mod common;
use common::TestLab;

fn status(lab: &TestLab, pin_root: &std::path::Path) -> weft_testkit::Output {
    let node = lab.state.node(1).unwrap();
    let conf = node.conflist.parent().unwrap().to_path_buf();
    weft_testkit::run(
        weft_testkit::cmd_in(&netns::path_of(&node.netns), env!("CARGO_BIN_EXE_weft")).args([
            "status",
            "--cni-conf-dir",
            conf.to_str().unwrap(),
            "--cni-bin-dir",
            lab.state.dir.join("cni-bin").to_str().unwrap(),
            "--pin-root",
            pin_root.to_str().unwrap(),
        ]),
    )
}

#[test]
fn status_reports_a_healthy_node_and_fails_naming_what_is_missing() {
    let lab = TestLab::up(1, 1);
    let node = lab.state.node(1).unwrap().clone();
    let ok = status(&lab, &node.pin_root);
    assert!(ok.success(), "{}{}", ok.stdout, ok.stderr);
    for expected in [
        "plugins weft",
        "answers VERSION",
        "loaded: maps and programs pinned",
        "ready",
        "reconciler cni-config: ok",
        "store Node: 1 objects, 0 refused",
        "NOT chained",
    ] {
        assert!(
            ok.stdout.contains(expected),
            "missing {expected:?} in:\n{}",
            ok.stdout
        );
    }

    // The conflist chains the guard: status now reports it chained.
    let conf = std::fs::read_to_string(&node.conflist).unwrap();
    let mut list: serde_json::Value = serde_json::from_str(&conf).unwrap();
    list["plugins"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "weft-guard"}));
    let chained = node.conflist.with_file_name("00-guarded.conflist");
    std::fs::write(&chained, list.to_string()).unwrap();
    let guarded = status(&lab, &node.pin_root);
    assert!(guarded.success(), "{}", guarded.stdout);
    assert!(
        guarded.stdout.contains("chained in") && !guarded.stdout.contains("NOT chained"),
        "{}",
        guarded.stdout
    );

    // A datapath that is not there fails the report.
    let missing = status(&lab, &lab.state.dir.join("no-such-pins"));
    assert!(!missing.success(), "{}", missing.stdout);
    assert!(missing.stdout.contains("not loaded"), "{}", missing.stdout);
}

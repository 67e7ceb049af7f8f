//! CHECK proves enforcement: after each kind of tampering (done with the `nft` binary, as an
//! attacker inside the pod's namespace would) CHECK fails with code 100 and a message that
//! names the difference; an intact fence passes.

mod guard_support;

use guard_support::*;
use serde_json::json;
use weft::chain::ChainError;

/// A fenced pod; returns the CHECK error (code, message) after `tamper` ran in its namespace.
fn check_after(tag: &str, tamper: impl FnOnce(&Pod)) -> (u32, String) {
    let lab = Lab::new(tag);
    let pod = lab.pod("tampered").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    chain
        .check(&pod.att, &result)
        .expect("CHECK passes before tampering");
    tamper(&pod);
    let outcome = match chain.check(&pod.att, &result) {
        Ok(()) => panic!("CHECK passed after tampering"),
        Err(ChainError::Plugin { plugin, error, .. }) => {
            assert_eq!(
                plugin, "weft-guard",
                "the guard is the plugin that fails: {}",
                error.msg
            );
            (error.code, error.msg)
        }
        Err(other) => panic!("CHECK failed in an unexpected way: {other}"),
    };
    chain
        .del(&pod.att, Some(&result))
        .expect("DEL after tampering");
    outcome
}

#[track_caller]
fn assert_names(outcome: (u32, String), words: &[&str]) {
    let (code, msg) = outcome;
    eprintln!("CHECK said: {msg}");
    assert_eq!(code, 100, "{msg}");
    for word in words {
        assert!(msg.contains(word), "message does not name {word:?}: {msg}");
    }
}

#[test]
fn accept_inserted_ahead_is_named() {
    let outcome = check_after("ta", |pod| {
        pod.nft_ok(&["insert", "rule", "inet", "weft_guard", "output", "accept"]);
    });
    assert_names(
        outcome,
        &[
            "rule #1 `accept` is not part of the fence",
            "ahead of `oifname \"lo\" accept`",
        ],
    );
}

#[test]
fn foreign_chain_running_first_is_named() {
    let outcome = check_after("tf", |pod| {
        pod.nft_ok(&["add", "table", "ip", "weftevil"]);
        pod.nft_ok(&[
            "add",
            "chain",
            "ip",
            "weftevil",
            "early",
            "{ type filter hook output priority -300; policy accept; }",
        ]);
    });
    assert_names(
        outcome,
        &["chain ip weftevil early hooks output at priority -300"],
    );
}

#[test]
fn foreign_chain_running_later_is_fine() {
    let lab = Lab::new("tl");
    let pod = lab.pod("later").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    pod.nft_ok(&["add", "table", "inet", "weftfilter"]);
    pod.nft_ok(&[
        "add",
        "chain",
        "inet",
        "weftfilter",
        "out",
        "{ type filter hook output priority 0; policy accept; }",
    ]);
    chain
        .check(&pod.att, &result)
        .expect("a chain after the fence cannot bypass it");
}

#[test]
fn deleted_table_is_named() {
    let outcome = check_after("td", |pod| {
        pod.nft_ok(&["delete", "table", "inet", "weft_guard"]);
    });
    assert_names(outcome, &["table inet weft_guard is missing"]);
}

#[test]
fn flushed_chain_is_named() {
    let outcome = check_after("tx", |pod| {
        pod.nft_ok(&["flush", "chain", "inet", "weft_guard", "output"]);
    });
    assert_names(outcome, &["chain output has no rules (flushed)"]);
}

#[test]
fn another_uid_is_named() {
    let outcome = check_after("tu", |pod| {
        let listing = pod.nft_ok(&["-a", "list", "chain", "inet", "weft_guard", "output"]);
        let handle = listing
            .lines()
            .find(|l| l.contains(&format!("meta skuid {PROXY_UID} accept")))
            .and_then(|l| l.split("# handle ").nth(1))
            .map(str::trim)
            .expect("the skuid rule and its handle")
            .to_string();
        pod.nft_ok(&[
            "replace",
            "rule",
            "inet",
            "weft_guard",
            "output",
            "handle",
            &handle,
            "meta",
            "skuid",
            "1000",
            "accept",
        ]);
    });
    assert_names(
        outcome,
        &["exempts uid 1000", &format!("proxy uid is {PROXY_UID}")],
    );
}

#[test]
fn dormant_table_is_named() {
    let outcome = check_after("tz", |pod| {
        pod.nft_ok(&["add", "table", "inet", "weft_guard", "{ flags dormant; }"]);
    });
    assert_names(outcome, &["table inet weft_guard is dormant"]);
}

#[test]
fn stale_fence_on_a_pod_that_no_longer_opts_in_is_reported() {
    let lab = Lab::new("ts");
    let pod = lab.pod("stale").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    // The annotations change: the pod no longer asks for a fence.
    let mut off = opted_in(PROXY_UID);
    off.insert(ENABLED.into(), json!("false"));
    let pod = pod.with_annotations(off);
    let error = chain_error(chain.check(&pod.att, &result));
    assert!(
        error.contains("does not opt in") && error.contains("stale fence"),
        "{error}"
    );
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

#[test]
fn not_opted_in_pod_passes_check_without_a_fence() {
    let lab = Lab::new("tn");
    let pod = lab.pod("plain").with_annotations(serde_json::Map::new());
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    assert!(
        !lab.has_fence(&pod),
        "no fence for a pod that does not opt in"
    );
    chain.check(&pod.att, &result).expect("CHECK");
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

/// Removing the frame fence (as a CAP_NET_ADMIN holder could) leaves raw frames free: CHECK
/// names it.
#[test]
fn deleted_frame_fence_is_named() {
    let outcome = check_after("tr", |pod| {
        pod.nft_ok(&["delete", "table", "netdev", "weft_guard"]);
    });
    assert_names(outcome, &["table netdev weft_guard is missing"]);
}

/// Without the stamping chain nothing the fence accepts is stamped, and the frame fence
/// would drop the pod's own allowed traffic while the fence looked intact.
#[test]
fn deleted_stamp_chain_is_named() {
    let outcome = check_after("tp", |pod| {
        pod.nft_ok(&["delete", "chain", "inet", "weft_guard", "stamp"]);
    });
    assert_names(
        outcome,
        &["chain stamp is missing from table inet weft_guard"],
    );
}

/// A rule that lets frames through ahead of the drop, and a device the frame fence does not
/// cover (one added after ADD), are both named.
#[test]
fn frame_fence_gaps_are_named() {
    let outcome = check_after("tg", |pod| {
        pod.nft_ok(&["insert", "rule", "netdev", "weft_guard", "egress", "accept"]);
    });
    assert_names(
        outcome,
        &["chain egress: rule #1 `accept` is not part of the fence"],
    );
    let outcome = check_after("td", |pod| {
        pod.ns.ip(&[
            "link", "add", "weftv0", "type", "veth", "peer", "name", "weftv1",
        ]);
    });
    assert_names(
        outcome,
        &["devices = { eth0, weftv0, weftv1 }", "devices = { eth0 }"],
    );
    let outcome = check_after("te", |pod| {
        pod.nft_ok(&["add", "table", "netdev", "weftearly"]);
        pod.nft_ok(&[
            "add",
            "chain",
            "netdev",
            "weftearly",
            "e",
            "{ type filter hook egress device eth0 priority -500; policy accept; }",
        ]);
    });
    assert_names(
        outcome,
        &["chain netdev weftearly e hooks egress of eth0 at priority -500"],
    );
}

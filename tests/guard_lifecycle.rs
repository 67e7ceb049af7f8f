//! The guard's place in a chain and its bookkeeping: prevResult passes through converted to
//! the requested version, DEL only ever removes the fence from the namespace ADD fenced,
//! GC removes the fences of attachments that are no longer valid, STATUS reports
//! readiness, and the guard chains after weft itself as after Debian's bridge.

mod guard_support;

use std::net::IpAddr;

use guard_support::probe;
use guard_support::*;
use serde_json::{json, Value};
use weft_cni::{CniResult, Version};
use weft_testkit::Netns;

#[test]
fn probe_entry() {
    probe::entry();
}

fn state_records(lab: &Lab) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(lab.state_dir().join("guardnet"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn gc_request(lab: &Lab, valid: Option<&[&Pod]>) -> Value {
    let mut conf = lab.guard(json!({}));
    conf["cniVersion"] = json!("1.1.0");
    conf["name"] = json!("guardnet");
    if let Some(valid) = valid {
        conf["cni.dev/valid-attachments"] = valid
            .iter()
            .map(|p| json!({"containerID": p.att.container_id, "ifname": p.att.ifname}))
            .collect();
    }
    conf
}

#[test]
fn gc_removes_fences_of_attachments_no_longer_valid() {
    let lab = Lab::new("gc");
    let chain = lab.guarded_chain(false, json!({}));
    let keep = lab.pod("keep").with_annotations(opted_in(PROXY_UID));
    let stale = lab.pod("stale").with_annotations(opted_in(PROXY_UID));
    let gone = lab.pod("gone").with_annotations(opted_in(PROXY_UID));
    for pod in [&keep, &stale, &gone] {
        chain.add(&pod.att).expect("ADD");
    }
    assert_eq!(state_records(&lab).len(), 3);
    drop(gone); // its namespace disappears without a DEL

    // No list at all: nothing is collected.
    assert!(lab
        .run_guard("GC", None, &gc_request(&lab, None), &[])
        .success());
    assert_eq!(state_records(&lab).len(), 3);
    assert!(lab.has_fence(&stale));

    let reply = lab.run_guard("GC", None, &gc_request(&lab, Some(&[&keep])), &[]);
    assert!(reply.success(), "{reply:#?}");
    assert!(lab.has_fence(&keep), "a valid attachment keeps its fence");
    assert!(lab.has_frame_fence(&keep), "and its frame fence");
    assert!(!lab.has_fence(&stale), "a stale attachment loses its fence");
    assert!(!lab.has_frame_fence(&stale), "and its frame fence");
    assert_eq!(
        state_records(&lab),
        vec![format!("{}:eth0.json", keep.att.container_id)]
    );
    // Idempotent.
    assert!(lab
        .run_guard("GC", None, &gc_request(&lab, Some(&[&keep])), &[])
        .success());
    assert!(lab.has_fence(&keep));
}

#[test]
fn del_never_unfences_another_namespace_at_the_same_path() {
    let lab = Lab::new("dr");
    let chain = lab.guarded_chain(false, json!({}));
    let guard_only = lab.chain("1.0.0", vec![lab.guard(json!({}))]);
    let first = lab.pod("first").with_annotations(opted_in(PROXY_UID));
    let first_result = chain.add(&first.att).expect("ADD first");

    // The first pod's namespace goes away and a new one appears at the same path.
    let name = first.ns.name().to_string();
    let Pod { ns, att: first_att } = first;
    drop(ns);
    let reused = Netns::named(&name);
    reused.sysctl("net.ipv6.conf.default.accept_dad", "0");
    let mut second_att = first_att.clone();
    second_att.container_id = weft_testkit::unique_name("ct");
    let second = Pod {
        ns: reused,
        att: second_att,
    }
    .with_annotations(opted_in(PROXY_UID + 1));
    let second_result = chain.add(&second.att).expect("ADD second, same path");
    assert!(lab.has_fence(&second));

    // DEL of the first attachment names the path, which now holds the second pod.
    guard_only
        .del(&first_att, Some(&first_result))
        .expect("DEL first");
    assert!(
        lab.has_fence(&second),
        "DEL of another namespace's attachment must not un-fence this one"
    );
    chain
        .check(&second.att, &second_result)
        .expect("the second pod is still enforced");

    chain
        .del(&second.att, Some(&second_result))
        .expect("DEL second");
    assert!(!lab.has_fence(&second));
    // The bridge still holds the first attachment's address: release it.
    lab.chain("1.0.0", vec![lab.bridge(false)])
        .del(&first_att, Some(&first_result))
        .expect("bridge DEL first");
    assert!(state_records(&lab).is_empty(), "{:?}", state_records(&lab));
}

#[test]
fn del_with_an_empty_netns_removes_only_the_record() {
    let lab = Lab::new("de");
    let chain = lab.guarded_chain(false, json!({}));
    let pod = lab.pod("emptyns").with_annotations(opted_in(PROXY_UID));
    let result = chain.add(&pod.att).expect("ADD");
    let mut no_netns = pod.att.clone();
    no_netns.netns = String::new();
    let guard_only = lab.chain("1.0.0", vec![lab.guard(json!({}))]);
    guard_only
        .del(&no_netns, None)
        .expect("DEL with CNI_NETNS empty");
    assert!(state_records(&lab).is_empty());
    assert!(
        lab.has_fence(&pod),
        "without a namespace nothing in it is touched"
    );
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

#[test]
fn prev_result_passes_through_converted() {
    let lab = Lab::new("pv");
    for (chain_version, declared) in [("1.0.0", Version::V1_0_0), ("0.4.0", Version::V0_4_0)] {
        for opted in [true, false] {
            let bridge_only = lab.chain(chain_version, vec![lab.bridge(true)]);
            let guarded = lab.chain(chain_version, vec![lab.bridge(true), lab.guard(json!({}))]);
            let annotations = if opted {
                opted_in(PROXY_UID)
            } else {
                serde_json::Map::new()
            };
            // The bridge's own answer for one pod, then the guard's answer for it.
            let pod = lab.pod("versions").with_annotations(annotations);
            let bridge_result = bridge_only.add(&pod.att).expect("bridge ADD");
            let request = lab.guard_request(chain_version, json!({}), &pod, Some(&bridge_result));
            let reply = lab.run_guard("ADD", Some(&pod), &request, &[]);
            assert!(reply.success(), "{reply:#?}");
            assert_eq!(
                reply.json(),
                bridge_result.to_value(declared),
                "{chain_version}: the guard adds nothing"
            );
            assert_eq!(reply.json()["cniVersion"], chain_version);
            assert!(lab.run_guard("DEL", Some(&pod), &request, &[]).success());
            bridge_only
                .del(&pod.att, Some(&bridge_result))
                .expect("bridge DEL");

            // Through the whole chain: the result is in the chain's version.
            let pod = lab.pod("versions2").with_annotations(if opted {
                opted_in(PROXY_UID)
            } else {
                serde_json::Map::new()
            });
            let result = guarded.add(&pod.att).expect("ADD");
            assert_eq!(result.cni_version, declared);
            assert_eq!(lab.has_fence(&pod), opted);
            guarded.del(&pod.att, Some(&result)).expect("DEL");
        }
    }
}

#[test]
fn prev_result_in_another_version_is_converted() {
    let lab = Lab::new("pc");
    let bridge_old = lab.chain("0.4.0", vec![lab.bridge(true)]);
    let pod = lab.pod("convert").with_annotations(opted_in(PROXY_UID));
    let old = bridge_old.add(&pod.att).expect("bridge ADD in 0.4.0");
    let old_json = old.to_value(Version::V0_4_0);
    assert!(
        old_json["ips"][0].get("version").is_some(),
        "0.4.0 results carry a per-IP version"
    );
    for target in ["1.0.0", "1.1.0"] {
        let mut request = lab.guard_request(target, json!({}), &pod, None);
        request["prevResult"] = old_json.clone();
        let reply = lab.run_guard("ADD", Some(&pod), &request, &[]);
        assert!(reply.success(), "{reply:#?}");
        let out = reply.json();
        assert_eq!(out["cniVersion"], target);
        assert!(
            out["ips"][0].get("version").is_none(),
            "{target} results have no per-IP version: {out}"
        );
        let parsed = CniResult::from_value(&out, None).expect("a valid result");
        assert_eq!(parsed.ips, old.ips);
        assert_eq!(parsed.routes, old.routes);
    }
    bridge_old.del(&pod.att, Some(&old)).expect("bridge DEL");
}

#[test]
fn add_without_prev_result_is_refused() {
    let lab = Lab::new("np");
    let pod = lab.pod("alone").with_annotations(opted_in(PROXY_UID));
    let request = lab.guard_request("1.0.0", json!({}), &pod, None);
    let (code, msg) = lab
        .run_guard("ADD", Some(&pod), &request, &[])
        .failure("ADD without prevResult");
    assert_eq!(code, 7, "{msg}");
    assert!(msg.contains("prevResult"), "{msg}");
    assert!(!lab.has_fence(&pod));
}

#[test]
fn invalid_netconf_fields_are_named() {
    let lab = Lab::new("nc");
    let pod = lab.pod("conf").with_annotations(opted_in(PROXY_UID));
    let bridge_only = lab.chain("1.0.0", vec![lab.bridge(false)]);
    let prev = bridge_only.add(&pod.att).expect("bridge ADD");
    for (extra, field) in [
        (json!({"namespaces": ["a"]}), "kubeconfig"),
        (json!({"apiTimeoutMs": "soon"}), "apiTimeoutMs"),
        (json!({"allowRootProxy": 1}), "allowRootProxy"),
        (json!({"stateDir": "relative"}), "stateDir"),
    ] {
        let request = lab.guard_request("1.0.0", extra.clone(), &pod, Some(&prev));
        let (code, msg) = lab
            .run_guard("ADD", Some(&pod), &request, &[])
            .failure("ADD with a bad netconf");
        assert_eq!(code, 7, "{extra}: {msg}");
        assert!(msg.contains(field), "{extra}: {msg}");
    }
    bridge_only.del(&pod.att, Some(&prev)).expect("bridge DEL");
}

#[test]
fn status_reports_readiness() {
    let lab = Lab::new("st");
    let status = |extra: Value| {
        let mut conf = lab.guard(extra);
        conf["cniVersion"] = json!("1.1.0");
        conf["name"] = json!("guardnet");
        lab.run_guard("STATUS", None, &conf, &[])
    };
    let ok = status(json!({}));
    assert!(ok.success(), "{ok:#?}");
    for (extra, words) in [
        (
            json!({"stateDir": "/proc/weft-guard-state"}),
            "/proc/weft-guard-state",
        ),
        (
            json!({"kubeconfig": "/nonexistent/weft/kc", "namespaces": ["*"]}),
            "/nonexistent/weft/kc",
        ),
        (json!({"apiTimeoutMs": 0}), "apiTimeoutMs"),
    ] {
        let (code, msg) = status(extra.clone()).failure("STATUS");
        assert_eq!(code, 50, "{extra}: {msg}");
        assert!(msg.contains(words), "{extra}: {msg}");
    }
}

/// weft (the main plugin) as the primary, the guard after it.
#[test]
fn chained_after_weft() {
    let lab = Lab::new("wf");
    let weft = json!({
        "type": "weft",
        "ipam": {"ranges": [[{"subnet": "10.78.0.0/24"}]], "dataDir": lab.dir.path().join("weft-ipam")}
    });
    let weft_only = lab.chain("1.1.0", vec![weft.clone()]);
    let chain = lab.chain("1.1.0", vec![weft, lab.guard(json!({}))]);
    let pod = lab.pod("after-weft").with_annotations(opted_in(PROXY_UID));
    let result = chain.add(&pod.att).expect("ADD weft + guard");
    assert_eq!(result.cni_version, Version::V1_1_0);
    assert!(
        !result.ips.is_empty(),
        "weft's addresses pass through: {result:?}"
    );
    assert!(lab.has_fence(&pod));
    let pod_v4 = pod.address(false).expect("weft gave the pod an address");
    assert!(
        result.ips.iter().any(|ip| ip.address.addr() == pod_v4),
        "{result:?}"
    );
    let world = PongServer::start(lab.world.path());
    let to_world = |uid, timeout| {
        probe::run(
            pod.path(),
            uid,
            &probe::tcp_action(IpAddr::V4(WORLD_V4), world.port, timeout),
        )
    };
    assert_eq!(
        to_world(PROXY_UID, probe::CONNECT_TIMEOUT_MS),
        "connected",
        "the proxy reaches the world through weft"
    );
    assert_eq!(to_world(OTHER_UID, probe::REFUSAL_TIMEOUT_MS), "refused");
    assert_eq!(
        probe::run(pod.path(), OTHER_UID, &format!("udp {WORLD_V4} 53")),
        "eperm"
    );
    chain.check(&pod.att, &result).expect("CHECK weft + guard");
    chain
        .del(&pod.att, Some(&result))
        .expect("DEL weft + guard");
    assert!(!lab.has_fence(&pod));
    let _ = weft_only;
}

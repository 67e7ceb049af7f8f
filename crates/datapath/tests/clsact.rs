//! The clsact/cls_bpf fallback, forced on this TCX-capable kernel: pods and the
//! overlay attach through weft's filter (clsact ingress, pref 1, handle 1,
//! direct-action), reuse it, get its program swapped in place on upgrade, and lose
//! exactly that filter on detach. Also: an existing attachment decides the
//! mechanism, so an interface never keeps both.

mod common;

use aya::programs::links::FdLink;
use aya::programs::tc::{TcAttachOptions, TcAttachType};
use aya::programs::{LinkOrder, SchedClassifier};
use common::hooks::{
    assert_weft_filter, ingress_filters, pin_other_program, pinned_program_id,
    tcx_ingress_programs, weft_filters, Node,
};
use common::{in_netns, PinRoot};
use std::net::IpAddr;
use std::path::Path;
use weft_datapath::{
    pod, AttachMode, Datapath, EndpointInfo, Error, LinkChange, Program, ProgramChange,
};
use weft_testkit::Netns;

fn from_pod_id(root: &Path) -> u32 {
    pinned_program_id(&root.join("progs/from_pod"))
}

fn tc(ns: &Netns, args: &[&str]) {
    let mut full = vec!["-n", ns.name()];
    full.extend_from_slice(args);
    weft_testkit::run_ok(std::process::Command::new("tc").args(&full));
}

#[test]
fn pod_filter_is_created_reused_and_detached_exactly() {
    let root = PinRoot::new("cf");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    let ifindex = in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            drop(Datapath::load_or_adopt(&path).expect("load"));
            let ifindex = common::ifindex(&host);
            let change = pod::attach_pod_with_mode(&path, ifindex, &host, AttachMode::Clsact)
                .expect("attach");
            assert_eq!(change, LinkChange::Created);
            assert_eq!(tcx_ingress_programs(&host), Vec::<u32>::new(), "no TCX");
            ifindex
        }
    });
    let from_pod = from_pod_id(&path);
    assert_weft_filter(&node.ns, &host, &path, Program::FromPod, from_pod);
    assert!(
        !path.join("links/pods").join(&host).exists(),
        "a filter needs no pin"
    );

    // A retried ADD changes nothing, whatever mode it asks for: the filter decides.
    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            for mode in [AttachMode::Clsact, AttachMode::Auto, AttachMode::Tcx] {
                let change = pod::attach_pod_with_mode(&path, ifindex, &host, mode).expect("again");
                assert_eq!(change, LinkChange::Unchanged, "{mode}");
                assert_eq!(tcx_ingress_programs(&host), Vec::<u32>::new(), "{mode}");
            }
        }
    });
    assert_weft_filter(&node.ns, &host, &path, Program::FromPod, from_pod);

    // Someone else's filter at another pref survives our detach.
    tc(
        &node.ns,
        &[
            "filter", "add", "dev", &host, "ingress", "pref", "2", "protocol", "all", "u32",
            "match", "u32", "0", "0",
        ],
    );
    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            pod::detach_pod(&path, &host).expect("detach");
            pod::detach_pod(&path, &host).expect("detach is idempotent");
        }
    });
    let left = ingress_filters(&node.ns, &host);
    assert!(
        weft_filters(&node.ns, &host, &path, Program::FromPod).is_empty(),
        "{left:?}"
    );
    assert!(
        !left.is_empty() && left.iter().all(|f| f.pref == 2 && f.kind == "u32"),
        "only the foreign filter is left: {left:?}"
    );
}

#[test]
fn detach_after_the_veth_is_gone_succeeds() {
    let root = PinRoot::new("cg");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    let ns_name = node.ns.name().to_string();
    in_netns(node.ns.path(), move || {
        drop(Datapath::load_or_adopt(&path).expect("load"));
        pod::attach_pod_with_mode(&path, common::ifindex(&host), &host, AttachMode::Clsact)
            .expect("attach");
        weft_testkit::run_ok(
            std::process::Command::new("ip").args(["-n", &ns_name, "link", "del", &host]),
        );
        // The filter went with the veth: DEL and GC have nothing left to do.
        pod::detach_pod(&path, &host).expect("detach after the veth is gone");
        assert_eq!(
            pod::pinned_pod_links(&path).expect("pinned links"),
            Vec::<String>::new()
        );
    });
}

#[test]
fn a_foreign_filter_at_our_place_is_refused_and_left_alone() {
    let root = PinRoot::new("cx");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    // A classic-BPF filter that never matches, at weft's pref and handle.
    tc(&node.ns, &["qdisc", "add", "dev", &host, "clsact"]);
    tc(
        &node.ns,
        &[
            "filter",
            "add",
            "dev",
            &host,
            "ingress",
            "pref",
            "1",
            "handle",
            "1",
            "protocol",
            "all",
            "bpf",
            "bytecode",
            "1,6 0 0 0,",
        ],
    );
    let before = ingress_filters(&node.ns, &host);
    assert_eq!(before.len(), 1, "{before:?}");
    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            drop(Datapath::load_or_adopt(&path).expect("load"));
            let ifindex = common::ifindex(&host);
            match pod::attach_pod_with_mode(&path, ifindex, &host, AttachMode::Clsact) {
                Err(e @ Error::ForeignFilter { .. }) => {
                    assert!(e.to_string().contains(&host), "{e}")
                }
                other => panic!("expected ForeignFilter, got {other:?}"),
            }
            pod::detach_pod(&path, &host).expect("detach leaves it alone");
        }
    });
    assert_eq!(ingress_filters(&node.ns, &host), before);
}

#[test]
fn overlay_filter_attaches_outlives_the_agent_and_detaches() {
    let root = PinRoot::new("co");
    let ns = Netns::new("nd");
    // Interface names may contain dots; the filter's name does not depend on them.
    let vxlan = weft_testkit::unique_name("vx").replacen("weft", "weft.", 1);
    ns.ip(&[
        "link", "add", &vxlan, "type", "vxlan", "id", "42", "dstport", "4789",
    ]);
    let path = root.path().to_path_buf();
    let from_overlay = in_netns(ns.path(), {
        let (path, vxlan) = (path.clone(), vxlan.clone());
        move || {
            let mut dp = Datapath::load_or_adopt(&path).expect("load");
            dp.set_attach_mode(AttachMode::Clsact);
            assert_eq!(dp.attach_mode(), AttachMode::Clsact);
            assert_eq!(
                dp.attach_overlay(&vxlan).expect("attach"),
                LinkChange::Created
            );
            assert_eq!(
                dp.attach_overlay(&vxlan).expect("again"),
                LinkChange::Unchanged
            );
            assert_eq!(tcx_ingress_programs(&vxlan), Vec::<u32>::new());
            dp.program(Program::FromOverlay).expect("from_overlay").id
        }
    });
    // The Datapath is gone: the filter is kernel state and stays.
    assert_weft_filter(&ns, &vxlan, &path, Program::FromOverlay, from_overlay);
    assert!(!path
        .join("links/overlay")
        .join(vxlan.replace('.', ":"))
        .exists());

    in_netns(ns.path(), {
        let (path, vxlan) = (path.clone(), vxlan.clone());
        move || {
            // A restarted agent in the default (auto) mode keeps using the filter.
            let dp = Datapath::load_or_adopt(&path).expect("reload");
            assert_eq!(
                dp.program(Program::FromOverlay).expect("overlay").change,
                ProgramChange::Adopted
            );
            assert_eq!(
                dp.attach_overlay(&vxlan).expect("reattach"),
                LinkChange::Unchanged
            );
            assert_eq!(tcx_ingress_programs(&vxlan), Vec::<u32>::new());
            dp.detach_overlay(&vxlan).expect("detach");
            dp.detach_overlay(&vxlan).expect("detach is idempotent");
        }
    });
    assert_eq!(ingress_filters(&ns, &vxlan), Vec::new());
}

#[test]
fn reload_with_a_changed_program_swaps_each_filters_program_in_place() {
    let root = PinRoot::new("cr");
    // Another datapath (another pin root) in the same namespace: its filter is not ours.
    let other_root = PinRoot::new("cq");
    let node = Node::new(3);
    let path = root.path().to_path_buf();
    let other = other_root.path().to_path_buf();
    let hosts = node.host_veths.clone();

    let old_id = in_netns(node.ns.path(), {
        let (path, other, hosts) = (path.clone(), other.clone(), hosts.clone());
        move || {
            drop(Datapath::load_or_adopt(&path).expect("first load"));
            drop(Datapath::load_or_adopt(&other).expect("other datapath"));
            let host = &hosts[2];
            pod::attach_pod_with_mode(&other, common::ifindex(host), host, AttachMode::Clsact)
                .expect("attach to the other datapath");
            // An "older" from_pod is pinned and running on two pods' filters.
            let old_id = pin_other_program(&path, Program::FromPod, Program::FromOverlay);
            for host in &hosts[..2] {
                pod::attach_pod_with_mode(&path, common::ifindex(host), host, AttachMode::Clsact)
                    .expect("attach to old");
            }
            old_id
        }
    });
    for host in &hosts[..2] {
        assert_weft_filter(&node.ns, host, &path, Program::FromPod, old_id);
    }
    let other_id = from_pod_id(&other);
    assert_weft_filter(&node.ns, &hosts[2], &other, Program::FromPod, other_id);

    // The new agent replaces it: each filter keeps its place and gets the new program.
    let new_id = in_netns(node.ns.path(), {
        let path = path.clone();
        move || {
            let dp = Datapath::load_or_adopt(&path).expect("upgrade");
            let from_pod = dp.program(Program::FromPod).expect("from_pod");
            assert_eq!(
                from_pod.change,
                ProgramChange::Replaced {
                    previous_id: old_id
                }
            );
            assert_eq!(from_pod.links.updated, 2, "{:?}", from_pod.links);
            from_pod.id
        }
    });
    assert_ne!(new_id, old_id);
    for host in &hosts[..2] {
        assert_weft_filter(&node.ns, host, &path, Program::FromPod, new_id);
        assert_eq!(ingress_filters(&node.ns, host).len(), 1, "no second filter");
    }
    assert_weft_filter(&node.ns, &hosts[2], &other, Program::FromPod, other_id);
    assert!(!path.join("progs/from_pod_staging").exists());
    assert_eq!(from_pod_id(&path), new_id);

    // Nothing left to move on the next start.
    in_netns(node.ns.path(), move || {
        let dp = Datapath::load_or_adopt(&path).expect("restart");
        let from_pod = dp.program(Program::FromPod).expect("from_pod");
        assert_eq!(from_pod.change, ProgramChange::Adopted);
        assert_eq!(from_pod.links.updated, 0);
    });
}

fn verify_reports_a_stale_or_missing_attachment(mode: AttachMode) {
    let root = PinRoot::new("cv");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    let addr: IpAddr = "10.244.1.7".parse().unwrap();
    let verify = {
        let (path, host, ns) = (path.clone(), host.clone(), node.ns.path().to_path_buf());
        move || {
            let (path, host) = (path.clone(), host.clone());
            in_netns(&ns, move || {
                pod::verify_pod(&path, &host, common::ifindex(&host), &[addr]).expect("verify")
            })
        }
    };

    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            drop(Datapath::load_or_adopt(&path).expect("load"));
            let ifindex = common::ifindex(&host);
            let info = EndpointInfo {
                ifindex,
                mac: [2, 0, 0, 0, 0, 7],
            };
            pod::add_endpoint(&path, addr, info).expect("endpoint");
            pod::attach_pod_with_mode(&path, ifindex, &host, mode).expect("attach");
        }
    });
    assert_eq!(verify(), None, "{mode}: fully wired");

    // The pinned program changes under the attachment (a missed sweep).
    pin_other_program(&path, Program::FromPod, Program::FromOverlay);
    let problem = verify().unwrap_or_else(|| panic!("{mode}: stale program not reported"));
    assert!(
        problem.contains("not the pinned from_pod"),
        "{mode}: {problem}"
    );

    // ADD again repairs it.
    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            let change = pod::attach_pod_with_mode(&path, common::ifindex(&host), &host, mode)
                .expect("reattach");
            assert_eq!(change, LinkChange::Updated, "{mode}");
        }
    });
    assert_eq!(verify(), None, "{mode}: repaired");

    // The attachment is removed behind weft's back.
    match mode {
        AttachMode::Clsact => tc(
            &node.ns,
            &["filter", "del", "dev", &host, "ingress", "pref", "1"],
        ),
        _ => std::fs::remove_file(path.join("links/pods").join(&host)).expect("unpin"),
    }
    let problem = verify().unwrap_or_else(|| panic!("{mode}: missing attachment not reported"));
    assert!(
        problem.contains("no pod program is attached"),
        "{mode}: {problem}"
    );
}

#[test]
fn verify_pod_reports_a_deleted_or_stale_filter() {
    verify_reports_a_stale_or_missing_attachment(AttachMode::Clsact);
}

#[test]
fn verify_pod_reports_a_removed_or_stale_tcx_link() {
    verify_reports_a_stale_or_missing_attachment(AttachMode::Tcx);
}

#[test]
fn an_existing_tcx_link_decides_and_a_filter_beside_it_is_removed() {
    let root = PinRoot::new("cm");
    let node = Node::new(2);
    let path = root.path().to_path_buf();
    let hosts = node.host_veths.clone();
    let addr: IpAddr = "10.244.1.8".parse().unwrap();
    in_netns(node.ns.path(), {
        let (path, hosts) = (path.clone(), hosts.clone());
        move || {
            drop(Datapath::load_or_adopt(&path).expect("load"));
            let from_pod = from_pod_id(&path);

            // TCX first: a later ADD asking for clsact keeps the link.
            let host = &hosts[0];
            let ifindex = common::ifindex(host);
            pod::attach_pod_with_mode(&path, ifindex, host, AttachMode::Tcx).expect("tcx");
            let change = pod::attach_pod_with_mode(&path, ifindex, host, AttachMode::Clsact)
                .expect("again, asking for clsact");
            assert_eq!(change, LinkChange::Unchanged);
            assert_eq!(tcx_ingress_programs(host), [from_pod]);

            // A filter and, behind weft's back, a TCX link pinned for the same veth.
            let host = &hosts[1];
            let ifindex = common::ifindex(host);
            pod::add_endpoint(
                &path,
                addr,
                EndpointInfo {
                    ifindex,
                    mac: [2, 0, 0, 0, 0, 8],
                },
            )
            .expect("endpoint");
            pod::attach_pod_with_mode(&path, ifindex, host, AttachMode::Clsact).expect("filter");
            pin_tcx_link(&path, host);
            let problem = pod::verify_pod(&path, host, ifindex, &[addr])
                .expect("verify")
                .expect("both reported");
            assert!(problem.contains("twice"), "{problem}");

            // The next ADD converges on the link.
            let change =
                pod::attach_pod_with_mode(&path, ifindex, host, AttachMode::Auto).expect("fix");
            assert_eq!(change, LinkChange::Updated);
            assert_eq!(tcx_ingress_programs(host), [from_pod]);
            assert_eq!(
                pod::verify_pod(&path, host, ifindex, &[addr]).expect("verify"),
                None
            );
        }
    });
    for host in &hosts {
        assert_eq!(ingress_filters(&node.ns, host), Vec::new(), "{host}");
    }
}

/// Attaches the pinned from_pod at TCX ingress of `host` with aya and pins the link
/// where weft pins pod links (calling thread's namespace).
fn pin_tcx_link(root: &Path, host: &str) {
    let mut prog =
        SchedClassifier::from_pin(root.join("progs/from_pod")).expect("open pinned program");
    let id = prog
        .attach_with_options(
            host,
            TcAttachType::Ingress,
            TcAttachOptions::TcxOrder(LinkOrder::default()),
        )
        .expect("tcx attach");
    let link = FdLink::try_from(prog.take_link(id).expect("take link")).expect("fd link");
    link.pin(root.join("links/pods").join(host))
        .expect("pin link");
}

//! TCX attachment through pinned links: pods (CNI side) and the overlay (agent side),
//! and what happens to links when the agent reloads the same or a changed program.

mod common;

use aya::programs::links::{FdLink, PinnedLink};
use common::hooks::{pin_other_program, pinned_program_id, tcx_ingress_programs, Node};
use common::{in_netns, PinRoot};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weft_datapath::{pod, Datapath, LinkChange, Program, ProgramChange, RouteKind};
use weft_testkit::Netns;

/// (link id, program id) of the link pinned at `pin`.
fn pinned_link(pin: &Path) -> (u32, u32) {
    let link = FdLink::from(PinnedLink::from_pin(pin).expect("open pinned link"));
    let info = link.info().expect("link info");
    (info.id(), info.program_id())
}

#[test]
fn pod_link_is_pinned_outlives_every_fd_and_detaches() {
    let root = PinRoot::new("at");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    in_netns(node.ns.path(), move || {
        let from_pod = Datapath::load_or_adopt(&path)
            .expect("load")
            .program(Program::FromPod)
            .expect("from_pod")
            .id;
        // The Datapath is dropped: from here on this process holds no fd of the
        // program, and attach_pod closes everything it opens.
        let ifindex = common::ifindex(&host);
        let change = pod::attach_pod(&path, ifindex, &host).expect("attach");
        assert_eq!(change, LinkChange::Created);
        let pin = path.join("links/pods").join(&host);
        assert!(pin.exists(), "link pinned at {}", pin.display());
        assert_eq!(
            tcx_ingress_programs(&host),
            [from_pod],
            "attached via its pin only"
        );

        // A retried ADD changes nothing.
        let change = pod::attach_pod(&path, ifindex, &host).expect("attach again");
        assert_eq!(change, LinkChange::Unchanged);
        assert_eq!(tcx_ingress_programs(&host), [from_pod]);

        pod::detach_pod(&path, &host).expect("detach");
        assert!(!pin.exists());
        assert_eq!(tcx_ingress_programs(&host), Vec::<u32>::new());
        pod::detach_pod(&path, &host).expect("detach is idempotent");
    });
}

#[test]
fn the_pin_is_what_keeps_a_pod_link_alive() {
    let root = PinRoot::new("pk");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    in_netns(node.ns.path(), move || {
        drop(Datapath::load_or_adopt(&path).expect("load"));
        pod::attach_pod(&path, common::ifindex(&host), &host).expect("attach");
        assert_eq!(tcx_ingress_programs(&host).len(), 1);
        // Unpinning drops the last reference: the kernel detaches the link. It frees
        // an unpinned link from a workqueue, after an RCU grace period, so wait for
        // it (the bound only keeps a broken kernel from hanging the test).
        std::fs::remove_file(path.join("links/pods").join(&host)).expect("unpin");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !tcx_ingress_programs(&host).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(tcx_ingress_programs(&host), Vec::<u32>::new());
    });
}

#[test]
fn link_of_a_deleted_veth_is_defunct_and_just_unpinned() {
    let root = PinRoot::new("df");
    let node = Node::new(2);
    let path = root.path().to_path_buf();
    let hosts = node.host_veths.clone();
    let ns_name = node.ns.name().to_string();
    in_netns(node.ns.path(), move || {
        drop(Datapath::load_or_adopt(&path).expect("load"));
        for host in &hosts {
            pod::attach_pod(&path, common::ifindex(host), host).expect("attach");
        }
        let pods = path.join("links/pods");
        for host in &hosts {
            weft_testkit::run_ok(
                std::process::Command::new("ip").args(["-n", &ns_name, "link", "del", host]),
            );
        }
        // The CNI plugin's DEL after the veth is gone.
        pod::detach_pod(&path, &hosts[0]).expect("detach defunct link");
        assert!(!pods.join(&hosts[0]).exists());
        // The agent's reload sweeps the other one.
        let dp = Datapath::load_or_adopt(&path).expect("reload");
        let swept = dp.program(Program::FromPod).expect("from_pod").links;
        assert_eq!(swept.removed_defunct, 1);
        assert!(!pods.join(&hosts[1]).exists());
    });
}

#[test]
fn overlay_link_is_pinned_under_an_escaped_name_and_reused() {
    let root = PinRoot::new("ov");
    let ns = Netns::new("nd");
    // Interface names may contain dots; bpffs names may not.
    let vxlan = weft_testkit::unique_name("vx").replacen("weft", "weft.", 1);
    ns.ip(&[
        "link", "add", &vxlan, "type", "vxlan", "id", "42", "dstport", "4789",
    ]);
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let dp = Datapath::load_or_adopt(&path).expect("load");
        let from_overlay = dp.program(Program::FromOverlay).expect("from_overlay").id;
        assert_eq!(
            dp.attach_overlay(&vxlan).expect("attach"),
            LinkChange::Created
        );
        let pin = path.join("links/overlay").join(vxlan.replace('.', ":"));
        assert!(pin.exists(), "{}", pin.display());
        assert_eq!(tcx_ingress_programs(&vxlan), [from_overlay]);
        assert_eq!(
            dp.attach_overlay(&vxlan).expect("again"),
            LinkChange::Unchanged
        );
        drop(dp);
        assert_eq!(
            tcx_ingress_programs(&vxlan),
            [from_overlay],
            "outlives the agent"
        );

        let dp = Datapath::load_or_adopt(&path).expect("reload");
        dp.detach_overlay(&vxlan).expect("detach");
        assert_eq!(tcx_ingress_programs(&vxlan), Vec::<u32>::new());
        assert!(!pin.exists());
    });
}

#[test]
fn reload_adopts_identical_programs_and_replaces_changed_ones_in_place() {
    let root = PinRoot::new("rp");
    let node = Node::new(2);
    let vxlan = weft_testkit::unique_name("vx");
    node.ns.ip(&[
        "link", "add", &vxlan, "type", "vxlan", "id", "42", "dstport", "4789",
    ]);
    let path: PathBuf = root.path().to_path_buf();
    let hosts = node.host_veths.clone();
    in_netns(node.ns.path(), move || {
        let mut dp = Datapath::load_or_adopt(&path).expect("first load");
        for p in Program::ALL {
            assert_eq!(
                dp.program(p).expect("program").change,
                ProgramChange::Installed
            );
        }
        let first_from_pod = dp.program(Program::FromPod).expect("from_pod").id;
        let first_tag = dp.program(Program::FromPod).expect("from_pod").tag;
        let first_from_overlay = dp.program(Program::FromOverlay).expect("overlay").id;
        dp.attach_overlay(&vxlan).expect("attach overlay");
        dp.upsert_route("10.244.2.0/24".parse().unwrap(), RouteKind::LocalCidr)
            .expect("route");
        pod::attach_pod(&path, common::ifindex(&hosts[0]), &hosts[0]).expect("attach pod 0");
        drop(dp);

        // Same programs: adopted, nothing re-attached, map state kept.
        let dp = Datapath::load_or_adopt(&path).expect("second load");
        for p in Program::ALL {
            assert_eq!(
                dp.program(p).expect("program").change,
                ProgramChange::Adopted
            );
        }
        assert_eq!(
            dp.program(Program::FromPod).expect("from_pod").id,
            first_from_pod
        );
        assert_eq!(
            dp.program(Program::FromOverlay).expect("overlay").id,
            first_from_overlay
        );
        assert_eq!(
            dp.routes().expect("routes").len(),
            1,
            "maps reused, not recreated"
        );
        drop(dp);

        // An "older" from_pod is pinned and running on both pod links.
        let old_id = pin_other_program(&path, Program::FromPod, Program::FromOverlay);
        for host in &hosts {
            pod::attach_pod(&path, common::ifindex(host), host).expect("attach to old");
            assert_eq!(tcx_ingress_programs(host), [old_id]);
        }
        let pods = path.join("links/pods");
        let links_before: Vec<u32> = hosts.iter().map(|h| pinned_link(&pods.join(h)).0).collect();

        // The new agent replaces it: same links, repointed, one program per hook.
        let dp = Datapath::load_or_adopt(&path).expect("upgrade");
        let from_pod = dp.program(Program::FromPod).expect("from_pod");
        assert_eq!(
            from_pod.change,
            ProgramChange::Replaced {
                previous_id: old_id
            }
        );
        assert_eq!(from_pod.links.updated, 2);
        assert_eq!(from_pod.tag, first_tag);
        assert_eq!(
            dp.program(Program::FromOverlay).expect("overlay").change,
            ProgramChange::Adopted
        );
        for (host, link_before) in hosts.iter().zip(links_before) {
            let (link, prog) = pinned_link(&pods.join(host));
            assert_eq!(link, link_before, "link updated in place, not recreated");
            assert_eq!(prog, from_pod.id);
            assert_eq!(tcx_ingress_programs(host), [from_pod.id]);
        }
        assert!(!path.join("progs/from_pod_staging").exists());
        assert_eq!(pinned_program_id(&path.join("progs/from_pod")), from_pod.id);
    });
}

#[test]
fn lost_map_pins_make_the_reload_replace_not_adopt() {
    let root = PinRoot::new("lm");
    let node = Node::new(1);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();
    in_netns(node.ns.path(), move || {
        let first = Datapath::load_or_adopt(&path).expect("load");
        let first_id = first.program(Program::FromPod).expect("from_pod").id;
        drop(first);
        pod::attach_pod(&path, common::ifindex(&host), &host).expect("attach");
        // Someone removes the map pins: the running programs keep the old maps.
        for entry in std::fs::read_dir(path.join("maps")).expect("maps dir") {
            std::fs::remove_file(entry.expect("entry").path()).expect("unpin map");
        }
        // Same instructions, but adopting would leave the hooks on orphaned maps
        // while the agent fills the new ones.
        let dp = Datapath::load_or_adopt(&path).expect("reload");
        let from_pod = dp.program(Program::FromPod).expect("from_pod");
        assert_eq!(
            from_pod.change,
            ProgramChange::Replaced {
                previous_id: first_id
            }
        );
        assert_eq!(tcx_ingress_programs(&host), [from_pod.id]);
    });
}

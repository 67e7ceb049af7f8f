//! STATUS (ready exactly when an ADD could succeed) and GC (keeps exactly the attachments
//! the runtime lists, and nothing when it lists none; does nothing without a list).

mod cni_support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use cni_support::tcp::assert_reachable;
use cni_support::{ranges, result_addresses, result_host_veth, v4_subnet, Net, Node, Pod, Reply};
use serde_json::json;

#[test]
fn status_is_ready_with_a_valid_config() {
    let node = Node::new("so");
    let net = Net::dual(&node, "weftso", 30);
    let reply = net.status().ok("STATUS");
    assert!(
        reply.stdout.trim().is_empty(),
        "STATUS prints nothing on success: {reply:?}"
    );
}

#[test]
fn status_refuses_older_config_versions() {
    let node = Node::new("sv");
    let net = Net::new(&node, "weftsv", "1.0.0", ranges(&[&v4_subnet(31)]));
    net.status().fails_with(1, "STATUS with a 1.0.0 config");
    net.gc(Some(&[])).fails_with(1, "GC with a 1.0.0 config");
}

#[test]
fn status_is_unavailable_when_the_range_is_exhausted() {
    let node = Node::new("sx");
    // A /30 has two usable addresses.
    let net = Net::new(&node, "weftsx", "1.1.0", ranges(&["10.231.32.0/30"]));
    net.status().ok("STATUS with free addresses");
    let a = Pod::new("sx");
    let b = Pod::new("sx");
    let result_a = net.add_ok(&a);
    let result_b = net.add_ok(&b);
    let msg = net
        .status()
        .fails_with(50, "STATUS with the range exhausted");
    println!("exhausted: {msg}");

    let c = Pod::new("sx");
    let reply = net.add(&c);
    assert!(
        !reply.success(),
        "ADD with no free address must fail: {reply:?}"
    );
    println!(
        "ADD when exhausted: code {:?}: {}",
        reply.code(),
        reply.msg()
    );
    assert_eq!(
        net.reservations().len(),
        2,
        "the failed ADD reserved nothing"
    );
    assert_eq!(node.wf_links().len(), 2, "the failed ADD left no veth");

    net.del(&a, Some(&result_a)).ok("DEL a");
    net.status().ok("STATUS after an address was freed");
    net.del(&b, Some(&result_b)).ok("DEL b");
}

/// STATUS run with `dir` mounted read-only, in a mount namespace of the plugin's own (the
/// test's mounts are untouched).
fn status_with_read_only(net: &Net, dir: &Path) -> Reply {
    let mut cmd = net.node.plugin(&[("CNI_COMMAND", "STATUS")]);
    let dir: PathBuf = dir.to_path_buf();
    // SAFETY: between fork and exec the hook only makes system calls (unshare, mount).
    unsafe {
        cmd.pre_exec(move || {
            use nix::mount::{mount, MsFlags};
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )?;
            mount(
                Some(&dir),
                &dir,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )?;
            mount(
                None::<&str>,
                &dir,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn STATUS");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&net.bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait STATUS");
    Reply {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn status_is_unavailable_when_the_data_dir_is_not_writable() {
    let node = Node::new("sw");
    let net = Net::new(&node, "weftsw", "1.1.0", ranges(&[&v4_subnet(33)]));
    net.status().ok("STATUS creates and probes the store");
    let msg = status_with_read_only(&net, &node.data_dir())
        .fails_with(50, "STATUS with a read-only data dir");
    println!("read-only: {msg}");
    net.status().ok("STATUS once writable again");

    // A data dir that cannot even be created: its parent is a regular file.
    let file = node.dir.path().join("not-a-dir");
    std::fs::write(&file, b"").expect("create file");
    let blocked = Net::new(&node, "weftsw", "1.1.0", ranges(&[&v4_subnet(33)]));
    let mut conf = blocked.conf.clone();
    conf["ipam"]["dataDir"] = json!(file.join("ipam"));
    let blocked = Net { node: &node, conf };
    let msg = blocked
        .status()
        .fails_with(50, "STATUS with an impossible data dir");
    println!("impossible: {msg}");
}

#[test]
fn status_is_unavailable_when_the_datapath_is_not_loaded() {
    let node = Node::new("sd");
    let empty = node.dir.path().join("empty-pins");
    std::fs::create_dir_all(&empty).expect("mkdir");
    for pin_root in [
        empty.clone(),
        PathBuf::from(format!("/sys/fs/bpf/weft-absent-{}", std::process::id())),
    ] {
        let net = Net::new(&node, "weftsd", "1.1.0", ranges(&[&v4_subnet(34)]))
            .with("datapath", json!({"pinRoot": pin_root}));
        let msg = net.status().fails_with(
            50,
            &format!("STATUS with nothing pinned at {}", pin_root.display()),
        );
        println!("pinRoot {}: {msg}", pin_root.display());

        // ADD fails closed too, and leaves nothing.
        let pod = Pod::new("sd");
        let reply = net.add(&pod);
        assert!(
            !reply.success(),
            "ADD without a loaded datapath must fail: {reply:?}"
        );
        println!("ADD: code {:?}: {}", reply.code(), reply.msg());
        net.assert_no_state("after ADD without a loaded datapath");
        assert_eq!(pod.addresses(), Vec::<String>::new());
    }
    assert_eq!(
        cni_support::list_dir(&empty),
        Vec::<String>::new(),
        "nothing pinned"
    );
}

/// Three attachments on one network, plus one on another network of the same node.
struct GcSetup<'a> {
    net: Net<'a>,
    other: Net<'a>,
    pods: Vec<(Pod, serde_json::Value)>,
    other_pod: (Pod, serde_json::Value),
}

fn gc_setup<'a>(node: &'a Node, n: u8) -> GcSetup<'a> {
    let net = Net::dual(node, &format!("weftgc{n}"), n);
    let other = Net::dual(node, &format!("weftgo{n}"), n + 1);
    let pods: Vec<(Pod, serde_json::Value)> = (0..3)
        .map(|_| {
            let pod = Pod::new("gc");
            let result = net.add_ok(&pod);
            (pod, result)
        })
        .collect();
    let other_pod = Pod::new("go");
    let other_result = other.add_ok(&other_pod);
    GcSetup {
        net,
        other,
        pods,
        other_pod: (other_pod, other_result),
    }
}

impl GcSetup<'_> {
    /// The other network's attachment is untouched by this network's GC.
    fn assert_other_network_intact(&self) {
        let (pod, result) = &self.other_pod;
        assert_eq!(self.other.reserved_by(&pod.id, "eth0").len(), 2);
        assert!(self.net.node.wf_links().contains(&result_host_veth(result)));
        self.other
            .check(pod, result)
            .ok("CHECK on the other network");
    }
}

#[test]
fn gc_with_no_list_does_nothing() {
    let node = Node::new("gn");
    let setup = gc_setup(&node, 40);
    let before = (setup.net.reservations(), node.wf_links());
    setup.net.gc(None).ok("GC without a list");
    assert_eq!((setup.net.reservations(), node.wf_links()), before);
    for (pod, result) in &setup.pods {
        setup
            .net
            .check(pod, result)
            .ok("CHECK after GC without a list");
    }
    setup.assert_other_network_intact();
}

#[test]
fn gc_with_an_empty_list_removes_everything_of_the_network() {
    let node = Node::new("ge");
    let setup = gc_setup(&node, 42);
    setup.net.gc(Some(&[])).ok("GC with an empty list");
    assert_eq!(setup.net.reservations(), vec![]);
    assert_eq!(setup.net.owner_index(), Vec::<String>::new());
    assert_eq!(setup.net.scratch_files(), Vec::<String>::new());
    let other_veth = result_host_veth(&setup.other_pod.1);
    assert_eq!(
        node.wf_links(),
        vec![other_veth],
        "only the other network's veth is left"
    );
    for (pod, _) in &setup.pods {
        assert_eq!(
            pod.addresses(),
            Vec::<String>::new(),
            "pod interface removed"
        );
    }
    setup.assert_other_network_intact();
    // A runtime may still send DEL afterwards.
    for (pod, result) in &setup.pods {
        setup.net.del(pod, Some(result)).ok("DEL after GC");
    }
}

#[test]
fn gc_keeps_exactly_the_valid_attachment() {
    let node = Node::new("gk");
    let setup = gc_setup(&node, 44);
    let (kept, kept_result) = &setup.pods[1];
    setup
        .net
        .gc(Some(&[(kept.id.as_str(), "eth0")]))
        .ok("GC with one valid attachment");

    let mut expected: Vec<_> = result_addresses(kept_result)
        .into_iter()
        .map(|a| (a, format!("{}@eth0", kept.id)))
        .collect();
    expected.sort();
    assert_eq!(setup.net.reservations(), expected);
    assert_eq!(setup.net.owner_index(), vec![format!("{}@eth0", kept.id)]);
    let mut veths = vec![
        result_host_veth(kept_result),
        result_host_veth(&setup.other_pod.1),
    ];
    veths.sort();
    assert_eq!(node.wf_links(), veths);
    setup
        .net
        .check(kept, kept_result)
        .ok("CHECK of the kept attachment");
    for addr in result_addresses(kept_result) {
        assert_reachable(node.netns_path(), kept.ns.path(), addr, "kept attachment");
    }
    for (i, (pod, _)) in setup.pods.iter().enumerate() {
        if i != 1 {
            assert_eq!(pod.addresses(), Vec::<String>::new());
        }
    }
    setup.assert_other_network_intact();
}

#[test]
fn gc_removes_a_veth_whose_reservation_is_already_gone() {
    let node = Node::new("gv");
    let net = Net::dual(&node, "weftgv", 46);
    let pod = Pod::new("gv");
    let result = net.add_ok(&pod);
    let store = weft_ipam::Store::open(&node.data_dir(), "weftgv").expect("open store");
    store
        .release(&weft_ipam::Owner::new(&pod.id, "eth0"))
        .expect("release");
    assert_eq!(node.wf_links(), vec![result_host_veth(&result)]);
    net.gc(Some(&[])).ok("GC");
    net.assert_no_state("after GC of a veth without reservation");
}

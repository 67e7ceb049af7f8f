//! The runtimes' Drop guards: a test that fails half-way (pods still running, nothing
//! stopped) must leave no process, mount, namespace, address or directory behind.

use std::time::Duration;
use weft_runtime_tests::fs::mounts_under;
use weft_runtime_tests::procs::pids_mentioning;
use weft_runtime_tests::workload::{veths_in, web_server_command, IDLE_COMMAND};
use weft_runtime_tests::{
    bridge_conflist, reservations_in, CniDirs, Containerd, PodSpec, Podman, TestSubnets,
    BUSYBOX_IMAGE,
};
use weft_testkit::{require_root, unique_name, Netns};

#[test]
fn dropping_containerd_with_running_pods_leaves_nothing_behind() {
    require_root();
    let node = Netns::new("dc");
    let cni = CniDirs::reference().expect("CNI dirs");
    let network = unique_name("dc");
    let subnets = TestSubnets::unique();
    cni.write_conflist(&bridge_conflist(
        &network,
        &unique_name("br"),
        &subnets.v4,
        &cni.ipam_dir(),
    ))
    .expect("conflist");
    let containerd = Containerd::start_in_netns(node.path(), &cni.bin_dir(), &cni.conf_dir())
        .expect("containerd");
    let cri = containerd.cri();
    cri.wait_ready(true, Duration::from_secs(30))
        .expect("CRI ready");
    let pod = cri
        .run_pod(&PodSpec::unique("dc"))
        .map_err(|e| containerd.with_log(e))
        .expect("pod");
    cri.create_and_start_container(&pod, BUSYBOX_IMAGE, &web_server_command())
        .expect("container");
    let pod_netns = cri.pod_netns_path(&pod).expect("pod netns");
    let dir = containerd.dir().to_path_buf();
    let socket = containerd.socket().to_string_lossy().into_owned();
    assert!(
        !pids_mentioning(&socket).is_empty(),
        "a shim should be running"
    );
    assert!(
        !mounts_under(&dir).is_empty(),
        "the pod's mounts should be up"
    );
    assert_eq!(reservations_in(&cni.ipam_dir(), &network).len(), 1);

    drop(containerd);

    assert_eq!(pids_mentioning(&socket), vec![], "shims left running");
    assert_eq!(
        mounts_under(&dir),
        Vec::<std::path::PathBuf>::new(),
        "mounts left"
    );
    assert!(!dir.exists(), "{} left", dir.display());
    assert!(!pod_netns.exists(), "{} left", pod_netns.display());
    assert_eq!(
        reservations_in(&cni.ipam_dir(), &network),
        Vec::<String>::new(),
        "CNI DEL not sent"
    );
    assert_eq!(veths_in(node.path()).expect("veths"), Vec::<String>::new());
}

#[test]
fn dropping_podman_with_running_containers_leaves_nothing_behind() {
    require_root();
    let node = Netns::new("dp");
    let cni = CniDirs::reference().expect("CNI dirs");
    let podman = Podman::new_in_netns(node.path(), &cni.bin_dir()).expect("podman");
    let network = unique_name("dp");
    let subnets = TestSubnets::unique();
    podman
        .add_network(&bridge_conflist(
            &network,
            &unique_name("br"),
            &subnets.v4,
            &cni.ipam_dir(),
        ))
        .expect("network");
    let container = podman.run(&network, IDLE_COMMAND).expect("container");
    let container_netns = podman.netns_path(&container).expect("netns");
    let dir = podman.dir().to_path_buf();
    let dir_text = dir.to_string_lossy().into_owned();
    assert!(
        !pids_mentioning(&dir_text).is_empty(),
        "conmon should be running"
    );
    assert!(
        !mounts_under(&dir).is_empty(),
        "the container's mounts should be up"
    );
    assert_eq!(reservations_in(&cni.ipam_dir(), &network).len(), 1);

    drop(podman);

    assert_eq!(pids_mentioning(&dir_text), vec![], "conmon left running");
    assert_eq!(
        mounts_under(&dir),
        Vec::<std::path::PathBuf>::new(),
        "mounts left"
    );
    assert!(!dir.exists(), "{} left", dir.display());
    assert!(
        !container_netns.exists(),
        "{} left",
        container_netns.display()
    );
    assert_eq!(
        reservations_in(&cni.ipam_dir(), &network),
        Vec::<String>::new(),
        "CNI DEL not sent"
    );
    assert_eq!(veths_in(node.path()).expect("veths"), Vec::<String>::new());
}

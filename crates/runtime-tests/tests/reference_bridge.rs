//! The harness proven with Debian's reference plugins (`bridge` + `host-local`): the same
//! flows the weft tests use, against plugins known to work. A failure here is a harness
//! or machine problem, not a weft one.
//!
//! Each test runs its runtime inside its own node namespace, so the bridge, the host
//! veths and `ip_forward` (set by `isGateway`) all stay in that namespace.

use serde_json::json;
use std::time::{Duration, Instant};
use weft_runtime_tests::workload::{
    fetch_command, fetch_until_served, veths_in, web_server_command, FetchOutcome, IDLE_COMMAND,
};
use weft_runtime_tests::{
    bridge_conflist, reservations_in, CniDirs, Containerd, PodSpec, Podman, Recorder, TestSubnets,
    BUSYBOX_IMAGE, INDEX_HTML,
};
use weft_testkit::{require_root, unique_name, Netns};

#[test]
fn cri_pods_on_reference_bridge_connect_and_release_addresses() {
    require_root();
    let start = Instant::now();
    // Declaration order is the reverse of drop order: containerd goes first.
    let node = Netns::new("rn");
    let cni = CniDirs::reference().expect("CNI dirs");
    let subnets = TestSubnets::unique();
    let network = unique_name("rc");
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
        .map_err(|e| containerd.with_log(e))
        .expect("CRI ready");
    eprintln!("[timing] containerd up: {:?}", start.elapsed());

    let server_pod = cri
        .run_pod(&PodSpec::unique("sv"))
        .map_err(|e| containerd.with_log(e))
        .expect("server pod");
    let server_ip = cri.pod_ip(&server_pod).expect("server IP");
    assert!(
        subnets.contains(server_ip),
        "{server_ip} not in {subnets:?}"
    );
    cri.create_and_start_container(&server_pod, BUSYBOX_IMAGE, &web_server_command())
        .map_err(|e| containerd.with_log(e))
        .expect("server container");

    let client_pod = cri.run_pod(&PodSpec::unique("cl")).expect("client pod");
    let client_ip = cri.pod_ip(&client_pod).expect("client IP");
    assert!(
        subnets.contains(client_ip),
        "{client_ip} not in {subnets:?}"
    );
    assert_ne!(client_ip, server_ip);
    let client = cri
        .create_and_start_container(&client_pod, BUSYBOX_IMAGE, IDLE_COMMAND)
        .expect("client container");
    eprintln!("[timing] two pods running: {:?}", start.elapsed());

    let fetch = fetch_command(server_ip);
    let body = fetch_until_served("client pod fetching from server pod", || {
        cri.exec_sync(&client, &fetch, Duration::from_secs(10))
            .map(|r| FetchOutcome {
                exit_code: r.exit_code,
                stdout: r.stdout,
                stderr: r.stderr,
            })
    })
    .expect("TCP from pod 2 to pod 1");
    assert_eq!(body, INDEX_HTML);

    let data_dir = cni.ipam_dir();
    assert_eq!(
        reservations_in(&data_dir, &network).len(),
        2,
        "one reservation per pod"
    );
    assert_eq!(
        veths_in(node.path()).expect("veths").len(),
        2,
        "one host veth per pod"
    );

    for pod in [&server_pod, &client_pod] {
        cri.stop_pod_sandbox(pod).expect("stop");
        cri.remove_pod_sandbox(pod).expect("remove");
    }
    assert_eq!(
        reservations_in(&data_dir, &network),
        Vec::<String>::new(),
        "addresses released"
    );
    assert_eq!(
        veths_in(node.path()).expect("veths"),
        Vec::<String>::new(),
        "host veths removed"
    );
    eprintln!("[timing] cri reference test body: {:?}", start.elapsed());
}

#[test]
fn podman_containers_on_reference_bridge_connect_and_release_addresses() {
    require_root();
    let start = Instant::now();
    let node = Netns::new("rp");
    let cni = CniDirs::reference().expect("CNI dirs");
    let podman = Podman::new_in_netns(node.path(), &cni.bin_dir()).expect("podman");
    eprintln!("[timing] podman ready: {:?}", start.elapsed());
    let subnets = TestSubnets::unique();
    let network = unique_name("rq");
    podman
        .add_network(&bridge_conflist(
            &network,
            &unique_name("br"),
            &subnets.v4,
            &cni.ipam_dir(),
        ))
        .expect("network");

    let server = podman
        .run(&network, &web_server_command())
        .expect("server container");
    let server_ip = podman.container_ip(&server).expect("server IP");
    assert!(
        subnets.contains(server_ip),
        "{server_ip} not in {subnets:?}"
    );
    let client = podman
        .run(&network, IDLE_COMMAND)
        .expect("client container");
    let client_ip = podman.container_ip(&client).expect("client IP");
    assert!(
        subnets.contains(client_ip),
        "{client_ip} not in {subnets:?}"
    );
    eprintln!("[timing] two containers running: {:?}", start.elapsed());

    let fetch = fetch_command(server_ip);
    let body = fetch_until_served("client container fetching from server container", || {
        podman.exec(&client, &fetch).map(|out| FetchOutcome {
            exit_code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    })
    .expect("TCP from container 2 to container 1");
    assert_eq!(body, INDEX_HTML);

    let data_dir = cni.ipam_dir();
    assert_eq!(reservations_in(&data_dir, &network).len(), 2);
    podman.rm(&server).expect("rm server");
    podman.rm(&client).expect("rm client");
    assert_eq!(
        reservations_in(&data_dir, &network),
        Vec::<String>::new(),
        "addresses released"
    );
    assert_eq!(
        veths_in(node.path()).expect("veths"),
        Vec::<String>::new(),
        "host veths removed"
    );
    eprintln!("[timing] podman reference test body: {:?}", start.elapsed());
}

/// What a chained plugin such as `weft-guard` receives from containerd: the pod's
/// annotations as runtimeConfig `io.kubernetes.cri.pod-annotations` (because the plugin
/// declares that capability), the pod identity in CNI_ARGS, and two DELs.
#[test]
fn cri_passes_pod_annotations_to_a_chained_plugin() {
    require_root();
    let start = Instant::now();
    let node = Netns::new("ra");
    let cni = CniDirs::reference().expect("CNI dirs");
    let recorder = Recorder::install(
        &cni.bin_dir(),
        "weft-recorder",
        &cni.dir().join("calls.jsonl"),
    )
    .expect("recorder");
    let subnets = TestSubnets::unique();
    let network = unique_name("ra");
    let mut conflist = bridge_conflist(&network, &unique_name("br"), &subnets.v4, &cni.ipam_dir());
    let plugins = conflist["plugins"].as_array_mut().expect("plugins");
    plugins.push(json!({"type": "weft-recorder", "capabilities": {"io.kubernetes.cri.pod-annotations": true}}));
    cni.write_conflist(&conflist).expect("conflist");
    let containerd = Containerd::start_in_netns(node.path(), &cni.bin_dir(), &cni.conf_dir())
        .expect("containerd");
    let cri = containerd.cri();
    cri.wait_ready(true, Duration::from_secs(30))
        .map_err(|e| containerd.with_log(e))
        .expect("CRI ready");

    let pod = PodSpec::unique("an").annotation("weft.io/egress-proxy-uid", "1234");
    let sandbox = cri
        .run_pod(&pod)
        .map_err(|e| containerd.with_log(e))
        .expect("pod");
    let adds = recorder.calls_of("ADD").expect("calls");
    assert_eq!(adds.len(), 1, "{adds:?}");
    let add = &adds[0];
    assert_eq!(add.container_id, sandbox);
    assert_eq!(
        add.runtime_config("io.kubernetes.cri.pod-annotations")
            .and_then(|a| a.get("weft.io/egress-proxy-uid")),
        Some(&json!("1234")),
        "annotations missing from {:?}",
        add.config
    );
    assert!(
        add.config.get("prevResult").is_some(),
        "a chained plugin gets the bridge's result"
    );
    assert!(
        add.args.contains(&format!("K8S_POD_NAME={}", pod.name)),
        "{}",
        add.args
    );
    assert!(
        add.args.contains("K8S_POD_NAMESPACE=default"),
        "{}",
        add.args
    );

    cri.stop_pod_sandbox(&sandbox).expect("stop");
    cri.remove_pod_sandbox(&sandbox).expect("remove");
    let dels = recorder.calls_of("DEL").expect("calls");
    assert_eq!(
        dels.len(),
        2,
        "StopPodSandbox and RemovePodSandbox each send DEL: {dels:?}"
    );
    assert!(!dels[0].netns.is_empty(), "the first DEL has the netns");
    assert!(dels[1].netns.is_empty(), "the second DEL has none");
    eprintln!("[timing] cri annotations test body: {:?}", start.elapsed());
}

//! The `weft` plugin's protocol edge: VERSION, and the error object (code on stdout,
//! non-zero exit) for malformed or invalid requests, none of which may leave state behind.

mod cni_support;

use cni_support::{attachment_env, ranges, v4_subnet, Net, Node, Pod};
use serde_json::{json, Value};

fn supported_versions(reply: &cni_support::Reply) -> Vec<String> {
    reply.json()["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("no supportedVersions: {reply:?}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn version_lists_the_supported_versions() {
    let node = Node::new("vr");
    let wanted = ["0.4.0", "1.0.0", "1.1.0"];

    let reply = node
        .run(&[("CNI_COMMAND", "VERSION")], br#"{"cniVersion":"1.0.0"}"#)
        .ok("VERSION");
    let versions = supported_versions(&reply);
    for v in wanted {
        assert!(
            versions.contains(&v.to_string()),
            "{v} missing: {versions:?}"
        );
    }
    assert_eq!(
        reply.json()["cniVersion"],
        "1.0.0",
        "the input version is echoed"
    );

    let empty = node
        .run(&[("CNI_COMMAND", "VERSION")], b"")
        .ok("VERSION, empty stdin");
    let versions = supported_versions(&empty);
    for v in wanted {
        assert!(
            versions.contains(&v.to_string()),
            "{v} missing: {versions:?}"
        );
    }

    // podman probes every plugin with placeholders in the attachment variables.
    let podman = node
        .run(
            &[
                ("CNI_COMMAND", "VERSION"),
                ("CNI_IFNAME", "dummy"),
                ("CNI_NETNS", "dummy"),
                ("CNI_PATH", "dummy"),
            ],
            br#"{"cniVersion":"1.0.0"}"#,
        )
        .ok("podman VERSION probe");
    assert_eq!(supported_versions(&podman), supported_versions(&reply));
}

#[test]
fn malformed_json_is_a_decoding_error_on_stdout() {
    let node = Node::new("mj");
    let pod = Pod::new("mj");
    let netns = pod.netns();
    let env = attachment_env("ADD", &pod.id, "eth0", &netns);
    for stdin in [
        &b"{\"cniVersion\": "[..],
        b"not json",
        b"",
        b"[1,2]",
        b"\xff\xfe",
    ] {
        let reply = node.run(&env, stdin);
        reply.fails_with(
            6,
            &format!("ADD with stdin {:?}", String::from_utf8_lossy(stdin)),
        );
        assert!(reply.stderr.len() < 4096, "stderr is a log, not a dump");
    }
    assert_eq!(node.wf_links(), Vec::<String>::new());
}

#[test]
fn unsupported_version_and_missing_netns() {
    let node = Node::new("uv");
    let pod = Pod::new("uv");
    let net = Net::new(&node, "weftuv", "0.3.1", ranges(&[&v4_subnet(1)]));
    let msg = net.add(&pod).fails_with(1, "ADD with cniVersion 0.3.1");
    assert!(
        msg.contains("0.3.1"),
        "the message names the version: {msg}"
    );

    let net = Net::new(&node, "weftuv", "1.1.0", ranges(&[&v4_subnet(1)]));
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", pod.id.as_str()),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/usr/lib/cni"),
    ];
    let msg = node
        .run(&env, &net.bytes())
        .fails_with(4, "ADD without CNI_NETNS");
    assert!(msg.contains("CNI_NETNS"), "{msg}");
    net.assert_no_state("after refused ADDs");
}

/// One bad request: what to change from a good ADD, and the code it must get.
struct BadCase {
    what: &'static str,
    code: u64,
    env: Vec<(&'static str, Option<&'static str>)>,
    conf: Box<dyn Fn(&mut Value)>,
}

fn case(
    what: &'static str,
    code: u64,
    env: &[(&'static str, Option<&'static str>)],
    conf: impl Fn(&mut Value) + 'static,
) -> BadCase {
    BadCase {
        what,
        code,
        env: env.to_vec(),
        conf: Box::new(conf),
    }
}

fn bad_cases() -> Vec<BadCase> {
    let none = |_: &mut Value| {};
    vec![
        case(
            "ifname with ':'",
            4,
            &[("CNI_IFNAME", Some("eth0:1"))],
            none,
        ),
        case(
            "ifname too long",
            4,
            &[("CNI_IFNAME", Some("sixteen_chars_xx"))],
            none,
        ),
        case("ifname with '/'", 4, &[("CNI_IFNAME", Some("a/b"))], none),
        case(
            "container id starting with '-'",
            4,
            &[("CNI_CONTAINERID", Some("-abc"))],
            none,
        ),
        case(
            "container id with a space",
            4,
            &[("CNI_CONTAINERID", Some("a b"))],
            none,
        ),
        case(
            "missing CNI_CONTAINERID",
            4,
            &[("CNI_CONTAINERID", None)],
            none,
        ),
        // Unset, CNI_COMMAND makes the binary a CLI; set but empty, it is a plugin call.
        case("empty CNI_COMMAND", 4, &[("CNI_COMMAND", Some(""))], none),
        case(
            "unknown CNI_COMMAND",
            4,
            &[("CNI_COMMAND", Some("ATTACH"))],
            none,
        ),
        case(
            "malformed CNI_ARGS",
            4,
            &[("CNI_ARGS", Some("NOEQUALS"))],
            none,
        ),
        case(
            "CNI_NETNS that does not exist",
            4,
            &[("CNI_NETNS", Some("/var/run/netns/weft-absent"))],
            none,
        ),
        case(
            "CNI_NETNS that is not a netns",
            4,
            &[("CNI_NETNS", Some("/etc/hostname"))],
            none,
        ),
        case("missing ipam", 7, &[], |c| {
            c.as_object_mut().map(|o| o.remove("ipam"));
        }),
        case("ipam without ranges", 7, &[], |c| {
            c["ipam"] = json!({"dataDir": "/tmp"})
        }),
        case("host-local's legacy ipam.subnet", 7, &[], |c| {
            c["ipam"]["subnet"] = json!("10.231.1.0/24");
            c["ipam"].as_object_mut().map(|o| o.remove("ranges"));
        }),
        case(
            "two IPv4 range sets",
            7,
            &[],
            |c| {
                c["ipam"]["ranges"] =
                    json!([[{"subnet": "10.231.1.0/24"}], [{"subnet": "10.231.2.0/24"}]])
            },
        ),
        case("subnet with host bits", 7, &[], |c| {
            c["ipam"]["ranges"] = json!([[{"subnet": "10.231.1.5/24"}]])
        }),
        case("rangeStart outside the subnet", 7, &[], |c| {
            c["ipam"]["ranges"] = json!([[{"subnet": "10.231.1.0/24", "rangeStart": "10.9.9.9"}]])
        }),
        case("mtu too small", 7, &[], |c| c["mtu"] = json!(100)),
        case("mtu too large", 7, &[], |c| c["mtu"] = json!(70000)),
        case("mtu as a string", 7, &[], |c| c["mtu"] = json!("1500")),
        case("ipam.type set", 7, &[], |c| {
            c["ipam"]["type"] = json!("host-local")
        }),
        case("relative dataDir", 7, &[], |c| {
            c["ipam"]["dataDir"] = json!("relative/dir")
        }),
        case("dataDir not a string", 7, &[], |c| {
            c["ipam"]["dataDir"] = json!(5)
        }),
        case("gatewayV4 not link-local", 7, &[], |c| {
            c["gatewayV4"] = json!("10.0.0.1")
        }),
        case("gatewayV4 not an address", 7, &[], |c| {
            c["gatewayV4"] = json!("gw")
        }),
        case("gatewayV6 not link-local", 7, &[], |c| {
            c["gatewayV6"] = json!("fd00::1")
        }),
        case("datapath without pinRoot", 7, &[], |c| {
            c["datapath"] = json!({})
        }),
        case("relative datapath.pinRoot", 7, &[], |c| {
            c["datapath"] = json!({"pinRoot": "bpf/weft"})
        }),
        case("unknown type", 7, &[], |c| c["type"] = json!("bridge")),
        case("missing name", 7, &[], |c| {
            c.as_object_mut().map(|o| o.remove("name"));
        }),
        case("invalid network name", 7, &[], |c| {
            c["name"] = json!("has space")
        }),
        case("cniVersion not a version", 1, &[], |c| {
            c["cniVersion"] = json!("abc")
        }),
        case("missing cniVersion", 7, &[], |c| {
            c.as_object_mut().map(|o| o.remove("cniVersion"));
        }),
        case("runtimeConfig.ips malformed", 7, &[], |c| {
            c["runtimeConfig"] = json!({"ips": ["not-an-ip"]})
        }),
    ]
}

#[test]
fn bad_inputs_get_their_code_and_leave_nothing() {
    let node = Node::new("bi");
    let net = Net::new(&node, "weftbi", "1.1.0", ranges(&[&v4_subnet(2)]));
    let mut failures = Vec::new();
    for case in bad_cases() {
        let pod = Pod::new("bi");
        let netns = pod.netns();
        let mut env: Vec<(&str, &str)> = attachment_env("ADD", &pod.id, "eth0", &netns);
        for (key, value) in &case.env {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push((key, value));
            }
        }
        let mut conf = net.conf.clone();
        (case.conf)(&mut conf);
        let reply = node.run(&env, conf.to_string().as_bytes());
        let pod_links: Vec<String> = cni_support::links(&pod.ns)
            .into_iter()
            .map(|l| l.name)
            .filter(|n| n != "lo")
            .collect();
        let state = (net.reservations(), node.wf_links(), pod_links);
        println!(
            "{:<34} -> exit {:?} code {:?}: {}",
            case.what,
            reply.status.code(),
            reply.code(),
            reply.msg()
        );
        if reply.success() || reply.code() != Some(case.code) {
            failures.push(format!(
                "{}: want code {}, got {reply:?}",
                case.what, case.code
            ));
        }
        if reply.msg().is_empty() {
            failures.push(format!("{}: no message: {reply:?}", case.what));
        }
        if !(state.0.is_empty() && state.1.is_empty() && state.2.is_empty()) {
            failures.push(format!("{}: left state behind: {state:?}", case.what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    net.assert_no_state("after every bad request");
}

/// Failures after IPAM has reserved: an interface already in the pod, an address the runtime
/// asks for that is not ours to give. Each must undo its reservation.
#[test]
fn failed_add_after_reserving_rolls_back() {
    let node = Node::new("rb");
    let net = Net::new(&node, "weftrb", "1.1.0", ranges(&[&v4_subnet(3)]));

    let pod = Pod::new("rb");
    // A veth pair inside the pod (this kernel has no dummy driver).
    pod.ns.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "weftpeer",
    ]);
    let reply = net.add(&pod);
    assert!(
        !reply.success(),
        "ADD over an existing eth0 must fail: {reply:?}"
    );
    assert!(reply.code().is_some(), "error object on stdout: {reply:?}");
    println!(
        "ADD over an existing eth0: code {:?}: {}",
        reply.code(),
        reply.msg()
    );
    net.assert_no_state("after ADD into a pod that already has eth0");

    let pod = Pod::new("rb");
    let env_args = "IP=10.99.99.99";
    let netns = pod.netns();
    let mut env = attachment_env("ADD", &pod.id, "eth0", &netns);
    env.push(("CNI_ARGS", env_args));
    let reply = node.run(&env, &net.bytes());
    assert!(
        !reply.success(),
        "ADD of an address outside the range must fail: {reply:?}"
    );
    println!(
        "ADD with IP= outside the range: code {:?}: {}",
        reply.code(),
        reply.msg()
    );
    net.assert_no_state("after ADD asking for an address outside the range");
}

/// An ADD that fails after the kernel has created the veth pair must delete the pair. Here
/// the failure is the veth alias `weft:<network>:<id>:<ifname>` exceeding the kernel's 255
/// bytes (a valid 180-byte network name with a 64-hex container id), which makes the step
/// right after creating the pair fail. Accepting the name (a shorter alias) or refusing it
/// up front are both fine; failing and leaving the veth behind is not.
#[test]
fn add_failing_right_after_creating_the_veth_leaves_nothing() {
    let node = Node::new("la");
    let name = format!("weft{}", "n".repeat(176));
    let net = Net::new(&node, &name, "1.1.0", ranges(&[&v4_subnet(4)]));
    let pod = Pod::new("la");
    let id = "a".repeat(64);
    let netns = pod.netns();
    let reply = net.add_att(&id, "eth0", &netns);
    if reply.success() {
        net.del_att(&id, "eth0", &netns, Some(&reply.json()))
            .ok("DEL");
        net.assert_no_state("after DEL");
        return;
    }
    println!("ADD: code {:?}: {}", reply.code(), reply.msg());
    let pod_links: Vec<String> = cni_support::links(&pod.ns)
        .into_iter()
        .map(|l| l.name)
        .collect();
    let leftovers = (net.reservations(), node.wf_links(), pod_links);
    // Whatever is left goes away with the node's namespace when the test ends.
    assert_eq!(
        leftovers,
        (vec![], vec![], vec!["lo".to_string()]),
        "the failed ADD left state behind (reservations, node veths, pod links)"
    );
}

//! Shared harness of the `weft` CNI plugin's integration tests (`tests/cni_*.rs`).
//!
//! A [`Node`] is a network namespace the test creates plus a temporary IPAM data dir; the
//! plugin binary runs inside it exactly as a runtime execs it (CNI_* environment, request on
//! stdin, only the network namespace entered), so nothing it creates or the sysctls it sets
//! reach the root namespace. What the plugin did is judged by observers that do not share
//! its code: `ip -j`, the IPAM store's files, and real TCP connections between namespaces.
//! Everything is named with the `weft` prefix and removed by Drop guards, even on failure.

// Each test binary uses a different part of the harness.
#![allow(dead_code)]

pub mod tcp;

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{json, Value};
use weft_testkit::{unique_name, Netns};

/// The plugin binary under test.
pub const WEFT: &str = env!("CARGO_BIN_EXE_weft");

/// The node's own addresses, on its loopback: the source of node-to-pod traffic. Documentation
/// ranges, so they can never be confused with a pod address or leave the test's namespaces.
pub const NODE_V4: &str = "203.0.113.1";
pub const NODE_V6: &str = "2001:db8::1";

/// A directory under the system temp dir, removed with everything in it when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("weft-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What one plugin invocation printed, with its exit status.
pub use weft_testkit::PluginReply as Reply;

/// A simulated node: a network namespace with addresses on its loopback, and a data dir.
pub struct Node {
    pub ns: Netns,
    pub dir: TempDir,
}

impl Node {
    pub fn new(tag: &str) -> Node {
        weft_testkit::require_root();
        let ns = Netns::new(tag);
        ns.ip(&["addr", "add", &format!("{NODE_V4}/32"), "dev", "lo"]);
        ns.ip(&["addr", "add", &format!("{NODE_V6}/128"), "dev", "lo"]);
        Node {
            ns,
            dir: TempDir::new(tag),
        }
    }

    pub fn netns_path(&self) -> &Path {
        self.ns.path()
    }

    /// Where IPAM stores are kept for every network of this node.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("ipam")
    }

    /// The plugin as a command inside the node's network namespace, with exactly `env` as its
    /// environment (plus PATH).
    pub fn plugin(&self, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(WEFT);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        weft::netns_exec::enter_netns_before_exec(&mut cmd, self.netns_path());
        cmd
    }

    /// Starts the plugin with `stdin` written and closed; the caller waits (or kills).
    pub fn spawn(&self, env: &[(&str, &str)], stdin: &[u8]) -> Child {
        let mut child = self
            .plugin(env)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {WEFT}: {e}"));
        if let Some(mut pipe) = child.stdin.take() {
            // A child killed early closes its end: a broken pipe is expected then.
            let _ = pipe.write_all(stdin);
        }
        child
    }

    /// Runs the plugin to completion.
    pub fn run(&self, env: &[(&str, &str)], stdin: &[u8]) -> Reply {
        let out = self
            .spawn(env, stdin)
            .wait_with_output()
            .unwrap_or_else(|e| panic!("wait for {WEFT}: {e}"));
        Reply::from_output(out)
    }

    /// Names of the `wf*` links (weft host veths) in the node namespace.
    pub fn wf_links(&self) -> Vec<String> {
        let mut names: Vec<String> = links(&self.ns)
            .into_iter()
            .filter(|l| l.name.starts_with("wf"))
            .map(|l| l.name)
            .collect();
        names.sort();
        names
    }

    pub fn link(&self, name: &str) -> Option<Link> {
        links(&self.ns).into_iter().find(|l| l.name == name)
    }
}

/// A pod: its own network namespace and a container id.
pub struct Pod {
    pub ns: Netns,
    pub id: String,
    pub ifname: String,
}

impl Pod {
    pub fn new(tag: &str) -> Pod {
        Pod {
            ns: Netns::new(tag),
            id: unique_name(tag),
            ifname: "eth0".into(),
        }
    }

    pub fn netns(&self) -> String {
        self.ns.path().display().to_string()
    }

    /// The addresses on the pod's interface, as `addr/prefix` strings.
    pub fn addresses(&self) -> Vec<String> {
        addresses(&self.ns, &self.ifname)
    }
}

/// A network configuration of the `weft` plugin on one node.
pub struct Net<'a> {
    pub node: &'a Node,
    pub conf: Value,
}

/// Range sets: an IPv4 `/24` and an IPv6 `/64` numbered by `n`, so each test gets its own.
pub fn v4_subnet(n: u8) -> String {
    format!("10.231.{n}.0/24")
}

pub fn v6_subnet(n: u8) -> String {
    format!("fd00:231:{n:x}::/64")
}

pub fn ranges(subnets: &[&str]) -> Value {
    Value::Array(subnets.iter().map(|s| json!([{ "subnet": s }])).collect())
}

impl<'a> Net<'a> {
    /// A `weft` network named `name` in `version`, with `ranges` and the node's data dir.
    pub fn new(node: &'a Node, name: &str, version: &str, ranges: Value) -> Net<'a> {
        let conf = json!({
            "cniVersion": version,
            "name": name,
            "type": "weft",
            "ipam": {"ranges": ranges, "dataDir": node.data_dir()},
        });
        Net { node, conf }
    }

    pub fn dual(node: &'a Node, name: &str, n: u8) -> Net<'a> {
        Net::new(node, name, "1.1.0", ranges(&[&v4_subnet(n), &v6_subnet(n)]))
    }

    /// Sets a top-level field of the configuration.
    pub fn with(mut self, key: &str, value: Value) -> Net<'a> {
        self.conf[key] = value;
        self
    }

    pub fn name(&self) -> String {
        self.conf["name"].as_str().unwrap_or_default().to_string()
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.conf.to_string().into_bytes()
    }

    /// The configuration with `prevResult` set, as a runtime sends it to CHECK and DEL.
    pub fn with_prev(&self, prev: &Value) -> Vec<u8> {
        let mut conf = self.conf.clone();
        conf["prevResult"] = prev.clone();
        conf.to_string().into_bytes()
    }

    pub fn add_att(&self, id: &str, ifname: &str, netns: &str) -> Reply {
        let env = attachment_env("ADD", id, ifname, netns);
        self.node.run(&env, &self.bytes())
    }

    pub fn add(&self, pod: &Pod) -> Reply {
        self.add_att(&pod.id, &pod.ifname, &pod.netns())
    }

    /// ADD that must succeed; returns the result.
    #[track_caller]
    pub fn add_ok(&self, pod: &Pod) -> Value {
        self.add(pod).ok("ADD").json()
    }

    pub fn del_att(&self, id: &str, ifname: &str, netns: &str, prev: Option<&Value>) -> Reply {
        let env = attachment_env("DEL", id, ifname, netns);
        let stdin = match prev {
            Some(prev) => self.with_prev(prev),
            None => self.bytes(),
        };
        self.node.run(&env, &stdin)
    }

    pub fn del(&self, pod: &Pod, prev: Option<&Value>) -> Reply {
        self.del_att(&pod.id, &pod.ifname, &pod.netns(), prev)
    }

    pub fn check(&self, pod: &Pod, prev: &Value) -> Reply {
        let netns = pod.netns();
        let env = attachment_env("CHECK", &pod.id, &pod.ifname, &netns);
        self.node.run(&env, &self.with_prev(prev))
    }

    pub fn status(&self) -> Reply {
        self.node.run(&[("CNI_COMMAND", "STATUS")], &self.bytes())
    }

    /// GC with `valid` as `cni.dev/valid-attachments`, or with no list at all for `None`.
    pub fn gc(&self, valid: Option<&[(&str, &str)]>) -> Reply {
        let mut conf = self.conf.clone();
        if let Some(valid) = valid {
            conf["cni.dev/valid-attachments"] = valid
                .iter()
                .map(|(id, ifname)| json!({"containerID": id, "ifname": ifname}))
                .collect();
        }
        self.node
            .run(&[("CNI_COMMAND", "GC")], conf.to_string().as_bytes())
    }

    /// `<dataDir>/<network>`: this network's IPAM store.
    pub fn store_dir(&self) -> PathBuf {
        self.node.data_dir().join(self.name())
    }

    /// Every reservation as `(address, "containerId@ifname")`, read from the store's files
    /// (an address record is a symlink whose target names the owner). Empty when no store
    /// exists: nothing is reserved then.
    pub fn reservations(&self) -> Vec<(IpAddr, String)> {
        let mut out: Vec<(IpAddr, String)> = list_dir(&self.store_dir().join("addresses"))
            .into_iter()
            .map(|name| {
                let path = self.store_dir().join("addresses").join(&name);
                let owner = std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|e| format!("<unreadable: {e}>"));
                let addr = name
                    .parse()
                    .unwrap_or_else(|_| panic!("{name:?} in {path:?} is not an address"));
                (addr, owner)
            })
            .collect();
        out.sort();
        out
    }

    /// The addresses `id@ifname` holds according to the store.
    pub fn reserved_by(&self, id: &str, ifname: &str) -> Vec<IpAddr> {
        let owner = format!("{id}@{ifname}");
        self.reservations()
            .into_iter()
            .filter(|(_, o)| *o == owner)
            .map(|(a, _)| a)
            .collect()
    }

    /// Entries of the owner index (`owners/`), sorted.
    pub fn owner_index(&self) -> Vec<String> {
        list_dir(&self.store_dir().join("owners"))
    }

    /// Scratch files (`tmp/`) a finished operation must never leave.
    pub fn scratch_files(&self) -> Vec<String> {
        list_dir(&self.store_dir().join("tmp"))
    }

    /// Asserts nothing of this network is left on the node: no reservation, no owner index,
    /// no weft veth.
    #[track_caller]
    pub fn assert_no_state(&self, what: &str) {
        assert_eq!(self.reservations(), vec![], "{what}: reservations left");
        assert_eq!(
            self.owner_index(),
            Vec::<String>::new(),
            "{what}: owner index left"
        );
        assert_eq!(
            self.node.wf_links(),
            Vec::<String>::new(),
            "{what}: veths left"
        );
    }
}

/// The CNI environment of an attachment command.
pub fn attachment_env<'s>(
    command: &'s str,
    id: &'s str,
    ifname: &'s str,
    netns: &'s str,
) -> Vec<(&'s str, &'s str)> {
    vec![
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", id),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", ifname),
        ("CNI_PATH", "/usr/lib/cni"),
    ]
}

/// Directory entries, sorted; empty when the directory does not exist.
pub fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("list {}: {e}", dir.display()),
    };
    names.sort();
    names
}

/// One link as `ip -j link` shows it.
#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub alias: Option<String>,
    pub up: bool,
    pub mtu: u64,
    pub mac: String,
}

/// `ip -j <args>` inside `ns`, parsed; an empty array when `ip` fails (e.g. no such device).
pub fn ip_json(ns: &Netns, args: &[&str]) -> Value {
    let mut full = vec!["-j", "-n", ns.name()];
    full.extend_from_slice(args);
    let out = weft_testkit::run(Command::new("ip").args(&full));
    if !out.success() || out.stdout.trim().is_empty() {
        return json!([]);
    }
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("ip {full:?} printed non-JSON ({e}): {}", out.stdout))
}

pub fn links(ns: &Netns) -> Vec<Link> {
    let value = ip_json(ns, &["link", "show"]);
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| Link {
            name: l["ifname"].as_str().unwrap_or_default().to_string(),
            alias: l["ifalias"].as_str().map(str::to_owned),
            up: l["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "UP")),
            mtu: l["mtu"].as_u64().unwrap_or_default(),
            mac: l["address"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

/// Global addresses on `dev` in `ns` as `addr/prefix` (link-local ones left out).
pub fn addresses(ns: &Netns, dev: &str) -> Vec<String> {
    let value = ip_json(ns, &["addr", "show", "dev", dev]);
    let mut out: Vec<String> = value
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["scope"] != "link")
        .map(|a| {
            format!(
                "{}/{}",
                a["local"].as_str().unwrap_or_default(),
                a["prefixlen"]
            )
        })
        .collect();
    out.sort();
    out
}

/// Routes of one family (`-4` or `-6`) in `ns` as `dst [via gw] dev`, for assertions and
/// failure messages.
pub fn routes(ns: &Netns, family: &str) -> Vec<String> {
    ip_json(ns, &[family, "route", "show"])
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let via = r["gateway"]
                .as_str()
                .map(|g| format!(" via {g}"))
                .unwrap_or_default();
            format!(
                "{}{via} dev {}",
                r["dst"].as_str().unwrap_or_default(),
                r["dev"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The addresses a result assigns, without prefix.
pub fn result_addresses(result: &Value) -> Vec<IpAddr> {
    result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ip| {
            let text = ip["address"].as_str().unwrap_or_default();
            let addr = text.split('/').next().unwrap_or_default();
            addr.parse()
                .unwrap_or_else(|_| panic!("result address {text:?} is not an address"))
        })
        .collect()
}

/// The host veth a result names (its first interface, the one without a sandbox).
pub fn result_host_veth(result: &Value) -> String {
    result["interfaces"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Whether `addr` lies in `subnet` (both as text).
pub fn in_subnet(addr: IpAddr, subnet: &str) -> bool {
    let net: ipnet::IpNet = subnet.parse().expect("test subnets are valid");
    net.contains(&addr)
}

//! Shared harness of the egress guard's integration tests (`tests/guard_*.rs`).
//!
//! A [`Lab`] is a simulated node: a "node" network namespace where the plugins run (through
//! `weft::chain`, entering only its network namespace, as a runtime on that node would),
//! and a "world" namespace behind it at 203.0.113.2 / 2001:db8:1::2 standing in for
//! everything outside the pod. Debian's `bridge` + `host-local` give each pod an address;
//! `weft-guard` is the weft binary under that name. What the guard did is judged by
//! observers that do not share its code: real sockets opened by real processes with real
//! UIDs inside the pod ([`probe`]), and the `nft` binary as an attacker and witness.
//! Everything is named with the `weft` prefix and removed by Drop guards.

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod fake_api;
pub mod probe;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{json, Map, Value};
use weft::chain::{Attachment, Chain};
use weft_cni::{CniResult, NetConfList};
use weft_testkit::{unique_name, Netns, VethPair};

/// The binary under test; it is `weft-guard` when exec'd under that name.
pub const WEFT: &str = env!("CARGO_BIN_EXE_weft");
/// Debian's reference plugins.
pub const DEBIAN_CNI: &str = "/usr/lib/cni";

pub const WORLD_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 2);
pub const WORLD_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
const NODE_UPLINK_V4: &str = "203.0.113.1";
const NODE_UPLINK_V6: &str = "2001:db8:1::1";
pub const POD_SUBNET_V4: &str = "10.77.0.0/24";
pub const POD_SUBNET_V6: &str = "fd77::/64";

pub const PROXY_UID: u32 = 1337;
pub const OTHER_UID: u32 = 1000;
pub const POD_NAMESPACE: &str = "sandboxes";

pub const ENABLED: &str = "guard.weft.dev/enabled";
pub const PROXY_UID_KEY: &str = "guard.weft.dev/proxy-uid";
pub const CONTRACT_VERSION: &str = "guard.weft.dev/contract-version";
pub const ALLOW_CIDRS: &str = "guard.weft.dev/allow-cidrs";
pub const ANNOTATIONS_CAPABILITY: &str = "io.kubernetes.cri.pod-annotations";

/// The annotations of a pod that opts in with `proxy_uid`.
pub fn opted_in(proxy_uid: u32) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(ENABLED.into(), json!("true"));
    map.insert(PROXY_UID_KEY.into(), json!(proxy_uid.to_string()));
    map.insert(CONTRACT_VERSION.into(), json!("1"));
    map
}

/// A directory under the system temp dir, removed with everything in it when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("weft-guard-{tag}-{}-{n}", std::process::id()));
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

/// Runs `work` on a thread inside the network namespace at `netns`.
pub fn in_netns<T: Send>(netns: &Path, work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = std::fs::File::open(netns)
                    .unwrap_or_else(|e| panic!("open {}: {e}", netns.display()));
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {}: {e}", netns.display()));
                work()
            })
            .join()
            .unwrap_or_else(|_| panic!("thread in {} panicked", netns.display()))
    })
}

/// A simulated node with a world behind it.
pub struct Lab {
    pub node: Netns,
    pub world: Netns,
    pub dir: TempDir,
}

impl Lab {
    pub fn new(tag: &str) -> Lab {
        weft_testkit::require_root();
        let dir = TempDir::new(tag);
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        // The runtime finds a plugin by its type: `weft-guard` is the weft binary.
        for name in ["weft-guard", "weft"] {
            std::os::unix::fs::symlink(WEFT, bin.join(name)).expect("symlink the plugin");
        }
        let node = Netns::new("nd");
        let world = Netns::new("wd");
        for ns in [&node, &world] {
            ns.sysctl("net.ipv6.conf.all.accept_dad", "0");
            ns.sysctl("net.ipv6.conf.default.accept_dad", "0");
        }
        node.sysctl("net.ipv4.ip_forward", "1");
        node.sysctl("net.ipv6.conf.all.forwarding", "1");
        let uplink = VethPair::new(
            &node,
            &[
                &format!("{NODE_UPLINK_V4}/24"),
                &format!("{NODE_UPLINK_V6}/64"),
            ],
            &world,
            &[&format!("{WORLD_V4}/24"), &format!("{WORLD_V6}/64")],
        );
        let _ = uplink;
        world.ip(&["route", "add", "10.76.0.0/14", "via", NODE_UPLINK_V4]);
        world.ip(&["-6", "route", "add", "fd77::/48", "via", NODE_UPLINK_V6]);
        Lab { node, world, dir }
    }

    pub fn bin_dirs(&self) -> Vec<PathBuf> {
        vec![self.dir.path().join("bin"), PathBuf::from(DEBIAN_CNI)]
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("guard-state")
    }

    /// Debian's bridge with host-local addresses (IPv4, and IPv6 when `dual`).
    pub fn bridge(&self, dual: bool) -> Value {
        let mut ranges = vec![json!([{ "subnet": POD_SUBNET_V4 }])];
        let mut routes = vec![json!({"dst": "0.0.0.0/0"})];
        if dual {
            ranges.push(json!([{ "subnet": POD_SUBNET_V6 }]));
            routes.push(json!({"dst": "::/0"}));
        }
        json!({
            "type": "bridge", "bridge": "weftbr0", "isGateway": true, "ipMasq": false,
            "ipam": {"type": "host-local", "ranges": ranges, "routes": routes,
                     "dataDir": self.dir.path().join("ipam")}
        })
    }

    /// The guard's plugin object: its state dir here, annotations capability on, and the
    /// statement that admission guarantees pod specs (the probes here are processes the
    /// test starts, not containers), plus `extra`.
    pub fn guard(&self, extra: Value) -> Value {
        let mut conf = json!({
            "type": "weft-guard",
            "stateDir": self.state_dir(),
            "capabilities": {ANNOTATIONS_CAPABILITY: true},
            "podSecurityGuarantee": "admission-policy",
        });
        if let (Some(conf), Some(extra)) = (conf.as_object_mut(), extra.as_object()) {
            conf.extend(extra.clone());
        }
        conf
    }

    /// A conflist of `plugins` in `version`, run inside the node namespace.
    pub fn chain(&self, version: &str, plugins: Vec<Value>) -> Chain {
        let list = json!({"cniVersion": version, "name": "guardnet", "plugins": plugins});
        let list = NetConfList::from_value(&list).expect("valid conflist");
        Chain::new(list, self.bin_dirs()).in_netns(self.node.path())
    }

    /// bridge followed by the guard, in 1.0.0 (what Debian's bridge speaks).
    pub fn guarded_chain(&self, dual: bool, guard_extra: Value) -> Chain {
        self.chain("1.0.0", vec![self.bridge(dual), self.guard(guard_extra)])
    }

    /// Runs the guard alone with `conf` (a complete request) inside the node namespace,
    /// with `env` added to the CNI environment (e.g. a fault to inject).
    pub fn run_guard(
        &self,
        command: &str,
        pod: Option<&Pod>,
        conf: &Value,
        env: &[(&str, &str)],
    ) -> Reply {
        let mut cmd = Command::new(self.dir.path().join("bin").join("weft-guard"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CNI_COMMAND", command)
            .env("CNI_PATH", DEBIAN_CNI)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(pod) = pod {
            cmd.env("CNI_CONTAINERID", &pod.att.container_id)
                .env("CNI_NETNS", &pod.att.netns)
                .env("CNI_IFNAME", &pod.att.ifname)
                .env("CNI_ARGS", &pod.att.args);
        }
        weft::netns_exec::enter_netns_before_exec(&mut cmd, self.node.path());
        let mut child = cmd.spawn().expect("spawn weft-guard");
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(conf.to_string().as_bytes())
                .expect("write stdin");
        }
        Reply::from_output(child.wait_with_output().expect("wait for weft-guard"))
    }

    /// A request for the guard alone, as a runtime builds it for the second plugin of the
    /// chain: name and version injected, runtimeConfig and prevResult given.
    pub fn guard_request(
        &self,
        version: &str,
        guard_extra: Value,
        pod: &Pod,
        prev: Option<&CniResult>,
    ) -> Value {
        let mut conf = self.guard(guard_extra);
        conf["cniVersion"] = json!(version);
        conf["name"] = json!("guardnet");
        if !pod.att.runtime_config.is_empty() {
            conf["runtimeConfig"] = Value::Object(pod.att.runtime_config.clone());
        }
        if let Some(prev) = prev {
            conf["prevResult"] = prev.to_value(version.parse().expect("version"));
        }
        conf
    }

    /// A new pod namespace, ready for probes (ICMP echo sockets allowed for every group).
    pub fn pod(&self, name: &str) -> Pod {
        let ns = Netns::new("pd");
        ns.sysctl("net.ipv6.conf.all.accept_dad", "0");
        ns.sysctl("net.ipv6.conf.default.accept_dad", "0");
        ns.sysctl("net.ipv4.ping_group_range", "0 2147483647");
        let att = Attachment {
            container_id: unique_name("ct"),
            netns: ns.path().display().to_string(),
            ifname: "eth0".into(),
            args: format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={POD_NAMESPACE};K8S_POD_NAME={name}"),
            runtime_config: Map::new(),
        };
        Pod { ns, att }
    }

    /// Whether the guard's table exists in `pod`'s namespace (asked of `nft`).
    pub fn has_fence(&self, pod: &Pod) -> bool {
        pod.nft(&["list", "table", "inet", "weft_guard"]).success()
    }

    /// Whether the guard's frame fence (table netdev weft_guard) exists in `pod`'s namespace.
    pub fn has_frame_fence(&self, pod: &Pod) -> bool {
        pod.nft(&["list", "table", "netdev", "weft_guard"])
            .success()
    }
}

/// A pod: its namespace and its attachment.
pub struct Pod {
    pub ns: Netns,
    pub att: Attachment,
}

impl Pod {
    /// Passes these annotations through runtimeConfig, as containerd does.
    pub fn with_annotations(mut self, annotations: Map<String, Value>) -> Pod {
        self.att
            .runtime_config
            .insert(ANNOTATIONS_CAPABILITY.into(), Value::Object(annotations));
        self
    }

    pub fn path(&self) -> &Path {
        self.ns.path()
    }

    /// `nft` inside the pod's namespace (the attacker, and a witness).
    pub fn nft(&self, args: &[&str]) -> weft_testkit::Output {
        weft_testkit::require_tool("nft");
        self.ns.exec("nft", args)
    }

    pub fn nft_ok(&self, args: &[&str]) -> String {
        let out = self.nft(args);
        assert!(out.success(), "nft {args:?}: {}", out.stderr);
        out.stdout
    }

    /// The pod's address of a family, from `ip -j addr`.
    pub fn address(&self, v6: bool) -> Option<IpAddr> {
        let out = self
            .ns
            .exec_ok("ip", &["-j", "addr", "show", "dev", "eth0"])
            .stdout;
        let links: Value = serde_json::from_str(&out).ok()?;
        links
            .get(0)?
            .get("addr_info")?
            .as_array()?
            .iter()
            .find_map(|a| {
                let addr: IpAddr = a.get("local")?.as_str()?.parse().ok()?;
                let scope = a.get("scope")?.as_str()?;
                (scope == "global" && addr.is_ipv6() == v6).then_some(addr)
            })
    }
}

/// What one plugin invocation printed, with its exit status.
pub use weft_testkit::PluginReply as Reply;

/// The message of a chain error (to look for the guard's words in it).
pub fn chain_error(result: Result<impl std::fmt::Debug, weft::chain::ChainError>) -> String {
    match result {
        Ok(v) => panic!("expected the chain to fail, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// A TCP server inside a namespace answering "pong" to every "ping", until dropped.
pub struct PongServer {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PongServer {
    /// Listens on every address (IPv4 and IPv6) of `netns`.
    pub fn start(netns: &Path) -> PongServer {
        use std::io::Read;
        let listener = in_netns(netns, || {
            std::net::TcpListener::bind("[::]:0").expect("bind pong server")
        });
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                        let mut buf = [0u8; 4];
                        if conn.read_exact(&mut buf).is_ok() {
                            let _ = conn.write_all(b"pong");
                        }
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        PongServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for PongServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Connects from inside `netns` to `addr:port`, sends "ping" and expects "pong".
pub fn ping_pong_from(netns: &Path, addr: IpAddr, port: u16) -> Result<(), String> {
    use std::io::Read;
    in_netns(netns, || {
        let target = std::net::SocketAddr::new(addr, port);
        let mut conn =
            std::net::TcpStream::connect_timeout(&target, std::time::Duration::from_secs(5))
                .map_err(|e| format!("connect {target}: {e}"))?;
        conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        conn.write_all(b"ping").map_err(|e| format!("write: {e}"))?;
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf)
            .map_err(|e| format!("read: {e}"))?;
        if &buf == b"pong" {
            Ok(())
        } else {
            Err(format!("answer {buf:?}"))
        }
    })
}

/// A UDP server inside a namespace that keeps the payload of every datagram it gets, and
/// echoes it back, on every address (IPv4 and IPv6), until dropped.
pub struct UdpSink {
    pub port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UdpSink {
    pub fn start(netns: &Path) -> UdpSink {
        let socket = in_netns(netns, || {
            std::net::UdpSocket::bind("[::]:0").expect("bind the UDP sink")
        });
        socket
            .set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .expect("read timeout");
        let port = socket.local_addr().expect("addr").port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (keep, flag) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !flag.load(Ordering::Acquire) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], from);
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if let Ok(mut list) = keep.lock() {
                        list.push(text);
                    }
                }
            }
        });
        UdpSink {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Whether a datagram with this payload arrived.
    pub fn saw(&self, payload: &str) -> bool {
        self.seen
            .lock()
            .map(|l| l.iter().any(|p| p == payload))
            .unwrap_or(false)
    }

    /// Waits (up to 10 s, so a loaded machine does not fail the test) for `payload`.
    pub fn wait_for(&self, payload: &str) -> bool {
        for _ in 0..1000 {
            if self.saw(payload) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Lab {
    /// The MAC address of the pods' gateway (Debian bridge's `weftbr0` in the node).
    pub fn gateway_mac(&self) -> String {
        let out = self
            .node
            .exec_ok("ip", &["-j", "link", "show", "weftbr0"])
            .stdout;
        let links: Value = serde_json::from_str(&out).expect("ip -j link");
        links[0]["address"]
            .as_str()
            .expect("bridge MAC")
            .to_string()
    }
}

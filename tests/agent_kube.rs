//! The agent on the Kubernetes source, against the in-memory API server, through the faults
//! a cluster throws at it: the API server down at start, a watch dropped mid-stream, 410
//! Gone and a relist, an object deleted while the agent was away, a malformed object, and
//! the readiness taint coming off and going back on. Root only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft::lab::{self, netns, topology::Topology};
use weft_apiserver::{ApiServer, Config, Handle, Listen, RunningServer};

mod common;
use common::TestLab;

const TAINT: &str = "node.weft.dev/agent-not-ready";
const WAIT: Duration = Duration::from_secs(60);

/// An in-memory API server listening inside a node's network namespace (so the node's
/// agent reaches it on loopback), on its own runtime; stopped on drop.
struct Api {
    server: Option<RunningServer>,
    runtime: tokio::runtime::Runtime,
    port: u16,
}

impl Api {
    fn start_in(netns: &Path) -> Api {
        let listener = netns::in_netns(netns, || Ok(std::net::TcpListener::bind("127.0.0.1:0")?))
            .expect("listen in the node's namespace");
        let port = listener.local_addr().unwrap().port();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // Bookmarks rarely: a bookmark moves a watch to the newest version, and the 410
        // step below needs the Node watch to lag behind.
        let config = Config {
            bookmark_interval_ms: 120_000,
            ..Config::default()
        };
        let server = runtime
            .block_on(ApiServer::new(config).start(vec![Listen::Listener(listener)], None))
            .expect("the API server starts");
        Api {
            server: Some(server),
            runtime,
            port,
        }
    }

    fn handle(&self) -> &Handle {
        self.server.as_ref().unwrap().handle()
    }

    fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("agent.kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: lab\ncontexts:\n- name: lab\n  context: {{cluster: lab, user: agent}}\nclusters:\n- name: lab\n  cluster: {{server: \"http://127.0.0.1:{}\"}}\nusers:\n- name: agent\n  user: {{}}\n",
                self.port
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}

/// A `weft agent --source kubernetes` for node `i`, killed on drop.
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn start(lab: &TestLab, i: u32, kubeconfig: &Path) -> Agent {
        let weft = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
        let dir_cmd = lab::up::agent_command(&weft, &lab.state, i);
        // The lab's command line with the source swapped, and no periodic resync in the
        // way of counting runs.
        let mut args: Vec<String> = dir_cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for (flag, value) in [
            ("--source", "kubernetes".to_string()),
            ("--resync-seconds", "3600".to_string()),
        ] {
            let at = args.iter().position(|a| a == flag).expect("flag present");
            args[at + 1] = value;
        }
        args.push("--kubeconfig".into());
        args.push(kubeconfig.display().to_string());
        let node = lab.state.node(i).unwrap();
        let log = lab
            .state
            .dir
            .join(format!("node{i}"))
            .join("agent-kube.log");
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(&weft);
        cmd.args(&args)
            .env_remove("WEFT_LOG")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        weft::netns_exec::enter_netns_before_exec(&mut cmd, &netns::path_of(&node.netns));
        Agent {
            child: cmd.spawn().expect("start the agent"),
            log,
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(lab: &TestLab, i: u32, path: &'static str) -> (u16, String) {
    let node = lab.state.node(i).unwrap();
    let listen = node.agent_listen.clone();
    netns::in_netns(&netns::path_of(&node.netns), move || {
        Ok(lab::http_get(&listen, path).unwrap_or((0, String::new())))
    })
    .unwrap()
}

/// The sum of a metric over its labels (`None` when the agent does not export it yet).
fn metric(lab: &TestLab, i: u32, name: &str, label: Option<&str>) -> Option<f64> {
    let (_, body) = get(lab, i, "/metrics");
    let values: Vec<f64> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.split(['{', ' ']).next() == Some(name) && label.is_none_or(|want| l.contains(want))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Objects the node reconcilers created, updated or removed (readiness writes go to the
/// API server, not the node, and are left out).
fn node_writes(lab: &TestLab, i: u32) -> f64 {
    let (_, body) = get(lab, i, "/metrics");
    body.lines()
        .filter(|l| l.starts_with("weft_agent_reconciler_changes_total{"))
        .filter(|l| !l.contains("node-readiness"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

fn wait_for(what: &str, agent: &mut Agent, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(
            agent.alive(),
            "the agent exited waiting for {what}:\n{}",
            agent.log()
        );
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; agent log:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node_json(topology: &Topology, i: u32) -> Value {
    serde_yaml::from_str(&topology.node_yaml(i)).unwrap()
}

fn routes(lab: &TestLab, i: u32) -> String {
    let node = lab.state.node(i).unwrap();
    weft_testkit::run(weft_testkit::cmd_in(&netns::path_of(&node.netns), "ip").args(["route"]))
        .stdout
}

fn has_taint(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == TAINT))
}

#[test]
fn the_agent_follows_the_api_server_through_outages_gone_relists_and_bad_objects() {
    let lab = TestLab::up(2, 1);
    let topology = Topology::new(&lab.state.name);
    let node1 = lab.state.node(1).unwrap().clone();
    let api = Api::start_in(&netns::path_of(&node1.netns));
    let h = api.handle().clone();
    // node1 registered the way docs/kubernetes.md says: with weft's taint.
    let mut registered = node_json(&topology, 1);
    registered["spec"]["taints"] = json!([{"key": TAINT, "effect": "NoSchedule"}]);
    h.apply(registered).unwrap();
    h.apply(node_json(&topology, 2)).unwrap();
    let kubeconfig = api.kubeconfig(&lab.state.dir);

    // The API server is down when the agent starts.
    h.set_up(false);
    let pid = node1.agent_pid.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while lab::process_alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut agent = Agent::start(&lab, 1, &kubeconfig);
    std::thread::sleep(Duration::from_secs(2));
    assert!(agent.alive(), "{}", agent.log());
    let (code, body) = get(&lab, 1, "/readyz");
    assert_eq!(code, 503, "not ready before the first list: {body}");
    // Pods keep their network and ADD works meanwhile.
    let probes = lab::check::check(&lab.state).unwrap();
    assert!(
        probes.iter().all(|p| p.ok()),
        "{}",
        lab::check::render(&probes)
    );
    let late = lab::up::add_pod(&lab.state, &topology, 1, 9).expect("ADD with the API down");
    assert!(!late.addresses.is_empty());

    // It comes back: the agent lists, finds the node as it was, and lifts the taint.
    h.set_up(true);
    wait_for("readiness", &mut agent, || get(&lab, 1, "/readyz").0 == 200);
    assert_eq!(node_writes(&lab, 1), 0.0, "the node was already programmed");
    wait_for("the taint to go", &mut agent, || {
        !has_taint(&h.get("v1", "Node", "", "node1").unwrap())
    });
    let node = h.get("v1", "Node", "", "node1").unwrap();
    let conditions = node["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions.iter().any(|c| c["type"] == "NetworkUnavailable"
            && c["status"] == "False"
            && c["reason"] == "WeftIsUp"),
        "{node}"
    );

    // A watch dropped mid-stream: the agent resumes and follows a new peer.
    h.drop_watches(None, true);
    let mut node3 = node_json(&topology, 2);
    node3["metadata"]["name"] = json!("node3");
    node3["spec"]["podCIDRs"] = json!(["10.244.3.0/24"]);
    node3["status"]["addresses"] = json!([{"type": "InternalIP", "address": "198.51.100.13"}]);
    h.apply(node3).unwrap();
    wait_for("the new peer's route", &mut agent, || {
        routes(&lab, 1).contains("10.244.3.0/24")
    });

    // 410 Gone and a relist: no reconciler runs, nothing is written.
    let writes = node_writes(&lab, 1);
    let runs = metric(&lab, 1, "weft_agent_reconciler_runs_total", None).unwrap();
    let events = metric(&lab, 1, "weft_agent_source_events_total", Some("\"Node\"")).unwrap();
    // Another kind's write moves the cluster past the Node watch's version, which expires.
    h.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "weft-bump"}}))
        .unwrap();
    h.expire(None);
    h.drop_watches(None, false);
    wait_for("the relist", &mut agent, || {
        metric(&lab, 1, "weft_agent_source_events_total", Some("\"Node\"")).unwrap() >= events + 3.0
    });
    assert!(agent.log().contains("410 Gone"), "{}", agent.log());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node_writes(&lab, 1), writes, "the relist wrote to the node");
    assert_eq!(
        metric(&lab, 1, "weft_agent_reconciler_runs_total", None).unwrap(),
        runs,
        "the relist ran reconcilers"
    );

    // Deleted while the agent was away: gone after the relist.
    h.set_up(false);
    h.delete("v1", "Node", "", "node3").unwrap();
    h.expire(None);
    h.set_up(true);
    wait_for("the deleted peer's route to go", &mut agent, || {
        !routes(&lab, 1).contains("10.244.3.0/24")
    });

    // A malformed object is reported by name and field and skipped.
    h.apply(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "weft-bad"},
                   "status": {"addresses": [{"type": "InternalIP", "address": "198.51.100.99"}]}}),
    )
    .unwrap();
    wait_for("the issue", &mut agent, || {
        metric(&lab, 1, "weft_agent_model_issues", None) == Some(1.0)
    });
    assert!(
        agent.log().contains("Node/weft-bad spec.podCIDRs"),
        "{}",
        agent.log()
    );
    assert_eq!(get(&lab, 1, "/readyz").0, 200);

    // Readiness stops holding (this node lost its pod CIDRs): the taint goes back on, and
    // nothing on the node is torn down; restored, it comes off again.
    let mut broken = h.get("v1", "Node", "", "node1").unwrap();
    broken["spec"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| k != "podCIDRs" && k != "podCIDR");
    h.apply(broken).unwrap();
    wait_for("the taint to come back", &mut agent, || {
        has_taint(&h.get("v1", "Node", "", "node1").unwrap())
    });
    assert_ne!(get(&lab, 1, "/readyz").0, 200);
    let probes = lab::check::check(&lab.state).unwrap();
    assert!(
        probes.iter().all(|p| p.ok()),
        "{}",
        lab::check::render(&probes)
    );
    let mut fixed = h.get("v1", "Node", "", "node1").unwrap();
    fixed["spec"]["podCIDRs"] = node_json(&topology, 1)["spec"]["podCIDRs"].clone();
    h.apply(fixed).unwrap();
    wait_for("the taint to go again", &mut agent, || {
        !has_taint(&h.get("v1", "Node", "", "node1").unwrap())
    });

    // The agent never exited, and made no request beyond the ones it declares.
    assert!(agent.alive());
    for (grant, _) in h.request_summary() {
        if grant.user == "system:weft-control" {
            continue;
        }
        let sub = Some(grant.subresource.as_str()).filter(|s| !s.is_empty());
        assert!(
            grant.resource.is_empty()
                || weft::agent::api::allowed(&grant.verb, &grant.api_group, &grant.resource, sub),
            "the agent made an undeclared request: {grant:?}"
        );
    }
}

use serde_json::Value;
use weft_netlink::{Handle, Netns, VethSpec};

/// A test-owned namespace (deleted on drop) plus our own handle on it.
pub struct Ns {
    pub netns: Netns,
    pub test: weft_testkit::Netns,
}

impl Ns {
    pub fn new(tag: &str) -> Ns {
        weft_testkit::require_root();
        weft_testkit::require_tool("ip");
        let test = weft_testkit::Netns::new(tag);
        let netns = Netns::open(test.path()).expect("open the test namespace");
        Ns { netns, test }
    }

    pub fn handle(&self) -> Handle {
        Handle::new_in(&self.netns).expect("netlink handle in the test namespace")
    }

    /// `ip -j <args>` inside the namespace, parsed.
    pub fn ip(&self, args: &[&str]) -> Value {
        self.json("ip", args)
    }

    /// `bridge -j <args>` inside the namespace, parsed.
    pub fn bridge(&self, args: &[&str]) -> Value {
        self.json("bridge", args)
    }

    /// `tc -j <args>` inside the namespace, parsed.
    pub fn tc(&self, args: &[&str]) -> Value {
        self.json("tc", args)
    }

    /// `ip -j -d link show dev <name>`: the one link object.
    pub fn link(&self, name: &str) -> Value {
        let links = self.ip(&["-d", "link", "show", "dev", name]);
        links[0].clone()
    }

    /// Whether `ip link show dev <name>` finds the link.
    pub fn has_link(&self, name: &str) -> bool {
        self.test
            .exec("ip", &["link", "show", "dev", name])
            .success()
    }

    fn json(&self, program: &str, args: &[&str]) -> Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        let out = self.test.exec_ok(program, &full);
        if out.stdout.trim().is_empty() {
            return Value::Array(Vec::new());
        }
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{program} {args:?} printed invalid JSON ({e}): {}",
                out.stdout
            )
        })
    }
}

/// A veth pair with both ends inside `ns`, up; returns (name, index) of the first end.
pub fn veth_in(ns: &Ns, handle: &mut Handle) -> (String, u32) {
    let name = weft_testkit::unique_name("va");
    let peer = weft_testkit::unique_name("vb");
    let index = handle
        .create_veth(&VethSpec {
            name: &name,
            peer_name: &peer,
            up: true,
            ..Default::default()
        })
        .expect("create veth");
    let peer_index = handle
        .link_by_name(&peer)
        .unwrap()
        .expect("peer exists")
        .index;
    handle.set_up(peer_index).expect("peer up");
    assert!(ns.has_link(&peer), "ip sees the peer in the same namespace");
    (name, index)
}

pub fn strings(values: &Value) -> Vec<String> {
    values
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

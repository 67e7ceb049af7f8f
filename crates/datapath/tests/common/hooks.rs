//! What is attached at a device's ingress, read the way an operator would (`tc -j`
//! for filters, aya's TCX query for links), independently of the crate's own code;
//! and a node namespace with pod veths to attach to.

use aya::programs::tc::TcAttachType;
use aya::programs::SchedClassifier;
use aya::EbpfLoader;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use weft_datapath::Program;
use weft_testkit::{Netns, VethPair};

/// A node namespace with `n` pod veths (host sides in the node).
pub struct Node {
    pub ns: Netns,
    _pods: Vec<Netns>,
    pub host_veths: Vec<String>,
}

impl Node {
    pub fn new(n: usize) -> Node {
        let ns = Netns::new("nd");
        let mut pods = Vec::new();
        let mut host_veths = Vec::new();
        for _ in 0..n {
            let pod = Netns::new("pd");
            let veth = VethPair::new(&ns, &[], &pod, &[]);
            host_veths.push(veth.a);
            pods.push(pod);
        }
        Node {
            ns,
            _pods: pods,
            host_veths,
        }
    }
}

/// Program ids attached at TCX ingress of `ifname` (calling thread's namespace).
pub fn tcx_ingress_programs(ifname: &str) -> Vec<u32> {
    let (_, programs) =
        SchedClassifier::query_tcx(ifname, TcAttachType::Ingress).expect("query tcx");
    programs.iter().map(|p| p.id()).collect()
}

/// One ingress filter as `tc -j filter show` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcFilter {
    pub pref: u64,
    pub protocol: String,
    pub kind: String,
    pub chain: u64,
    /// `0x1` for a bpf filter with handle 1.
    pub handle: Option<String>,
    pub bpf_name: Option<String>,
    pub prog_id: Option<u64>,
    pub direct_action: bool,
}

/// The ingress filters of `dev` in `ns` (not the per-pref headers tc also prints).
pub fn ingress_filters(ns: &Netns, dev: &str) -> Vec<TcFilter> {
    let out = weft_testkit::run_ok(Command::new("tc").args([
        "-j",
        "-n",
        ns.name(),
        "filter",
        "show",
        "dev",
        dev,
        "ingress",
    ]));
    let trimmed = out.stdout.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    let entries: Vec<Value> = serde_json::from_str(trimmed).expect("tc -j output is JSON");
    entries
        .iter()
        .filter_map(|e| {
            let options = e.get("options")?;
            Some(TcFilter {
                pref: e["pref"].as_u64().expect("pref"),
                protocol: e["protocol"].as_str().unwrap_or_default().to_string(),
                kind: e["kind"].as_str().unwrap_or_default().to_string(),
                chain: e["chain"].as_u64().unwrap_or(0),
                handle: options
                    .get("handle")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                bpf_name: options
                    .get("bpf_name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                prog_id: options.get("prog").and_then(|p| p["id"].as_u64()),
                direct_action: options
                    .get("direct-action")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

/// The name weft gives `program`'s filters of the datapath pinned at `root`.
pub fn filter_name(root: &Path, program: Program) -> String {
    format!("weft:{program}@{}", root.display())
}

/// Asserts that `dev` carries exactly one filter of `program` from `root`, at weft's
/// place (pref 1, handle 1, protocol all, chain 0, direct-action), running `prog_id`.
pub fn assert_weft_filter(ns: &Netns, dev: &str, root: &Path, program: Program, prog_id: u32) {
    let name = filter_name(root, program);
    let ours: Vec<TcFilter> = ingress_filters(ns, dev)
        .into_iter()
        .filter(|f| f.bpf_name.as_deref() == Some(name.as_str()))
        .collect();
    assert_eq!(
        ours,
        [TcFilter {
            pref: 1,
            protocol: "all".into(),
            kind: "bpf".into(),
            chain: 0,
            handle: Some("0x1".into()),
            bpf_name: Some(name),
            prog_id: Some(u64::from(prog_id)),
            direct_action: true,
        }],
        "weft's filter on {dev}"
    );
}

/// The bpf filters on `dev` with weft's name for `program` and `root`.
pub fn weft_filters(ns: &Netns, dev: &str, root: &Path, program: Program) -> Vec<TcFilter> {
    let name = filter_name(root, program);
    ingress_filters(ns, dev)
        .into_iter()
        .filter(|f| f.bpf_name.as_deref() == Some(name.as_str()))
        .collect()
}

/// Pins the code of `impostor` at the pin of `program`, as if an older weft had
/// installed a different `program`. Returns the impostor's program id.
pub fn pin_other_program(root: &Path, program: Program, impostor: Program) -> u32 {
    let mut ebpf = EbpfLoader::new()
        .default_map_pin_directory(root.join("maps"))
        .load(impostor.object())
        .expect("load impostor object");
    let prog: &mut SchedClassifier = ebpf
        .program_mut(impostor.name())
        .expect("impostor program")
        .try_into()
        .expect("classifier");
    prog.load().expect("verify impostor");
    let id = prog.info().expect("info").id();
    let pin = root.join("progs").join(program.name());
    std::fs::remove_file(&pin).expect("unpin current program");
    prog.pin(&pin).expect("pin impostor");
    id
}

pub fn pinned_program_id(pin: &Path) -> u32 {
    let prog = SchedClassifier::from_pin(pin).expect("open pinned program");
    prog.info().expect("info").id()
}

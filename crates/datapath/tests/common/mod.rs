//! Shared by the datapath's integration tests: private pin roots, namespace threads,
//! crafted frames and a `BPF_PROG_TEST_RUN` wrapper.
#![allow(dead_code)] // each test binary uses a different subset

pub mod cluster;
pub mod flows;
pub mod frames;
pub mod harness;
pub mod hooks;
pub mod legacy;
pub mod packet;
pub mod pods;
pub mod scenario;
pub mod servers;

use aya::programs::{SchedClassifier, TestRun, TestRunOptions};
use std::fs::File;
use std::path::{Path, PathBuf};
use weft_datapath::{Program, Tables};

pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;
pub const TC_ACT_REDIRECT: u32 = 7;

/// A private pin root on the host bpffs, `/sys/fs/bpf/weft-test-<unique>`, removed
/// (with every map, program and link pinned under it) when dropped.
pub struct PinRoot {
    path: PathBuf,
}

impl PinRoot {
    pub fn new(tag: &str) -> PinRoot {
        weft_testkit::require_root();
        let path = PathBuf::from(format!(
            "/sys/fs/bpf/weft-test-{}",
            weft_testkit::unique_name(tag)
        ));
        assert!(!path.exists(), "{} already exists", path.display());
        PinRoot { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn tables(&self) -> Tables {
        Tables::open(&self.path).expect("open pinned maps")
    }
}

impl Drop for PinRoot {
    fn drop(&mut self) {
        // Unpinning a link drops its last reference, which detaches it.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs `f` on a thread that has entered `netns` (network namespace only), so that
/// ifindexes, `bpf_check_mtu` and link creation resolve there, while bpffs stays
/// the host's.
pub fn in_netns<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let netns = netns.to_path_buf();
    std::thread::spawn(move || {
        let file = File::open(&netns).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// ifindex of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> u32 {
    nix::net::if_::if_nametoindex(ifname).unwrap_or_else(|e| panic!("ifindex of {ifname}: {e}"))
}

/// The outcome of one `BPF_PROG_TEST_RUN`.
#[derive(Debug)]
pub struct Run {
    pub retval: u32,
    pub data_out: Vec<u8>,
}

/// Runs the program pinned under `root` on `frame`. Without a context the skb's
/// device is the loopback of the calling thread's namespace, so `skb->ifindex` is 1.
pub fn test_run(root: &Path, program: Program, frame: &[u8]) -> Run {
    let pin = root.join("progs").join(program.name());
    let prog = SchedClassifier::from_pin(&pin).expect("open pinned program");
    let mut out = vec![0u8; frame.len() + 256];
    let mut opts = TestRunOptions::new();
    opts.data_in = Some(frame);
    opts.data_out = Some(&mut out);
    let result = prog.test_run(opts).expect("BPF_PROG_TEST_RUN");
    out.truncate(result.data_size_out as usize);
    Run {
        retval: result.return_value,
        data_out: out,
    }
}

/// Runs `frame` through `program` and checks the verdict and that exactly one
/// counter moved, by one: `outcome`. Returns the run for further checks.
pub fn expect(
    root: &Path,
    program: Program,
    frame: &[u8],
    retval: u32,
    outcome: weft_datapath::Counter,
) -> Run {
    let tables = Tables::open(root).expect("open pinned maps");
    let before = tables.counters().expect("counters");
    let run = test_run(root, program, frame);
    let after = tables.counters().expect("counters");
    assert_eq!(
        run.retval,
        retval,
        "{program}: verdict {} (expected {retval}); counters after: {:?}",
        run.retval,
        after.iter().collect::<Vec<_>>()
    );
    for counter in weft_datapath::Counter::ALL {
        let delta = after.get(counter) - before.get(counter);
        let want = u64::from(counter == outcome);
        assert_eq!(
            delta,
            want,
            "{program}: counter {} moved by {delta}, expected {want}",
            counter.name()
        );
    }
    run
}

/// What one program run did: its verdict and output frame, the one outcome counter that
/// moved, and every event that moved (with how much).
#[derive(Debug)]
pub struct Outcome {
    pub retval: u32,
    pub out: Vec<u8>,
    pub counter: weft_datapath::Counter,
    pub events: Vec<(weft_datapath::Event, u64)>,
}

impl Outcome {
    pub fn event(&self, event: weft_datapath::Event) -> u64 {
        self.events
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(0, |(_, n)| *n)
    }

    /// The output frame, read back.
    pub fn parsed(&self) -> packet::Parsed {
        packet::parse(&self.out)
    }
}

/// Runs `frame` through `program`, checks that exactly one outcome counter moved, by
/// one, and returns what happened.
pub fn run(root: &Path, program: Program, frame: &[u8]) -> Outcome {
    let tables = Tables::open(root).expect("open pinned maps");
    let (counters, events) = (tables.counters().unwrap(), tables.events().unwrap());
    let r = test_run(root, program, frame);
    let (counters2, events2) = (tables.counters().unwrap(), tables.events().unwrap());
    let moved: Vec<_> = weft_datapath::Counter::ALL
        .into_iter()
        .filter(|c| counters2.get(*c) != counters.get(*c))
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "{program}: one outcome per packet, got {moved:?} (verdict {})",
        r.retval
    );
    assert_eq!(counters2.get(moved[0]) - counters.get(moved[0]), 1);
    let events = weft_datapath::Event::ALL
        .into_iter()
        .filter_map(|e| {
            let d = events2.get(e) - events.get(e);
            (d > 0).then_some((e, d))
        })
        .collect();
    Outcome {
        retval: r.retval,
        out: r.data_out,
        counter: moved[0],
        events,
    }
}

/// A network namespace holding a fixed-VNI VXLAN device with MTU 1450, as a node has.
pub fn overlay_netns() -> (weft_testkit::Netns, String) {
    let ns = weft_testkit::Netns::new("dp");
    let vxlan = weft_testkit::unique_name("vx");
    ns.ip(&[
        "link",
        "add",
        &vxlan,
        "type",
        "vxlan",
        "id",
        "42",
        "dstport",
        "4789",
        "nolearning",
    ]);
    ns.ip(&["link", "set", &vxlan, "mtu", "1450", "up"]);
    (ns, vxlan)
}

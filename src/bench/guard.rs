//! `weft bench guard`: the ADD latency weft-guard adds to a chain.
//!
//! The same chain is timed with and without the guard, interleaved in one run: Debian's
//! `bridge` + `host-local` as the primary, then `weft-guard` (this binary under that name)
//! for an opted-in pod whose annotations come through runtimeConfig, as containerd passes
//! them. Plugins run inside a scratch "node" network namespace, each ADD into a fresh pod
//! namespace made beforehand (not timed). Each round times one ADD of each kind, in
//! alternating order, so load from other tenants hits both alike. The figure is the
//! difference of the medians; the median of the per-round differences and the spread are
//! printed beside it. Nothing here asserts timing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};
use weft_cni::NetConfList;

use crate::bench::stats::Summary;
use crate::chain::{Attachment, Chain};

/// Rounds below this give medians too noisy to compare on a shared machine.
pub const MIN_ROUNDS: usize = 30;

/// Options of `weft bench guard`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Timed rounds; each times one ADD with the guard and one without.
    #[arg(long, default_value_t = 40)]
    pub rounds: usize,
    /// Untimed rounds first, to warm caches.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Where Debian's reference plugins (bridge, host-local) are.
    #[arg(long, default_value = "/usr/lib/cni")]
    pub cni_bin_dir: PathBuf,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub without_guard: Summary,
    pub with_guard: Summary,
    /// Per-round (with - without), in milliseconds.
    pub paired: Summary,
}

impl Report {
    /// Median with the guard minus median without it, in milliseconds.
    pub fn added_ms(&self) -> f64 {
        self.with_guard.median - self.without_guard.median
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ADD of bridge+host-local, interleaved, annotations through runtimeConfig"
        )?;
        writeln!(f, "  without guard (ms): {}", self.without_guard)?;
        writeln!(f, "  with guard    (ms): {}", self.with_guard)?;
        writeln!(f, "  per-round difference (ms): {}", self.paired)?;
        let ratio = if self.without_guard.median > 0.0 {
            self.with_guard.median / self.without_guard.median
        } else {
            0.0
        };
        writeln!(f, "  ratio with/without (medians): {ratio:.2}")?;
        write!(f, "added add latency guard: {:.2} ms", self.added_ms())
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let report = measure(args)?;
    println!("{report}");
    Ok(())
}

/// Runs the benchmark and returns the figures.
pub fn measure(args: &Args) -> anyhow::Result<Report> {
    if args.rounds < MIN_ROUNDS {
        bail!(
            "--rounds {} is below {MIN_ROUNDS}: the medians would not mean much",
            args.rounds
        );
    }
    if !nix::unistd::geteuid().is_root() {
        bail!("weft bench guard needs root (network namespaces, nftables)");
    }
    for plugin in ["bridge", "host-local"] {
        let path = args.cni_bin_dir.join(plugin);
        if !path.is_file() {
            bail!(
                "{} not found: install containernetworking-plugins or pass --cni-bin-dir",
                path.display()
            );
        }
    }
    let scratch = Scratch::new()?;
    let node = scratch.netns("n")?;
    let bins = vec![scratch.bin_dir()?, args.cni_bin_dir.clone()];
    let bridge = json!({
        "type": "bridge", "bridge": "weftbench0", "isGateway": true, "ipMasq": false,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.79.0.0/16"}]],
                 "routes": [{"dst": "0.0.0.0/0"}], "dataDir": scratch.dir.join("ipam")}
    });
    let guard = json!({
        "type": "weft-guard", "stateDir": scratch.dir.join("guard"),
        "podSecurityGuarantee": "admission-policy",
        "capabilities": {"io.kubernetes.cri.pod-annotations": true}
    });
    let chain = |plugins: Vec<Value>| -> anyhow::Result<Chain> {
        let list = NetConfList::from_value(
            &json!({"cniVersion": "1.0.0", "name": "benchnet", "plugins": plugins}),
        )
        .map_err(|e| anyhow::anyhow!("bench conflist: {e}"))?;
        Ok(Chain::new(list, bins.clone()).in_netns(node.clone()))
    };
    let guarded = chain(vec![bridge.clone(), guard])?;
    let plain = chain(vec![bridge])?;

    let mut with = Vec::with_capacity(args.rounds);
    let mut without = Vec::with_capacity(args.rounds);
    for round in 0..args.warmup + args.rounds {
        let guarded_first = round % 2 == 0;
        let (a, b) = (scratch.netns("a")?, scratch.netns("b")?);
        let (t_guarded, t_plain) = if guarded_first {
            let g = timed_add(&guarded, &a, round)?;
            (g, timed_add(&plain, &b, round)?)
        } else {
            let p = timed_add(&plain, &b, round)?;
            (timed_add(&guarded, &a, round)?, p)
        };
        if round >= args.warmup {
            with.push(t_guarded);
            without.push(t_plain);
        }
        scratch.remove_netns(&a);
        scratch.remove_netns(&b);
    }
    let paired: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(w, o)| (w.as_secs_f64() - o.as_secs_f64()) * 1e3)
        .collect();
    Ok(Report {
        without_guard: Summary::of_durations(&without),
        with_guard: Summary::of_durations(&with),
        paired: Summary::of(&paired),
    })
}

/// Times one ADD into `netns`, then deletes the attachment (untimed).
fn timed_add(chain: &Chain, netns: &Path, round: usize) -> anyhow::Result<Duration> {
    let mut annotations = Map::new();
    annotations.insert("guard.weft.dev/enabled".into(), json!("true"));
    annotations.insert("guard.weft.dev/proxy-uid".into(), json!("1337"));
    annotations.insert("guard.weft.dev/contract-version".into(), json!("1"));
    let mut runtime_config = Map::new();
    runtime_config.insert(
        "io.kubernetes.cri.pod-annotations".into(),
        Value::Object(annotations),
    );
    let att = Attachment {
        container_id: format!(
            "weftbench{round}{}",
            netns.file_name().and_then(|n| n.to_str()).unwrap_or("x")
        ),
        netns: netns.display().to_string(),
        ifname: "eth0".into(),
        args: format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod{round}"),
        runtime_config,
    };
    let start = Instant::now();
    let result = chain
        .add(&att)
        .with_context(|| format!("round {round}: ADD"))?;
    let elapsed = start.elapsed();
    chain
        .del(&att, Some(&result))
        .with_context(|| format!("round {round}: DEL"))?;
    Ok(elapsed)
}

/// The bench's temporary directory and namespaces, removed when dropped.
struct Scratch {
    dir: PathBuf,
    tag: String,
    namespaces: std::cell::RefCell<Vec<String>>,
    counter: std::cell::Cell<u32>,
}

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let tag = format!("{:x}", std::process::id() % 0x10000);
        let dir = std::env::temp_dir().join(format!("weft-bench-guard-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Scratch {
            dir,
            tag,
            namespaces: Default::default(),
            counter: Default::default(),
        })
    }

    /// A bin dir where `weft-guard` is this very binary.
    fn bin_dir(&self) -> anyhow::Result<PathBuf> {
        let bin = self.dir.join("bin");
        std::fs::create_dir_all(&bin)?;
        let exe = std::env::current_exe().context("find the weft binary")?;
        std::os::unix::fs::symlink(exe, bin.join("weft-guard")).context("link weft-guard")?;
        Ok(bin)
    }

    /// A new named network namespace (`weftbg<kind><pid><n>`).
    fn netns(&self, kind: &str) -> anyhow::Result<PathBuf> {
        let n = self.counter.get();
        self.counter.set(n + 1);
        let name = format!("weftbg{kind}{}{n:x}", self.tag);
        ip(&["netns", "add", &name])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        self.namespaces.borrow_mut().push(name.clone());
        Ok(PathBuf::from("/var/run/netns").join(name))
    }

    fn remove_netns(&self, path: &Path) {
        if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
            let _ = ip(&["netns", "del", name]);
            self.namespaces.borrow_mut().retain(|n| n != name);
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for name in self.namespaces.borrow().iter() {
            let _ = ip(&["netns", "del", name]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("run ip")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

//! `weft bench cni`: the latency of the `weft` plugin's ADD and DEL against Debian's
//! reference `bridge` + `host-local`, measured in the same run, interleaved round by round.
//!
//! Each round gives each plugin a fresh pod namespace and times the wall clock around the
//! plugin process (spawn to exit), as a runtime experiences it. Everything runs inside a
//! benchmark "node" namespace that the bench creates and deletes, so the plugins' veths,
//! bridge and forwarding sysctls never touch the root namespace. Cleanup runs on success,
//! on error and on Ctrl-C/SIGTERM (the handler only sets a flag; the loop stops at the next
//! step and the guards' Drop removes the namespaces and files).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::stats::Summary;

/// Options of `weft bench cni`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed rounds; each round runs ADD then DEL once per plugin.
    #[arg(long, default_value_t = 30)]
    pub rounds: usize,
    /// Untimed rounds first, so neither plugin pays for a cold page cache.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// The directory of Debian's reference plugins (`bridge`, `host-local`).
    #[arg(long, default_value = "/usr/lib/cni")]
    pub reference_dir: PathBuf,
    /// The weft binary to exec as the plugin [default: this binary].
    #[arg(long)]
    pub weft: Option<PathBuf>,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM only set a flag, so the guards below get to clean up.
fn catch_interrupts() -> anyhow::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.with_context(|| format!("catch {signal}"))?;
    }
    Ok(())
}

fn check_interrupted() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted; cleaned up");
    }
    Ok(())
}

/// A named network namespace (`ip netns add`), deleted on drop with everything in it.
struct NamedNetns {
    name: String,
    path: PathBuf,
}

impl NamedNetns {
    fn create(name: String) -> anyhow::Result<NamedNetns> {
        run_ip(&["netns", "add", &name])?;
        let path = PathBuf::from(format!("/var/run/netns/{name}"));
        Ok(NamedNetns { name, path })
    }
}

impl Drop for NamedNetns {
    fn drop(&mut self) {
        if let Err(e) = run_ip(&["netns", "del", &self.name]) {
            eprintln!("weft bench cni: cleanup: {e:#}");
        }
    }
}

fn run_ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A scratch directory for the plugins' IPAM state, removed on drop.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One plugin under test: how to exec it and its network configuration.
struct Plugin {
    label: &'static str,
    binary: PathBuf,
    cni_path: PathBuf,
    conf: Vec<u8>,
    add: Vec<Duration>,
    del: Vec<Duration>,
}

/// The node namespace and scratch dir every round runs in.
struct Bench {
    node: NamedNetns,
    scratch: ScratchDir,
    pods_made: usize,
}

impl Bench {
    /// One round of `plugin`: fresh pod namespace, ADD, DEL. Returns the two latencies.
    fn round(&mut self, plugin: &Plugin) -> anyhow::Result<(Duration, Duration)> {
        check_interrupted()?;
        self.pods_made += 1;
        let pod = NamedNetns::create(format!("weftbp{}-{}", std::process::id(), self.pods_made))?;
        let container_id = format!("weftbench{}", self.pods_made);
        let netns = pod.path.display().to_string();

        let (add, out) = self.exec(plugin, "ADD", &container_id, &netns)?;
        check_interrupted()?;
        if !out.status.success() {
            bail!("{} ADD failed: {}", plugin.label, describe(&out));
        }
        let result: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!("{} ADD printed no result: {}", plugin.label, describe(&out))
        })?;
        if result["ips"].as_array().is_none_or(Vec::is_empty) {
            bail!("{} ADD result has no address: {result}", plugin.label);
        }

        let (del, out) = self.exec(plugin, "DEL", &container_id, &netns)?;
        check_interrupted()?;
        if !out.status.success() {
            bail!("{} DEL failed: {}", plugin.label, describe(&out));
        }
        drop(pod);
        Ok((add, del))
    }

    /// Execs the plugin inside the node namespace; the clock runs from spawn to exit.
    fn exec(
        &self,
        plugin: &Plugin,
        command: &str,
        container_id: &str,
        netns: &str,
    ) -> anyhow::Result<(Duration, Output)> {
        let mut cmd = Command::new(&plugin.binary);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", container_id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", &plugin.cni_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::netns_exec::enter_netns_before_exec(&mut cmd, &self.node.path);
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("exec {}", plugin.binary.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(&plugin.conf)
                .with_context(|| format!("write {} {command} request", plugin.label))?;
        }
        let out = child
            .wait_with_output()
            .with_context(|| format!("wait for {} {command}", plugin.label))?;
        Ok((started.elapsed(), out))
    }
}

fn describe(out: &Output) -> String {
    format!(
        "{}; stdout {:?}; stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn plugins(args: &Args, scratch: &Path) -> anyhow::Result<Vec<Plugin>> {
    let weft = match &args.weft {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("find the weft binary")?,
    };
    let bridge = args.reference_dir.join("bridge");
    for needed in [&bridge, &args.reference_dir.join("host-local"), &weft] {
        if !needed.is_file() {
            bail!(
                "{} not found (Debian's containernetworking-plugins provides the reference)",
                needed.display()
            );
        }
    }
    // Same spec version, one IPv4 address each, separate subnets and IPAM dirs.
    let weft_conf = json!({
        "cniVersion": "1.0.0",
        "name": "weftbench",
        "type": "weft",
        "ipam": {
            "ranges": [[{"subnet": "10.97.0.0/16"}]],
            "dataDir": scratch.join("weft-ipam"),
        },
    });
    let reference_conf = json!({
        "cniVersion": "1.0.0",
        "name": "weftbenchref",
        "type": "bridge",
        "bridge": format!("weftbr{:x}", std::process::id() % 0x10_0000),
        "isGateway": true,
        "ipMasq": false,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": "10.98.0.0/16"}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": scratch.join("host-local"),
        },
    });
    let cni_path = args.reference_dir.clone();
    Ok(vec![
        Plugin {
            label: "weft",
            binary: weft,
            cni_path: cni_path.clone(),
            conf: weft_conf.to_string().into_bytes(),
            add: Vec::new(),
            del: Vec::new(),
        },
        Plugin {
            label: "reference",
            binary: bridge,
            cni_path,
            conf: reference_conf.to_string().into_bytes(),
            add: Vec::new(),
            del: Vec::new(),
        },
    ])
}

fn ratio(weft: &Summary, reference: &Summary) -> f64 {
    if reference.median > 0.0 {
        weft.median / reference.median
    } else {
        f64::NAN
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    catch_interrupts()?;
    let pid = std::process::id();
    let scratch = ScratchDir(std::env::temp_dir().join(format!("weft-bench-cni-{pid}")));
    std::fs::create_dir_all(&scratch.0)
        .with_context(|| format!("create {}", scratch.0.display()))?;
    let mut plugins = plugins(args, &scratch.0)?;
    let node = NamedNetns::create(format!("weftbench{pid}"))?;
    let mut bench = Bench {
        node,
        scratch,
        pods_made: 0,
    };

    println!(
        "weft bench cni: {} timed rounds (+{} warm-up) per plugin, interleaved, in node netns {}",
        args.rounds, args.warmup, bench.node.name
    );
    println!(
        "  weft:      {} (IPv4 /16, dataDir under {})",
        plugins[0].binary.display(),
        bench.scratch.0.display()
    );
    println!(
        "  reference: {} + host-local (IPv4 /16, isGateway)",
        plugins[1].binary.display()
    );
    if cfg!(debug_assertions) && args.weft.is_none() {
        println!("  note: this is a debug build of weft; build with --release for real figures");
    }

    for round in 0..args.warmup + args.rounds {
        // Alternate who goes first, so neither always runs right after the other.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (add, del) = bench.round(&plugins[i])?;
            if round >= args.warmup {
                plugins[i].add.push(add);
                plugins[i].del.push(del);
            }
        }
    }

    println!("latency in ms (wall clock around the plugin process):");
    let mut summaries = Vec::new();
    for plugin in &plugins {
        let add = Summary::of_durations(&plugin.add);
        let del = Summary::of_durations(&plugin.del);
        println!("  {:<9} ADD {add}", plugin.label);
        println!("  {:<9} DEL {del}", plugin.label);
        summaries.push((add, del));
    }
    let (weft, reference) = (&summaries[0], &summaries[1]);
    println!(
        "ratio add weft/reference: {:.2}",
        ratio(&weft.0, &reference.0)
    );
    println!(
        "ratio del weft/reference: {:.2}",
        ratio(&weft.1, &reference.1)
    );
    Ok(())
}

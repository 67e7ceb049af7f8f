//! Debian's iperf3, run inside the bench's namespaces: one long-lived server per
//! configuration, one client run per measurement.

use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use super::interrupt;
use super::threads::nice_before_exec;
use crate::lab::netns::in_netns;
use crate::netns_exec::enter_netns_before_exec;

pub const PORT: u16 = 5201;
/// How long a server may take to start listening.
const SERVER_START: Duration = Duration::from_secs(10);
/// Slack beyond the test length before a client run is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(30);

/// One client run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IperfSample {
    /// What the receiver counted, in Gbit/s.
    pub gbps: f64,
    /// TCP retransmissions the sender saw.
    pub retransmits: u64,
}

/// An iperf3 server in a namespace; stopped (by its pid) when dropped.
#[derive(Debug)]
pub struct IperfServer {
    child: Child,
}

impl IperfServer {
    /// Starts `iperf3 -s` bound to `addr` inside `netns`, at nice value `nice`, and waits
    /// until it listens.
    pub fn start(
        netns: &Path,
        addr: Ipv4Addr,
        nice: i32,
        log: &Path,
    ) -> anyhow::Result<IperfServer> {
        let log_file =
            std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
        let mut cmd = Command::new("iperf3");
        cmd.args(["-s", "-B", &addr.to_string(), "-p", &PORT.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        enter_netns_before_exec(&mut cmd, netns);
        nice_before_exec(&mut cmd, nice);
        let child = cmd
            .spawn()
            .context("start iperf3 (is Debian's iperf3 installed?)")?;
        let mut server = IperfServer { child };
        let deadline = Instant::now() + SERVER_START;
        while !listening(netns, PORT)? {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "iperf3 server in {} exited ({status}): {}",
                    netns.display(),
                    std::fs::read_to_string(log).unwrap_or_default().trim()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "iperf3 server in {} is not listening after {SERVER_START:?}",
                    netns.display()
                );
            }
            interrupt::check()?;
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    #[cfg(test)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// Whether a TCP socket listens on `port` in the namespace at `netns`, from the kernel's
/// own table (connecting to check would count as a test at the iperf3 server).
fn listening(netns: &Path, port: u16) -> anyhow::Result<bool> {
    let table = in_netns(netns, || {
        // thread-self: /proc/self/net would show the namespace of the process's main thread.
        Ok(std::fs::read_to_string("/proc/thread-self/net/tcp")?)
    })?;
    Ok(tcp_table_has_listener(&table, port))
}

/// Parses /proc/net/tcp: a row whose local port is `port` and whose state is LISTEN (0A).
pub fn tcp_table_has_listener(table: &str, port: u16) -> bool {
    let want = format!("{port:04X}");
    table.lines().skip(1).any(|row| {
        let mut fields = row.split_whitespace();
        let local = fields.nth(1).unwrap_or_default();
        let state = fields.nth(1).unwrap_or_default();
        local.rsplit_once(':').map(|(_, p)| p) == Some(want.as_str()) && state == "0A"
    })
}

/// How client runs are made.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub seconds: u32,
    /// `-A client,server`: both on one CPU by default (see docs/benchmarks.md).
    pub affinity: (usize, usize),
    pub nice: i32,
}

/// One single-stream TCP run from `netns` to the server at `server`.
pub fn run_client(
    netns: &Path,
    server: Ipv4Addr,
    opts: &ClientOptions,
) -> anyhow::Result<IperfSample> {
    let mut cmd = Command::new("iperf3");
    cmd.args([
        "-c",
        &server.to_string(),
        "-p",
        &PORT.to_string(),
        "-t",
        &opts.seconds.to_string(),
        "-A",
        &format!("{},{}", opts.affinity.0, opts.affinity.1),
        "--connect-timeout",
        "5000",
        "-J",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    enter_netns_before_exec(&mut cmd, netns);
    nice_before_exec(&mut cmd, opts.nice);
    let mut child = cmd.spawn().context("start iperf3")?;
    // Drain both pipes on their own threads so a chatty run cannot block on a full pipe.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let limit = Duration::from_secs(opts.seconds.into()) + CLIENT_SLACK;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("iperf3 client to {server} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    match parse_client_json(&out) {
        Ok(sample) => Ok(sample),
        Err(e) => Err(e).with_context(|| {
            format!(
                "iperf3 client to {server} ({status}); stderr: {}",
                err.trim()
            )
        }),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    })
}

/// Reads throughput (receiver side) and retransmits from `iperf3 -J` output.
pub fn parse_client_json(text: &str) -> anyhow::Result<IperfSample> {
    let v: Value = serde_json::from_str(text).context("iperf3 printed no JSON")?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3: {e}");
    }
    let end = v.get("end").context("iperf3 JSON has no \"end\"")?;
    let bps = end
        .pointer("/sum_received/bits_per_second")
        .and_then(Value::as_f64)
        .context("iperf3 JSON has no end.sum_received.bits_per_second")?;
    let retransmits = end
        .pointer("/sum_sent/retransmits")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Ok(IperfSample {
        gbps: bps / 1e9,
        retransmits,
    })
}

/// Where a server's log goes.
pub fn log_path(dir: &Path, config: &str) -> PathBuf {
    dir.join(format!("iperf3-{config}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP_TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0202000A:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41 1 0 100 0 0 10 0
   1: 0100007F:26BA 0100007F:1451 01 00000000:00000000 00:00000000 00000000     0        0 42 1 0 20 4 30 10 -1
";

    #[test]
    fn finds_listeners_in_the_kernel_tcp_table() {
        assert!(tcp_table_has_listener(TCP_TABLE, 5201));
        // 0x26BA = 9914 is only a connected socket's local port.
        assert!(!tcp_table_has_listener(TCP_TABLE, 9914));
        assert!(!tcp_table_has_listener("", 5201));
    }

    #[test]
    fn parses_iperf3_json() {
        let json = r#"{"start":{},"intervals":[],"end":{
            "sum_sent":{"bits_per_second":1.31e10,"retransmits":3},
            "sum_received":{"bits_per_second":1.3e10}}}"#;
        let s = parse_client_json(json).unwrap();
        assert_eq!(s.retransmits, 3);
        assert!((s.gbps - 13.0).abs() < 1e-9);
        let failed = r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}"#;
        let e = parse_client_json(failed).unwrap_err();
        assert!(e.to_string().contains("Connection refused"), "{e}");
        assert!(parse_client_json("iperf3: error").is_err());
    }

    #[test]
    fn measures_a_veth_pair() {
        weft_testkit::require_root();
        weft_testkit::require_tool("iperf3");
        let a = weft_testkit::Netns::new("ia");
        let b = weft_testkit::Netns::new("ib");
        weft_testkit::VethPair::new(&a, &["192.0.2.1/24"], &b, &["192.0.2.2/24"]);
        let dir = std::env::temp_dir().join(weft_testkit::unique_name("il"));
        std::fs::create_dir_all(&dir).unwrap();
        let server = IperfServer::start(
            b.path(),
            "192.0.2.2".parse().unwrap(),
            -1,
            &log_path(&dir, "test"),
        )
        .unwrap();
        let opts = ClientOptions {
            seconds: 1,
            affinity: (0, 0),
            nice: -1,
        };
        let sample = run_client(a.path(), "192.0.2.2".parse().unwrap(), &opts).unwrap();
        assert!(sample.gbps > 0.0);
        let pid = server.pid();
        drop(server);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

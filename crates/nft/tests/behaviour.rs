//! The guard table enforces what it says: in a namespace holding it, a process of the
//! proxy UID reaches a listener in another namespace, any other UID is refused at once
//! (TCP: connection refused by the reset; UDP: the send fails with EPERM because the
//! drop happens in the sender's own output path).
//!
//! The probes are separate processes started with `Command::uid`, because nftables
//! matches the UID that owns the socket. They are this same test binary, re-executed
//! with `WEFT_NFT_PROBE` set, so this file owns `main` (no libtest harness).

mod common;

use common::*;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use weft_testkit::{Netns, VethPair};

const PROBE_ENV: &str = "WEFT_NFT_PROBE";
const PROXY_UID: u32 = 1337;
const OTHER_UID: u32 = 1000;
const SERVER: &str = "203.0.113.2";
const TCP_PORT: u16 = 18080;
const UDP_PORT: u16 = 18081;

fn main() {
    if let Ok(request) = std::env::var(PROBE_ENV) {
        println!("{}", probe(&request));
        return;
    }
    weft_testkit::require_root();
    guard_confines_egress_to_the_proxy_uid();
    println!("test guard_confines_egress_to_the_proxy_uid ... ok");
}

/// Runs in the probe process: "tcp <addr>" connects, "udp <addr>" sends one datagram.
/// Prints "ok" or "errno <n>".
fn probe(request: &str) -> String {
    let outcome = (|| -> io::Result<()> {
        let (proto, addr) = request
            .split_once(' ')
            .ok_or_else(|| io::Error::other("bad probe request"))?;
        let addr: SocketAddr = addr.parse().map_err(io::Error::other)?;
        match proto {
            // The timeout only stops a broken setup from hanging the test.
            "tcp" => TcpStream::connect_timeout(&addr, Duration::from_secs(20)).map(drop),
            "udp" => UdpSocket::bind("0.0.0.0:0")?
                .send_to(b"hello", addr)
                .map(drop),
            _ => Err(io::Error::other("unknown protocol")),
        }
    })();
    match outcome {
        Ok(()) => "ok".to_string(),
        Err(e) => match e.raw_os_error() {
            Some(errno) => format!("errno {errno}"),
            None => format!("error {e}"),
        },
    }
}

/// Runs `f` on a thread that has entered the namespace; what it creates (sockets,
/// child processes) belongs to that namespace.
fn in_netns<T: Send>(netns: &Path, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(netns).expect("open netns");
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("namespace thread")
    })
}

fn run_probe(client: &Netns, uid: u32, proto: &str, port: u16) -> String {
    let exe = std::env::current_exe().expect("own executable");
    let out = in_netns(client.path(), || {
        Command::new(&exe)
            .env(PROBE_ENV, format!("{proto} {SERVER}:{port}"))
            .uid(uid)
            .gid(uid)
            .output()
            .expect("spawn probe")
    });
    assert!(out.status.success(), "probe failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn guard_confines_egress_to_the_proxy_uid() {
    let client = Netns::new("bc");
    let server = Netns::new("bs");
    VethPair::new(
        &client,
        &["203.0.113.1/24"],
        &server,
        &[&format!("{SERVER}/24")],
    );
    let (_tcp, _udp) = in_netns(server.path(), || {
        (
            TcpListener::bind((SERVER, TCP_PORT)).expect("tcp listener"),
            UdpSocket::bind((SERVER, UDP_PORT)).expect("udp listener"),
        )
    });

    // Control: without the guard, every UID gets through.
    assert_eq!(run_probe(&client, OTHER_UID, "tcp", TCP_PORT), "ok");
    assert_eq!(run_probe(&client, OTHER_UID, "udp", UDP_PORT), "ok");

    let sock = weft_nft::NftSocket::open_in_netns(client.path()).expect("nft socket");
    let spec = guard_spec(PROXY_UID, &[net("10.96.0.10/32")]);
    sock.replace_table(&spec).expect("install guard table");

    assert_eq!(run_probe(&client, PROXY_UID, "tcp", TCP_PORT), "ok");
    assert_eq!(run_probe(&client, PROXY_UID, "udp", UDP_PORT), "ok");
    assert_eq!(
        run_probe(&client, OTHER_UID, "tcp", TCP_PORT),
        format!("errno {}", libc::ECONNREFUSED)
    );
    assert_eq!(
        run_probe(&client, OTHER_UID, "udp", UDP_PORT),
        format!("errno {}", libc::EPERM)
    );

    // The two refusals went through the guard's counted reject rules.
    let rules = sock
        .list_rules(weft_nft::Family::Inet, GUARD_TABLE, "output")
        .expect("list rules");
    let counted: Vec<u64> = rules
        .iter()
        .filter_map(|r| match r.exprs.first() {
            Some(weft_nft::Expr::Counter { packets, .. }) => Some(*packets),
            _ => None,
        })
        .collect();
    assert_eq!(counted.len(), 2, "{rules:?}");
    assert!(
        counted.iter().all(|&p| p >= 1),
        "reject counters {counted:?}"
    );
}

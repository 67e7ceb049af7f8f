//! Long-running TCP and UDP flows between pods, checked end to end, for tests that
//! change the datapath under traffic.
//!
//! Each end is a thread that entered its pod's network namespace, with ordinary sockets:
//! nothing here knows about weft. A TCP flow streams a known byte pattern and checks
//! every byte on arrival; a UDP flow sends numbered datagrams over a connected socket
//! (which only accepts replies from the address it connected to) and the server echoes
//! each one.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Spawns `f` on a thread inside the network namespace at `netns`.
pub fn spawn_in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let netns = netns.to_path_buf();
    std::thread::spawn(move || {
        let file = File::open(&netns).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
}

/// How long one end waits for the other before calling the flow broken.
const STALL: Duration = Duration::from_secs(10);
const TCP_CHUNK: usize = 1024;
const TCP_PACE: Duration = Duration::from_millis(1);
const UDP_PACE: Duration = Duration::from_millis(2);

fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// A TCP connection streaming a pattern from client to server until stopped.
pub struct TcpFlow {
    pub label: String,
    stop: Arc<AtomicBool>,
    client: JoinHandle<io::Result<u64>>,
    server: JoinHandle<io::Result<u64>>,
}

/// What a finished TCP flow saw.
#[derive(Debug)]
pub struct TcpOutcome {
    pub label: String,
    pub sent: io::Result<u64>,
    pub received: io::Result<u64>,
}

impl TcpOutcome {
    /// Both ends finished without an error and every byte arrived, in order.
    pub fn assert_intact(&self) {
        match (&self.sent, &self.received) {
            (Ok(sent), Ok(received)) => {
                assert!(*sent > 0, "{}: nothing was sent", self.label);
                assert_eq!(sent, received, "{}: bytes sent vs received", self.label);
            }
            _ => panic!("{}: the TCP stream broke: {self:?}", self.label),
        }
    }
}

/// Starts a TCP flow from a socket in `client_ns` to `server` (an address of a socket
/// bound in `server_ns`, or, with `connect_to`, some other address that leads there,
/// such as a Service).
pub fn tcp_flow(
    label: &str,
    client_ns: &Path,
    server_ns: &Path,
    server: SocketAddr,
    connect_to: Option<SocketAddr>,
) -> TcpFlow {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server_thread = spawn_in_netns(server_ns, move || -> io::Result<u64> {
        let listener = TcpListener::bind(server)?;
        let _ = ready_tx.send(());
        let (mut conn, _) = listener.accept()?;
        conn.set_read_timeout(Some(STALL))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = conn.read(&mut buf)?;
            if n == 0 {
                conn.shutdown(Shutdown::Write)?;
                return Ok(total);
            }
            for (i, byte) in buf[..n].iter().enumerate() {
                if *byte != pattern(total + i as u64) {
                    return Err(io::Error::other(format!(
                        "byte {} is {byte}, expected {}",
                        total + i as u64,
                        pattern(total + i as u64)
                    )));
                }
            }
            total += n as u64;
        }
    });
    ready_rx.recv_timeout(STALL).expect("TCP server listening");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_client = stop.clone();
    let target = connect_to.unwrap_or(server);
    let client_thread = spawn_in_netns(client_ns, move || -> io::Result<u64> {
        let mut conn = TcpStream::connect_timeout(&target, STALL)?;
        conn.set_write_timeout(Some(STALL))?;
        conn.set_read_timeout(Some(STALL))?;
        let mut sent = 0u64;
        let mut chunk = vec![0u8; TCP_CHUNK];
        while !stop_client.load(Ordering::Relaxed) {
            for (i, byte) in chunk.iter_mut().enumerate() {
                *byte = pattern(sent + i as u64);
            }
            conn.write_all(&chunk)?;
            sent += TCP_CHUNK as u64;
            std::thread::sleep(TCP_PACE);
        }
        conn.shutdown(Shutdown::Write)?;
        // The server closes its side once it has read everything.
        let mut rest = Vec::new();
        conn.read_to_end(&mut rest)?;
        Ok(sent)
    });
    TcpFlow {
        label: label.to_string(),
        stop,
        client: client_thread,
        server: server_thread,
    }
}

impl TcpFlow {
    pub fn finish(self) -> TcpOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.client.join().expect("TCP client thread");
        let received = self.server.join().expect("TCP server thread");
        TcpOutcome {
            label: self.label,
            sent,
            received,
        }
    }
}

/// Numbered datagrams from a connected client socket, echoed by the server.
pub struct UdpFlow {
    pub label: String,
    stop: Arc<AtomicBool>,
    client: JoinHandle<io::Result<(u64, BTreeSet<u64>)>>,
    server: JoinHandle<io::Result<BTreeSet<u64>>>,
}

#[derive(Debug)]
pub struct UdpOutcome {
    pub label: String,
    /// Datagrams 0..sent were sent.
    pub sent: u64,
    pub reached_server: BTreeSet<u64>,
    pub echoed: BTreeSet<u64>,
}

impl UdpOutcome {
    /// Every datagram reached the server and every echo came back.
    pub fn assert_lossless(&self) {
        assert!(self.sent > 0, "{}: nothing was sent", self.label);
        let all: BTreeSet<u64> = (0..self.sent).collect();
        let lost: Vec<_> = all.difference(&self.reached_server).collect();
        let lost_echo: Vec<_> = all.difference(&self.echoed).collect();
        assert!(
            lost.is_empty() && lost_echo.is_empty(),
            "{}: of {} datagrams, lost on the way {lost:?}, echoes lost {lost_echo:?}",
            self.label,
            self.sent
        );
    }
}

const UDP_STOP: u64 = u64::MAX;

/// Starts a UDP flow (see [`tcp_flow`] for `connect_to`).
pub fn udp_flow(
    label: &str,
    client_ns: &Path,
    server_ns: &Path,
    server: SocketAddr,
    connect_to: Option<SocketAddr>,
) -> UdpFlow {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server_thread = spawn_in_netns(server_ns, move || -> io::Result<BTreeSet<u64>> {
        let sock = UdpSocket::bind(server)?;
        let _ = ready_tx.send(());
        sock.set_read_timeout(Some(STALL))?;
        let mut seen = BTreeSet::new();
        let mut buf = [0u8; 64];
        loop {
            let (n, from) = sock.recv_from(&mut buf)?;
            let Some(seq) = buf.get(..8).filter(|_| n >= 8) else {
                continue;
            };
            let seq = u64::from_be_bytes(seq.try_into().expect("8 bytes"));
            sock.send_to(&buf[..n], from)?;
            if seq == UDP_STOP {
                return Ok(seen);
            }
            seen.insert(seq);
        }
    });
    ready_rx.recv_timeout(STALL).expect("UDP server bound");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_client = stop.clone();
    let target = connect_to.unwrap_or(server);
    let client_thread = spawn_in_netns(client_ns, move || -> io::Result<(u64, BTreeSet<u64>)> {
        let any: IpAddr = if target.is_ipv4() {
            "0.0.0.0".parse().expect("any")
        } else {
            "::".parse().expect("any")
        };
        let sock = UdpSocket::bind(SocketAddr::new(any, 0))?;
        sock.connect(target)?;
        sock.set_nonblocking(true)?;
        let mut echoed = BTreeSet::new();
        let mut sent = 0u64;
        let mut buf = [0u8; 64];
        let mut drain = |echoed: &mut BTreeSet<u64>| -> io::Result<()> {
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= 8 => {
                        echoed.insert(u64::from_be_bytes(buf[..8].try_into().expect("8")));
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        };
        while !stop_client.load(Ordering::Relaxed) {
            let mut datagram = [0u8; 32];
            datagram[..8].copy_from_slice(&sent.to_be_bytes());
            sock.send(&datagram)?;
            sent += 1;
            drain(&mut echoed)?;
            std::thread::sleep(UDP_PACE);
        }
        // Let the last echoes arrive, then tell the server to stop (retried: the stop
        // datagram is not part of the count).
        let deadline = Instant::now() + STALL;
        while (echoed.len() as u64) < sent && Instant::now() < deadline {
            drain(&mut echoed)?;
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut stop_datagram = [0u8; 32];
        stop_datagram[..8].copy_from_slice(&UDP_STOP.to_be_bytes());
        let deadline = Instant::now() + STALL;
        loop {
            sock.send(&stop_datagram)?;
            std::thread::sleep(Duration::from_millis(20));
            let mut got_stop = false;
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= 8 => {
                        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8"));
                        if seq == UDP_STOP {
                            got_stop = true;
                        } else {
                            echoed.insert(seq);
                        }
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if got_stop || Instant::now() >= deadline {
                return Ok((sent, echoed));
            }
        }
    });
    UdpFlow {
        label: label.to_string(),
        stop,
        client: client_thread,
        server: server_thread,
    }
}

impl UdpFlow {
    pub fn finish(self) -> UdpOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let (sent, echoed) = self
            .client
            .join()
            .expect("UDP client thread")
            .unwrap_or_else(|e| panic!("{}: UDP client failed: {e}", self.label));
        let reached_server = self
            .server
            .join()
            .expect("UDP server thread")
            .unwrap_or_else(|e| panic!("{}: UDP server failed: {e}", self.label));
        UdpOutcome {
            label: self.label,
            sent,
            reached_server,
            echoed,
        }
    }
}

/// A pod's namespace path, for the flow constructors.
pub fn ns_path(pod: &super::pods::Pod) -> PathBuf {
    pod.ns.path().to_path_buf()
}

//! The request/response latency probe: 1-byte ping-pong over one TCP connection.
//!
//! Both ends busy-poll (`recv` with `MSG_DONTWAIT` in a spin loop) because on a small VM a
//! blocking read measures the hypervisor's vCPU wake-up (tens to hundreds of µs) rather than
//! the datapath. The client and the server are threads of this process pinned to different
//! CPUs; each enters its pod's network namespace before making its socket, and a socket
//! stays in the namespace it was made in.

use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::errno::Errno;
use nix::sys::socket::{recv, send, MsgFlags};

use super::interrupt;
use super::threads::{pin_to_cpu, set_nice, spawn_in_netns};

/// How one probe run is done.
#[derive(Debug, Clone, Copy)]
pub struct RrOptions {
    /// Round trips before timing starts (connection warm-up, caches, ARP/neighbour).
    pub warmup: usize,
    /// Timed round trips.
    pub timed: usize,
    pub client_cpu: usize,
    pub server_cpu: usize,
    /// Nice value of both threads.
    pub nice: i32,
    /// Longest wait for any single step before the run is declared broken.
    pub stall: Duration,
}

impl Default for RrOptions {
    fn default() -> RrOptions {
        RrOptions {
            warmup: 500,
            timed: 5000,
            client_cpu: 0,
            server_cpu: 1,
            nice: 0,
            stall: Duration::from_secs(10),
        }
    }
}

/// One run's round-trip times, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RrSample {
    pub round_trips: usize,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl RrSample {
    /// Nearest-rank percentiles of round-trip times in nanoseconds; `None` when empty.
    pub fn of_nanos(rtts: &mut [u64]) -> Option<RrSample> {
        if rtts.is_empty() {
            return None;
        }
        rtts.sort_unstable();
        let rank = |q: f64| {
            let i = ((q * rtts.len() as f64).ceil() as usize).clamp(1, rtts.len()) - 1;
            rtts.get(i).copied().unwrap_or_default() as f64 / 1e3
        };
        Some(RrSample {
            round_trips: rtts.len(),
            p50_us: rank(0.50),
            p99_us: rank(0.99),
        })
    }
}

/// Runs one probe: a server thread in `server_ns` listening on `server`, a client thread in
/// `client_ns` connecting to `connect` (`server`, or a Service address leading to it).
pub fn run(
    client_ns: &Path,
    server_ns: &Path,
    server: SocketAddrV4,
    connect: SocketAddrV4,
    opts: RrOptions,
) -> anyhow::Result<RrSample> {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let server_thread = spawn_in_netns(server_ns, move || {
        let listener = match TcpListener::bind(server) {
            Ok(l) => {
                let _ = ready_tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = ready_tx.send(Err(format!("listen on {server}: {e}")));
                bail!("listen on {server}: {e}");
            }
        };
        let stream = accept_within(&listener, opts.stall)?;
        stream.set_nodelay(true)?;
        pin_to_cpu(opts.server_cpu)?;
        set_nice(opts.nice)?;
        serve(&stream, opts.stall)
    })?;
    match ready_rx.recv_timeout(opts.stall) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => bail!("latency server: {e}"),
        Err(_) => bail!("latency server in {} did not start", server_ns.display()),
    }
    let client = spawn_in_netns(client_ns, move || {
        let stream = TcpStream::connect_timeout(&connect.into(), opts.stall)
            .with_context(|| format!("connect to {connect}"))?;
        stream.set_nodelay(true)?;
        pin_to_cpu(opts.client_cpu)?;
        set_nice(opts.nice)?;
        ping_pong(&stream, opts)
    })?;
    let client_result = client
        .join()
        .map_err(|_| anyhow::anyhow!("latency client panicked"))?;
    // The client closing its socket ends the server's loop, also when the client failed.
    let server_result = server_thread
        .join()
        .map_err(|_| anyhow::anyhow!("latency server panicked"))?;
    let mut rtts = client_result.context("latency client")?;
    server_result.context("latency server")?;
    RrSample::of_nanos(&mut rtts).context("no round trips measured")
}

fn accept_within(listener: &TcpListener, limit: Duration) -> anyhow::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + limit;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline || interrupt::requested() {
                    bail!("no client connected within {limit:?}");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e).context("accept"),
        }
    }
}

/// Echoes every byte until the client closes the connection.
fn serve(stream: &TcpStream, stall: Duration) -> anyhow::Result<()> {
    let fd = stream.as_raw_fd();
    let mut byte = [0u8; 1];
    loop {
        if recv_spin(fd, &mut byte, stall)? == 0 {
            return Ok(());
        }
        send_all(fd, &byte)?;
    }
}

/// The client's loop; returns the timed round trips in nanoseconds.
fn ping_pong(stream: &TcpStream, opts: RrOptions) -> anyhow::Result<Vec<u64>> {
    let fd = stream.as_raw_fd();
    let mut rtts = Vec::with_capacity(opts.timed);
    let mut byte = [0u8; 1];
    for i in 0..opts.warmup + opts.timed {
        let start = Instant::now();
        send_all(fd, b"x")?;
        if recv_spin(fd, &mut byte, opts.stall)? == 0 {
            bail!("the server closed the connection after {i} round trips");
        }
        let rtt = start.elapsed();
        if i >= opts.warmup {
            rtts.push(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
        }
    }
    Ok(rtts)
}

/// Spins on a non-blocking receive; returns the bytes read (0 at end of stream).
fn recv_spin(fd: i32, buf: &mut [u8], stall: Duration) -> anyhow::Result<usize> {
    // Reading the clock on every spin would be noise in the measurement; every few
    // thousand spins is enough to notice a stall or an interrupt.
    const SPINS_PER_CHECK: u32 = 4096;
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        match recv(fd, buf, MsgFlags::MSG_DONTWAIT) {
            Ok(n) => return Ok(n),
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(SPINS_PER_CHECK) {
                    let started = *since.get_or_insert_with(Instant::now);
                    if started.elapsed() > stall {
                        bail!("nothing received for {stall:?}");
                    }
                    if interrupt::requested() {
                        bail!("interrupted");
                    }
                }
                std::hint::spin_loop();
            }
            Err(e) => return Err(e).context("recv"),
        }
    }
}

fn send_all(fd: i32, mut buf: &[u8]) -> anyhow::Result<()> {
    while !buf.is_empty() {
        match send(fd, buf, MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => buf = buf.get(n..).unwrap_or_default(),
            Err(Errno::EINTR) | Err(Errno::EAGAIN) => continue,
            Err(e) => return Err(e).context("send"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_in_microseconds() {
        let mut rtts: Vec<u64> = (1..=100).rev().map(|i| i * 1000).collect();
        let s = RrSample::of_nanos(&mut rtts).unwrap();
        assert_eq!(s.round_trips, 100);
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p99_us, 99.0);
        assert!(RrSample::of_nanos(&mut []).is_none());
    }

    #[test]
    fn measures_round_trips_between_two_namespaces() {
        weft_testkit::require_root();
        let a = weft_testkit::Netns::new("ra");
        let b = weft_testkit::Netns::new("rb");
        weft_testkit::VethPair::new(&a, &["192.0.2.1/24"], &b, &["192.0.2.2/24"]);
        let opts = RrOptions {
            warmup: 10,
            timed: 200,
            ..RrOptions::default()
        };
        let server = "192.0.2.2:5202".parse().unwrap();
        let sample = run(a.path(), b.path(), server, server, opts).unwrap();
        assert_eq!(sample.round_trips, 200);
        assert!(sample.p50_us > 0.0 && sample.p50_us <= sample.p99_us);
    }

    #[test]
    fn a_missing_server_address_is_an_error_not_a_hang() {
        weft_testkit::require_root();
        let a = weft_testkit::Netns::new("rc");
        let b = weft_testkit::Netns::new("rd");
        // 192.0.2.9 exists nowhere: the server cannot bind it.
        let nowhere = "192.0.2.9:5202".parse().unwrap();
        let err = run(a.path(), b.path(), nowhere, nowhere, RrOptions::default()).unwrap_err();
        assert!(
            format!("{err:#}").contains("listen on 192.0.2.9:5202"),
            "{err:#}"
        );
    }
}

//! Probes: real sockets opened by a real process with a real UID inside a pod.
//!
//! The test binary re-executes itself (running only its `probe_entry` test) inside the pod's
//! network namespace, as the UID under test; the action comes in `WEFT_GUARD_PROBE` and the
//! outcome goes out as one `PROBE-RESULT: <outcome>` line. Outcomes are words, not timings:
//! `connected`, `refused` (ECONNREFUSED), `eperm`, `enobufs`, `sent`, `reply`, `timeout`,
//! `error:<errno>`. [`run_with_net_raw`] starts the probe with CAP_NET_RAW kept (effective and
//! ambient, as a container keeps it), for the raw-frame action.
//! Refusals must come back before a short timeout: a fence that silently drops would show
//! up as `timeout`, never as `refused`/`eperm`.
//!
//! Every test binary that uses probes declares:
//! `#[test] fn probe_entry() { guard_support::probe::entry() }`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ENV: &str = "WEFT_GUARD_PROBE";
const RESULT: &str = "PROBE-RESULT: ";
const READY: &str = "PROBE-READY";

/// How long a refusal may take before the probe calls it a (silent) drop.
pub const REFUSAL_TIMEOUT_MS: u64 = 1000;
/// How long an allowed connection may take (a new veth's first SYN can be lost).
pub const CONNECT_TIMEOUT_MS: u64 = 5000;

/// The probe side: does nothing unless this process was started as a probe.
pub fn entry() {
    let Ok(action) = std::env::var(ENV) else {
        return;
    };
    let words: Vec<&str> = action.split_whitespace().collect();
    let outcome = match words.as_slice() {
        ["tcp", addr, port, ms] => tcp(parse(addr), parse(port), parse(ms)),
        ["udp", addr, port] => udp(parse(addr), parse(port)),
        ["icmp", addr] => icmp(parse(addr)),
        ["raw", proto, addr] => raw(parse(proto), parse(addr)),
        ["nd6", addr] => nd6(parse(addr)),
        ["udp-from", lport, addr, port, tag, wait] => udp_from(
            parse(lport),
            parse(addr),
            parse(port),
            tag,
            *wait == "reply",
        ),
        ["serve", port] => serve(parse(port)),
        ["frame", dev, gw_mac, src, dst, port, tag, how] => {
            frame(dev, gw_mac, parse(src), parse(dst), parse(port), tag, how)
        }
        _ => format!("error:bad-action:{action}"),
    };
    // A line of its own: libtest prints the test name on the same line first.
    println!("\n{RESULT}{outcome}");
}

fn parse<T: std::str::FromStr>(text: &str) -> T {
    text.parse()
        .unwrap_or_else(|_| panic!("probe argument {text:?}"))
}

/// Runs `action` in `netns` as `uid` (and gid `uid`) and returns its outcome.
pub fn run(netns: &Path, uid: u32, action: &str) -> String {
    outcome_of(command(netns, uid, action), uid, action)
}

/// Like [`run`], but the process keeps CAP_NET_RAW (and only it) as `uid`.
pub fn run_with_net_raw(netns: &Path, uid: u32, action: &str) -> String {
    let mut cmd = weft_testkit::cmd_in(netns, std::env::current_exe().expect("own executable"));
    cmd.args(["probe_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(ENV, action)
        .stdin(Stdio::null());
    // SAFETY: only async-signal-safe credential system calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || keep_net_raw_as(uid));
    }
    outcome_of(cmd, uid, action)
}

/// Becomes `uid` keeping CAP_NET_RAW across the switch and the exec that follows.
fn keep_net_raw_as(uid: u32) -> std::io::Result<()> {
    const CAP_NET_RAW: u32 = 13;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: prctl/set*id/capset with plain arguments and buffers of the kernel's layout.
    unsafe {
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0
            || libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(uid, uid, uid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return fail();
        }
        let header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let bit = 1u32 << CAP_NET_RAW;
        let data = [
            Data {
                effective: bit,
                permitted: bit,
                inheritable: bit,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return fail();
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
            CAP_NET_RAW as libc::c_ulong,
            0,
            0,
        ) != 0
        {
            return fail();
        }
    }
    Ok(())
}

fn outcome_of(mut cmd: Command, uid: u32, action: &str) -> String {
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run the probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().find_map(result_of).unwrap_or_else(|| {
        panic!(
            "probe {action:?} as uid {uid} gave no result ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn result_of(line: &str) -> Option<String> {
    line.strip_prefix(RESULT).map(|r| r.trim().to_string())
}

fn command(netns: &Path, uid: u32, action: &str) -> Command {
    let exe = std::env::current_exe().expect("own executable");
    let mut cmd = weft_testkit::cmd_in(netns, exe);
    cmd.args(["probe_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(ENV, action)
        .stdin(Stdio::null());
    if uid != 0 {
        // After the namespace switch (which needs root): std's own uid()/gid() would run
        // before the pre_exec hooks and make setns fail.
        // SAFETY: only async-signal-safe credential system calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(uid, uid, uid) != 0
                    || libc::setresuid(uid, uid, uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd
}

/// How the frame probe writes its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameHow {
    /// AF_PACKET SOCK_RAW through the qdisc layer.
    Queued,
    /// AF_PACKET SOCK_RAW with `PACKET_QDISC_BYPASS`.
    Bypass,
    /// AF_PACKET SOCK_DGRAM (the kernel writes the Ethernet header) with the bypass.
    Dgram,
    /// SOCK_RAW with the bypass, the socket opened first: the probe prints `PROBE-READY`
    /// and sends only once a line arrives on its stdin (see [`Held`]).
    Held,
}

impl FrameHow {
    fn word(self) -> &'static str {
        match self {
            FrameHow::Queued => "queue",
            FrameHow::Bypass => "bypass",
            FrameHow::Dgram => "dgram",
            FrameHow::Held => "held",
        }
    }
}

/// A raw Ethernet frame carrying IPv4 or IPv6/UDP from `src` to `dst:port` through the
/// gateway at `gw_mac`, written on `dev` with an AF_PACKET socket; `tag` is its payload.
pub fn frame_action(
    dev: &str,
    gw_mac: &str,
    src: IpAddr,
    dst: IpAddr,
    port: u16,
    tag: &str,
    how: FrameHow,
) -> String {
    format!(
        "frame {dev} {gw_mac} {src} {dst} {port} {tag} {}",
        how.word()
    )
}

/// A probe started with CAP_NET_RAW that has opened its socket and waits for [`Held::release`]
/// to send (a socket that exists before the fence does).
pub struct Held {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Held {
    pub fn start_with_net_raw(netns: &Path, uid: u32, action: &str) -> Held {
        let mut cmd = weft_testkit::cmd_in(netns, std::env::current_exe().expect("own executable"));
        cmd.args(["probe_entry", "--exact", "--nocapture", "--test-threads=1"])
            .env(ENV, action)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe credential system calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || keep_net_raw_as(uid));
        }
        let mut child = cmd.spawn().expect("start the held probe");
        let stdout = child.stdout.take().expect("probe stdout");
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.starts_with(READY) => break,
                Some(Ok(line)) if result_of(&line).is_some() => {
                    panic!("held probe failed before sending: {line}")
                }
                Some(Ok(_)) => continue,
                _ => panic!("held probe exited before opening its socket"),
            }
        }
        Held { child, lines }
    }

    /// Lets the probe send, and returns its outcome.
    pub fn release(mut self) -> String {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n");
        }
        let outcome = self
            .lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| result_of(&l))
            .unwrap_or_else(|| "error:no-result".into());
        let _ = self.child.wait();
        outcome
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tcp_action(addr: IpAddr, port: u16, timeout_ms: u64) -> String {
    format!("tcp {addr} {port} {timeout_ms}")
}

/// A probe server (`serve`) running in a pod as some UID; it answers one connection.
pub struct Server {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Server {
    pub fn start(netns: &Path, uid: u32, port: u16) -> Server {
        let mut child = command(netns, uid, &format!("serve {port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the probe server");
        let stdout = child.stdout.take().expect("server stdout");
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.starts_with(READY) => break,
                Some(Ok(line)) if result_of(&line).is_some() => {
                    panic!("probe server failed: {line}")
                }
                Some(Ok(_)) => continue,
                _ => panic!("probe server exited before listening"),
            }
        }
        Server { child, lines }
    }

    /// Waits for the server's outcome (`served` once it answered a connection).
    pub fn finish(mut self) -> String {
        let outcome = self
            .lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| result_of(&l))
            .unwrap_or_else(|| "error:no-result".into());
        let _ = self.child.wait();
        outcome
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn errno_word(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => "eperm".into(),
        Some(libc::ENOBUFS) => "enobufs".into(),
        Some(libc::ECONNREFUSED) => "refused".into(),
        Some(libc::EACCES) => "eacces".into(),
        Some(code) => format!("error:{:?}", nix::errno::Errno::from_raw(code)),
        None if e.kind() == std::io::ErrorKind::TimedOut
            || e.kind() == std::io::ErrorKind::WouldBlock =>
        {
            "timeout".into()
        }
        None => format!("error:{e}"),
    }
}

fn tcp(addr: IpAddr, port: u16, timeout_ms: u64) -> String {
    let target = SocketAddr::new(addr, port);
    match TcpStream::connect_timeout(&target, Duration::from_millis(timeout_ms)) {
        Ok(mut conn) => {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = conn.write_all(b"ping");
            let mut buf = [0u8; 4];
            match conn.read_exact(&mut buf) {
                Ok(()) if &buf == b"pong" => "connected".into(),
                Ok(()) => "error:bad-greeting".into(),
                Err(e) => format!("connected-but-{}", errno_word(&e)),
            }
        }
        Err(e) => errno_word(&e),
    }
}

fn udp(addr: IpAddr, port: u16) -> String {
    let bind: SocketAddr = if addr.is_ipv6() {
        "[::]:0".parse().unwrap_or_else(|_| unreachable!())
    } else {
        "0.0.0.0:0".parse().unwrap_or_else(|_| unreachable!())
    };
    let socket = match UdpSocket::bind(bind) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    match socket.send_to(b"probe", (addr, port)) {
        Ok(_) => "sent".into(),
        Err(e) => errno_word(&e),
    }
}

fn icmp(addr: IpAddr) -> String {
    // An ICMP echo "ping socket": allowed to unprivileged groups by ping_group_range.
    let (family, proto, echo_type, level, recverr) = match addr {
        IpAddr::V4(_) => (
            libc::AF_INET,
            libc::IPPROTO_ICMP,
            8u8,
            libc::SOL_IP,
            libc::IP_RECVERR,
        ),
        IpAddr::V6(_) => (
            libc::AF_INET6,
            libc::IPPROTO_ICMPV6,
            128u8,
            libc::SOL_IPV6,
            libc::IPV6_RECVERR,
        ),
    };
    let socket = match raw_socket(family, libc::SOCK_DGRAM, proto) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    // Like ping(8): report ICMP errors to the sender. An IPv6 ping socket never sees the
    // EPERM of a refused send (the kernel drops it), only the ICMPv6 error the fence sends.
    let on: libc::c_int = 1;
    // SAFETY: the option value is an int of the size given.
    unsafe {
        libc::setsockopt(
            socket.raw(),
            level,
            recverr,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let packet = [echo_type, 0, 0, 0, 0, 0, 0, 1];
    if let Err(e) = send_to(&socket, &packet, addr) {
        return errno_word(&e);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        // SAFETY: buf is writable for its length; MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                socket.raw(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return "reply".into();
        }
        let e = std::io::Error::last_os_error();
        if n < 0 && e.raw_os_error() != Some(libc::EAGAIN) {
            // An ICMP error came back for the echo: refused by an unreachable.
            return format!(
                "rejected:{:?}",
                nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0))
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    "timeout".into()
}

fn raw(proto: i32, addr: IpAddr) -> String {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let socket = match raw_socket(family, libc::SOCK_RAW, proto) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    match send_to(&socket, b"weft raw probe payload", addr) {
        Ok(()) => "sent".into(),
        Err(e) => errno_word(&e),
    }
}

/// A UDP datagram carrying `tag` from local port `lport` (bound with SO_REUSEADDR) to
/// `addr:port`; with `wait_reply`, waits for the answer (`reply`) so conntrack has seen
/// both directions of the flow.
fn udp_from(lport: u16, addr: IpAddr, port: u16, tag: &str, wait_reply: bool) -> String {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let socket = match raw_socket(family, libc::SOCK_DGRAM, 0) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    let on: libc::c_int = 1;
    // SAFETY: an int option of the size given.
    unsafe {
        libc::setsockopt(
            socket.raw(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let local = match addr {
        IpAddr::V4(_) => std::net::SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, lport)),
        IpAddr::V6(_) => std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, lport)),
    };
    let bound = match local {
        std::net::SocketAddr::V4(v4) => {
            // SAFETY: zeroed sockaddr_in, then filled.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = v4.port().to_be();
            // SAFETY: sa is valid for its size.
            unsafe {
                libc::bind(
                    socket.raw(),
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
        }
        std::net::SocketAddr::V6(v6) => {
            // SAFETY: zeroed sockaddr_in6, then filled.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = v6.port().to_be();
            // SAFETY: sa is valid for its size.
            unsafe {
                libc::bind(
                    socket.raw(),
                    (&sa as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        }
    };
    if bound != 0 {
        return format!("bind-{}", errno_word(&std::io::Error::last_os_error()));
    }
    let sent = match addr {
        IpAddr::V4(v4) => {
            // SAFETY: zeroed sockaddr_in, then filled.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = port.to_be();
            sa.sin_addr.s_addr = u32::from_ne_bytes(v4.octets());
            send_to_sockaddr(&socket, tag.as_bytes(), &sa)
        }
        IpAddr::V6(v6) => {
            // SAFETY: zeroed sockaddr_in6, then filled.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = port.to_be();
            sa.sin6_addr.s6_addr = v6.octets();
            send_to_sockaddr(&socket, tag.as_bytes(), &sa)
        }
    };
    if let Err(e) = sent {
        return errno_word(&e);
    }
    if !wait_reply {
        return "sent".into();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        // SAFETY: buf is writable for its length; MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                socket.raw(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return "reply".into();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    "timeout".into()
}

/// An ICMPv6 neighbour solicitation written on a raw socket (CAP_NET_RAW) to a unicast
/// address: typed like the kernel's own ND, but from a user socket.
fn nd6(addr: IpAddr) -> String {
    let socket = match raw_socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_ICMPV6) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    let mut solicitation = vec![135u8, 0, 0, 0, 0, 0, 0, 0];
    if let IpAddr::V6(v6) = addr {
        solicitation.extend_from_slice(&v6.octets());
    }
    match send_to(&socket, &solicitation, addr) {
        Ok(()) => "sent".into(),
        Err(e) => errno_word(&e),
    }
}

fn serve(port: u16) -> String {
    let listener = match TcpListener::bind(("::", port)) {
        Ok(l) => l,
        Err(e) => return format!("bind-{}", errno_word(&e)),
    };
    println!("\n{READY}");
    let _ = std::io::stdout().flush();
    match listener.accept() {
        Ok((mut conn, _)) => {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4];
            if conn.read_exact(&mut buf).is_err() {
                return "error:no-request".into();
            }
            match conn.write_all(b"pong") {
                Ok(()) => "served".into(),
                Err(e) => format!("reply-{}", errno_word(&e)),
            }
        }
        Err(e) => errno_word(&e),
    }
}

/// The Internet checksum of `words` (already summed into `sum`).
fn checksum(mut sum: u32, bytes: &[u8]) -> u16 {
    for pair in bytes.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IP + UDP, written by hand the way a workload holding CAP_NET_RAW could.
fn build_frame(gw_mac: [u8; 6], src: IpAddr, dst: IpAddr, port: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = (8 + payload.len()) as u16;
    let mut udp = Vec::new();
    udp.extend_from_slice(&40000u16.to_be_bytes());
    udp.extend_from_slice(&port.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut frame = Vec::new();
    frame.extend_from_slice(&gw_mac);
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            frame.extend_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&(20 + udp_len).to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let sum = checksum(0, &ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            frame.extend_from_slice(&ip);
            // A zero UDP checksum means "none" over IPv4.
            frame.extend_from_slice(&udp);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            frame.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(&udp);
            let sum = checksum(0, &pseudo);
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            frame.extend_from_slice(&[0x60, 0, 0, 0]);
            frame.extend_from_slice(&udp_len.to_be_bytes());
            frame.extend_from_slice(&[17, 64]);
            frame.extend_from_slice(&s.octets());
            frame.extend_from_slice(&d.octets());
            frame.extend_from_slice(&udp);
        }
        _ => panic!("frame probe: {src} and {dst} are of different families"),
    }
    frame
}

fn frame(
    dev: &str,
    gw_mac: &str,
    src: IpAddr,
    dst: IpAddr,
    port: u16,
    tag: &str,
    how: &str,
) -> String {
    let mut mac = [0u8; 6];
    for (slot, part) in mac.iter_mut().zip(gw_mac.split(':')) {
        *slot = u8::from_str_radix(part, 16).unwrap_or_else(|_| panic!("MAC {gw_mac}"));
    }
    let bytes = build_frame(mac, src, dst, port, tag.as_bytes());
    let name = std::ffi::CString::new(dev).expect("device name");
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return format!("error:no-device:{dev}");
    }
    let dgram = how == "dgram";
    let kind = if dgram {
        libc::SOCK_DGRAM
    } else {
        libc::SOCK_RAW
    };
    let socket = match raw_socket(libc::AF_PACKET, kind, 0) {
        Ok(s) => s,
        Err(e) => return format!("socket-{}", errno_word(&e)),
    };
    if how != "queue" {
        let on: libc::c_int = 1;
        // SAFETY: an int option of the size given. PACKET_QDISC_BYPASS is 20.
        let rc = unsafe {
            libc::setsockopt(
                socket.raw(),
                libc::SOL_PACKET,
                20,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return format!(
                "setsockopt-{}",
                errno_word(&std::io::Error::last_os_error())
            );
        }
    }
    if how == "held" {
        println!("\n{READY}");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    // SAFETY: zeroed sockaddr_ll, then filled.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_ifindex = ifindex as i32;
    // SOCK_DGRAM: the kernel writes the Ethernet header from the address and protocol.
    let payload = if dgram {
        to.sll_protocol = u16::from_ne_bytes([bytes[12], bytes[13]]);
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&mac);
        &bytes[14..]
    } else {
        &bytes[..]
    };
    match send_to_sockaddr(&socket, payload, &to) {
        Ok(()) => "sent".into(),
        Err(e) => errno_word(&e),
    }
}

struct Fd(i32);

impl Fd {
    fn raw(&self) -> i32 {
        self.0
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn raw_socket(family: i32, kind: i32, proto: i32) -> std::io::Result<Fd> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Fd(fd))
}

fn send_to(socket: &Fd, payload: &[u8], addr: IpAddr) -> std::io::Result<()> {
    match addr {
        IpAddr::V4(v4) => {
            // SAFETY: zeroed sockaddr_in, then filled.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from_ne_bytes(v4.octets());
            send_to_sockaddr(socket, payload, &sa)
        }
        IpAddr::V6(v6) => {
            // SAFETY: zeroed sockaddr_in6, then filled.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_addr.s6_addr = v6.octets();
            send_to_sockaddr(socket, payload, &sa)
        }
    }
}

/// sendto(2) with a socket address of type `A` (sockaddr_in, sockaddr_in6, sockaddr_ll).
fn send_to_sockaddr<A>(socket: &Fd, payload: &[u8], addr: &A) -> std::io::Result<()> {
    // SAFETY: payload and addr are valid for the lengths given.
    let rc = unsafe {
        libc::sendto(
            socket.raw(),
            payload.as_ptr().cast(),
            payload.len(),
            0,
            (addr as *const A).cast(),
            std::mem::size_of::<A>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

//! Real TCP between namespaces: a listener in one, a client in another, one round trip.
//!
//! A socket belongs to the network namespace its creating thread was in, so each side runs
//! on a fresh thread that first enters its namespace (network namespaces are per thread;
//! the test's other threads are unaffected). Every wait is bounded.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Long enough to ride out the first SYN being lost while a new veth's carrier comes up
/// (the kernel retransmits after a second); short enough that a broken path fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn enter(netns: &Path) -> Result<(), String> {
    let file = std::fs::File::open(netns).map_err(|e| format!("open {}: {e}", netns.display()))?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {}: {e}", netns.display()))
}

/// Listens on `addr` inside `server_ns`, connects from inside `client_ns`, and exchanges
/// "ping"/"pong". Err says which step failed.
pub fn round_trip(client_ns: &Path, server_ns: &Path, addr: IpAddr) -> Result<(), String> {
    let client_done = AtomicBool::new(false);
    let (port_tx, port_rx) = mpsc::channel::<u16>();
    let server_ns: PathBuf = server_ns.to_path_buf();
    let client_ns: PathBuf = client_ns.to_path_buf();
    let done = &client_done;
    std::thread::scope(|scope| {
        // The sender moves into the server, so a server that fails before listening
        // ends the client's wait at once.
        let server = scope.spawn(move || -> Result<(), String> {
            enter(&server_ns)?;
            let listener =
                TcpListener::bind((addr, 0)).map_err(|e| format!("bind {addr} in server: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let _ = port_tx.send(port);
            listener.set_nonblocking(true).map_err(|e| e.to_string())?;
            let deadline = Instant::now() + CONNECT_TIMEOUT + IO_TIMEOUT;
            let mut conn = loop {
                match listener.accept() {
                    Ok((conn, _)) => break conn,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if done.load(Ordering::Acquire) || Instant::now() > deadline {
                            return Err(format!("no connection reached {addr}"));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return Err(format!("accept on {addr}: {e}")),
                }
            };
            conn.set_nonblocking(false).map_err(|e| e.to_string())?;
            conn.set_read_timeout(Some(IO_TIMEOUT))
                .map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4];
            conn.read_exact(&mut buf)
                .map_err(|e| format!("server read: {e}"))?;
            conn.write_all(b"pong")
                .map_err(|e| format!("server write: {e}"))
        });
        let client = (|| -> Result<(), String> {
            let port = port_rx
                .recv_timeout(IO_TIMEOUT)
                .map_err(|_| format!("server could not listen on {addr}"))?;
            let target = SocketAddr::new(addr, port);
            let handle = scope.spawn(move || -> Result<(), String> {
                enter(&client_ns)?;
                let mut conn = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)
                    .map_err(|e| format!("connect to {target}: {e}"))?;
                conn.set_read_timeout(Some(IO_TIMEOUT))
                    .map_err(|e| e.to_string())?;
                conn.write_all(b"ping")
                    .map_err(|e| format!("client write: {e}"))?;
                let mut buf = [0u8; 4];
                conn.read_exact(&mut buf)
                    .map_err(|e| format!("client read from {target}: {e}"))?;
                if &buf == b"pong" {
                    Ok(())
                } else {
                    Err(format!("unexpected reply {buf:?} from {target}"))
                }
            });
            handle
                .join()
                .unwrap_or_else(|_| Err("client thread panicked".into()))
        })();
        done.store(true, Ordering::Release);
        let server = server
            .join()
            .unwrap_or_else(|_| Err("server thread panicked".into()));
        client.and(server)
    })
}

/// [`round_trip`], failing the test with the reason and `context`.
#[track_caller]
pub fn assert_reachable(client_ns: &Path, server_ns: &Path, addr: IpAddr, context: &str) {
    if let Err(e) = round_trip(client_ns, server_ns, addr) {
        panic!(
            "{context}: TCP from {} to {addr} in {} failed: {e}",
            client_ns.display(),
            server_ns.display()
        );
    }
}

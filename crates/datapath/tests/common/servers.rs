//! Echo servers in a pod's namespace, which answer `<name>:<what they got>` (so a client
//! knows which backend answered) and remember everything they got. Stopped on drop.

use super::flows::spawn_in_netns;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const POLL: Duration = Duration::from_millis(20);

pub struct EchoServer {
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl EchoServer {
    /// A TCP and a UDP echo server on `tcp` and `udp`, in the namespace at `netns`.
    pub fn start(netns: &Path, name: &str, tcp: SocketAddr, udp: SocketAddr) -> EchoServer {
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut threads = Vec::new();
        {
            let (stop, received, name, ready) = (
                stop.clone(),
                received.clone(),
                name.to_string(),
                ready_tx.clone(),
            );
            threads.push(spawn_in_netns(netns, move || {
                let listener = TcpListener::bind(tcp).expect("bind TCP");
                listener.set_nonblocking(true).expect("nonblocking");
                let _ = ready.send(());
                let mut conns = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut conn, _)) => {
                            let (stop, received, name) =
                                (stop.clone(), received.clone(), name.clone());
                            conns.push(std::thread::spawn(move || {
                                let _ = conn.set_nonblocking(false);
                                let _ = conn.set_read_timeout(Some(POLL));
                                let mut buf = [0u8; 1024];
                                while !stop.load(Ordering::Relaxed) {
                                    match conn.read(&mut buf) {
                                        Ok(0) => return,
                                        Ok(n) => {
                                            let got =
                                                String::from_utf8_lossy(&buf[..n]).into_owned();
                                            received.lock().unwrap().push(got.clone());
                                            let _ =
                                                conn.write_all(format!("{name}:{got}").as_bytes());
                                        }
                                        Err(e)
                                            if matches!(
                                                e.kind(),
                                                std::io::ErrorKind::WouldBlock
                                                    | std::io::ErrorKind::TimedOut
                                            ) => {}
                                        Err(_) => return,
                                    }
                                }
                            }));
                        }
                        Err(_) => std::thread::sleep(POLL),
                    }
                }
                for c in conns {
                    let _ = c.join();
                }
            }));
        }
        {
            let (stop, received, name, ready) =
                (stop.clone(), received.clone(), name.to_string(), ready_tx);
            threads.push(spawn_in_netns(netns, move || {
                let sock = UdpSocket::bind(udp).expect("bind UDP");
                sock.set_read_timeout(Some(POLL)).expect("timeout");
                let _ = ready.send(());
                let mut buf = [0u8; 1024];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = sock.recv_from(&mut buf) {
                        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
                        received.lock().unwrap().push(got.clone());
                        let _ = sock.send_to(format!("{name}:{got}").as_bytes(), from);
                    }
                }
            }));
        }
        for _ in 0..2 {
            ready_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("echo server ready");
        }
        EchoServer {
            stop,
            received,
            threads,
        }
    }

    /// Everything the server got, in order.
    pub fn received(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

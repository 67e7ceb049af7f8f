//! Serving: API listeners that can refuse connections and come back (for "the API server
//! is down" tests) without losing state, an optional control listener that never goes
//! down, and a clean shutdown that releases every task and port.

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::admission::{Admission, NamespaceDefaults, PodDefaults, ServiceAllocation};
use crate::auth::{AllowAll, Authorizer};
use crate::config::Config;
use crate::error::Error;
use crate::handle::Handle;
use crate::http::{handle, Outcome};
use crate::recorder::Recorder;
use crate::resources::{builtin, Resources};
use crate::reviews::{Reviewer, TableReviewer};
use crate::shared::{Shared, WatchDrop};
use crate::store::{Store, WriteCtx};

/// Where to serve: an address to bind, or a listener bound elsewhere (for example inside
/// another network namespace).
pub enum Listen {
    Addr(SocketAddr),
    Listener(StdListener),
}

impl Listen {
    fn into_std(self) -> Result<StdListener, Error> {
        let l = match self {
            Listen::Addr(addr) => {
                StdListener::bind(addr).map_err(|source| Error::Bind { addr, source })?
            }
            Listen::Listener(l) => l,
        };
        l.set_nonblocking(true).map_err(Error::Listener)?;
        Ok(l)
    }
}

/// Builder: configuration plus the pluggable pieces (admission hooks, authorizer,
/// reviewer).
pub struct ApiServer {
    config: Config,
    hooks: Vec<(String, String, Arc<dyn Admission>)>,
    authorizer: Arc<dyn Authorizer>,
    reviewer: Option<Arc<dyn Reviewer>>,
}

impl ApiServer {
    pub fn new(config: Config) -> Self {
        ApiServer {
            config,
            hooks: Vec::new(),
            authorizer: Arc::new(AllowAll),
            reviewer: None,
        }
    }

    /// One more admission/defaulting hook for `(group, plural)`, after the built-in ones.
    pub fn hook(mut self, group: &str, plural: &str, hook: Arc<dyn Admission>) -> Self {
        self.hooks.push((group.into(), plural.into(), hook));
        self
    }

    pub fn authorizer(mut self, a: Arc<dyn Authorizer>) -> Self {
        self.authorizer = a;
        self
    }

    pub fn reviewer(mut self, r: Arc<dyn Reviewer>) -> Self {
        self.reviewer = Some(r);
        self
    }

    fn build(self) -> Result<Arc<Shared>, Error> {
        self.config.validate()?;
        let mut defs = builtin();
        defs.extend(self.config.extra_resources.iter().cloned());
        let mut store = Store::new(Resources::new(defs), self.config.watch_history);
        store.add_hook("", "namespaces", Arc::new(NamespaceDefaults));
        store.add_hook("", "pods", Arc::new(PodDefaults));
        store.add_hook(
            "",
            "services",
            Arc::new(ServiceAllocation::new(
                &self.config.service_cidrs,
                self.config.node_port_range,
            )),
        );
        for (g, p, h) in self.hooks {
            store.add_hook(&g, &p, h);
        }
        if self.config.seed_namespaces {
            let nsdef = store
                .resources()
                .find("", "v1", "namespaces")
                .cloned()
                .ok_or_else(|| Error::Config("no namespaces resource".into()))?;
            let ctx = WriteCtx {
                user: "system:apiserver".into(),
                dry_run: false,
            };
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                store.create(
                    &nsdef,
                    "",
                    serde_json::json!({"metadata": {"name": ns}}),
                    &ctx,
                )?;
            }
        }
        let reviewer = self.reviewer.unwrap_or_else(|| {
            Arc::new(TableReviewer {
                config: self.config.clone(),
            })
        });
        let rv = store.current_rv();
        Ok(Arc::new(Shared {
            recorder: Mutex::new(Recorder::new(self.config.record_limit)),
            config: self.config,
            store: Mutex::new(store),
            changed: watch::channel(rv).0,
            faults: Mutex::new(Default::default()),
            drops: watch::channel(WatchDrop::default()).0,
            up: watch::channel(true).0,
            authorizer: self.authorizer,
            reviewer,
        }))
    }

    /// Starts serving on the current tokio runtime.
    pub async fn start(
        self,
        api: Vec<Listen>,
        control: Option<Listen>,
    ) -> Result<RunningServer, Error> {
        if api.is_empty() {
            return Err(Error::Config("at least one API listener is needed".into()));
        }
        let shared = self.build()?;
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut api_addrs = Vec::new();
        for l in api {
            let l = l.into_std()?;
            let addr = l.local_addr().map_err(Error::Listener)?;
            api_addrs.push(addr);
            tasks.push(tokio::spawn(api_loop(
                l,
                addr,
                shared.clone(),
                stopped.clone(),
            )));
        }
        let control_addr = match control {
            Some(l) => {
                let l = l.into_std()?;
                let addr = l.local_addr().map_err(Error::Listener)?;
                let l = tokio::net::TcpListener::from_std(l).map_err(Error::Listener)?;
                tasks.push(tokio::spawn(control_loop(
                    l,
                    addr,
                    shared.clone(),
                    stopped.clone(),
                )));
                Some(addr)
            }
            None => None,
        };
        Ok(RunningServer {
            handle: Handle { shared },
            api_addrs,
            control_addr,
            stop,
            tasks,
        })
    }
}

/// A started server. Dropping it stops every task and closes every listener.
pub struct RunningServer {
    handle: Handle,
    api_addrs: Vec<SocketAddr>,
    control_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    pub fn api_addrs(&self) -> &[SocketAddr] {
        &self.api_addrs
    }

    /// `http://<first API address>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.api_addrs[0])
    }

    pub fn control_url(&self) -> Option<String> {
        self.control_addr.map(|a| format!("http://{a}"))
    }

    /// Stops accepting, closes every connection (watches included) and waits for the tasks.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Serves until `shutdown` completes (the entry point for a server run as its own process).
pub async fn run(
    config: Config,
    api: Vec<Listen>,
    control: Option<Listen>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = ApiServer::new(config).start(api, control).await?;
    shutdown.await;
    server.shutdown().await;
    Ok(())
}

fn serve_connection(
    set: &mut JoinSet<()>,
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    local: String,
    control_only: bool,
    mut closed: impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + 'static,
) {
    let _ = stream.set_nodelay(true);
    set.spawn(async move {
        let service = service_fn(move |req| {
            let shared = shared.clone();
            let local = local.clone();
            async move {
                match handle(shared, req, local, control_only).await {
                    Outcome::Respond(r) => Ok(r),
                    Outcome::Drop => Err(std::io::Error::other(
                        "connection dropped by fault injection",
                    )),
                }
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            _ = conn => {}
            _ = closed() => {}
        }
    });
}

/// Resolves when the server goes down or stops.
fn down_or_stopped(
    shared: &Arc<Shared>,
    stopped: &watch::Receiver<bool>,
) -> impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + 'static {
    let up = shared.up.subscribe();
    let stopped = stopped.clone();
    move || {
        let mut up = up.clone();
        let mut stopped = stopped.clone();
        Box::pin(async move {
            tokio::select! {
                _ = up.wait_for(|u| !*u) => {}
                _ = stopped.wait_for(|s| *s) => {}
            }
        })
    }
}

/// Takes the socket out of LISTEN (clients get ECONNREFUSED) while keeping the fd, so the
/// same socket, possibly opened in another network namespace, can listen again.
fn stop_listening(l: &StdListener) {
    // SAFETY: shutdown(2) on a socket fd we own; no memory is involved.
    unsafe {
        libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR);
    }
}

fn listen_again(l: &StdListener, addr: SocketAddr) -> std::io::Result<()> {
    let fd = l.as_raw_fd();
    // An ephemeral port was released by shutdown(2): bind the same address again. An
    // explicitly bound port is kept and bind fails with EINVAL, which is fine.
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` is a valid sockaddr of `len` bytes for the socket's family.
    unsafe {
        libc::bind(
            fd,
            &storage as *const libc::sockaddr_storage as *const libc::sockaddr,
            len,
        );
    }
    // SAFETY: listen(2) on a socket fd we own.
    if unsafe { libc::listen(fd, 1024) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

async fn api_loop(
    std_listener: StdListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut up = shared.up.subscribe();
    let mut connections = JoinSet::new();
    loop {
        if *stopped.borrow() {
            return;
        }
        if !*up.borrow_and_update() {
            tokio::select! {
                _ = up.wait_for(|u| *u) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
            if let Err(e) = listen_again(&std_listener, addr) {
                tracing::warn!("apiserver: listening again on {addr}: {e}");
            }
            continue;
        }
        let Ok(dup) = std_listener.try_clone() else {
            return;
        };
        let Ok(listener) = tokio::net::TcpListener::from_std(dup) else {
            return;
        };
        let closed_when = stopped.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((stream, _)) = accepted {
                        serve_connection(&mut connections, stream, shared.clone(), addr.to_string(), false, down_or_stopped(&shared, &closed_when));
                    }
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                _ = up.wait_for(|u| !*u) => break,
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
        drop(listener);
        stop_listening(&std_listener);
    }
}

async fn control_loop(
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        let stop = stopped.clone();
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let closed = move || {
                        let mut s = stop.clone();
                        Box::pin(async move { let _ = s.wait_for(|s| *s).await; }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
                    };
                    serve_connection(&mut connections, stream, shared.clone(), addr.to_string(), true, closed);
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

//! The directory source, for hosts without Kubernetes: Kubernetes-format YAML files in one
//! directory, re-read whenever the kernel reports a change in it (inotify; a renamed-in
//! file, a ConfigMap's `..data` swap and a plain write all count), and on every resync in
//! case a notification was lost. Each read is a full relist of every kind: the stores
//! report only what really changed.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::mpsc;
use weft_model::standalone::{self, Documents};
use weft_model::{Issue, Update, Watched};

use super::SourceMsg;

/// Quiet time after a notification before the directory is read: a writer's create,
/// write and close arrive as one change.
const SETTLE: Duration = Duration::from_millis(30);
/// How often a missing directory is looked for again.
const MISSING_RETRY: Duration = Duration::from_secs(1);

/// How to turn the directory's documents into one kind's relist, and the issues of
/// objects that cannot be stored at all.
pub type Relist = fn(&Documents) -> (SourceMsg, Vec<Issue>);

/// [`Relist`] for a watched kind.
pub fn relist<T: Watched>(documents: &Documents) -> (SourceMsg, Vec<Issue>) {
    let objects = standalone::objects::<T>(documents);
    let mut updates = Vec::with_capacity(objects.items.len() + 2);
    updates.push(Update::Init);
    updates.extend(
        objects
            .items
            .into_iter()
            .map(|(key, value)| Update::Apply(key, value)),
    );
    updates.push(Update::InitDone);
    (SourceMsg::batch(updates), objects.issues)
}

/// Reads `dir` now and after every change, until the agent stops listening.
pub async fn run(dir: PathBuf, kinds: Vec<Relist>, resync: Duration, tx: mpsc::Sender<SourceMsg>) {
    loop {
        let watch = match Watch::new(&dir) {
            Ok(w) => Some(w),
            Err(e) => {
                let trouble = SourceMsg::Trouble {
                    kind: "directory",
                    error: format!("cannot watch {}: {e}", dir.display()),
                };
                if tx.send(trouble).await.is_err() {
                    return;
                }
                None
            }
        };
        if !send_all(&dir, &kinds, &tx).await {
            return;
        }
        let Some(mut watch) = watch else {
            tokio::time::sleep(MISSING_RETRY).await;
            continue;
        };
        loop {
            let woke = tokio::time::timeout(resync, watch.changed()).await;
            match woke {
                // The directory itself went away or was replaced: watch it anew.
                Ok(Ok(Changed::Gone)) | Ok(Err(_)) => break,
                Ok(Ok(Changed::Files)) => {
                    tokio::time::sleep(SETTLE).await;
                    if watch.drain_is_gone() {
                        break;
                    }
                }
                Err(_resync) => {}
            }
            if !send_all(&dir, &kinds, &tx).await {
                return;
            }
        }
    }
}

/// Reads the directory and sends one relist per kind; `false` once nobody listens.
async fn send_all(dir: &Path, kinds: &[Relist], tx: &mpsc::Sender<SourceMsg>) -> bool {
    let documents = standalone::read_dir(dir);
    let mut issues = documents.issues.clone();
    for relist in kinds {
        let (msg, found) = relist(&documents);
        issues.extend(found);
        if tx.send(msg).await.is_err() {
            return false;
        }
    }
    tx.send(SourceMsg::Issues {
        origin: dir.display().to_string(),
        issues,
    })
    .await
    .is_ok()
}

enum Changed {
    Files,
    Gone,
}

/// The inotify instance, as tokio wants it.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

struct Watch {
    fd: AsyncFd<Fd>,
}

fn gone(events: &[nix::sys::inotify::InotifyEvent]) -> bool {
    events.iter().any(|e| {
        e.mask.intersects(
            AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_IGNORED,
        )
    })
}

impl Watch {
    fn new(dir: &Path) -> std::io::Result<Watch> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(
            dir,
            AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_ONLYDIR,
        )?;
        // SAFETY: the fd belongs to `inotify`, which the AsyncFd owns until it is dropped,
        // and `Fd::as_raw_fd` always returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(Fd(inotify), Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok(Watch { fd })
    }

    async fn changed(&mut self) -> std::io::Result<Changed> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.get_inner().0.read_events() {
                Ok(events) => {
                    if gone(&events) {
                        return Ok(Changed::Gone);
                    }
                    let relevant = events.iter().any(|e| {
                        e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)
                            || e.name.as_ref().is_none_or(|n| {
                                let name = Path::new(n);
                                standalone::is_source_file(name)
                                    || name.to_string_lossy().starts_with("..")
                            })
                    });
                    if relevant {
                        return Ok(Changed::Files);
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Discards notifications that arrived while settling (the read that follows covers
    /// them); `true` when the directory itself went.
    fn drain_is_gone(&mut self) -> bool {
        let mut went = false;
        while let Ok(events) = self.fd.get_ref().0.read_events() {
            if events.is_empty() {
                break;
            }
            went |= gone(&events);
        }
        went
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_model::{NodeSpec, ObjectKey, Stores};

    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn node(name: &str, cidr: &str) -> String {
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nspec: {{podCIDRs: [\"{cidr}\"]}}\nstatus: {{addresses: [{{type: InternalIP, address: 192.0.2.1}}]}}\n")
    }

    /// Applies messages until `done` holds (notifications, not the resync, must get there).
    async fn until(
        rx: &mut mpsc::Receiver<SourceMsg>,
        stores: &mut Stores,
        done: impl Fn(&Stores) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done(stores) {
            let msg = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("a change is noticed without waiting for the resync")
                .expect("the source runs");
            if let SourceMsg::Update(update) = msg {
                update.apply(stores);
            }
        }
    }

    fn cidr_of(stores: &Stores, name: &str) -> Option<String> {
        let store = stores.get::<NodeSpec>().unwrap();
        store
            .get(&ObjectKey::cluster(name))
            .map(|n| n.pod_cidrs[0].to_string())
    }

    #[tokio::test]
    async fn writes_renames_and_removals_are_noticed() {
        let dir = TempDir(std::env::temp_dir().join(weft_testkit::unique_name("weft-dirsrc")));
        std::fs::create_dir_all(&dir.0).unwrap();
        std::fs::write(dir.0.join("a.yaml"), node("a", "10.244.1.0/24")).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let relists: Vec<Relist> = vec![relist::<NodeSpec>];
        // An hour between resyncs: only notifications can make this test pass in time.
        tokio::spawn(run(dir.0.clone(), relists, Duration::from_secs(3600), tx));
        let mut stores = Stores::default();
        stores.register::<NodeSpec>();

        until(&mut rx, &mut stores, |s| cidr_of(s, "a").is_some()).await;
        std::fs::write(dir.0.join("a.yaml"), node("a", "10.244.9.0/24")).unwrap();
        until(&mut rx, &mut stores, |s| {
            cidr_of(s, "a").as_deref() == Some("10.244.9.0/24")
        })
        .await;
        // Written aside (hidden, ignored) and renamed in, as atomic writers do.
        std::fs::write(dir.0.join(".b.tmp"), node("b", "10.244.2.0/24")).unwrap();
        std::fs::rename(dir.0.join(".b.tmp"), dir.0.join("b.yaml")).unwrap();
        until(&mut rx, &mut stores, |s| cidr_of(s, "b").is_some()).await;
        std::fs::remove_file(dir.0.join("a.yaml")).unwrap();
        until(&mut rx, &mut stores, |s| cidr_of(s, "a").is_none()).await;
        assert!(stores.get::<NodeSpec>().unwrap().synced());
    }
}

//! Container images built locally, without any registry: a busybox-static image for the
//! workloads and a static `pause` for CRI sandboxes, as OCI tarballs (for `ctr image
//! import`), plus the busybox root filesystem as a plain tar (for `podman import`).
//!
//! They are built once into a cache directory shared by every test process: builders
//! take an exclusive `flock`, build into a private directory and `rename` it into place,
//! so a reader only ever sees a complete set.

use crate::command::checked;
use crate::error::{io_context, Result};
use crate::fs::{remove_tree, workspace_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Name of the pause image once imported (`--base-name` plus the OCI ref name); the
/// containerd config's `sandbox_image` must match it exactly.
pub const PAUSE_IMAGE: &str = "localhost/weft-pause:3.6";
/// Name of the busybox image in containerd and podman.
pub const BUSYBOX_IMAGE: &str = "localhost/weft-busybox:latest";

const PAUSE_BASE: &str = "localhost/weft-pause";
const PAUSE_TAG: &str = "3.6";
const BUSYBOX_BASE: &str = "localhost/weft-busybox";
const BUSYBOX_TAG: &str = "latest";

/// Bump when the recipe changes so stale caches are not reused.
const RECIPE: &str = "v1";
const COMPLETE_MARKER: &str = "complete";

/// Served by `httpd -h /var/www` in the busybox image, so a fetch proves which server
/// answered.
pub const INDEX_HTML: &str = "hello-from-weft-container\n";

/// A tiny sandbox init: sleeps until told to stop and reaps any child it inherits.
const PAUSE_C: &str = r#"#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* The sandbox's PID 1 only holds the pod's namespaces open. */
static void on_stop(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, 0, WNOHANG) > 0) {
    }
}

int main(void) {
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    signal(SIGCHLD, on_child);
    for (;;) {
        pause();
    }
}
"#;

/// The built images, all inside one immutable cache directory.
#[derive(Debug, Clone)]
pub struct Images {
    dir: PathBuf,
}

static BUILT: Mutex<Option<Images>> = Mutex::new(None);

impl Images {
    /// The images in the default cache, `<workspace>/target/weft-images` (or
    /// `$WEFT_IMAGES_DIR`), built on first use.
    pub fn ensure() -> Result<Images> {
        let cache = std::env::var_os("WEFT_IMAGES_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_dir().join("target").join("weft-images"));
        let mut built = BUILT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(images) = built.as_ref() {
            if images.dir.starts_with(&cache) {
                return Ok(images.clone());
            }
        }
        let images = Images::ensure_in(&cache)?;
        *built = Some(images.clone());
        Ok(images)
    }

    /// The images in `cache`, built there if missing. Safe to call from several
    /// processes at once.
    pub fn ensure_in(cache: &Path) -> Result<Images> {
        let final_dir = cache.join(RECIPE);
        if final_dir.join(COMPLETE_MARKER).is_file() {
            return Ok(Images { dir: final_dir });
        }
        std::fs::create_dir_all(cache)
            .map_err(io_context(format!("create {}", cache.display())))?;
        let lock_path = cache.join(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_context(format!("open {}", lock_path.display())))?;
        lock.lock()
            .map_err(io_context(format!("lock {}", lock_path.display())))?;
        // Someone else may have finished while we waited for the lock.
        if final_dir.join(COMPLETE_MARKER).is_file() {
            return Ok(Images { dir: final_dir });
        }
        let build_dir = cache.join(format!(".build-{}", std::process::id()));
        remove_tree(&build_dir)?;
        // An incomplete final dir can only come from a crash between rename and
        // marker, which the marker-in-build-dir order below rules out; clear it anyway.
        remove_tree(&final_dir)?;
        let built = build_all(&build_dir).and_then(|()| {
            std::fs::rename(&build_dir, &final_dir).map_err(io_context(format!(
                "rename {} to {}",
                build_dir.display(),
                final_dir.display()
            )))
        });
        if built.is_err() {
            let _ = remove_tree(&build_dir);
        }
        built?;
        Ok(Images { dir: final_dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// OCI layout tarball of the pause image (ref `3.6`), for `ctr image import`.
    pub fn pause_oci_tar(&self) -> PathBuf {
        self.dir.join("pause-oci.tar")
    }

    /// OCI layout tarball of the busybox image (ref `latest`), for `ctr image import`.
    pub fn busybox_oci_tar(&self) -> PathBuf {
        self.dir.join("busybox-oci.tar")
    }

    /// The busybox root filesystem as a plain tar, for `podman import`.
    pub fn busybox_rootfs_tar(&self) -> PathBuf {
        self.dir.join("busybox-rootfs.tar")
    }

    /// `(tarball, --base-name)` pairs to import into containerd.
    pub fn oci_imports(&self) -> [(PathBuf, &'static str); 2] {
        [
            (self.pause_oci_tar(), PAUSE_BASE),
            (self.busybox_oci_tar(), BUSYBOX_BASE),
        ]
    }
}

fn build_all(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io_context(format!("create {}", dir.display())))?;
    let rootfs = dir.join("rootfs");
    make_busybox_rootfs(&rootfs)?;
    tar_dir(&rootfs, &dir.join("busybox-rootfs.tar"))?;
    oci_image_from_dir(
        dir,
        &rootfs,
        "busybox",
        BUSYBOX_TAG,
        &["--config.cmd", "/bin/sh"],
    )?;

    let pause_root = dir.join("pause-rootfs");
    make_pause_rootfs(dir, &pause_root)?;
    oci_image_from_dir(
        dir,
        &pause_root,
        "pause",
        PAUSE_TAG,
        &["--config.entrypoint", "/pause"],
    )?;

    for scratch in ["rootfs", "pause-rootfs", "pause.c", "pause"] {
        remove_tree(&dir.join(scratch))?;
    }
    let marker = dir.join(COMPLETE_MARKER);
    std::fs::write(&marker, RECIPE).map_err(io_context(format!("write {}", marker.display())))
}

/// busybox-static with every applet linked into /bin, a root user, and a web root.
fn make_busybox_rootfs(rootfs: &Path) -> Result<()> {
    for sub in ["bin", "etc", "proc", "sys", "dev", "tmp", "root", "var/www"] {
        let path = rootfs.join(sub);
        std::fs::create_dir_all(&path).map_err(io_context(format!("create {}", path.display())))?;
    }
    set_mode(&rootfs.join("tmp"), 0o1777)?;
    let busybox = rootfs.join("bin/busybox");
    std::fs::copy("/bin/busybox", &busybox).map_err(io_context(
        "copy /bin/busybox (apt-get install busybox-static)",
    ))?;
    set_mode(&busybox, 0o755)?;
    let applets = checked(Command::new("/bin/busybox").arg("--list"))?.stdout;
    for applet in applets.lines().map(str::trim) {
        if applet.is_empty() || applet == "busybox" || applet.contains('/') {
            continue;
        }
        let link = rootfs.join("bin").join(applet);
        std::os::unix::fs::symlink("busybox", &link)
            .map_err(io_context(format!("symlink {}", link.display())))?;
    }
    write(
        &rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\n",
    )?;
    write(&rootfs.join("etc/group"), "root:x:0:\n")?;
    write(&rootfs.join("var/www/index.html"), INDEX_HTML)
}

/// A root filesystem holding only a statically linked /pause.
fn make_pause_rootfs(build_dir: &Path, rootfs: &Path) -> Result<()> {
    let source = build_dir.join("pause.c");
    let binary = build_dir.join("pause");
    write(&source, PAUSE_C)?;
    checked(
        Command::new("gcc")
            .args(["-static", "-Os", "-o"])
            .arg(&binary)
            .arg(&source),
    )?;
    checked(Command::new("strip").arg(&binary))?;
    std::fs::create_dir_all(rootfs).map_err(io_context(format!("create {}", rootfs.display())))?;
    let target = rootfs.join("pause");
    std::fs::copy(&binary, &target).map_err(io_context(format!("copy {}", binary.display())))?;
    set_mode(&target, 0o755)
}

/// Makes an OCI layout `<name>-oci` whose ref `tag` holds `rootfs` as one layer, applies
/// the `umoci config` flags, and tars the layout to `<name>-oci.tar`.
fn oci_image_from_dir(
    build_dir: &Path,
    rootfs: &Path,
    name: &str,
    tag: &str,
    config: &[&str],
) -> Result<()> {
    let layout = build_dir.join(format!("{name}-oci"));
    let bundle = build_dir.join(format!("{name}-bundle"));
    let image = format!("{}:{tag}", layout.display());
    checked(
        Command::new("umoci")
            .args(["init", "--layout"])
            .arg(&layout),
    )?;
    checked(Command::new("umoci").args(["new", "--image", &image]))?;
    checked(
        Command::new("umoci")
            .args(["unpack", "--image", &image])
            .arg(&bundle),
    )?;
    let mut copy_source = rootfs.as_os_str().to_owned();
    copy_source.push("/.");
    checked(
        Command::new("cp")
            .arg("-a")
            .arg(copy_source)
            .arg(bundle.join("rootfs")),
    )?;
    checked(
        Command::new("umoci")
            .args(["repack", "--image", &image])
            .arg(&bundle),
    )?;
    checked(
        Command::new("umoci")
            .args(["config", "--image", &image])
            .args(config),
    )?;
    tar_dir(&layout, &build_dir.join(format!("{name}-oci.tar")))?;
    remove_tree(&layout)?;
    remove_tree(&bundle)
}

fn tar_dir(dir: &Path, tarball: &Path) -> Result<()> {
    checked(
        Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(dir)
            .arg("-cf")
            .arg(tarball)
            .arg("."),
    )
    .map(drop)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(io_context(format!("write {}", path.display())))
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_context(format!("chmod {}", path.display())))
}

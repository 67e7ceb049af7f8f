use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a finished command printed, with its status.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// A `Command` that enters the network namespace at `netns_path` before exec, and
/// nothing else: the mount namespace (and with it bpffs and cgroupfs) stays the host's.
pub fn cmd_in(netns_path: &Path, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    let path = netns_path.to_path_buf();
    // SAFETY: between fork and exec we only open a file and call setns, both
    // async-signal-safe; on failure the child exits with the error.
    unsafe {
        cmd.pre_exec(move || {
            let f = std::fs::File::open(&path)?;
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    cmd
}

/// Runs a command to completion and captures its output.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a command and fails the test, with its output, when it does not succeed.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        out.stdout,
        out.stderr
    );
    out
}

/// `run_ok` of a program with arguments inside a network namespace.
pub fn run_ok_in(netns_path: &Path, program: &str, args: &[&str]) -> Output {
    run_ok(cmd_in(netns_path, program).args(args))
}

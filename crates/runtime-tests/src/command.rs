//! Running the runtimes' command-line tools with typed errors instead of panics.

use crate::error::{HarnessError, Result};
use std::path::Path;
use std::process::{Command, Stdio};
pub use weft_testkit::Output;

/// A command for `program`, entering the network namespace at `netns` first when one is
/// given (network namespace only, see `weft_testkit::cmd_in`).
pub(crate) fn command_in(netns: Option<&Path>, program: &str) -> Command {
    match netns {
        Some(path) => weft_testkit::cmd_in(path, program),
        None => Command::new(program),
    }
}

/// Runs to completion and returns the output whatever the exit status.
pub(crate) fn output(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| HarnessError::Io {
            context: format!("could not run {}", describe(cmd)),
            source,
        })?;
    Ok(Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs to completion and fails, with both output streams, on a non-zero exit.
pub(crate) fn checked(cmd: &mut Command) -> Result<Output> {
    let out = output(cmd)?;
    if out.success() {
        Ok(out)
    } else {
        Err(HarnessError::CommandFailed {
            command: describe(cmd),
            status: out.status.to_string(),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// The program and its arguments as one line, for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

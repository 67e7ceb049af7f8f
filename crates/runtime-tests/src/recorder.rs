//! A chained CNI plugin that records what the runtime sends it (environment and config)
//! and passes the previous result through unchanged. It shows what a real runtime hands
//! a chained plugin such as `weft-guard`: runtimeConfig capabilities, pod annotations,
//! the DEL sequence.

use crate::error::{io_context, unexpected, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Appends one JSON line per call; answers VERSION, passes `prevResult` through on ADD.
const RECORDER_SCRIPT: &str = r#"#!/bin/sh
# Written by weft-runtime-tests: records each CNI call, then acts as a no-op chained plugin.
input=$(cat)
jq -cn --arg command "$CNI_COMMAND" --arg container_id "$CNI_CONTAINERID" \
   --arg netns "$CNI_NETNS" --arg ifname "$CNI_IFNAME" --arg args "$CNI_ARGS" \
   --arg stdin "$input" \
   '{command: $command, container_id: $container_id, netns: $netns, ifname: $ifname, args: $args, stdin: $stdin}' \
   >> "__LOG__"
case "$CNI_COMMAND" in
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}' ;;
  ADD) printf '%s' "$input" | jq -c '.prevResult // {cniVersion: .cniVersion}' ;;
esac
"#;

/// One call the recorder saw.
#[derive(Debug, Clone)]
pub struct RecordedCall {
    /// `ADD`, `DEL`, `CHECK`, `VERSION`, …
    pub command: String,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    /// The network config on stdin, parsed (`Value::Null` when it was not JSON).
    pub config: Value,
}

impl RecordedCall {
    /// `runtimeConfig[key]` of the config the runtime sent.
    pub fn runtime_config(&self, key: &str) -> Option<&Value> {
        self.config.get("runtimeConfig")?.get(key)
    }
}

/// Handle on an installed recorder's log.
#[derive(Debug, Clone)]
pub struct Recorder {
    log: PathBuf,
}

impl Recorder {
    /// Installs the recorder as plugin `type_name` in `bin_dir`, logging to `log`.
    /// Needs `jq` (a `make deps` package).
    pub fn install(bin_dir: &Path, type_name: &str, log: &Path) -> Result<Recorder> {
        use std::os::unix::fs::PermissionsExt;
        let script = RECORDER_SCRIPT.replace("__LOG__", &log.to_string_lossy());
        let path = bin_dir.join(type_name);
        std::fs::write(&path, script).map_err(io_context(format!("write {}", path.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(io_context(format!("chmod {}", path.display())))?;
        Ok(Recorder {
            log: log.to_path_buf(),
        })
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Result<Vec<RecordedCall>> {
        let text = match std::fs::read_to_string(&self.log) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_context(format!("read {}", self.log.display()))(e)),
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(parse_line)
            .collect()
    }

    /// The calls for one command (`ADD`, `DEL`, …).
    pub fn calls_of(&self, command: &str) -> Result<Vec<RecordedCall>> {
        Ok(self
            .calls()?
            .into_iter()
            .filter(|c| c.command == command)
            .collect())
    }
}

fn parse_line(line: &str) -> Result<RecordedCall> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| unexpected("recorder log line", format!("{e}: {line}")))?;
    let field = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(RecordedCall {
        command: field("command"),
        container_id: field("container_id"),
        netns: field("netns"),
        ifname: field("ifname"),
        args: field("args"),
        config: serde_json::from_str(&field("stdin")).unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_parsed() {
        let line = r#"{"command":"ADD","container_id":"abc","netns":"/n","ifname":"eth0","args":"K=V","stdin":"{\"runtimeConfig\":{\"x\":1}}"}"#;
        let call = parse_line(line).expect("parse");
        assert_eq!(call.command, "ADD");
        assert_eq!(call.runtime_config("x"), Some(&serde_json::json!(1)));
        assert!(parse_line("not json").is_err());
    }
}

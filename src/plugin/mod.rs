//! The CNI entry point: read the environment and stdin, dispatch on the netconf `type`,
//! print the reply (or the spec's error object) on stdout, and return the exit status.
//!
//! One binary serves every plugin type weft ships, selected by the `type` the runtime put in
//! the request (the `weft-guard` link in the CNI bin dir points at this same binary).

use std::io::Read;

use weft_cni::{requested_version, version_response, CniError, Command, Env, NetConf, Version};

/// The netconf `type` of the main plugin.
pub const PLUGIN_TYPE: &str = "weft";
/// The netconf `type` of the chained egress guard.
pub const GUARD_TYPE: &str = "weft-guard";

/// Largest stdin accepted: a netconf with a prevResult is a few KiB; anything near this is
/// not a CNI request and must not make the plugin allocate without bound.
const MAX_STDIN: u64 = 4 << 20;

/// Runs one CNI invocation and returns the process exit status.
pub fn run() -> i32 {
    let mut stdin = Vec::new();
    let read = std::io::stdin().take(MAX_STDIN + 1).read_to_end(&mut stdin);
    let declared = requested_version(&stdin).unwrap_or_else(|| Version::LATEST.to_string());
    let outcome = match read {
        Ok(n) if n as u64 > MAX_STDIN => Err(CniError::decoding(format!(
            "stdin is larger than {MAX_STDIN} bytes"
        ))),
        Ok(_) => dispatch(&stdin),
        Err(e) => Err(CniError::io(format!("cannot read stdin: {e}"))),
    };
    match outcome {
        Ok(Some(reply)) => {
            println!("{reply}");
            0
        }
        Ok(None) => 0,
        Err(error) => {
            println!("{}", error.to_json(&declared));
            error.exit_code()
        }
    }
}

fn dispatch(stdin: &[u8]) -> Result<Option<String>, CniError> {
    let env = Env::from_lookup(|name| std::env::var(name).ok())?;
    if env.command == Command::Version {
        let requested = requested_version(stdin).unwrap_or_default();
        return Ok(Some(version_response(&requested).to_string()));
    }
    let conf = NetConf::from_slice_for(env.command, stdin)?;
    match conf.plugin_type.as_str() {
        PLUGIN_TYPE => crate::cni::handle(&env, &conf),
        GUARD_TYPE => weft_guard::plugin::handle(&env, &conf),
        other => Err(CniError::invalid_config(format!(
            "type {other:?} is not served by this binary (it serves {PLUGIN_TYPE:?} and {GUARD_TYPE:?})"
        ))),
    }
}

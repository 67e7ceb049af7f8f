//! CNI entry for plugin type `weft-guard`.

use weft_cni::{CniError, Command, Env, NetConf};

use crate::commands;

/// Handles one ADD, DEL, CHECK, STATUS or GC; returns what to print on stdout.
pub fn handle(env: &Env, conf: &NetConf) -> Result<Option<String>, CniError> {
    let outcome = match env.command {
        Command::Add => commands::add::run(env, conf),
        Command::Check => commands::check::run(env, conf),
        Command::Del => commands::del::run(env, conf),
        Command::Gc => commands::gc::run(conf),
        Command::Status => return commands::status::run(conf),
        // The binary answers VERSION before it reads a netconf.
        Command::Version => {
            return Err(CniError::internal("VERSION is answered before dispatch"));
        }
    };
    outcome.map_err(CniError::from)
}

//! The `weft` binary: a CNI plugin when `CNI_COMMAND` is set, otherwise a command-line tool
//! (`weft agent`, `weft lab ...`, `weft status`, `weft bench ...`).

fn main() -> std::process::ExitCode {
    if std::env::var_os("CNI_COMMAND").is_some() {
        return std::process::ExitCode::from(weft::plugin::run() as u8);
    }
    weft::cli::main()
}

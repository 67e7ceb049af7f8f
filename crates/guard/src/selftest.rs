//! Node-level self test for `weft status`: does this kernel have everything the fence
//! needs (nf_tables over netlink, the inet family, conntrack state, socket-owner matching,
//! reject, counters)? It installs the canonical fence in a throw-away network namespace
//! and reads it back, which exercises every one of them; nothing on the node is touched.

use weft_nft::NftSocket;

use crate::contract::Contract;
use crate::error::GuardError;
use crate::fence;
use crate::ruleset;
use crate::verify;

/// Installs and reads back a fence in a fresh, unnamed network namespace that disappears
/// with the thread. Needs CAP_SYS_ADMIN (to create the namespace).
pub fn kernel_features() -> Result<(), GuardError> {
    let contract = Contract {
        proxy_uid: 65533,
        allow_cidrs: vec![
            "192.0.2.0/24"
                .parse()
                .map_err(|_| GuardError::Other("test CIDR".into()))?,
            "2001:db8::/32"
                .parse()
                .map_err(|_| GuardError::Other("test CIDR".into()))?,
        ],
        contract_version: crate::CONTRACT_VERSION,
    };
    // A scratch namespace has only lo, so the frame fence's netdev table is not part of
    // this test; the stamping chain (fib, meta set) is.
    let spec = ruleset::fence(&contract, crate::frames::Stamp::random()?, &[])?;
    let worker = std::thread::spawn(move || -> Result<(), GuardError> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
            GuardError::Other(format!("cannot create a scratch network namespace: {e}"))
        })?;
        let sock = NftSocket::open().map_err(|e| GuardError::nft("open nftables", e))?;
        fence::install(&sock, &spec, None)?;
        let found = fence::read(&sock)?;
        let differences =
            verify::table_differences(found.as_ref(), &spec.inet.normalized(), contract.proxy_uid);
        if differences.is_empty() {
            Ok(())
        } else {
            Err(GuardError::Other(format!(
                "the kernel does not keep the fence as sent: {}",
                differences.join("; ")
            )))
        }
    });
    worker
        .join()
        .unwrap_or_else(|_| Err(GuardError::Other("self-test thread panicked".into())))
}

/// Where the kernel lists its active LSMs (securityfs).
pub const LSM_LIST: &str = "/sys/kernel/security/lsm";

/// How this node confines a fenced pod's processes beyond the fence itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    /// Whether the kernel lists the BPF LSM as active, or why that is unknown.
    pub bpf_lsm_listed: Result<bool, String>,
    /// Whether the kernel loads the guard's BPF LSM programs ([`crate::lsm::probe_load`]),
    /// when that was tried.
    pub programs: Option<Result<(), String>>,
}

impl Mode {
    /// Reads the active LSM list at `lsm_list` (normally [`LSM_LIST`]).
    pub fn of_node(lsm_list: &std::path::Path) -> Mode {
        let listed = match std::fs::read_to_string(lsm_list) {
            Ok(text) => Ok(text.trim().split(',').any(|name| name == "bpf")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "{} is missing: securityfs is not mounted (mount -t securityfs securityfs /sys/kernel/security)",
                lsm_list.display()
            )),
            Err(e) => Err(format!("{}: {e}", lsm_list.display())),
        };
        Mode {
            bpf_lsm_listed: listed,
            programs: None,
        }
    }

    /// Also tries to load (never attach) the guard's BPF LSM programs. Needs root.
    pub fn with_program_probe(mut self) -> Mode {
        self.programs = Some(crate::lsm::probe_load());
        self
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fail-closed: an opted-in pod is fenced only when its spec (read from the API server) or the netconf's podSecurityGuarantee rules out containers that keep CAP_NET_RAW or CAP_NET_ADMIN or can become the proxy UID; the frame fence drops AF_PACKET frames, not AF_XDP; this build loads no BPF LSM program ("
        )?;
        match &self.bpf_lsm_listed {
            Ok(true) => write!(f, "the kernel lists the BPF LSM as active")?,
            Ok(false) => write!(f, "the kernel does not list the BPF LSM as active")?,
            Err(why) => write!(f, "whether the kernel runs the BPF LSM is unknown: {why}")?,
        }
        match &self.programs {
            None => write!(f, ")"),
            Some(Ok(())) => write!(
                f,
                "; it loads the guard's BPF LSM programs, which this build does not attach yet)"
            ),
            Some(Err(why)) => write!(f, "; it refuses the guard's BPF LSM programs: {why})"),
        }
    }
}

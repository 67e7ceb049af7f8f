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
    let spec = ruleset::canonical(&contract)?;
    let worker = std::thread::spawn(move || -> Result<(), GuardError> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
            GuardError::Other(format!("cannot create a scratch network namespace: {e}"))
        })?;
        let sock = NftSocket::open().map_err(|e| GuardError::nft("open nftables", e))?;
        fence::install(&sock, &spec, None)?;
        let found = fence::read(&sock)?;
        let differences =
            verify::table_differences(found.as_ref(), &spec.normalized(), contract.proxy_uid);
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

//! The frame fence: raw frames (AF_PACKET) never reach netfilter's output hook, so the
//! inet fence cannot see them. They do pass the netdev **egress** hook of the device they
//! leave by, with or without `PACKET_QDISC_BYPASS` (the kernel runs that hook for bypass
//! sends too, while tc egress is skipped). There, a frame from a socket is told apart from
//! a packet the inet fence accepted by a per-pod secret the fence stamps on what it lets
//! through:
//!
//! ```text
//! table inet weft_guard {                      (next to chain output, the fence)
//!   chain stamp {
//!     type filter hook output priority -189; policy accept;
//!     oifname "lo" accept
//!     fib daddr type unicast meta mark set <secret.mark> meta priority set <secret.priority>
//!   }
//! }
//! table netdev weft_guard {
//!   chain egress {
//!     type filter hook egress devices = { <every device but lo> } priority -190; policy accept;
//!     meta mark <secret.mark> meta priority <secret.priority> meta mark set 0 meta priority set 0 accept
//!     meta skuid <proxy uid> accept
//!     counter meta skuid != <proxy uid> drop
//!   }
//! }
//! ```
//!
//! - Only what the output chain accepted reaches `stamp` (the fence drops the rest first),
//!   so a stamped packet passed the fence. A frame from a packet socket carries whatever
//!   mark and priority its owner set (CAP_NET_RAW allows any), so the stamp is 64 random
//!   bits chosen at ADD, readable only through nftables (CAP_NET_ADMIN).
//! - The stamp is removed before anything in the pod can see it: egress runs before taps
//!   and tc. Packets that are looped back to local listeners carry their metadata with
//!   them, so only remote unicast is stamped (`fib daddr type unicast`): multicast and
//!   broadcast copies are never stamped.
//! - The proxy's frames pass by their owner; frames with no user socket (the kernel's
//!   ARP, neighbour discovery, MLD) pass by the policy; every other frame from a socket is
//!   dropped, and the sender's `send` fails with ENOBUFS.
//! - The price: a fenced pod's packets leave with priority 0 (SO_PRIORITY does not reach
//!   the node's queues), and non-proxy multicast or broadcast is dropped even to an
//!   allowed CIDR.

use std::io;

use weft_nft::{
    Chain, ChainSpec, ChainType, CmpOp, Expr, Family, Hook, ImmediateData, MetaKey, Policy,
    Register, Rule, RuleBuilder, TableSpec, Verdict,
};

use crate::error::GuardError;
use crate::ruleset::TABLE;

/// The frame fence's table: same name as the inet fence, family netdev.
pub const FAMILY: Family = Family::Netdev;
/// Its chain.
pub const CHAIN: &str = "egress";
/// The netdev chain's priority (nothing may run before it on the same devices).
pub const PRIORITY: i32 = -190;
/// The inet table's stamping chain, and its priority: right after the fence.
pub const STAMP_CHAIN: &str = "stamp";
pub const STAMP_PRIORITY: i32 = -189;

// nf_tables netlink numbers this crate's model does not name (linux/netfilter/nf_tables.h).
const NFTA_META_KEY: u16 = 2;
const NFTA_META_SREG: u16 = 3;
const NFT_META_PRIORITY: u32 = 2;
const NFT_META_MARK: u32 = 3;
const NFTA_FIB_DREG: u16 = 1;
const NFTA_FIB_RESULT: u16 = 2;
const NFTA_FIB_FLAGS: u16 = 3;
const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
const NFTA_FIB_F_DADDR: u32 = 1 << 1;
const RTN_UNICAST: u32 = 1;

/// The per-pod secret the fence stamps on what it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub mark: u32,
    pub priority: u32,
}

impl Stamp {
    /// 64 bits from the kernel's random source. A zero half would match a packet nobody
    /// stamped, so it is drawn again.
    pub fn random() -> Result<Stamp, GuardError> {
        loop {
            let mut bytes = [0u8; 8];
            // SAFETY: the kernel writes at most `bytes.len()` bytes into the buffer.
            let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
            if n != bytes.len() as isize {
                return Err(GuardError::Other(format!(
                    "getrandom for the frame fence's stamp: {}",
                    io::Error::last_os_error()
                )));
            }
            let mark = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let priority = u32::from_ne_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            if mark != 0 && priority != 0 {
                return Ok(Stamp { mark, priority });
            }
        }
    }
}

/// The stamping chain of the inet table.
pub fn stamp_chain(stamp: Stamp) -> Result<ChainSpec, GuardError> {
    let inet = || RuleBuilder::new(Family::Inet);
    let stamping = inet()
        .expr(fib_daddr_type())
        .expr(cmp(CmpOp::Eq, RTN_UNICAST))
        .expr(load(stamp.mark))
        .expr(meta_set(NFT_META_MARK))
        .expr(load(stamp.priority))
        .expr(meta_set(NFT_META_PRIORITY));
    Ok(ChainSpec {
        chain: Chain::base(
            STAMP_CHAIN,
            ChainType::Filter,
            Hook::Output,
            STAMP_PRIORITY,
            Policy::Accept,
        ),
        rules: vec![
            build(inet().match_oifname("lo").accept())?,
            build(stamping)?,
        ],
    })
}

/// The netdev table that drops unstamped frames from sockets other than the proxy's on
/// `devices` (sorted, as the kernel reports them back).
pub fn table(stamp: Stamp, proxy_uid: u32, devices: &[String]) -> Result<TableSpec, GuardError> {
    let netdev = || RuleBuilder::new(FAMILY);
    let stamped = netdev()
        .expr(meta(MetaKey::Mark))
        .expr(cmp(CmpOp::Eq, stamp.mark))
        .expr(meta(MetaKey::Other(NFT_META_PRIORITY)))
        .expr(cmp(CmpOp::Eq, stamp.priority))
        .expr(load(0))
        .expr(meta_set(NFT_META_MARK))
        .expr(load(0))
        .expr(meta_set(NFT_META_PRIORITY))
        .accept();
    let others = netdev()
        .counter()
        .expr(meta(MetaKey::SkUid))
        .expr(cmp(CmpOp::Neq, proxy_uid))
        .verdict(Verdict::Drop);
    let mut devices = devices.to_vec();
    devices.sort();
    let mut chain = Chain::base(
        CHAIN,
        ChainType::Filter,
        Hook::Egress,
        PRIORITY,
        Policy::Accept,
    );
    if let Some(base) = chain.base.as_mut() {
        base.devices = devices;
    }
    Ok(TableSpec {
        table: weft_nft::Table::new(FAMILY, TABLE),
        chains: vec![ChainSpec {
            chain,
            rules: vec![
                build(stamped)?,
                build(netdev().match_skuid(proxy_uid).accept())?,
                build(others)?,
            ],
        }],
    })
}

/// The stamp an installed inet table carries, read from its stamping rule: CHECK compares
/// against the canonical fence made with it (the secret is not kept anywhere else).
pub fn stamp_of(inet: &TableSpec) -> Option<Stamp> {
    let chain = inet.chains.iter().find(|c| c.chain.name == STAMP_CHAIN)?;
    let values: Vec<u32> = chain
        .rules
        .get(1)?
        .exprs
        .iter()
        .filter_map(|e| match e {
            Expr::Immediate {
                data: ImmediateData::Value(v),
                ..
            } => Some(u32::from_ne_bytes(v.as_slice().try_into().ok()?)),
            _ => None,
        })
        .collect();
    match values.as_slice() {
        [mark, priority] => Some(Stamp {
            mark: *mark,
            priority: *priority,
        }),
        _ => None,
    }
}

/// The devices a frame can leave the calling thread's network namespace by: every one
/// but `lo`, from `/proc/thread-self/net/dev` (sysfs would show the mounter's namespace).
pub fn devices() -> Result<Vec<String>, GuardError> {
    let path = "/proc/thread-self/net/dev";
    let text =
        std::fs::read_to_string(path).map_err(|e| GuardError::Other(format!("{path}: {e}")))?;
    let mut names: Vec<String> = text
        .lines()
        .skip(2)
        .filter_map(|line| {
            line.split_once(':')
                .map(|(name, _)| name.trim().to_string())
        })
        .filter(|name| !name.is_empty() && name != "lo")
        .collect();
    names.sort();
    Ok(names)
}

fn build(builder: RuleBuilder) -> Result<Rule, GuardError> {
    builder
        .build()
        .map_err(|e| GuardError::nft("render the frame fence", e))
}

fn meta(key: MetaKey) -> Expr {
    Expr::Meta {
        key,
        dreg: Register::R1,
    }
}

fn cmp(op: CmpOp, value: u32) -> Expr {
    Expr::Cmp {
        op,
        sreg: Register::R1,
        data: value.to_ne_bytes().to_vec(),
    }
}

fn load(value: u32) -> Expr {
    Expr::Immediate {
        dreg: Register::R1,
        data: ImmediateData::Value(value.to_ne_bytes().to_vec()),
    }
}

/// `meta <key> set` from register 1. The model has no variant for it, so it is sent and
/// read back as raw attributes, in the order the kernel dumps them (key, then sreg).
fn meta_set(key: u32) -> Expr {
    Expr::Unknown {
        name: "meta".into(),
        raw: [attr_be32(NFTA_META_KEY, key), attr_be32(NFTA_META_SREG, 1)].concat(),
    }
}

/// `fib daddr type` into register 1, raw like [`meta_set`] (dreg, result, flags).
fn fib_daddr_type() -> Expr {
    Expr::Unknown {
        name: "fib".into(),
        raw: [
            attr_be32(NFTA_FIB_DREG, 1),
            attr_be32(NFTA_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE),
            attr_be32(NFTA_FIB_FLAGS, NFTA_FIB_F_DADDR),
        ]
        .concat(),
    }
}

/// One netlink attribute holding a big-endian u32.
fn attr_be32(ty: u16, value: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.extend_from_slice(&8u16.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&value.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_read_back_from_the_chain() {
        let stamp = Stamp {
            mark: 0x1122_3344,
            priority: 0x5566_7788,
        };
        let spec = TableSpec {
            table: weft_nft::Table::new(Family::Inet, TABLE),
            chains: vec![stamp_chain(stamp).unwrap()],
        };
        assert_eq!(stamp_of(&spec), Some(stamp));
        let random = Stamp::random().unwrap();
        assert!(random.mark != 0 && random.priority != 0);
        assert_ne!(Stamp::random().unwrap(), random, "64 random bits twice");
    }

    #[test]
    fn devices_are_sorted_into_the_chain() {
        let stamp = Stamp {
            mark: 1,
            priority: 2,
        };
        let spec = table(stamp, 1337, &["net1".into(), "eth0".into()]).unwrap();
        let base = spec.chains[0].chain.base.as_ref().unwrap();
        assert_eq!(base.devices, ["eth0", "net1"]);
        assert_eq!((base.hook, base.priority), (Hook::Egress, PRIORITY));
        assert_eq!(spec.chains[0].rules.len(), 3);
    }
}

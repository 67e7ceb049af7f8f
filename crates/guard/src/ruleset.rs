//! The canonical fence for a contract: the one table ADD installs and CHECK compares with.
//!
//! ```text
//! table inet weft_guard {
//!   chain output {
//!     type filter hook output priority -190; policy drop;
//!     oifname "lo" accept
//!     ct state established,related ct direction reply accept
//!     meta skuid <proxy uid> accept
//!     ip daddr <allowed> accept / ip6 daddr <allowed> accept     (one per CIDR)
//!     counter meta l4proto icmpv6 meta skuid != <proxy uid> reject with icmpx admin-prohibited
//!     icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert,
//!                   mld-listener-report, mld2-listener-report } accept (one rule each)
//!     counter meta l4proto tcp reject with tcp reset
//!     counter reject with icmpx admin-prohibited
//!   }
//! }
//! ```
//!
//! Why these choices:
//! - `inet`: one table fences IPv4 and IPv6 alike, whether or not the pod has an IPv6
//!   address yet.
//! - priority -190: after conntrack (-200), so `ct state` is known, and before mangle (-150)
//!   and filter (0), so no ordinary chain runs before the fence.
//! - reject instead of a silent drop: TCP gets a reset (ECONNREFUSED at once), every other
//!   protocol an ICMP error, and the sender's `send` fails with EPERM, so no client hangs.
//!   The `drop` policy is never reached; it is there so a table emptied by someone else
//!   still refuses.
//! - established flows, reply direction only: a server in the pod answers the connections
//!   the world opened, whatever its UID. The pod's own direction of a flow is the proxy's
//!   (its UID rule) or goes to an allowed CIDR: an established rule for that direction would
//!   let any UID repeat the 5-tuple of a proxy flow (a UDP port the proxy just closed, or
//!   shares with SO_REUSEADDR) and be taken for the proxy.
//! - ND and MLD: the kernel sends them (no socket owner) for the pod's own IPv6 to work.
//!   Only those: the rule before them refuses ICMPv6 from any user socket but the proxy's
//!   (a raw ICMPv6 socket could otherwise send anything typed as ND to any address). A
//!   packet without a user socket does not match `meta skuid`, so it reaches the ND rules.

use ipnet::IpNet;
use weft_nft::{
    icmpv6, ipproto, Chain, ChainSpec, ChainType, CtState, Family, Hook, IcmpxCode, Policy, Rule,
    RuleBuilder, Table, TableSpec,
};

use crate::contract::Contract;
use crate::error::GuardError;
use crate::frames::{self, Stamp};

/// The fence's table (family inet).
pub const TABLE: &str = "weft_guard";
/// Its only chain.
pub const CHAIN: &str = "output";
/// The base chain's priority: see the module docs.
pub const PRIORITY: i32 = -190;
/// The table's family.
pub const FAMILY: Family = Family::Inet;

/// ICMPv6 types every UID may send: neighbour discovery and multicast listener reports.
pub const ICMPV6_ALLOWED: [u8; 5] = [
    icmpv6::ND_ROUTER_SOLICIT,
    icmpv6::ND_NEIGHBOR_SOLICIT,
    icmpv6::ND_NEIGHBOR_ADVERT,
    icmpv6::MLD_LISTENER_REPORT,
    icmpv6::MLD2_LISTENER_REPORT,
];

/// `IP_CT_DIR_REPLY`: the direction of a flow's answers.
const IP_CT_DIR_REPLY: u8 = 1;

/// Index of the `meta skuid` rule in the chain (after loopback and conntrack).
pub const SKUID_RULE_INDEX: usize = 2;

/// Everything ADD installs in one transaction: the inet fence (with the stamping chain
/// of [`crate::frames`]) and, when the namespace has a device besides `lo`, the frame
/// fence on those devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceSpec {
    pub inet: TableSpec,
    pub frames: Option<TableSpec>,
}

impl FenceSpec {
    /// The tables in the order they are installed.
    pub fn tables(&self) -> impl Iterator<Item = &TableSpec> {
        std::iter::once(&self.inet).chain(self.frames.as_ref())
    }
}

/// The whole fence for `contract`, stamping with `stamp`, over `devices`.
pub fn fence(
    contract: &Contract,
    stamp: Stamp,
    devices: &[String],
) -> Result<FenceSpec, GuardError> {
    let mut inet = canonical(contract)?;
    inet.chains.push(frames::stamp_chain(stamp)?);
    let frames = if devices.is_empty() {
        None
    } else {
        Some(frames::table(stamp, contract.proxy_uid, devices)?)
    };
    Ok(FenceSpec { inet, frames })
}

/// The inet table's output chain for `contract` (without the stamping chain).
pub fn canonical(contract: &Contract) -> Result<TableSpec, GuardError> {
    let inet = || RuleBuilder::new(FAMILY);
    let mut rules = vec![
        build(inet().match_oifname("lo").accept())?,
        build(
            inet()
                .match_ct_state(&[CtState::Established, CtState::Related])
                .expr(weft_nft::Expr::Ct {
                    key: weft_nft::CtKey::Direction,
                    dreg: weft_nft::Register::R1,
                })
                .expr(weft_nft::Expr::Cmp {
                    op: weft_nft::CmpOp::Eq,
                    sreg: weft_nft::Register::R1,
                    data: vec![IP_CT_DIR_REPLY],
                })
                .accept(),
        )?,
        build(inet().match_skuid(contract.proxy_uid).accept())?,
    ];
    for net in &contract.allow_cidrs {
        rules.push(build(inet().match_daddr(*net).accept())?);
    }
    rules.push(build(
        inet()
            .counter()
            .match_l4proto(ipproto::ICMPV6)
            .expr(weft_nft::Expr::Meta {
                key: weft_nft::MetaKey::SkUid,
                dreg: weft_nft::Register::R1,
            })
            .expr(weft_nft::Expr::Cmp {
                op: weft_nft::CmpOp::Neq,
                sreg: weft_nft::Register::R1,
                data: contract.proxy_uid.to_ne_bytes().to_vec(),
            })
            .reject_icmpx(IcmpxCode::AdminProhibited),
    )?);
    for icmp_type in ICMPV6_ALLOWED {
        rules.push(build(inet().match_icmpv6_type(icmp_type).accept())?);
    }
    rules.push(build(
        inet()
            .counter()
            .match_l4proto(ipproto::TCP)
            .reject_tcp_reset(),
    )?);
    rules.push(build(
        inet().counter().reject_icmpx(IcmpxCode::AdminProhibited),
    )?);
    Ok(TableSpec {
        table: Table::new(FAMILY, TABLE),
        chains: vec![ChainSpec {
            chain: Chain::base(
                CHAIN,
                ChainType::Filter,
                Hook::Output,
                PRIORITY,
                Policy::Drop,
            ),
            rules,
        }],
    })
}

fn build(builder: RuleBuilder) -> Result<Rule, GuardError> {
    builder
        .build()
        .map_err(|e| GuardError::nft("render the fence", e))
}

/// The CIDRs as text, for state files and messages.
pub fn cidr_strings(cidrs: &[IpNet]) -> Vec<String> {
    cidrs.iter().map(IpNet::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_count_follows_the_cidrs() {
        let contract = Contract {
            proxy_uid: 1337,
            allow_cidrs: vec![
                "10.96.0.10/32".parse().unwrap(),
                "fd00::/8".parse().unwrap(),
            ],
            contract_version: 1,
        };
        let spec = canonical(&contract).unwrap();
        assert_eq!(spec.chains.len(), 1);
        assert_eq!(
            spec.chains[0].rules.len(),
            3 + 2 + 1 + ICMPV6_ALLOWED.len() + 2
        );
        let base = spec.chains[0].chain.base.as_ref().unwrap();
        assert_eq!(
            (base.hook, base.priority, base.policy),
            (Hook::Output, -190, Policy::Drop)
        );
        let skuid = RuleBuilder::new(FAMILY)
            .match_skuid(1337)
            .accept()
            .build()
            .unwrap();
        assert_eq!(spec.chains[0].rules[SKUID_RULE_INDEX], skuid);
    }
}

//! weft's nftables tables in the node: masquerade of pod traffic leaving the cluster, and
//! notrack for the overlay's UDP port (tunnel packets need no connection tracking, and
//! tracking them would fill the table with two entries per tunnelled flow).
//!
//! Masquerade is the kernel's (nftables + conntrack) rather than an eBPF NAT: pod traffic to
//! the world is a small share of a node's traffic, the kernel's implementation is correct in
//! every corner (ICMP errors, port clashes, timeouts), and the measured cost is acceptable.
//! docs/datapath.md has the argument.

use ipnet::IpNet;
use weft_nft::{
    priority, Chain, ChainSpec, ChainType, Family, Hook, NftSocket, Policy, RuleBuilder, TableSpec,
};

use weft_model::KindId;

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::reconcile::{Input, Reconciler};

/// Masquerade and overlay notrack: from the configuration alone.
pub struct Masquerade;

impl Reconciler<NodeEnv> for Masquerade {
    fn name(&self) -> &'static str {
        "masquerade"
    }

    fn reads(&self) -> Vec<KindId> {
        Vec::new()
    }

    fn reconcile(&mut self, env: &mut NodeEnv, _: &Input<'_>) -> anyhow::Result<Changes> {
        ensure(&env.settings.cluster.cluster_cidrs, env.settings.vxlan_port)
    }
}

pub const NAT_TABLE_V4: &str = "weft_nat";
pub const NAT_TABLE_V6: &str = "weft_nat6";
pub const RAW_TABLE: &str = "weft_raw";

/// The masquerade table for one family's cluster CIDR.
pub fn nat_spec(family: Family, name: &str, cluster: IpNet) -> anyhow::Result<TableSpec> {
    Ok(TableSpec {
        table: weft_nft::Table::new(family, name),
        chains: vec![ChainSpec {
            chain: Chain::base(
                "postrouting",
                ChainType::Nat,
                Hook::Postrouting,
                priority::SRCNAT,
                Policy::Accept,
            ),
            rules: vec![RuleBuilder::new(family)
                .match_saddr(cluster)
                .match_daddr_not(cluster)
                .masquerade()
                .build()?],
        }],
    })
}

/// The notrack table for the overlay's UDP port.
pub fn raw_spec(port: u16) -> anyhow::Result<TableSpec> {
    let chain = |name: &str, hook| -> anyhow::Result<ChainSpec> {
        Ok(ChainSpec {
            chain: Chain::base(name, ChainType::Filter, hook, priority::RAW, Policy::Accept),
            rules: vec![RuleBuilder::new(Family::Inet)
                .match_udp_dport(port)
                .notrack()
                .build()?],
        })
    };
    Ok(TableSpec {
        table: weft_nft::Table::new(Family::Inet, RAW_TABLE),
        chains: vec![
            chain("prerouting", Hook::Prerouting)?,
            chain("output", Hook::Output)?,
        ],
    })
}

/// The tables the plan calls for, and the (family, name) of those it says must not exist.
pub struct Desired {
    pub present: Vec<TableSpec>,
    pub absent: Vec<(Family, &'static str)>,
}

pub fn desired(cluster_cidrs: &[IpNet], vxlan_port: u16) -> anyhow::Result<Desired> {
    let mut want = vec![raw_spec(vxlan_port)?];
    let mut absent = Vec::new();
    let v4 = cluster_cidrs.iter().find(|c| matches!(c, IpNet::V4(_)));
    let v6 = cluster_cidrs.iter().find(|c| matches!(c, IpNet::V6(_)));
    match v4 {
        Some(c) => want.push(nat_spec(Family::Ip, NAT_TABLE_V4, *c)?),
        None => absent.push((Family::Ip, NAT_TABLE_V4)),
    }
    match v6 {
        Some(c) => want.push(nat_spec(Family::Ip6, NAT_TABLE_V6, *c)?),
        None => absent.push((Family::Ip6, NAT_TABLE_V6)),
    }
    Ok(Desired {
        present: want,
        absent,
    })
}

pub fn ensure(cluster_cidrs: &[IpNet], vxlan_port: u16) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    let sock = NftSocket::open()?;
    let Desired {
        present: want,
        absent,
    } = desired(cluster_cidrs, vxlan_port)?;
    for spec in want {
        let have = sock.read_table(spec.table.family, &spec.table.name)?;
        if have.as_ref() != Some(&spec.normalized()) {
            sock.replace_table(&spec)?;
            if have.is_some() {
                changes.updated += 1;
            } else {
                changes.added += 1;
            }
        }
    }
    for (family, name) in absent {
        if sock.read_table(family, name)?.is_some() {
            sock.delete_table_if_exists(family, name)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}

//! Base chains of every family, including device-bound ones, are listed with the hook,
//! priority, type, policy and devices the kernel holds.

mod common;

use common::*;
use weft_nft::{
    BaseChain, Chain, ChainEntry, ChainSpec, ChainType, Family, Hook, Policy, Table, TableSpec,
};
use weft_testkit::VethPair;

fn base(hook: Hook, priority: i32, devices: &[&str]) -> Option<BaseChain> {
    Some(BaseChain {
        hook,
        priority,
        chain_type: ChainType::Filter,
        policy: Policy::Accept,
        devices: devices.iter().map(|d| d.to_string()).collect(),
    })
}

fn entry(family: Family, table: &str, chain: &str, base: Option<BaseChain>) -> ChainEntry {
    ChainEntry {
        family,
        table: table.into(),
        chain: Chain {
            name: chain.into(),
            base,
        },
    }
}

#[test]
fn base_chains_of_every_family_are_listed() {
    let (ns, sock) = netns_with_socket("fa");
    for table in [
        "netdev weft_nd { chain in { type filter hook ingress device lo priority -500; }; }",
        "netdev weft_ne { chain out { type filter hook egress device lo priority 10; }; }",
        "arp weft_arp { chain out { type filter hook output priority 0; policy drop; }; }",
        "bridge weft_br { chain brfw { type filter hook forward priority 0; }; }",
        "inet weft_ing { chain in { type filter hook ingress device lo priority 0; }; }",
        "ip6 weft_six { chain post { type nat hook postrouting priority 100; }; }",
    ] {
        let mut args = vec!["add", "table"];
        args.extend(table.split_whitespace());
        nft(&ns, &args);
    }
    let mut listed = sock.list_chains(None).expect("list chains");
    let mut expected = vec![
        entry(
            Family::Netdev,
            "weft_nd",
            "in",
            base(Hook::Ingress, -500, &["lo"]),
        ),
        entry(
            Family::Netdev,
            "weft_ne",
            "out",
            base(Hook::Egress, 10, &["lo"]),
        ),
        entry(
            Family::Arp,
            "weft_arp",
            "out",
            Some(BaseChain {
                policy: Policy::Drop,
                ..base(Hook::Output, 0, &[]).expect("base")
            }),
        ),
        entry(
            Family::Bridge,
            "weft_br",
            "brfw",
            base(Hook::Forward, 0, &[]),
        ),
        entry(
            Family::Inet,
            "weft_ing",
            "in",
            base(Hook::Ingress, 0, &["lo"]),
        ),
        entry(
            Family::Ip6,
            "weft_six",
            "post",
            Some(BaseChain {
                chain_type: ChainType::Nat,
                ..base(Hook::Postrouting, 100, &[]).expect("base")
            }),
        ),
    ];
    let key = |c: &ChainEntry| (c.family, c.table.clone());
    listed.sort_by_key(key);
    expected.sort_by_key(key);
    assert_eq!(listed, expected);
}

#[test]
fn device_bound_chains_install_and_read_back() {
    let (ns, sock) = netns_with_socket("fd");
    let pair = VethPair::new(&ns, &[], &ns, &[]);
    let spec = TableSpec {
        table: Table::new(Family::Netdev, "weft_dev"),
        chains: vec![
            ChainSpec {
                chain: Chain {
                    name: "one".into(),
                    base: base(Hook::Ingress, 0, &["lo"]),
                },
                rules: vec![],
            },
            ChainSpec {
                chain: Chain {
                    name: "two".into(),
                    base: base(Hook::Ingress, 5, &[pair.a.as_str(), pair.b.as_str()]),
                },
                rules: vec![],
            },
        ],
    };
    sock.replace_table(&spec).expect("install netdev table");
    let mut read = sock
        .read_table(Family::Netdev, "weft_dev")
        .expect("read")
        .expect("exists");
    // The kernel keeps a chain's devices in its own order.
    for c in &mut read.chains {
        if let Some(b) = &mut c.chain.base {
            b.devices.sort();
        }
    }
    let mut want = spec.normalized();
    for c in &mut want.chains {
        if let Some(b) = &mut c.chain.base {
            b.devices.sort();
        }
    }
    assert_eq!(read, want);
}

//! Shared by the integration tests: the rulesets weft installs, built with the crate's
//! builders, and the `nft` oracle (used in tests only, never by the crate).

#![allow(dead_code)] // each test binary uses a different part of this module

use ipnet::IpNet;
use weft_nft::{
    icmpv6, ipproto, priority, Chain, ChainSpec, ChainType, CtState, Family, Hook, IcmpxCode,
    NftSocket, Policy, Rule, RuleBuilder, Table, TableSpec,
};
use weft_testkit::Netns;

pub const GUARD_TABLE: &str = "weft_guard";
pub const GUARD_PRIORITY: i32 = -190;

/// A namespace and a socket opened inside it.
pub fn netns_with_socket(tag: &str) -> (Netns, NftSocket) {
    weft_testkit::require_root();
    let ns = Netns::new(tag);
    let sock = NftSocket::open_in_netns(ns.path()).expect("open nft socket in the namespace");
    (ns, sock)
}

pub fn net(s: &str) -> IpNet {
    s.parse().expect("test CIDR")
}

fn rule(b: RuleBuilder) -> Rule {
    b.build().expect("test rule builds")
}

/// The egress guard's table (design: one rule per allowed CIDR, one per ICMPv6 type).
pub fn guard_spec(uid: u32, allowed: &[IpNet]) -> TableSpec {
    let inet = || RuleBuilder::new(Family::Inet);
    let mut rules = vec![
        rule(inet().match_oifname("lo").accept()),
        rule(
            inet()
                .match_ct_state(&[CtState::Established, CtState::Related])
                .accept(),
        ),
        rule(inet().match_skuid(uid).accept()),
    ];
    rules.extend(
        allowed
            .iter()
            .map(|n| rule(inet().match_daddr(*n).accept())),
    );
    for t in [
        icmpv6::ND_ROUTER_SOLICIT,
        icmpv6::ND_NEIGHBOR_SOLICIT,
        icmpv6::ND_NEIGHBOR_ADVERT,
        icmpv6::MLD_LISTENER_REPORT,
        icmpv6::MLD2_LISTENER_REPORT,
    ] {
        rules.push(rule(inet().match_icmpv6_type(t).accept()));
    }
    rules.push(rule(
        inet()
            .counter()
            .match_l4proto(ipproto::TCP)
            .reject_tcp_reset(),
    ));
    rules.push(rule(
        inet().counter().reject_icmpx(IcmpxCode::AdminProhibited),
    ));
    TableSpec {
        table: Table::new(Family::Inet, GUARD_TABLE),
        chains: vec![ChainSpec {
            chain: Chain::base(
                "output",
                ChainType::Filter,
                Hook::Output,
                GUARD_PRIORITY,
                Policy::Drop,
            ),
            rules,
        }],
    }
}

/// What `nft list table inet weft_guard` prints for [`guard_spec`] with
/// 10.96.0.10/32, 10.96.0.0/12, fd00:10:96::a/128 and fd00:10:96::/48.
pub fn guard_listing(uid: u32) -> Vec<String> {
    lines(&format!(
        r#"
        table inet weft_guard {{
          chain output {{
            type filter hook output priority -190; policy drop;
            oifname "lo" accept
            ct state established,related accept
            meta skuid {uid} accept
            ip daddr 10.96.0.10 accept
            ip daddr 10.96.0.0/12 accept
            ip6 daddr fd00:10:96::a accept
            ip6 daddr fd00:10:96::/48 accept
            icmpv6 type nd-router-solicit accept
            icmpv6 type nd-neighbor-solicit accept
            icmpv6 type nd-neighbor-advert accept
            icmpv6 type mld-listener-report accept
            icmpv6 type mld2-listener-report accept
            counter meta l4proto tcp reject with tcp reset
            counter reject with icmpx admin-prohibited
          }}
        }}"#
    ))
}

pub fn guard_cidrs() -> Vec<IpNet> {
    [
        "10.96.0.10/32",
        "10.96.0.0/12",
        "fd00:10:96::a/128",
        "fd00:10:96::/48",
    ]
    .into_iter()
    .map(net)
    .collect()
}

/// The node agent's masquerade table for one family (`ip` or `ip6`).
pub fn nat_spec(family: Family, name: &str, pod_cidr: IpNet) -> TableSpec {
    TableSpec {
        table: Table::new(family, name),
        chains: vec![ChainSpec {
            chain: Chain::base(
                "postrouting",
                ChainType::Nat,
                Hook::Postrouting,
                priority::SRCNAT,
                Policy::Accept,
            ),
            rules: vec![rule(
                RuleBuilder::new(family)
                    .match_saddr(pod_cidr)
                    .match_daddr_not(pod_cidr)
                    .masquerade(),
            )],
        }],
    }
}

/// The node agent's notrack table for the VXLAN port.
pub fn raw_spec(name: &str, vxlan_port: u16) -> TableSpec {
    let chain = |chain_name: &str, hook| ChainSpec {
        chain: Chain::base(
            chain_name,
            ChainType::Filter,
            hook,
            priority::RAW,
            Policy::Accept,
        ),
        rules: vec![rule(
            RuleBuilder::new(Family::Inet)
                .match_udp_dport(vxlan_port)
                .notrack(),
        )],
    };
    TableSpec {
        table: Table::new(Family::Inet, name),
        chains: vec![
            chain("prerouting", Hook::Prerouting),
            chain("output", Hook::Output),
        ],
    }
}

/// Runs the `nft` oracle inside the namespace and returns its stdout.
pub fn nft(ns: &Netns, args: &[&str]) -> String {
    weft_testkit::require_tool("nft");
    ns.exec_ok("nft", args).stdout
}

/// The meaningful lines of an nft listing: trimmed, whitespace collapsed, blank lines
/// dropped, and counter values removed (they change with traffic).
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|words| !words.is_empty())
        .map(|words| {
            let mut out: Vec<&str> = Vec::with_capacity(words.len());
            let mut i = 0;
            while i < words.len() {
                if words[i] == "counter"
                    && words.get(i + 1) == Some(&"packets")
                    && words.get(i + 3) == Some(&"bytes")
                {
                    out.push("counter");
                    i += 5;
                } else {
                    out.push(words[i]);
                    i += 1;
                }
            }
            out.join(" ")
        })
        .collect()
}

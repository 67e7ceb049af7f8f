//! Rules written by `nft` itself decode to exactly the expressions our builders
//! produce for the same statements: proof that the builders encode as nft does.

mod common;

use common::*;
use weft_nft::{icmpv6, ipproto, CtState, Family, IcmpxCode, Rule, RuleBuilder};

const SETUP: &str = r#"
table inet weft_t {
    chain c { }
    chain out { type filter hook output priority 0; }
    chain raw { type filter hook prerouting priority raw; }
}
table ip weft_t {
    chain c { }
    chain nat { type nat hook postrouting priority srcnat; }
}
table ip6 weft_t {
    chain c { }
    chain nat { type nat hook postrouting priority srcnat; }
}
"#;

struct Case {
    family: Family,
    chain: &'static str,
    statement: &'static str,
    built: RuleBuilder,
}

fn case(
    family: Family,
    chain: &'static str,
    statement: &'static str,
    build: impl FnOnce(RuleBuilder) -> RuleBuilder,
) -> Case {
    Case {
        family,
        chain,
        statement,
        built: build(RuleBuilder::new(family)),
    }
}

fn cases() -> Vec<Case> {
    use Family::{Inet, Ip, Ip6};
    vec![
        case(Inet, "c", "ip daddr 1.2.3.0/24 accept", |b| {
            b.match_daddr(net("1.2.3.0/24")).accept()
        }),
        case(Ip, "c", "ip daddr 1.2.3.0/24 accept", |b| {
            b.match_daddr(net("1.2.3.0/24")).accept()
        }),
        case(Inet, "c", "ip daddr 10.96.0.10 accept", |b| {
            b.match_daddr(net("10.96.0.10/32")).accept()
        }),
        case(Inet, "c", "ip daddr 10.96.0.0/12 accept", |b| {
            b.match_daddr(net("10.96.0.0/12")).accept()
        }),
        case(Ip, "c", "ip daddr 10.1.2.2/31 drop", |b| {
            b.match_daddr(net("10.1.2.2/31")).drop()
        }),
        case(Inet, "c", "ip6 daddr fd00:10:96::a accept", |b| {
            b.match_daddr(net("fd00:10:96::a/128")).accept()
        }),
        case(Inet, "c", "ip6 daddr fd00:10:96::/48 accept", |b| {
            b.match_daddr(net("fd00:10:96::/48")).accept()
        }),
        case(Ip6, "c", "ip6 daddr fd00::/60 accept", |b| {
            b.match_daddr(net("fd00::/60")).accept()
        }),
        case(
            Inet,
            "c",
            "ip saddr 1.2.3.4 ip daddr != 5.6.7.0/24 accept",
            |b| {
                b.match_saddr(net("1.2.3.4/32"))
                    .match_daddr_not(net("5.6.7.0/24"))
                    .accept()
            },
        ),
        case(Inet, "c", "oifname lo accept", |b| {
            b.match_oifname("lo").accept()
        }),
        case(Inet, "c", "ct state established,related accept", |b| {
            b.match_ct_state(&[CtState::Established, CtState::Related])
                .accept()
        }),
        case(Inet, "c", "meta skuid 1337 accept", |b| {
            b.match_skuid(1337).accept()
        }),
        case(Inet, "c", "meta l4proto udp accept", |b| {
            b.match_l4proto(ipproto::UDP).accept()
        }),
        case(Inet, "c", "icmpv6 type nd-neighbor-solicit accept", |b| {
            b.match_icmpv6_type(icmpv6::ND_NEIGHBOR_SOLICIT).accept()
        }),
        case(Ip6, "c", "icmpv6 type mld2-listener-report accept", |b| {
            b.match_icmpv6_type(icmpv6::MLD2_LISTENER_REPORT).accept()
        }),
        case(Inet, "c", "drop", |b| b.drop()),
        case(
            Inet,
            "out",
            "counter meta l4proto tcp reject with tcp reset",
            |b| b.counter().match_l4proto(ipproto::TCP).reject_tcp_reset(),
        ),
        case(Inet, "out", "reject with tcp reset", |b| {
            b.reject_tcp_reset()
        }),
        case(
            Inet,
            "out",
            "counter reject with icmpx admin-prohibited",
            |b| b.counter().reject_icmpx(IcmpxCode::AdminProhibited),
        ),
        case(Inet, "raw", "udp dport 8472 notrack", |b| {
            b.match_udp_dport(8472).notrack()
        }),
        case(
            Ip,
            "nat",
            "ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade",
            |b| {
                b.match_saddr(net("10.244.0.0/16"))
                    .match_daddr_not(net("10.244.0.0/16"))
                    .masquerade()
            },
        ),
        case(
            Ip6,
            "nat",
            "ip6 saddr fd00:10:244::/56 ip6 daddr != fd00:10:244::/56 masquerade",
            |b| {
                b.match_saddr(net("fd00:10:244::/56"))
                    .match_daddr_not(net("fd00:10:244::/56"))
                    .masquerade()
            },
        ),
    ]
}

#[test]
fn rules_written_by_nft_decode_to_our_builders_expressions() {
    let (ns, sock) = netns_with_socket("ne");
    let setup = ns
        .cmd("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("piped stdin")
                .write_all(SETUP.as_bytes())?;
            child.wait()
        })
        .expect("run nft -f -");
    assert!(setup.success(), "nft setup failed");

    let mut mismatches = Vec::new();
    for case in cases() {
        let mut args = vec!["add", "rule", case.family.name(), "weft_t", case.chain];
        args.extend(case.statement.split_whitespace());
        nft(&ns, &args);
        let rules = sock
            .list_rules(case.family, "weft_t", case.chain)
            .expect("list rules");
        let from_nft = rules.last().expect("the rule nft added").normalized();
        let ours: Rule = case.built.build().expect("builder");
        if from_nft != ours {
            mismatches.push(format!(
                "{} {}: {}\n  nft:  {:?}\n  ours: {:?}",
                case.family, case.chain, case.statement, from_nft.exprs, ours.exprs
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

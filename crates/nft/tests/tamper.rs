//! What someone else changes in the namespace is visible: an inserted rule, a dormant
//! flag, a foreign base chain on the same hook, expressions outside our vocabulary.

mod common;

use common::*;
use weft_nft::{Chain, ChainEntry, ChainType, Expr, Family, Hook, Policy, RuleBuilder};

#[test]
fn a_rule_inserted_by_nft_makes_readback_differ() {
    let (ns, sock) = netns_with_socket("ti");
    let spec = guard_spec(1337, &guard_cidrs());
    sock.replace_table(&spec).expect("install guard table");
    assert_eq!(
        sock.read_table(Family::Inet, GUARD_TABLE).expect("read"),
        Some(spec.normalized())
    );

    nft(
        &ns,
        &["insert", "rule", "inet", GUARD_TABLE, "output", "accept"],
    );

    let read = sock
        .read_table(Family::Inet, GUARD_TABLE)
        .expect("read")
        .expect("table exists");
    assert_ne!(read, spec.normalized());
    let accept_all = RuleBuilder::new(Family::Inet)
        .accept()
        .build()
        .expect("rule");
    assert_eq!(read.chains[0].rules[0], accept_all);
    assert_eq!(read.chains[0].rules.len(), spec.chains[0].rules.len() + 1);
}

#[test]
fn a_dormant_guard_table_reads_back_different() {
    let (ns, sock) = netns_with_socket("td");
    let spec = guard_spec(1337, &guard_cidrs());
    sock.replace_table(&spec).expect("install guard table");

    nft(
        &ns,
        &["add", "table", "inet", GUARD_TABLE, "{ flags dormant; }"],
    );

    let read = sock
        .read_table(Family::Inet, GUARD_TABLE)
        .expect("read")
        .expect("table exists");
    assert_eq!(read.table.flags, weft_nft::table_flags::DORMANT);
    assert_ne!(read, spec.normalized());
}

#[test]
fn a_foreign_base_chain_shows_up_with_its_hook_and_priority() {
    let (ns, sock) = netns_with_socket("tf");
    sock.replace_table(&guard_spec(1337, &guard_cidrs()))
        .expect("install guard table");

    nft(&ns, &["add", "table", "ip", "evil"]);
    nft(
        &ns,
        &[
            "add",
            "chain",
            "ip",
            "evil",
            "o",
            "{ type filter hook output priority -300; }",
        ],
    );
    nft(&ns, &["add", "chain", "ip", "evil", "helper"]);

    let chains = sock.list_chains(None).expect("list chains");
    let foreign = ChainEntry {
        family: Family::Ip,
        table: "evil".into(),
        chain: Chain::base("o", ChainType::Filter, Hook::Output, -300, Policy::Accept),
    };
    assert!(chains.contains(&foreign), "{chains:#?}");
    let helper = ChainEntry {
        family: Family::Ip,
        table: "evil".into(),
        chain: Chain::regular("helper"),
    };
    assert!(chains.contains(&helper), "{chains:#?}");
    assert_eq!(chains.len(), 3, "{chains:#?}");

    let output_hooks: Vec<&ChainEntry> = chains
        .iter()
        .filter(|c| {
            c.chain
                .base
                .as_ref()
                .is_some_and(|b| b.hook == Hook::Output)
        })
        .collect();
    assert_eq!(output_hooks.len(), 2);

    // Only the ip family was asked for: the inet guard chain is not in it.
    let ip_only = sock.list_chains(Some(Family::Ip)).expect("list ip chains");
    assert!(
        ip_only.iter().all(|c| c.family == Family::Ip),
        "{ip_only:#?}"
    );
    assert_eq!(ip_only.len(), 2);
}

#[test]
fn expressions_outside_the_model_read_back_as_unknown() {
    let (ns, sock) = netns_with_socket("tu");
    sock.replace_table(&guard_spec(1337, &[]))
        .expect("install guard table");
    nft(
        &ns,
        &[
            "insert",
            "rule",
            "inet",
            GUARD_TABLE,
            "output",
            "limit",
            "rate",
            "5/second",
            "accept",
        ],
    );
    nft(
        &ns,
        &[
            "insert",
            "rule",
            "inet",
            GUARD_TABLE,
            "output",
            "meta",
            "mark",
            "set",
            "0x1",
        ],
    );
    let rules = sock
        .list_rules(Family::Inet, GUARD_TABLE, "output")
        .expect("list rules");
    // `meta mark set` is a meta expression with a source register: not a load.
    assert!(
        matches!(&rules[0].exprs[..], [Expr::Immediate { .. }, Expr::Unknown { name, .. }] if name == "meta"),
        "{:?}",
        rules[0]
    );
    assert!(
        matches!(&rules[1].exprs[0], Expr::Unknown { name, .. } if name == "limit"),
        "{:?}",
        rules[1]
    );
}

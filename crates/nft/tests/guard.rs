//! The egress guard's table: installed over netlink, seen by `nft` exactly as
//! intended, and read back equal to what was sent.

mod common;

use common::*;
use weft_nft::{Family, Rule};

#[test]
fn guard_table_installs_and_reads_back_exactly() {
    let (ns, sock) = netns_with_socket("gd");
    let spec = guard_spec(1337, &guard_cidrs());
    sock.replace_table(&spec).expect("install guard table");

    let listed = lines(&nft(&ns, &["list", "table", "inet", GUARD_TABLE]));
    assert_eq!(listed, guard_listing(1337));

    let read = sock
        .read_table(Family::Inet, GUARD_TABLE)
        .expect("read guard table")
        .expect("guard table exists");
    assert_eq!(read, spec.normalized());

    let rules = sock
        .list_rules(Family::Inet, GUARD_TABLE, "output")
        .expect("list guard rules");
    assert!(
        rules.iter().all(|r| r.handle.is_some()),
        "handles are reported"
    );
    let without_state: Vec<Rule> = rules.iter().map(Rule::normalized).collect();
    assert_eq!(without_state, spec.chains[0].rules);
}

#[test]
fn listing_chains_reports_the_guard_base_chain() {
    let (_ns, sock) = netns_with_socket("gc");
    let spec = guard_spec(1337, &guard_cidrs());
    sock.replace_table(&spec).expect("install guard table");

    let chains = sock.list_chains(None).expect("list chains");
    assert_eq!(chains.len(), 1, "{chains:?}");
    assert_eq!(chains[0].family, Family::Inet);
    assert_eq!(chains[0].table, GUARD_TABLE);
    assert_eq!(chains[0].chain, spec.chains[0].chain);

    let tables = sock.list_tables().expect("list tables");
    assert_eq!(tables, vec![spec.table.clone()]);
}

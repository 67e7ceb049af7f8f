//! Batches are transactions: replacing is idempotent, and a batch with one bad message
//! changes nothing and names that message.

mod common;

use common::*;
use weft_nft::{replace_batch, Batch, Chain, Error, Family, RuleBuilder, Table};

#[test]
fn replacing_twice_leaves_exactly_one_table() {
    let (ns, sock) = netns_with_socket("ar");
    let first = guard_spec(1337, &guard_cidrs());
    let second = guard_spec(4242, &[net("10.96.0.10/32")]);
    sock.replace_table(&first).expect("first replace");
    sock.replace_table(&second).expect("second replace");

    let tables = sock.list_tables().expect("list tables");
    assert_eq!(tables, vec![second.table.clone()]);
    let chains = sock.list_chains(None).expect("list chains");
    assert_eq!(chains.len(), 1, "{chains:?}");
    assert_eq!(
        sock.read_table(Family::Inet, GUARD_TABLE).expect("read"),
        Some(second.normalized())
    );
    let listing = lines(&nft(&ns, &["list", "tables"]));
    assert_eq!(listing, vec!["table inet weft_guard".to_string()]);
}

#[test]
fn a_batch_with_one_bad_message_changes_nothing_and_names_it() {
    let (_ns, sock) = netns_with_socket("ab");
    let installed = guard_spec(1337, &guard_cidrs());
    sock.replace_table(&installed).expect("install guard table");

    // A full replacement whose last message adds a rule to a chain that does not
    // exist: the delete and re-add before it must be rolled back too.
    let replacement = guard_spec(4242, &[]);
    let mut batch = replace_batch(&replacement);
    let accept = RuleBuilder::new(Family::Inet)
        .accept()
        .build()
        .expect("rule");
    batch.add_rule(Family::Inet, GUARD_TABLE, "missing", &accept);
    let err = batch.send(&sock).expect_err("batch must be refused");

    match &err {
        Error::Batch { failures } => {
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert_eq!(failures[0].what, "add rule inet weft_guard missing #1");
            assert_eq!(failures[0].errno, libc::ENOENT);
        }
        other => panic!("expected a batch error, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("add rule inet weft_guard missing #1: No such file or directory"),
        "{err}"
    );
    assert_eq!(
        sock.read_table(Family::Inet, GUARD_TABLE).expect("read"),
        Some(installed.normalized()),
        "the earlier table is intact"
    );
}

#[test]
fn a_base_chain_on_a_hook_the_family_lacks_is_refused_before_sending() {
    let (_ns, sock) = netns_with_socket("ah");
    let mut batch = Batch::new();
    batch
        .add_table(&Table::new(Family::Ip, "weft_bad"))
        .add_chain(
            Family::Ip,
            "weft_bad",
            &Chain::base(
                "c",
                weft_nft::ChainType::Filter,
                weft_nft::Hook::Egress,
                0,
                weft_nft::Policy::Accept,
            ),
        );
    let err = batch.send(&sock).expect_err("egress is not an ip hook");
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("add chain ip weft_bad c:"),
        "{err}"
    );
    assert_eq!(
        sock.list_tables().expect("list"),
        vec![],
        "nothing was sent"
    );
}

#[test]
fn kernel_refusals_carry_errno_per_message() {
    let (_ns, sock) = netns_with_socket("ae");
    let mut batch = Batch::new();
    batch.delete_table(Family::Inet, "weft_absent");
    let err = batch
        .send(&sock)
        .expect_err("deleting a missing table fails");
    assert_eq!(err.errno(), Some(libc::ENOENT));
    assert!(
        err.to_string().contains("delete table inet weft_absent"),
        "{err}"
    );
}

#[test]
fn deleting_is_idempotent() {
    let (_ns, sock) = netns_with_socket("ad");
    sock.replace_table(&guard_spec(1337, &[])).expect("install");
    sock.delete_table_if_exists(Family::Inet, GUARD_TABLE)
        .expect("delete existing");
    sock.delete_table_if_exists(Family::Inet, GUARD_TABLE)
        .expect("delete missing");
    assert_eq!(sock.list_tables().expect("list"), vec![]);
    assert_eq!(
        sock.read_table(Family::Inet, GUARD_TABLE).expect("read"),
        None
    );
    assert_eq!(
        sock.list_rules(Family::Inet, GUARD_TABLE, "output")
            .expect("listing a missing chain"),
        vec![],
        "a missing table lists as no rules"
    );

    // NFT_MSG_DESTROYTABLE (kernel 6.3+) is the other way to say the same.
    sock.replace_table(&guard_spec(1337, &[])).expect("install");
    let mut batch = Batch::new();
    batch
        .destroy_table(Family::Inet, GUARD_TABLE)
        .destroy_table(Family::Inet, GUARD_TABLE);
    batch.send(&sock).expect("destroy twice in one batch");
    assert_eq!(sock.list_tables().expect("list"), vec![]);
}

#[test]
fn flushing_keeps_chains_and_drops_rules() {
    let (_ns, sock) = netns_with_socket("af");
    let spec = raw_spec("weft_raw", 8472);
    sock.replace_table(&spec).expect("install");
    let mut batch = Batch::new();
    batch.flush_chain(Family::Inet, "weft_raw", "output");
    batch.send(&sock).expect("flush chain");
    let read = sock
        .read_table(Family::Inet, "weft_raw")
        .expect("read")
        .expect("exists");
    let counts: Vec<(String, usize)> = read
        .chains
        .iter()
        .map(|c| (c.chain.name.clone(), c.rules.len()))
        .collect();
    assert_eq!(counts, vec![("output".into(), 0), ("prerouting".into(), 1)]);

    let mut batch = Batch::new();
    batch.flush_table(Family::Inet, "weft_raw");
    batch.send(&sock).expect("flush table");
    let read = sock
        .read_table(Family::Inet, "weft_raw")
        .expect("read")
        .expect("exists");
    assert_eq!(read.chains.len(), 2);
    assert!(read.chains.iter().all(|c| c.rules.is_empty()));
}

#[test]
fn a_batch_larger_than_the_default_socket_buffers_applies() {
    let (_ns, sock) = netns_with_socket("al");
    // Thousands of messages: the datagram exceeds the default send buffer and the
    // acknowledgements the default receive buffer.
    let cidrs: Vec<_> = (0..3000u32)
        .map(|i| net(&format!("10.{}.{}.0/24", i / 256, i % 256)))
        .collect();
    let spec = guard_spec(1337, &cidrs);
    sock.replace_table(&spec).expect("install a large table");
    let read = sock.read_table(Family::Inet, GUARD_TABLE).expect("read");
    assert_eq!(read, Some(spec.normalized()));
}

//! Proving a fence is in force, shared by ADD (right after installing) and CHECK.
//!
//! 1. The table read back equals the canonical rendering exactly (`==` on the decoded
//!    model, not substrings of a listing): an extra accept, an emptied chain, a dormant
//!    table or another UID all differ, and the message names the difference.
//!    The same holds for the frame fence ([`crate::frames`]), whose device list must be
//!    every device of the namespace but `lo`.
//! 2. Nothing runs before it on the output path: no other base chain on the output hook
//!    (inet, ip, ip6) at the same or an earlier priority, none on the netdev egress hook of
//!    a fenced device at or before the frame fence, no legacy iptables `raw` table
//!    (priority -300) in the namespace, and no BPF netfilter program on LOCAL_OUT at the
//!    same or an earlier priority anywhere on the node.
//! 3. The active probe ([`crate::probe`]) is refused: a UDP datagram, and (CHECK only, see
//!    [`Probe`]) a raw frame sent with `PACKET_QDISC_BYPASS` by a UID holding CAP_NET_RAW.

use weft_nft::{ChainEntry, ChainSpec, Family, Hook, NftSocket, Rule, TableSpec};

use crate::bpf_links;
use crate::describe;
use crate::error::GuardError;
use crate::fence;
use crate::frames;
use crate::netns::Entered;
use crate::probe;
use crate::ruleset::{FenceSpec, FAMILY, PRIORITY, SKUID_RULE_INDEX, TABLE};

/// How much of the active probe to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The datagram only (ADD). Closing an AF_PACKET socket waits for an RCU grace period
    /// (`synchronize_net` in packet_release, 10-20 ms on a busy node), too much for every
    /// pod start; the frame fence is proven by its exact readback there.
    Datagram,
    /// The datagram and, with a frame fence, a raw frame with `PACKET_QDISC_BYPASS` (CHECK):
    /// this also proves the kernel runs netdev egress for bypass sends.
    DatagramAndFrame,
}

/// Everything that keeps `expected` from being proven in force; empty when it is. The
/// calling thread is inside the pod's namespace (`_inside`), where `sock` was opened.
pub fn prove(
    _inside: &Entered<'_>,
    sock: &NftSocket,
    expected: &FenceSpec,
    proxy_uid: u32,
    ifname: &str,
    probe: Probe,
) -> Result<Vec<String>, GuardError> {
    let found = fence::read(sock)?;
    let mut differences = table_differences(found.as_ref(), &expected.inet.normalized(), proxy_uid);
    let found_frames = fence::read_frames(sock)?.map(|mut t| {
        // The kernel reports a chain's devices in its own order.
        for c in &mut t.chains {
            if let Some(base) = c.chain.base.as_mut() {
                base.devices.sort();
            }
        }
        t
    });
    match (&expected.frames, found_frames.as_ref()) {
        (Some(want), found) => {
            differences.extend(table_differences(found, &want.normalized(), proxy_uid))
        }
        (None, Some(_)) => differences.push(format!(
            "table {} {TABLE} exists, but the namespace has no device besides lo",
            frames::FAMILY
        )),
        (None, None) => {}
    }
    let chains = sock
        .list_chains(None)
        .map_err(|e| GuardError::nft("list chains", e))?;
    differences.extend(chains_ahead(&chains));
    if let Some(want) = &expected.frames {
        differences.extend(frame_chains_ahead(&chains, want));
    }
    differences.extend(legacy_tables_ahead());
    differences.extend(bpf_links_ahead());
    // Only a fence that reads back right is probed: a wrong one already fails, and a probe
    // that is not refused would really leave the pod.
    if differences.is_empty() {
        let frames = probe == Probe::DatagramAndFrame && expected.frames.is_some();
        if let Err(why) = probe::require_refused(ifname, proxy_uid, frames) {
            differences.push(why);
        }
    }
    Ok(differences)
}

/// How the installed table differs from the canonical one (both normalised).
pub fn table_differences(
    found: Option<&TableSpec>,
    expected: &TableSpec,
    proxy_uid: u32,
) -> Vec<String> {
    let family = expected.table.family;
    let Some(found) = found else {
        return vec![format!("table {family} {TABLE} is missing")];
    };
    if found == expected {
        return Vec::new();
    }
    let mut out = Vec::new();
    if found.table.flags != expected.table.flags {
        if found.table.flags & weft_nft::table_flags::DORMANT != 0 {
            out.push(format!(
                "table {family} {TABLE} is dormant (flags {:#x}): its chains are unhooked and enforce nothing",
                found.table.flags
            ));
        } else {
            out.push(format!(
                "table {family} {TABLE} has flags {:#x}, expected {:#x}",
                found.table.flags, expected.table.flags
            ));
        }
    }
    for want in &expected.chains {
        match found
            .chains
            .iter()
            .find(|c| c.chain.name == want.chain.name)
        {
            None => out.push(format!(
                "chain {} is missing from table {family} {TABLE}",
                want.chain.name
            )),
            Some(have) => {
                if have.chain != want.chain {
                    out.push(format!(
                        "expected {}, found {}",
                        describe::chain(&want.chain),
                        describe::chain(&have.chain)
                    ));
                }
                out.extend(rule_differences(want, have, proxy_uid));
            }
        }
    }
    for extra in found
        .chains
        .iter()
        .filter(|c| !expected.chains.iter().any(|w| w.chain.name == c.chain.name))
    {
        out.push(format!(
            "unexpected {} with {} rules in table {family} {TABLE}",
            describe::chain(&extra.chain),
            extra.rules.len()
        ));
    }
    if out.is_empty() {
        out.push(format!(
            "table {family} {TABLE} differs from the canonical fence"
        ));
    }
    out
}

fn rule_differences(want: &ChainSpec, have: &ChainSpec, proxy_uid: u32) -> Vec<String> {
    let chain = &want.chain.name;
    if want.rules == have.rules {
        return Vec::new();
    }
    if have.rules.is_empty() {
        return vec![format!(
            "chain {chain} has no rules (flushed); the fence has {}",
            want.rules.len()
        )];
    }
    if let Some(found_uid) = only_uid_differs(&want.rules, &have.rules) {
        return vec![format!(
            "chain {chain}: the fence exempts uid {found_uid}, the pod's proxy uid is {proxy_uid}"
        )];
    }
    let mut out = Vec::new();
    for edit in diff(&want.rules, &have.rules) {
        match edit {
            Edit::Extra { at, rule } => {
                let before = want
                    .rules
                    .get(at_expected_position(&want.rules, &have.rules, at))
                    .map(|r| format!(", ahead of `{}`", describe::rule(r)))
                    .unwrap_or_default();
                out.push(format!(
                    "chain {chain}: rule #{} `{}` is not part of the fence{before}",
                    at + 1,
                    describe::rule(rule)
                ));
            }
            Edit::Missing { at, rule } => out.push(format!(
                "chain {chain}: fence rule #{} `{}` is missing",
                at + 1,
                describe::rule(rule)
            )),
        }
    }
    out
}

/// The proxy UID of `have` when it differs from `want` in the UID compared by `meta skuid`
/// and nowhere else (the fence names the proxy UID in more than one rule).
fn only_uid_differs(want: &[Rule], have: &[Rule]) -> Option<u32> {
    if want.len() != have.len() {
        return None;
    }
    let differing: Vec<usize> = (0..want.len())
        .filter(|i| want.get(*i) != have.get(*i))
        .collect();
    if !differing.contains(&SKUID_RULE_INDEX) {
        return None;
    }
    let same_but_uid = differing
        .iter()
        .all(|i| matches!((want.get(*i), have.get(*i)), (Some(w), Some(h)) if without_uid(w) == without_uid(h)));
    if !same_but_uid {
        return None;
    }
    skuid_of(want.get(SKUID_RULE_INDEX)?)?;
    skuid_of(have.get(SKUID_RULE_INDEX)?)
}

/// The rule with the value of every `meta skuid` comparison blanked.
fn without_uid(rule: &Rule) -> Vec<weft_nft::Expr> {
    use weft_nft::{Expr, MetaKey};
    let mut out = Vec::with_capacity(rule.exprs.len());
    let mut after_skuid = false;
    for e in &rule.exprs {
        match e {
            Expr::Cmp { op, sreg, .. } if after_skuid => out.push(Expr::Cmp {
                op: *op,
                sreg: *sreg,
                data: Vec::new(),
            }),
            other => out.push(other.clone()),
        }
        after_skuid = matches!(
            e,
            Expr::Meta {
                key: MetaKey::SkUid,
                ..
            }
        );
    }
    out
}

/// The UID of a `meta skuid <uid> accept` rule.
fn skuid_of(rule: &Rule) -> Option<u32> {
    use weft_nft::{CmpOp, Expr, ImmediateData, MetaKey, Verdict};
    match rule.exprs.as_slice() {
        [Expr::Meta {
            key: MetaKey::SkUid,
            ..
        }, Expr::Cmp {
            op: CmpOp::Eq,
            data,
            ..
        }, Expr::Immediate {
            data: ImmediateData::Verdict(Verdict::Accept),
            ..
        }] => {
            let bytes: [u8; 4] = data.as_slice().try_into().ok()?;
            Some(u32::from_ne_bytes(bytes))
        }
        _ => None,
    }
}

/// Where in the fence's own order an extra rule at `have[at]` sits: the index of the
/// first fence rule after it.
fn at_expected_position(want: &[Rule], have: &[Rule], at: usize) -> usize {
    have.iter()
        .skip(at + 1)
        .find_map(|rule| want.iter().position(|w| w == rule))
        .unwrap_or(want.len())
}

#[derive(Debug)]
enum Edit<'a> {
    /// `rule` is at position `at` of the installed chain but not in the fence.
    Extra { at: usize, rule: &'a Rule },
    /// Fence rule `at` is not installed.
    Missing { at: usize, rule: &'a Rule },
}

/// A minimal edit script from `want` to `have` (longest common subsequence; chains are a
/// few dozen rules, so the quadratic table is small).
fn diff<'a>(want: &'a [Rule], have: &'a [Rule]) -> Vec<Edit<'a>> {
    let (n, m) = (want.len(), have.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if want[i] == have[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut edits = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && want[i] == have[j] {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            edits.push(Edit::Extra {
                at: j,
                rule: &have[j],
            });
            j += 1;
        } else {
            edits.push(Edit::Missing {
                at: i,
                rule: &want[i],
            });
            i += 1;
        }
    }
    edits
}

/// Base chains other than the fence on the output hook that run at its priority or earlier.
pub fn chains_ahead(chains: &[ChainEntry]) -> Vec<String> {
    chains
        .iter()
        .filter(|c| matches!(c.family, Family::Inet | Family::Ip | Family::Ip6))
        .filter(|c| !(c.family == FAMILY && c.table == TABLE))
        .filter_map(|c| {
            let base = c.chain.base.as_ref()?;
            (base.hook == Hook::Output && base.priority <= PRIORITY).then(|| {
                format!(
                    "chain {} {} {} hooks output at priority {}, at or before the fence's {PRIORITY}: it runs first",
                    c.family, c.table, c.chain.name, base.priority
                )
            })
        })
        .collect()
}

/// Netdev chains other than the frame fence on the egress hook of a fenced device that run
/// at its priority or earlier: they see frames first and could re-stamp them.
pub fn frame_chains_ahead(chains: &[ChainEntry], frames: &TableSpec) -> Vec<String> {
    let fenced: Vec<&String> = frames
        .chains
        .iter()
        .filter_map(|c| c.chain.base.as_ref())
        .flat_map(|b| b.devices.iter())
        .collect();
    chains
        .iter()
        .filter(|c| c.family == Family::Netdev && c.table != TABLE)
        .filter_map(|c| {
            let base = c.chain.base.as_ref()?;
            let shared = base.devices.iter().any(|d| fenced.contains(&d));
            (base.hook == Hook::Egress && base.priority <= frames::PRIORITY && shared).then(|| {
                format!(
                    "chain netdev {} {} hooks egress of {} at priority {}, at or before the frame fence's {}: it runs first",
                    c.table,
                    c.chain.name,
                    base.devices.join(","),
                    base.priority,
                    frames::PRIORITY
                )
            })
        })
        .collect()
}

/// Legacy (x_tables) iptables tables registered in the calling thread's namespace that run
/// before the fence: only `raw` (-300) does. They are invisible to nftables.
fn legacy_tables_ahead() -> Vec<String> {
    let mut out = Vec::new();
    for (file, family) in [
        ("ip_tables_names", "iptables"),
        ("ip6_tables_names", "ip6tables"),
    ] {
        let path = format!("/proc/thread-self/net/{file}");
        match std::fs::read_to_string(&path) {
            Ok(names) => {
                if names.lines().any(|n| n.trim() == "raw") {
                    out.push(format!(
                        "a legacy {family} raw table (priority -300) is registered in the namespace: it runs before the fence"
                    ));
                }
            }
            // No x_tables support in this kernel: nothing can be registered.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.push(format!(
                "cannot read {path} to look for legacy iptables tables: {e}"
            )),
        }
    }
    out
}

/// BPF netfilter links that run on LOCAL_OUT at the fence's priority or earlier.
fn bpf_links_ahead() -> Vec<String> {
    match bpf_links::netfilter_links() {
        Ok(links) => bpf_links::ahead_of_output(&links, PRIORITY)
            .into_iter()
            .map(|l| format!("{l} runs at or before the fence's priority {PRIORITY} (node-wide: the kernel does not say which namespace it is in)"))
            .collect(),
        Err(e) => vec![format!("cannot list BPF netfilter links: {e}")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Contract;
    use crate::ruleset::canonical;
    use weft_nft::{Chain, ChainType, Policy, RuleBuilder};

    fn spec(uid: u32) -> TableSpec {
        canonical(&Contract {
            proxy_uid: uid,
            allow_cidrs: vec!["10.96.0.10/32".parse().unwrap()],
            contract_version: 1,
        })
        .unwrap()
        .normalized()
    }

    fn one(diffs: Vec<String>) -> String {
        assert_eq!(diffs.len(), 1, "{diffs:#?}");
        diffs.into_iter().next().unwrap_or_default()
    }

    #[test]
    fn identical_tables_have_no_difference() {
        assert!(table_differences(Some(&spec(1)), &spec(1), 1).is_empty());
    }

    #[test]
    fn missing_dormant_and_flushed() {
        assert_eq!(
            one(table_differences(None, &spec(1), 1)),
            "table inet weft_guard is missing"
        );
        let mut dormant = spec(1);
        dormant.table.flags = weft_nft::table_flags::DORMANT;
        assert!(one(table_differences(Some(&dormant), &spec(1), 1)).contains("dormant"));
        let mut flushed = spec(1);
        flushed.chains[0].rules.clear();
        assert!(one(table_differences(Some(&flushed), &spec(1), 1)).contains("no rules (flushed)"));
    }

    #[test]
    fn another_uid_is_named() {
        let message = one(table_differences(Some(&spec(1000)), &spec(1337), 1337));
        assert!(message.contains("exempts uid 1000"), "{message}");
        assert!(message.contains("proxy uid is 1337"), "{message}");
    }

    #[test]
    fn an_inserted_accept_is_named_with_what_it_precedes() {
        let mut tampered = spec(1);
        let accept = RuleBuilder::new(Family::Inet).accept().build().unwrap();
        tampered.chains[0].rules.insert(0, accept);
        let message = one(table_differences(Some(&tampered), &spec(1), 1));
        assert!(
            message.contains("rule #1 `accept` is not part of the fence"),
            "{message}"
        );
        assert!(
            message.contains("ahead of `oifname \"lo\" accept`"),
            "{message}"
        );
    }

    #[test]
    fn a_removed_rule_and_a_changed_chain_are_named() {
        let mut tampered = spec(1);
        tampered.chains[0].rules.pop();
        tampered.chains[0].chain =
            Chain::base("output", ChainType::Filter, Hook::Output, 0, Policy::Accept);
        let diffs = table_differences(Some(&tampered), &spec(1), 1);
        assert_eq!(diffs.len(), 2, "{diffs:#?}");
        assert!(
            diffs[0].contains("priority 0; policy accept"),
            "{}",
            diffs[0]
        );
        assert!(
            diffs[1].contains("reject with icmpx admin-prohibited` is missing"),
            "{}",
            diffs[1]
        );
    }

    #[test]
    fn foreign_output_chains_ahead_are_reported() {
        let entry = |family, table: &str, name: &str, hook, priority| ChainEntry {
            family,
            table: table.into(),
            chain: Chain::base(name, ChainType::Filter, hook, priority, Policy::Accept),
        };
        let chains = [
            entry(Family::Inet, TABLE, "output", Hook::Output, PRIORITY),
            entry(Family::Ip, "evil", "o", Hook::Output, -300),
            entry(Family::Ip6, "same", "o", Hook::Output, PRIORITY),
            entry(Family::Inet, "late", "o", Hook::Output, 0),
            entry(Family::Ip, "in", "i", Hook::Input, -300),
            entry(Family::Netdev, "dev", "e", Hook::Egress, -500),
        ];
        let found = chains_ahead(&chains);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].contains("chain ip evil o hooks output at priority -300"),
            "{}",
            found[0]
        );
        assert!(found[1].contains("ip6 same o"), "{}", found[1]);
    }
}

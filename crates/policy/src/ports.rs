//! Protocol and port selections turned into LPM prefixes: "any protocol", "every port of a
//! protocol", and port ranges (`endPort`) cut into prefix-aligned blocks. Overlapping
//! selections are resolved here, at compile time, so the longest match in the trie always
//! carries the verdict that decides for every port under it.

use crate::table::{Verdict, ALLOW_PREFIX_ANY_PORT, ALLOW_PREFIX_ANY_PROTOCOL};

/// What a rule's ports allow, already resolved to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortSel {
    AnyProtocol,
    AnyPort(u8),
    Range(u8, u16, u16),
}

/// One trie prefix over protocol and port: `protocol` `None` covers every protocol;
/// otherwise the first `port_bits` bits of `port` are fixed (0: every port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortBlock {
    pub protocol: Option<u8>,
    pub port: u16,
    pub port_bits: u8,
}

impl PortBlock {
    /// The allow key prefix length this block needs.
    pub fn prefixlen(&self) -> u32 {
        match self.protocol {
            None => ALLOW_PREFIX_ANY_PROTOCOL,
            Some(_) => ALLOW_PREFIX_ANY_PORT + u32::from(self.port_bits),
        }
    }

    pub fn contains(&self, other: &PortBlock) -> bool {
        match (self.protocol, other.protocol) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => {
                a == b
                    && self.port_bits <= other.port_bits
                    && high_bits(self.port, self.port_bits) == high_bits(other.port, self.port_bits)
            }
        }
    }
}

fn high_bits(port: u16, bits: u8) -> u16 {
    if bits == 0 {
        0
    } else {
        port & (u16::MAX << (16 - bits))
    }
}

impl PortSel {
    pub fn blocks(&self) -> Vec<PortBlock> {
        match *self {
            PortSel::AnyProtocol => vec![PortBlock {
                protocol: None,
                port: 0,
                port_bits: 0,
            }],
            PortSel::AnyPort(p) => vec![PortBlock {
                protocol: Some(p),
                port: 0,
                port_bits: 0,
            }],
            PortSel::Range(p, lo, hi) => range_blocks(lo, hi)
                .into_iter()
                .map(|(port, port_bits)| PortBlock {
                    protocol: Some(p),
                    port,
                    port_bits,
                })
                .collect(),
        }
    }
}

/// `lo..=hi` as the fewest prefix-aligned blocks (start, fixed bits): at most 30.
pub fn range_blocks(lo: u16, hi: u16) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    if lo > hi {
        return out;
    }
    let (mut start, end) = (u32::from(lo), u32::from(hi));
    while start <= end {
        let mut size_log = 0u32;
        while size_log < 16 {
            let next = size_log + 1;
            let size = 1u32 << next;
            if start % size != 0 || start + size - 1 > end {
                break;
            }
            size_log = next;
        }
        out.push((start as u16, (16 - size_log) as u8));
        start += 1 << size_log;
    }
    out
}

/// The trie entries for one peer: each distinct block carries the best verdict of every
/// selection covering it, and a block that adds nothing to the block containing it is left
/// out. Returned in block order.
pub fn resolve(sels: &[(PortSel, Verdict)]) -> Vec<(PortBlock, Verdict)> {
    let mut all: Vec<(PortBlock, Verdict)> = Vec::new();
    for (sel, v) in sels {
        for b in sel.blocks() {
            all.push((b, *v));
        }
    }
    let mut blocks: Vec<PortBlock> = all.iter().map(|(b, _)| *b).collect();
    blocks.sort();
    blocks.dedup();
    let best = |b: &PortBlock| -> Option<Verdict> {
        all.iter()
            .filter(|(c, _)| c.contains(b))
            .map(|(_, v)| *v)
            .reduce(Verdict::best)
    };
    let resolved: Vec<(PortBlock, Verdict)> = blocks
        .iter()
        .filter_map(|b| best(b).map(|v| (*b, v)))
        .collect();
    resolved
        .iter()
        .filter(|(b, v)| {
            let parent = resolved
                .iter()
                .filter(|(c, _)| c != b && c.contains(b))
                .max_by_key(|(c, _)| c.prefixlen());
            parent.is_none_or(|(_, pv)| pv != v)
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Direction;
    use proptest::prelude::*;

    #[test]
    fn ranges_become_aligned_blocks() {
        assert_eq!(range_blocks(80, 80), vec![(80, 16)]);
        assert_eq!(range_blocks(0, 65535), vec![(0, 0)]);
        assert_eq!(range_blocks(80, 81), vec![(80, 15)]);
        assert_eq!(range_blocks(81, 82), vec![(81, 16), (82, 16)]);
        assert_eq!(range_blocks(1, 65535).len(), 16);
        assert_eq!(range_blocks(65535, 65535), vec![(65535, 16)]);
        assert!(range_blocks(2, 1).is_empty());
    }

    proptest! {
        #[test]
        fn blocks_cover_exactly_the_range(lo in any::<u16>(), len in 0u32..3000) {
            let hi = (u32::from(lo) + len).min(65535) as u16;
            let blocks = range_blocks(lo, hi);
            prop_assert!(blocks.len() <= 30);
            let covered = |p: u16| blocks.iter().filter(|(s, bits)| high_bits(p, *bits) == *s).count();
            for p in lo.saturating_sub(3)..=hi.saturating_add(3) {
                prop_assert_eq!(covered(p), usize::from(lo <= p && p <= hi), "port {}", p);
            }
        }
    }

    #[test]
    fn overlaps_keep_the_deciding_verdict_on_the_longest_match() {
        let early = Verdict::allow(1, Direction::Ingress, 0);
        let late = Verdict::allow(2, Direction::Ingress, 0);
        let out = resolve(&[
            (PortSel::Range(6, 80, 80), late),
            (PortSel::AnyPort(6), early),
        ]);
        // The exact port adds nothing over "every tcp port" with the better verdict.
        assert_eq!(
            out,
            vec![(
                PortBlock {
                    protocol: Some(6),
                    port: 0,
                    port_bits: 0
                },
                early
            )]
        );
        let out = resolve(&[
            (PortSel::Range(6, 80, 80), early),
            (PortSel::AnyPort(6), late),
        ]);
        assert_eq!(out.len(), 2);
    }
}

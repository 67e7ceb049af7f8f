//! Which addresses of a range may be handed out, and in what order.

use std::net::IpAddr;

use crate::addr::{self, Family};
use crate::config::{Range, RangeSet};

impl Range {
    /// True when `a` lies between `range_start` and `range_end` (inclusive).
    pub fn contains(&self, a: IpAddr) -> bool {
        Family::of(a) == self.family()
            && addr::to_u128(self.range_start) <= addr::to_u128(a)
            && addr::to_u128(a) <= addr::to_u128(self.range_end)
    }

    /// Addresses that are never a pod's even inside the range: the network address (for
    /// IPv6 also the subnet-router anycast address), the IPv4 broadcast address and the
    /// gateway.
    pub fn is_excluded(&self, a: IpAddr) -> bool {
        a == self.subnet.network()
            || (self.family() == Family::V4 && a == self.subnet.broadcast())
            || Some(a) == self.gateway
    }

    /// True when `a` may be handed to a pod from this range.
    pub fn is_usable(&self, a: IpAddr) -> bool {
        self.contains(a) && !self.is_excluded(a)
    }

    /// How many addresses of the range may be handed out (saturating for huge IPv6 ranges).
    pub fn usable_count(&self) -> u128 {
        let (s, e) = (
            addr::to_u128(self.range_start),
            addr::to_u128(self.range_end),
        );
        if s > e {
            return 0;
        }
        let mut excluded = vec![self.subnet.network()];
        if self.family() == Family::V4 {
            excluded.push(self.subnet.broadcast());
        }
        excluded.extend(self.gateway);
        excluded.sort();
        excluded.dedup();
        let inside = excluded.iter().filter(|a| self.contains(**a)).count() as u128;
        (e - s).saturating_add(1).saturating_sub(inside)
    }
}

impl RangeSet {
    /// The range of this set that `a` may be handed out from, if any.
    pub fn usable_range_for(&self, a: IpAddr) -> Option<&Range> {
        self.ranges.iter().find(|r| r.is_usable(a))
    }

    /// The range of this set whose bounds hold `a`, usable or not.
    pub fn range_for(&self, a: IpAddr) -> Option<&Range> {
        self.ranges.iter().find(|r| r.contains(a))
    }

    pub fn usable_count(&self) -> u128 {
        self.ranges
            .iter()
            .fold(0u128, |n, r| n.saturating_add(r.usable_count()))
    }

    /// Every usable address of the set exactly once, in round-robin order: starting right
    /// after `cursor` when the cursor lies in one of the ranges (else at the first range's
    /// start), running through the ranges in order and wrapping around.
    pub fn candidates_after(&self, cursor: Option<IpAddr>) -> impl Iterator<Item = IpAddr> + '_ {
        RingIter::new(self, cursor).filter(move |a| self.usable_range_for(*a).is_some())
    }
}

/// Walks the concatenation of a set's ranges as a ring.
struct RingIter<'a> {
    ranges: &'a [Range],
    range_index: usize,
    next: u128,
    /// Addresses left to visit; saturates for ranges larger than `u128`, which is fine
    /// because callers stop at the first free address long before.
    remaining: u128,
}

impl<'a> RingIter<'a> {
    fn new(set: &'a RangeSet, cursor: Option<IpAddr>) -> RingIter<'a> {
        let ranges = set.ranges.as_slice();
        let remaining = ranges.iter().fold(0u128, |n, r| {
            let (s, e) = (addr::to_u128(r.range_start), addr::to_u128(r.range_end));
            n.saturating_add(e.saturating_sub(s).saturating_add(1))
        });
        let mut it = RingIter {
            ranges,
            range_index: 0,
            next: ranges
                .first()
                .map(|r| addr::to_u128(r.range_start))
                .unwrap_or(0),
            remaining,
        };
        let cursor_position =
            cursor.and_then(|c| ranges.iter().position(|r| r.contains(c)).map(|i| (i, c)));
        if let Some((i, c)) = cursor_position {
            it.range_index = i;
            it.next = addr::to_u128(c);
            it.advance();
        }
        it
    }

    fn advance(&mut self) {
        let Some(r) = self.ranges.get(self.range_index) else {
            return;
        };
        if self.next < addr::to_u128(r.range_end) {
            self.next += 1;
        } else {
            self.range_index = (self.range_index + 1) % self.ranges.len().max(1);
            if let Some(r) = self.ranges.get(self.range_index) {
                self.next = addr::to_u128(r.range_start);
            }
        }
    }
}

impl Iterator for RingIter<'_> {
    type Item = IpAddr;

    fn next(&mut self) -> Option<IpAddr> {
        if self.remaining == 0 {
            return None;
        }
        let r = self.ranges.get(self.range_index)?;
        let a = addr::from_u128(r.family(), self.next)?;
        self.remaining -= 1;
        self.advance();
        Some(a)
    }
}

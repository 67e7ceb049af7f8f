//! Rule builders that produce the exact expression sequences `nft` generates for the
//! same statements (checked against rules `nft` itself installs), including the
//! implicit protocol dependencies nft adds: `meta nfproto` before an address match in
//! an inet table, `meta l4proto` before a port or ICMPv6 type match.

use crate::error::Error;
use crate::expr::{
    CmpOp, CtKey, Expr, IcmpxCode, ImmediateData, MetaKey, PayloadBase, Register, Reject,
};
use crate::model::{Family, Rule, Verdict};
use ipnet::IpNet;

/// Conntrack states for [`RuleBuilder::match_ct_state`] (`NF_CT_STATE_*` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtState {
    Invalid,
    Established,
    Related,
    New,
    Untracked,
}

impl CtState {
    pub fn bit(self) -> u32 {
        match self {
            CtState::Invalid => 1,
            CtState::Established => 1 << 1,
            CtState::Related => 1 << 2,
            CtState::New => 1 << 3,
            CtState::Untracked => 1 << 6,
        }
    }
}

/// IP protocol numbers used by the builders.
pub mod ipproto {
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// ICMPv6 types `nft` names (for [`RuleBuilder::match_icmpv6_type`]).
pub mod icmpv6 {
    pub const MLD_LISTENER_QUERY: u8 = 130;
    pub const MLD_LISTENER_REPORT: u8 = 131;
    pub const MLD_LISTENER_DONE: u8 = 132;
    pub const ND_ROUTER_SOLICIT: u8 = 133;
    pub const ND_ROUTER_ADVERT: u8 = 134;
    pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
    pub const ND_NEIGHBOR_ADVERT: u8 = 136;
    pub const MLD2_LISTENER_REPORT: u8 = 143;
}

// NFPROTO_* values compared by `meta nfproto`.
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// Interface names are compared as the kernel's IFNAMSIZ-byte, NUL-padded buffers.
const IFNAMSIZ: usize = 16;

/// Builds one rule for a table of `family`. Statements are appended in call order;
/// a statement that cannot be expressed is reported by [`RuleBuilder::build`].
#[derive(Debug, Clone)]
pub struct RuleBuilder {
    family: Family,
    exprs: Vec<Expr>,
    nfproto: Option<u8>,
    l4proto: Option<u8>,
    error: Option<String>,
}

enum Direction {
    Source,
    Destination,
}

impl RuleBuilder {
    pub fn new(family: Family) -> RuleBuilder {
        RuleBuilder {
            family,
            exprs: Vec::new(),
            nfproto: None,
            l4proto: None,
            error: None,
        }
    }

    /// The rule, or the first statement that could not be expressed.
    pub fn build(self) -> Result<Rule, Error> {
        match self.error {
            Some(reason) => Err(Error::Invalid {
                what: format!("build rule for a {} table", self.family),
                reason,
            }),
            None => Ok(Rule::new(self.exprs)),
        }
    }

    /// Appends a raw expression.
    pub fn expr(mut self, e: Expr) -> Self {
        self.exprs.push(e);
        self
    }

    /// `oifname "<name>"` (exact, not a wildcard).
    pub fn match_oifname(mut self, name: &str) -> Self {
        if name.is_empty() || name.len() >= IFNAMSIZ || name.contains('\0') {
            return self.fail(format!(
                "interface name {name:?} is not 1-15 bytes without NUL"
            ));
        }
        let mut data = name.as_bytes().to_vec();
        data.resize(IFNAMSIZ, 0);
        self.load_meta(MetaKey::OifName);
        self.cmp(CmpOp::Eq, data)
    }

    /// `ct state <a>,<b>,...`: any of the states.
    pub fn match_ct_state(mut self, states: &[CtState]) -> Self {
        if states.is_empty() {
            return self.fail("ct state match without any state".into());
        }
        let mask = states.iter().fold(0, |m, s| m | s.bit());
        self.exprs.push(Expr::Ct {
            key: CtKey::State,
            dreg: Register::R1,
        });
        self.exprs.push(Expr::Bitwise {
            sreg: Register::R1,
            dreg: Register::R1,
            mask: mask.to_ne_bytes().to_vec(),
            xor: vec![0; 4],
        });
        self.cmp(CmpOp::Neq, vec![0; 4])
    }

    /// `meta skuid <uid>`: the owner of the sending socket.
    pub fn match_skuid(mut self, uid: u32) -> Self {
        self.load_meta(MetaKey::SkUid);
        self.cmp(CmpOp::Eq, uid.to_ne_bytes().to_vec())
    }

    /// `ip saddr <net>` / `ip6 saddr <net>`.
    pub fn match_saddr(self, net: IpNet) -> Self {
        self.match_addr(Direction::Source, net, CmpOp::Eq)
    }

    /// `ip daddr <net>` / `ip6 daddr <net>`.
    pub fn match_daddr(self, net: IpNet) -> Self {
        self.match_addr(Direction::Destination, net, CmpOp::Eq)
    }

    /// `ip daddr != <net>` / `ip6 daddr != <net>`.
    pub fn match_daddr_not(self, net: IpNet) -> Self {
        self.match_addr(Direction::Destination, net, CmpOp::Neq)
    }

    /// `meta l4proto <proto>`.
    pub fn match_l4proto(mut self, proto: u8) -> Self {
        if self.l4proto.is_some_and(|p| p != proto) {
            return self.fail(format!("conflicting layer 4 protocol {proto}"));
        }
        self.load_meta(MetaKey::L4Proto);
        self.l4proto = Some(proto);
        self.cmp(CmpOp::Eq, vec![proto])
    }

    /// `udp dport <port>`.
    pub fn match_udp_dport(mut self, port: u16) -> Self {
        self = self.need_l4proto(ipproto::UDP);
        self.exprs.push(Expr::Payload {
            base: PayloadBase::Transport,
            offset: 2,
            len: 2,
            dreg: Register::R1,
        });
        self.cmp(CmpOp::Eq, port.to_be_bytes().to_vec())
    }

    /// `icmpv6 type <type>` (ip6 and inet tables).
    pub fn match_icmpv6_type(mut self, icmp_type: u8) -> Self {
        match self.family {
            Family::Ip6 => {}
            Family::Inet => self = self.need_nfproto(NFPROTO_IPV6),
            other => return self.fail(format!("icmpv6 type in a {other} table")),
        }
        self = self.need_l4proto(ipproto::ICMPV6);
        self.exprs.push(Expr::Payload {
            base: PayloadBase::Transport,
            offset: 0,
            len: 1,
            dreg: Register::R1,
        });
        self.cmp(CmpOp::Eq, vec![icmp_type])
    }

    pub fn accept(self) -> Self {
        self.verdict(Verdict::Accept)
    }

    pub fn drop(self) -> Self {
        self.verdict(Verdict::Drop)
    }

    pub fn verdict(mut self, verdict: Verdict) -> Self {
        self.exprs.push(Expr::Immediate {
            dreg: Register::VERDICT,
            data: ImmediateData::Verdict(verdict),
        });
        self
    }

    /// `reject with tcp reset`; nft requires TCP to be matched, and adds
    /// `meta l4proto tcp` itself when it is not.
    pub fn reject_tcp_reset(mut self) -> Self {
        self = self.need_l4proto(ipproto::TCP);
        self.expr(Expr::Reject(Reject::TcpReset))
    }

    /// `reject with icmpx <code>`.
    pub fn reject_icmpx(self, code: IcmpxCode) -> Self {
        self.expr(Expr::Reject(Reject::IcmpxUnreach(code as u8)))
    }

    pub fn masquerade(self) -> Self {
        self.expr(Expr::Masq { flags: 0 })
    }

    pub fn notrack(self) -> Self {
        self.expr(Expr::Notrack)
    }

    pub fn counter(self) -> Self {
        self.expr(Expr::Counter {
            packets: 0,
            bytes: 0,
        })
    }

    fn match_addr(mut self, direction: Direction, net: IpNet, op: CmpOp) -> Self {
        let (nfproto, offset, addr) = match (net, direction) {
            (IpNet::V4(n), Direction::Source) => (NFPROTO_IPV4, 12, n.network().octets().to_vec()),
            (IpNet::V4(n), Direction::Destination) => {
                (NFPROTO_IPV4, 16, n.network().octets().to_vec())
            }
            (IpNet::V6(n), Direction::Source) => (NFPROTO_IPV6, 8, n.network().octets().to_vec()),
            (IpNet::V6(n), Direction::Destination) => {
                (NFPROTO_IPV6, 24, n.network().octets().to_vec())
            }
        };
        match (self.family, nfproto) {
            (Family::Inet, _) => self = self.need_nfproto(nfproto),
            (Family::Ip, NFPROTO_IPV4) | (Family::Ip6, NFPROTO_IPV6) => {}
            (family, _) => return self.fail(format!("address {net} in a {family} table")),
        }
        let full_bytes = addr.len();
        let prefix = usize::from(net.prefix_len());
        // nft's encodings: a full-length match compares the whole address; a
        // byte-aligned prefix loads and compares only its bytes; any other prefix
        // (including /0) masks the whole address first.
        let (len, mask) = if prefix == full_bytes * 8 {
            (full_bytes, None)
        } else if prefix % 8 == 0 && prefix > 0 {
            (prefix / 8, None)
        } else {
            (full_bytes, Some(prefix_mask(prefix, full_bytes)))
        };
        self.exprs.push(Expr::Payload {
            base: PayloadBase::Network,
            offset,
            len: len as u32,
            dreg: Register::R1,
        });
        if let Some(mask) = mask {
            self.exprs.push(Expr::Bitwise {
                sreg: Register::R1,
                dreg: Register::R1,
                xor: vec![0; mask.len()],
                mask,
            });
        }
        let data = addr.into_iter().take(len).collect();
        self.cmp(op, data)
    }

    fn need_nfproto(mut self, nfproto: u8) -> Self {
        match self.nfproto {
            Some(p) if p == nfproto => self,
            Some(_) => self.fail("conflicting address families in one rule".into()),
            None => {
                self.nfproto = Some(nfproto);
                self.load_meta(MetaKey::NfProto);
                self.cmp(CmpOp::Eq, vec![nfproto])
            }
        }
    }

    fn need_l4proto(self, proto: u8) -> Self {
        match self.l4proto {
            Some(p) if p == proto => self,
            _ => self.match_l4proto(proto),
        }
    }

    fn load_meta(&mut self, key: MetaKey) {
        self.exprs.push(Expr::Meta {
            key,
            dreg: Register::R1,
        });
    }

    fn cmp(mut self, op: CmpOp, data: Vec<u8>) -> Self {
        self.exprs.push(Expr::Cmp {
            op,
            sreg: Register::R1,
            data,
        });
        self
    }

    fn fail(mut self, reason: String) -> Self {
        self.error.get_or_insert(reason);
        self
    }
}

fn prefix_mask(prefix: usize, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|i| {
            let bits = prefix.saturating_sub(i * 8).min(8);
            // bits is 0..=8; shifting a u16 keeps 8 representable.
            (0xff00u16 >> bits) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exprs(b: RuleBuilder) -> Vec<Expr> {
        b.build().unwrap().exprs
    }

    fn cmp(op: CmpOp, data: &[u8]) -> Expr {
        Expr::Cmp {
            op,
            sreg: Register::R1,
            data: data.to_vec(),
        }
    }

    fn meta(key: MetaKey) -> Expr {
        Expr::Meta {
            key,
            dreg: Register::R1,
        }
    }

    fn payload(base: PayloadBase, offset: u32, len: u32) -> Expr {
        Expr::Payload {
            base,
            offset,
            len,
            dreg: Register::R1,
        }
    }

    #[test]
    fn prefix_masks() {
        assert_eq!(prefix_mask(12, 4), vec![0xff, 0xf0, 0, 0]);
        assert_eq!(prefix_mask(0, 4), vec![0, 0, 0, 0]);
        assert_eq!(prefix_mask(31, 4), vec![0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(prefix_mask(60, 16)[7], 0xf0);
    }

    #[test]
    fn inet_address_match_adds_nfproto_once() {
        let got = exprs(
            RuleBuilder::new(Family::Inet)
                .match_saddr("1.2.3.4/32".parse().unwrap())
                .match_daddr_not("10.244.0.0/16".parse().unwrap()),
        );
        assert_eq!(
            got,
            vec![
                meta(MetaKey::NfProto),
                cmp(CmpOp::Eq, &[2]),
                payload(PayloadBase::Network, 12, 4),
                cmp(CmpOp::Eq, &[1, 2, 3, 4]),
                payload(PayloadBase::Network, 16, 2),
                cmp(CmpOp::Neq, &[10, 244]),
            ]
        );
    }

    #[test]
    fn ip_table_address_match_has_no_dependency_and_masks_odd_prefixes() {
        let got = exprs(RuleBuilder::new(Family::Ip).match_daddr("10.96.0.0/12".parse().unwrap()));
        assert_eq!(
            got,
            vec![
                payload(PayloadBase::Network, 16, 4),
                Expr::Bitwise {
                    sreg: Register::R1,
                    dreg: Register::R1,
                    mask: vec![0xff, 0xf0, 0, 0],
                    xor: vec![0; 4],
                },
                cmp(CmpOp::Eq, &[10, 96, 0, 0]),
            ]
        );
    }

    #[test]
    fn wrong_family_statements_fail_at_build() {
        let e = RuleBuilder::new(Family::Ip)
            .match_daddr("fd00::/8".parse().unwrap())
            .accept()
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("fd00::/8"), "{e}");
        assert!(RuleBuilder::new(Family::Inet)
            .match_ct_state(&[])
            .build()
            .is_err());
        assert!(RuleBuilder::new(Family::Ip)
            .match_icmpv6_type(133)
            .build()
            .is_err());
        assert!(RuleBuilder::new(Family::Inet)
            .match_oifname("a-very-long-name0")
            .build()
            .is_err());
        assert!(RuleBuilder::new(Family::Inet)
            .match_l4proto(ipproto::UDP)
            .reject_tcp_reset()
            .build()
            .is_err());
    }

    #[test]
    fn explicit_l4proto_satisfies_the_reject_dependency() {
        let got = exprs(
            RuleBuilder::new(Family::Inet)
                .counter()
                .match_l4proto(ipproto::TCP)
                .reject_tcp_reset(),
        );
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], Expr::Reject(Reject::TcpReset));
    }
}

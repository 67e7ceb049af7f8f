//! nf_tables attributes from kernel dumps back into the typed model.
//!
//! Normalizations (each is something the kernel adds or rewrites, never a semantic
//! difference):
//! - attribute padding and `*_PAD` attributes are skipped;
//! - string attributes lose trailing NULs (device names are dumped without one);
//! - rule and chain handles, use counts, chain flags/ids/counters and userdata
//!   (comments) are not part of the model; the rule handle is kept in `Rule::handle`;
//! - a reject of type TCP reset has no ICMP code in the dump ([`Reject::TcpReset`]);
//! - a bitwise without an `op` attribute is the mask/xor form (older kernels omit it);
//! - a masq without flags reads as `flags: 0`.
//!
//! An expression whose name or attributes do not fit the model exactly becomes
//! [`Expr::Unknown`] with its raw data, so it can never compare equal to a modelled one.

use crate::expr::{CmpOp, CtKey, Expr, ImmediateData, MetaKey, PayloadBase, Register, Reject};
use crate::model::{
    BaseChain, Chain, ChainEntry, ChainType, Family, Hook, Policy, Rule, Table, Verdict,
};
use crate::wire::attr::{self, attrs, DecodeError};
use crate::wire::consts::*;

pub(crate) fn family(nfproto: u8) -> Result<Family, DecodeError> {
    Family::from_nfproto(nfproto)
        .ok_or_else(|| DecodeError::new(format!("unknown family {nfproto}")))
}

pub(crate) fn table(nfproto: u8, data: &[u8]) -> Result<Table, DecodeError> {
    let mut name = None;
    let mut flags = 0;
    for a in attrs(data) {
        let (ty, payload) = a?;
        match ty {
            NFTA_TABLE_NAME => name = Some(attr::string(payload)?),
            NFTA_TABLE_FLAGS => flags = attr::be32(payload)?,
            _ => {}
        }
    }
    Ok(Table {
        family: family(nfproto)?,
        name: name.ok_or_else(|| DecodeError::new("table without a name"))?,
        flags,
    })
}

pub(crate) fn chain(nfproto: u8, data: &[u8]) -> Result<ChainEntry, DecodeError> {
    let family = family(nfproto)?;
    let (mut table, mut name, mut hook, mut policy, mut chain_type) =
        (None, None, None, None, None);
    for a in attrs(data) {
        let (ty, payload) = a?;
        match ty {
            NFTA_CHAIN_TABLE => table = Some(attr::string(payload)?),
            NFTA_CHAIN_NAME => name = Some(attr::string(payload)?),
            NFTA_CHAIN_HOOK => hook = Some(payload),
            NFTA_CHAIN_POLICY => policy = Some(attr::be32(payload)?),
            NFTA_CHAIN_TYPE => chain_type = Some(attr::string(payload)?),
            _ => {}
        }
    }
    let name = name.ok_or_else(|| DecodeError::new("chain without a name"))?;
    let table = table.ok_or_else(|| DecodeError::new(format!("chain {name} without a table")))?;
    let base = match hook {
        None => None,
        Some(hook) => {
            let (hook, priority, devices) = hook_attrs(family, hook)?;
            let policy = match policy.map(|p| p as i32) {
                Some(NF_ACCEPT) => Policy::Accept,
                Some(NF_DROP) => Policy::Drop,
                other => {
                    return Err(DecodeError::new(format!(
                        "base chain {name} with policy {other:?}"
                    )))
                }
            };
            let type_name = chain_type.unwrap_or_default();
            let chain_type = ChainType::from_name(&type_name).ok_or_else(|| {
                DecodeError::new(format!("base chain {name} with type {type_name:?}"))
            })?;
            Some(BaseChain {
                hook,
                priority,
                chain_type,
                policy,
                devices,
            })
        }
    };
    Ok(ChainEntry {
        family,
        table,
        chain: Chain { name, base },
    })
}

fn hook_attrs(family: Family, data: &[u8]) -> Result<(Hook, i32, Vec<String>), DecodeError> {
    let (mut number, mut priority, mut dev, mut devs) = (None, None, None, None);
    for a in attrs(data) {
        let (ty, payload) = a?;
        match ty {
            NFTA_HOOK_HOOKNUM => number = Some(attr::be32(payload)?),
            NFTA_HOOK_PRIORITY => priority = Some(attr::be32(payload)? as i32),
            NFTA_HOOK_DEV => dev = Some(attr::string(payload)?),
            NFTA_HOOK_DEVS => {
                let mut list = Vec::new();
                for d in attrs(payload) {
                    let (ty, payload) = d?;
                    let name = attr::string(payload)?;
                    match ty {
                        NFTA_DEVICE_NAME => list.push(name),
                        NFTA_DEVICE_PREFIX => list.push(format!("{name}*")),
                        _ => {}
                    }
                }
                devs = Some(list);
            }
            _ => {}
        }
    }
    let number = number.ok_or_else(|| DecodeError::new("hook without a number"))?;
    let hook = Hook::from_number(family, number)
        .ok_or_else(|| DecodeError::new(format!("unknown {family} hook {number}")))?;
    let priority = priority.ok_or_else(|| DecodeError::new("hook without a priority"))?;
    // Newer kernels send the device list and, for a single device, also the old
    // single-device attribute; older ones only the latter.
    let devices = devs.unwrap_or_else(|| dev.into_iter().collect());
    Ok((hook, priority, devices))
}

/// A dumped rule: (table, chain, rule).
pub(crate) fn rule(data: &[u8]) -> Result<(String, String, Rule), DecodeError> {
    let (mut table, mut chain, mut handle) = (None, None, None);
    let mut exprs = Vec::new();
    for a in attrs(data) {
        let (ty, payload) = a?;
        match ty {
            NFTA_RULE_TABLE => table = Some(attr::string(payload)?),
            NFTA_RULE_CHAIN => chain = Some(attr::string(payload)?),
            NFTA_RULE_HANDLE => handle = Some(attr::be64(payload)?),
            NFTA_RULE_EXPRESSIONS => {
                for elem in attrs(payload) {
                    let (ty, payload) = elem?;
                    if ty == NFTA_LIST_ELEM {
                        exprs.push(expr(payload)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok((
        table.ok_or_else(|| DecodeError::new("rule without a table"))?,
        chain.ok_or_else(|| DecodeError::new("rule without a chain"))?,
        Rule { exprs, handle },
    ))
}

pub(crate) fn expr(elem: &[u8]) -> Result<Expr, DecodeError> {
    let (mut name, mut data) = (None, None);
    for a in attrs(elem) {
        let (ty, payload) = a?;
        match ty {
            NFTA_EXPR_NAME => name = Some(attr::string(payload)?),
            NFTA_EXPR_DATA => data = Some(payload),
            _ => {}
        }
    }
    let name = name.ok_or_else(|| DecodeError::new("expression without a name"))?;
    let data = data.unwrap_or_default();
    Ok(known_expr(&name, data).unwrap_or_else(|| Expr::Unknown {
        name,
        raw: data.to_vec(),
    }))
}

/// The attributes of one expression, indexed by type. `None` when an attribute outside
/// `allowed` is present (the expression then does something the model cannot say).
struct Fields<'a> {
    slots: [Option<&'a [u8]>; 16],
}

impl<'a> Fields<'a> {
    fn parse(data: &'a [u8], allowed: &[u16], ignored: &[u16]) -> Option<Fields<'a>> {
        let mut slots = [None; 16];
        for a in attrs(data) {
            let (ty, payload) = a.ok()?;
            if ignored.contains(&ty) {
                continue;
            }
            if !allowed.contains(&ty) {
                return None;
            }
            *slots.get_mut(usize::from(ty))? = Some(payload);
        }
        Some(Fields { slots })
    }

    fn get(&self, ty: u16) -> Option<&'a [u8]> {
        self.slots.get(usize::from(ty)).copied().flatten()
    }

    fn be32(&self, ty: u16) -> Option<u32> {
        attr::be32(self.get(ty)?).ok()
    }

    fn be64(&self, ty: u16) -> Option<u64> {
        attr::be64(self.get(ty)?).ok()
    }

    fn reg(&self, ty: u16) -> Option<Register> {
        self.be32(ty).map(Register)
    }

    /// A nested NFTA_DATA_VALUE.
    fn value(&self, ty: u16) -> Option<Vec<u8>> {
        let inner = Fields::parse(self.get(ty)?, &[NFTA_DATA_VALUE], &[])?;
        inner.get(NFTA_DATA_VALUE).map(<[u8]>::to_vec)
    }
}

fn known_expr(name: &str, data: &[u8]) -> Option<Expr> {
    Some(match name {
        "meta" => {
            let f = Fields::parse(data, &[NFTA_META_DREG, NFTA_META_KEY], &[])?;
            Expr::Meta {
                key: MetaKey::from_number(f.be32(NFTA_META_KEY)?),
                dreg: f.reg(NFTA_META_DREG)?,
            }
        }
        "payload" => {
            let allowed = [
                NFTA_PAYLOAD_DREG,
                NFTA_PAYLOAD_BASE,
                NFTA_PAYLOAD_OFFSET,
                NFTA_PAYLOAD_LEN,
            ];
            let f = Fields::parse(data, &allowed, &[])?;
            Expr::Payload {
                base: PayloadBase::from_number(f.be32(NFTA_PAYLOAD_BASE)?)?,
                offset: f.be32(NFTA_PAYLOAD_OFFSET)?,
                len: f.be32(NFTA_PAYLOAD_LEN)?,
                dreg: f.reg(NFTA_PAYLOAD_DREG)?,
            }
        }
        "cmp" => {
            let f = Fields::parse(data, &[NFTA_CMP_SREG, NFTA_CMP_OP, NFTA_CMP_DATA], &[])?;
            Expr::Cmp {
                op: CmpOp::from_number(f.be32(NFTA_CMP_OP)?)?,
                sreg: f.reg(NFTA_CMP_SREG)?,
                data: f.value(NFTA_CMP_DATA)?,
            }
        }
        "bitwise" => {
            let allowed = [
                NFTA_BITWISE_SREG,
                NFTA_BITWISE_DREG,
                NFTA_BITWISE_LEN,
                NFTA_BITWISE_MASK,
                NFTA_BITWISE_XOR,
                NFTA_BITWISE_OP,
            ];
            let f = Fields::parse(data, &allowed, &[])?;
            if f.get(NFTA_BITWISE_OP).is_some() && f.be32(NFTA_BITWISE_OP)? != NFT_BITWISE_MASK_XOR
            {
                return None;
            }
            let (mask, xor) = (f.value(NFTA_BITWISE_MASK)?, f.value(NFTA_BITWISE_XOR)?);
            let len = usize::try_from(f.be32(NFTA_BITWISE_LEN)?).ok()?;
            if mask.len() != len || xor.len() != len {
                return None;
            }
            Expr::Bitwise {
                sreg: f.reg(NFTA_BITWISE_SREG)?,
                dreg: f.reg(NFTA_BITWISE_DREG)?,
                mask,
                xor,
            }
        }
        "ct" => {
            let f = Fields::parse(data, &[NFTA_CT_DREG, NFTA_CT_KEY], &[])?;
            Expr::Ct {
                key: CtKey::from_number(f.be32(NFTA_CT_KEY)?),
                dreg: f.reg(NFTA_CT_DREG)?,
            }
        }
        "immediate" => {
            let f = Fields::parse(data, &[NFTA_IMMEDIATE_DREG, NFTA_IMMEDIATE_DATA], &[])?;
            let inner = Fields::parse(
                f.get(NFTA_IMMEDIATE_DATA)?,
                &[NFTA_DATA_VALUE, NFTA_DATA_VERDICT],
                &[],
            )?;
            let data = match (inner.get(NFTA_DATA_VALUE), inner.get(NFTA_DATA_VERDICT)) {
                (Some(value), None) => ImmediateData::Value(value.to_vec()),
                (None, Some(verdict)) => ImmediateData::Verdict(decode_verdict(verdict)?),
                _ => return None,
            };
            Expr::Immediate {
                dreg: f.reg(NFTA_IMMEDIATE_DREG)?,
                data,
            }
        }
        "reject" => {
            let f = Fields::parse(data, &[NFTA_REJECT_TYPE, NFTA_REJECT_ICMP_CODE], &[])?;
            let code = f.get(NFTA_REJECT_ICMP_CODE).map(attr::u8);
            Expr::Reject(match (f.be32(NFTA_REJECT_TYPE)?, code) {
                (NFT_REJECT_TCP_RST, None) => Reject::TcpReset,
                (NFT_REJECT_ICMP_UNREACH, Some(Ok(c))) => Reject::IcmpUnreach(c),
                (NFT_REJECT_ICMPX_UNREACH, Some(Ok(c))) => Reject::IcmpxUnreach(c),
                _ => return None,
            })
        }
        "masq" => {
            let f = Fields::parse(data, &[NFTA_MASQ_FLAGS], &[])?;
            let flags = match f.get(NFTA_MASQ_FLAGS) {
                None => 0,
                Some(_) => f.be32(NFTA_MASQ_FLAGS)?,
            };
            Expr::Masq { flags }
        }
        "notrack" => {
            Fields::parse(data, &[], &[])?;
            Expr::Notrack
        }
        "counter" => {
            let f = Fields::parse(
                data,
                &[NFTA_COUNTER_BYTES, NFTA_COUNTER_PACKETS],
                &[NFTA_COUNTER_PAD],
            )?;
            Expr::Counter {
                packets: f.be64(NFTA_COUNTER_PACKETS)?,
                bytes: f.be64(NFTA_COUNTER_BYTES)?,
            }
        }
        _ => return None,
    })
}

fn decode_verdict(data: &[u8]) -> Option<Verdict> {
    let f = Fields::parse(data, &[NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN], &[])?;
    let chain = match f.get(NFTA_VERDICT_CHAIN) {
        None => None,
        Some(c) => Some(attr::string(c).ok()?),
    };
    Some(match (f.be32(NFTA_VERDICT_CODE)? as i32, chain) {
        (NF_ACCEPT, None) => Verdict::Accept,
        (NF_DROP, None) => Verdict::Drop,
        (NFT_CONTINUE, None) => Verdict::Continue,
        (NFT_RETURN, None) => Verdict::Return,
        (NFT_JUMP, Some(c)) => Verdict::Jump(c),
        (NFT_GOTO, Some(c)) => Verdict::Goto(c),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::wire::attr::AttrWriter;

    fn every_expr() -> Vec<Expr> {
        vec![
            Expr::Meta {
                key: MetaKey::OifName,
                dreg: Register::R1,
            },
            Expr::Meta {
                key: MetaKey::Other(33),
                dreg: Register(8),
            },
            Expr::Payload {
                base: PayloadBase::Transport,
                offset: 2,
                len: 2,
                dreg: Register::R1,
            },
            Expr::Cmp {
                op: CmpOp::Neq,
                sreg: Register::R1,
                data: vec![1, 2, 3],
            },
            Expr::Bitwise {
                sreg: Register::R1,
                dreg: Register::R2,
                mask: vec![0xff, 0xf0],
                xor: vec![0, 0],
            },
            Expr::Ct {
                key: CtKey::State,
                dreg: Register::R1,
            },
            Expr::Immediate {
                dreg: Register::VERDICT,
                data: ImmediateData::Verdict(Verdict::Jump("other".into())),
            },
            Expr::Immediate {
                dreg: Register::R1,
                data: ImmediateData::Value(vec![9, 9]),
            },
            Expr::Reject(Reject::TcpReset),
            Expr::Reject(Reject::IcmpxUnreach(3)),
            Expr::Reject(Reject::IcmpUnreach(10)),
            Expr::Masq { flags: 0 },
            Expr::Masq { flags: 4 },
            Expr::Notrack,
            Expr::Counter {
                packets: 5,
                bytes: 600,
            },
            Expr::Unknown {
                name: "lookup".into(),
                raw: vec![8, 0, 1, 0, 0, 0, 0, 1],
            },
        ]
    }

    #[test]
    fn every_expression_round_trips_through_the_wire_format() {
        let rule = Rule::new(every_expr());
        let mut buf = Vec::new();
        let mut overflowed = false;
        encode::rule(
            &mut AttrWriter::new(&mut buf, &mut overflowed),
            "t",
            "c",
            &rule,
        );
        assert!(!overflowed);
        let (table, chain, decoded) = super::rule(&buf).unwrap();
        assert_eq!((table.as_str(), chain.as_str()), ("t", "c"));
        assert_eq!(decoded, rule);
    }

    #[test]
    fn unexpected_attributes_make_an_expression_unknown() {
        // A meta with a source register is `meta set`, not a load.
        let mut data = Vec::new();
        let mut overflowed = false;
        {
            let mut w = AttrWriter::new(&mut data, &mut overflowed);
            w.be32(NFTA_META_KEY, 3);
            w.be32(3 /* NFTA_META_SREG */, 1);
        }
        assert_eq!(
            known_expr("meta", &data),
            None,
            "meta set must not decode as a load"
        );
        // A counter with the kernel's padding attribute still decodes.
        let mut data = Vec::new();
        {
            let mut w = AttrWriter::new(&mut data, &mut overflowed);
            w.bytes(NFTA_COUNTER_PAD, &[]);
            w.be64(NFTA_COUNTER_BYTES, 1);
            w.be64(NFTA_COUNTER_PACKETS, 2);
        }
        assert_eq!(
            known_expr("counter", &data),
            Some(Expr::Counter {
                packets: 2,
                bytes: 1
            })
        );
        // A reject of an unknown type is not guessed at.
        let mut data = Vec::new();
        {
            let mut w = AttrWriter::new(&mut data, &mut overflowed);
            w.be32(NFTA_REJECT_TYPE, 7);
        }
        assert_eq!(known_expr("reject", &data), None);
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x1234_5678u32;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            let _ = super::rule(&bytes);
            let _ = super::chain(1, &bytes);
            let _ = super::table(2, &bytes);
            let _ = expr(&bytes);
            for name in [
                "meta",
                "payload",
                "cmp",
                "bitwise",
                "ct",
                "immediate",
                "reject",
                "masq",
                "counter",
            ] {
                let _ = known_expr(name, &bytes);
            }
        }
    }
}

//! Typed objects to nf_tables attributes, laid out as `nft`/libnftnl send them.

use crate::expr::{Expr, ImmediateData, Reject};
use crate::model::{Chain, Family, Policy, Rule, Table, Verdict};
use crate::wire::attr::AttrWriter;
use crate::wire::consts::*;

/// Table attributes. Flags are sent only when set: a NEWTABLE without flags on an
/// existing table leaves it untouched, which is what "create if missing" relies on.
pub(crate) fn table(w: &mut AttrWriter<'_>, table: &Table) {
    w.string(NFTA_TABLE_NAME, &table.name);
    if table.flags != 0 {
        w.be32(NFTA_TABLE_FLAGS, table.flags);
    }
}

/// Chain attributes, or the reason the chain cannot exist in `family`.
pub(crate) fn chain(
    w: &mut AttrWriter<'_>,
    family: Family,
    table: &str,
    chain: &Chain,
) -> Result<(), String> {
    w.string(NFTA_CHAIN_TABLE, table);
    w.string(NFTA_CHAIN_NAME, &chain.name);
    let Some(base) = &chain.base else {
        return Ok(());
    };
    let hooknum = base
        .hook
        .number(family)
        .ok_or_else(|| format!("the {family} family has no {} hook", base.hook.name()))?;
    w.nested(NFTA_CHAIN_HOOK, |w| {
        w.be32(NFTA_HOOK_HOOKNUM, hooknum);
        w.be32(NFTA_HOOK_PRIORITY, base.priority as u32);
        match base.devices.as_slice() {
            [] => {}
            [one] => w.string(NFTA_HOOK_DEV, one),
            many => w.nested(NFTA_HOOK_DEVS, |w| {
                for dev in many {
                    w.string(NFTA_DEVICE_NAME, dev);
                }
            }),
        }
    });
    let policy = match base.policy {
        Policy::Accept => NF_ACCEPT,
        Policy::Drop => NF_DROP,
    };
    w.be32(NFTA_CHAIN_POLICY, policy as u32);
    w.string(NFTA_CHAIN_TYPE, base.chain_type.name());
    Ok(())
}

pub(crate) fn rule(w: &mut AttrWriter<'_>, table: &str, chain: &str, rule: &Rule) {
    w.string(NFTA_RULE_TABLE, table);
    w.string(NFTA_RULE_CHAIN, chain);
    w.nested(NFTA_RULE_EXPRESSIONS, |w| {
        for e in &rule.exprs {
            w.nested(NFTA_LIST_ELEM, |w| expr(w, e));
        }
    });
}

fn expr(w: &mut AttrWriter<'_>, e: &Expr) {
    w.string(NFTA_EXPR_NAME, e.name());
    match e {
        // No data attribute at all, as libnftnl sends it.
        Expr::Notrack => {}
        Expr::Unknown { raw, .. } => w.bytes(NFTA_EXPR_DATA | NLA_F_NESTED, raw),
        known => w.nested(NFTA_EXPR_DATA, |w| expr_data(w, known)),
    }
}

fn expr_data(w: &mut AttrWriter<'_>, e: &Expr) {
    match e {
        Expr::Meta { key, dreg } => {
            w.be32(NFTA_META_KEY, key.number());
            w.be32(NFTA_META_DREG, dreg.0);
        }
        Expr::Payload {
            base,
            offset,
            len,
            dreg,
        } => {
            w.be32(NFTA_PAYLOAD_DREG, dreg.0);
            w.be32(NFTA_PAYLOAD_BASE, base.number());
            w.be32(NFTA_PAYLOAD_OFFSET, *offset);
            w.be32(NFTA_PAYLOAD_LEN, *len);
        }
        Expr::Cmp { op, sreg, data } => {
            w.be32(NFTA_CMP_SREG, sreg.0);
            w.be32(NFTA_CMP_OP, op.number());
            w.nested(NFTA_CMP_DATA, |w| w.bytes(NFTA_DATA_VALUE, data));
        }
        Expr::Bitwise {
            sreg,
            dreg,
            mask,
            xor,
        } => {
            w.be32(NFTA_BITWISE_SREG, sreg.0);
            w.be32(NFTA_BITWISE_DREG, dreg.0);
            // A length that does not fit is clamped; the kernel then refuses the rule
            // by name (a mask that long cannot fit any register anyway).
            w.be32(
                NFTA_BITWISE_LEN,
                u32::try_from(mask.len()).unwrap_or(u32::MAX),
            );
            w.nested(NFTA_BITWISE_MASK, |w| w.bytes(NFTA_DATA_VALUE, mask));
            w.nested(NFTA_BITWISE_XOR, |w| w.bytes(NFTA_DATA_VALUE, xor));
        }
        Expr::Ct { key, dreg } => {
            w.be32(NFTA_CT_KEY, key.number());
            w.be32(NFTA_CT_DREG, dreg.0);
        }
        Expr::Immediate { dreg, data } => {
            w.be32(NFTA_IMMEDIATE_DREG, dreg.0);
            w.nested(NFTA_IMMEDIATE_DATA, |w| match data {
                ImmediateData::Value(v) => w.bytes(NFTA_DATA_VALUE, v),
                ImmediateData::Verdict(v) => w.nested(NFTA_DATA_VERDICT, |w| verdict(w, v)),
            });
        }
        Expr::Reject(r) => match r {
            Reject::TcpReset => w.be32(NFTA_REJECT_TYPE, NFT_REJECT_TCP_RST),
            Reject::IcmpUnreach(code) => {
                w.be32(NFTA_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH);
                w.u8(NFTA_REJECT_ICMP_CODE, *code);
            }
            Reject::IcmpxUnreach(code) => {
                w.be32(NFTA_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
                w.u8(NFTA_REJECT_ICMP_CODE, *code);
            }
        },
        Expr::Masq { flags } => {
            if *flags != 0 {
                w.be32(NFTA_MASQ_FLAGS, *flags);
            }
        }
        Expr::Counter { packets, bytes } => {
            w.be64(NFTA_COUNTER_BYTES, *bytes);
            w.be64(NFTA_COUNTER_PACKETS, *packets);
        }
        Expr::Notrack | Expr::Unknown { .. } => {}
    }
}

fn verdict(w: &mut AttrWriter<'_>, v: &Verdict) {
    let (code, target) = match v {
        Verdict::Accept => (NF_ACCEPT, None),
        Verdict::Drop => (NF_DROP, None),
        Verdict::Continue => (NFT_CONTINUE, None),
        Verdict::Return => (NFT_RETURN, None),
        Verdict::Jump(chain) => (NFT_JUMP, Some(chain)),
        Verdict::Goto(chain) => (NFT_GOTO, Some(chain)),
    };
    w.be32(NFTA_VERDICT_CODE, code as u32);
    if let Some(chain) = target {
        w.string(NFTA_VERDICT_CHAIN, chain);
    }
}

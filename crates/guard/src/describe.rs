//! Short nft-like text for rules and chains, so CHECK's messages name what differs in the
//! words an operator would see in `nft list ruleset`. Expressions outside the fence's
//! vocabulary are still shown (by kernel name), never hidden.

use weft_nft::{
    BaseChain, Chain, CmpOp, CtKey, Expr, ImmediateData, MetaKey, PayloadBase, Policy, Reject,
    Rule, Verdict,
};

/// One rule, e.g. `meta skuid 1337 accept`.
pub fn rule(rule: &Rule) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    let mut pending_mask: Option<Vec<u8>> = None;
    let mut pending_value: Option<Vec<u8>> = None;
    for expr in &rule.exprs {
        match expr {
            Expr::Meta { key, .. } => pending = Some(meta_name(*key)),
            Expr::Ct { key, .. } => pending = Some(ct_name(*key)),
            Expr::Payload {
                base, offset, len, ..
            } => {
                pending = Some(payload_name(*base, *offset, *len));
            }
            Expr::Bitwise { mask, .. } => pending_mask = Some(mask.clone()),
            Expr::Cmp { op, data, .. } => {
                let what = pending.take().unwrap_or_else(|| "register".into());
                let mask = pending_mask.take();
                // `ct state a,b` is "(state & mask) != 0": print it the way nft does.
                let any_of_mask =
                    *op == CmpOp::Neq && mask.is_some() && data.iter().all(|b| *b == 0);
                if what == "ct state" && any_of_mask {
                    words.push(format!(
                        "{what} {}",
                        value_text(&what, data, mask.as_deref())
                    ));
                } else {
                    words.push(format!(
                        "{what}{}{}",
                        op_text(*op),
                        value_text(&what, data, mask.as_deref())
                    ));
                }
            }
            Expr::Immediate {
                data: ImmediateData::Verdict(v),
                ..
            } => words.push(verdict(v)),
            Expr::Immediate {
                data: ImmediateData::Value(v),
                ..
            } => {
                if let Some(earlier) = pending_value.replace(v.clone()) {
                    words.push(format!("immediate 0x{}", hex(&earlier)));
                }
            }
            Expr::Counter { .. } => words.push("counter".into()),
            Expr::Reject(Reject::TcpReset) => words.push("reject with tcp reset".into()),
            Expr::Reject(Reject::IcmpxUnreach(code)) => {
                words.push(format!("reject with icmpx {}", icmpx(*code)))
            }
            Expr::Reject(Reject::IcmpUnreach(code)) => {
                words.push(format!("reject with icmp code {code}"))
            }
            Expr::Masq { .. } => words.push("masquerade".into()),
            Expr::Notrack => words.push("notrack".into()),
            Expr::Unknown { name, raw } => match (name.as_str(), raw_be32s(raw).as_slice()) {
                // `meta <key> set` from a register (key, sreg), as the frame fence uses it.
                ("meta", [(2, key), (3, _)]) => {
                    let value = pending_value
                        .take()
                        .map(|v| format!(" {}", number(&v)))
                        .unwrap_or_default();
                    words.push(format!(
                        "{} set{value}",
                        meta_name(MetaKey::from_number(*key))
                    ));
                }
                // `fib daddr type` (dreg, result 3 = address type, flags 2 = daddr).
                ("fib", [(1, _), (2, 3), (3, 2)]) => pending = Some("fib daddr type".into()),
                _ => words.push(format!("<{name} expression>")),
            },
        }
    }
    if words.is_empty() {
        return "(empty rule)".into();
    }
    words.join(" ")
}

/// A chain's hook line, e.g. `type filter hook output priority -190; policy drop`.
pub fn chain(chain: &Chain) -> String {
    match &chain.base {
        None => format!("regular chain {}", chain.name),
        Some(base) => format!("chain {} ({})", chain.name, base_chain(base)),
    }
}

fn base_chain(base: &BaseChain) -> String {
    let policy = match base.policy {
        Policy::Accept => "accept",
        Policy::Drop => "drop",
    };
    let devices = if base.devices.is_empty() {
        String::new()
    } else {
        format!(" devices = {{ {} }}", base.devices.join(", "))
    };
    format!(
        "type {} hook {}{devices} priority {}; policy {policy}",
        base.chain_type.name(),
        base.hook.name(),
        base.priority
    )
}

fn meta_name(key: MetaKey) -> String {
    match key {
        MetaKey::OifName => "oifname".into(),
        MetaKey::IifName => "iifname".into(),
        MetaKey::SkUid => "meta skuid".into(),
        MetaKey::SkGid => "meta skgid".into(),
        MetaKey::NfProto => "meta nfproto".into(),
        MetaKey::L4Proto => "meta l4proto".into(),
        MetaKey::Mark => "meta mark".into(),
        MetaKey::Other(2) => "meta priority".into(),
        other => format!("meta key {}", other.number()),
    }
}

fn ct_name(key: CtKey) -> String {
    match key {
        CtKey::State => "ct state".into(),
        CtKey::Direction => "ct direction".into(),
        other => format!("ct key {}", other.number()),
    }
}

fn payload_name(base: PayloadBase, offset: u32, len: u32) -> String {
    match (base, offset) {
        (PayloadBase::Network, 12) if len <= 4 => "ip saddr".into(),
        (PayloadBase::Network, 16) if len <= 4 => "ip daddr".into(),
        (PayloadBase::Network, 8) => "ip6 saddr".into(),
        (PayloadBase::Network, 24) => "ip6 daddr".into(),
        (PayloadBase::Transport, 0) if len == 1 => "icmp(v6) type".into(),
        _ => format!("payload @{base:?},{offset},{len}"),
    }
}

fn op_text(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => " ",
        CmpOp::Neq => " != ",
        CmpOp::Lt => " < ",
        CmpOp::Lte => " <= ",
        CmpOp::Gt => " > ",
        CmpOp::Gte => " >= ",
    }
}

fn value_text(what: &str, data: &[u8], mask: Option<&[u8]>) -> String {
    match what {
        "oifname" | "iifname" => {
            let name: String = data
                .iter()
                .take_while(|b| **b != 0)
                .map(|b| char::from(*b))
                .collect();
            format!("{name:?}")
        }
        "meta skuid" | "meta skgid" | "meta mark" | "meta priority" if data.len() == 4 => {
            number(data)
        }
        // RTN_* address types.
        "fib daddr type" if data.len() == 4 => {
            match u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) {
                1 => "unicast".into(),
                2 => "local".into(),
                3 => "broadcast".into(),
                5 => "multicast".into(),
                n => n.to_string(),
            }
        }
        "meta nfproto" if data.len() == 1 => match data[0] {
            2 => "ipv4".into(),
            10 => "ipv6".into(),
            n => n.to_string(),
        },
        "meta l4proto" if data.len() == 1 => match data[0] {
            6 => "tcp".into(),
            17 => "udp".into(),
            1 => "icmp".into(),
            58 => "icmpv6".into(),
            132 => "sctp".into(),
            n => n.to_string(),
        },
        "ct state" => match mask {
            Some(mask) if mask.len() == 4 => {
                ct_states(u32::from_ne_bytes([mask[0], mask[1], mask[2], mask[3]]))
            }
            _ => format!("0x{}", hex(data)),
        },
        "ip saddr" | "ip daddr" => address(data, 4, mask),
        "ip6 saddr" | "ip6 daddr" => address(data, 16, mask),
        "icmp(v6) type" if data.len() == 1 => data[0].to_string(),
        "ct direction" if data.len() == 1 => match data[0] {
            0 => "original".into(),
            1 => "reply".into(),
            n => n.to_string(),
        },
        _ => format!("0x{}", hex(data)),
    }
}

fn address(data: &[u8], full: usize, mask: Option<&[u8]>) -> String {
    let mut bytes = data.to_vec();
    bytes.resize(full, 0);
    let prefix = match mask {
        Some(mask) => mask.iter().map(|b| b.count_ones() as usize).sum(),
        None => data.len() * 8,
    };
    let addr: std::net::IpAddr = if full == 4 {
        std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).into()
    } else {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&bytes[..16]);
        std::net::Ipv6Addr::from(octets).into()
    };
    if prefix == full * 8 {
        addr.to_string()
    } else {
        format!("{addr}/{prefix}")
    }
}

fn ct_states(mask: u32) -> String {
    let names = [
        (1, "invalid"),
        (2, "established"),
        (4, "related"),
        (8, "new"),
        (64, "untracked"),
    ];
    let listed: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if listed.is_empty() {
        format!("0x{mask:x}")
    } else {
        listed.join(",")
    }
}

fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Accept => "accept".into(),
        Verdict::Drop => "drop".into(),
        Verdict::Continue => "continue".into(),
        Verdict::Return => "return".into(),
        Verdict::Jump(chain) => format!("jump {chain}"),
        Verdict::Goto(chain) => format!("goto {chain}"),
    }
}

fn icmpx(code: u8) -> String {
    match code {
        0 => "no-route".into(),
        1 => "port-unreachable".into(),
        2 => "host-unreachable".into(),
        3 => "admin-prohibited".into(),
        n => format!("code {n}"),
    }
}

/// A 4-byte register value as a number, anything else as hex.
fn number(data: &[u8]) -> String {
    match <[u8; 4]>::try_from(data) {
        Ok(word) => u32::from_ne_bytes(word).to_string(),
        Err(_) => format!("0x{}", hex(data)),
    }
}

/// The (type, big-endian u32) attributes of a raw expression, in order; empty when any
/// attribute is not a plain u32.
fn raw_be32s(raw: &[u8]) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    let mut rest = raw;
    while rest.len() >= 8 {
        let len = u16::from_ne_bytes([rest[0], rest[1]]);
        if len != 8 {
            return Vec::new();
        }
        let ty = u16::from_ne_bytes([rest[2], rest[3]]);
        out.push((ty, u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]])));
        rest = &rest[8..];
    }
    if rest.is_empty() {
        out
    } else {
        Vec::new()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Contract;
    use crate::ruleset;

    #[test]
    fn the_fence_reads_like_nft() {
        let contract = Contract {
            proxy_uid: 1337,
            allow_cidrs: vec![
                "10.96.0.10/32".parse().unwrap(),
                "10.96.0.0/12".parse().unwrap(),
                "fd00:10:96::/48".parse().unwrap(),
            ],
            contract_version: 1,
        };
        let spec = ruleset::canonical(&contract).unwrap();
        let text: Vec<String> = spec.chains[0].rules.iter().map(rule).collect();
        assert_eq!(text[0], "oifname \"lo\" accept");
        assert_eq!(
            text[1],
            "ct state established,related ct direction reply accept"
        );
        assert_eq!(text[2], "meta skuid 1337 accept");
        assert_eq!(text[3], "meta nfproto ipv4 ip daddr 10.96.0.10 accept");
        assert_eq!(text[4], "meta nfproto ipv4 ip daddr 10.96.0.0/12 accept");
        assert_eq!(
            text[5],
            "meta nfproto ipv6 ip6 daddr fd00:10:96::/48 accept"
        );
        assert_eq!(
            text[6],
            "counter meta l4proto icmpv6 meta skuid != 1337 reject with icmpx admin-prohibited"
        );
        assert_eq!(
            text[7],
            "meta nfproto ipv6 meta l4proto icmpv6 icmp(v6) type 133 accept"
        );
        assert_eq!(text[12], "counter meta l4proto tcp reject with tcp reset");
        assert_eq!(text[13], "counter reject with icmpx admin-prohibited");
        assert_eq!(
            chain(&spec.chains[0].chain),
            "chain output (type filter hook output priority -190; policy drop)"
        );
        let stamp = crate::frames::Stamp {
            mark: 7,
            priority: 9,
        };
        let stamping = crate::frames::stamp_chain(stamp).unwrap();
        assert_eq!(
            rule(&stamping.rules[1]),
            "fib daddr type unicast meta mark set 7 meta priority set 9"
        );
        let frames = crate::frames::table(stamp, 1337, &["eth0".into()]).unwrap();
        let text: Vec<String> = frames.chains[0].rules.iter().map(rule).collect();
        assert_eq!(
            text,
            [
                "meta mark 7 meta priority 9 meta mark set 0 meta priority set 0 accept",
                "meta skuid 1337 accept",
                "counter meta skuid != 1337 drop",
            ]
        );
        assert_eq!(
            chain(&frames.chains[0].chain),
            "chain egress (type filter hook egress devices = { eth0 } priority -190; policy accept)"
        );
    }
}

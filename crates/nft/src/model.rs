//! The typed nftables objects this crate installs and reads back: tables, chains,
//! rules. Readback decodes into these same types so installed and intended state can be
//! compared with `==`.

use crate::expr::Expr;
use std::fmt;

/// An nftables address family (the `nfgen_family` of a message, an NFPROTO_* value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Inet,
    Ip,
    Ip6,
    Netdev,
    Arp,
    Bridge,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Inet,
        Family::Ip,
        Family::Ip6,
        Family::Netdev,
        Family::Arp,
        Family::Bridge,
    ];

    /// The kernel's NFPROTO_* number.
    pub fn nfproto(self) -> u8 {
        match self {
            Family::Inet => 1,
            Family::Ip => 2,
            Family::Arp => 3,
            Family::Netdev => 5,
            Family::Bridge => 7,
            Family::Ip6 => 10,
        }
    }

    pub fn from_nfproto(value: u8) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.nfproto() == value)
    }

    /// The keyword `nft` uses for this family.
    pub fn name(self) -> &'static str {
        match self {
            Family::Inet => "inet",
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Netdev => "netdev",
            Family::Arp => "arp",
            Family::Bridge => "bridge",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A netfilter hook. Its number depends on the family, see [`Hook::number`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
    Ingress,
    Egress,
}

impl Hook {
    /// The hook number the kernel uses in `family`, or `None` when the family has no
    /// such hook.
    pub fn number(self, family: Family) -> Option<u32> {
        use Hook::*;
        match family {
            // NF_INET_* (bridge uses the same numbering, NF_BR_*).
            Family::Ip | Family::Ip6 | Family::Inet | Family::Bridge => match self {
                Prerouting => Some(0),
                Input => Some(1),
                Forward => Some(2),
                Output => Some(3),
                Postrouting => Some(4),
                Ingress if family == Family::Inet => Some(5),
                _ => None,
            },
            Family::Netdev => match self {
                Ingress => Some(0),
                Egress => Some(1),
                _ => None,
            },
            Family::Arp => match self {
                Input => Some(0),
                Output => Some(1),
                Forward => Some(2),
                _ => None,
            },
        }
    }

    pub fn from_number(family: Family, number: u32) -> Option<Hook> {
        use Hook::*;
        [
            Prerouting,
            Input,
            Forward,
            Output,
            Postrouting,
            Ingress,
            Egress,
        ]
        .into_iter()
        .find(|h| h.number(family) == Some(number))
    }

    pub fn name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
            Hook::Postrouting => "postrouting",
            Hook::Ingress => "ingress",
            Hook::Egress => "egress",
        }
    }
}

/// A base chain's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainType {
    Filter,
    Nat,
    Route,
}

impl ChainType {
    pub fn name(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        }
    }

    pub fn from_name(name: &str) -> Option<ChainType> {
        [ChainType::Filter, ChainType::Nat, ChainType::Route]
            .into_iter()
            .find(|t| t.name() == name)
    }
}

/// Named base-chain priorities as `nft` spells them for the ip, ip6 and inet families
/// (bridge uses other values).
pub mod priority {
    pub const RAW: i32 = -300;
    pub const MANGLE: i32 = -150;
    pub const DSTNAT: i32 = -100;
    pub const FILTER: i32 = 0;
    pub const SECURITY: i32 = 50;
    pub const SRCNAT: i32 = 100;
}

/// A base chain's policy: what happens to a packet no rule decided on. The kernel
/// accepts only these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    Accept,
    Drop,
}

/// A verdict, as carried by an immediate expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    Accept,
    Drop,
    Continue,
    Return,
    Jump(String),
    Goto(String),
}

/// Table flags (`NFT_TABLE_F_*`); a dormant table's base chains are not hooked.
pub mod table_flags {
    pub const DORMANT: u32 = 0x1;
    pub const OWNER: u32 = 0x2;
    pub const PERSIST: u32 = 0x4;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Table {
    pub family: Family,
    pub name: String,
    /// `NFT_TABLE_F_*` bits, see [`table_flags`]. Compared on readback, because a
    /// dormant table enforces nothing.
    pub flags: u32,
}

impl Table {
    pub fn new(family: Family, name: impl Into<String>) -> Table {
        Table {
            family,
            name: name.into(),
            flags: 0,
        }
    }
}

/// What makes a chain a base chain: where it hooks into the stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseChain {
    pub hook: Hook,
    pub priority: i32,
    pub chain_type: ChainType,
    pub policy: Policy,
    /// Devices of a netdev-family (or inet ingress) chain; empty otherwise. A list
    /// because the kernel allows several; a prefix match reads back as `name*`.
    pub devices: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chain {
    pub name: String,
    /// `None` for a regular chain, reachable only by jump/goto.
    pub base: Option<BaseChain>,
}

impl Chain {
    pub fn regular(name: impl Into<String>) -> Chain {
        Chain {
            name: name.into(),
            base: None,
        }
    }

    /// A base chain on a hook with no devices.
    pub fn base(
        name: impl Into<String>,
        chain_type: ChainType,
        hook: Hook,
        priority: i32,
        policy: Policy,
    ) -> Chain {
        Chain {
            name: name.into(),
            base: Some(BaseChain {
                hook,
                priority,
                chain_type,
                policy,
                devices: Vec::new(),
            }),
        }
    }
}

/// A chain as listed from the kernel, with the table it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChainEntry {
    pub family: Family,
    pub table: String,
    pub chain: Chain,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub exprs: Vec<Expr>,
    /// The kernel's handle; `None` for a rule not yet installed.
    pub handle: Option<u64>,
}

impl Rule {
    pub fn new(exprs: Vec<Expr>) -> Rule {
        Rule {
            exprs,
            handle: None,
        }
    }

    /// This rule without the state the kernel adds or changes at run time: the handle
    /// is dropped and counter values are zeroed. Everything else is compared exactly.
    pub fn normalized(&self) -> Rule {
        let exprs = self
            .exprs
            .iter()
            .map(|e| match e {
                Expr::Counter { .. } => Expr::Counter {
                    packets: 0,
                    bytes: 0,
                },
                other => other.clone(),
            })
            .collect();
        Rule {
            exprs,
            handle: None,
        }
    }
}

/// A chain and its rules, in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChainSpec {
    pub chain: Chain,
    pub rules: Vec<Rule>,
}

/// A whole table: what [`NftSocket::replace_table`](crate::NftSocket::replace_table)
/// installs and [`NftSocket::read_table`](crate::NftSocket::read_table) reads back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableSpec {
    pub table: Table,
    pub chains: Vec<ChainSpec>,
}

impl TableSpec {
    /// The form readback returns: chains sorted by name (chain order carries no
    /// meaning), every rule [`Rule::normalized`]. Rule order is kept: it is semantic.
    pub fn normalized(&self) -> TableSpec {
        let mut chains: Vec<ChainSpec> = self
            .chains
            .iter()
            .map(|c| ChainSpec {
                chain: c.chain.clone(),
                rules: c.rules.iter().map(Rule::normalized).collect(),
            })
            .collect();
        chains.sort_by(|a, b| a.chain.name.cmp(&b.chain.name));
        TableSpec {
            table: self.table.clone(),
            chains,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_numbers_round_trip_per_family() {
        for family in Family::ALL {
            for hook in [
                Hook::Prerouting,
                Hook::Input,
                Hook::Forward,
                Hook::Output,
                Hook::Postrouting,
                Hook::Ingress,
                Hook::Egress,
            ] {
                if let Some(n) = hook.number(family) {
                    assert_eq!(
                        Hook::from_number(family, n),
                        Some(hook),
                        "{family} {hook:?}"
                    );
                }
            }
        }
        assert_eq!(Hook::Output.number(Family::Inet), Some(3));
        assert_eq!(Hook::Ingress.number(Family::Ip), None);
        assert_eq!(Hook::Egress.number(Family::Netdev), Some(1));
        assert_eq!(Hook::Output.number(Family::Arp), Some(1));
    }

    #[test]
    fn family_numbers_round_trip() {
        for family in Family::ALL {
            assert_eq!(Family::from_nfproto(family.nfproto()), Some(family));
        }
        assert_eq!(Family::from_nfproto(0), None);
    }
}

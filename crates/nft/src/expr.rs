//! Low-level nf_tables expressions, one variant per kernel expression this crate
//! speaks, with the kernel's own fields. Anything else reads back as
//! [`Expr::Unknown`], so a comparison against intended rules fails instead of erroring.

use crate::model::Verdict;

/// An nf_tables register as numbered on the wire: 0 is the verdict register, 1-4 the
/// legacy 16-byte registers `nft` still uses, 8-23 the 4-byte registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Register(pub u32);

impl Register {
    pub const VERDICT: Register = Register(0);
    pub const R1: Register = Register(1);
    pub const R2: Register = Register(2);
}

/// `NFT_META_*` keys. Keys without a name here read back as `Other(number)`, which is
/// still exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKey {
    Len,
    Protocol,
    Mark,
    Iif,
    Oif,
    IifName,
    OifName,
    SkUid,
    SkGid,
    NfProto,
    L4Proto,
    Other(u32),
}

impl MetaKey {
    pub fn number(self) -> u32 {
        match self {
            MetaKey::Len => 0,
            MetaKey::Protocol => 1,
            MetaKey::Mark => 3,
            MetaKey::Iif => 4,
            MetaKey::Oif => 5,
            MetaKey::IifName => 6,
            MetaKey::OifName => 7,
            MetaKey::SkUid => 10,
            MetaKey::SkGid => 11,
            MetaKey::NfProto => 15,
            MetaKey::L4Proto => 16,
            MetaKey::Other(n) => n,
        }
    }

    /// The named key for a number, or `Other` (never `Other` for a named number, so
    /// that equality is exact).
    pub fn from_number(n: u32) -> MetaKey {
        use MetaKey::*;
        [
            Len, Protocol, Mark, Iif, Oif, IifName, OifName, SkUid, SkGid, NfProto, L4Proto,
        ]
        .into_iter()
        .find(|k| k.number() == n)
        .unwrap_or(Other(n))
    }
}

/// `NFT_CT_*` keys, with the same `Other` convention as [`MetaKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtKey {
    State,
    Direction,
    Status,
    Mark,
    Other(u32),
}

impl CtKey {
    pub fn number(self) -> u32 {
        match self {
            CtKey::State => 0,
            CtKey::Direction => 1,
            CtKey::Status => 2,
            CtKey::Mark => 3,
            CtKey::Other(n) => n,
        }
    }

    pub fn from_number(n: u32) -> CtKey {
        use CtKey::*;
        [State, Direction, Status, Mark]
            .into_iter()
            .find(|k| k.number() == n)
            .unwrap_or(Other(n))
    }
}

/// Where a payload expression reads from (`NFT_PAYLOAD_*_HEADER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadBase {
    LinkLayer,
    Network,
    Transport,
    Inner,
}

impl PayloadBase {
    pub fn number(self) -> u32 {
        match self {
            PayloadBase::LinkLayer => 0,
            PayloadBase::Network => 1,
            PayloadBase::Transport => 2,
            PayloadBase::Inner => 3,
        }
    }

    pub fn from_number(n: u32) -> Option<PayloadBase> {
        use PayloadBase::*;
        [LinkLayer, Network, Transport, Inner]
            .into_iter()
            .find(|b| b.number() == n)
    }
}

/// `NFT_CMP_*` operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
}

impl CmpOp {
    pub fn number(self) -> u32 {
        match self {
            CmpOp::Eq => 0,
            CmpOp::Neq => 1,
            CmpOp::Lt => 2,
            CmpOp::Lte => 3,
            CmpOp::Gt => 4,
            CmpOp::Gte => 5,
        }
    }

    pub fn from_number(n: u32) -> Option<CmpOp> {
        use CmpOp::*;
        [Eq, Neq, Lt, Lte, Gt, Gte]
            .into_iter()
            .find(|o| o.number() == n)
    }
}

/// What a reject expression sends. The kernel keeps an ICMP code only for the ICMP
/// kinds, so the code lives inside those variants and a TCP reset has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reject {
    /// ICMP (v4 or v6, by family) destination unreachable with this code.
    IcmpUnreach(u8),
    TcpReset,
    /// Family-independent ICMP code (`NFT_REJECT_ICMPX_*`), see [`IcmpxCode`].
    IcmpxUnreach(u8),
}

/// `NFT_REJECT_ICMPX_*` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpxCode {
    NoRoute = 0,
    PortUnreachable = 1,
    HostUnreachable = 2,
    AdminProhibited = 3,
}

/// What an immediate expression loads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImmediateData {
    Verdict(Verdict),
    Value(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Load packet metadata into `dreg`.
    Meta {
        key: MetaKey,
        dreg: Register,
    },
    /// Load `len` bytes at `offset` from a header into `dreg`.
    Payload {
        base: PayloadBase,
        offset: u32,
        len: u32,
        dreg: Register,
    },
    /// Compare `sreg` with `data`; the rule stops unless it holds.
    Cmp {
        op: CmpOp,
        sreg: Register,
        data: Vec<u8>,
    },
    /// `dreg = (sreg & mask) ^ xor`; `mask` and `xor` have the same length.
    Bitwise {
        sreg: Register,
        dreg: Register,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    /// Load conntrack state into `dreg`.
    Ct {
        key: CtKey,
        dreg: Register,
    },
    Immediate {
        dreg: Register,
        data: ImmediateData,
    },
    Reject(Reject),
    /// Masquerade; `flags` are `NF_NAT_RANGE_*` bits (0: none sent or dumped).
    Masq {
        flags: u32,
    },
    Notrack,
    /// Packet and byte counts; [`Rule::normalized`](crate::Rule::normalized) zeroes them.
    Counter {
        packets: u64,
        bytes: u64,
    },
    /// An expression outside this crate's vocabulary, or a known one with attributes
    /// this model does not carry: its name and the raw attributes of its data.
    Unknown {
        name: String,
        raw: Vec<u8>,
    },
}

impl Expr {
    /// The kernel's name for this expression.
    pub fn name(&self) -> &str {
        match self {
            Expr::Meta { .. } => "meta",
            Expr::Payload { .. } => "payload",
            Expr::Cmp { .. } => "cmp",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Ct { .. } => "ct",
            Expr::Immediate { .. } => "immediate",
            Expr::Reject(_) => "reject",
            Expr::Masq { .. } => "masq",
            Expr::Notrack => "notrack",
            Expr::Counter { .. } => "counter",
            Expr::Unknown { name, .. } => name,
        }
    }
}

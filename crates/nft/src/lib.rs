//! weft-nft: nftables over netlink (NETLINK_NETFILTER / NFNL_SUBSYS_NFTABLES), with no
//! `nft` binary and no C library at run time.
//!
//! - [`model`] and [`expr`]: typed tables, chains, rules and the kernel's expressions.
//! - [`RuleBuilder`]: statements encoded exactly as `nft` encodes them.
//! - [`Batch`]: changes applied as one kernel transaction, with per-message errors.
//! - [`NftSocket`]: listing and readback decoded into the same types, whole-table
//!   replace ([`NftSocket::replace_table`]) and consistent read
//!   ([`NftSocket::read_table`]), so installed state can be proven equal to intended
//!   state with `==`.
//!
//! A socket works in the network namespace it was opened in: open it in the current
//! thread's namespace with [`NftSocket::open`], or in another with
//! [`NftSocket::open_in_netns`].

mod batch;
mod builder;
mod decode;
mod encode;
mod error;
pub mod expr;
mod list;
pub mod model;
mod socket;
mod table;
mod wire;

pub use batch::Batch;
pub use builder::{icmpv6, ipproto, CtState, RuleBuilder};
pub use error::{Error, Failure};
pub use expr::{
    CmpOp, CtKey, Expr, IcmpxCode, ImmediateData, MetaKey, PayloadBase, Register, Reject,
};
pub use model::{
    priority, table_flags, BaseChain, Chain, ChainEntry, ChainSpec, ChainType, Family, Hook,
    Policy, Rule, Table, TableSpec, Verdict,
};
pub use socket::NftSocket;
pub use table::{create_batch, replace_batch};

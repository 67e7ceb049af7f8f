//! Typed errors: configuration errors name the offending field, store errors name the
//! file, address or range involved.

use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use crate::owner::Owner;

/// A rejected `ipam` configuration. `field` is a path such as `ipam.ranges[1][0].rangeEnd`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: not valid JSON: {reason}")]
    Json { field: String, reason: String },
    #[error("{field}: expected {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    #[error("{field}: required but missing")]
    Missing { field: String },
    #[error("{field}: the legacy top-level host-local form is not supported; list the subnet under \"ranges\"")]
    LegacyForm { field: String },
    #[error("{field}: {value:?} is not an IP address")]
    BadAddress { field: String, value: String },
    #[error("{field}: {value:?} is not a subnet in CIDR notation")]
    BadSubnet { field: String, value: String },
    #[error("{field}: {value} has host bits set (the subnet is {network})")]
    SubnetHostBits {
        field: String,
        value: IpNet,
        network: IpNet,
    },
    #[error("{field}: subnet {subnet} is too small to hold any address for a pod")]
    SubnetTooSmall { field: String, subnet: IpNet },
    #[error("{field}: {address} is not the same address family as subnet {subnet}")]
    FamilyMismatch {
        field: String,
        address: IpAddr,
        subnet: IpNet,
    },
    #[error("{field}: {address} is outside subnet {subnet}")]
    OutsideSubnet {
        field: String,
        address: IpAddr,
        subnet: IpNet,
    },
    #[error("{field}: rangeStart {start} is after rangeEnd {end}")]
    StartAfterEnd {
        field: String,
        start: IpAddr,
        end: IpAddr,
    },
    #[error("{field}: range {range} holds no address a pod could get (network, broadcast and gateway are skipped)")]
    NoUsableAddress { field: String, range: String },
    #[error("{field}: no range sets configured")]
    NoRangeSets { field: String },
    #[error("{field}: range set has no ranges")]
    EmptyRangeSet { field: String },
    #[error("{field}: a range set mixes IPv4 and IPv6 ranges")]
    MixedFamilies { field: String },
    #[error("{field}: overlaps {other}")]
    Overlap { field: String, other: String },
    #[error("{field}: a second {family} range set ({other} is one already); weft allocates one address per family")]
    DuplicateFamily {
        field: String,
        other: String,
        family: String,
    },
    #[error("{field}: {path:?} is not an absolute path")]
    RelativeDataDir { field: String, path: PathBuf },
}

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "network name {name:?} cannot name a store directory (use letters, digits, '_', '.', '-')"
    )]
    InvalidNetworkName { name: String },
    #[error("invalid owner: {reason}")]
    InvalidOwner { reason: String },
    #[error("invalid range sets: {0}")]
    InvalidRanges(#[from] ConfigError),
    #[error("{op} {path:?}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store {path:?} has format {found:?}, this version understands {expected:?}")]
    UnsupportedFormat {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
    #[error("no free address in range set {set_index} ({range_set})")]
    Exhausted { set_index: usize, range_set: String },
    #[error("requested address {address} is not in any configured range")]
    RequestedOutsideRanges { address: IpAddr },
    #[error("requested address {address} cannot be given to a pod: {reason}")]
    RequestedNotUsable {
        address: IpAddr,
        reason: &'static str,
    },
    #[error("requested addresses {first} and {second} are both in range set {set_index}; one address per set")]
    RequestedTwiceInSet {
        set_index: usize,
        first: IpAddr,
        second: IpAddr,
    },
    #[error("requested address {address} is already reserved{}", by_whom(owner))]
    AddressInUse {
        address: IpAddr,
        owner: Option<Owner>,
    },
    #[error("{owner} already holds {held} in that range set, not the requested {requested}")]
    OwnerHoldsOther {
        owner: Owner,
        held: IpAddr,
        requested: IpAddr,
    },
    #[error("store directory {path:?} is not writable: {source}")]
    NotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn by_whom(owner: &Option<Owner>) -> String {
    match owner {
        Some(o) => format!(" by {o}"),
        None => " (by an unreadable record)".into(),
    }
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

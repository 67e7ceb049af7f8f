//! The `ipam` section of a network configuration, in the shape of the reference
//! `host-local` plugin, parsed into validated types.
//!
//! ```json
//! "ipam": {
//!   "ranges": [
//!     [{"subnet": "10.244.1.0/24"}],
//!     [{"subnet": "fd00:10:244:1::/64", "rangeStart": "fd00:10:244:1::10",
//!       "rangeEnd": "fd00:10:244:1::ff", "gateway": "fd00:10:244:1::1"}]
//!   ],
//!   "dataDir": "/var/lib/weft/ipam"
//! }
//! ```
//!
//! Each inner list is a *range set*: one address is allocated from each set, and the ranges
//! of a set are tried in order. weft allows at most one set per family (one IPv4 and one
//! IPv6 address per interface), which is what a node's pod CIDRs describe.
//!
//! Unlike `host-local`, a missing `gateway` is not defaulted to the subnet's first address:
//! the datapath decides what the pod's next hop is, and this crate does not invent
//! addresses. Only the addresses that can never be a pod's are skipped: the network
//! address (which for IPv6 is the subnet-router anycast address), the IPv4 broadcast
//! address and the configured gateway.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde_json::{Map, Value};

use crate::addr::{self, Family};
use crate::error::ConfigError;

/// A validated `ipam` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpamConfig {
    pub ranges: Vec<RangeSet>,
    /// Absolute; `<data_dir>/<network name>/` holds the network's reservations.
    pub data_dir: PathBuf,
}

/// Ranges of one family, tried in order; one address is allocated per set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSet {
    pub ranges: Vec<Range>,
}

/// One contiguous run of allocatable addresses inside a subnet. `range_start` and
/// `range_end` are inclusive and always filled in (defaults are derived from the subnet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub subnet: IpNet,
    pub range_start: IpAddr,
    pub range_end: IpAddr,
    pub gateway: Option<IpAddr>,
}

impl IpamConfig {
    /// Parses and validates the `ipam` object of a network configuration. Keys other than
    /// `ranges` and `dataDir` (`type`, `routes`, ...) belong to other layers and are ignored.
    /// `default_data_dir` is used when `dataDir` is absent.
    pub fn from_json(ipam: &Value, default_data_dir: &Path) -> Result<IpamConfig, ConfigError> {
        let obj = as_object(ipam, "ipam")?;
        let ranges = match obj.get("ranges") {
            Some(v) => parse_range_sets(v, "ipam.ranges")?,
            None if obj.contains_key("subnet") => {
                return Err(ConfigError::LegacyForm {
                    field: "ipam.subnet".into(),
                })
            }
            None => {
                return Err(ConfigError::Missing {
                    field: "ipam.ranges".into(),
                })
            }
        };
        validate_sets_as(&ranges, "ipam.ranges")?;

        let (data_dir, field) = match obj.get("dataDir") {
            None | Some(Value::Null) => (default_data_dir.to_path_buf(), "ipam.dataDir (default)"),
            Some(Value::String(s)) => (PathBuf::from(s), "ipam.dataDir"),
            Some(_) => {
                return Err(ConfigError::WrongType {
                    field: "ipam.dataDir".into(),
                    expected: "a string",
                })
            }
        };
        if !data_dir.is_absolute() {
            return Err(ConfigError::RelativeDataDir {
                field: field.into(),
                path: data_dir,
            });
        }
        Ok(IpamConfig { ranges, data_dir })
    }

    /// Like [`IpamConfig::from_json`], from the bytes of the `ipam` object.
    pub fn from_json_slice(
        ipam: &[u8],
        default_data_dir: &Path,
    ) -> Result<IpamConfig, ConfigError> {
        let value: Value = serde_json::from_slice(ipam).map_err(|e| ConfigError::Json {
            field: "ipam".into(),
            reason: e.to_string(),
        })?;
        IpamConfig::from_json(&value, default_data_dir)
    }
}

impl Range {
    /// A validated range; `range_start`/`range_end` default to the first and last usable
    /// addresses of the subnet. Fails when the subnet has host bits set, an address lies
    /// outside the subnet, the start is after the end, or no address would be usable.
    pub fn new(
        subnet: IpNet,
        range_start: Option<IpAddr>,
        range_end: Option<IpAddr>,
        gateway: Option<IpAddr>,
    ) -> Result<Range, ConfigError> {
        build_range("range", subnet, range_start, range_end, gateway)
    }

    pub fn family(&self) -> Family {
        Family::of_net(&self.subnet)
    }
}

impl RangeSet {
    pub fn new(ranges: Vec<Range>) -> RangeSet {
        RangeSet { ranges }
    }

    /// The family of the set's ranges (validation guarantees they agree).
    pub fn family(&self) -> Option<Family> {
        self.ranges.first().map(Range::family)
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} [{}-{}]",
            self.subnet, self.range_start, self.range_end
        )
    }
}

impl std::fmt::Display for RangeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Checks range sets built in code (or handed to the store) with the same rules as a
/// parsed configuration; errors name fields as `ranges[i][j].<field>`.
pub fn validate_range_sets(sets: &[RangeSet]) -> Result<(), ConfigError> {
    validate_sets_as(sets, "ranges")
}

fn validate_sets_as(sets: &[RangeSet], field: &str) -> Result<(), ConfigError> {
    if sets.is_empty() {
        return Err(ConfigError::NoRangeSets {
            field: field.into(),
        });
    }
    for (i, set) in sets.iter().enumerate() {
        let set_field = format!("{field}[{i}]");
        if set.ranges.is_empty() {
            return Err(ConfigError::EmptyRangeSet { field: set_field });
        }
        for (j, r) in set.ranges.iter().enumerate() {
            // Ranges may come from code with public fields; re-derive nothing, only check.
            let rf = format!("{set_field}[{j}]");
            build_range(
                &rf,
                r.subnet,
                Some(r.range_start),
                Some(r.range_end),
                r.gateway,
            )?;
            if Some(r.family()) != set.family() {
                return Err(ConfigError::MixedFamilies { field: rf });
            }
        }
    }

    // Every pair of same-family ranges, across and within sets, must be disjoint: an
    // address reachable from two ranges would make "which range did it come from" ambiguous.
    let all: Vec<(String, &Range)> = sets
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.ranges
                .iter()
                .enumerate()
                .map(move |(j, r)| (format!("{field}[{i}][{j}]"), r))
        })
        .collect();
    for (a, (fa, ra)) in all.iter().enumerate() {
        for (fb, rb) in all.iter().skip(a + 1) {
            if ra.family() == rb.family() && overlaps(ra, rb) {
                return Err(ConfigError::Overlap {
                    field: fb.clone(),
                    other: fa.clone(),
                });
            }
        }
    }

    for (i, set) in sets.iter().enumerate() {
        if let Some((k, _)) = sets
            .iter()
            .enumerate()
            .take(i)
            .find(|(_, other)| other.family() == set.family())
        {
            return Err(ConfigError::DuplicateFamily {
                field: format!("{field}[{i}]"),
                other: format!("{field}[{k}]"),
                family: set.family().map(|f| f.to_string()).unwrap_or_default(),
            });
        }
    }
    Ok(())
}

fn overlaps(a: &Range, b: &Range) -> bool {
    let (sa, ea) = (addr::to_u128(a.range_start), addr::to_u128(a.range_end));
    let (sb, eb) = (addr::to_u128(b.range_start), addr::to_u128(b.range_end));
    sa <= eb && sb <= ea
}

fn build_range(
    field: &str,
    subnet: IpNet,
    start: Option<IpAddr>,
    end: Option<IpAddr>,
    gateway: Option<IpAddr>,
) -> Result<Range, ConfigError> {
    if subnet.trunc() != subnet {
        return Err(ConfigError::SubnetHostBits {
            field: format!("{field}.subnet"),
            value: subnet,
            network: subnet.trunc(),
        });
    }
    let (first, last) = default_bounds(&subnet).ok_or_else(|| ConfigError::SubnetTooSmall {
        field: format!("{field}.subnet"),
        subnet,
    })?;
    let check_inside = |name: &str, a: IpAddr| -> Result<IpAddr, ConfigError> {
        if Family::of(a) != Family::of_net(&subnet) {
            return Err(ConfigError::FamilyMismatch {
                field: format!("{field}.{name}"),
                address: a,
                subnet,
            });
        }
        if !subnet.contains(&a) {
            return Err(ConfigError::OutsideSubnet {
                field: format!("{field}.{name}"),
                address: a,
                subnet,
            });
        }
        Ok(a)
    };
    let range_start = match start {
        Some(a) => check_inside("rangeStart", a)?,
        None => first,
    };
    let range_end = match end {
        Some(a) => check_inside("rangeEnd", a)?,
        None => last,
    };
    let gateway = gateway.map(|g| check_inside("gateway", g)).transpose()?;
    if addr::to_u128(range_start) > addr::to_u128(range_end) {
        return Err(ConfigError::StartAfterEnd {
            field: field.into(),
            start: range_start,
            end: range_end,
        });
    }
    let range = Range {
        subnet,
        range_start,
        range_end,
        gateway,
    };
    if range.usable_count() == 0 {
        return Err(ConfigError::NoUsableAddress {
            field: field.into(),
            range: range.to_string(),
        });
    }
    Ok(range)
}

/// The first and last addresses a pod could get in `subnet` (skipping the network address
/// and, for IPv4, the broadcast address), or `None` when there are none.
fn default_bounds(subnet: &IpNet) -> Option<(IpAddr, IpAddr)> {
    let network = subnet.network();
    let first = addr::next(network)?;
    let last = match subnet {
        IpNet::V4(_) => addr::prev(subnet.broadcast())?,
        IpNet::V6(_) => subnet.broadcast(),
    };
    let ok = subnet.contains(&first)
        && subnet.contains(&last)
        && addr::to_u128(first) <= addr::to_u128(last);
    ok.then_some((first, last))
}

fn as_object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, ConfigError> {
    v.as_object().ok_or_else(|| ConfigError::WrongType {
        field: field.into(),
        expected: "an object",
    })
}

fn as_array<'a>(v: &'a Value, field: &str) -> Result<&'a Vec<Value>, ConfigError> {
    v.as_array().ok_or_else(|| ConfigError::WrongType {
        field: field.into(),
        expected: "an array",
    })
}

fn parse_range_sets(v: &Value, field: &str) -> Result<Vec<RangeSet>, ConfigError> {
    let sets = as_array(v, field)?;
    if sets.is_empty() {
        return Err(ConfigError::NoRangeSets {
            field: field.into(),
        });
    }
    sets.iter()
        .enumerate()
        .map(|(i, set)| {
            let set_field = format!("{field}[{i}]");
            let ranges = as_array(set, &set_field)?;
            if ranges.is_empty() {
                return Err(ConfigError::EmptyRangeSet { field: set_field });
            }
            let ranges = ranges
                .iter()
                .enumerate()
                .map(|(j, r)| parse_range(r, &format!("{set_field}[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RangeSet { ranges })
        })
        .collect()
}

fn parse_range(v: &Value, field: &str) -> Result<Range, ConfigError> {
    let obj = as_object(v, field)?;
    let subnet_field = format!("{field}.subnet");
    let subnet_text =
        optional_string(obj, "subnet", field)?.ok_or_else(|| ConfigError::Missing {
            field: subnet_field.clone(),
        })?;
    let subnet: IpNet = subnet_text.parse().map_err(|_| ConfigError::BadSubnet {
        field: subnet_field,
        value: subnet_text.to_string(),
    })?;
    let address = |key: &str| -> Result<Option<IpAddr>, ConfigError> {
        optional_string(obj, key, field)?
            .map(|text| {
                text.parse().map_err(|_| ConfigError::BadAddress {
                    field: format!("{field}.{key}"),
                    value: text.to_string(),
                })
            })
            .transpose()
    };
    let start = address("rangeStart")?;
    let end = address("rangeEnd")?;
    let gateway = address("gateway")?;
    build_range(field, subnet, start, end, gateway)
}

/// A string member, treating `null` as absent (as `host-local` does).
fn optional_string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a str>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(ConfigError::WrongType {
            field: format!("{field}.{key}"),
            expected: "a string",
        }),
    }
}

#[cfg(test)]
mod tests;

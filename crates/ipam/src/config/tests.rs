use std::net::IpAddr;
use std::path::Path;

use serde_json::json;

use super::*;

const DEFAULT: &str = "/var/lib/weft/ipam";

fn parse(v: Value) -> Result<IpamConfig, ConfigError> {
    IpamConfig::from_json(&v, Path::new(DEFAULT))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Asserts that parsing fails and that the error's message names `field`.
fn rejects(v: Value, field: &str) -> ConfigError {
    let err = parse(v).expect_err("configuration should be rejected");
    assert!(
        err.to_string().starts_with(&format!("{field}: ")),
        "error {err:?} does not name {field}"
    );
    err
}

#[test]
fn minimal_ipv4_gets_defaults() {
    let cfg = parse(json!({"type": "weft", "ranges": [[{"subnet": "10.244.1.0/24"}]]})).unwrap();
    assert_eq!(cfg.data_dir, Path::new(DEFAULT));
    assert_eq!(cfg.ranges.len(), 1);
    let r = &cfg.ranges[0].ranges[0];
    assert_eq!(r.subnet, "10.244.1.0/24".parse::<IpNet>().unwrap());
    assert_eq!(r.range_start, ip("10.244.1.1"));
    assert_eq!(r.range_end, ip("10.244.1.254"));
    assert_eq!(r.gateway, None, "no invented gateway");
}

#[test]
fn dual_stack_with_every_field() {
    let cfg = parse(json!({
        "ranges": [
            [{"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"}],
            [{"subnet": "fd00:10:244:1::/64", "rangeStart": "fd00:10:244:1::10",
              "rangeEnd": "fd00:10:244:1::ff", "gateway": "fd00:10:244:1::1"}]
        ],
        "dataDir": "/run/weft/ipam",
        "routes": [{"dst": "0.0.0.0/0"}]
    }))
    .unwrap();
    assert_eq!(cfg.data_dir, Path::new("/run/weft/ipam"));
    let v6 = &cfg.ranges[1].ranges[0];
    assert_eq!(v6.range_start, ip("fd00:10:244:1::10"));
    assert_eq!(v6.range_end, ip("fd00:10:244:1::ff"));
    assert_eq!(v6.gateway, Some(ip("fd00:10:244:1::1")));
    assert_eq!(cfg.ranges[1].family(), Some(Family::V6));
}

#[test]
fn ipv6_default_end_is_the_last_address() {
    let cfg = parse(json!({"ranges": [[{"subnet": "fd00::/120"}]]})).unwrap();
    let r = &cfg.ranges[0].ranges[0];
    assert_eq!(r.range_start, ip("fd00::1"));
    assert_eq!(r.range_end, ip("fd00::ff"));
}

#[test]
fn several_ranges_in_one_set() {
    let cfg = parse(json!({"ranges": [[
        {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.10", "rangeEnd": "10.0.0.20"},
        {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.50", "rangeEnd": "10.0.0.60"},
        {"subnet": "10.9.0.0/24"}
    ]]}))
    .unwrap();
    assert_eq!(cfg.ranges[0].ranges.len(), 3);
}

#[test]
fn start_or_end_outside_the_subnet() {
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24", "rangeStart": "10.0.1.5"}]]}),
        "ipam.ranges[0][0].rangeStart",
    );
    assert!(matches!(err, ConfigError::OutsideSubnet { .. }));
    rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "fd00::/64", "rangeEnd": "fd01::1"}]]}),
        "ipam.ranges[1][0].rangeEnd",
    );
    rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24", "gateway": "10.0.1.1"}]]}),
        "ipam.ranges[0][0].gateway",
    );
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24", "rangeStart": "fd00::1"}]]}),
        "ipam.ranges[0][0].rangeStart",
    );
    assert!(matches!(err, ConfigError::FamilyMismatch { .. }));
}

#[test]
fn start_after_end() {
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.9", "rangeEnd": "10.0.0.8"}]]}),
        "ipam.ranges[0][0]",
    );
    assert!(matches!(err, ConfigError::StartAfterEnd { .. }));
}

#[test]
fn overlapping_ranges_are_refused() {
    let err = rejects(
        json!({"ranges": [[
            {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.10", "rangeEnd": "10.0.0.20"},
            {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.20", "rangeEnd": "10.0.0.30"}
        ]]}),
        "ipam.ranges[0][1]",
    );
    assert_eq!(
        err,
        ConfigError::Overlap {
            field: "ipam.ranges[0][1]".into(),
            other: "ipam.ranges[0][0]".into()
        }
    );
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/16"}], [{"subnet": "10.0.5.0/24"}]]}),
        "ipam.ranges[1][0]",
    );
    assert!(matches!(err, ConfigError::Overlap { .. }));
}

#[test]
fn one_range_set_per_family() {
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "fd00::/64"}], [{"subnet": "10.1.0.0/24"}]]}),
        "ipam.ranges[2]",
    );
    assert!(
        matches!(&err, ConfigError::DuplicateFamily { other, family, .. } if other == "ipam.ranges[0]" && family == "IPv4"),
        "{err:?}"
    );
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24"}, {"subnet": "fd00::/64"}]]}),
        "ipam.ranges[0][1]",
    );
    assert!(matches!(err, ConfigError::MixedFamilies { .. }));
}

#[test]
fn empty_or_missing_ranges() {
    assert!(matches!(
        rejects(json!({"ranges": []}), "ipam.ranges"),
        ConfigError::NoRangeSets { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"subnet": "10.0.0.0/24"}], []]}),
            "ipam.ranges[1]"
        ),
        ConfigError::EmptyRangeSet { .. }
    ));
    assert!(matches!(
        rejects(json!({"type": "weft"}), "ipam.ranges"),
        ConfigError::Missing { .. }
    ));
    assert!(matches!(
        rejects(json!({"subnet": "10.0.0.0/24"}), "ipam.subnet"),
        ConfigError::LegacyForm { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"rangeStart": "10.0.0.1"}]]}),
            "ipam.ranges[0][0].subnet"
        ),
        ConfigError::Missing { .. }
    ));
}

#[test]
fn subnets_too_small_for_a_pod() {
    for subnet in ["10.0.0.0/31", "10.0.0.1/32", "fd00::/128"] {
        let err = rejects(
            json!({"ranges": [[{"subnet": subnet}]]}),
            "ipam.ranges[0][0].subnet",
        );
        assert!(
            matches!(err, ConfigError::SubnetTooSmall { .. }),
            "{subnet}: {err:?}"
        );
    }
    // The smallest that work: a /30 has two, a /127 one (the other is the anycast address).
    parse(json!({"ranges": [[{"subnet": "10.0.0.0/30"}]]})).unwrap();
    let cfg = parse(json!({"ranges": [[{"subnet": "fd00::/127"}]]})).unwrap();
    assert_eq!(cfg.ranges[0].ranges[0].range_start, ip("fd00::1"));
    // A range holding only the gateway (or only skipped addresses) is useless too.
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/30", "gateway": "10.0.0.1", "rangeEnd": "10.0.0.1"}]]}),
        "ipam.ranges[0][0]",
    );
    assert!(
        matches!(err, ConfigError::NoUsableAddress { .. }),
        "{err:?}"
    );
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.255", "rangeEnd": "10.0.0.255"}]]}),
        "ipam.ranges[0][0]",
    );
    assert!(
        matches!(err, ConfigError::NoUsableAddress { .. }),
        "{err:?}"
    );
}

#[test]
fn malformed_values_name_their_field() {
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"subnet": "10.0.0.0/33"}]]}),
            "ipam.ranges[0][0].subnet"
        ),
        ConfigError::BadSubnet { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"subnet": "10.0.0.5/24"}]]}),
            "ipam.ranges[0][0].subnet"
        ),
        ConfigError::SubnetHostBits { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"subnet": "10.0.0.0/24", "gateway": "10.0.0.x"}]]}),
            "ipam.ranges[0][0].gateway"
        ),
        ConfigError::BadAddress { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [[{"subnet": 10}]]}),
            "ipam.ranges[0][0].subnet"
        ),
        ConfigError::WrongType { .. }
    ));
    assert!(matches!(
        rejects(
            json!({"ranges": [{"subnet": "10.0.0.0/24"}]}),
            "ipam.ranges[0]"
        ),
        ConfigError::WrongType { .. }
    ));
    assert!(matches!(
        rejects(json!({"ranges": [["10.0.0.0/24"]]}), "ipam.ranges[0][0]"),
        ConfigError::WrongType { .. }
    ));
    assert!(matches!(
        rejects(json!([]), "ipam"),
        ConfigError::WrongType { .. }
    ));
    assert!(matches!(
        IpamConfig::from_json_slice(b"{\"ranges\": [", Path::new(DEFAULT)),
        Err(ConfigError::Json { .. })
    ));
    // null means "not set", as in host-local.
    let cfg =
        parse(json!({"ranges": [[{"subnet": "10.0.0.0/24", "gateway": null}]], "dataDir": null}))
            .unwrap();
    assert_eq!(cfg.ranges[0].ranges[0].gateway, None);
}

#[test]
fn data_dir_must_be_absolute() {
    let err = rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24"}]], "dataDir": "var/lib/ipam"}),
        "ipam.dataDir",
    );
    assert!(matches!(err, ConfigError::RelativeDataDir { .. }));
    rejects(
        json!({"ranges": [[{"subnet": "10.0.0.0/24"}]], "dataDir": ""}),
        "ipam.dataDir",
    );
    let err = IpamConfig::from_json(
        &json!({"ranges": [[{"subnet": "10.0.0.0/24"}]]}),
        Path::new("relative/default"),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("ipam.dataDir (default): "),
        "{err}"
    );
}

#[test]
fn ranges_built_in_code_are_validated_the_same_way() {
    let r = Range::new(
        "10.0.0.0/24".parse().unwrap(),
        None,
        None,
        Some(ip("10.0.0.1")),
    )
    .unwrap();
    validate_range_sets(&[RangeSet::new(vec![r.clone()])]).unwrap();
    let err = validate_range_sets(&[
        RangeSet::new(vec![r.clone()]),
        RangeSet::new(vec![r.clone()]),
    ])
    .unwrap_err();
    assert!(matches!(err, ConfigError::Overlap { .. }), "{err:?}");
    let mut bad = r;
    bad.range_end = ip("10.0.1.9");
    let err = validate_range_sets(&[RangeSet::new(vec![bad])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ranges[0][0].rangeEnd: 10.0.1.9 is outside subnet 10.0.0.0/24"
    );
    assert!(Range::new(
        "10.0.0.0/24".parse().unwrap(),
        Some(ip("10.0.0.9")),
        Some(ip("10.0.0.8")),
        None
    )
    .is_err());
}

#[test]
fn usable_counts_and_candidate_order() {
    let r = Range::new(
        "10.0.0.0/29".parse().unwrap(),
        Some(ip("10.0.0.0")),
        Some(ip("10.0.0.7")),
        Some(ip("10.0.0.3")),
    )
    .unwrap();
    assert_eq!(r.usable_count(), 5);
    let set = RangeSet::new(vec![r]);
    let order: Vec<IpAddr> = set.candidates_after(Some(ip("10.0.0.4"))).collect();
    assert_eq!(
        order,
        ["10.0.0.5", "10.0.0.6", "10.0.0.1", "10.0.0.2", "10.0.0.4"]
            .map(ip)
            .to_vec()
    );
    // A cursor outside the set starts at the beginning.
    let order: Vec<IpAddr> = set.candidates_after(Some(ip("192.0.2.1"))).collect();
    assert_eq!(order.first(), Some(&ip("10.0.0.1")));
    // Huge IPv6 ranges neither overflow nor enumerate eagerly.
    let big = Range::new("fd00::/64".parse().unwrap(), None, None, None).unwrap();
    assert_eq!(big.usable_count(), (1u128 << 64) - 1);
    let set = RangeSet::new(vec![big]);
    let last = ip("fd00::ffff:ffff:ffff:ffff");
    let wrapped: Vec<IpAddr> = set.candidates_after(Some(last)).take(2).collect();
    assert_eq!(wrapped, vec![ip("fd00::1"), ip("fd00::2")]);
    let whole = Range::new("::/0".parse().unwrap(), None, None, None).unwrap();
    assert_eq!(whole.usable_count(), u128::MAX);
}

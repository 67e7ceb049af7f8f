//! Random valid results survive every supported version, and conversions between versions
//! lose only what the older version cannot carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::prelude::*;
use weft_cni::{CniResult, Dns, Interface, IpConfig, NetConf, Route, Version, SUPPORTED_VERSIONS};

fn ip_addr() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|bits| IpAddr::V4(Ipv4Addr::from(bits))),
        any::<u128>().prop_map(|bits| IpAddr::V6(Ipv6Addr::from(bits))),
    ]
}

fn ip_net() -> impl Strategy<Value = IpNet> {
    prop_oneof![
        (any::<u32>(), 0u8..=32).prop_filter_map("v4 prefix", |(bits, len)| {
            Ipv4Net::new(Ipv4Addr::from(bits), len).ok().map(IpNet::V4)
        }),
        (any::<u128>(), 0u8..=128).prop_filter_map("v6 prefix", |(bits, len)| {
            Ipv6Net::new(Ipv6Addr::from(bits), len).ok().map(IpNet::V6)
        }),
    ]
}

/// Optional text is never empty: the protocol treats "" and absent alike.
fn text() -> impl Strategy<Value = String> {
    any::<String>().prop_filter("non-empty", |s| !s.is_empty())
}

fn interface() -> impl Strategy<Value = Interface> {
    (
        any::<String>(),
        proptest::option::of(text()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
    )
        .prop_map(|(name, mac, mtu, sandbox, socket_path, pci_id)| Interface {
            name,
            mac,
            mtu,
            sandbox,
            socket_path,
            pci_id,
        })
}

fn ip_config() -> impl Strategy<Value = IpConfig> {
    (
        ip_net(),
        proptest::option::of(ip_addr()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(address, gateway, interface)| IpConfig {
            address,
            gateway,
            interface: interface.map(|i| i as usize),
        })
}

fn route() -> impl Strategy<Value = Route> {
    (
        ip_net(),
        proptest::option::of(ip_addr()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(dst, gw, mtu, advmss, priority, table, scope)| Route {
            dst,
            gw,
            mtu,
            advmss,
            priority,
            table,
            scope,
        })
}

fn dns() -> impl Strategy<Value = Dns> {
    (
        prop::collection::vec(any::<String>(), 0..3),
        proptest::option::of(text()),
        prop::collection::vec(any::<String>(), 0..3),
        prop::collection::vec(any::<String>(), 0..3),
    )
        .prop_map(|(nameservers, domain, search, options)| Dns {
            nameservers,
            domain,
            search,
            options,
        })
}

fn version() -> impl Strategy<Value = Version> {
    prop::sample::select(SUPPORTED_VERSIONS.to_vec())
}

fn result() -> impl Strategy<Value = CniResult> {
    (
        version(),
        prop::collection::vec(interface(), 0..4),
        prop::collection::vec(ip_config(), 0..4),
        prop::collection::vec(route(), 0..4),
        dns(),
    )
        .prop_map(|(cni_version, interfaces, ips, routes, dns)| CniResult {
            cni_version,
            interfaces,
            ips,
            routes,
            dns,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn same_version_round_trip_is_exact_for_1_x(result in result()) {
        for version in [Version::V1_0_0, Version::V1_1_0] {
            let reread = CniResult::from_slice(result.to_json(version).as_bytes()).unwrap();
            let mut expected = result.clone();
            expected.cni_version = version;
            prop_assert_eq!(reread, expected);
        }
    }

    #[test]
    fn every_version_keeps_what_it_can_carry(result in result(), target in version()) {
        let reread = CniResult::from_slice(result.to_json(target).as_bytes()).unwrap();
        prop_assert_eq!(&reread, &result.as_version(target));
        // 0.4.0 keeps everything except the 1.1 interface fields.
        if target == Version::V0_4_0 {
            prop_assert_eq!(&reread.ips, &result.ips);
            prop_assert_eq!(&reread.routes, &result.routes);
            prop_assert_eq!(&reread.dns, &result.dns);
        }
    }

    #[test]
    fn chains_of_conversions(result in result()) {
        // 0.4.0 -> 1.0.0 -> 1.1.0 -> 0.4.0 lands where a single trip to 0.4.0 does.
        let mut current = result.clone();
        for version in [Version::V0_4_0, Version::V1_0_0, Version::V1_1_0, Version::V0_4_0] {
            current = CniResult::from_slice(current.to_json(version).as_bytes()).unwrap();
        }
        prop_assert_eq!(current, result.as_version(Version::V0_4_0));
    }

    #[test]
    fn prev_result_inside_a_config(result in result(), config_version in version()) {
        // A chained plugin reads prevResult in the config's version and writes it back unchanged.
        let mut config = NetConf::new(config_version, "net", "weft-guard");
        config.prev_result = Some(result.as_version(config_version));
        let reread = NetConf::from_slice(config.to_json().as_bytes()).unwrap();
        prop_assert_eq!(reread.prev_result, config.prev_result);
    }
}

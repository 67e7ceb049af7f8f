use crate::common::{strings, veth_in, Ns};
use serde_json::Value;
use weft_netlink::{AddrFlags, Error, IpFamily, RouteSpec, Scope, VethSpec};

fn route_to<'a>(routes: &'a Value, dst: &str) -> Option<&'a Value> {
    routes.as_array()?.iter().find(|r| r["dst"] == dst)
}

#[test]
fn host_routes_with_scope_link_v4_and_v6() {
    let node = Ns::new("rt");
    let mut handle = node.handle();
    let (name, index) = veth_in(&node, &mut handle);
    let v4 = RouteSpec {
        oif: Some(index),
        scope: Scope::Link,
        ..RouteSpec::new("10.244.1.5/32".parse().unwrap())
    };
    let v6 = RouteSpec {
        oif: Some(index),
        ..RouteSpec::new("2001:db8:1::5/128".parse().unwrap())
    };
    handle.add_route(&v4).unwrap();
    handle.add_route(&v6).unwrap();

    let shown = node.ip(&["-4", "route", "show", "table", "main"]);
    let route = route_to(&shown, "10.244.1.5").expect("v4 host route");
    assert_eq!(route["dev"], name.as_str());
    assert_eq!(route["scope"], "link");
    let shown6 = node.ip(&["-6", "route", "show", "table", "main"]);
    let route6 = route_to(&shown6, "2001:db8:1::5").expect("v6 host route");
    assert_eq!(route6["dev"], name.as_str());

    let ours = handle.routes(IpFamily::V4).unwrap();
    let mine = ours.iter().find(|r| r.dst == v4.dst).expect("in our dump");
    assert_eq!(
        (mine.oif, mine.scope, mine.gateway),
        (Some(index), Scope::Link, None)
    );
    assert_eq!(mine.table, weft_netlink::MAIN_TABLE);
    let ours6 = handle.routes(IpFamily::V6).unwrap();
    assert!(ours6
        .iter()
        .any(|r| r.dst == v6.dst && r.oif == Some(index)));
    assert!(ours6.iter().all(|r| r.dst.addr().is_ipv6()));

    // Duplicates, replace, delete.
    let err = handle.add_route(&v4).unwrap_err();
    assert!(matches!(err, Error::Exists { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("add route 10.244.1.5/32 dev {name}: File exists")
    );
    handle.replace_route(&v4).unwrap();
    handle.delete_route(&v4).unwrap();
    handle.delete_route(&v6).unwrap();
    assert!(route_to(&node.ip(&["-4", "route", "show"]), "10.244.1.5").is_none());
    assert!(route_to(&node.ip(&["-6", "route", "show"]), "2001:db8:1::5").is_none());
    let err = handle.delete_route(&v4).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

/// The pod side of a routed CNI: a /32 and /128 on eth0 and default routes through
/// link-local gateways that answer with the host end's MAC.
#[test]
fn pod_default_routes_via_on_link_link_local_gateways() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let host_name = weft_testkit::unique_name("wf");
    node.handle()
        .create_veth(&VethSpec {
            name: &host_name,
            peer_name: "eth0",
            peer_netns: Some(&pod.netns),
            up: true,
            ..Default::default()
        })
        .unwrap();
    let mut handle = pod.handle();
    let eth0 = handle.link_by_name("eth0").unwrap().unwrap().index;
    handle.set_up(eth0).unwrap();
    let nodad = AddrFlags { nodad: true };
    handle
        .add_address(eth0, "10.244.1.5/32".parse().unwrap(), nodad)
        .unwrap();
    handle
        .add_address(eth0, "2001:db8:1::5/128".parse().unwrap(), nodad)
        .unwrap();

    for gateway in ["169.254.1.1", "fe80::1"] {
        let gateway: std::net::IpAddr = gateway.parse().unwrap();
        let dst = if gateway.is_ipv4() {
            "0.0.0.0/0"
        } else {
            "::/0"
        };
        handle
            .add_route(&RouteSpec {
                gateway: Some(gateway),
                oif: Some(eth0),
                onlink: true,
                ..RouteSpec::new(dst.parse().unwrap())
            })
            .unwrap();
    }

    let v4 = node_default(&pod, "-4");
    assert_eq!(v4["gateway"], "169.254.1.1");
    assert_eq!(v4["dev"], "eth0");
    assert!(
        strings(&v4["flags"]).contains(&"onlink".to_string()),
        "{v4}"
    );
    let v6 = node_default(&pod, "-6");
    assert_eq!(v6["gateway"], "fe80::1");
    assert_eq!(v6["dev"], "eth0");

    let ours = handle.routes(IpFamily::V4).unwrap();
    let default = ours
        .iter()
        .find(|r| r.dst.prefix_len() == 0)
        .expect("v4 default");
    assert_eq!(default.gateway, Some("169.254.1.1".parse().unwrap()));
    assert_eq!(default.oif, Some(eth0));
    assert!(default.onlink);
    let ours6 = handle.routes(IpFamily::V6).unwrap();
    let default6 = ours6
        .iter()
        .find(|r| r.dst.prefix_len() == 0)
        .expect("v6 default");
    assert_eq!(default6.gateway, Some("fe80::1".parse().unwrap()));
    assert_eq!(default6.oif, Some(eth0));

    // The kernel resolves the default route through the gateway on eth0.
    let got = pod.ip(&["route", "get", "203.0.113.9"]);
    assert_eq!(got[0]["gateway"], "169.254.1.1");
    let got6 = pod.ip(&["route", "get", "2001:db8:ff::9"]);
    assert_eq!(got6[0]["gateway"], "fe80::1");
    assert_eq!(got6[0]["dev"], "eth0");
}

fn node_default(ns: &Ns, family: &str) -> Value {
    let shown = ns.ip(&[family, "route", "show", "default"]);
    shown[0].clone()
}

/// The alternative to onlink: a link-scope host route to the gateway first.
#[test]
fn default_route_through_a_link_scope_gateway_route() {
    let pod = Ns::new("pd");
    let mut handle = pod.handle();
    let (name, index) = veth_in(&pod, &mut handle);
    handle
        .add_route(&RouteSpec {
            oif: Some(index),
            scope: Scope::Link,
            ..RouteSpec::new("169.254.1.1/32".parse().unwrap())
        })
        .unwrap();
    handle
        .add_route(&RouteSpec {
            gateway: Some("169.254.1.1".parse().unwrap()),
            oif: Some(index),
            ..RouteSpec::new("0.0.0.0/0".parse().unwrap())
        })
        .unwrap();
    let v4 = node_default(&pod, "-4");
    assert_eq!(v4["gateway"], "169.254.1.1");
    assert_eq!(v4["dev"], name.as_str());
    assert!(!strings(&v4["flags"]).contains(&"onlink".to_string()));
}

#[test]
fn other_tables_source_mtu_and_metric() {
    let node = Ns::new("rt");
    let mut handle = node.handle();
    let (_, index) = veth_in(&node, &mut handle);
    handle
        .add_address(
            index,
            "10.244.9.1/24".parse().unwrap(),
            AddrFlags::default(),
        )
        .unwrap();
    let spec = RouteSpec {
        oif: Some(index),
        src: Some("10.244.9.1".parse().unwrap()),
        table: Some(1000),
        mtu: Some(1400),
        metric: Some(50),
        ..RouteSpec::new("203.0.113.0/24".parse().unwrap())
    };
    handle.add_route(&spec).unwrap();

    let shown = node.ip(&["-4", "route", "show", "table", "1000"]);
    let route = route_to(&shown, "203.0.113.0/24").expect("route in table 1000");
    assert_eq!(route["prefsrc"], "10.244.9.1");
    assert_eq!(route["metric"], 50);
    assert_eq!(route["metrics"][0]["mtu"], 1400);
    assert!(route_to(
        &node.ip(&["-4", "route", "show", "table", "main"]),
        "203.0.113.0/24"
    )
    .is_none());

    let ours = handle.routes_in_table(IpFamily::V4, 1000).unwrap();
    assert_eq!(ours.len(), 1, "{ours:?}");
    let route = &ours[0];
    assert_eq!(route.table, 1000);
    assert_eq!(route.src, Some("10.244.9.1".parse().unwrap()));
    assert_eq!(route.mtu, Some(1400));
    assert_eq!(route.metric, Some(50));
    assert!(!handle
        .routes(IpFamily::V4)
        .unwrap()
        .iter()
        .any(|r| r.dst == spec.dst));

    assert!(handle
        .routes_in_table(IpFamily::V6, 4242)
        .unwrap()
        .is_empty());
    handle.delete_route(&spec).unwrap();
    assert!(handle
        .routes_in_table(IpFamily::V4, 1000)
        .unwrap()
        .is_empty());
}

#[test]
fn route_errors_name_the_route_and_the_kernel_reason() {
    let node = Ns::new("rt");
    let mut handle = node.handle();
    let err = handle
        .add_route(&RouteSpec {
            oif: Some(999_999),
            ..RouteSpec::new("10.1.0.0/16".parse().unwrap())
        })
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("add route 10.1.0.0/16 dev with index 999999: "),
        "{err}"
    );

    let err = handle
        .add_route(&RouteSpec {
            gateway: Some("203.0.113.1".parse().unwrap()),
            ..RouteSpec::new("10.2.0.0/16".parse().unwrap())
        })
        .unwrap_err();
    assert!(matches!(err, Error::Kernel { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("add route 10.2.0.0/16 via 203.0.113.1: "),
        "{err}"
    );
}

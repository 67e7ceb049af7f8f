//! Keeps the API free of hidden dumps: every single-object operation of a pod ADD is
//! exactly one request to the kernel.

use crate::common::Ns;
use weft_netlink::{AddrFlags, Handle, RouteSpec, Scope, VethSpec};

fn one_request<T>(handle: &mut Handle, what: &str, op: impl FnOnce(&mut Handle) -> T) -> T {
    let before = handle.requests_sent();
    let out = op(handle);
    assert_eq!(
        handle.requests_sent() - before,
        1,
        "{what} took more than one request"
    );
    out
}

#[test]
fn a_pod_add_is_one_request_per_object() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut host = node.handle();
    let mut inside = pod.handle();
    let name = weft_testkit::unique_name("wf");
    assert_eq!(host.requests_sent(), 0, "opening a handle sends nothing");

    let host_index = one_request(&mut host, "create veth", |h| {
        h.create_veth(&VethSpec {
            name: &name,
            mtu: Some(1450),
            up: true,
            peer_name: "eth0",
            peer_netns: Some(&pod.netns),
            ..Default::default()
        })
        .unwrap()
    });
    let eth0 = one_request(&mut inside, "find eth0", |h| {
        h.link_by_name("eth0").unwrap().unwrap()
    });
    one_request(&mut inside, "set eth0 up", |h| {
        h.set_up(eth0.index).unwrap()
    });
    let nodad = AddrFlags { nodad: true };
    for address in ["10.244.1.5/32", "2001:db8:1::5/128"] {
        one_request(&mut inside, "add address", |h| {
            h.add_address(eth0.index, address.parse().unwrap(), nodad)
                .unwrap()
        });
    }
    for (dst, gateway) in [("0.0.0.0/0", "169.254.1.1"), ("::/0", "fe80::1")] {
        one_request(&mut inside, "add default route", |h| {
            h.add_route(&RouteSpec {
                gateway: Some(gateway.parse().unwrap()),
                oif: Some(eth0.index),
                onlink: true,
                ..RouteSpec::new(dst.parse().unwrap())
            })
            .unwrap()
        });
    }
    for dst in ["10.244.1.5/32", "2001:db8:1::5/128"] {
        one_request(&mut host, "add host route", |h| {
            h.add_route(&RouteSpec {
                oif: Some(host_index),
                scope: Scope::Link,
                ..RouteSpec::new(dst.parse().unwrap())
            })
            .unwrap()
        });
    }
    one_request(&mut host, "permanent neighbour", |h| {
        h.add_neighbour(
            host_index,
            "10.244.1.5".parse().unwrap(),
            eth0.mac.unwrap(),
            true,
        )
        .unwrap()
    });
    one_request(&mut host, "delete by name", |h| {
        h.delete_link_by_name(&name).unwrap()
    });
    one_request(&mut host, "delete missing by name", |h| {
        h.delete_link_by_name(&name).unwrap()
    });
}

//! The two-node test cluster carries pod traffic on one node and across nodes, both
//! families, with today's datapath and with the first release's (the upgrade test's
//! starting point).

mod common;

use common::cluster::Cluster;
use common::legacy;
use weft_datapath::{Counter, Tables};

fn ping_all(cluster: &Cluster) {
    weft_testkit::require_tool("ping");
    let a = cluster.pod(1, 0);
    for peer in [cluster.pod(1, 1), cluster.pod(2, 0)] {
        for addr in peer.addrs() {
            let addr = addr.to_string();
            a.ns.exec_ok("ping", &["-c", "1", "-W", "5", &addr]);
        }
    }
}

#[test]
fn todays_datapath_carries_same_node_and_cross_node_traffic() {
    let cluster = Cluster::new([2, 1]);
    cluster.install();
    ping_all(&cluster);
    let n1 = Tables::open(cluster.node(1).root.path())
        .unwrap()
        .counters()
        .unwrap();
    let n2 = Tables::open(cluster.node(2).root.path())
        .unwrap()
        .counters()
        .unwrap();
    assert!(
        n1.get(Counter::Encap) >= 2 && n1.get(Counter::LocalDelivery) >= 4,
        "{n1:?}"
    );
    assert!(
        n2.get(Counter::DecapDelivery) >= 2 && n2.get(Counter::Encap) >= 2,
        "{n2:?}"
    );
    assert_eq!(n1.drops() + n2.drops(), 0);
}

#[test]
fn the_first_releases_datapath_carries_same_node_and_cross_node_traffic() {
    let cluster = Cluster::new([2, 1]);
    legacy::install(cluster.node(1), cluster.node(2));
    legacy::install(cluster.node(2), cluster.node(1));
    ping_all(&cluster);
}

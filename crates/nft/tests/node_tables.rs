//! The node agent's masquerade (ip, ip6) and notrack (inet) tables.

mod common;

use common::*;
use weft_nft::Family;

#[test]
fn nat_tables_install_and_read_back_exactly() {
    let (ns, sock) = netns_with_socket("na");
    let v4 = nat_spec(Family::Ip, "weft_nat", net("10.244.0.0/16"));
    let v6 = nat_spec(Family::Ip6, "weft_nat6", net("fd00:10:244::/56"));
    sock.replace_table(&v4).expect("install ip nat table");
    sock.replace_table(&v6).expect("install ip6 nat table");

    assert_eq!(
        lines(&nft(&ns, &["list", "table", "ip", "weft_nat"])),
        lines(
            "table ip weft_nat {
               chain postrouting {
                 type nat hook postrouting priority srcnat; policy accept;
                 ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade
               }
             }"
        )
    );
    assert_eq!(
        lines(&nft(&ns, &["list", "table", "ip6", "weft_nat6"])),
        lines(
            "table ip6 weft_nat6 {
               chain postrouting {
                 type nat hook postrouting priority srcnat; policy accept;
                 ip6 saddr fd00:10:244::/56 ip6 daddr != fd00:10:244::/56 masquerade
               }
             }"
        )
    );
    for spec in [&v4, &v6] {
        let read = sock
            .read_table(spec.table.family, &spec.table.name)
            .expect("read nat table");
        assert_eq!(read, Some(spec.normalized()));
    }
}

#[test]
fn raw_table_installs_and_reads_back_exactly() {
    let (ns, sock) = netns_with_socket("nr");
    let spec = raw_spec("weft_raw", 8472);
    sock.replace_table(&spec).expect("install raw table");

    assert_eq!(
        lines(&nft(&ns, &["list", "table", "inet", "weft_raw"])),
        lines(
            "table inet weft_raw {
               chain prerouting {
                 type filter hook prerouting priority raw; policy accept;
                 udp dport 8472 notrack
               }
               chain output {
                 type filter hook output priority raw; policy accept;
                 udp dport 8472 notrack
               }
             }"
        )
    );
    let read = sock
        .read_table(Family::Inet, "weft_raw")
        .expect("read raw table");
    assert_eq!(read, Some(spec.normalized()));
}

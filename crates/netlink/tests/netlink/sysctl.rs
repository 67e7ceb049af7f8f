use crate::common::{veth_in, Ns};
use weft_netlink::{read_sysctl, write_sysctl, Error};

#[test]
fn sysctls_are_written_inside_the_namespace_through_the_guard() {
    let ns = Ns::new("sc");
    let mut handle = ns.handle();
    let (veth, _) = veth_in(&ns, &mut handle);
    let outside_before = read_sysctl("net/ipv4/ip_forward").unwrap();
    let dad_key = format!("net/ipv6/conf/{veth}/accept_dad");
    {
        let _inside = ns.netns.enter().unwrap();
        assert_eq!(
            read_sysctl("net/ipv4/ip_forward").unwrap(),
            "0",
            "fresh namespace"
        );
        assert!(write_sysctl("net/ipv4/ip_forward", "1").unwrap(), "changed");
        assert!(
            !write_sysctl("net/ipv4/ip_forward", "1").unwrap(),
            "already set: no write"
        );
        assert_eq!(read_sysctl("net/ipv4/ip_forward").unwrap(), "1");

        write_sysctl(&dad_key, "0").unwrap();
        assert_eq!(read_sysctl(&dad_key).unwrap(), "0");
        assert!(!write_sysctl(
            "net/ipv4/ip_local_port_range",
            &read_sysctl("net/ipv4/ip_local_port_range")
                .unwrap()
                .replace('\t', " ")
        )
        .unwrap());

        let err = read_sysctl("net/ipv6/conf/weftnosuchif/accept_dad").unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        let err = write_sysctl("../etc/hostname", "x").unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
    let seen = ns.test.exec_ok("cat", &["/proc/sys/net/ipv4/ip_forward"]);
    assert_eq!(seen.stdout.trim(), "1");
    let seen = ns.test.exec_ok("cat", &[&format!("/proc/sys/{dad_key}")]);
    assert_eq!(seen.stdout.trim(), "0");
    assert_eq!(
        read_sysctl("net/ipv4/ip_forward").unwrap(),
        outside_before,
        "the thread's own namespace is untouched"
    );
}

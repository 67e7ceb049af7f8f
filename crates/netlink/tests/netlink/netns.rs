use crate::common::Ns;
use weft_netlink::{Error, Handle, Netns};

#[test]
fn missing_and_wrong_namespace_paths_are_typed_errors() {
    weft_testkit::require_root();
    let err = Netns::open("/var/run/netns/weft-no-such-namespace").unwrap_err();
    assert!(matches!(err, Error::NetnsNotFound { .. }), "{err:?}");
    assert!(err.is_not_found());
    assert!(
        err.to_string()
            .contains("/var/run/netns/weft-no-such-namespace"),
        "{err}"
    );

    let err = Netns::open("/proc/self/ns/mnt").unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

#[test]
fn guard_enters_and_restores_the_thread_namespace() {
    let ns = Ns::new("ns");
    let before = Netns::current().unwrap();
    assert!(!before.is_same(&ns.netns).unwrap());
    {
        let _guard = ns.netns.enter().unwrap();
        assert!(Netns::current().unwrap().is_same(&ns.netns).unwrap());
        // A handle made here is in the test namespace: only lo.
        let links = Handle::new().unwrap().links().unwrap();
        assert_eq!(links.len(), 1, "{links:?}");
    }
    assert!(Netns::current().unwrap().is_same(&before).unwrap());

    let guard = ns.netns.enter().unwrap();
    guard.restore().unwrap();
    assert!(Netns::current().unwrap().is_same(&before).unwrap());
}

#[test]
fn handle_in_a_namespace_stays_there_and_leaves_the_thread_alone() {
    let ns = Ns::new("ns");
    let before = Netns::current().unwrap();
    let mut handle = Handle::new_in(&ns.netns).unwrap();
    assert!(Netns::current().unwrap().is_same(&before).unwrap());
    let names: Vec<String> = handle
        .links()
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(names, vec!["lo".to_string()]);
}

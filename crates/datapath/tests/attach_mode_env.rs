//! `WEFT_ATTACH_MODE` is honoured by the plugin's and the agent's entry points that
//! take no explicit mode. Alone in its test binary, because it changes the
//! process environment.

mod common;

use common::hooks::{assert_weft_filter, tcx_ingress_programs, Node};
use common::{in_netns, PinRoot};
use weft_datapath::{pod, AttachMode, Datapath, Error, LinkChange, Program};

#[test]
fn the_environment_selects_the_mode_and_a_bad_value_is_refused() {
    let root = PinRoot::new("env");
    let node = Node::new(1);
    let vxlan = weft_testkit::unique_name("vx");
    node.ns.ip(&[
        "link", "add", &vxlan, "type", "vxlan", "id", "42", "dstport", "4789",
    ]);
    let path = root.path().to_path_buf();
    let host = node.host_veths[0].clone();

    std::env::set_var(AttachMode::ENV, "clsact");
    let ids = in_netns(node.ns.path(), {
        let (path, host, vxlan) = (path.clone(), host.clone(), vxlan.clone());
        move || {
            let dp = Datapath::load_or_adopt(&path).expect("load");
            assert_eq!(dp.attach_mode(), AttachMode::Clsact);
            assert_eq!(
                dp.attach_overlay(&vxlan).expect("overlay"),
                LinkChange::Created
            );
            let change = pod::attach_pod(&path, common::ifindex(&host), &host).expect("attach pod");
            assert_eq!(change, LinkChange::Created);
            assert_eq!(tcx_ingress_programs(&host), Vec::<u32>::new());
            assert_eq!(tcx_ingress_programs(&vxlan), Vec::<u32>::new());
            (
                dp.program(Program::FromPod).expect("from_pod").id,
                dp.program(Program::FromOverlay).expect("from_overlay").id,
            )
        }
    });
    assert_weft_filter(&node.ns, &host, &path, Program::FromPod, ids.0);
    assert_weft_filter(&node.ns, &vxlan, &path, Program::FromOverlay, ids.1);

    std::env::set_var(AttachMode::ENV, "clasct");
    in_netns(node.ns.path(), {
        let (path, host) = (path.clone(), host.clone());
        move || {
            assert!(matches!(
                Datapath::load_or_adopt(&path),
                Err(Error::InvalidAttachMode { .. })
            ));
            assert!(matches!(
                pod::attach_pod(&path, common::ifindex(&host), &host),
                Err(Error::InvalidAttachMode { .. })
            ));
            // DEL needs no mode, so a bad value never blocks cleanup.
            pod::detach_pod(&path, &host).expect("detach");
        }
    });
    std::env::remove_var(AttachMode::ENV);
}

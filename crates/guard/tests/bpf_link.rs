//! A BPF program on the netfilter LOCAL_OUT hook that runs before the fence is invisible
//! to nftables; the guard finds it through the BPF link table and refuses to call the pod
//! enforced. The kernel does not say which namespace a netfilter link is in, so while this
//! test holds its link (a fraction of a second) every fence on the node reads as not in
//! force: that is the fail-closed behaviour under test. It is the only test in this binary.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use weft_guard::commands::add::enforce;
use weft_guard::config::{Allowlist, GuardConfig};
use weft_guard::{Contract, GuardError};
use weft_testkit::{Netns, VethPair};

// From linux/bpf.h (6.4+); Debian 12's headers predate netfilter links.
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_NETFILTER: u32 = 32;
const BPF_NETFILTER: u32 = 45;
const NFPROTO_IPV4: u32 = 2;
const NF_INET_LOCAL_OUT: u32 = 3;

fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> io::Result<OwnedFd> {
    // SAFETY: attr is a valid buffer of the given length; the result is a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `r0 = NF_ACCEPT; exit`, attached to IPv4 LOCAL_OUT at `priority` in the calling
/// thread's namespace; detached when the returned fds are dropped.
fn netfilter_link(priority: i32) -> (OwnedFd, OwnedFd) {
    use std::os::fd::AsRawFd;
    let insns: [u8; 16] = [0xb7, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    let license = b"GPL\0";
    let mut load = [0u8; 128];
    load[0..4].copy_from_slice(&BPF_PROG_TYPE_NETFILTER.to_ne_bytes());
    load[4..8].copy_from_slice(&2u32.to_ne_bytes());
    load[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    load[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    load[68..72].copy_from_slice(&BPF_NETFILTER.to_ne_bytes());
    let prog = bpf(BPF_PROG_LOAD, &mut load).expect("load a netfilter program (Linux 6.4+)");
    let mut create = [0u8; 64];
    create[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
    create[8..12].copy_from_slice(&BPF_NETFILTER.to_ne_bytes());
    create[16..20].copy_from_slice(&NFPROTO_IPV4.to_ne_bytes());
    create[20..24].copy_from_slice(&NF_INET_LOCAL_OUT.to_ne_bytes());
    create[24..28].copy_from_slice(&priority.to_ne_bytes());
    let link = bpf(BPF_LINK_CREATE, &mut create).expect("create the netfilter link");
    (prog, link)
}

fn in_netns<T: Send>(ns: &Netns, work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let f = std::fs::File::open(ns.path()).expect("open netns");
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            work()
        })
        .join()
        .expect("thread")
    })
}

#[test]
fn a_bpf_program_ahead_of_the_fence_fails_verification() {
    weft_testkit::require_root();
    let pod = Netns::new("bp");
    let peer = Netns::new("bq");
    let veth = VethPair::new(&pod, &["192.0.2.10/24"], &peer, &[]);
    pod.ip(&["link", "set", &veth.a, "name", "eth0"]);
    pod.ip(&["link", "set", "eth0", "up"]);
    let state = std::env::temp_dir().join(format!("weft-guard-bpf-{}", std::process::id()));
    let config = GuardConfig {
        network: "bpfnet".into(),
        kubeconfig: None,
        namespaces: Allowlist::Only(vec![]),
        allow_root_proxy: false,
        api_connect_timeout: Duration::from_secs(1),
        api_timeout: Duration::from_secs(1),
        state_dir: PathBuf::from(&state),
        admission_guarantee: true,
    };
    let contract = Contract {
        proxy_uid: 1337,
        allow_cidrs: vec![],
        contract_version: 1,
    };
    let add = || enforce(&config, &contract, "bpfct", "eth0", pod.path(), None);

    // A program after the fence changes nothing.
    let later = in_netns(&pod, || netfilter_link(-100));
    add().expect("a later BPF program does not run first");
    drop(later);

    let earlier = in_netns(&pod, || netfilter_link(-300));
    let error = add().expect_err("a BPF program runs before the fence");
    drop(earlier);
    match &error {
        GuardError::NotVerified(msg) => {
            assert!(
                msg.contains("BPF netfilter link") && msg.contains("priority -300"),
                "{msg}"
            );
        }
        other => panic!("unexpected error: {other}"),
    }
    let listed = pod.exec("nft", &["list", "table", "inet", "weft_guard"]);
    assert!(!listed.success(), "the failed ADD rolled its table back");
    add().expect("without the link the fence verifies again");
    let _ = std::fs::remove_dir_all(&state);
}

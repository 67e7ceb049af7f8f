//! The clsact qdisc and bpf filters on its ingress, checked with `tc -j`: the qdisc
//! is created once, our filter is added, replaced in place, listed and deleted
//! exactly, and filters of other kinds (u32 with hash tables and actions, classic
//! BPF) are listed and left alone.

use crate::common::{veth_in, Ns};
use serde_json::Value;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use weft_netlink::{
    BpfFilterInfo, BpfFilterSpec, Error, Handle, Qdisc, TcFilter, BPF_FILTER_NAME_MAX, ETH_P_ALL,
};

const NAME: &str = "weft-test-filter";
const ETH_P_IP: u16 = 0x0800;

/// A loaded eBPF program, `r0 = 0; exit` (TC_ACT_OK), of type SCHED_CLS, and its id.
/// Loaded with a raw `bpf()` call so this crate's tests need no loader; it is freed
/// when its fd closes and no filter holds it any more.
struct Prog {
    fd: OwnedFd,
    id: u32,
}

impl Prog {
    fn load() -> Prog {
        const BPF_PROG_LOAD: libc::c_long = 5;
        const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
        const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;

        #[repr(C)]
        struct ProgLoadAttr {
            prog_type: u32,
            insn_cnt: u32,
            insns: u64,
            license: u64,
            log_level: u32,
            log_size: u32,
            log_buf: u64,
            kern_version: u32,
            prog_flags: u32,
            prog_name: [u8; 16],
        }
        #[repr(C)]
        struct InfoAttr {
            bpf_fd: u32,
            info_len: u32,
            info: u64,
        }

        // struct bpf_insn: code, dst/src registers, offset, immediate.
        let insns: [u64; 2] = [
            u64::from_ne_bytes([0xb7, 0, 0, 0, 0, 0, 0, 0]), // BPF_ALU64|BPF_MOV|BPF_K r0, 0
            u64::from_ne_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]), // BPF_JMP|BPF_EXIT
        ];
        let license = c"GPL";
        let mut prog_name = [0u8; 16];
        prog_name[..9].copy_from_slice(b"weft_test");
        let attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_SCHED_CLS,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 0,
            log_size: 0,
            log_buf: 0,
            kern_version: 0,
            prog_flags: 0,
            prog_name,
        };
        // SAFETY: `attr` and the buffers it points to outlive the call; the size
        // passed is the size of `attr`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_LOAD,
                &attr as *const ProgLoadAttr,
                std::mem::size_of::<ProgLoadAttr>(),
            )
        };
        assert!(
            fd >= 0,
            "BPF_PROG_LOAD: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: the kernel just returned this fd to us; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };

        // struct bpf_prog_info starts with `type`, then `id`.
        let mut info = [0u32; 2];
        let attr = InfoAttr {
            bpf_fd: std::os::fd::AsRawFd::as_raw_fd(&fd) as u32,
            info_len: std::mem::size_of_val(&info) as u32,
            info: info.as_mut_ptr() as u64,
        };
        // SAFETY: `attr` and `info` outlive the call; `info_len` is `info`'s size.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_OBJ_GET_INFO_BY_FD,
                &attr as *const InfoAttr,
                std::mem::size_of::<InfoAttr>(),
            )
        };
        assert_eq!(
            rc,
            0,
            "BPF_OBJ_GET_INFO_BY_FD: {}",
            std::io::Error::last_os_error()
        );
        Prog { fd, id: info[1] }
    }

    fn spec(&self, pref: u16, direct_action: bool) -> BpfFilterSpec<'_> {
        BpfFilterSpec {
            pref,
            protocol: ETH_P_ALL,
            handle: 1,
            prog_fd: self.fd.as_fd(),
            name: NAME,
            direct_action,
        }
    }
}

/// A test namespace with a veth in it; returns the veth's name and index.
fn setup(tag: &str) -> (Ns, Handle, String, u32) {
    weft_testkit::require_tool("tc");
    let ns = Ns::new(tag);
    let mut handle = ns.handle();
    let (dev, index) = veth_in(&ns, &mut handle);
    (ns, handle, dev, index)
}

/// Our filter as both the kernel's dump and `tc` should report it.
fn ours(pref: u16, prog_id: u32, direct_action: bool) -> TcFilter {
    TcFilter {
        pref,
        protocol: ETH_P_ALL,
        handle: 1,
        chain: 0,
        kind: "bpf".into(),
        bpf: Some(BpfFilterInfo {
            prog_id: Some(prog_id),
            name: Some(NAME.into()),
            direct_action,
        }),
    }
}

fn tc_ok(ns: &Ns, args: &[&str]) {
    ns.test.exec_ok("tc", args);
}

fn hex(text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    u32::from_str_radix(text.trim_start_matches("0x"), 16)
        .unwrap_or_else(|e| panic!("tc printed {text:?}, not hex: {e}"))
}

/// The ingress filters of `dev` as `tc -j filter show` prints them, in our type (the
/// per-pref headers, which carry no options, left out).
fn tc_filters(ns: &Ns, dev: &str) -> Vec<TcFilter> {
    let shown = ns.tc(&["filter", "show", "dev", dev, "ingress"]);
    let entries = shown.as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .filter_map(|entry| {
            let options = entry.get("options")?;
            let kind = entry["kind"].as_str().expect("kind").to_string();
            // bpf prints its handle as "0x1"; u32 as "htid:hash:node" in hex.
            let handle = match options.get("handle").and_then(Value::as_str) {
                Some(text) => hex(text),
                None => {
                    let fh = options["fh"].as_str().expect("u32 fh");
                    let mut parts = fh.split(':').map(hex);
                    let htid = parts.next().unwrap_or(0);
                    let hash = parts.next().unwrap_or(0);
                    let node = parts.next().unwrap_or(0);
                    (htid << 20) | (hash << 12) | node
                }
            };
            let bpf = (kind == "bpf").then(|| BpfFilterInfo {
                prog_id: options
                    .get("prog")
                    .and_then(|p| p["id"].as_u64())
                    .map(|id| id as u32),
                name: options
                    .get("bpf_name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                direct_action: options
                    .get("direct-action")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
            Some(TcFilter {
                pref: entry["pref"].as_u64().expect("pref") as u16,
                protocol: match entry["protocol"].as_str().expect("protocol") {
                    "all" => ETH_P_ALL,
                    "ip" => ETH_P_IP,
                    other => panic!("unexpected protocol {other}"),
                },
                handle,
                chain: entry["chain"].as_u64().unwrap_or(0) as u32,
                kind,
                bpf,
            })
        })
        .collect()
}

fn prefs_and_kinds(filters: &[TcFilter]) -> Vec<(u16, &str)> {
    filters.iter().map(|f| (f.pref, f.kind.as_str())).collect()
}

#[test]
fn clsact_is_created_once_and_listed_with_the_qdiscs() {
    let (ns, mut handle, dev, index) = setup("tq");
    assert!(handle.ensure_clsact(index).expect("add clsact"), "created");
    assert!(
        !handle.ensure_clsact(index).expect("add clsact again"),
        "already there"
    );

    let shown = ns.tc(&["qdisc", "show", "dev", &dev]);
    let clsacts: Vec<&Value> = shown
        .as_array()
        .expect("qdiscs")
        .iter()
        .filter(|q| q["kind"] == "clsact")
        .collect();
    assert_eq!(clsacts.len(), 1, "{shown}");
    assert_eq!(clsacts[0]["handle"], "ffff:");
    assert_eq!(clsacts[0]["parent"], "ffff:fff1");

    // The whole namespace's qdiscs, as tc lists them.
    let mut ours: Vec<Qdisc> = handle.qdiscs().expect("list qdiscs");
    let mut theirs: Vec<Qdisc> = ns
        .tc(&["qdisc", "show"])
        .as_array()
        .expect("qdiscs")
        .iter()
        .map(|q| {
            let dev = q["dev"].as_str().expect("dev");
            let major_minor = |text: &str| {
                let (major, minor) = text.split_once(':').expect("major:minor");
                (hex(major) << 16) | hex(minor)
            };
            Qdisc {
                index: handle.link_by_name(dev).unwrap().expect("dev").index,
                handle: major_minor(q["handle"].as_str().expect("handle")),
                parent: match q.get("parent").and_then(Value::as_str) {
                    Some(parent) => major_minor(parent),
                    None => u32::MAX, // root
                },
                kind: q["kind"].as_str().expect("kind").to_string(),
            }
        })
        .collect();
    ours.sort_by_key(|q| (q.index, q.parent));
    theirs.sort_by_key(|q| (q.index, q.parent));
    assert_eq!(ours, theirs);
    assert!(ours.contains(&Qdisc {
        index,
        handle: 0xffff_0000,
        parent: 0xffff_fff1,
        kind: "clsact".into(),
    }));
}

#[test]
fn a_bpf_filter_is_added_replaced_in_place_and_deleted_exactly() {
    let (ns, mut handle, dev, index) = setup("tf");
    let (first, second) = (Prog::load(), Prog::load());
    assert_ne!(first.id, second.id);
    assert_eq!(handle.ingress_filters(index).expect("dump"), []);
    handle.ensure_clsact(index).expect("add clsact");

    handle
        .add_bpf_filter(index, &first.spec(1, true), false)
        .expect("add");
    assert_eq!(
        handle.ingress_filters(index).expect("dump"),
        [ours(1, first.id, true)]
    );
    assert_eq!(tc_filters(&ns, &dev), [ours(1, first.id, true)]);

    // An add never overwrites.
    let err = handle
        .add_bpf_filter(index, &second.spec(1, true), false)
        .expect_err("a second add at the same place");
    assert!(err.is_exists(), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "add bpf filter \"{NAME}\" pref 1 handle 0x1 dev {dev}"
        )),
        "{err}"
    );
    assert_eq!(tc_filters(&ns, &dev), [ours(1, first.id, true)]);

    // Someone else's filter, at another pref.
    tc_ok(
        &ns,
        &[
            "filter", "add", "dev", &dev, "ingress", "pref", "2", "protocol", "ip", "u32", "match",
            "u32", "0", "0",
        ],
    );

    // Replace swaps the program of that very filter.
    handle
        .add_bpf_filter(index, &second.spec(1, true), true)
        .expect("replace");
    let listed = handle.ingress_filters(index).expect("dump");
    assert_eq!(listed, tc_filters(&ns, &dev));
    assert_eq!(listed[0], ours(1, second.id, true));
    assert_eq!(
        prefs_and_kinds(&listed),
        [(1, "bpf"), (2, "u32"), (2, "u32")],
        "one bpf filter, and u32's hash table and key"
    );

    // A replace never creates.
    let err = handle
        .add_bpf_filter(index, &second.spec(5, true), true)
        .expect_err("replace where nothing is");
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("replace bpf filter"), "{err}");

    // Classic action mode reads back as such.
    handle
        .add_bpf_filter(index, &first.spec(3, false), false)
        .expect("add without direct action");
    let listed = handle.ingress_filters(index).expect("dump");
    assert_eq!(listed, tc_filters(&ns, &dev));
    assert!(listed.contains(&ours(3, first.id, false)), "{listed:?}");

    // A delete names a kind: the u32 filter is not a bpf filter, and stays.
    let u32_key = listed
        .iter()
        .find(|f| f.kind == "u32" && f.handle & 0xfff != 0)
        .expect("u32 key node")
        .handle;
    let err = handle
        .delete_filter(index, 2, u32_key, "bpf")
        .expect_err("another kind");
    assert_eq!(err.errno(), Some(libc::EINVAL), "{err}");

    // Deleting ours removes exactly it.
    handle.delete_filter(index, 1, 1, "bpf").expect("delete");
    handle.delete_filter(index, 3, 1, "bpf").expect("delete");
    let left = tc_filters(&ns, &dev);
    assert_eq!(prefs_and_kinds(&left), [(2, "u32"), (2, "u32")], "{left:?}");
    assert_eq!(handle.ingress_filters(index).expect("dump"), left);

    let err = handle
        .delete_filter(index, 1, 1, "bpf")
        .expect_err("delete again");
    assert!(err.is_not_found(), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("delete bpf filter pref 1 handle 0x1 dev {dev}")),
        "{err}"
    );
    // The qdisc stays until the device goes.
    assert!(!handle.ensure_clsact(index).expect("clsact"), "still there");
}

#[test]
fn a_dump_over_foreign_filter_kinds_decodes_them_all() {
    let (ns, mut handle, dev, index) = setup("tx");
    let (mirror_dev, _) = veth_in(&ns, &mut handle);
    let prog = Prog::load();
    handle.ensure_clsact(index).expect("add clsact");
    handle
        .add_bpf_filter(index, &prog.spec(1, true), false)
        .expect("add");
    // u32 with a hash table and an action (nested attributes of its own layout), a
    // u32 matching on an address, and a classic-BPF cls_bpf filter (no program id,
    // no name). This kernel has no matchall or flower classifier.
    tc_ok(
        &ns,
        &[
            "filter",
            "add",
            "dev",
            &dev,
            "ingress",
            "pref",
            "2",
            "protocol",
            "all",
            "u32",
            "match",
            "u32",
            "0",
            "0",
            "action",
            "mirred",
            "egress",
            "mirror",
            "dev",
            &mirror_dev,
        ],
    );
    tc_ok(
        &ns,
        &[
            "filter",
            "add",
            "dev",
            &dev,
            "ingress",
            "pref",
            "3",
            "protocol",
            "ip",
            "u32",
            "match",
            "ip",
            "dst",
            "203.0.113.0/24",
        ],
    );
    tc_ok(
        &ns,
        &[
            "filter",
            "add",
            "dev",
            &dev,
            "ingress",
            "pref",
            "4",
            "bpf",
            "bytecode",
            "1,6 0 0 0,",
        ],
    );

    let listed = handle.ingress_filters(index).expect("dump");
    assert_eq!(listed, tc_filters(&ns, &dev));
    assert_eq!(
        prefs_and_kinds(&listed),
        [
            (1, "bpf"),
            (2, "u32"),
            (2, "u32"),
            (3, "u32"),
            (3, "u32"),
            (4, "bpf")
        ]
    );
    assert_eq!(listed[0], ours(1, prog.id, true));
    assert_eq!(
        listed[5].bpf,
        Some(BpfFilterInfo {
            prog_id: None,
            name: None,
            direct_action: false
        }),
        "classic BPF"
    );
    assert!(listed[1..5].iter().all(|f| f.bpf.is_none()));
}

#[test]
fn filters_that_name_no_single_place_are_refused_before_sending() {
    let (_ns, mut handle, _dev, index) = setup("ti");
    let prog = Prog::load();
    let before = handle.requests_sent();
    let long = "x".repeat(BPF_FILTER_NAME_MAX + 1);
    let specs = [
        BpfFilterSpec {
            pref: 0,
            ..prog.spec(1, true)
        },
        BpfFilterSpec {
            handle: 0,
            ..prog.spec(1, true)
        },
        BpfFilterSpec {
            name: &long,
            ..prog.spec(1, true)
        },
        BpfFilterSpec {
            name: "a\0b",
            ..prog.spec(1, true)
        },
    ];
    for spec in &specs {
        for replace in [false, true] {
            let err = handle
                .add_bpf_filter(index, spec, replace)
                .expect_err("refused");
            assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        }
    }
    for (pref, handle_id) in [(0, 1), (1, 0)] {
        let err = handle
            .delete_filter(index, pref, handle_id, "bpf")
            .expect_err("refused");
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    }
    assert_eq!(handle.requests_sent(), before, "nothing was sent");
}

#[test]
fn an_older_ingress_qdisc_in_the_slot_takes_the_filters_too() {
    let (ns, mut handle, dev, index) = setup("tg");
    let prog = Prog::load();
    tc_ok(&ns, &["qdisc", "add", "dev", &dev, "ingress"]);
    assert!(
        !handle.ensure_clsact(index).expect("clsact"),
        "the ingress qdisc holds the slot"
    );
    assert!(handle
        .qdiscs()
        .expect("list qdiscs")
        .iter()
        .any(|q| q.index == index && q.kind == "ingress"));
    handle
        .add_bpf_filter(index, &prog.spec(1, true), false)
        .expect("add");
    assert_eq!(tc_filters(&ns, &dev), [ours(1, prog.id, true)]);
    assert_eq!(
        handle.ingress_filters(index).expect("dump"),
        [ours(1, prog.id, true)]
    );
}

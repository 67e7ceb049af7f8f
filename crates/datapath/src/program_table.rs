// The datapath's programs, listed once.
//
// Both build.rs (which compiles `bpf/<name>.c` into `<name>.bpf.o` for every row) and the
// crate (which embeds those objects and derives `Program`, its attach kind and its link
// pins from the same rows) `include!` this file, each with its own `programs!` macro.
// Adding a program is adding a row here and its `bpf/<name>.c`; nothing else names it.
//
// Each row: the `Program` variant, the program's name (its C function, its object file,
// its kernel name and its pin under `progs/`), where it attaches, and the directory under
// `links/` that holds one pinned link per attachment.
//
// Kinds this table can describe as weft grows (only the rows below exist today):
//   Attach::Tc { hook: TcHook::Egress, devices: Devices::PodVeths }     policy, egress of pod veths
//   Attach::Tc { hook: TcHook::Ingress, devices: Devices::External }    NodePort, north-south
//   Attach::Tc { hook: TcHook::Egress, devices: Devices::External }     masquerade
//   Attach::Cgroup(CgroupHook::Connect4) (Connect6, Sendmsg4/6, Recvmsg4/6, Getpeername4/6)
//   Attach::Lsm { hook: "socket_connect" }
// (Plain comments: this file is `include!`d, where inner doc comments are not allowed.)

programs! {
    /// tc ingress of every host-side pod veth: everything a pod sends.
    FromPod = "from_pod" {
        attach: Attach::Tc { hook: TcHook::Ingress, devices: Devices::PodVeths },
        links: "pods",
    },
    /// tc ingress of the node's VXLAN device: what other nodes send, decapsulated.
    FromOverlay = "from_overlay" {
        attach: Attach::Tc { hook: TcHook::Ingress, devices: Devices::Overlay },
        links: "overlay",
    },
}

// Objects built with the datapath's programs but loaded by another part of weft. Each row:
// a constant naming the embedded object, and its file name (`bpf/<name>.c`).
foreign_objects! {
    /// The egress guard's BPF-LSM object (bpf/guard_lsm.c, several `lsm/` programs):
    /// `weft-guard` loads it, the datapath never does.
    GUARD_LSM = "guard_lsm",
}

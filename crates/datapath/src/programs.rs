//! The embedded BPF objects, one per attach point, compiled from `bpf/*.c` by build.rs.

/// `include_bytes!` only guarantees byte alignment; the ELF and BTF parsers read
/// multi-byte headers straight out of the buffer, so keep it 8-byte aligned.
#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

static FROM_POD_OBJECT: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/from_pod.bpf.o")),
};
static FROM_OVERLAY_OBJECT: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/from_overlay.bpf.o")),
};

/// A program of the datapath. Each lives alone in its own object file, and its
/// function name is also its pin name and its kernel program name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// tc ingress of every host-side pod veth.
    FromPod,
    /// tc ingress of the node's VXLAN device.
    FromOverlay,
}

impl Program {
    pub const ALL: [Program; 2] = [Program::FromPod, Program::FromOverlay];

    pub const fn name(self) -> &'static str {
        match self {
            Program::FromPod => "from_pod",
            Program::FromOverlay => "from_overlay",
        }
    }

    /// The compiled ELF object holding this program and the shared map definitions.
    pub fn object(self) -> &'static [u8] {
        match self {
            Program::FromPod => &FROM_POD_OBJECT.bytes,
            Program::FromOverlay => &FROM_OVERLAY_OBJECT.bytes,
        }
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

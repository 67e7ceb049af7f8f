//! The datapath's programs, derived from the one table in `program_table.rs` (which
//! build.rs reads too): the [`Program`] enum, each program's [`Attach`] kind, its link pin
//! directory and its embedded object.

/// Where a program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attach {
    /// A tc hook (a pinned TCX link, or weft's cls_bpf filter on clsact) on every network
    /// device of one class.
    Tc { hook: TcHook, devices: Devices },
    /// A cgroup v2 socket-address hook, attached (pinned link) at the node's cgroup.
    Cgroup(CgroupHook),
    /// A BPF-LSM hook (`lsm/<hook>`).
    Lsm { hook: &'static str },
}

/// The side of a device a tc program sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcHook {
    Ingress,
    Egress,
}

/// Which devices of the node a tc program attaches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Devices {
    /// The host side of every pod's veth.
    PodVeths,
    /// The node's VXLAN device.
    Overlay,
    /// The node's external (uplink) interfaces.
    External,
}

/// The `cgroup/<hook>` sock_addr attach points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CgroupHook {
    Connect4,
    Connect6,
    Sendmsg4,
    Sendmsg6,
    Recvmsg4,
    Recvmsg6,
    Getpeername4,
    Getpeername6,
}

impl CgroupHook {
    /// The ELF section name the program must use (`SEC("cgroup/connect4")`).
    pub const fn section(self) -> &'static str {
        match self {
            CgroupHook::Connect4 => "cgroup/connect4",
            CgroupHook::Connect6 => "cgroup/connect6",
            CgroupHook::Sendmsg4 => "cgroup/sendmsg4",
            CgroupHook::Sendmsg6 => "cgroup/sendmsg6",
            CgroupHook::Recvmsg4 => "cgroup/recvmsg4",
            CgroupHook::Recvmsg6 => "cgroup/recvmsg6",
            CgroupHook::Getpeername4 => "cgroup/getpeername4",
            CgroupHook::Getpeername6 => "cgroup/getpeername6",
        }
    }
}

/// One row of the program table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramSpec {
    /// C function, object file (`bpf/<name>.c`), kernel program name, and pin under `progs/`.
    pub name: &'static str,
    pub attach: Attach,
    /// The directory under `links/` holding one pinned link per attachment.
    pub links: &'static str,
}

/// `include_bytes!` only guarantees byte alignment; the ELF and BTF parsers read
/// multi-byte headers straight out of the buffer, so keep it 8-byte aligned.
#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

macro_rules! programs {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal {
        attach: $attach:expr,
        links: $links:literal $(,)?
    } ),* $(,)?) => {
        /// A program of the datapath. Each lives alone in its own object file, and its
        /// function name is also its pin name and its kernel program name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Program {
            $( $(#[$doc])* $variant, )*
        }

        impl Program {
            pub const ALL: [Program; [$($name),*].len()] = [$(Program::$variant),*];

            pub const fn spec(self) -> &'static ProgramSpec {
                match self {
                    $( Program::$variant => &ProgramSpec {
                        name: $name,
                        attach: $attach,
                        links: $links,
                    }, )*
                }
            }

            /// The compiled ELF object holding this program and the map definitions it uses.
            pub fn object(self) -> &'static [u8] {
                match self {
                    $( Program::$variant => {
                        static OBJECT: &Aligned<[u8]> = &Aligned {
                            bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bpf.o")),
                        };
                        &OBJECT.bytes
                    } )*
                }
            }
        }
    };
}

macro_rules! foreign_objects {
    ($( $(#[$doc:meta])* $constant:ident = $name:literal ),* $(,)?) => {
        $(
            $(#[$doc])*
            pub static $constant: &[u8] = {
                static OBJECT: &Aligned<[u8]> = &Aligned {
                    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bpf.o")),
                };
                &OBJECT.bytes
            };
        )*
    };
}
include!("program_table.rs");

impl Program {
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    pub const fn attach(self) -> Attach {
        self.spec().attach
    }

    /// The program attached to devices of `devices` at `hook`, if the table has one.
    pub fn for_tc(hook: TcHook, devices: Devices) -> Option<Program> {
        Program::ALL
            .into_iter()
            .find(|p| p.attach() == Attach::Tc { hook, devices })
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_link_directories_are_unique() {
        let mut names: Vec<_> = Program::ALL.iter().map(|p| p.name()).collect();
        let mut links: Vec<_> = Program::ALL.iter().map(|p| p.spec().links).collect();
        names.sort_unstable();
        names.dedup();
        links.sort_unstable();
        links.dedup();
        assert_eq!(names.len(), Program::ALL.len());
        assert_eq!(links.len(), Program::ALL.len());
    }

    #[test]
    fn todays_rows() {
        assert_eq!(
            Program::for_tc(TcHook::Ingress, Devices::PodVeths),
            Some(Program::FromPod)
        );
        assert_eq!(
            Program::for_tc(TcHook::Ingress, Devices::Overlay),
            Some(Program::FromOverlay)
        );
        assert_eq!(Program::FromPod.spec().links, "pods");
        assert!(!Program::FromPod.object().is_empty());
    }
}

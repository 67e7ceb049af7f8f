//! The agent's side: load the embedded programs over the pinned maps, adopt or
//! replace the pinned programs, and attach the overlay program.
//!
//! Invariants kept here:
//! - maps are reused from their pins, so endpoints and routes survive restarts and
//!   upgrades (and a changed map layout is refused, not silently recreated);
//! - a program already pinned with the same instructions (kernel tag) and the same
//!   maps is adopted: nothing on the wire changes across a restart;
//! - a different program replaces the old one new-before-old: it is pinned under a
//!   staging name, every attachment is moved to it atomically (pinned TCX links by
//!   `BPF_LINK_UPDATE`, weft's cls_bpf filters by `NLM_F_REPLACE`), then the pin is
//!   renamed over the old one, and the attachments are swept once more to catch any
//!   a CNI plugin made from the old pin meanwhile.

use crate::conntrack::Conntrack;
use crate::error::{Error, Result};
use crate::hook::{self, Hook};
use crate::layout::{MAPS, MAP_CT, MAP_LB_AFFINITY, MAP_LB_BACKENDS, MAP_LB_SLOTS};
use crate::migrate::{Migration, MigrationReport};
use crate::mode::AttachMode;
use crate::model::{Counters, EndpointInfo, NodeConfig, RouteKind};
use crate::pinned;
use crate::pins::PinLayout;
use crate::programs::{Attach, Program};
use crate::services::Services;
use crate::sys;
use crate::tables::Tables;
use crate::tcx::{self, LinkChange, ProgRef, SweepReport};
use aya::programs::SchedClassifier;
use aya::{Ebpf, EbpfLoader};
use ipnet::IpNet;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// How [`Datapath::load_with`] creates the maps whose size the agent chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    pub sizes: MapSizes,
}

/// Entries of the agent-sized maps (defaults: the headers' values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSizes {
    /// `weft_ct`: two entries per connection.
    pub connections: u32,
    /// `weft_lb_slots`: one per backend of each frontend (draining ones included).
    pub lb_slots: u32,
    /// `weft_lb_be`: one per distinct backend address and port.
    pub lb_backends: u32,
    /// `weft_lb_aff`: one per (frontend with affinity, client address).
    pub lb_affinity: u32,
}

impl Default for MapSizes {
    fn default() -> MapSizes {
        MapSizes {
            connections: MAP_CT.shape.max_entries,
            lb_slots: MAP_LB_SLOTS.shape.max_entries,
            lb_backends: MAP_LB_BACKENDS.shape.max_entries,
            lb_affinity: MAP_LB_AFFINITY.shape.max_entries,
        }
    }
}

impl MapSizes {
    fn entries(&self) -> [(&'static str, u32); 4] {
        [
            (MAP_CT.name, self.connections),
            (MAP_LB_SLOTS.name, self.lb_slots),
            (MAP_LB_BACKENDS.name, self.lb_backends),
            (MAP_LB_AFFINITY.name, self.lb_affinity),
        ]
    }

    fn validate(&self) -> Result<()> {
        for (name, entries) in self.entries() {
            if entries == 0 {
                return Err(Error::InvalidSize { map: name, entries });
            }
        }
        Ok(())
    }

    /// The sizes of the maps pinned under `pins`.
    pub(crate) fn pinned(pins: &PinLayout) -> Result<MapSizes> {
        let size = |spec: &crate::layout::MapSpec| -> Result<u32> {
            let fd = pinned::open_map(pins, spec)?;
            let info = sys::map_info(fd.as_fd())
                .map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", pins.map_pin(spec), e))?;
            Ok(info.shape.max_entries)
        };
        Ok(MapSizes {
            connections: size(&MAP_CT)?,
            lb_slots: size(&MAP_LB_SLOTS)?,
            lb_backends: size(&MAP_LB_BACKENDS)?,
            lb_affinity: size(&MAP_LB_AFFINITY)?,
        })
    }
}

/// What `load_or_adopt` did with one program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramChange {
    /// The pinned program was identical and stays in place.
    Adopted,
    /// Nothing was pinned; the program is new.
    Installed,
    /// A different program was pinned; it has been replaced, links included.
    Replaced { previous_id: u32 },
}

/// A pinned program of the running datapath.
#[derive(Debug)]
pub struct InstalledProgram {
    pub program: Program,
    pub id: u32,
    pub tag: [u8; 8],
    pub change: ProgramChange,
    /// Attachments (TCX links and cls_bpf filters) moved to this program, and
    /// defunct links unpinned, on the way in.
    pub links: SweepReport,
    fd: OwnedFd,
}

/// The loaded datapath of one node (one pin root).
#[derive(Debug)]
pub struct Datapath {
    pins: PinLayout,
    programs: Vec<InstalledProgram>,
    tables: Tables,
    attach_mode: AttachMode,
    migration: MigrationReport,
}

impl Datapath {
    /// Loads the embedded programs over the maps pinned under `pin_root` (creating
    /// and pinning the maps the first time), then adopts or replaces each pinned
    /// program. Runs in the calling thread's network namespace; never enter a mount
    /// namespace before calling it.
    ///
    /// New attachments ([`Datapath::attach_overlay`]) use the [`AttachMode`] that
    /// [`AttachMode::ENV`] names (an invalid value fails here, at start-up); see
    /// [`Datapath::set_attach_mode`]. Program replacement moves weft's attachments
    /// in every mode.
    ///
    /// Maps of an earlier layout pinned under `pin_root` are migrated into this build's
    /// maps under traffic (see [`crate::migrate`]); [`Datapath::migration`] says what
    /// was carried over.
    pub fn load_or_adopt(pin_root: impl Into<PathBuf>) -> Result<Datapath> {
        Datapath::load_with(pin_root, &LoadOptions::default())
    }

    /// [`Datapath::load_or_adopt`] with the sizes of the agent-sized maps (the connection
    /// table, the service slots, backends and affinity). A size applies when its map is
    /// created; a map already pinned keeps its size ([`Datapath::map_sizes`] says which).
    pub fn load_with(pin_root: impl Into<PathBuf>, options: &LoadOptions) -> Result<Datapath> {
        options.sizes.validate()?;
        let attach_mode = AttachMode::from_env()?;
        let pins = PinLayout::new(pin_root);
        pins.create()?;
        let created = check_existing_maps(&pins)?;
        crate::migrate::check_predecessors(&pins)?;

        // Loading the objects creates (and pins) this layout's maps; the programs are
        // not loaded yet, so nothing runs on the new maps before they are filled.
        let mut objects = Vec::with_capacity(Program::ALL.len());
        for program in Program::ALL {
            objects.push((program, load_object(&pins, program, &options.sizes)?));
        }
        let migration = Migration::begin(&pins, &created)?;
        let mut programs = Vec::with_capacity(Program::ALL.len());
        for (program, ebpf) in &mut objects {
            programs.push(load_program(&pins, *program, ebpf)?);
        }
        let migration = migration.finish()?;
        drop(objects); // the loaded programs now live on through their pins
        let tables = Tables::open_layout(pins.clone())?;
        Ok(Datapath {
            pins,
            programs,
            tables,
            attach_mode,
            migration,
        })
    }

    /// The sizes the agent-sized maps have (as pinned, which may predate this load).
    pub fn map_sizes(&self) -> Result<MapSizes> {
        MapSizes::pinned(&self.pins)
    }

    /// What this load migrated from maps of an earlier layout (empty when nothing was
    /// pinned under an earlier layout's names).
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// How new attachments are made.
    pub fn attach_mode(&self) -> AttachMode {
        self.attach_mode
    }

    /// Overrides the mode read from [`AttachMode::ENV`].
    pub fn set_attach_mode(&mut self, mode: AttachMode) {
        self.attach_mode = mode;
    }

    pub fn pins(&self) -> &PinLayout {
        &self.pins
    }

    pub fn program(&self, program: Program) -> Option<&InstalledProgram> {
        self.programs.iter().find(|p| p.program == program)
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    pub fn tables_mut(&mut self) -> &mut Tables {
        &mut self.tables
    }

    /// Attaches `from_overlay` at ingress of `ifname` (resolved in the calling
    /// thread's network namespace): through a TCX link pinned at
    /// `links/overlay/<ifname>` or weft's cls_bpf filter, reusing (and repointing)
    /// whichever is already there, else in [`Datapath::attach_mode`].
    pub fn attach_overlay(&self, ifname: &str) -> Result<LinkChange> {
        self.attach_device(Program::FromOverlay, ifname)
    }

    /// Detaches the overlay program from `ifname`, whichever way it is attached.
    /// Idempotent.
    pub fn detach_overlay(&self, ifname: &str) -> Result<()> {
        self.detach_device(Program::FromOverlay, ifname)
    }

    /// Attaches the tc program `program` to the device `ifname` (calling thread's
    /// network namespace) at the side its table row names: a TCX link pinned at
    /// `links/<dir>/<ifname>`, or (ingress only) weft's cls_bpf filter, reusing whichever
    /// is there, else in [`Datapath::attach_mode`]. Pod veths are the CNI plugin's
    /// ([`crate::pod::attach_pod`]).
    pub fn attach_device(&self, program: Program, ifname: &str) -> Result<LinkChange> {
        let hook = Hook::new(&self.pins, program, ifname)?;
        let ifindex = ifindex_of(ifname)?;
        let prog = self.prog_ref(program)?;
        hook::ensure(&hook, ifindex, prog, self.attach_mode).map(|(change, _)| change)
    }

    /// Detaches `program` from `ifname`, whichever way it is attached. Idempotent.
    pub fn detach_device(&self, program: Program, ifname: &str) -> Result<()> {
        hook::detach(&Hook::new(&self.pins, program, ifname)?)
    }

    pub fn set_config(&mut self, config: NodeConfig) -> Result<()> {
        self.tables.set_config(config)
    }

    pub fn upsert_route(&mut self, net: IpNet, kind: RouteKind) -> Result<()> {
        self.tables.upsert_route(net, kind)
    }

    /// Idempotent: `Ok(false)` if there was no entry for exactly `net`.
    pub fn remove_route(&mut self, net: IpNet) -> Result<bool> {
        self.tables.remove_route(net)
    }

    pub fn routes(&self) -> Result<Vec<(IpNet, RouteKind)>> {
        self.tables.routes()
    }

    pub fn endpoints(&self) -> Result<Vec<(IpAddr, EndpointInfo)>> {
        self.tables.endpoints()
    }

    pub fn counters(&self) -> Result<Counters> {
        self.tables.counters()
    }

    /// The service maps, for the agent's Service reconciler ([`Services`]).
    pub fn services(&self) -> Result<Services> {
        Services::open_layout(&self.pins)
    }

    /// The connection table, for garbage collection and inspection ([`Conntrack`]).
    pub fn conntrack(&self) -> Result<Conntrack> {
        Conntrack::open_layout(&self.pins)
    }

    fn prog_ref(&self, program: Program) -> Result<ProgRef<'_>> {
        let p = self.program(program).ok_or_else(|| Error::NotPinned {
            path: self.pins.program(program),
        })?;
        Ok(ProgRef {
            fd: p.fd.as_fd(),
            id: p.id,
        })
    }
}

/// Maps that are already pinned under this layout's names must have the shape this
/// build was compiled for: the loader would otherwise reuse them blindly and the
/// programs would read another version's structs. Returns the maps not pinned yet,
/// which this load creates.
fn check_existing_maps(pins: &PinLayout) -> Result<Vec<&'static str>> {
    let mut missing = Vec::new();
    for spec in &MAPS {
        let path = pins.map_pin(spec);
        match sys::obj_get_opt(&path)? {
            Some(fd) => pinned::check_map(&path, fd.as_fd(), spec)?,
            None => missing.push(spec.name),
        }
    }
    Ok(missing)
}

/// Parses `program`'s object and creates or opens its maps at their pins
/// (`maps/<name>_v<layout>`); the program itself is loaded by [`load_program`].
fn load_object(pins: &PinLayout, program: Program, sizes: &MapSizes) -> Result<Ebpf> {
    let object_err = |source| Error::Object {
        program,
        source: Box::new(source),
    };
    let pin_paths: Vec<(&str, PathBuf)> = MAPS
        .iter()
        .map(|spec| (spec.name, pins.map_pin(spec)))
        .collect();
    let mut loader = EbpfLoader::new();
    for (name, path) in &pin_paths {
        loader.map_pin_path(name, path.as_path());
    }
    for (name, entries) in sizes.entries() {
        loader.map_max_entries(name, entries);
    }
    let ebpf = loader.load(program.object()).map_err(object_err)?;
    // A map the crate does not know would have been created unpinned: each program
    // would get its own copy and the agent could never see it.
    if let Some((name, _)) = ebpf
        .maps()
        .find(|(name, _)| !MAPS.iter().any(|spec| spec.name == *name))
    {
        return Err(Error::UnknownMap {
            program,
            name: name.to_string(),
        });
    }
    Ok(ebpf)
}

fn load_program(pins: &PinLayout, program: Program, ebpf: &mut Ebpf) -> Result<InstalledProgram> {
    let program_err = |source| Error::Program {
        program,
        source: Box::new(source),
    };
    let loaded = ebpf
        .program_mut(program.name())
        .ok_or(Error::MissingProgram { program })?;
    let fd = match program.attach() {
        Attach::Tc { .. } => {
            let classifier: &mut SchedClassifier = loaded.try_into().map_err(program_err)?;
            load_interruptible(|| classifier.load()).map_err(program_err)?;
            classifier.fd().map_err(program_err)?.as_fd()
        }
        Attach::Cgroup(_) | Attach::Lsm { .. } => {
            return Err(Error::Unsupported {
                program,
                what: "loading cgroup and LSM programs (the table can list them; the \
                       loader learns them with their first program)",
            })
        }
    };
    let new_fd = fd
        .try_clone_to_owned()
        .map_err(|e| Error::bpf("dup program fd", pins.program(program), e))?;
    install(pins, program, new_fd)
}

/// Loads a program, retrying when the kernel was interrupted. BPF_PROG_LOAD returns
/// EAGAIN (or EINTR) when a signal arrives while the verifier runs, whatever the program:
/// a real rejection is any other error and fails at once.
fn load_interruptible(
    load: impl FnMut() -> std::result::Result<(), aya::programs::ProgramError>,
) -> std::result::Result<(), aya::programs::ProgramError> {
    retry_interrupted(load, |e| match e {
        aya::programs::ProgramError::LoadError { io_error, .. } => io_error.raw_os_error(),
        _ => None,
    })
}

fn retry_interrupted<E>(
    mut attempt: impl FnMut() -> std::result::Result<(), E>,
    errno: impl Fn(&E) -> Option<i32>,
) -> std::result::Result<(), E> {
    const ATTEMPTS: usize = 5;
    let mut tried = 1;
    loop {
        match attempt() {
            Err(e) if tried < ATTEMPTS && matches!(errno(&e), Some(libc::EAGAIN | libc::EINTR)) => {
                tried += 1
            }
            other => return other,
        }
    }
}

/// Adopts the pinned program when it is the same as `new`, otherwise puts `new` in
/// its place without a gap.
fn install(pins: &PinLayout, program: Program, new_fd: OwnedFd) -> Result<InstalledProgram> {
    let pin = pins.program(program);
    let info_err = |e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &pin, e);
    let new = sys::prog_info(new_fd.as_fd()).map_err(info_err)?;

    let previous = match sys::obj_get_opt(&pin)? {
        Some(fd) => {
            let info = sys::prog_info(fd.as_fd()).map_err(info_err)?;
            Some((fd, info))
        }
        None => None,
    };

    if let Some((old_fd, old)) = previous.as_ref() {
        // Same instructions are not enough: a program still bound to maps whose pins
        // were lost would keep reading the orphaned maps while the agent writes the
        // new ones. The new program was loaded against the current pins.
        if old.tag == new.tag && old.map_ids == new.map_ids {
            let links = hook::sweep(
                pins,
                program,
                ProgRef {
                    fd: old_fd.as_fd(),
                    id: old.id,
                },
            )?;
            let fd = old_fd
                .try_clone()
                .map_err(|e| Error::bpf("dup program fd", &pin, e))?;
            return Ok(InstalledProgram {
                program,
                id: old.id,
                tag: old.tag,
                change: ProgramChange::Adopted,
                links,
                fd,
            });
        }
    }

    let staging = pins.program_staging(program);
    tcx::unlink_pin(&staging)?; // left over by an interrupted replacement
    sys::obj_pin(new_fd.as_fd(), &staging)?;
    let new_ref = ProgRef {
        fd: new_fd.as_fd(),
        id: new.id,
    };
    let mut links = hook::sweep(pins, program, new_ref)?;
    std::fs::rename(&staging, &pin).map_err(|e| Error::bpf("rename", &staging, e))?;
    // A plugin that read the old pin before the rename may have attached the old
    // program after the first sweep; it re-checks the pin after attaching, and this
    // second sweep catches what it attached before that re-check.
    let late = hook::sweep(pins, program, new_ref)?;
    links.updated += late.updated;
    links.removed_defunct += late.removed_defunct;

    Ok(InstalledProgram {
        program,
        id: new.id,
        tag: new.tag,
        change: match previous {
            Some((_, old)) => ProgramChange::Replaced {
                previous_id: old.id,
            },
            None => ProgramChange::Installed,
        },
        links,
        fd: new_fd,
    })
}

/// ifindex of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex_of(ifname: &str) -> Result<u32> {
    crate::pins::validate_ifname(ifname)?;
    let c = std::ffi::CString::new(ifname).map_err(|_| Error::InvalidIfname {
        name: ifname.to_string(),
        reason: "contains NUL",
    })?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(Error::Interface {
            name: ifname.to_string(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(errno: i32, succeed_after: usize) -> impl FnMut() -> std::io::Result<()> {
        let mut calls = 0;
        move || {
            calls += 1;
            if calls > succeed_after {
                Ok(())
            } else {
                Err(std::io::Error::from_raw_os_error(errno))
            }
        }
    }

    #[test]
    fn an_interrupted_load_is_retried_and_a_rejection_is_not() {
        let errno = |e: &std::io::Error| e.raw_os_error();
        assert!(retry_interrupted(failing(libc::EAGAIN, 2), errno).is_ok());
        assert!(retry_interrupted(failing(libc::EINTR, 4), errno).is_ok());
        assert!(
            retry_interrupted(failing(libc::EAGAIN, 5), errno).is_err(),
            "bounded"
        );
        assert!(
            retry_interrupted(failing(libc::EACCES, 1), errno).is_err(),
            "a verifier rejection is final"
        );
    }
}

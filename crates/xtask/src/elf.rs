//! The few parts of ELF the release tasks read: the identification and machine of any file
//! (enough to tell which CPU a binary is for), and, for a binary on disk, its program
//! interpreter and the shared libraries it names (`DT_NEEDED`).
//!
//! Everything is read with bounds checks and size caps: the check runs over files it did not
//! build, and a truncated or hostile header must give an error, never a panic or a huge
//! allocation.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};

pub const EM_386: u16 = 3;
pub const EM_MIPS: u16 = 8;
pub const EM_PPC64: u16 = 21;
pub const EM_S390: u16 = 22;
pub const EM_ARM: u16 = 40;
pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;
pub const EM_BPF: u16 = 247;
pub const EM_RISCV: u16 = 243;
pub const EM_LOONGARCH: u16 = 258;

/// Bytes of a file needed to identify it: `e_ident` (16) plus `e_type` and `e_machine`.
pub const IDENT_LEN: usize = 20;

const MAGIC: &[u8; 4] = b"\x7fELF";
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// Caps on what a header may make us read (real binaries are far below them).
const MAX_PHNUM: u16 = 4096;
const MAX_INTERP: u64 = 4096;
const MAX_DYNAMIC: u64 = 1 << 20;
const MAX_STRTAB: u64 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Elf32,
    Elf64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

/// What the first bytes of an ELF file say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    pub class: Class,
    pub endian: Endian,
    pub machine: u16,
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = match self.class {
            Class::Elf32 => "32-bit",
            Class::Elf64 => "64-bit",
        };
        let order = match self.endian {
            Endian::Little => "LSB",
            Endian::Big => "MSB",
        };
        write!(
            f,
            "{bits} {order} {} (e_machine {})",
            machine_name(self.machine),
            self.machine
        )
    }
}

/// The name `file(1)` would print for a machine, for messages.
pub fn machine_name(machine: u16) -> &'static str {
    match machine {
        EM_386 => "Intel 80386",
        EM_MIPS => "MIPS",
        EM_PPC64 => "64-bit PowerPC",
        EM_S390 => "IBM S/390",
        EM_ARM => "ARM",
        EM_X86_64 => "x86-64",
        EM_AARCH64 => "ARM aarch64",
        EM_RISCV => "RISC-V",
        EM_BPF => "eBPF",
        EM_LOONGARCH => "LoongArch",
        _ => "unknown machine",
    }
}

/// The result of looking at the start of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    NotElf,
    Elf(Ident),
    /// Starts with the ELF magic but its machine cannot be read.
    Malformed(&'static str),
}

/// Identifies a file from its first bytes (at least [`IDENT_LEN`] of them when it is ELF).
pub fn sniff(head: &[u8]) -> Sniff {
    if head.len() < MAGIC.len() || &head[..MAGIC.len()] != MAGIC {
        return Sniff::NotElf;
    }
    if head.len() < IDENT_LEN {
        return Sniff::Malformed("the file ends inside the ELF header");
    }
    let class = match head[4] {
        1 => Class::Elf32,
        2 => Class::Elf64,
        _ => return Sniff::Malformed("EI_CLASS is neither 32- nor 64-bit"),
    };
    let endian = match head[5] {
        1 => Endian::Little,
        2 => Endian::Big,
        _ => return Sniff::Malformed("EI_DATA is neither little- nor big-endian"),
    };
    let machine = u16_at(endian, [head[18], head[19]]);
    Sniff::Elf(Ident {
        class,
        endian,
        machine,
    })
}

/// What the loader needs to run a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dynamic {
    pub ident: Ident,
    /// `PT_INTERP`: the dynamic loader's path, absent for a static binary.
    pub interpreter: Option<String>,
    /// `DT_NEEDED`, in order.
    pub needed: Vec<String>,
    /// `DT_RPATH` and `DT_RUNPATH` entries, which the image layout does not honour.
    pub search_paths: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("not an ELF file")]
    NotElf,
    #[error("malformed ELF: {0}")]
    Malformed(&'static str),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Reads the interpreter and needed libraries of the ELF file `r`.
pub fn read_dynamic<R: Read + Seek>(r: &mut R) -> Result<Dynamic, ElfError> {
    let mut head = [0u8; 64];
    let n = read_up_to(r, &mut head)?;
    let ident = match sniff(&head[..n]) {
        Sniff::NotElf => return Err(ElfError::NotElf),
        Sniff::Malformed(why) => return Err(ElfError::Malformed(why)),
        Sniff::Elf(ident) => ident,
    };
    let e = Fields {
        endian: ident.endian,
        class: ident.class,
    };
    let (phoff, phentsize, phnum) = match ident.class {
        Class::Elf64 if n >= 64 => (
            e.u64(&head[32..40]),
            e.u16(&head[54..56]),
            e.u16(&head[56..58]),
        ),
        Class::Elf32 if n >= 52 => (
            u64::from(e.u32(&head[28..32])),
            e.u16(&head[42..44]),
            e.u16(&head[44..46]),
        ),
        _ => return Err(ElfError::Malformed("the file ends inside the ELF header")),
    };
    let min_phentsize = match ident.class {
        Class::Elf64 => 56,
        Class::Elf32 => 32,
    };
    if phnum > MAX_PHNUM {
        return Err(ElfError::Malformed("too many program headers"));
    }
    if phnum > 0 && usize::from(phentsize) < min_phentsize {
        return Err(ElfError::Malformed("program header entries are too small"));
    }
    let table = read_at(r, phoff, u64::from(phentsize) * u64::from(phnum))?;
    let segments: Vec<Segment> = table
        .chunks_exact(usize::from(phentsize.max(1)))
        .map(|ph| e.segment(ph))
        .collect();

    let interpreter = match segments.iter().find(|s| s.kind == PT_INTERP) {
        None => None,
        Some(s) if s.filesz > MAX_INTERP => {
            return Err(ElfError::Malformed("PT_INTERP is implausibly long"))
        }
        Some(s) => Some(c_string(&read_at(r, s.offset, s.filesz)?, 0)?),
    };

    let mut dynamic = Dynamic {
        ident,
        interpreter,
        needed: Vec::new(),
        search_paths: Vec::new(),
    };
    let Some(dyn_seg) = segments.iter().find(|s| s.kind == PT_DYNAMIC) else {
        return Ok(dynamic);
    };
    if dyn_seg.filesz > MAX_DYNAMIC {
        return Err(ElfError::Malformed("PT_DYNAMIC is implausibly large"));
    }
    let entries = read_at(r, dyn_seg.offset, dyn_seg.filesz)?;
    let (mut strtab, mut strsz) = (None, None);
    let (mut needed, mut paths) = (Vec::new(), Vec::new());
    for entry in entries.chunks_exact(e.word() * 2) {
        let (tag, val) = (e.word_at(&entry[..e.word()]), e.word_at(&entry[e.word()..]));
        match tag {
            DT_NULL => break,
            DT_NEEDED => needed.push(val),
            DT_STRTAB => strtab = Some(val),
            DT_STRSZ => strsz = Some(val),
            DT_RPATH | DT_RUNPATH => paths.push(val),
            _ => {}
        }
    }
    if needed.is_empty() && paths.is_empty() {
        return Ok(dynamic);
    }
    let (Some(strtab), Some(strsz)) = (strtab, strsz) else {
        return Err(ElfError::Malformed("DT_NEEDED without DT_STRTAB/DT_STRSZ"));
    };
    if strsz > MAX_STRTAB {
        return Err(ElfError::Malformed(
            "the dynamic string table is implausibly large",
        ));
    }
    // DT_STRTAB is a virtual address: find the loaded segment that holds it.
    let offset = segments
        .iter()
        .filter(|s| s.kind == PT_LOAD)
        .find(|s| strtab >= s.vaddr && strtab - s.vaddr < s.filesz)
        .map(|s| s.offset + (strtab - s.vaddr))
        .ok_or(ElfError::Malformed(
            "DT_STRTAB is outside every loaded segment",
        ))?;
    let strings = read_at(r, offset, strsz)?;
    for off in needed {
        dynamic.needed.push(c_string(&strings, off)?);
    }
    for off in paths {
        dynamic.search_paths.push(c_string(&strings, off)?);
    }
    Ok(dynamic)
}

struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// Reads multi-byte fields in the file's byte order and word size.
struct Fields {
    endian: Endian,
    class: Class,
}

impl Fields {
    fn u16(&self, b: &[u8]) -> u16 {
        u16_at(self.endian, [b[0], b[1]])
    }
    fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self.endian {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }
    fn u64(&self, b: &[u8]) -> u64 {
        let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self.endian {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
    fn word(&self) -> usize {
        match self.class {
            Class::Elf32 => 4,
            Class::Elf64 => 8,
        }
    }
    fn word_at(&self, b: &[u8]) -> u64 {
        match self.class {
            Class::Elf32 => u64::from(self.u32(b)),
            Class::Elf64 => self.u64(b),
        }
    }
    /// One program header; the caller guarantees `ph` is at least the class's entry size.
    fn segment(&self, ph: &[u8]) -> Segment {
        match self.class {
            Class::Elf64 => Segment {
                kind: self.u32(&ph[0..4]),
                offset: self.u64(&ph[8..16]),
                vaddr: self.u64(&ph[16..24]),
                filesz: self.u64(&ph[32..40]),
            },
            Class::Elf32 => Segment {
                kind: self.u32(&ph[0..4]),
                offset: u64::from(self.u32(&ph[4..8])),
                vaddr: u64::from(self.u32(&ph[8..12])),
                filesz: u64::from(self.u32(&ph[16..20])),
            },
        }
    }
}

fn u16_at(endian: Endian, b: [u8; 2]) -> u16 {
    match endian {
        Endian::Little => u16::from_le_bytes(b),
        Endian::Big => u16::from_be_bytes(b),
    }
}

/// Fills as much of `buf` as the reader has; returns how much that was.
pub fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn read_at<R: Read + Seek>(r: &mut R, offset: u64, len: u64) -> Result<Vec<u8>, ElfError> {
    let len = usize::try_from(len).map_err(|_| ElfError::Malformed("a length overflows"))?;
    r.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; len];
    if read_up_to(r, &mut buf)? < len {
        return Err(ElfError::Malformed(
            "a header points past the end of the file",
        ));
    }
    Ok(buf)
}

fn c_string(table: &[u8], offset: u64) -> Result<String, ElfError> {
    let start = usize::try_from(offset)
        .ok()
        .filter(|&s| s < table.len())
        .ok_or(ElfError::Malformed("a string offset is outside its table"))?;
    let rest = &table[start..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8(rest[..end].to_vec())
        .map_err(|_| ElfError::Malformed("a library or interpreter name is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(MAGIC);
        h[4] = class;
        h[5] = data;
        let m = if data == 2 {
            machine.to_be_bytes()
        } else {
            machine.to_le_bytes()
        };
        h[18..20].copy_from_slice(&m);
        h
    }

    #[test]
    fn sniff_reads_machine_in_the_files_byte_order() {
        assert_eq!(
            sniff(&header(2, 1, EM_AARCH64)),
            Sniff::Elf(Ident {
                class: Class::Elf64,
                endian: Endian::Little,
                machine: EM_AARCH64
            })
        );
        assert_eq!(
            sniff(&header(2, 2, EM_S390)),
            Sniff::Elf(Ident {
                class: Class::Elf64,
                endian: Endian::Big,
                machine: EM_S390
            })
        );
    }

    #[test]
    fn sniff_tells_non_elf_from_broken_elf() {
        assert_eq!(sniff(b"#!/bin/sh\n"), Sniff::NotElf);
        assert_eq!(sniff(b""), Sniff::NotElf);
        assert!(matches!(sniff(b"\x7fELF\x02\x01"), Sniff::Malformed(_)));
        assert!(matches!(
            sniff(&header(3, 1, EM_X86_64)),
            Sniff::Malformed(_)
        ));
        assert!(matches!(
            sniff(&header(2, 0, EM_X86_64)),
            Sniff::Malformed(_)
        ));
    }

    #[test]
    fn read_dynamic_rejects_hostile_headers_without_panicking() {
        // Program headers past the end of the file.
        let mut h = header(2, 1, EM_X86_64);
        h[32..40].copy_from_slice(&1_000_000u64.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&3u16.to_le_bytes());
        assert!(read_dynamic(&mut io::Cursor::new(&h)).is_err());
        // Entries too small to be program headers.
        h[54..56].copy_from_slice(&4u16.to_le_bytes());
        assert!(read_dynamic(&mut io::Cursor::new(&h)).is_err());
        // A truncated header.
        assert!(read_dynamic(&mut io::Cursor::new(&h[..30])).is_err());
        // No program headers: a static, interpreter-less file.
        let h = header(2, 1, EM_X86_64);
        let d = read_dynamic(&mut io::Cursor::new(&h)).unwrap();
        assert_eq!(d.interpreter, None);
        assert!(d.needed.is_empty());
    }
}

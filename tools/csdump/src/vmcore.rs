//! A bounded ELF64 core-file reader: program headers, notes, and physical memory.
//!
//! Reads kdump's `/proc/vmcore` copies and QEMU `dump-guest-memory` files. Every length and
//! offset taken from the input is checked against the input before use: a lying header gives an
//! error, never a panic or a huge allocation.

use std::borrow::Cow;
use std::ops::Range;

use thiserror::Error;

/// ELF program header type of a loadable segment.
pub const PT_LOAD: u32 = 1;
/// ELF program header type of a note segment.
pub const PT_NOTE: u32 = 4;
/// Name of the ELF note that holds the kernel's vmcoreinfo text.
pub const VMCOREINFO_NOTE_NAME: &[u8] = b"VMCOREINFO";

const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
/// Upper bound on program headers read (a kdump vmcore has one per memory range and CPU).
pub const MAX_PHDRS: usize = 65_535;
/// Upper bound on notes read in one note segment.
pub const MAX_NOTES: usize = 100_000;

/// Why an ELF core file cannot be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VmcoreError {
    /// Not an ELF file.
    #[error("not an ELF file")]
    NotElf,
    /// An ELF file of a class or byte order this reader does not handle.
    #[error("unsupported ELF file: {0}")]
    Unsupported(&'static str),
    /// The file ends before a structure it declares.
    #[error("file offset {offset:#x}: {what} needs {needed} bytes, the file has {available}")]
    Truncated {
        /// Where the structure starts.
        offset: u64,
        /// What is cut.
        what: &'static str,
        /// Bytes needed from `offset`.
        needed: u64,
        /// Bytes available from `offset`.
        available: u64,
    },
    /// A header field is out of range.
    #[error("file offset {offset:#x}: {what}")]
    Invalid {
        /// Where the bad field is.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A physical range is not (entirely) in the file.
    #[error("physical range {start:#x}..{end:#x} is not in the file ({why})")]
    NotMapped {
        /// Start of the range.
        start: u64,
        /// End of the range.
        end: u64,
        /// Which part is missing and why.
        why: String,
    },
}

/// One `PT_LOAD` segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Index of the program header.
    pub index: usize,
    /// Physical address of the segment.
    pub paddr: u64,
    /// Virtual address of the segment.
    pub vaddr: u64,
    /// File offset of its bytes.
    pub offset: u64,
    /// Bytes of the segment in the file, as declared.
    pub filesz: u64,
    /// Bytes of the segment in memory (past `filesz` it reads as zero).
    pub memsz: u64,
    /// Bytes of the declared file range that the file really has (less than `filesz` when the
    /// file is truncated).
    pub present: u64,
}

impl Segment {
    /// Returns the physical range the segment covers in memory.
    pub fn phys_range(&self) -> Range<u64> {
        self.paddr..self.paddr.saturating_add(self.memsz)
    }
}

/// One ELF note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Note<'a> {
    /// Note name without its NUL terminator.
    pub name: &'a [u8],
    /// Note type.
    pub kind: u32,
    /// Note descriptor.
    pub desc: &'a [u8],
    /// File offset of the descriptor.
    pub desc_offset: u64,
}

/// An ELF64 little-endian core file read from bytes.
#[derive(Debug, Clone)]
pub struct ElfCore<'a> {
    data: &'a [u8],
    /// `PT_LOAD` segments in program header order.
    pub segments: Vec<Segment>,
    /// Notes of every `PT_NOTE` segment.
    pub notes: Vec<Note<'a>>,
    /// Problems met that did not stop the reading (a note segment cut short, a truncated
    /// `PT_LOAD`).
    pub warnings: Vec<String>,
}

/// Whether `data` starts with the ELF magic.
pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF")
}

fn rd<const N: usize>(data: &[u8], off: usize) -> Option<[u8; N]> {
    data.get(off..off.checked_add(N)?)?.try_into().ok()
}

fn u16_at(data: &[u8], off: usize) -> u16 {
    rd::<2>(data, off).map_or(0, u16::from_le_bytes)
}

fn u32_at(data: &[u8], off: usize) -> u32 {
    rd::<4>(data, off).map_or(0, u32::from_le_bytes)
}

fn u64_at(data: &[u8], off: usize) -> u64 {
    rd::<8>(data, off).map_or(0, u64::from_le_bytes)
}

fn len64(data: &[u8]) -> u64 {
    u64::try_from(data.len()).unwrap_or(u64::MAX)
}

/// Converts a file offset that was checked against the data length.
fn idx(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

impl<'a> ElfCore<'a> {
    /// Reads the ELF header, program headers and notes of `data`.
    pub fn parse(data: &'a [u8]) -> Result<Self, VmcoreError> {
        if !is_elf(data) {
            return Err(VmcoreError::NotElf);
        }
        let total = len64(data);
        if data.len() < EHDR_SIZE {
            return Err(VmcoreError::Truncated {
                offset: 0,
                what: "ELF header",
                needed: EHDR_SIZE as u64,
                available: total,
            });
        }
        match data.get(4) {
            Some(2) => {}
            Some(1) => return Err(VmcoreError::Unsupported("32-bit ELF (ELFCLASS32)")),
            _ => return Err(VmcoreError::Unsupported("unknown ELF class")),
        }
        if data.get(5) != Some(&1) {
            return Err(VmcoreError::Unsupported("big-endian or unknown byte order"));
        }
        let phoff = u64_at(data, 32);
        let phentsize = u16_at(data, 54);
        let phnum = usize::from(u16_at(data, 56));
        if phnum == 0 {
            return Err(VmcoreError::Invalid {
                offset: 56,
                what: "no program headers".into(),
            });
        }
        if phnum > MAX_PHDRS {
            return Err(VmcoreError::Invalid {
                offset: 56,
                what: format!("{phnum} program headers"),
            });
        }
        if usize::from(phentsize) < PHDR_SIZE {
            return Err(VmcoreError::Invalid {
                offset: 54,
                what: format!("program header size {phentsize}, expected at least {PHDR_SIZE}"),
            });
        }
        let table = u64::from(phentsize) * phnum as u64;
        let end = phoff.checked_add(table);
        if end.is_none_or(|e| e > total) {
            return Err(VmcoreError::Truncated {
                offset: phoff,
                what: "program header table",
                needed: table,
                available: total.saturating_sub(phoff),
            });
        }
        let mut core = ElfCore {
            data,
            segments: Vec::new(),
            notes: Vec::new(),
            warnings: Vec::new(),
        };
        for i in 0..phnum {
            let at = phoff + u64::from(phentsize) * i as u64;
            let ph = data.get(idx(at)..).unwrap_or(&[]);
            let p_type = u32_at(ph, 0);
            let offset = u64_at(ph, 8);
            let vaddr = u64_at(ph, 16);
            let paddr = u64_at(ph, 24);
            let filesz = u64_at(ph, 32);
            let memsz = u64_at(ph, 40);
            let align = u64_at(ph, 48);
            match p_type {
                PT_LOAD => {
                    let present = total.saturating_sub(offset).min(filesz);
                    if present < filesz {
                        core.warnings.push(format!(
                            "program header {i}: PT_LOAD at file offset {offset:#x} declares {filesz:#x} bytes, the file has {present:#x} (truncated vmcore?)"
                        ));
                    }
                    if paddr.checked_add(memsz.max(filesz)).is_none() {
                        return Err(VmcoreError::Invalid {
                            offset: at,
                            what: format!(
                                "program header {i}: PT_LOAD {paddr:#x}+{memsz:#x} wraps the address space"
                            ),
                        });
                    }
                    core.segments.push(Segment {
                        index: i,
                        paddr,
                        vaddr,
                        offset,
                        filesz,
                        memsz: memsz.max(filesz),
                        present,
                    });
                }
                PT_NOTE => core.read_notes(i, offset, filesz, align),
                _ => {}
            }
        }
        Ok(core)
    }

    fn read_notes(&mut self, index: usize, offset: u64, size: u64, align: u64) {
        let total = len64(self.data);
        let end = offset.saturating_add(size);
        if end > total {
            self.warnings.push(format!(
                "program header {index}: PT_NOTE at file offset {offset:#x} declares {size:#x} bytes, the file has {:#x}",
                total.saturating_sub(offset)
            ));
        }
        let Some(seg) = self.data.get(idx(offset.min(total))..idx(end.min(total))) else {
            return;
        };
        let pad: usize = if align == 8 { 8 } else { 4 };
        let round = |v: usize| v.checked_add(pad - 1).map(|v| v & !(pad - 1));
        let mut pos = 0usize;
        for _ in 0..MAX_NOTES {
            if seg.len().saturating_sub(pos) < 12 {
                break;
            }
            let namesz = u32_at(seg, pos) as usize;
            let descsz = u32_at(seg, pos + 4) as usize;
            let kind = u32_at(seg, pos + 8);
            let name_start = pos + 12;
            let desc_start = name_start.checked_add(namesz).and_then(round);
            let desc_end = desc_start.and_then(|d| d.checked_add(descsz));
            let (Some(desc_start), Some(desc_end)) = (desc_start, desc_end) else {
                break;
            };
            if desc_end > seg.len() {
                self.warnings.push(format!(
                    "file offset {:#x}: note {} bytes long runs past its PT_NOTE segment",
                    offset + pos as u64,
                    desc_end - pos
                ));
                break;
            }
            let name = seg.get(name_start..name_start + namesz).unwrap_or(&[]);
            let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
            let desc = seg.get(desc_start..desc_end).unwrap_or(&[]);
            if namesz == 0 && descsz == 0 && kind == 0 {
                // Zero padding at the end of the segment.
                break;
            }
            self.notes.push(Note {
                name,
                kind,
                desc,
                desc_offset: offset + desc_start as u64,
            });
            match round(desc_end) {
                Some(next) if next > pos => pos = next,
                _ => break,
            }
        }
    }

    /// Returns the file's bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Returns the descriptor of the first `VMCOREINFO` note, if any.
    pub fn vmcoreinfo(&self) -> Option<&'a [u8]> {
        self.notes
            .iter()
            .find(|n| n.name == VMCOREINFO_NOTE_NAME)
            .map(|n| n.desc)
    }

    /// Maps a physical address to a file offset, if that byte is stored in the file.
    pub fn phys_to_offset(&self, paddr: u64) -> Option<u64> {
        self.segments.iter().find_map(|s| {
            let rel = paddr.checked_sub(s.paddr)?;
            (rel < s.present).then(|| s.offset + rel)
        })
    }

    /// Reads `len` bytes of physical memory at `paddr`, across as many `PT_LOAD`s as it takes.
    ///
    /// Borrows from the file when one segment holds the whole range; copies otherwise. Bytes
    /// past a segment's `filesz` but within its `memsz` read as zero; a range not covered by any
    /// segment, or cut by the end of the file, is an error.
    pub fn read_phys(&self, paddr: u64, len: u64) -> Result<Cow<'a, [u8]>, VmcoreError> {
        let end = paddr
            .checked_add(len)
            .ok_or_else(|| VmcoreError::NotMapped {
                start: paddr,
                end: u64::MAX,
                why: "range wraps the address space".into(),
            })?;
        // Fast path: one segment holds it all in the file.
        for s in &self.segments {
            if let Some(rel) = paddr.checked_sub(s.paddr) {
                if rel.checked_add(len).is_some_and(|e| e <= s.present) {
                    let start = s.offset + rel;
                    if let Some(b) = self.data.get(idx(start)..idx(start + len)) {
                        return Ok(Cow::Borrowed(b));
                    }
                }
            }
        }
        let total = len64(self.data);
        if len > total.saturating_mul(2).max(1 << 30) {
            return Err(VmcoreError::NotMapped {
                start: paddr,
                end,
                why: format!("{len:#x} bytes is more than the file could hold"),
            });
        }
        let mut out = Vec::with_capacity(idx(len));
        let mut cur = paddr;
        // Each pass consumes at least one byte from a segment, so at most one pass per segment.
        for _ in 0..=self.segments.len() {
            if cur >= end {
                break;
            }
            let Some(s) = self.segments.iter().find(|s| s.phys_range().contains(&cur)) else {
                return Err(VmcoreError::NotMapped {
                    start: paddr,
                    end,
                    why: format!("no PT_LOAD covers physical address {cur:#x}"),
                });
            };
            let rel = cur - s.paddr;
            let take_end = end.min(s.paddr + s.memsz);
            let take = take_end - cur;
            // Part stored in the file.
            let in_file = s.filesz.saturating_sub(rel).min(take);
            if in_file > 0 {
                let avail = s.present.saturating_sub(rel).min(in_file);
                if avail < in_file {
                    return Err(VmcoreError::NotMapped {
                        start: paddr,
                        end,
                        why: format!(
                            "physical address {:#x} is past the end of the file in PT_LOAD {} (truncated vmcore?)",
                            cur + avail,
                            s.index
                        ),
                    });
                }
                let start = s.offset + rel;
                let b = self
                    .data
                    .get(idx(start)..idx(start + in_file))
                    .ok_or_else(|| VmcoreError::NotMapped {
                        start: paddr,
                        end,
                        why: "segment outside the file".into(),
                    })?;
                out.extend_from_slice(b);
            }
            out.resize(out.len() + idx(take - in_file), 0);
            cur = take_end;
        }
        if cur < end {
            return Err(VmcoreError::NotMapped {
                start: paddr,
                end,
                why: format!("no PT_LOAD covers physical address {cur:#x}"),
            });
        }
        Ok(Cow::Owned(out))
    }

    /// Scans the page starts (every `page` bytes of physical address) of every `PT_LOAD` for
    /// `magic`; returns the physical addresses where it was found, in segment order, at most
    /// `limit` of them.
    ///
    /// Only the first `magic.len()` bytes of each page are read, so the cost is one touch per
    /// page, not a read of the whole file.
    pub fn scan_page_starts(&self, magic: &[u8], page: u64, limit: usize) -> Vec<u64> {
        let mut hits = Vec::new();
        let page = page.max(1);
        for s in &self.segments {
            let first = s.paddr.div_ceil(page).saturating_mul(page);
            let Some(mut rel) = first.checked_sub(s.paddr) else {
                continue;
            };
            while rel < s.present {
                let off = idx(s.offset + rel);
                if self
                    .data
                    .get(off..off.saturating_add(magic.len()))
                    .is_some_and(|b| b == magic)
                {
                    hits.push(s.paddr + rel);
                    if hits.len() >= limit {
                        return hits;
                    }
                }
                rel = match rel.checked_add(page) {
                    Some(r) => r,
                    None => break,
                };
            }
        }
        hits
    }
}

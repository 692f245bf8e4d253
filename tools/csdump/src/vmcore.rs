//! csdump's one vmcore reader: every format a kdump set-up saves, read in Rust.
//!
//! - ELF cores: a copy of `/proc/vmcore`, QEMU's `dump-guest-memory`, `makedumpfile -E`: the
//!   program headers and notes are read here, memory through the `PT_LOAD`s.
//! - kdump-compressed (`makedumpfile -c/-l/-p/-z`, zlib, lzo, snappy or zstd pages, filtered by
//!   its dump level), what Fedora and RHEL save, and the older diskdump: [`kdump`], written from
//!   makedumpfile's documented layout, with pure-Rust decompressors.
//! - The flattened format (`makedumpfile -F`, what Debian's kdump-tools saves), also gzip'ed
//!   (flate2 on miniz_oxide): rearranged, as `makedumpfile -R` would, into an unnamed temporary
//!   file (gone when csdump exits), then read as above.
//!
//! No C code reads the file in csdump's process: the input may be hostile (a damaged dump from
//! the field, or a crafted one). Every length and offset the file gives is checked against the
//! file's size and its container before it is used or allocated (a program header's file range,
//! a note's sizes, the bitmaps, a page descriptor's offset and size, a page's decompressed size);
//! a failure is an error that names the file offset or page and what is wrong. libkdumpfile,
//! which csdump read through before, is the test oracle: `tests/oracle.rs` and
//! `examples/vmcore_oracle.rs` check that both read the same bytes from every page.
//!
//! On top of the memory, this module says which format it was, lists the notes (a vmcore device
//! dump is an ELF note), and classifies a page that cannot be read: filtered out by makedumpfile
//! (hence zero), not memory of this dump, or damaged (a truncated file, data that does not
//! decompress).

use std::fs::File;
use std::io::BufReader;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use thiserror::Error;

use crate::progress::Progress;

pub mod kdump;

use kdump::Kdump;
use kdump::PAGE_DESC_SIZE;

/// Name of the ELF note that holds the kernel's vmcoreinfo text.
pub const VMCOREINFO_NOTE_NAME: &[u8] = b"VMCOREINFO";
/// Name of a vmcore device dump note (`VMCOREDD_NOTE_NAME`, include/uapi/linux/vmcore.h).
pub const VMCOREDD_NOTE_NAME: &[u8] = b"LINUX";
/// Type of a vmcore device dump note (`NT_VMCOREDD`, include/uapi/linux/elf.h).
pub const NT_VMCOREDD: u32 = 0x700;
/// Bytes of the device dump's name at the start of its note descriptor
/// (`VMCOREDD_MAX_NAME_BYTES`).
pub const VMCOREDD_MAX_NAME_BYTES: usize = 44;
/// Upper bound on notes read.
pub const MAX_NOTES: usize = 100_000;
/// Upper bound on program headers read.
pub const MAX_PHDRS: usize = 65_535;

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const FLAT_SIGNATURE: &[u8] = b"makedumpfile\0";
const FLAT_HEADER_SIZE: u64 = 4096;
/// Largest single record of a flattened stream (makedumpfile writes at most a few MiB at once).
const FLAT_MAX_RECORD: u64 = 1 << 30;
const KDUMP_SIGNATURE: &[u8] = b"KDUMP   ";
const DISKDUMP_SIGNATURE: &[u8] = b"DISKDUMP";
/// Largest VMCOREINFO text read (the kernel's is at most a page).
pub const MAX_VMCOREINFO: u64 = 1 << 20;
/// Page size of a dump that does not say its own (an ELF core without VMCOREINFO).
pub const DEFAULT_PAGE_SIZE: u64 = 4096;
/// `EM_AARCH64`.
const EM_AARCH64: u16 = 183;

/// Why a vmcore cannot be opened or a range of it read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VmcoreError {
    /// The file cannot be read.
    #[error("{0}")]
    Io(String),
    /// The file is a vmcore in a form csdump does not read.
    #[error("{0}")]
    Unsupported(String),
    /// The file's structure is damaged.
    #[error("file offset {offset:#x}: {what}")]
    Invalid {
        /// Where the damage is.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A physical range is not (entirely) in the dump.
    #[error("physical range {start:#x}..{end:#x} is not in the dump ({why})")]
    NotMapped {
        /// Start of the range.
        start: u64,
        /// End of the range.
        end: u64,
        /// Which page is missing and why.
        why: String,
    },
    /// A page is in the dump but cannot be read back.
    #[error("page {pfn:#x} (physical {paddr:#x}) is damaged: {why}")]
    Damaged {
        /// Page frame number.
        pfn: u64,
        /// Physical address of the page.
        paddr: u64,
        /// What is wrong (the truncation, the descriptor, the decompression).
        why: String,
    },
    /// An error met in a file already found damaged while it was read (a flattened stream cut
    /// short): both are said, so that the damage is named whatever else failed.
    #[error("{error}; the file is damaged: {}", damage.join("; "))]
    InDamagedFile {
        /// What stopped the reading.
        error: Box<VmcoreError>,
        /// The damage found before.
        damage: Vec<String>,
    },
}

impl VmcoreError {
    /// `self`, naming `damage` too when there is any.
    fn in_file_with(self, damage: &[String]) -> Self {
        if damage.is_empty() {
            self
        } else {
            VmcoreError::InDamagedFile {
                error: Box::new(self),
                damage: damage.to_vec(),
            }
        }
    }
}

fn io_err(what: &str, e: std::io::Error) -> VmcoreError {
    VmcoreError::Io(format!("{what}: {e}"))
}

/// The container format of a vmcore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// ELF64 core file.
    Elf,
    /// makedumpfile's kdump-compressed format ("KDUMP   ").
    KdumpCompressed,
    /// The older diskdump format ("DISKDUMP").
    Diskdump,
}

/// What a vmcore file was, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// The dump's own format.
    pub container: Container,
    /// The file was makedumpfile's flattened stream (`-F`).
    pub flattened: bool,
    /// The file was gzip'ed.
    pub gzip: bool,
    /// Page compression of a kdump-compressed dump (`zlib`, `lzo`, `snappy`, `zstd`, or `none`).
    pub compression: Option<&'static str>,
    /// makedumpfile's dump level (`-d`), for a kdump-compressed dump.
    pub dump_level: Option<i32>,
    /// The reader's short name of the format ("elf64", "kdump", "diskdump").
    pub library_name: String,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.container {
            Container::Elf => write!(f, "ELF vmcore")?,
            Container::KdumpCompressed => write!(f, "kdump-compressed vmcore")?,
            Container::Diskdump => write!(f, "diskdump vmcore")?,
        }
        let mut extra = Vec::new();
        if let Some(c) = self.compression {
            extra.push(format!("{c} pages"));
        }
        if let Some(l) = self.dump_level {
            extra.push(format!("dump level {l}"));
        }
        if self.flattened {
            extra.push("flattened (makedumpfile -F)".into());
        }
        if self.gzip {
            extra.push("gzip'ed".into());
        }
        if !extra.is_empty() {
            write!(f, ", {}", extra.join(", "))?;
        }
        Ok(())
    }
}

/// What the first bytes of a file say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// An ELF file.
    Elf,
    /// A kdump-compressed or diskdump file.
    Kdump,
    /// makedumpfile's flattened stream.
    Flattened,
    /// A gzip stream.
    Gzip,
    /// Compressed in a way csdump does not undo; the name of the tool.
    OtherCompression(&'static str),
    /// Not a vmcore (a region file, a memory image).
    Other,
}

/// Tells from its first bytes what a file is.
pub fn sniff(head: &[u8]) -> Sniff {
    if head.starts_with(b"\x7fELF") {
        Sniff::Elf
    } else if head.starts_with(KDUMP_SIGNATURE) || head.starts_with(DISKDUMP_SIGNATURE) {
        Sniff::Kdump
    } else if head.starts_with(FLAT_SIGNATURE) {
        Sniff::Flattened
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Sniff::Gzip
    } else if head.starts_with(b"BZh") && head.get(3).is_some_and(u8::is_ascii_digit) {
        Sniff::OtherCompression("bzip2")
    } else if head.starts_with(b"\xfd7zXZ\0") {
        Sniff::OtherCompression("xz")
    } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        Sniff::OtherCompression("lz4")
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Sniff::OtherCompression("zstd")
    } else {
        Sniff::Other
    }
}

/// Whether `data` starts like a vmcore csdump reads (or one it would name as compressed).
pub fn is_vmcore(head: &[u8]) -> bool {
    sniff(head) != Sniff::Other
}

/// One `PT_LOAD` of an ELF vmcore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Index of the program header.
    pub index: usize,
    /// Physical address.
    pub paddr: u64,
    /// File offset of its bytes.
    pub offset: u64,
    /// Bytes in the file, as declared.
    pub filesz: u64,
    /// Bytes of memory.
    pub memsz: u64,
    /// Bytes of the declared file range that the file has.
    pub present: u64,
}

/// One ELF note, located in the (possibly rearranged) dump file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteRef {
    /// Note name without its NUL padding.
    pub name: Vec<u8>,
    /// Note type.
    pub kind: u32,
    /// File offset of the descriptor.
    pub desc_offset: u64,
    /// Descriptor size.
    pub desc_size: u64,
}

/// A vmcore device dump (`vmcore_add_device_dump()`), as found in the notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDump {
    /// The dump's name (`vmcoredd_data.dump_name`).
    pub name: String,
    /// File offset of its data (after the name field).
    pub data_offset: u64,
    /// Bytes of data, the kernel's page-size padding included.
    pub data_size: u64,
}

/// Bytes read from physical memory, with the pages that the dump filtered out (read as zero).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhysBytes {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Page frame numbers of the pages makedumpfile excluded (its dump level), read as zeros.
    pub excluded: Vec<u64>,
}

/// What a lenient read of physical memory got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhysRead {
    /// The bytes read, up to the first page that is not memory of this dump.
    pub bytes: Vec<u8>,
    /// Page frame numbers of the pages makedumpfile excluded, read as zeros.
    pub excluded: Vec<u64>,
    /// Page frame numbers of damaged pages, read as zeros, with what is wrong.
    pub damaged: Vec<(u64, String)>,
    /// Why the read stopped before `len`, if it did.
    pub stopped: Option<VmcoreError>,
}

/// An open vmcore.
pub struct Vmcore {
    /// The file the pages are read from (the input, or the rearranged temporary file).
    file: File,
    file_len: u64,
    /// What the input was.
    pub format: Format,
    /// `PT_LOAD`s of an ELF vmcore, in program header order.
    pub segments: Vec<Segment>,
    /// The page maps and descriptors of a kdump-compressed file.
    kdump: Option<Kdump>,
    page_size: u64,
    arch: Option<String>,
    vmcoreinfo: Option<Vec<u8>>,
    /// The notes, in file order.
    pub notes: Vec<NoteRef>,
    /// Problems met that did not stop the reading (a truncated file, a cut note segment).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Vmcore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vmcore")
            .field("format", &self.format)
            .field("file_len", &self.file_len)
            .field("segments", &self.segments.len())
            .field("notes", &self.notes.len())
            .finish_non_exhaustive()
    }
}

fn rd<const N: usize>(data: &[u8], off: usize) -> Option<[u8; N]> {
    data.get(off..off.checked_add(N)?)?.try_into().ok()
}

pub(crate) fn le16(data: &[u8], off: usize) -> u16 {
    rd::<2>(data, off).map_or(0, u16::from_le_bytes)
}

pub(crate) fn le32(data: &[u8], off: usize) -> u32 {
    rd::<4>(data, off).map_or(0, u32::from_le_bytes)
}

pub(crate) fn le64(data: &[u8], off: usize) -> u64 {
    rd::<8>(data, off).map_or(0, u64::from_le_bytes)
}

/// Reads up to `buf.len()` bytes at `offset`; returns how many (fewer only at the end).
pub(crate) fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset.saturating_add(done as u64);
        match file.read_at(&mut buf[done..], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads exactly `len` bytes at `offset`, or says what is cut.
pub(crate) fn read_exact_at(
    file: &File,
    offset: u64,
    len: usize,
    what: &str,
) -> Result<Vec<u8>, VmcoreError> {
    // Bound by the file before allocating: a lying length must not cost memory.
    let file_len = file.metadata().map_err(|e| io_err(what, e))?.len();
    let avail = file_len.saturating_sub(offset);
    if (len as u64) > avail {
        return Err(VmcoreError::Invalid {
            offset,
            what: format!("{what} needs {len:#x} bytes, the file has {avail:#x} (truncated?)"),
        });
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len)
        .map_err(|_| VmcoreError::Io(format!("{what}: cannot allocate {len} bytes")))?;
    buf.resize(len, 0);
    let n = read_at(file, offset, &mut buf).map_err(|e| io_err(what, e))?;
    if n < len {
        return Err(VmcoreError::Invalid {
            offset,
            what: format!("{what} needs {len:#x} bytes, the file has {n:#x} (truncated?)"),
        });
    }
    Ok(buf)
}

/// Rearranges makedumpfile's flattened stream `input` (its 4096-byte header already consumed
/// when `header_read`) into `out`, as `makedumpfile -R` does. Returns warnings.
fn unflatten<R: Read>(
    mut input: R,
    out: &mut File,
    header_read: bool,
    progress: &Progress,
) -> Result<Vec<String>, VmcoreError> {
    let mut warnings = Vec::new();
    let mut pos = 0u64;
    if !header_read {
        let mut head = vec![0u8; FLAT_HEADER_SIZE as usize];
        input
            .read_exact(&mut head)
            .map_err(|e| io_err("flattened header", e))?;
        check_flat_header(&head)?;
        pos = FLAT_HEADER_SIZE;
    } else {
        pos += FLAT_HEADER_SIZE;
    }
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut h = [0u8; 16];
        match read_full(&mut input, &mut h) {
            Ok(16) => {}
            Ok(n) => {
                warnings.push(format!(
                    "flattened stream ends at byte {:#x}{} without its end marker (truncated?)",
                    pos + n as u64,
                    if n > 0 {
                        ", inside a record header"
                    } else {
                        ""
                    }
                ));
                break;
            }
            Err(e) => return Err(io_err("flattened stream", e)),
        }
        let offset = i64::from_be_bytes(h[..8].try_into().unwrap_or([0; 8]));
        let size = i64::from_be_bytes(h[8..].try_into().unwrap_or([0; 8]));
        if offset == -1 && size == -1 {
            break;
        }
        let (Ok(offset), Ok(size)) = (u64::try_from(offset), u64::try_from(size)) else {
            return Err(VmcoreError::Invalid {
                offset: pos,
                what: format!("flattened record header offset {offset}, size {size}"),
            });
        };
        if size == 0 || size > FLAT_MAX_RECORD || offset.checked_add(size).is_none() {
            return Err(VmcoreError::Invalid {
                offset: pos,
                what: format!("flattened record of {size:#x} bytes at dump offset {offset:#x}"),
            });
        }
        pos += 16;
        out.seek(SeekFrom::Start(offset))
            .map_err(|e| io_err("rearranged dump", e))?;
        let mut left = size;
        while left > 0 {
            let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
            let n = read_full(&mut input, &mut buf[..want])
                .map_err(|e| io_err("flattened stream", e))?;
            out.write_all(&buf[..n])
                .map_err(|e| io_err("rearranged dump (temporary file)", e))?;
            pos += n as u64;
            left -= n as u64;
            progress.set(pos);
            if n < want {
                warnings.push(format!(
                    "flattened stream ends at byte {pos:#x}, {left:#x} bytes into a record for dump offset {offset:#x} (truncated?)"
                ));
                return Ok(warnings);
            }
        }
    }
    Ok(warnings)
}

fn check_flat_header(head: &[u8]) -> Result<(), VmcoreError> {
    let ty = i64::from_be_bytes(rd::<8>(head, 16).unwrap_or([0; 8]));
    if !head.starts_with(FLAT_SIGNATURE) || ty != 1 {
        return Err(VmcoreError::Invalid {
            offset: 0,
            what: format!("not a makedumpfile flattened header (type {ty})"),
        });
    }
    Ok(())
}

/// Reads until `buf` is full or the input ends; returns the count.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// An unnamed temporary file for a rearranged or decompressed dump.
fn temp_file() -> Result<File, VmcoreError> {
    tempfile::tempfile().map_err(|e| {
        VmcoreError::Io(format!(
            "cannot create a temporary file in {} for the rearranged dump (set TMPDIR): {e}",
            std::env::temp_dir().display()
        ))
    })
}

/// What csdump reads of a vmcore's structure.
#[derive(Default)]
struct Parsed {
    warnings: Vec<String>,
    segments: Vec<Segment>,
    kdump: Option<Kdump>,
    notes: Vec<NoteRef>,
    compression: Option<&'static str>,
    dump_level: Option<i32>,
    arch: Option<String>,
    vmcoreinfo: Option<Vec<u8>>,
}

impl Parsed {
    fn elf(&mut self, file: &File, file_len: u64) -> Result<(), VmcoreError> {
        let eh = read_exact_at(file, 0, 64, "ELF header")?;
        // The dump format is little-endian and csdump reads arm64 kernels' dumps.
        match eh.get(4) {
            Some(2) => {}
            Some(1) => {
                return Err(VmcoreError::Unsupported(
                    "unsupported ELF file: 32-bit (ELFCLASS32)".into(),
                ))
            }
            _ => {
                return Err(VmcoreError::Unsupported(
                    "unsupported ELF file: unknown class".into(),
                ))
            }
        }
        if eh.get(5) != Some(&1) {
            return Err(VmcoreError::Unsupported(
                "unsupported ELF file: big-endian or unknown byte order".into(),
            ));
        }
        self.arch = Some(match le16(&eh, 18) {
            EM_AARCH64 => "aarch64".to_string(),
            62 => "x86_64".to_string(),
            m => format!("ELF machine {m}"),
        });
        let phoff = le64(&eh, 32);
        let phentsize = u64::from(le16(&eh, 54));
        let phnum = usize::from(le16(&eh, 56));
        // No program header means no notes and no memory; a vmcore has both.
        if phnum == 0 || phnum > MAX_PHDRS || phentsize < 56 {
            return Err(VmcoreError::Invalid {
                offset: 54,
                what: format!(
                    "ELF header: {phnum} program headers of {phentsize} bytes (e_phnum, e_phentsize): \
                     a vmcore has program headers (its notes and memory) of at least 56 bytes"
                ),
            });
        }
        // A section header table, when there is one, must be whole (a vmcore has none; a
        // table that is not whole says the header is damaged).
        let shoff = le64(&eh, 40);
        let shentsize = u64::from(le16(&eh, 58));
        let shnum = u64::from(le16(&eh, 60));
        if shnum > 0
            && (shentsize < 64
                || shoff
                    .checked_add(shentsize * shnum)
                    .is_none_or(|end| shoff == 0 || end > file_len))
        {
            return Err(VmcoreError::Invalid {
                offset: 40,
                what: format!(
                    "ELF header: {shnum} section headers of {shentsize} bytes at file offset \
                     {shoff:#x} are not a whole table in the file ({file_len:#x} bytes)"
                ),
            });
        }
        // At most 65535 entries of at most 65535 bytes: bounded, and checked against the file.
        let table_len = phentsize * phnum as u64;
        let table = read_exact_at(
            file,
            phoff,
            usize::try_from(table_len).unwrap_or(usize::MAX),
            "program header table",
        )?;
        for i in 0..phnum {
            let at = usize::try_from(phentsize).unwrap_or(56) * i;
            let ph = table.get(at..).unwrap_or(&[]);
            let ph_at = phoff.saturating_add(at as u64);
            let p_type = le32(ph, 0);
            let offset = le64(ph, 8);
            let paddr = le64(ph, 24);
            let filesz = le64(ph, 32);
            let memsz = le64(ph, 40);
            let align = le64(ph, 48);
            let corrupt = |what: String| VmcoreError::Invalid {
                offset: ph_at,
                what: format!("program header {i}: {what} (corrupt program header)"),
            };
            match p_type {
                PT_LOAD => {
                    // The ELF rule (a segment's file image is at most its memory image): a
                    // p_filesz above p_memsz is a lie, not a truncated file.
                    if filesz > memsz {
                        return Err(corrupt(format!(
                            "PT_LOAD at file offset {offset:#x} declares p_filesz {filesz:#x}, more than its p_memsz {memsz:#x}"
                        )));
                    }
                    if offset.checked_add(filesz).is_none() {
                        return Err(corrupt(format!(
                            "PT_LOAD at file offset {offset:#x} declares p_filesz {filesz:#x}, past any file offset"
                        )));
                    }
                    if paddr.checked_add(memsz).is_none() {
                        return Err(corrupt(format!(
                            "PT_LOAD {paddr:#x}+{memsz:#x} wraps the address space"
                        )));
                    }
                    let present = file_len.saturating_sub(offset).min(filesz);
                    if present < filesz {
                        self.warnings.push(format!(
                            "program header {i}: PT_LOAD at file offset {offset:#x} declares {filesz:#x} bytes, the file has {present:#x} (truncated vmcore?)"
                        ));
                    }
                    self.segments.push(Segment {
                        index: i,
                        paddr,
                        offset,
                        filesz,
                        memsz,
                        present,
                    });
                }
                PT_NOTE => {
                    let end = offset.saturating_add(filesz);
                    if end > file_len {
                        // The notes come first in every vmcore: a file cut inside them holds
                        // nothing to read.
                        return Err(VmcoreError::Invalid {
                            offset: ph_at,
                            what: format!(
                                "program header {i}: PT_NOTE at file offset {offset:#x} declares {filesz:#x} bytes, the file has {:#x}: its notes are cut",
                                file_len.saturating_sub(offset)
                            ),
                        });
                    }
                    let pad = if align == 8 { 8 } else { 4 };
                    self.walk_notes(file, offset, end, pad)?;
                }
                // Kernel, QEMU and makedumpfile vmcores hold notes and loads only; anything else
                // is not a vmcore.
                0 => {}
                other => {
                    return Err(VmcoreError::Invalid {
                        offset: ph_at,
                        what: format!(
                            "program header {i}: type {other:#x}, not PT_LOAD or PT_NOTE (not a vmcore)"
                        ),
                    });
                }
            }
        }
        if let Some(n) = self.notes.iter().find(|n| n.name == VMCOREINFO_NOTE_NAME) {
            let n = n.clone();
            self.take_vmcoreinfo(file, n.desc_offset, n.desc_size);
        }
        Ok(())
    }

    /// Reads the VMCOREINFO text at `offset`, `size` bytes, if it is in the file and not larger
    /// than [`MAX_VMCOREINFO`]; a warning otherwise.
    fn take_vmcoreinfo(&mut self, file: &File, offset: u64, size: u64) {
        if size > MAX_VMCOREINFO {
            self.warnings.push(format!(
                "the VMCOREINFO at file offset {offset:#x} declares {size:#x} bytes (more than {MAX_VMCOREINFO:#x}): not read"
            ));
            return;
        }
        match read_exact_at(file, offset, size as usize, "VMCOREINFO") {
            Ok(v) => self.vmcoreinfo = Some(v),
            Err(e) => self.warnings.push(e.to_string()),
        }
    }

    fn kdump(
        &mut self,
        file: &File,
        file_len: u64,
        head: &[u8],
        container: Container,
    ) -> Result<(), VmcoreError> {
        // struct disk_dump_header (makedumpfile's diskdump_mod.h) of a 64-bit target.
        let h = kdump::Header::parse(head)?;
        self.compression = Some(h.compression());
        self.arch = kdump::Header::machine(head);
        if h.status & kdump::FLAG_INCOMPLETE != 0 {
            self.warnings.push(
                "the dump is marked incomplete (makedumpfile ran out of space writing it)".into(),
            );
        }
        let kd = Kdump::open(file, file_len, &h)?;
        let block_size = kd.block_size;
        self.kdump = Some(kd);
        if container == Container::Diskdump {
            return Ok(());
        }
        // struct kdump_sub_header, one block in (before the bitmaps: in the file).
        let sub = read_exact_at(file, block_size, 104, "kdump sub-header")?;
        if h.version >= 1 {
            self.dump_level = i32::try_from(le32(&sub, 8)).ok();
        }
        if h.version >= 4 {
            let offset_note = le64(&sub, 48);
            let size_note = le64(&sub, 56);
            if size_note > 0 {
                let end = offset_note.saturating_add(size_note);
                if end > file_len {
                    self.warnings.push(format!(
                        "the note area at file offset {offset_note:#x} declares {size_note:#x} bytes, the file has {:#x}",
                        file_len.saturating_sub(offset_note)
                    ));
                }
                self.walk_notes(file, offset_note, end.min(file_len), 4)?;
            }
        }
        if h.version >= 3 {
            let offset = le64(&sub, 32);
            let size = le64(&sub, 40);
            if size > 0 {
                self.take_vmcoreinfo(file, offset, size);
            }
        }
        if self.vmcoreinfo.is_none() {
            if let Some(n) = self.notes.iter().find(|n| n.name == VMCOREINFO_NOTE_NAME) {
                let n = n.clone();
                self.take_vmcoreinfo(file, n.desc_offset, n.desc_size);
            }
        }
        Ok(())
    }

    /// Lists the notes in `start..end` of the file (`end` at most the file's size), reading
    /// only their headers and names.
    fn walk_notes(
        &mut self,
        file: &File,
        start: u64,
        end: u64,
        pad: u64,
    ) -> Result<(), VmcoreError> {
        let round = |v: u64| v.checked_add(pad - 1).map(|v| v & !(pad - 1));
        let mut pos = start;
        for _ in 0..MAX_NOTES {
            if end.saturating_sub(pos) < 12 {
                break;
            }
            let h = read_exact_at(file, pos, 12, "note header")?;
            let namesz = u64::from(le32(&h, 0));
            let descsz = u64::from(le32(&h, 4));
            let kind = le32(&h, 8);
            if namesz == 0 && descsz == 0 && kind == 0 {
                // Zero padding after the last note.
                break;
            }
            let name_at = pos + 12;
            let desc_at = name_at.checked_add(namesz).and_then(round);
            let desc_end = desc_at.and_then(|d| d.checked_add(descsz));
            let (Some(desc_at), Some(desc_end)) = (desc_at, desc_end) else {
                break;
            };
            if desc_end > end || namesz > 4096 {
                self.warnings.push(format!(
                    "file offset {pos:#x}: note of {:#x} bytes runs past its note area (ends at {end:#x})",
                    desc_end.saturating_sub(pos)
                ));
                break;
            }
            let name = read_exact_at(
                file,
                name_at,
                usize::try_from(namesz).unwrap_or(0),
                "note name",
            )?;
            let name = name.split(|&b| b == 0).next().unwrap_or(&[]).to_vec();
            self.notes.push(NoteRef {
                name,
                kind,
                desc_offset: desc_at,
                desc_size: descsz,
            });
            match round(desc_end) {
                Some(next) if next > pos => pos = next,
                _ => break,
            }
        }
        Ok(())
    }
}

/// The page size VMCOREINFO states (`PAGESIZE=`), when it is a power of two from 4 KiB to 1 MiB.
fn vmcoreinfo_page_size(info: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(info.split(|&b| b == 0).next()?).ok()?;
    let v: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("PAGESIZE="))?
        .trim()
        .parse()
        .ok()?;
    (v.is_power_of_two() && (4096..=kdump::MAX_BLOCK_SIZE).contains(&v)).then_some(v)
}

impl Vmcore {
    /// Opens the vmcore at `path`.
    pub fn open(path: &Path) -> Result<Self, VmcoreError> {
        let file = File::open(path).map_err(|e| io_err("cannot open", e))?;
        Self::from_file(file)
    }

    /// Opens a vmcore held in memory (tests, fuzzing): it is copied into an anonymous memory file.
    pub fn from_bytes(data: &[u8]) -> Result<Self, VmcoreError> {
        let mut f = memfd()?;
        f.write_all(data).map_err(|e| io_err("memory file", e))?;
        Self::from_file(f)
    }

    /// Opens the vmcore in `file`.
    pub fn from_file(file: File) -> Result<Self, VmcoreError> {
        let len = file.metadata().map_err(|e| io_err("cannot stat", e))?.len();
        let mut head = [0u8; 4096];
        let n = read_at(&file, 0, &mut head).map_err(|e| io_err("cannot read", e))?;
        let head = &head[..n];
        let mut warnings = Vec::new();
        // The streams below read from the start, wherever the caller left the file.
        (&file)
            .seek(SeekFrom::Start(0))
            .map_err(|e| io_err("cannot seek", e))?;
        let (file, flattened, gzip) = match sniff(head) {
            Sniff::Elf | Sniff::Kdump => (file, false, false),
            Sniff::Flattened => {
                check_flat_header(head)?;
                let progress = Progress::new(len, "rearranging the flattened dump");
                let mut out = temp_file()?;
                let mut r = BufReader::with_capacity(1 << 20, &file);
                warnings.extend(unflatten(&mut r, &mut out, false, &progress)?);
                progress.finish();
                (out, true, false)
            }
            Sniff::Gzip => {
                let progress = Progress::new(len, "decompressing the gzip'ed dump");
                let counted = ProgressReader {
                    inner: BufReader::with_capacity(1 << 20, &file),
                    progress: &progress,
                    read: 0,
                };
                let mut gz = flate2::read::MultiGzDecoder::new(counted);
                let mut inner_head = vec![0u8; FLAT_HEADER_SIZE as usize];
                let got = read_full(&mut gz, &mut inner_head)
                    .map_err(|e| io_err("gzip stream", e))?;
                inner_head.truncate(got);
                let mut out = temp_file()?;
                let flattened = match sniff(&inner_head) {
                    Sniff::Flattened => {
                        check_flat_header(&inner_head)?;
                        warnings.extend(unflatten(
                            &mut gz,
                            &mut out,
                            true,
                            &Progress::hidden(),
                        )?);
                        true
                    }
                    Sniff::Elf | Sniff::Kdump => {
                        out.write_all(&inner_head)
                            .map_err(|e| io_err("temporary file", e))?;
                        std::io::copy(&mut gz, &mut out)
                            .map_err(|e| io_err("gzip stream", e))?;
                        false
                    }
                    _ => {
                        return Err(VmcoreError::Unsupported(
                            "a gzip'ed file that is not a vmcore (no ELF, KDUMP or flattened header inside)".into(),
                        ))
                    }
                };
                progress.finish();
                (out, flattened, true)
            }
            Sniff::OtherCompression(tool) => {
                return Err(VmcoreError::Unsupported(format!(
                    "{tool}-compressed file: decompress it first (e.g. `{tool} -dc FILE > vmcore`); csdump reads gzip'ed dumps itself"
                )))
            }
            Sniff::Other => {
                return Err(VmcoreError::Unsupported(
                    "not a vmcore (no ELF, KDUMP, DISKDUMP or makedumpfile header)".into(),
                ))
            }
        };
        let damage = warnings.clone();
        Self::from_plain_file(file, flattened, gzip, warnings).map_err(|e| e.in_file_with(&damage))
    }

    /// Opens `file`, an ELF or kdump-compressed vmcore (rearranged or decompressed by
    /// `from_file` when `flattened` or `gzip`), with the `warnings` met on the way.
    fn from_plain_file(
        file: File,
        flattened: bool,
        gzip: bool,
        warnings: Vec<String>,
    ) -> Result<Self, VmcoreError> {
        let file_len = file.metadata().map_err(|e| io_err("cannot stat", e))?.len();
        let mut head = [0u8; 4096];
        let n = read_at(&file, 0, &mut head).map_err(|e| io_err("cannot read", e))?;
        let head = &head[..n];
        let container = if head.starts_with(b"\x7fELF") {
            Container::Elf
        } else if head.starts_with(KDUMP_SIGNATURE) {
            Container::KdumpCompressed
        } else if head.starts_with(DISKDUMP_SIGNATURE) {
            Container::Diskdump
        } else {
            return Err(VmcoreError::Unsupported(
                "the rearranged dump has no ELF or KDUMP header at offset 0".into(),
            ));
        };
        let mut format = Format {
            container,
            flattened,
            gzip,
            compression: None,
            dump_level: None,
            library_name: String::new(),
        };
        let mut parsed = Parsed {
            warnings,
            ..Parsed::default()
        };
        match container {
            Container::Elf => parsed.elf(&file, file_len)?,
            Container::KdumpCompressed | Container::Diskdump => {
                parsed.kdump(&file, file_len, head, container)?;
            }
        }
        format.compression = parsed.compression;
        format.dump_level = parsed.dump_level;
        let page_size = match &parsed.kdump {
            Some(k) => k.block_size,
            None => parsed
                .vmcoreinfo
                .as_deref()
                .and_then(vmcoreinfo_page_size)
                .unwrap_or(DEFAULT_PAGE_SIZE),
        };
        format.library_name = match container {
            Container::Elf => "elf64",
            Container::KdumpCompressed => "kdump",
            Container::Diskdump => "diskdump",
        }
        .to_string();
        Ok(Self {
            file,
            file_len,
            format,
            segments: parsed.segments,
            kdump: parsed.kdump,
            page_size,
            arch: parsed.arch,
            vmcoreinfo: parsed.vmcoreinfo,
            notes: parsed.notes,
            warnings: parsed.warnings,
        })
    }

    /// Reads a note's descriptor, at most `max` bytes of it.
    pub fn note_desc(&self, note: &NoteRef, max: u64) -> Result<Vec<u8>, VmcoreError> {
        read_exact_at(
            &self.file,
            note.desc_offset,
            usize::try_from(note.desc_size.min(max)).unwrap_or(0),
            "note descriptor",
        )
    }

    /// Reads `len` bytes of the dump file at `offset` (a device dump's data, say).
    pub fn read_file(&self, offset: u64, len: usize, what: &str) -> Result<Vec<u8>, VmcoreError> {
        read_exact_at(&self.file, offset, len, what)
    }

    /// The vmcore device dumps in the notes (`NT_VMCOREDD` notes named "LINUX").
    pub fn device_dumps(&self) -> Vec<DeviceDump> {
        self.notes
            .iter()
            .filter(|n| n.name == VMCOREDD_NOTE_NAME && n.kind == NT_VMCOREDD)
            .filter(|n| n.desc_size >= VMCOREDD_MAX_NAME_BYTES as u64)
            .filter_map(|n| {
                let raw = self.note_desc(n, VMCOREDD_MAX_NAME_BYTES as u64).ok()?;
                let name = raw.split(|&b| b == 0).next().unwrap_or(&[]);
                Some(DeviceDump {
                    name: String::from_utf8_lossy(name).into_owned(),
                    data_offset: n.desc_offset + VMCOREDD_MAX_NAME_BYTES as u64,
                    data_size: n.desc_size - VMCOREDD_MAX_NAME_BYTES as u64,
                })
            })
            .collect()
    }

    /// The VMCOREINFO text, when the dump has one.
    pub fn vmcoreinfo(&self) -> Option<&[u8]> {
        self.vmcoreinfo.as_deref()
    }

    /// The dump's page size.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The dump's architecture ("aarch64"), from the ELF header or the kdump header.
    pub fn arch(&self) -> Option<&str> {
        self.arch.as_deref()
    }

    /// The file the pages are read from: the input, or the temporary file a flattened or
    /// gzip'ed input was rearranged into (for the libkdumpfile oracle of the tests).
    pub fn dump_file(&self) -> &File {
        &self.file
    }

    /// Maps a physical address to a file offset, for an ELF vmcore whose file holds that byte.
    pub fn phys_to_offset(&self, paddr: u64) -> Option<u64> {
        self.segments.iter().find_map(|s| {
            let rel = paddr.checked_sub(s.paddr)?;
            (rel < s.present).then(|| s.offset + rel)
        })
    }

    /// Whether `len` bytes at `paddr` lie in one ELF segment's bytes in the file.
    pub fn contiguous_in_file(&self, paddr: u64, len: u64) -> bool {
        self.segments.iter().any(|s| {
            paddr
                .checked_sub(s.paddr)
                .is_some_and(|rel| rel.checked_add(len).is_some_and(|e| e <= s.present))
        })
    }

    /// Reads page `pfn` of an ELF vmcore into `buf` (one page) from its `PT_LOAD`s; the first
    /// program header that holds a byte gives it. Bytes of memory the file does not hold
    /// (`p_memsz` past `p_filesz`, outside every segment) read as zeros. The page is damaged
    /// when a byte of `range` (the physical addresses the caller wants) that a segment declares
    /// is past the end of a truncated file; the bytes before the end are read all the same.
    fn read_elf_page(
        &self,
        pfn: u64,
        range: std::ops::Range<u64>,
        buf: &mut [u8],
    ) -> Result<Option<()>, VmcoreError> {
        let page = self.page_size();
        let a = pfn.saturating_mul(page);
        let b = a.saturating_add(page);
        buf.fill(0);
        let (mut in_memory, mut in_file) = (false, false);
        let mut damage = None;
        // Last to first, so that the first segment's bytes are the ones left.
        for s in self.segments.iter().rev() {
            if !(s.paddr < b && a < s.paddr.saturating_add(s.memsz)) {
                continue;
            }
            in_memory = true;
            let lo = a.max(s.paddr);
            let hi = b.min(s.paddr.saturating_add(s.filesz));
            if lo >= hi {
                continue;
            }
            in_file = true;
            let (rel, need) = (lo - s.paddr, hi - s.paddr);
            let have = need.min(s.present);
            // In the page: at most one page, so the casts hold.
            let at = (lo - a) as usize;
            let mut got = 0u64;
            if rel < have {
                let dst = &mut buf[at..at + (have - rel) as usize];
                got = read_at(&self.file, s.offset + rel, dst).map_err(|e| io_err("vmcore", e))?
                    as u64;
            }
            // The part of `range` this segment's file image declares must be in the file.
            let want_lo = range.start.max(s.paddr);
            let want_hi = range.end.min(s.paddr.saturating_add(s.filesz));
            let want = want_hi.saturating_sub(s.paddr);
            if want_lo < want_hi && (want > s.present || (rel + got < have && want > rel + got)) {
                damage = Some(format!(
                    "physical {:#x} is past the end of the file: PT_LOAD {} needs file offset {:#x}, the file has {:#x} bytes (truncated vmcore?)",
                    (s.paddr + s.present.min(rel + got)).max(want_lo),
                    s.index,
                    s.offset.saturating_add(want),
                    self.file_len
                ));
            }
        }
        if let Some(why) = damage {
            return Err(VmcoreError::Damaged { pfn, paddr: a, why });
        }
        if in_file {
            Ok(Some(()))
        } else if in_memory {
            Ok(None)
        } else {
            Err(VmcoreError::NotMapped {
                start: a,
                end: b,
                why: format!("page {pfn:#x} is not memory this dump holds"),
            })
        }
    }

    /// Reads page `pfn`, of which the caller wants `range`, into `buf` (one page): `Ok(None)`
    /// when makedumpfile excluded it (a filtered page, zero). `scratch` holds compressed data
    /// between calls.
    fn read_page(
        &self,
        pfn: u64,
        range: std::ops::Range<u64>,
        buf: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<Option<()>, VmcoreError> {
        let Some(kd) = &self.kdump else {
            return self.read_elf_page(pfn, range, buf);
        };
        let page = self.page_size();
        let paddr = pfn.saturating_mul(page);
        match kd.read_page(&self.file, pfn, buf, scratch) {
            kdump::Page::Stored => Ok(Some(())),
            kdump::Page::Excluded => Ok(None),
            kdump::Page::NotMemory => Err(VmcoreError::NotMapped {
                start: paddr,
                end: paddr.saturating_add(page),
                why: format!("page {pfn:#x} is not memory this dump holds"),
            }),
            kdump::Page::Damaged(why) => Err(VmcoreError::Damaged { pfn, paddr, why }),
        }
    }

    /// Reads `len` bytes of physical memory at `paddr`, page by page.
    ///
    /// Pages makedumpfile filtered out (its dump level: zero, cache, user, free pages) read as
    /// zeros and are listed in [`PhysBytes::excluded`]. A page that is not memory of this dump,
    /// or that is damaged (truncated file, data that does not decompress), is an error naming
    /// the page.
    pub fn read_phys_detailed(&self, paddr: u64, len: u64) -> Result<PhysBytes, VmcoreError> {
        let r = self.read_phys_lenient(paddr, len)?;
        if let Some(e) = r.stopped {
            return Err(e);
        }
        if let Some((pfn, why)) = r.damaged.into_iter().next() {
            return Err(VmcoreError::Damaged {
                pfn,
                paddr: pfn.saturating_mul(self.page_size()),
                why,
            });
        }
        Ok(PhysBytes {
            bytes: r.bytes,
            excluded: r.excluded,
        })
    }

    /// Reads `len` bytes of physical memory at `paddr` as far as the dump has them: a damaged
    /// page reads as zeros (but for the bytes an ELF vmcore holds before the end of a truncated
    /// file) and is listed, the read stops at the first page that is not memory of this dump.
    /// Fails only when `len` cannot be allocated or wraps.
    pub fn read_phys_lenient(&self, paddr: u64, len: u64) -> Result<PhysRead, VmcoreError> {
        let end = paddr
            .checked_add(len)
            .ok_or_else(|| VmcoreError::NotMapped {
                start: paddr,
                end: u64::MAX,
                why: "range wraps the address space".into(),
            })?;
        let page = self.page_size();
        let mut out = PhysRead::default();
        let n = usize::try_from(len).map_err(|_| VmcoreError::NotMapped {
            start: paddr,
            end,
            why: "range too large".into(),
        })?;
        out.bytes
            .try_reserve_exact(n)
            .map_err(|_| VmcoreError::NotMapped {
                start: paddr,
                end,
                why: format!("cannot allocate {len:#x} bytes"),
            })?;
        // The page size is at most 1 MiB (checked when opened).
        let mut buf = vec![0u8; usize::try_from(page).unwrap_or(4096)];
        let mut scratch = Vec::new();
        let mut cur = paddr;
        while cur < end {
            let pfn = cur / page;
            let in_page = cur - pfn * page;
            let take = (page - in_page).min(end - cur);
            match self.read_page(pfn, cur..cur + take, &mut buf, &mut scratch) {
                Ok(Some(())) => {}
                Ok(None) => out.excluded.push(pfn),
                // The bytes that were read stay (those an ELF file holds before the end of a
                // truncated file); the rest of the page is zeros.
                Err(VmcoreError::Damaged { why, .. }) => out.damaged.push((pfn, why)),
                Err(e) => {
                    out.stopped = Some(match e {
                        VmcoreError::NotMapped { why, .. } => VmcoreError::NotMapped {
                            start: paddr,
                            end,
                            why,
                        },
                        e => e,
                    });
                    break;
                }
            }
            let s = usize::try_from(in_page).unwrap_or(0);
            let t = usize::try_from(take).unwrap_or(0);
            out.bytes.extend_from_slice(&buf[s..s + t]);
            cur += take;
        }
        Ok(out)
    }

    /// Reads `len` bytes of physical memory at `paddr`; filtered-out pages read as zeros.
    pub fn read_phys(&self, paddr: u64, len: u64) -> Result<Vec<u8>, VmcoreError> {
        self.read_phys_detailed(paddr, len).map(|p| p.bytes)
    }

    /// The end (exclusive) of the run of memory pages of this dump (stored or filtered out)
    /// that starts at page `pfn`; `pfn` itself when it is not memory of this dump.
    pub fn memory_run_end(&self, pfn: u64) -> u64 {
        if let Some(kd) = &self.kdump {
            return kd.memory_run_end(pfn);
        }
        // From the program headers, which may overlap (a kdump vmcore's kernel-image segment
        // overlaps its RAM segment).
        let page = self.page_size();
        let mut end = pfn.saturating_mul(page);
        loop {
            let next = self
                .segments
                .iter()
                .filter(|s| s.paddr <= end && end < s.paddr.saturating_add(s.memsz))
                .map(|s| s.paddr.saturating_add(s.memsz))
                .max();
            match next {
                Some(e) if e > end => end = e,
                _ => break,
            }
        }
        (end / page).max(pfn)
    }

    /// The runs of pages that are memory of this dump (stored or filtered out), as
    /// `(first pfn, end pfn)`, in order and merged; at most `limit` runs.
    pub fn memory_runs(&self, limit: usize) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        match &self.kdump {
            Some(kd) => {
                let mut pfn = 0;
                while runs.len() < limit {
                    let Some(a) = kd.next_memory_page(pfn) else {
                        break;
                    };
                    let b = kd.memory_run_end(a);
                    runs.push((a, b));
                    pfn = b;
                }
            }
            None => {
                let page = self.page_size();
                let mut v: Vec<(u64, u64)> = self
                    .segments
                    .iter()
                    .filter(|s| s.memsz > 0)
                    .map(|s| (s.paddr / page, (s.paddr + s.memsz).div_ceil(page)))
                    .collect();
                v.sort_unstable();
                for (a, b) in v {
                    let full = runs.len() >= limit;
                    match runs.last_mut() {
                        Some(last) if a <= last.1 => last.1 = last.1.max(b),
                        _ if full => break,
                        _ => runs.push((a, b)),
                    }
                }
            }
        }
        runs
    }

    /// Scans the start of every page the file stores for `magic`; returns the physical
    /// addresses where it was found, at most `limit` of them. Shows a progress bar on a
    /// terminal when it takes more than a second. Memory stays flat: an ELF file is read a
    /// window at a time, a kdump-compressed one a run of page descriptors and a page at a
    /// time; only pages the file really holds are visited.
    pub fn scan_page_starts(&self, magic: &[u8], limit: usize) -> Vec<u64> {
        match &self.kdump {
            Some(kd) => self.scan_pages(kd, magic, limit),
            None => self.scan_elf(magic, limit),
        }
    }

    fn scan_elf(&self, magic: &[u8], limit: usize) -> Vec<u64> {
        /// Bytes of the file mapped (or read) at a time.
        const WINDOW: u64 = 16 << 20;
        let page = self.page_size();
        let total: u64 = self.segments.iter().map(|s| s.present).sum();
        let progress = Progress::new(total, "scanning the vmcore's pages");
        let mut hits = Vec::new();
        let mut buf = Vec::new();
        let mut done = 0u64;
        let m = magic.len() as u64;
        for s in &self.segments {
            // The first page start in the segment, relative to it.
            let Some(first) = s.paddr.checked_next_multiple_of(page) else {
                continue;
            };
            let mut rel = first - s.paddr;
            while rel.saturating_add(m) <= s.present {
                let len = WINDOW.min(s.present - rel);
                let off = s.offset.saturating_add(rel);
                // A window of the file mapped (the pages touched are dropped with the
                // mapping), or read when it cannot be mapped.
                let delta = off % 4096;
                // SAFETY: a read-only private mapping of the dump file, which csdump only
                // reads; a file truncated underneath it would raise SIGBUS, not memory
                // unsafety in safe code.
                let map = unsafe {
                    memmap2::MmapOptions::new()
                        .offset(off - delta)
                        .len(usize::try_from(len + delta).unwrap_or(0))
                        .map(&self.file)
                };
                let (window, n): (&[u8], u64) = match &map {
                    Ok(map) => (map.get(delta as usize..).unwrap_or(&[]), len),
                    Err(_) => {
                        buf.resize(len as usize, 0);
                        let Ok(n) = read_at(&self.file, off, &mut buf) else {
                            break;
                        };
                        (&buf[..], n as u64)
                    }
                };
                let mut at = 0u64;
                while at + m <= n {
                    let i = at as usize;
                    if window.get(i..i + magic.len()) == Some(magic) {
                        hits.push(s.paddr + rel + at);
                        if hits.len() >= limit {
                            progress.finish();
                            return hits;
                        }
                    }
                    at += page;
                }
                if n < len {
                    break;
                }
                // Windows are whole pages, so the next one starts at a page start.
                rel += len.div_ceil(page) * page;
                done += len;
                progress.set(done);
            }
        }
        progress.finish();
        hits
    }

    fn scan_pages(&self, kd: &Kdump, magic: &[u8], limit: usize) -> Vec<u64> {
        /// Page descriptors read at a time (96 KiB).
        const DESCS: u64 = 4096;
        let page = self.page_size();
        // Pages whose descriptors fit in the file: a lying bitmap cannot make the scan longer.
        let max_pages = self.file_len.saturating_sub(kd.pd_table) / PAGE_DESC_SIZE;
        let total = kd.stored_pages().min(max_pages);
        let progress = Progress::new(total.saturating_mul(page), "scanning the vmcore's pages");
        let mut hits = Vec::new();
        let mut buf = vec![0u8; usize::try_from(page).unwrap_or(4096)];
        let mut scratch = Vec::new();
        let mut table = Vec::new();
        // The last page's data: the pages that share it (makedumpfile stores one zero page for
        // all of them) are not read again.
        let mut last: Option<(u64, u64, u32, bool)> = None;
        let mut done = 0u64;
        let mut rank = 0u64;
        let mut pfn = 0u64;
        'runs: while let Some((a, b)) = kd.next_file_pages(pfn) {
            let mut p = a;
            while p < b {
                if rank >= max_pages {
                    break 'runs;
                }
                // Descriptors of pages p.. (consecutive ranks), as many as fit in the file.
                let n = (b - p).min(DESCS).min(max_pages - rank);
                let at = kd.pd_table + rank * PAGE_DESC_SIZE;
                table.resize((n * PAGE_DESC_SIZE) as usize, 0);
                let Ok(got) = read_at(&self.file, at, &mut table) else {
                    break 'runs;
                };
                let n = (got as u64 / PAGE_DESC_SIZE).min(n);
                if n == 0 {
                    break 'runs;
                }
                for i in 0..n {
                    let d = &table[(i * PAGE_DESC_SIZE) as usize..][..PAGE_DESC_SIZE as usize];
                    let paddr = (p + i).saturating_mul(page);
                    let hit = match kd.check_descriptor(at + i * PAGE_DESC_SIZE, d) {
                        Err(_) => false,
                        Ok((off, size, flags)) => match last {
                            Some((o, s, f, hit)) if (o, s, f) == (off, size, flags) => hit,
                            _ => {
                                let hit = kd
                                    .read_data(&self.file, off, size, flags, &mut buf, &mut scratch)
                                    .is_ok()
                                    && buf.starts_with(magic);
                                last = Some((off, size, flags, hit));
                                hit
                            }
                        },
                    };
                    if hit {
                        hits.push(paddr);
                        if hits.len() >= limit {
                            progress.finish();
                            return hits;
                        }
                    }
                    done += 1;
                    if done % 1024 == 0 {
                        progress.set(done.saturating_mul(page));
                    }
                }
                p += n;
                rank += n;
            }
            pfn = b;
        }
        progress.finish();
        hits
    }
}

/// Counts the bytes a reader has given, for a progress bar.
struct ProgressReader<'p, R> {
    inner: R,
    progress: &'p Progress,
    read: u64,
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        self.progress.set(self.read);
        Ok(n)
    }
}

/// An anonymous memory file (memfd_create).
fn memfd() -> Result<File, VmcoreError> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated string; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"csdump-input".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io_err("memfd_create", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

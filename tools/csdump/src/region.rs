//! Finding the dump region in an input file: a vmcore (any format [`crate::vmcore`] reads), a
//! raw region file or a memory image holding it.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use cspd_format::ContainerHeader;
use cspd_format::CONTAINER_HEADER_SIZE;
use cspd_format::CONTAINER_MAGIC;
use cspd_format::VMCOREINFO_KERNELOFFSET_KEY;
use cspd_format::VMCOREINFO_PADDR_KEY;
use cspd_format::VMCOREINFO_SIZE_KEY;
use serde::Serialize;
use thiserror::Error;

use crate::progress::Progress;
use crate::vmcore::Vmcore;
use crate::vmcore::VmcoreError;

/// Page size used by the scan of a raw image: the region is page-aligned in physical memory.
pub const SCAN_PAGE: u64 = 4096;

/// Largest region csdump accepts (a bound on what a lying header can make it allocate).
pub const MAX_REGION_SIZE: u64 = 1 << 32;

/// The name the kernel gives the dump when it hands a region over as a vmcore device dump
/// (`vmcore_add_device_dump()` in a kdump capture kernel).
pub const DEVICE_DUMP_NAME: &str = "coresight_panic_dump";

/// How many magic hits the scan looks at before giving up on finding a valid header.
const SCAN_HIT_LIMIT: usize = 64;

/// Bytes of a raw image read when its container header is unreadable: enough for the parser to
/// name what is wrong.
const RAW_BAD_HEADER_READ: u64 = 1 << 20;

/// Window of a raw image mapped at a time by the scan.
const SCAN_WINDOW: u64 = 64 << 20;

/// What kind of file the input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// An ELF64 core file (kdump vmcore or QEMU `dump-guest-memory`).
    ElfVmcore,
    /// makedumpfile's kdump-compressed vmcore (or the older diskdump), flattened or not.
    KdumpCompressed,
    /// A raw image: the region itself or a memory image holding it.
    Raw,
}

/// How the region was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "method")]
pub enum FoundBy {
    /// The input is the region, starting at offset 0.
    RawFile,
    /// The `CSPD_REGION_PADDR`/`CSPD_REGION_SIZE` keys of the vmcoreinfo note.
    Vmcoreinfo {
        /// Physical address from vmcoreinfo.
        paddr: u64,
        /// Size from vmcoreinfo.
        size: u64,
    },
    /// A vmcore device dump note (`NT_VMCOREDD`) that a capture kernel added.
    DeviceDump {
        /// The device dump's name.
        name: String,
        /// Bytes of data in the note (the kernel pads them to a page).
        size: u64,
    },
    /// A scan of the vmcore's page starts for the container magic.
    ScanVmcore {
        /// Physical address where the container header was found.
        paddr: u64,
    },
    /// A scan of page starts for the container magic, in a raw image.
    ScanRaw {
        /// File offset where the container header was found.
        offset: u64,
    },
}

impl fmt::Display for FoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RawFile => write!(f, "raw region file (container at offset 0)"),
            Self::Vmcoreinfo { paddr, size } => write!(
                f,
                "vmcoreinfo ({VMCOREINFO_PADDR_KEY}={paddr:#x}, {VMCOREINFO_SIZE_KEY}={size:#x})"
            ),
            Self::DeviceDump { name, size } => write!(
                f,
                "vmcore device dump \"{name}\" ({size:#x} bytes, added by the capture kernel)"
            ),
            Self::ScanVmcore { paddr } => write!(
                f,
                "scan of the vmcore's page starts (container at physical address {paddr:#x})"
            ),
            Self::ScanRaw { offset } => {
                write!(
                    f,
                    "scan of page starts (container at file offset {offset:#x})"
                )
            }
        }
    }
}

/// Why no region could be taken from the input.
#[derive(Debug, Error)]
pub enum LocateError {
    /// The input cannot be read.
    #[error("{0}")]
    Io(String),
    /// The vmcore itself is unreadable.
    #[error(transparent)]
    Vmcore(#[from] VmcoreError),
    /// The region cannot be held in memory.
    #[error("region at {at}: cannot allocate {size:#x} bytes")]
    TooBig {
        /// Where the region is.
        at: String,
        /// Its size.
        size: u64,
    },
    /// Neither a device dump, nor vmcoreinfo, nor the scan found a container.
    #[error("no coresight-panic-dump region found: {0}")]
    NotFound(String),
    /// The region could not be read from a vmcore file that is damaged: both are said.
    #[error("{error}; the file is damaged: {}", damage.join("; "))]
    InDamagedFile {
        /// What stopped the reading.
        error: Box<LocateError>,
        /// The damage the vmcore's reader found.
        damage: Vec<String>,
    },
}

/// A trace buffer carried behind the region in a region file (`/dev/coresight_panic_dump` after a warm reboot):
/// an ETR's reserved buffer, read by the next boot from where the ETR left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Physical address of its first byte.
    pub paddr: u64,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// A kdump capture kernel's device dump (`coresight_capture:<record name>`): a small container
/// holding the record of a trace sink it drained, written from what the hardware kept after the
/// crash ([`cspd_format::capture`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureDump {
    /// The device dump's name.
    pub name: String,
    /// Bytes of data in the note (the kernel pads them to a page).
    pub size: u64,
    /// File offset of its data, when it is contiguous in the input file.
    pub file_offset: Option<u64>,
    /// The container (its header's size of it), every record and the commit checked; empty
    /// when it is damaged.
    pub bytes: Vec<u8>,
    /// Why it is not used (bad CRC, truncated, not a container), if it is damaged.
    pub problem: Option<String>,
}

impl CaptureDump {
    /// The container's records (the commit included), when it is not damaged.
    pub fn records(&self) -> impl Iterator<Item = cspd_format::Record<'_>> {
        let region = if self.problem.is_none() {
            cspd_format::parse_region(&self.bytes).ok()
        } else {
            None
        };
        region
            .into_iter()
            .flat_map(|r| r.records().filter_map(Result::ok))
    }
}

/// Largest capture kernel's device dump csdump reads (a bound on what a lying header can make it
/// allocate): a drained ETF or ETB is far smaller.
pub const MAX_CAPTURE_DUMP_SIZE: u64 = 1 << 30;

/// Largest span of attachments read behind a region (a bound on what a damaged file can make
/// csdump allocate).
pub const MAX_ATTACHMENT_BYTES: u64 = 1 << 32;

/// The region found in an input, and what the input told about the kernel.
#[derive(Debug)]
pub struct Located<'a> {
    /// The region's bytes (from the container header to the end of the region, or of the
    /// input for a raw file).
    pub bytes: Cow<'a, [u8]>,
    /// What the input file is.
    pub input_kind: InputKind,
    /// The vmcore's format as read (container, compression, dump level, flattened, gzip).
    pub format: Option<String>,
    /// How the region was found.
    pub found_by: FoundBy,
    /// Offset of the region's first byte in the input file, when the region is contiguous in it.
    pub file_offset: Option<u64>,
    /// Physical address of the region, when it was found in the vmcore's memory.
    pub paddr: Option<u64>,
    /// `KERNELOFFSET` from vmcoreinfo.
    pub kerneloffset: Option<u64>,
    /// The vmcoreinfo text, if the input has one.
    pub vmcoreinfo: Option<String>,
    /// Problems with the input that did not stop the reading (damaged pages, a vmcoreinfo that
    /// disagrees with the container, a truncated file).
    pub warnings: Vec<String>,
    /// Whether the input file itself is damaged (truncated, a flattened stream without its end
    /// marker, notes that run past their area, marked incomplete, a capture kernel's device dump
    /// that fails its checks): said among `warnings`, and the run is not clean (exit status 3)
    /// even when the region it holds survived.
    pub input_damaged: bool,
    /// Facts about the input worth saying that are not damage (pages makedumpfile filtered
    /// out and that read as zeros, the device dump preferred over memory).
    pub notes: Vec<String>,
    /// The vmcore itself, for reading other memory (the running kernel's text).
    pub core: Option<Vmcore>,
    /// Trace buffers carried behind the region (a region file after a warm reboot).
    pub attachments: Vec<Attachment>,
    /// The capture kernel's device dumps (`coresight_capture:*`), in note order, damaged ones
    /// included (with their problem, said among `warnings`).
    pub captures: Vec<CaptureDump>,
}

impl Located<'_> {
    /// Maps a region offset to a file offset, when the region is contiguous in the file.
    pub fn file_offset_of(&self, region_offset: usize) -> Option<u64> {
        self.file_offset?.checked_add(region_offset as u64)
    }
}

/// Whether a valid container header (magic, version, CRC) starts `bytes`.
fn header_ok(bytes: &[u8]) -> bool {
    ContainerHeader::decode(bytes).is_ok()
}

/// Finds the region in the file at `path`: a vmcore in any format csdump reads, else a raw
/// image (the region itself, or a memory image scanned for it).
pub fn locate_path(path: &Path) -> Result<Located<'static>, LocateError> {
    let mut file = File::open(path).map_err(|e| LocateError::Io(format!("cannot open: {e}")))?;
    let mut head = [0u8; 64];
    let n = read_full(&mut file, &mut head)
        .map_err(|e| LocateError::Io(format!("cannot read: {e}")))?;
    if crate::vmcore::is_vmcore(&head[..n]) {
        let core = Vmcore::from_file(file)?;
        locate_vmcore(core)
    } else {
        locate_raw_file(&file)
    }
}

/// Finds the region in `data`, the whole input file (tests and fuzzers).
///
/// A vmcore is read through an anonymous memory file; a raw image is borrowed.
pub fn locate(data: &[u8]) -> Result<Located<'_>, LocateError> {
    if crate::vmcore::is_vmcore(data) {
        let core = Vmcore::from_bytes(data)?;
        locate_vmcore(core)
    } else {
        locate_raw(data)
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn raw_located(bytes: Cow<'_, [u8]>) -> Located<'_> {
    Located {
        bytes,
        input_kind: InputKind::Raw,
        format: None,
        found_by: FoundBy::RawFile,
        file_offset: Some(0),
        paddr: None,
        kerneloffset: None,
        vmcoreinfo: None,
        warnings: Vec::new(),
        input_damaged: false,
        notes: Vec::new(),
        core: None,
        attachments: Vec::new(),
        captures: Vec::new(),
    }
}

/// Reads the trace buffers attached behind a region of `region_size` bytes, given `tail`, the
/// bytes that follow it in a region file; what cannot be read is a warning.
fn read_attachments(located: &mut Located<'_>, tail: &[u8]) {
    let mut found = Vec::new();
    let r = cspd_format::etr::TracedataAttachment::parse_all(tail, |a| {
        found.push(Attachment {
            paddr: a.paddr,
            data: a.data.to_vec(),
        })
    });
    if let Err(e) = r {
        located
            .warnings
            .push(format!("trace buffers behind the region: {e}"));
    }
    for a in &found {
        located.notes.push(format!(
            "a trace buffer of {:#x} bytes at physical address {:#x} is attached behind the region (read by the boot after the panic from its reserved region)",
            a.data.len(),
            a.paddr
        ));
    }
    located.attachments = found;
}

/// The region's size as its container header says, when it has a valid one.
fn region_size_of(bytes: &[u8]) -> Option<usize> {
    ContainerHeader::decode(bytes)
        .ok()
        .and_then(|h| usize::try_from(h.region_size).ok())
}

fn locate_raw(data: &[u8]) -> Result<Located<'_>, LocateError> {
    let mut located = raw_located(Cow::Borrowed(data));
    if data.starts_with(&CONTAINER_MAGIC) || data.len() < CONTAINER_HEADER_SIZE {
        // The region itself (possibly damaged): the parser names what is wrong; what follows a
        // valid region is the trace buffers attached to it.
        if let Some(tail) = region_size_of(data).and_then(|n| data.get(n..)) {
            read_attachments(&mut located, tail);
        }
        return Ok(located);
    }
    let mut first_magic = None;
    let mut hits = 0;
    let mut off = SCAN_PAGE as usize;
    while off < data.len() && hits < SCAN_HIT_LIMIT {
        let rest = data.get(off..).unwrap_or(&[]);
        if rest.starts_with(&CONTAINER_MAGIC) {
            hits += 1;
            first_magic.get_or_insert(off);
            if header_ok(rest) {
                first_magic = Some(off);
                break;
            }
        }
        off = off.saturating_add(SCAN_PAGE as usize);
    }
    if let Some(off) = first_magic {
        located.bytes = Cow::Borrowed(data.get(off..).unwrap_or(&[]));
        located.found_by = FoundBy::ScanRaw { offset: off as u64 };
        located.file_offset = Some(off as u64);
    }
    // Else nothing better: hand the file to the parser, which names the bad magic.
    Ok(located)
}

/// Reads `len` bytes at `offset` of a raw image into memory, refusing what cannot be allocated.
fn read_raw(file: &File, offset: u64, len: u64) -> Result<Vec<u8>, LocateError> {
    use std::os::unix::fs::FileExt;
    let n = usize::try_from(len).map_err(|_| LocateError::TooBig {
        at: format!("file offset {offset:#x}"),
        size: len,
    })?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(n).map_err(|_| LocateError::TooBig {
        at: format!("file offset {offset:#x}"),
        size: len,
    })?;
    buf.resize(n, 0);
    let mut done = 0;
    while done < n {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(LocateError::Io(format!(
                    "file offset {:#x}: {e}",
                    offset + done as u64
                )))
            }
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// How many bytes of a raw image to read for a region whose header starts at `offset`.
fn raw_region_len(file: &File, offset: u64, file_len: u64) -> Result<u64, LocateError> {
    let rest = file_len - offset.min(file_len);
    let head = read_raw(file, offset, CONTAINER_HEADER_SIZE as u64)?;
    Ok(match ContainerHeader::decode(&head) {
        // The header bounds the read; a header claiming more than the file has gets the file
        // and the parser names the truncation.
        Ok(h) => h
            .region_size
            .clamp(CONTAINER_HEADER_SIZE as u64, MAX_REGION_SIZE)
            .min(rest),
        Err(_) => rest.min(RAW_BAD_HEADER_READ),
    })
}

fn locate_raw_file(file: &File) -> Result<Located<'static>, LocateError> {
    let file_len = file
        .metadata()
        .map_err(|e| LocateError::Io(format!("cannot stat: {e}")))?
        .len();
    let head = read_raw(file, 0, CONTAINER_MAGIC.len() as u64)?;
    if head.starts_with(&CONTAINER_MAGIC) || file_len < CONTAINER_HEADER_SIZE as u64 {
        let len = raw_region_len(file, 0, file_len)?;
        let bytes = read_raw(file, 0, len)?;
        let valid = region_size_of(&bytes).is_some_and(|n| n as u64 == len);
        let mut located = raw_located(Cow::Owned(bytes));
        if valid && len < file_len {
            // The trace buffers a warm reboot attached behind the region.
            let tail_len = (file_len - len).min(MAX_ATTACHMENT_BYTES);
            let tail = read_raw(file, len, tail_len)?;
            read_attachments(&mut located, &tail);
        }
        return Ok(located);
    }
    // A memory image: scan page starts, a window at a time (the address space and resident
    // memory stay bounded whatever the image's size).
    let progress = Progress::new(file_len, "scanning the image's pages");
    let mut first_magic = None;
    let mut hits = 0;
    let mut window = 0u64;
    'scan: while window < file_len {
        let len = SCAN_WINDOW.min(file_len - window);
        // SAFETY: a read-only private mapping of a file csdump only reads; a file truncated
        // underneath it would raise SIGBUS, not memory unsafety in safe code.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(window)
                .len(usize::try_from(len).unwrap_or(0))
                .map(file)
        }
        .map_err(|e| LocateError::Io(format!("cannot map file offset {window:#x}: {e}")))?;
        let mut off = if window == 0 { SCAN_PAGE } else { 0 };
        while off < len && hits < SCAN_HIT_LIMIT {
            let rest = map
                .get(usize::try_from(off).unwrap_or(usize::MAX)..)
                .unwrap_or(&[]);
            if rest.starts_with(&CONTAINER_MAGIC) {
                hits += 1;
                first_magic.get_or_insert(window + off);
                let whole = if rest.len() >= CONTAINER_HEADER_SIZE {
                    header_ok(rest)
                } else {
                    header_ok(&read_raw(file, window + off, CONTAINER_HEADER_SIZE as u64)?)
                };
                if whole {
                    first_magic = Some(window + off);
                    break 'scan;
                }
            }
            off += SCAN_PAGE;
        }
        if hits >= SCAN_HIT_LIMIT {
            break;
        }
        window += len;
        progress.set(window);
    }
    progress.finish();
    match first_magic {
        Some(off) => {
            let len = raw_region_len(file, off, file_len)?;
            let mut located = raw_located(Cow::Owned(read_raw(file, off, len)?));
            located.found_by = FoundBy::ScanRaw { offset: off };
            located.file_offset = Some(off);
            Ok(located)
        }
        None => {
            let len = file_len.min(RAW_BAD_HEADER_READ);
            Ok(raw_located(Cow::Owned(read_raw(file, 0, len)?)))
        }
    }
}

/// The region read from a vmcore, and what was said about it.
struct RegionRead {
    bytes: Vec<u8>,
    warnings: Vec<String>,
    notes: Vec<String>,
}

/// Reads the region whose header is at `paddr`: `header`'s size, bounded by the memory the dump
/// has there. Filtered-out pages read as zeros (a note), damaged pages as zeros (a warning).
fn read_region(
    core: &Vmcore,
    paddr: u64,
    header: Option<&ContainerHeader>,
) -> Result<RegionRead, LocateError> {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let page = core.page_size();
    let mut size = header
        .map(|h| {
            h.region_size
                .clamp(CONTAINER_HEADER_SIZE as u64, MAX_REGION_SIZE)
        })
        .unwrap_or(CONTAINER_HEADER_SIZE as u64);
    // Never more than the dump's memory from `paddr` on: a header that claims more gets what
    // there is, and the parser names the truncation.
    let run_end = core.memory_run_end(paddr / page).saturating_mul(page);
    let avail = run_end.saturating_sub(paddr);
    if avail < size {
        warnings.push(format!(
            "the container at physical address {paddr:#x} says the region is {size:#x} bytes; the dump's memory there ends after {avail:#x}"
        ));
        size = avail;
    }
    let r = core
        .read_phys_lenient(paddr, size)
        .map_err(|_| LocateError::TooBig {
            at: format!("physical address {paddr:#x}"),
            size,
        })?;
    if let Some(e) = &r.stopped {
        warnings.push(format!("region at physical address {paddr:#x}: {e}"));
    }
    for (pfn, why) in r.damaged.iter().take(8) {
        warnings.push(format!(
            "region page {pfn:#x} (physical {:#x}, region offset {:#x}) is damaged and read as zeros: {why}",
            pfn * page,
            (pfn * page).saturating_sub(paddr)
        ));
    }
    if r.damaged.len() > 8 {
        warnings.push(format!(
            "{} more damaged pages in the region",
            r.damaged.len() - 8
        ));
    }
    if !r.excluded.is_empty() {
        let level = core
            .format
            .dump_level
            .map(|l| format!(" (dump level {l})"))
            .unwrap_or_default();
        let first: Vec<String> = r
            .excluded
            .iter()
            .take(4)
            .map(|p| format!("{:#x}", (p * page).saturating_sub(paddr)))
            .collect();
        notes.push(format!(
            "{} of the region's {} pages are not stored in the dump: makedumpfile's filter{level} excluded them (zero pages), they read as zeros (region offsets {}{})",
            r.excluded.len(),
            size.div_ceil(page),
            first.join(", "),
            if r.excluded.len() > 4 { ", ..." } else { "" }
        ));
    }
    Ok(RegionRead {
        bytes: r.bytes,
        warnings,
        notes,
    })
}

/// The container header at `paddr`, or why there is none.
fn header_at(core: &Vmcore, paddr: u64) -> Result<ContainerHeader, String> {
    let head = core
        .read_phys(paddr, CONTAINER_HEADER_SIZE as u64)
        .map_err(|e| e.to_string())?;
    ContainerHeader::decode(&head).map_err(|e| format!("no valid container header there ({e})"))
}

/// What to do when vmcoreinfo names a region the vmcore's memory does not hold and no device
/// dump was found: the usual cause is a `no-map` device-tree region with a capture kernel that
/// could not hand it over.
const OUTSIDE_THE_DUMP: &str = "A region outside the crashed kernel's System RAM (a no-map \
device-tree region) reaches the vmcore only as a device dump that the capture kernel adds: the \
capture kernel needs CONFIG_CORESIGHT_PANIC_DUMP, CONFIG_PROC_VMCORE_DEVICE_DUMP and the region's \
device-tree node (see \"kdump with a device-tree region\" in the user guide)";

fn locate_vmcore(core: Vmcore) -> Result<Located<'static>, LocateError> {
    let damage = core.warnings.clone();
    locate_in_vmcore(core).map_err(|e| match e {
        // Its message already says everything found on the way.
        LocateError::NotFound(_) => e,
        _ if damage.is_empty() => e,
        _ => LocateError::InDamagedFile {
            error: Box::new(e),
            damage,
        },
    })
}

fn locate_in_vmcore(core: Vmcore) -> Result<Located<'static>, LocateError> {
    let info = core.vmcoreinfo().map(<[u8]>::to_vec);
    let info = info.as_deref();
    let kerneloffset =
        info.and_then(|t| cspd_format::vmcoreinfo_hex(t, VMCOREINFO_KERNELOFFSET_KEY));
    let vmcoreinfo = info.map(|t| {
        String::from_utf8_lossy(t)
            .trim_end_matches('\0')
            .to_string()
    });
    let keys = info.map(|t| {
        (
            cspd_format::vmcoreinfo_hex(t, VMCOREINFO_PADDR_KEY),
            cspd_format::vmcoreinfo_hex(t, VMCOREINFO_SIZE_KEY),
        )
    });
    let input_kind = match core.format.container {
        crate::vmcore::Container::Elf => InputKind::ElfVmcore,
        _ => InputKind::KdumpCompressed,
    };
    let rearranged = core.format.flattened || core.format.gzip;
    let mut located = Located {
        bytes: Cow::Owned(Vec::new()),
        input_kind,
        format: Some(core.format.to_string()),
        found_by: FoundBy::RawFile,
        file_offset: None,
        paddr: None,
        kerneloffset,
        vmcoreinfo,
        warnings: core.warnings.clone(),
        input_damaged: !core.warnings.is_empty(),
        notes: Vec::new(),
        core: None,
        attachments: Vec::new(),
        captures: Vec::new(),
    };
    read_captures(&core, rearranged, &mut located);

    // 1. A device dump the capture kernel added (a no-map region the crash headers leave out).
    if let Some(dd) = core
        .device_dumps()
        .into_iter()
        .find(|d| d.name == DEVICE_DUMP_NAME)
    {
        let head = core.read_file(
            dd.data_offset,
            usize::try_from(dd.data_size.min(CONTAINER_HEADER_SIZE as u64)).unwrap_or(0),
            "device dump",
        )?;
        match ContainerHeader::decode(&head) {
            Ok(h) => {
                let want = h
                    .region_size
                    .clamp(CONTAINER_HEADER_SIZE as u64, MAX_REGION_SIZE);
                if want > dd.data_size {
                    located.warnings.push(format!(
                        "the device dump \"{}\" holds {:#x} bytes, its container says the region is {want:#x}",
                        dd.name, dd.data_size
                    ));
                }
                let len = want.min(dd.data_size);
                let bytes = core.read_file(
                    dd.data_offset,
                    usize::try_from(len).map_err(|_| LocateError::TooBig {
                        at: "the device dump".into(),
                        size: len,
                    })?,
                    "device dump",
                )?;
                if let Some((Some(paddr), _)) = keys {
                    let why = match header_at(&core, paddr) {
                        Ok(_) => "the region is also in the vmcore's memory; the device dump is what the capture kernel validated".to_string(),
                        Err(e) => format!("not in the vmcore's memory: {e}"),
                    };
                    located.notes.push(format!(
                        "using the device dump \"{}\"; vmcoreinfo's region at {paddr:#x}: {why}",
                        dd.name
                    ));
                }
                located.bytes = Cow::Owned(bytes);
                located.found_by = FoundBy::DeviceDump {
                    name: dd.name.clone(),
                    size: dd.data_size,
                };
                located.file_offset = (!rearranged).then_some(dd.data_offset);
                located.core = Some(core);
                return Ok(located);
            }
            Err(e) => located.warnings.push(format!(
                "the device dump \"{}\" has no valid container header ({e}): looking in memory",
                dd.name
            )),
        }
    }

    // 2. vmcoreinfo's keys, checked against the container they point at.
    let mut region_outside_memory = false;
    match keys {
        Some((Some(paddr), Some(size))) => match header_at(&core, paddr) {
            Ok(h) => {
                if h.region_size != size {
                    located.warnings.push(format!(
                        "vmcoreinfo says the region is {size:#x} bytes, its container header says {:#x}: using the container's",
                        h.region_size
                    ));
                }
                let r = read_region(&core, paddr, Some(&h))?;
                return Ok(finish_vmcore(
                    located,
                    core,
                    r,
                    paddr,
                    FoundBy::Vmcoreinfo { paddr, size },
                ));
            }
            Err(e) => {
                region_outside_memory =
                    matches!(core.read_phys(paddr, 1), Err(VmcoreError::NotMapped { .. }));
                located.warnings.push(format!(
                    "vmcoreinfo names the region at {VMCOREINFO_PADDR_KEY}={paddr:#x} ({VMCOREINFO_SIZE_KEY}={size:#x}), but it cannot be used: {e}; scanning memory"
                ))
            }
        },
        Some(_) => located.warnings.push(format!(
            "vmcoreinfo has no valid {VMCOREINFO_PADDR_KEY}/{VMCOREINFO_SIZE_KEY}: scanning memory"
        )),
        None => located
            .warnings
            .push("no VMCOREINFO note: scanning memory".into()),
    }

    // 3. The scan.
    let hits = core.scan_page_starts(&CONTAINER_MAGIC, SCAN_HIT_LIMIT);
    let mut chosen = None;
    for &paddr in &hits {
        if let Ok(h) = header_at(&core, paddr) {
            chosen = Some((paddr, Some(h)));
            break;
        }
    }
    if chosen.is_none() {
        chosen = hits.first().map(|&p| (p, None));
    }
    let Some((paddr, header)) = chosen else {
        let mut why = format!(
            "no device dump, no usable vmcoreinfo keys, and no container magic at any page start of the {}",
            core.format
        );
        for w in &located.warnings {
            why.push_str("; ");
            why.push_str(w);
        }
        if region_outside_memory {
            why.push_str(". ");
            why.push_str(OUTSIDE_THE_DUMP);
        }
        return Err(LocateError::NotFound(why));
    };
    let r = read_region(&core, paddr, header.as_ref())?;
    Ok(finish_vmcore(
        located,
        core,
        r,
        paddr,
        FoundBy::ScanVmcore { paddr },
    ))
}

/// Reads every capture kernel's device dump (`coresight_capture:*`) of `core` into
/// `located.captures`; one that is not a sound container is kept with its problem, said among
/// the warnings, and marks the input damaged.
fn read_captures(core: &Vmcore, rearranged: bool, located: &mut Located<'_>) {
    for dd in core.device_dumps() {
        if !cspd_format::capture::is_capture_dump_name(dd.name.as_bytes()) {
            continue;
        }
        let (bytes, problem) = match read_capture(core, dd.data_offset, dd.data_size) {
            Ok(b) => (b, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        if let Some(why) = &problem {
            located.warnings.push(format!(
                "the capture kernel's device dump \"{}\" is not used: {why}",
                dd.name
            ));
            located.input_damaged = true;
        }
        located.captures.push(CaptureDump {
            name: dd.name,
            size: dd.data_size,
            file_offset: (!rearranged).then_some(dd.data_offset),
            bytes,
            problem,
        });
    }
}

/// Reads and checks the container of a capture kernel's device dump: `size` bytes at file
/// offset `offset`. Returns the container's bytes, or what is wrong with it.
fn read_capture(core: &Vmcore, offset: u64, size: u64) -> Result<Vec<u8>, String> {
    let head_len = usize::try_from(size.min(CONTAINER_HEADER_SIZE as u64)).unwrap_or(0);
    let head = core
        .read_file(offset, head_len, "capture device dump")
        .map_err(|e| e.to_string())?;
    let h = ContainerHeader::decode(&head)
        .map_err(|e| format!("not a coresight-panic-dump container ({e})"))?;
    if h.region_size > size {
        return Err(format!(
            "it holds {size:#x} bytes, its container says {:#x} (truncated)",
            h.region_size
        ));
    }
    if h.region_size > MAX_CAPTURE_DUMP_SIZE {
        return Err(format!(
            "its container says {:#x} bytes, more than the {MAX_CAPTURE_DUMP_SIZE:#x} csdump reads",
            h.region_size
        ));
    }
    let len = usize::try_from(h.region_size).map_err(|_| "too big".to_string())?;
    let bytes = core
        .read_file(offset, len, "capture device dump")
        .map_err(|e| e.to_string())?;
    let region = cspd_format::parse_region(&bytes).map_err(|e| e.to_string())?;
    let mut records = 0;
    for r in region.records() {
        let r = r.map_err(|e| e.to_string())?;
        if r.header.kind != cspd_format::RecordKind::Commit {
            records += 1;
        }
    }
    if records == 0 {
        return Err("its container holds no record".into());
    }
    Ok(bytes)
}

fn finish_vmcore(
    mut located: Located<'static>,
    core: Vmcore,
    r: RegionRead,
    paddr: u64,
    found_by: FoundBy,
) -> Located<'static> {
    let contiguous = !core.format.flattened
        && !core.format.gzip
        && core.contiguous_in_file(paddr, r.bytes.len() as u64);
    located.file_offset = contiguous.then(|| core.phys_to_offset(paddr)).flatten();
    located.warnings.extend(r.warnings);
    located.notes.extend(r.notes);
    located.bytes = Cow::Owned(r.bytes);
    located.found_by = found_by;
    located.paddr = Some(paddr);
    located.core = Some(core);
    located
}

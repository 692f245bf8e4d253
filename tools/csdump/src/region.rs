//! Finding the dump region in an input file: an ELF vmcore or a raw region (or memory) image.

use std::borrow::Cow;
use std::fmt;

use cspd_format::ContainerHeader;
use cspd_format::CONTAINER_HEADER_SIZE;
use cspd_format::CONTAINER_MAGIC;
use cspd_format::VMCOREINFO_KERNELOFFSET_KEY;
use cspd_format::VMCOREINFO_PADDR_KEY;
use cspd_format::VMCOREINFO_SIZE_KEY;
use serde::Serialize;
use thiserror::Error;

use crate::vmcore::ElfCore;
use crate::vmcore::VmcoreError;

/// Page size used by the scan: the region is page-aligned in physical memory.
pub const SCAN_PAGE: u64 = 4096;

/// Largest region csdump accepts (a bound on what a lying header can make it allocate).
pub const MAX_REGION_SIZE: u64 = 1 << 32;

/// How many magic hits the scan looks at before giving up on finding a valid header.
const SCAN_HIT_LIMIT: usize = 64;

/// What kind of file the input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// An ELF64 core file (kdump vmcore or QEMU `dump-guest-memory`).
    ElfVmcore,
    /// A raw image: the region itself or a memory image holding it.
    Raw,
}

/// How the region was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// A scan of page starts for the container magic, in an ELF vmcore.
    ScanElf {
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
        match *self {
            Self::RawFile => write!(f, "raw region file (container at offset 0)"),
            Self::Vmcoreinfo { paddr, size } => write!(
                f,
                "vmcoreinfo ({VMCOREINFO_PADDR_KEY}={paddr:#x}, {VMCOREINFO_SIZE_KEY}={size:#x})"
            ),
            Self::ScanElf { paddr } => write!(
                f,
                "scan of PT_LOAD page starts (container at physical address {paddr:#x})"
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
    /// The ELF structure itself is unreadable.
    #[error(transparent)]
    Elf(#[from] VmcoreError),
    /// vmcoreinfo names a region that cannot be read from the file.
    #[error("region from vmcoreinfo ({VMCOREINFO_PADDR_KEY}={paddr:#x}, {VMCOREINFO_SIZE_KEY}={size:#x}) cannot be read: {err}")]
    VmcoreinfoRegion {
        /// Physical address from vmcoreinfo.
        paddr: u64,
        /// Size from vmcoreinfo.
        size: u64,
        /// Why it cannot be read.
        err: VmcoreError,
    },
    /// vmcoreinfo names an implausible region.
    #[error("vmcoreinfo region size {size:#x} is implausible (0 or above {MAX_REGION_SIZE:#x})")]
    BadSize {
        /// Size from vmcoreinfo.
        size: u64,
    },
    /// Neither vmcoreinfo nor the scan found a container.
    #[error("no coresight-panic-dump region found: {0}")]
    NotFound(String),
}

/// The region found in an input, and what the input told about the kernel.
#[derive(Debug, Clone)]
pub struct Located<'a> {
    /// The region's bytes (from the container header to the end of the region, or of the
    /// input for a raw file).
    pub bytes: Cow<'a, [u8]>,
    /// What the input file is.
    pub input_kind: InputKind,
    /// How the region was found.
    pub found_by: FoundBy,
    /// File offset of the region's first byte, when the region is contiguous in the file.
    pub file_offset: Option<u64>,
    /// Physical address of the region, when the input is a vmcore.
    pub paddr: Option<u64>,
    /// `KERNELOFFSET` from vmcoreinfo.
    pub kerneloffset: Option<u64>,
    /// The vmcoreinfo text, if the input has one.
    pub vmcoreinfo: Option<String>,
    /// Notes about the input that did not stop the reading.
    pub warnings: Vec<String>,
    /// The vmcore itself, for reading other memory (the running kernel's text).
    pub core: Option<ElfCore<'a>>,
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

/// Finds the region in `data`, the whole input file.
///
/// ELF input: vmcoreinfo keys first, else a scan of `PT_LOAD` page starts. Raw input: the
/// container at offset 0, else a scan of page starts. The region's bytes are not validated
/// beyond the container header; [`cspd_format::parse_region`] does that.
pub fn locate(data: &[u8]) -> Result<Located<'_>, LocateError> {
    if crate::vmcore::is_elf(data) {
        locate_elf(data)
    } else {
        locate_raw(data)
    }
}

fn locate_raw(data: &[u8]) -> Result<Located<'_>, LocateError> {
    let mut located = Located {
        bytes: Cow::Borrowed(data),
        input_kind: InputKind::Raw,
        found_by: FoundBy::RawFile,
        file_offset: Some(0),
        paddr: None,
        kerneloffset: None,
        vmcoreinfo: None,
        warnings: Vec::new(),
        core: None,
    };
    if data.starts_with(&CONTAINER_MAGIC) || data.len() < CONTAINER_HEADER_SIZE {
        // The region itself (possibly damaged): the parser names what is wrong.
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
    match first_magic {
        Some(off) => {
            located.bytes = Cow::Borrowed(data.get(off..).unwrap_or(&[]));
            located.found_by = FoundBy::ScanRaw { offset: off as u64 };
            located.file_offset = Some(off as u64);
            Ok(located)
        }
        // Nothing better: hand the file to the parser, which names the bad magic.
        None => Ok(located),
    }
}

fn locate_elf(data: &[u8]) -> Result<Located<'_>, LocateError> {
    let elf = ElfCore::parse(data)?;
    let mut warnings = elf.warnings.clone();
    let info = elf.vmcoreinfo();
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
    match keys {
        Some((Some(paddr), Some(size))) => {
            if size == 0 || size > MAX_REGION_SIZE {
                return Err(LocateError::BadSize { size });
            }
            let bytes = elf
                .read_phys(paddr, size)
                .map_err(|err| LocateError::VmcoreinfoRegion { paddr, size, err })?;
            let file_offset = match bytes {
                Cow::Borrowed(_) => elf.phys_to_offset(paddr),
                Cow::Owned(_) => None,
            };
            return Ok(Located {
                bytes,
                input_kind: InputKind::ElfVmcore,
                found_by: FoundBy::Vmcoreinfo { paddr, size },
                file_offset,
                paddr: Some(paddr),
                kerneloffset,
                vmcoreinfo,
                warnings,
                core: Some(elf),
            });
        }
        Some((None, _)) | Some((_, None)) => warnings.push(format!(
            "vmcoreinfo has no valid {VMCOREINFO_PADDR_KEY}/{VMCOREINFO_SIZE_KEY}: scanning memory"
        )),
        None => warnings.push("no VMCOREINFO note: scanning memory".into()),
    }
    let hits = elf.scan_page_starts(&CONTAINER_MAGIC, SCAN_PAGE, SCAN_HIT_LIMIT);
    let mut chosen = None;
    for &paddr in &hits {
        let Ok(head) = elf.read_phys(paddr, CONTAINER_HEADER_SIZE as u64) else {
            continue;
        };
        if let Ok(h) = ContainerHeader::decode(&head) {
            chosen = Some((paddr, Some(h)));
            break;
        }
    }
    if chosen.is_none() {
        chosen = hits.first().map(|&p| (p, None));
    }
    let Some((paddr, header)) = chosen else {
        return Err(LocateError::NotFound(format!(
            "no vmcoreinfo keys and no container magic at any page start of {} PT_LOAD segment(s)",
            elf.segments.len()
        )));
    };
    // Size: the header's, bounded by what the segments hold; else just the header.
    let size = header
        .map(|h| h.region_size.min(MAX_REGION_SIZE))
        .unwrap_or(CONTAINER_HEADER_SIZE as u64);
    let bytes = match elf.read_phys(paddr, size) {
        Ok(b) => b,
        Err(e) => {
            warnings.push(format!("region at physical address {paddr:#x}: {e}"));
            // Give the parser what there is, so it can name the truncation.
            let avail = elf
                .segments
                .iter()
                .find(|s| s.paddr <= paddr && paddr - s.paddr < s.present)
                .map_or(0, |s| s.present - (paddr - s.paddr));
            elf.read_phys(paddr, avail.min(size))?
        }
    };
    let file_offset = match bytes {
        Cow::Borrowed(_) => elf.phys_to_offset(paddr),
        Cow::Owned(_) => None,
    };
    Ok(Located {
        bytes,
        input_kind: InputKind::ElfVmcore,
        found_by: FoundBy::ScanElf { paddr },
        file_offset,
        paddr: Some(paddr),
        kerneloffset,
        vmcoreinfo,
        warnings,
        core: Some(elf),
    })
}

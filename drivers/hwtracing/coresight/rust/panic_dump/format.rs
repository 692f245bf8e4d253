// SPDX-License-Identifier: GPL-2.0

//! The coresight-panic-dump container: the one layout of the reserved region.
//!
//! All integers are little-endian; every offset is a byte offset from the start of the region.
//!
//! - Container header (64 bytes) at offset 0: magic `b"CSPDUMP\0"`, version u16 (1), header size
//!   u16 (64), record header size u16 (80), flags u16, region size u64, boot id `[u8; 16]`, stamp
//!   u64 (first 8 bytes of the boot id), sequence u64 (dump counter across boots), offset of the
//!   first record u32 (8-aligned), header CRC u32 (over the 64 bytes with the CRC field zero).
//! - Records follow back to back, each an 80-byte header then `capacity` data bytes; the next
//!   record starts at `offset + 80 + capacity`. Header: magic `b"CSPR"`, kind u16, status u16,
//!   cpu u32 (`u32::MAX` = none), error i32 (negative errno), capacity u32 (multiple of 8), length
//!   u32 (<= capacity), data CRC u32 (over `data[..length]`), flags u32, stamp u64 (the
//!   container's), name `[u8; 32]` (NUL-padded), header CRC u32 (CRC field zero), reserved u32.
//! - A zero magic ends the chain (readers look past a zeroed or broken header for the next valid
//!   one, so one bad record hides no other). `Free` records are skipped by readers. The
//!   `Commit` record is written last at panic; its 40-byte payload holds stamp, sequence, number of
//!   records before it, CRC over their headers in order, used bytes (end of the commit record)
//!   and its own CRC. A region with no commit is a torn (or not yet written) dump.
//! - Payloads of the core's records: `Identity` (144 bytes: release `[u8; 64]`, build id
//!   `[u8; 20]`, build id length u8, 3 pad, then u64 each: KASLR offset, `_text`, `PAGE_OFFSET`,
//!   `memstart_addr`, `kimage_voffset`, region address, region size); `PanicInfo` (cpu u32, flags
//!   u32 with bit 0 = truncated, message length u32, reserved u32, then up to 1024 bytes).
//! - CRC is CRC-32/IEEE (reflected 0xEDB88320, init and xorout 0xFFFFFFFF), as `~crc32_le(~0, ..)`.
//!
//! The file is plain `core` Rust: it is compiled into the kernel core and into the host crates.
//! Nothing here allocates, panics on bad input or loops without a bound.

use core::fmt;

/// Magic at offset 0 of the region.
pub const CONTAINER_MAGIC: [u8; 8] = *b"CSPDUMP\0";

/// Version of the layout this file writes and reads.
pub const FORMAT_VERSION: u16 = 1;

/// Size in bytes of the container header.
pub const CONTAINER_HEADER_SIZE: usize = 64;

/// Magic that starts every record header (`b"CSPR"` read as a little-endian u32).
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"CSPR");

/// Size in bytes of a record header; the data area follows it.
pub const RECORD_HEADER_SIZE: usize = 80;

/// Alignment of records and of record capacities.
pub const RECORD_ALIGN: usize = 8;

/// Size in bytes of the NUL-padded name in a record header.
pub const NAME_SIZE: usize = 32;

/// Value of [`RecordHeader::cpu`] for a record that belongs to no CPU.
pub const CPU_NONE: u32 = u32::MAX;

/// Size in bytes of the boot id.
pub const BOOT_ID_SIZE: usize = 16;

/// Maximum size in bytes of the kernel release string in an identity record.
pub const RELEASE_MAX: usize = 64;

/// Maximum size in bytes of the build id in an identity record.
pub const BUILD_ID_MAX: usize = 20;

/// Size in bytes of an identity record payload.
pub const IDENTITY_SIZE: usize = 144;

/// Size in bytes of the fixed part of a panic info payload, before the message.
pub const PANIC_INFO_HEADER_SIZE: usize = 16;

/// Maximum size in bytes of the panic message kept in a panic info payload.
pub const PANIC_MESSAGE_MAX: usize = 1024;

/// Maximum size in bytes of a panic info payload.
pub const PANIC_INFO_MAX_SIZE: usize = PANIC_INFO_HEADER_SIZE + PANIC_MESSAGE_MAX;

/// Size in bytes of a commit record payload.
pub const COMMIT_SIZE: usize = 40;

/// Bytes a commit record takes in the region, header included.
pub const COMMIT_RECORD_SIZE: usize = RECORD_HEADER_SIZE + COMMIT_SIZE;

/// Bit in the panic info flags set when the message was cut to fit.
pub const PANIC_FLAG_TRUNCATED: u32 = 1;

/// vmcoreinfo key whose value is the physical address of the region.
pub const VMCOREINFO_PADDR_KEY: &str = "CSPD_REGION_PADDR";

/// vmcoreinfo key whose value is the size of the region in bytes.
pub const VMCOREINFO_SIZE_KEY: &str = "CSPD_REGION_SIZE";

/// vmcoreinfo key the kernel itself publishes for the KASLR offset.
pub const VMCOREINFO_KERNELOFFSET_KEY: &str = "KERNELOFFSET";

/// Size in bytes of the longest text [`format_vmcoreinfo`] writes.
pub const VMCOREINFO_TEXT_MAX: usize =
    VMCOREINFO_PADDR_KEY.len() + VMCOREINFO_SIZE_KEY.len() + 2 * (3 + 16 + 1);

// Offsets in the container header.
const CH_MAGIC: usize = 0;
const CH_VERSION: usize = 8;
const CH_HEADER_SIZE: usize = 10;
const CH_RECORD_HEADER_SIZE: usize = 12;
const CH_FLAGS: usize = 14;
const CH_REGION_SIZE: usize = 16;
const CH_BOOT_ID: usize = 24;
const CH_STAMP: usize = 40;
const CH_SEQUENCE: usize = 48;
const CH_FIRST_RECORD: usize = 56;
const CH_CRC: usize = 60;

// Offsets in the record header.
const RH_MAGIC: usize = 0;
const RH_KIND: usize = 4;
const RH_STATUS: usize = 6;
const RH_CPU: usize = 8;
const RH_ERROR: usize = 12;
const RH_CAPACITY: usize = 16;
const RH_LENGTH: usize = 20;
const RH_DATA_CRC: usize = 24;
const RH_FLAGS: usize = 28;
const RH_STAMP: usize = 32;
const RH_NAME: usize = 40;
const RH_CRC: usize = 72;

// Offsets in the identity payload.
const ID_RELEASE: usize = 0;
const ID_BUILD_ID: usize = 64;
const ID_BUILD_ID_LEN: usize = 84;
const ID_KASLR: usize = 88;
const ID_TEXT: usize = 96;
const ID_PAGE_OFFSET: usize = 104;
const ID_MEMSTART: usize = 112;
const ID_KIMAGE_VOFFSET: usize = 120;
const ID_REGION_PADDR: usize = 128;
const ID_REGION_SIZE: usize = 136;

// Offsets in the panic info payload.
const PI_CPU: usize = 0;
const PI_FLAGS: usize = 4;
const PI_LENGTH: usize = 8;

// Offsets in the commit payload.
const CM_STAMP: usize = 0;
const CM_SEQUENCE: usize = 8;
const CM_RECORDS: usize = 16;
const CM_HEADERS_CRC: usize = 20;
const CM_USED: usize = 24;
const CM_CRC: usize = 32;

const fn crc32_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut t = 1;
    while t < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        t += 1;
    }
    tables
}

/// Lookup tables of the reflected CRC-32 polynomial 0xEDB88320, for slicing by 8.
pub static CRC32_TABLES: [[u32; 256]; 8] = crc32_tables();

/// Streaming CRC-32 (IEEE 802.3), the same value as the kernel's `~crc32_le(~0, p, len)`.
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// Starts a new CRC.
    pub const fn new() -> Self {
        Self { state: 0xFFFF_FFFF }
    }

    /// Adds `bytes` to the CRC.
    pub fn update(&mut self, bytes: &[u8]) {
        let t = &CRC32_TABLES;
        let mut crc = self.state;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let Ok([b0, b1, b2, b3, b4, b5, b6, b7]) = <[u8; 8]>::try_from(c) else {
                continue;
            };
            let lo = u32::from_le_bytes([b0, b1, b2, b3]) ^ crc;
            let [l0, l1, l2, l3] = lo.to_le_bytes();
            // Indexing a 256-entry table with a u8 cannot go out of bounds.
            crc = t[7][usize::from(l0)]
                ^ t[6][usize::from(l1)]
                ^ t[5][usize::from(l2)]
                ^ t[4][usize::from(l3)]
                ^ t[3][usize::from(b4)]
                ^ t[2][usize::from(b5)]
                ^ t[1][usize::from(b6)]
                ^ t[0][usize::from(b7)];
        }
        for &b in chunks.remainder() {
            let [l0, _, _, _] = (crc ^ u32::from(b)).to_le_bytes();
            crc = (crc >> 8) ^ t[0][usize::from(l0)];
        }
        self.state = crc;
    }

    /// Adds `count` zero bytes to the CRC.
    pub fn update_zeros(&mut self, count: usize) {
        let mut left = count;
        while left > 0 {
            let n = if left < 8 { left } else { 8 };
            self.update([0u8; 8].get(..n).unwrap_or(&[]));
            left -= n;
        }
    }

    /// Returns the CRC of everything added so far.
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

/// Returns the CRC-32 (IEEE 802.3) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

/// CRC of `bytes` with the 4 bytes at `field` counted as zero.
fn crc_with_zero_field(bytes: &[u8], field: usize) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes.get(..field).unwrap_or(&[]));
    c.update_zeros(4);
    c.update(bytes.get(field.saturating_add(4)..).unwrap_or(&[]));
    c.finish()
}

/// Why a region, a record or a payload could not be read or written.
///
/// Every variant that describes the region names the byte offset (from the start of the region)
/// of the header or record at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The container magic is not [`CONTAINER_MAGIC`].
    BadMagic {
        /// Offset of the container header.
        offset: usize,
    },
    /// The container version is not one this code reads.
    UnsupportedVersion {
        /// Offset of the container header.
        offset: usize,
        /// Version found.
        version: u16,
    },
    /// The container's header size or record header size is not the one of this version.
    BadHeaderSize {
        /// Offset of the container header.
        offset: usize,
        /// Container header size found.
        header_size: u16,
        /// Record header size found.
        record_header_size: u16,
    },
    /// The region, a header or a record ends before the bytes it needs.
    Truncated {
        /// Offset of the structure that is cut.
        offset: usize,
        /// Bytes it needs from `offset`.
        needed: usize,
        /// Bytes available from `offset`.
        available: usize,
    },
    /// The container header CRC does not match.
    HeaderCrc {
        /// Offset of the container header.
        offset: usize,
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the header.
        computed: u32,
    },
    /// The first record offset is unaligned, inside the header or past the region.
    BadFirstRecord {
        /// Offset of the container header.
        offset: usize,
        /// First record offset found.
        first_record: u32,
    },
    /// Where a record header was expected, there is no record magic.
    BadRecordMagic {
        /// Offset of the expected record.
        offset: usize,
        /// Magic found.
        found: u32,
    },
    /// A record header CRC does not match.
    RecordHeaderCrc {
        /// Offset of the record.
        offset: usize,
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the header.
        computed: u32,
    },
    /// A record capacity is not a multiple of [`RECORD_ALIGN`].
    BadCapacity {
        /// Offset of the record.
        offset: usize,
        /// Capacity found.
        capacity: u32,
    },
    /// A record's length is larger than its capacity.
    LengthExceedsCapacity {
        /// Offset of the record.
        offset: usize,
        /// Length found.
        length: u32,
        /// Capacity found.
        capacity: u32,
    },
    /// A record kind this version does not know.
    UnknownKind {
        /// Offset of the record.
        offset: usize,
        /// Kind found.
        kind: u16,
    },
    /// A record status this version does not know.
    UnknownStatus {
        /// Offset of the record.
        offset: usize,
        /// Status found.
        status: u16,
    },
    /// A record's stamp is not the container's: it was left by another boot.
    StaleRecord {
        /// Offset of the record.
        offset: usize,
        /// Stamp of the record.
        stamp: u64,
        /// Stamp of the container.
        expected: u64,
    },
    /// A record's data CRC does not match its data.
    DataCrc {
        /// Offset of the record.
        offset: usize,
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the data.
        computed: u32,
    },
    /// The record chain ends without a commit record: the dump was torn or never written.
    MissingCommit {
        /// Offset where the chain ends.
        offset: usize,
    },
    /// The commit payload's own CRC does not match.
    CommitCrc {
        /// Offset of the commit record.
        offset: usize,
        /// CRC stored in the payload.
        stored: u32,
        /// CRC computed over the payload.
        computed: u32,
    },
    /// The commit's CRC over the record headers before it does not match them.
    CommitHeadersCrc {
        /// Offset of the commit record.
        offset: usize,
        /// CRC stored in the commit.
        stored: u32,
        /// CRC computed over the headers read.
        computed: u32,
    },
    /// The commit's record count is not the number of records before it.
    CommitCount {
        /// Offset of the commit record.
        offset: usize,
        /// Count stored in the commit.
        stored: u32,
        /// Records read before the commit.
        counted: u32,
    },
    /// The commit's stamp, sequence or used bytes disagree with the container.
    CommitMismatch {
        /// Offset of the commit record.
        offset: usize,
        /// Which field disagrees.
        field: &'static str,
        /// Value stored in the commit.
        stored: u64,
        /// Value expected.
        expected: u64,
    },
    /// An output buffer is too small for what is encoded into it.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// An input value does not fit its field.
    FieldTooLong {
        /// Name of the field.
        field: &'static str,
        /// Length given.
        length: usize,
        /// Maximum length.
        max: usize,
    },
}

impl FormatError {
    /// Returns the region offset the error is about, if it is about the region.
    pub fn offset(&self) -> Option<usize> {
        match *self {
            Self::BadMagic { offset }
            | Self::UnsupportedVersion { offset, .. }
            | Self::BadHeaderSize { offset, .. }
            | Self::Truncated { offset, .. }
            | Self::HeaderCrc { offset, .. }
            | Self::BadFirstRecord { offset, .. }
            | Self::BadRecordMagic { offset, .. }
            | Self::RecordHeaderCrc { offset, .. }
            | Self::BadCapacity { offset, .. }
            | Self::LengthExceedsCapacity { offset, .. }
            | Self::UnknownKind { offset, .. }
            | Self::UnknownStatus { offset, .. }
            | Self::StaleRecord { offset, .. }
            | Self::DataCrc { offset, .. }
            | Self::MissingCommit { offset }
            | Self::CommitCrc { offset, .. }
            | Self::CommitHeadersCrc { offset, .. }
            | Self::CommitCount { offset, .. }
            | Self::CommitMismatch { offset, .. } => Some(offset),
            Self::BufferTooSmall { .. } | Self::FieldTooLong { .. } => None,
        }
    }

    /// Returns a short stable name of the error, for machine-readable reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::BadMagic { .. } => "bad-magic",
            Self::UnsupportedVersion { .. } => "unsupported-version",
            Self::BadHeaderSize { .. } => "bad-header-size",
            Self::Truncated { .. } => "truncated",
            Self::HeaderCrc { .. } => "header-crc",
            Self::BadFirstRecord { .. } => "bad-first-record",
            Self::BadRecordMagic { .. } => "bad-record-magic",
            Self::RecordHeaderCrc { .. } => "record-header-crc",
            Self::BadCapacity { .. } => "bad-capacity",
            Self::LengthExceedsCapacity { .. } => "length-exceeds-capacity",
            Self::UnknownKind { .. } => "unknown-kind",
            Self::UnknownStatus { .. } => "unknown-status",
            Self::StaleRecord { .. } => "stale-record",
            Self::DataCrc { .. } => "data-crc",
            Self::MissingCommit { .. } => "missing-commit",
            Self::CommitCrc { .. } => "commit-crc",
            Self::CommitHeadersCrc { .. } => "commit-headers-crc",
            Self::CommitCount { .. } => "commit-count",
            Self::CommitMismatch { .. } => "commit-mismatch",
            Self::BufferTooSmall { .. } => "buffer-too-small",
            Self::FieldTooLong { .. } => "field-too-long",
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BadMagic { offset } => {
                write!(f, "offset {offset:#x}: bad container magic (no dump here)")
            }
            Self::UnsupportedVersion { offset, version } => write!(
                f,
                "offset {offset:#x}: unsupported format version {version} (this reader knows {FORMAT_VERSION})"
            ),
            Self::BadHeaderSize {
                offset,
                header_size,
                record_header_size,
            } => write!(
                f,
                "offset {offset:#x}: header sizes {header_size}/{record_header_size}, expected {CONTAINER_HEADER_SIZE}/{RECORD_HEADER_SIZE}"
            ),
            Self::Truncated {
                offset,
                needed,
                available,
            } => write!(
                f,
                "offset {offset:#x}: truncated: needs {needed} bytes, only {available} available"
            ),
            Self::HeaderCrc {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "offset {offset:#x}: container header CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::BadFirstRecord {
                offset,
                first_record,
            } => write!(
                f,
                "offset {offset:#x}: invalid first record offset {first_record:#x}"
            ),
            Self::BadRecordMagic { offset, found } => write!(
                f,
                "offset {offset:#x}: no record header here (magic {found:#010x})"
            ),
            Self::RecordHeaderCrc {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "offset {offset:#x}: record header CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::BadCapacity { offset, capacity } => write!(
                f,
                "offset {offset:#x}: record capacity {capacity} is not a multiple of {RECORD_ALIGN}"
            ),
            Self::LengthExceedsCapacity {
                offset,
                length,
                capacity,
            } => write!(
                f,
                "offset {offset:#x}: record length {length} exceeds its capacity {capacity}"
            ),
            Self::UnknownKind { offset, kind } => {
                write!(f, "offset {offset:#x}: unknown record kind {kind}")
            }
            Self::UnknownStatus { offset, status } => {
                write!(f, "offset {offset:#x}: unknown record status {status}")
            }
            Self::StaleRecord {
                offset,
                stamp,
                expected,
            } => write!(
                f,
                "offset {offset:#x}: stale record from another boot (stamp {stamp:#018x}, container {expected:#018x})"
            ),
            Self::DataCrc {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "offset {offset:#x}: record data CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::MissingCommit { offset } => write!(
                f,
                "offset {offset:#x}: record chain ends without a commit record (torn or unfinished dump)"
            ),
            Self::CommitCrc {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "offset {offset:#x}: commit payload CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::CommitHeadersCrc {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "offset {offset:#x}: commit CRC over record headers mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::CommitCount {
                offset,
                stored,
                counted,
            } => write!(
                f,
                "offset {offset:#x}: commit says {stored} records, {counted} found before it"
            ),
            Self::CommitMismatch {
                offset,
                field,
                stored,
                expected,
            } => write!(
                f,
                "offset {offset:#x}: commit {field} is {stored:#x}, expected {expected:#x}"
            ),
            Self::BufferTooSmall { needed, available } => write!(
                f,
                "buffer too small: needs {needed} bytes, only {available} available"
            ),
            Self::FieldTooLong { field, length, max } => {
                write!(f, "{field} is {length} bytes, at most {max} fit")
            }
        }
    }
}

impl core::error::Error for FormatError {}

fn get_array<const N: usize>(bytes: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    let s = bytes.get(off..end)?;
    <[u8; N]>::try_from(s).ok()
}

fn get_u16(bytes: &[u8], off: usize) -> u16 {
    get_array::<2>(bytes, off).map_or(0, u16::from_le_bytes)
}

fn get_u32(bytes: &[u8], off: usize) -> u32 {
    get_array::<4>(bytes, off).map_or(0, u32::from_le_bytes)
}

fn get_u64(bytes: &[u8], off: usize) -> u64 {
    get_array::<8>(bytes, off).map_or(0, u64::from_le_bytes)
}

fn put(bytes: &mut [u8], off: usize, src: &[u8]) {
    if let Some(end) = off.checked_add(src.len()) {
        if let Some(dst) = bytes.get_mut(off..end) {
            dst.copy_from_slice(src);
        }
    }
}

fn need(bytes: &[u8], offset: usize, needed: usize) -> Result<(), FormatError> {
    if bytes.len() < needed {
        Err(FormatError::Truncated {
            offset,
            needed,
            available: bytes.len(),
        })
    } else {
        Ok(())
    }
}

fn out_need(out: &[u8], needed: usize) -> Result<(), FormatError> {
    if out.len() < needed {
        Err(FormatError::BufferTooSmall {
            needed,
            available: out.len(),
        })
    } else {
        Ok(())
    }
}

/// Returns the record stamp a boot uses: the first 8 bytes of its boot id, little-endian.
pub fn stamp_from_boot_id(boot_id: &[u8; BOOT_ID_SIZE]) -> u64 {
    get_u64(boot_id, 0)
}

/// Rounds `value` up to a multiple of [`RECORD_ALIGN`], or `None` on overflow.
pub const fn align_up(value: usize) -> Option<usize> {
    match value.checked_add(RECORD_ALIGN - 1) {
        Some(v) => Some(v & !(RECORD_ALIGN - 1)),
        None => None,
    }
}

/// The container header at offset 0 of the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerHeader {
    /// Size of the region in bytes, header included.
    pub region_size: u64,
    /// Random id of the boot that wrote the region.
    pub boot_id: [u8; BOOT_ID_SIZE],
    /// Stamp every record of this boot carries (see [`stamp_from_boot_id`]).
    pub stamp: u64,
    /// Dump counter across boots.
    pub sequence: u64,
    /// Offset of the first record, a multiple of [`RECORD_ALIGN`].
    pub first_record: u32,
    /// Reserved flags, zero in version 1.
    pub flags: u16,
}

impl ContainerHeader {
    /// Creates the header of a region of `region_size` bytes with the first record right after
    /// the header.
    pub fn new(region_size: u64, boot_id: [u8; BOOT_ID_SIZE], sequence: u64) -> Self {
        Self {
            region_size,
            boot_id,
            stamp: stamp_from_boot_id(&boot_id),
            sequence,
            // CAST: the header size is a small constant.
            first_record: CONTAINER_HEADER_SIZE as u32,
            flags: 0,
        }
    }

    /// Encodes the header, its CRC included.
    pub fn encode(&self) -> [u8; CONTAINER_HEADER_SIZE] {
        let mut b = [0u8; CONTAINER_HEADER_SIZE];
        put(&mut b, CH_MAGIC, &CONTAINER_MAGIC);
        put(&mut b, CH_VERSION, &FORMAT_VERSION.to_le_bytes());
        // CAST: both sizes are small constants.
        put(
            &mut b,
            CH_HEADER_SIZE,
            &(CONTAINER_HEADER_SIZE as u16).to_le_bytes(),
        );
        put(
            &mut b,
            CH_RECORD_HEADER_SIZE,
            &(RECORD_HEADER_SIZE as u16).to_le_bytes(),
        );
        put(&mut b, CH_FLAGS, &self.flags.to_le_bytes());
        put(&mut b, CH_REGION_SIZE, &self.region_size.to_le_bytes());
        put(&mut b, CH_BOOT_ID, &self.boot_id);
        put(&mut b, CH_STAMP, &self.stamp.to_le_bytes());
        put(&mut b, CH_SEQUENCE, &self.sequence.to_le_bytes());
        put(&mut b, CH_FIRST_RECORD, &self.first_record.to_le_bytes());
        let crc = crc_with_zero_field(&b, CH_CRC);
        put(&mut b, CH_CRC, &crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header: magic, version, sizes, then CRC.
    ///
    /// Does not check `region_size` or `first_record` against a region; [`parse_region`] does.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let offset = 0;
        let magic = get_array::<8>(bytes, CH_MAGIC);
        if bytes.len() >= CONTAINER_MAGIC.len() && magic != Some(CONTAINER_MAGIC) {
            return Err(FormatError::BadMagic { offset });
        }
        need(bytes, offset, CONTAINER_HEADER_SIZE)?;
        let version = get_u16(bytes, CH_VERSION);
        if version != FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion { offset, version });
        }
        let header_size = get_u16(bytes, CH_HEADER_SIZE);
        let record_header_size = get_u16(bytes, CH_RECORD_HEADER_SIZE);
        if usize::from(header_size) != CONTAINER_HEADER_SIZE
            || usize::from(record_header_size) != RECORD_HEADER_SIZE
        {
            return Err(FormatError::BadHeaderSize {
                offset,
                header_size,
                record_header_size,
            });
        }
        let raw = bytes.get(..CONTAINER_HEADER_SIZE).unwrap_or(&[]);
        let stored = get_u32(raw, CH_CRC);
        let computed = crc_with_zero_field(raw, CH_CRC);
        if stored != computed {
            return Err(FormatError::HeaderCrc {
                offset,
                stored,
                computed,
            });
        }
        Ok(Self {
            region_size: get_u64(raw, CH_REGION_SIZE),
            boot_id: get_array::<BOOT_ID_SIZE>(raw, CH_BOOT_ID).unwrap_or([0; BOOT_ID_SIZE]),
            stamp: get_u64(raw, CH_STAMP),
            sequence: get_u64(raw, CH_SEQUENCE),
            first_record: get_u32(raw, CH_FIRST_RECORD),
            flags: get_u16(raw, CH_FLAGS),
        })
    }
}

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum RecordKind {
    /// The kernel's identity: release, build id, address layout ([`Identity`]).
    Identity = 1,
    /// The panic message and CPU ([`PanicInfo`]).
    PanicInfo = 2,
    /// A trace sink's buffer (TMC ETB/ETF RAM).
    Sink = 3,
    /// A trace source's state (`ETMv4` registers).
    Source = 4,
    /// A CPU debug sample (EDPCSR and friends).
    CpuDebug = 5,
    /// Any other client's data.
    Other = 6,
    /// A slot released by `dump_del`; readers skip it.
    Free = 7,
    /// The commit record written last at panic ([`Commit`]).
    Commit = 8,
}

impl RecordKind {
    /// Returns a short lower-case name, used in file names and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::PanicInfo => "panic-info",
            Self::Sink => "sink",
            Self::Source => "source",
            Self::CpuDebug => "cpu-debug",
            Self::Other => "other",
            Self::Free => "free",
            Self::Commit => "commit",
        }
    }
}

impl TryFrom<u16> for RecordKind {
    type Error = u16;

    fn try_from(v: u16) -> Result<Self, u16> {
        Ok(match v {
            1 => Self::Identity,
            2 => Self::PanicInfo,
            3 => Self::Sink,
            4 => Self::Source,
            5 => Self::CpuDebug,
            6 => Self::Other,
            7 => Self::Free,
            8 => Self::Commit,
            _ => return Err(v),
        })
    }
}

/// How a record's callback went at panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum RecordStatus {
    /// The callback ran and wrote `length` bytes.
    Ok = 0,
    /// Registered, but the callback never ran.
    NotRun = 1,
    /// The callback returned an error; the record's `error` says which.
    CallbackError = 2,
    /// The callback had more data than the capacity; `length` bytes were kept.
    Truncated = 3,
    /// The device did not finish (for example a timeout); the data is what was read.
    Partial = 4,
}

impl RecordStatus {
    /// Returns a short lower-case name, used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NotRun => "not-run",
            Self::CallbackError => "callback-error",
            Self::Truncated => "truncated",
            Self::Partial => "partial",
        }
    }
}

impl TryFrom<u16> for RecordStatus {
    type Error = u16;

    fn try_from(v: u16) -> Result<Self, u16> {
        Ok(match v {
            0 => Self::Ok,
            1 => Self::NotRun,
            2 => Self::CallbackError,
            3 => Self::Truncated,
            4 => Self::Partial,
            _ => return Err(v),
        })
    }
}

/// The fixed-size header in front of every record's data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// What the record holds.
    pub kind: RecordKind,
    /// How the callback went.
    pub status: RecordStatus,
    /// CPU the record belongs to, or [`CPU_NONE`].
    pub cpu: u32,
    /// Negative errno the callback returned, or 0.
    pub error: i32,
    /// Bytes of the data area, header not included; a multiple of [`RECORD_ALIGN`].
    pub capacity: u32,
    /// Bytes of the data area written, at most `capacity`.
    pub length: u32,
    /// CRC-32 of the first `length` bytes of the data area.
    pub data_crc: u32,
    /// Reserved flags, zero in version 1.
    pub flags: u32,
    /// Stamp of the boot that wrote the record (the container's).
    pub stamp: u64,
    /// NUL-padded device name.
    pub name: [u8; NAME_SIZE],
}

impl RecordHeader {
    /// Creates the header of an empty, not yet run record.
    ///
    /// `name` is cut to [`NAME_SIZE`] bytes; `capacity` must be a multiple of [`RECORD_ALIGN`].
    pub fn new(kind: RecordKind, name: &[u8], capacity: u32, stamp: u64) -> Self {
        let mut h = Self {
            kind,
            status: RecordStatus::NotRun,
            cpu: CPU_NONE,
            error: 0,
            capacity,
            length: 0,
            data_crc: crc32(&[]),
            flags: 0,
            stamp,
            name: [0; NAME_SIZE],
        };
        h.set_name(name);
        h
    }

    /// Sets the name, cut to [`NAME_SIZE`] bytes and NUL-padded.
    pub fn set_name(&mut self, name: &[u8]) {
        self.name = [0; NAME_SIZE];
        let n = if name.len() < NAME_SIZE {
            name.len()
        } else {
            NAME_SIZE
        };
        put(&mut self.name, 0, name.get(..n).unwrap_or(&[]));
    }

    /// Returns the name without its NUL padding.
    pub fn name_bytes(&self) -> &[u8] {
        let n = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_SIZE);
        self.name.get(..n).unwrap_or(&[])
    }

    /// Returns the size the record takes in the region, header included.
    pub fn record_size(&self) -> Option<usize> {
        RECORD_HEADER_SIZE.checked_add(usize::try_from(self.capacity).ok()?)
    }

    /// Encodes the header, its CRC included.
    pub fn encode(&self) -> [u8; RECORD_HEADER_SIZE] {
        let mut b = [0u8; RECORD_HEADER_SIZE];
        put(&mut b, RH_MAGIC, &RECORD_MAGIC.to_le_bytes());
        put(&mut b, RH_KIND, &(self.kind as u16).to_le_bytes());
        put(&mut b, RH_STATUS, &(self.status as u16).to_le_bytes());
        put(&mut b, RH_CPU, &self.cpu.to_le_bytes());
        put(&mut b, RH_ERROR, &self.error.to_le_bytes());
        put(&mut b, RH_CAPACITY, &self.capacity.to_le_bytes());
        put(&mut b, RH_LENGTH, &self.length.to_le_bytes());
        put(&mut b, RH_DATA_CRC, &self.data_crc.to_le_bytes());
        put(&mut b, RH_FLAGS, &self.flags.to_le_bytes());
        put(&mut b, RH_STAMP, &self.stamp.to_le_bytes());
        put(&mut b, RH_NAME, &self.name);
        let crc = crc_with_zero_field(&b, RH_CRC);
        put(&mut b, RH_CRC, &crc.to_le_bytes());
        b
    }

    /// Decodes and checks a record header found at region offset 0 of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        Self::decode_at(bytes, 0)
    }

    /// Decodes and checks a record header; `offset` is its region offset, used in errors.
    ///
    /// Checks magic, CRC, capacity alignment, length against capacity, kind and status, in that
    /// order. The stamp and data CRC need the container and the data: [`Records`] checks them.
    pub fn decode_at(bytes: &[u8], offset: usize) -> Result<Self, FormatError> {
        need(bytes, offset, RECORD_HEADER_SIZE)?;
        let raw = bytes.get(..RECORD_HEADER_SIZE).unwrap_or(&[]);
        let found = get_u32(raw, RH_MAGIC);
        if found != RECORD_MAGIC {
            return Err(FormatError::BadRecordMagic { offset, found });
        }
        let stored = get_u32(raw, RH_CRC);
        let computed = crc_with_zero_field(raw, RH_CRC);
        if stored != computed {
            return Err(FormatError::RecordHeaderCrc {
                offset,
                stored,
                computed,
            });
        }
        let capacity = get_u32(raw, RH_CAPACITY);
        if capacity & (RECORD_ALIGN as u32 - 1) != 0 {
            return Err(FormatError::BadCapacity { offset, capacity });
        }
        let length = get_u32(raw, RH_LENGTH);
        if length > capacity {
            return Err(FormatError::LengthExceedsCapacity {
                offset,
                length,
                capacity,
            });
        }
        let kind = get_u16(raw, RH_KIND);
        let kind =
            RecordKind::try_from(kind).map_err(|kind| FormatError::UnknownKind { offset, kind })?;
        let status = get_u16(raw, RH_STATUS);
        let status = RecordStatus::try_from(status)
            .map_err(|status| FormatError::UnknownStatus { offset, status })?;
        Ok(Self {
            kind,
            status,
            cpu: get_u32(raw, RH_CPU),
            error: i32::from_le_bytes(get_array::<4>(raw, RH_ERROR).unwrap_or([0; 4])),
            capacity,
            length,
            data_crc: get_u32(raw, RH_DATA_CRC),
            flags: get_u32(raw, RH_FLAGS),
            stamp: get_u64(raw, RH_STAMP),
            name: get_array::<NAME_SIZE>(raw, RH_NAME).unwrap_or([0; NAME_SIZE]),
        })
    }
}

/// Finishes a record in place: computes the data CRC and writes the header.
///
/// `slot` is the record's bytes in the region (header then data area, at least
/// `RECORD_HEADER_SIZE + header.length` bytes). Returns the header as written.
pub fn seal_record(slot: &mut [u8], header: &RecordHeader) -> Result<RecordHeader, FormatError> {
    if header.length > header.capacity {
        return Err(FormatError::FieldTooLong {
            field: "record length",
            length: usize::try_from(header.length).unwrap_or(usize::MAX),
            max: usize::try_from(header.capacity).unwrap_or(usize::MAX),
        });
    }
    let length = usize::try_from(header.length).unwrap_or(usize::MAX);
    let end = RECORD_HEADER_SIZE.saturating_add(length);
    out_need(slot, end)?;
    let mut h = *header;
    h.data_crc = crc32(slot.get(RECORD_HEADER_SIZE..end).unwrap_or(&[]));
    put(slot, 0, &h.encode());
    Ok(h)
}

/// Writes `data` into the data area of the record at the start of `slot` and seals it.
///
/// The header written is `header` with `length` set to `data.len()` and the data CRC computed.
/// Returns the header as written.
pub fn write_record(
    slot: &mut [u8],
    header: &RecordHeader,
    data: &[u8],
) -> Result<RecordHeader, FormatError> {
    let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
    if length > header.capacity {
        return Err(FormatError::FieldTooLong {
            field: "record data",
            length: data.len(),
            max: usize::try_from(header.capacity).unwrap_or(usize::MAX),
        });
    }
    let start = RECORD_HEADER_SIZE;
    let end = start.saturating_add(data.len());
    out_need(slot, end)?;
    put(slot, start, data);
    let mut h = *header;
    h.length = length;
    seal_record(slot, &h)
}

fn put_padded(
    out: &mut [u8],
    off: usize,
    field: &'static str,
    src: &[u8],
    max: usize,
) -> Result<(), FormatError> {
    if src.len() > max {
        return Err(FormatError::FieldTooLong {
            field,
            length: src.len(),
            max,
        });
    }
    put(out, off, src);
    Ok(())
}

/// Trims a NUL-padded field.
fn trim_nul(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes.get(..n).unwrap_or(&[])
}

/// Payload of the identity record: which kernel wrote the dump and where it lived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Kernel release string (`uname -r`), NUL-padded.
    pub release: [u8; RELEASE_MAX],
    /// GNU build id of vmlinux; the first `build_id_len` bytes are meaningful.
    pub build_id: [u8; BUILD_ID_MAX],
    /// Number of meaningful bytes in `build_id`.
    pub build_id_len: u8,
    /// KASLR offset of the kernel image.
    pub kaslr_offset: u64,
    /// Virtual address of `_text`.
    pub text_addr: u64,
    /// `PAGE_OFFSET`, the start of the linear map.
    pub page_offset: u64,
    /// Physical start of memory (`memstart_addr`).
    pub memstart: u64,
    /// `kimage_voffset`, kernel image virtual minus physical.
    pub kimage_voffset: u64,
    /// Physical address of the dump region.
    pub region_paddr: u64,
    /// Size of the dump region in bytes.
    pub region_size: u64,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            release: [0; RELEASE_MAX],
            build_id: [0; BUILD_ID_MAX],
            build_id_len: 0,
            kaslr_offset: 0,
            text_addr: 0,
            page_offset: 0,
            memstart: 0,
            kimage_voffset: 0,
            region_paddr: 0,
            region_size: 0,
        }
    }
}

impl Identity {
    /// Sets the release string; fails if it is longer than [`RELEASE_MAX`].
    pub fn set_release(&mut self, release: &[u8]) -> Result<(), FormatError> {
        let mut r = [0u8; RELEASE_MAX];
        put_padded(&mut r, 0, "release", release, RELEASE_MAX)?;
        self.release = r;
        Ok(())
    }

    /// Sets the build id; fails if it is longer than [`BUILD_ID_MAX`].
    pub fn set_build_id(&mut self, build_id: &[u8]) -> Result<(), FormatError> {
        let mut b = [0u8; BUILD_ID_MAX];
        put_padded(&mut b, 0, "build id", build_id, BUILD_ID_MAX)?;
        self.build_id = b;
        // CAST: at most BUILD_ID_MAX (20) after the check above.
        self.build_id_len = build_id.len() as u8;
        Ok(())
    }

    /// Returns the release string without its NUL padding.
    pub fn release_bytes(&self) -> &[u8] {
        trim_nul(&self.release)
    }

    /// Returns the meaningful bytes of the build id.
    pub fn build_id_bytes(&self) -> &[u8] {
        let n = usize::from(self.build_id_len).min(BUILD_ID_MAX);
        self.build_id.get(..n).unwrap_or(&[])
    }

    /// Encodes the payload into `out`; returns its length, [`IDENTITY_SIZE`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        out_need(out, IDENTITY_SIZE)?;
        if usize::from(self.build_id_len) > BUILD_ID_MAX {
            return Err(FormatError::FieldTooLong {
                field: "build id",
                length: usize::from(self.build_id_len),
                max: BUILD_ID_MAX,
            });
        }
        if let Some(o) = out.get_mut(..IDENTITY_SIZE) {
            o.fill(0);
        }
        put(out, ID_RELEASE, &self.release);
        put(out, ID_BUILD_ID, &self.build_id);
        put(out, ID_BUILD_ID_LEN, &[self.build_id_len]);
        put(out, ID_KASLR, &self.kaslr_offset.to_le_bytes());
        put(out, ID_TEXT, &self.text_addr.to_le_bytes());
        put(out, ID_PAGE_OFFSET, &self.page_offset.to_le_bytes());
        put(out, ID_MEMSTART, &self.memstart.to_le_bytes());
        put(out, ID_KIMAGE_VOFFSET, &self.kimage_voffset.to_le_bytes());
        put(out, ID_REGION_PADDR, &self.region_paddr.to_le_bytes());
        put(out, ID_REGION_SIZE, &self.region_size.to_le_bytes());
        Ok(IDENTITY_SIZE)
    }

    /// Decodes a payload (a record's `data[..length]`).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        need(bytes, 0, IDENTITY_SIZE)?;
        let build_id_len = bytes.get(ID_BUILD_ID_LEN).copied().unwrap_or(0);
        if usize::from(build_id_len) > BUILD_ID_MAX {
            return Err(FormatError::FieldTooLong {
                field: "build id",
                length: usize::from(build_id_len),
                max: BUILD_ID_MAX,
            });
        }
        Ok(Self {
            release: get_array::<RELEASE_MAX>(bytes, ID_RELEASE).unwrap_or([0; RELEASE_MAX]),
            build_id: get_array::<BUILD_ID_MAX>(bytes, ID_BUILD_ID).unwrap_or([0; BUILD_ID_MAX]),
            build_id_len,
            kaslr_offset: get_u64(bytes, ID_KASLR),
            text_addr: get_u64(bytes, ID_TEXT),
            page_offset: get_u64(bytes, ID_PAGE_OFFSET),
            memstart: get_u64(bytes, ID_MEMSTART),
            kimage_voffset: get_u64(bytes, ID_KIMAGE_VOFFSET),
            region_paddr: get_u64(bytes, ID_REGION_PADDR),
            region_size: get_u64(bytes, ID_REGION_SIZE),
        })
    }
}

/// Payload of the panic info record: who panicked and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicInfo<'a> {
    /// The CPU that panicked, or [`CPU_NONE`].
    pub cpu: u32,
    /// The panic message (not NUL-terminated).
    pub message: &'a [u8],
    /// Whether the message was cut to fit.
    pub truncated: bool,
}

impl<'a> PanicInfo<'a> {
    /// Encodes the payload into `out`; returns its length.
    ///
    /// A message longer than [`PANIC_MESSAGE_MAX`] (or than `out` leaves room for, if `out` is
    /// at least [`PANIC_INFO_HEADER_SIZE`] bytes) is cut and marked truncated, never refused.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        out_need(out, PANIC_INFO_HEADER_SIZE)?;
        let room = out
            .len()
            .saturating_sub(PANIC_INFO_HEADER_SIZE)
            .min(PANIC_MESSAGE_MAX);
        let n = self.message.len().min(room);
        let truncated = self.truncated || n < self.message.len();
        if let Some(o) = out.get_mut(..PANIC_INFO_HEADER_SIZE) {
            o.fill(0);
        }
        put(out, PI_CPU, &self.cpu.to_le_bytes());
        let flags = if truncated { PANIC_FLAG_TRUNCATED } else { 0 };
        put(out, PI_FLAGS, &flags.to_le_bytes());
        // CAST: n is at most PANIC_MESSAGE_MAX.
        put(out, PI_LENGTH, &(n as u32).to_le_bytes());
        put(
            out,
            PANIC_INFO_HEADER_SIZE,
            self.message.get(..n).unwrap_or(&[]),
        );
        Ok(PANIC_INFO_HEADER_SIZE.saturating_add(n))
    }

    /// Decodes a payload (a record's `data[..length]`); the message borrows from `bytes`.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, FormatError> {
        need(bytes, 0, PANIC_INFO_HEADER_SIZE)?;
        let len = get_u32(bytes, PI_LENGTH);
        let n = usize::try_from(len).unwrap_or(usize::MAX);
        if n > PANIC_MESSAGE_MAX {
            return Err(FormatError::FieldTooLong {
                field: "panic message",
                length: n,
                max: PANIC_MESSAGE_MAX,
            });
        }
        let end = PANIC_INFO_HEADER_SIZE.saturating_add(n);
        let message = bytes
            .get(PANIC_INFO_HEADER_SIZE..end)
            .ok_or(FormatError::Truncated {
                offset: 0,
                needed: end,
                available: bytes.len(),
            })?;
        Ok(Self {
            cpu: get_u32(bytes, PI_CPU),
            message,
            truncated: get_u32(bytes, PI_FLAGS) & PANIC_FLAG_TRUNCATED != 0,
        })
    }
}

/// Payload of the commit record, written last at panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The container's stamp.
    pub stamp: u64,
    /// The container's sequence number.
    pub sequence: u64,
    /// Number of records before the commit (free ones included).
    pub records: u32,
    /// CRC-32 over the headers (as stored, [`RECORD_HEADER_SIZE`] bytes each) of those records,
    /// in region order.
    pub headers_crc: u32,
    /// Bytes of the region in use: the offset of the end of the commit record.
    pub used_bytes: u64,
}

impl Commit {
    /// Encodes the payload into `out`, its CRC included; returns its length, [`COMMIT_SIZE`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        out_need(out, COMMIT_SIZE)?;
        let mut b = [0u8; COMMIT_SIZE];
        put(&mut b, CM_STAMP, &self.stamp.to_le_bytes());
        put(&mut b, CM_SEQUENCE, &self.sequence.to_le_bytes());
        put(&mut b, CM_RECORDS, &self.records.to_le_bytes());
        put(&mut b, CM_HEADERS_CRC, &self.headers_crc.to_le_bytes());
        put(&mut b, CM_USED, &self.used_bytes.to_le_bytes());
        let crc = crc_with_zero_field(&b, CM_CRC);
        put(&mut b, CM_CRC, &crc.to_le_bytes());
        put(out, 0, &b);
        Ok(COMMIT_SIZE)
    }

    /// Decodes a payload and checks its own CRC; `offset` is the commit record's region offset.
    pub fn decode_at(bytes: &[u8], offset: usize) -> Result<Self, FormatError> {
        need(bytes, offset, COMMIT_SIZE)?;
        let raw = bytes.get(..COMMIT_SIZE).unwrap_or(&[]);
        let stored = get_u32(raw, CM_CRC);
        let computed = crc_with_zero_field(raw, CM_CRC);
        if stored != computed {
            return Err(FormatError::CommitCrc {
                offset,
                stored,
                computed,
            });
        }
        Ok(Self {
            stamp: get_u64(raw, CM_STAMP),
            sequence: get_u64(raw, CM_SEQUENCE),
            records: get_u32(raw, CM_RECORDS),
            headers_crc: get_u32(raw, CM_HEADERS_CRC),
            used_bytes: get_u64(raw, CM_USED),
        })
    }

    /// Decodes a payload and checks its own CRC.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        Self::decode_at(bytes, 0)
    }
}

/// A record read from a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Region offset of the record header.
    pub offset: usize,
    /// The decoded header.
    pub header: RecordHeader,
    /// The data written, `length` bytes.
    pub data: &'a [u8],
}

impl Record<'_> {
    /// Returns the region offset of the record's data area.
    pub fn data_offset(&self) -> usize {
        self.offset.saturating_add(RECORD_HEADER_SIZE)
    }
}

/// A validated container header over the bytes of a region.
#[derive(Clone, Copy, Debug)]
pub struct Region<'a> {
    bytes: &'a [u8],
    header: ContainerHeader,
}

/// Parses the container header at the start of `bytes` and checks it against the region.
///
/// `bytes` may be longer than the region (the rest is ignored) but not shorter. Records are read
/// with [`Region::records`].
pub fn parse_region(bytes: &[u8]) -> Result<Region<'_>, FormatError> {
    let header = ContainerHeader::decode(bytes)?;
    let size = usize::try_from(header.region_size).unwrap_or(usize::MAX);
    if size < CONTAINER_HEADER_SIZE {
        return Err(FormatError::Truncated {
            offset: 0,
            needed: CONTAINER_HEADER_SIZE,
            available: size,
        });
    }
    let region = bytes.get(..size).ok_or(FormatError::Truncated {
        offset: 0,
        needed: size,
        available: bytes.len(),
    })?;
    let first = usize::try_from(header.first_record).unwrap_or(usize::MAX);
    if first < CONTAINER_HEADER_SIZE || first & (RECORD_ALIGN - 1) != 0 || first > size {
        return Err(FormatError::BadFirstRecord {
            offset: 0,
            first_record: header.first_record,
        });
    }
    Ok(Region {
        bytes: region,
        header,
    })
}

impl<'a> Region<'a> {
    /// Returns the container header.
    pub fn header(&self) -> &ContainerHeader {
        &self.header
    }

    /// Returns the region's bytes (`region_size` of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Returns an iterator over the records, skipping free ones.
    pub fn records(&self) -> Records<'a> {
        Records {
            bytes: self.bytes,
            stamp: self.header.stamp,
            sequence: self.header.sequence,
            offset: usize::try_from(self.header.first_record).unwrap_or(usize::MAX),
            count: 0,
            crc: Crc32::new(),
            include_free: false,
            state: IterState::Walking,
        }
    }

    /// Returns an iterator over the records, free ones included.
    pub fn records_with_free(&self) -> Records<'a> {
        let mut r = self.records();
        r.include_free = true;
        r
    }

    /// Reads the record header at `offset` without checking its CRC, stamp or data.
    ///
    /// For salvaging the data of a record whose checks failed: the length is cut to the
    /// capacity and to the region. Returns `None` if there is no record magic at `offset` or the
    /// kind or status is unknown.
    pub fn salvage(&self, offset: usize) -> Option<Record<'a>> {
        let raw = self
            .bytes
            .get(offset..offset.checked_add(RECORD_HEADER_SIZE)?)?;
        if get_u32(raw, RH_MAGIC) != RECORD_MAGIC {
            return None;
        }
        let kind = RecordKind::try_from(get_u16(raw, RH_KIND)).ok()?;
        let status = RecordStatus::try_from(get_u16(raw, RH_STATUS)).ok()?;
        let capacity = get_u32(raw, RH_CAPACITY);
        let length = get_u32(raw, RH_LENGTH).min(capacity);
        let start = offset.checked_add(RECORD_HEADER_SIZE)?;
        let avail = self.bytes.len().saturating_sub(start);
        let n = usize::try_from(length).ok()?.min(avail);
        let data = self.bytes.get(start..start.checked_add(n)?)?;
        Some(Record {
            offset,
            header: RecordHeader {
                kind,
                status,
                cpu: get_u32(raw, RH_CPU),
                error: i32::from_le_bytes(get_array::<4>(raw, RH_ERROR)?),
                capacity,
                // CAST: n is at most length, a u32.
                length: n as u32,
                data_crc: get_u32(raw, RH_DATA_CRC),
                flags: get_u32(raw, RH_FLAGS),
                stamp: get_u64(raw, RH_STAMP),
                name: get_array::<NAME_SIZE>(raw, RH_NAME)?,
            },
            data,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IterState {
    Walking,
    Done,
}

/// Iterator over the records of a region, from [`Region::records`].
///
/// Yields each record, or an error for a record that fails its checks; after an error the walk
/// goes on with the next record (found by its capacity when the header is sound, else by looking
/// for the next valid header at the following 8-byte boundaries), so one corrupt record does not
/// hide the others. The commit record is yielded (after its checks) and ends the walk; a chain
/// that ends without one yields [`FormatError::MissingCommit`] last.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    stamp: u64,
    sequence: u64,
    offset: usize,
    count: u32,
    crc: Crc32,
    include_free: bool,
    state: IterState,
}

/// Whether a valid record header (magic and CRC) starts at `off`.
fn header_valid_at(bytes: &[u8], off: usize) -> bool {
    match off.checked_add(RECORD_HEADER_SIZE) {
        Some(end) => match bytes.get(off..end) {
            Some(raw) => {
                get_u32(raw, RH_MAGIC) == RECORD_MAGIC
                    && get_u32(raw, RH_CRC) == crc_with_zero_field(raw, RH_CRC)
            }
            None => false,
        },
        None => false,
    }
}

/// Finds the next 8-aligned offset at or after `from` holding a valid record header.
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    let mut off = align_up(from)?;
    let last = bytes.len().checked_sub(RECORD_HEADER_SIZE)?;
    while off <= last {
        if header_valid_at(bytes, off) {
            return Some(off);
        }
        off = off.checked_add(RECORD_ALIGN)?;
    }
    None
}

impl<'a> Records<'a> {
    /// Returns the region offset the walk has reached.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Moves to the next valid header after a broken one at `at`; ends the walk with a missing
    /// commit if there is none.
    fn skip_broken(&mut self, at: usize) {
        match resync(self.bytes, at.saturating_add(RECORD_ALIGN)) {
            Some(next) => self.offset = next,
            None => {
                // No record after this one: the walk ends at `at`, without a commit.
                self.offset = self.bytes.len();
            }
        }
    }

    fn account(&mut self, off: usize) {
        if let Some(raw) = off
            .checked_add(RECORD_HEADER_SIZE)
            .and_then(|end| self.bytes.get(off..end))
        {
            self.crc.update(raw);
        }
        self.count = self.count.saturating_add(1);
    }

    fn check_commit(&self, rec: &Record<'a>, end: usize) -> Result<(), FormatError> {
        let offset = rec.offset;
        let c = Commit::decode_at(rec.data, offset)?;
        if c.stamp != self.stamp {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "stamp",
                stored: c.stamp,
                expected: self.stamp,
            });
        }
        if c.sequence != self.sequence {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "sequence",
                stored: c.sequence,
                expected: self.sequence,
            });
        }
        if c.records != self.count {
            return Err(FormatError::CommitCount {
                offset,
                stored: c.records,
                counted: self.count,
            });
        }
        let computed = self.crc.finish();
        if c.headers_crc != computed {
            return Err(FormatError::CommitHeadersCrc {
                offset,
                stored: c.headers_crc,
                computed,
            });
        }
        let end = u64::try_from(end).unwrap_or(u64::MAX);
        if c.used_bytes != end {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "used bytes",
                stored: c.used_bytes,
                expected: end,
            });
        }
        Ok(())
    }

    /// Reads one step of the walk: `None` when done, `Some(None)` for a skipped free record.
    fn step(&mut self) -> Option<Option<Result<Record<'a>, FormatError>>> {
        if self.state == IterState::Done {
            return None;
        }
        let off = self.offset;
        let available = self.bytes.len().saturating_sub(off);
        if available < RECORD_HEADER_SIZE {
            self.state = IterState::Done;
            return Some(Some(Err(FormatError::MissingCommit { offset: off })));
        }
        let raw = self.bytes.get(off..).unwrap_or(&[]);
        let magic = get_u32(raw, RH_MAGIC);
        if magic == 0 {
            // End of the chain, unless a valid header follows a zeroed one.
            match resync(self.bytes, off.saturating_add(RECORD_ALIGN)) {
                Some(next) => {
                    self.offset = next;
                    return Some(Some(Err(FormatError::BadRecordMagic {
                        offset: off,
                        found: 0,
                    })));
                }
                None => {
                    self.state = IterState::Done;
                    return Some(Some(Err(FormatError::MissingCommit { offset: off })));
                }
            }
        }
        let header = match RecordHeader::decode_at(raw, off) {
            Ok(h) => h,
            Err(e) => {
                match e {
                    FormatError::LengthExceedsCapacity { .. }
                    | FormatError::UnknownKind { .. }
                    | FormatError::UnknownStatus { .. } => {
                        // The header itself is sound: its capacity finds the next record.
                        self.account(off);
                        let cap = usize::try_from(get_u32(raw, RH_CAPACITY)).unwrap_or(usize::MAX);
                        match off
                            .checked_add(RECORD_HEADER_SIZE)
                            .and_then(|v| v.checked_add(cap))
                        {
                            Some(next) if next <= self.bytes.len() => self.offset = next,
                            _ => self.skip_broken(off),
                        }
                    }
                    _ => self.skip_broken(off),
                }
                return Some(Some(Err(e)));
            }
        };
        let cap = usize::try_from(header.capacity).unwrap_or(usize::MAX);
        let end = match off
            .checked_add(RECORD_HEADER_SIZE)
            .and_then(|v| v.checked_add(cap))
        {
            Some(end) if end <= self.bytes.len() => end,
            _ => {
                self.skip_broken(off);
                return Some(Some(Err(FormatError::Truncated {
                    offset: off,
                    needed: RECORD_HEADER_SIZE.saturating_add(cap),
                    available,
                })));
            }
        };
        let is_commit = header.kind == RecordKind::Commit;
        self.offset = end;
        let data_start = off.saturating_add(RECORD_HEADER_SIZE);
        let length = usize::try_from(header.length).unwrap_or(usize::MAX);
        let data = self
            .bytes
            .get(data_start..data_start.saturating_add(length))
            .unwrap_or(&[]);
        let record = Record {
            offset: off,
            header,
            data,
        };
        if header.stamp != self.stamp {
            if is_commit {
                // A commit, even a broken one, ends the chain.
                self.state = IterState::Done;
            } else {
                self.account(off);
            }
            return Some(Some(Err(FormatError::StaleRecord {
                offset: off,
                stamp: header.stamp,
                expected: self.stamp,
            })));
        }
        let computed = crc32(data);
        if computed != header.data_crc {
            if is_commit {
                self.state = IterState::Done;
            } else {
                self.account(off);
            }
            return Some(Some(Err(FormatError::DataCrc {
                offset: off,
                stored: header.data_crc,
                computed,
            })));
        }
        if is_commit {
            self.state = IterState::Done;
            return Some(Some(self.check_commit(&record, end).map(|()| record)));
        }
        self.account(off);
        if header.kind == RecordKind::Free && !self.include_free {
            return Some(None);
        }
        Some(Some(Ok(record)))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Every step either ends the walk or moves `offset` forward by at least 8 bytes, so the
        // loop is bounded by the region size.
        loop {
            if let Some(item) = self.step()? {
                return Some(item);
            }
        }
    }
}

/// Counts of what [`validate`] found in a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records that passed every check, commit and free ones not included.
    pub records: u32,
    /// Of those, records whose status is [`RecordStatus::Ok`].
    pub ok: u32,
    /// Free records skipped.
    pub free: u32,
    /// Records (or places where one was expected) that failed a check, commit included.
    pub errors: u32,
    /// Whether a commit record was found and passed its checks.
    pub committed: bool,
    /// The first error met, if any.
    pub first_error: Option<FormatError>,
    /// Bytes of the region the walk covered (end of the last record read).
    pub used_bytes: usize,
}

impl Summary {
    /// Whether the region holds a complete dump with no error.
    pub fn is_clean(&self) -> bool {
        self.committed && self.errors == 0
    }
}

/// Validates a region: the container header (an error there is fatal and returned), then every
/// record, counted in the [`Summary`] with the first record error.
pub fn validate(bytes: &[u8]) -> Result<Summary, FormatError> {
    let region = parse_region(bytes)?;
    let mut s = Summary::default();
    let mut it = region.records_with_free();
    while let Some(item) = it.next() {
        match item {
            Ok(r) if r.header.kind == RecordKind::Commit => s.committed = true,
            Ok(r) if r.header.kind == RecordKind::Free => s.free = s.free.saturating_add(1),
            Ok(r) => {
                s.records = s.records.saturating_add(1);
                if r.header.status == RecordStatus::Ok {
                    s.ok = s.ok.saturating_add(1);
                }
            }
            Err(e) => {
                s.errors = s.errors.saturating_add(1);
                if s.first_error.is_none() {
                    s.first_error = Some(e);
                }
            }
        }
        s.used_bytes = it.offset().min(region.bytes().len());
    }
    Ok(s)
}

/// Where the chain of records of a region ends, from [`chain_end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainEnd {
    /// Offset right after the last record: where the commit record goes.
    pub offset: usize,
    /// Number of records in the chain.
    pub records: u32,
    /// CRC over their headers, in order.
    pub headers_crc: u32,
}

/// Walks the record chain of a region strictly (every header must have its magic and CRC) up to
/// the first zero magic or a commit record.
///
/// This is what the kernel calls at panic to build the commit. It reads headers only.
pub fn chain_end(bytes: &[u8]) -> Result<ChainEnd, FormatError> {
    let region = parse_region(bytes)?;
    let b = region.bytes();
    let mut off = usize::try_from(region.header().first_record).unwrap_or(usize::MAX);
    let mut crc = Crc32::new();
    let mut records: u32 = 0;
    // Each pass moves at least RECORD_HEADER_SIZE bytes forward, so the loop is bounded.
    while let Some(end) = off.checked_add(RECORD_HEADER_SIZE) {
        let Some(raw) = b.get(off..end) else {
            break;
        };
        let magic = get_u32(raw, RH_MAGIC);
        if magic == 0 {
            break;
        }
        let h = RecordHeader::decode_at(raw, off)?;
        if h.kind == RecordKind::Commit {
            break;
        }
        let next = h
            .record_size()
            .and_then(|s| off.checked_add(s))
            .filter(|&n| n <= b.len())
            .ok_or(FormatError::Truncated {
                offset: off,
                needed: h.record_size().unwrap_or(usize::MAX),
                available: b.len().saturating_sub(off),
            })?;
        crc.update(raw);
        records = records.saturating_add(1);
        off = next;
    }
    Ok(ChainEnd {
        offset: off,
        records,
        headers_crc: crc.finish(),
    })
}

/// Writes a container header at the start of `region` and zeroes the rest of the region.
///
/// Called at boot, once what a previous boot left has been read. Fails if `region` is shorter
/// than `header.region_size` or than a container header.
pub fn init_region(region: &mut [u8], header: &ContainerHeader) -> Result<(), FormatError> {
    let size = usize::try_from(header.region_size).unwrap_or(usize::MAX);
    let size = size.max(CONTAINER_HEADER_SIZE);
    let available = region.len();
    let r = region.get_mut(..size).ok_or(FormatError::BufferTooSmall {
        needed: size,
        available,
    })?;
    r.fill(0);
    put(r, 0, &header.encode());
    Ok(())
}

/// Appends a record at the end of the chain and returns its region offset.
///
/// The header is written as given (its data CRC computed over the first `length` bytes of the
/// data area, which is zeroed first). Room for [`COMMIT_RECORD_SIZE`] bytes is kept after it so
/// that the commit always fits.
pub fn append_record(region: &mut [u8], header: &RecordHeader) -> Result<usize, FormatError> {
    let container = ContainerHeader::decode(region)?;
    let end = chain_end(region)?;
    let size = usize::try_from(container.region_size)
        .unwrap_or(usize::MAX)
        .min(region.len());
    let record = header.record_size().ok_or(FormatError::BufferTooSmall {
        needed: usize::MAX,
        available: size,
    })?;
    let record_end = end.offset.checked_add(record);
    let needed = record_end.and_then(|e| e.checked_add(COMMIT_RECORD_SIZE));
    let (Some(record_end), Some(needed)) = (record_end, needed) else {
        return Err(FormatError::BufferTooSmall {
            needed: usize::MAX,
            available: size,
        });
    };
    if needed > size {
        return Err(FormatError::BufferTooSmall {
            needed,
            available: size,
        });
    }
    if header.capacity & (RECORD_ALIGN as u32 - 1) != 0 {
        return Err(FormatError::BadCapacity {
            offset: end.offset,
            capacity: header.capacity,
        });
    }
    let slot = region
        .get_mut(end.offset..record_end)
        .ok_or(FormatError::BufferTooSmall {
            needed: record_end,
            available: size,
        })?;
    slot.fill(0);
    seal_record(slot, header)?;
    Ok(end.offset)
}

/// Writes the commit record at the end of the chain and returns the region's used bytes.
///
/// Called last at panic, after every other record is sealed. Fails (writing nothing) if the
/// chain is broken or there is no room for [`COMMIT_RECORD_SIZE`] bytes.
pub fn write_commit(region: &mut [u8]) -> Result<usize, FormatError> {
    let header = ContainerHeader::decode(region)?;
    let end = chain_end(region)?;
    let used = end
        .offset
        .checked_add(COMMIT_RECORD_SIZE)
        .ok_or(FormatError::BufferTooSmall {
            needed: usize::MAX,
            available: region.len(),
        })?;
    let size = usize::try_from(header.region_size)
        .unwrap_or(usize::MAX)
        .min(region.len());
    if used > size {
        return Err(FormatError::BufferTooSmall {
            needed: used,
            available: size,
        });
    }
    let commit = Commit {
        stamp: header.stamp,
        sequence: header.sequence,
        records: end.records,
        headers_crc: end.headers_crc,
        used_bytes: u64::try_from(used).unwrap_or(u64::MAX),
    };
    let slot = region
        .get_mut(end.offset..used)
        .ok_or(FormatError::BufferTooSmall {
            needed: used,
            available: size,
        })?;
    let data = slot.get_mut(RECORD_HEADER_SIZE..).unwrap_or(&mut []);
    commit.encode(data)?;
    let mut h = RecordHeader::new(
        RecordKind::Commit,
        b"commit",
        COMMIT_SIZE as u32,
        header.stamp,
    );
    h.status = RecordStatus::Ok;
    // CAST: COMMIT_SIZE is a small constant.
    h.length = COMMIT_SIZE as u32;
    seal_record(slot, &h)?;
    Ok(used)
}

/// Writes the two vmcoreinfo lines (`CSPD_REGION_PADDR=0x…` and `CSPD_REGION_SIZE=0x…`, each
/// ending in a newline) into `out`; returns the length written.
pub fn format_vmcoreinfo(paddr: u64, size: u64, out: &mut [u8]) -> Result<usize, FormatError> {
    let mut pos = 0usize;
    for (key, value) in [(VMCOREINFO_PADDR_KEY, paddr), (VMCOREINFO_SIZE_KEY, size)] {
        let mut digits = [0u8; 16];
        let mut n = 0usize;
        let mut v = value;
        loop {
            // CAST: a nibble.
            let d = (v & 0xf) as u8;
            if let Some(slot) = digits.get_mut(n) {
                *slot = if d < 10 { b'0' + d } else { b'a' + d - 10 };
            }
            n += 1;
            v >>= 4;
            if v == 0 || n >= digits.len() {
                break;
            }
        }
        let line_len = key.len() + 3 + n + 1;
        let end = pos.saturating_add(line_len);
        out_need(out, end)?;
        put(out, pos, key.as_bytes());
        pos += key.len();
        put(out, pos, b"=0x");
        pos += 3;
        let mut i = n;
        while i > 0 {
            i -= 1;
            put(out, pos, &[digits.get(i).copied().unwrap_or(b'0')]);
            pos += 1;
        }
        put(out, pos, b"\n");
        pos += 1;
    }
    Ok(pos)
}

/// Finds `KEY=VALUE` in vmcoreinfo text and returns VALUE.
///
/// Lines are separated by `\n`; the text may end in NULs. Returns `None` if the key is absent.
pub fn vmcoreinfo_field<'a>(text: &'a [u8], key: &str) -> Option<&'a [u8]> {
    for line in text.split(|&b| b == b'\n') {
        let line = trim_nul(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(key.as_bytes()) else {
            continue;
        };
        if let Some(value) = rest.strip_prefix(b"=") {
            return Some(value);
        }
    }
    None
}

/// Finds `KEY=VALUE` in vmcoreinfo text and parses VALUE as hexadecimal, with or without `0x`.
///
/// This reads the `CSPD_REGION_*` keys and the kernel's own `KERNELOFFSET` (written as bare
/// hex). Returns `None` if the key is absent or its value does not parse.
pub fn vmcoreinfo_hex(text: &[u8], key: &str) -> Option<u64> {
    parse_hex(vmcoreinfo_field(text, key)?)
}

/// Parses a hexadecimal number, with or without a `0x` prefix, into a u64.
pub fn parse_hex(v: &[u8]) -> Option<u64> {
    let digits = v
        .strip_prefix(b"0x")
        .or_else(|| v.strip_prefix(b"0X"))
        .unwrap_or(v);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut acc: u64 = 0;
    for &b in digits {
        let d = char::from(b).to_digit(16)?;
        acc = acc.checked_mul(16)?.checked_add(u64::from(d))?;
    }
    Some(acc)
}

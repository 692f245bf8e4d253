// SPDX-License-Identifier: GPL-2.0

//! The container header and the record header: where every field of the region's frame is.
//!
//! See the [module documentation](super) for the layout in prose.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{
        get_array,
        get_u16,
        get_u32,
        get_u64,
        need,
        put, //
    },
    crc::{
        crc32,
        crc_with_zero_field, //
    },
    FormatError, //
};

/// Magic at offset 0 of the region.
pub const CONTAINER_MAGIC: [u8; 8] = *b"CSPDUMP\0";

/// Version of the layout this module writes.
///
/// Version 2 added [`RecordHeader::payload`]; version 3 added the phase times record
/// ([`RecordKind::Phases`]). Regions of versions [`OLDEST_READ_VERSION`] to this one are read
/// (a version 2 region has no phase times); version 1 regions are refused with
/// [`FormatError::UnsupportedVersion`].
pub const FORMAT_VERSION: u16 = 3;

/// Oldest version of the layout this module reads.
pub const OLDEST_READ_VERSION: u16 = 2;

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

/// [`RecordHeader::flags`]: written while the kernel ran, not by the panic path: a trace
/// source's decode metadata, recorded when it was enabled or reconfigured; on a commit record, a
/// commit made while the kernel ran (no panic-time step has run since).
pub const RECORD_FLAG_RUNTIME: u32 = 1 << 0;

/// [`RecordHeader::flags`]: written by a kdump capture kernel from what the hardware kept after
/// the crash (a trace sink the crashed kernel left capturing), and handed over as a vmcore device
/// dump ([`capture`](super::capture)).
pub const RECORD_FLAG_CAPTURE: u32 = 1 << 1;

/// Size in bytes of the boot id.
pub const BOOT_ID_SIZE: usize = 16;

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
pub(super) const RH_MAGIC: usize = 0;
pub(super) const RH_KIND: usize = 4;
pub(super) const RH_STATUS: usize = 6;
pub(super) const RH_CPU: usize = 8;
pub(super) const RH_ERROR: usize = 12;
pub(super) const RH_CAPACITY: usize = 16;
pub(super) const RH_LENGTH: usize = 20;
pub(super) const RH_DATA_CRC: usize = 24;
pub(super) const RH_FLAGS: usize = 28;
pub(super) const RH_STAMP: usize = 32;
pub(super) const RH_NAME: usize = 40;
pub(super) const RH_CRC: usize = 72;
pub(super) const RH_PAYLOAD: usize = 76;

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
    /// Layout version ([`FORMAT_VERSION`] for a region this code writes).
    pub version: u16,
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
    /// Reserved flags, zero.
    pub flags: u16,
}

impl ContainerHeader {
    /// Creates the header of a region of `region_size` bytes with the first record right after
    /// the header.
    pub fn new(region_size: u64, boot_id: [u8; BOOT_ID_SIZE], sequence: u64) -> Self {
        Self {
            version: FORMAT_VERSION,
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
        put(&mut b, CH_VERSION, &self.version.to_le_bytes());
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
    /// Does not check `region_size` or `first_record` against a region;
    /// [`parse_region`](super::parse_region) does.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let offset = 0;
        let magic = get_array::<8>(bytes, CH_MAGIC);
        if bytes.len() >= CONTAINER_MAGIC.len() && magic != Some(CONTAINER_MAGIC) {
            return Err(FormatError::BadMagic { offset });
        }
        need(bytes, offset, CONTAINER_HEADER_SIZE)?;
        let version = get_u16(bytes, CH_VERSION);
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
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
            version,
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
    /// The kernel's identity: release, build id, address layout ([`Identity`](super::Identity)).
    Identity = 1,
    /// The panic message and CPU ([`PanicInfo`](super::PanicInfo)).
    PanicInfo = 2,
    /// A trace sink's buffer (TMC ETB/ETF RAM, a TMC-ETR's buffer).
    Sink = 3,
    /// A trace source's state (`ETMv4` registers).
    Source = 4,
    /// A CPU debug sample (EDPCSR and friends).
    CpuDebug = 5,
    /// Any other client's data.
    Other = 6,
    /// A slot released by `dump_del`; readers skip it.
    Free = 7,
    /// The commit record written last at panic ([`Commit`](super::Commit)).
    Commit = 8,
    /// When each phase of the panic path started and ended ([`Phases`](super::Phases));
    /// format version 3.
    Phases = 9,
    /// The loadable modules and where they were loaded ([`Modules`](super::Modules)), kept
    /// current by the core while the kernel runs.
    Modules = 10,
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
            Self::Phases => "phases",
            Self::Modules => "modules",
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
            9 => Self::Phases,
            10 => Self::Modules,
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

/// What layout a record's data has, so that a reader does not take one client's bytes for
/// another's (a C driver's sink record is not a TMC's).
///
/// The values are those of `enum coresight_dump_payload` in `include/linux/coresight-panic-dump.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum PayloadType {
    /// Bytes only the client knows; also the value of the core's records (identity, panic info,
    /// commit, free), whose kind says their layout.
    Opaque = 0,
    /// A TMC (ETB/ETF) drain ([`super::tmc`]).
    Tmc = 1,
    /// An ETMv4's saved registers ([`super::etm4x`]).
    Etm4x = 2,
    /// A CPU's PC sample ([`super::cpu_debug`]).
    CpuDebug = 3,
    /// A TMC-ETR's registers and trace buffer ([`super::etr`]).
    Etr = 4,
}

impl PayloadType {
    /// Returns a short lower-case name, used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Opaque => "opaque",
            Self::Tmc => "tmc",
            Self::Etm4x => "etm4x",
            Self::CpuDebug => "cpu-debug",
            Self::Etr => "etr",
        }
    }
}

impl TryFrom<u16> for PayloadType {
    type Error = u16;

    fn try_from(v: u16) -> Result<Self, u16> {
        Ok(match v {
            0 => Self::Opaque,
            1 => Self::Tmc,
            2 => Self::Etm4x,
            3 => Self::CpuDebug,
            4 => Self::Etr,
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
    /// `RECORD_FLAG_*` bits: who wrote the record, when not the panic path (zero in version 1).
    pub flags: u32,
    /// Stamp of the boot that wrote the record (the container's).
    pub stamp: u64,
    /// NUL-padded device name.
    pub name: [u8; NAME_SIZE],
    /// What layout the data has.
    pub payload: PayloadType,
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
            payload: PayloadType::Opaque,
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
        put(&mut b, RH_PAYLOAD, &(self.payload as u16).to_le_bytes());
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
    /// Checks magic, CRC, capacity alignment, length against capacity, kind, status and payload
    /// type, in that order. The stamp and data CRC need the container and the data:
    /// [`Records`](super::Records) checks them.
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
        let payload = get_u16(raw, RH_PAYLOAD);
        let payload = PayloadType::try_from(payload)
            .map_err(|payload| FormatError::UnknownPayload { offset, payload })?;
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
            payload,
        })
    }
    /// Reads a record header without checking its CRC, capacity or length, for salvaging the
    /// data of a record whose checks failed. Returns `None` without the record magic, or with a
    /// kind, status or payload type this version does not know.
    pub fn decode_unchecked(bytes: &[u8]) -> Option<Self> {
        let raw = bytes.get(..RECORD_HEADER_SIZE)?;
        if get_u32(raw, RH_MAGIC) != RECORD_MAGIC {
            return None;
        }
        Some(Self {
            kind: RecordKind::try_from(get_u16(raw, RH_KIND)).ok()?,
            status: RecordStatus::try_from(get_u16(raw, RH_STATUS)).ok()?,
            cpu: get_u32(raw, RH_CPU),
            error: i32::from_le_bytes(get_array::<4>(raw, RH_ERROR)?),
            capacity: get_u32(raw, RH_CAPACITY),
            length: get_u32(raw, RH_LENGTH),
            data_crc: get_u32(raw, RH_DATA_CRC),
            flags: get_u32(raw, RH_FLAGS),
            stamp: get_u64(raw, RH_STAMP),
            name: get_array::<NAME_SIZE>(raw, RH_NAME)?,
            payload: PayloadType::try_from(get_u16(raw, RH_PAYLOAD)).ok()?,
        })
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Why a region, a record or a payload could not be read or written, and how to say it.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use core::fmt;

use super::{
    CONTAINER_HEADER_SIZE,
    FORMAT_VERSION,
    OLDEST_READ_VERSION,
    RECORD_ALIGN,
    RECORD_HEADER_SIZE, //
};

/// Why a region, a record or a payload could not be read or written.
///
/// Every variant that describes the region names the byte offset (from the start of the region)
/// of the header or record at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The container magic is not [`CONTAINER_MAGIC`](super::CONTAINER_MAGIC).
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
    /// A record payload type this version does not know.
    UnknownPayload {
        /// Offset of the record.
        offset: usize,
        /// Payload type found.
        payload: u16,
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
    /// A field holds a value its layout does not define.
    BadValue {
        /// Offset of the field (in its payload, for a payload's field).
        offset: usize,
        /// Name of the field.
        field: &'static str,
        /// Value found.
        value: u64,
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
            | Self::UnknownPayload { offset, .. }
            | Self::StaleRecord { offset, .. }
            | Self::DataCrc { offset, .. }
            | Self::MissingCommit { offset }
            | Self::CommitCrc { offset, .. }
            | Self::CommitHeadersCrc { offset, .. }
            | Self::CommitCount { offset, .. }
            | Self::CommitMismatch { offset, .. }
            | Self::BadValue { offset, .. } => Some(offset),
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
            Self::UnknownPayload { .. } => "unknown-payload",
            Self::StaleRecord { .. } => "stale-record",
            Self::DataCrc { .. } => "data-crc",
            Self::MissingCommit { .. } => "missing-commit",
            Self::CommitCrc { .. } => "commit-crc",
            Self::CommitHeadersCrc { .. } => "commit-headers-crc",
            Self::CommitCount { .. } => "commit-count",
            Self::CommitMismatch { .. } => "commit-mismatch",
            Self::BufferTooSmall { .. } => "buffer-too-small",
            Self::BadValue { .. } => "bad-value",
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
            Self::UnsupportedVersion { offset, version } if version < OLDEST_READ_VERSION => write!(
                f,
                "offset {offset:#x}: format version {version} is older than this reader's {OLDEST_READ_VERSION} to {FORMAT_VERSION} (its records do not say their payload type; read it with the csdump of that kernel's release)"
            ),
            Self::UnsupportedVersion { offset, version } => write!(
                f,
                "offset {offset:#x}: unsupported format version {version} (this reader knows {OLDEST_READ_VERSION} to {FORMAT_VERSION}; read it with a newer csdump)"
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
            Self::UnknownPayload { offset, payload } => {
                write!(f, "offset {offset:#x}: unknown record payload type {payload}")
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
            Self::BadValue {
                offset,
                field,
                value,
            } => write!(f, "{field} at offset {offset:#x} is {value}, which it cannot be"),
            Self::FieldTooLong { field, length, max } => {
                write!(f, "{field} is {length} bytes, at most {max} fit")
            }
        }
    }
}

impl core::error::Error for FormatError {}

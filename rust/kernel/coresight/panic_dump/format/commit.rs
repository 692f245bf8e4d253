// SPDX-License-Identifier: GPL-2.0

//! The commit record's payload, written last at panic: what a complete dump holds.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{get_u32, get_u64, need, out_need, put},
    crc::crc_with_zero_field,
    FormatError,
    RECORD_HEADER_SIZE, //
};

/// Size in bytes of a commit record payload.
pub const COMMIT_SIZE: usize = 40;

/// Bytes a commit record takes in the region, header included.
pub const COMMIT_RECORD_SIZE: usize = RECORD_HEADER_SIZE + COMMIT_SIZE;

// Offsets in the commit payload.
const CM_STAMP: usize = 0;
const CM_SEQUENCE: usize = 8;
const CM_RECORDS: usize = 16;
const CM_HEADERS_CRC: usize = 20;
const CM_USED: usize = 24;
const CM_CRC: usize = 32;

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

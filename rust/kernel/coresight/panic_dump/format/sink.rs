// SPDX-License-Identifier: GPL-2.0

//! What the records of the two TMC configurations share: the leading fields of their headers
//! (magic, version, header length, outcome, flags and the registers `RSZ`, `STS`, `CTL`, `MODE`,
//! `FFCR`, `FFSR`), their header errors, and the trace bytes that follow a header.
//!
//! A TMC record ([`super::tmc`]) and an ETR record ([`super::etr`]) go on differently after
//! these fields. Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use core::ops::RangeInclusive;

use super::bytes::{
    get_u16,
    get_u32,
    LeReader,
    LeWriter, //
};

/// Offset of the header length in both headers.
const HEADER_LEN_OFFSET: usize = 6;

/// Size of the leading fields.
const LEADING_LEN: usize = 36;

/// A header error of either record, before it becomes that record's error type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeaderError {
    /// The buffer is shorter than the header.
    TooShort,
    /// The magic is not the record's.
    BadMagic,
    /// The version is not one this code reads.
    BadVersion(u16),
    /// The header length is smaller than this version's header.
    BadHeaderLen(u16),
    /// The trace length runs past the end of the buffer.
    TraceLenOutOfBounds {
        /// The trace length in the header.
        trace_len: u32,
        /// Bytes available after the header.
        available: usize,
    },
}

/// Implements `From<HeaderError>` for a record's error type, whose first variants have the names
/// and fields of [`HeaderError`]'s.
macro_rules! from_header_error {
    ($error:ty) => {
        impl From<HeaderError> for $error {
            fn from(e: HeaderError) -> Self {
                match e {
                    HeaderError::TooShort => Self::TooShort,
                    HeaderError::BadMagic => Self::BadMagic,
                    HeaderError::BadVersion(v) => Self::BadVersion(v),
                    HeaderError::BadHeaderLen(l) => Self::BadHeaderLen(l),
                    HeaderError::TraceLenOutOfBounds {
                        trace_len,
                        available,
                    } => Self::TraceLenOutOfBounds {
                        trace_len,
                        available,
                    },
                }
            }
        }
    };
}
pub(super) use from_header_error;

/// Returns the [`Leading`] fields of a record header, which names them alike (`version`,
/// `outcome_code`, `flags`, `rsz`, `sts`, `ctl`, `mode`, `ffcr`, `ffsr`).
macro_rules! leading_of {
    ($header:expr) => {
        Leading {
            version: $header.version,
            outcome_code: $header.outcome_code,
            flags: $header.flags,
            regs: [
                $header.rsz,
                $header.sts,
                $header.ctl,
                $header.mode,
                $header.ffcr,
                $header.ffsr,
            ],
        }
    };
}
pub(super) use leading_of;

/// The leading fields of a TMC or ETR record header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Leading {
    /// Layout version.
    pub(super) version: u16,
    /// Outcome code.
    pub(super) outcome_code: u16,
    /// Flags.
    pub(super) flags: u16,
    /// `RSZ`, `STS`, `CTL`, `MODE`, `FFCR`, `FFSR`, in this order.
    pub(super) regs: [u32; 6],
}

impl Leading {
    /// Writes the leading fields with `magic` and a header length of `header_len`; the caller
    /// goes on with `w`.
    pub(super) fn encode(&self, w: &mut LeWriter<'_>, magic: u32, header_len: usize) {
        w.u32(magic);
        w.u16(self.version);
        // CAST: a header length is a small constant.
        w.u16(header_len as u16);
        w.u16(self.outcome_code);
        w.u16(self.flags);
        for v in self.regs {
            w.u32(v);
        }
    }

    /// Reads the leading fields of a header of at least `header_len` bytes, checking `magic`,
    /// that the version is in `versions` and that the stored header length is not smaller than
    /// `header_len`. Returns them and a reader at the first field after them.
    pub(super) fn decode(
        b: &[u8],
        magic: u32,
        versions: RangeInclusive<u16>,
        header_len: usize,
    ) -> Result<(Self, LeReader<'_>), HeaderError> {
        if b.len() < header_len.max(LEADING_LEN) {
            return Err(HeaderError::TooShort);
        }
        if get_u32(b, 0) != magic {
            return Err(HeaderError::BadMagic);
        }
        let version = get_u16(b, 4);
        if !versions.contains(&version) {
            return Err(HeaderError::BadVersion(version));
        }
        let stored_len = get_u16(b, HEADER_LEN_OFFSET);
        if usize::from(stored_len) < header_len {
            return Err(HeaderError::BadHeaderLen(stored_len));
        }
        let mut r = LeReader::new(b.get(8..).unwrap_or(&[]));
        let outcome_code = r.u16();
        let flags = r.u16();
        let mut regs = [0; 6];
        for v in &mut regs {
            *v = r.u32();
        }
        let leading = Self {
            version,
            outcome_code,
            flags,
            regs,
        };
        Ok((leading, r))
    }
}

/// Returns the `trace_len` bytes that follow the header of the record payload `b` (its stored
/// header length, which a later minor version may have made longer), bounded by `b`.
pub(super) fn trace_after(b: &[u8], trace_len: u32) -> Result<&[u8], HeaderError> {
    let header_len = usize::from(get_u16(b, HEADER_LEN_OFFSET));
    let rest = b.get(header_len..).ok_or(HeaderError::TooShort)?;
    let len = usize::try_from(trace_len).unwrap_or(usize::MAX);
    rest.get(..len).ok_or(HeaderError::TraceLenOutOfBounds {
        trace_len,
        available: rest.len(),
    })
}

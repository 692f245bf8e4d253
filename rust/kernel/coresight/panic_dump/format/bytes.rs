// SPDX-License-Identifier: GPL-2.0

//! Little-endian reads and writes of the fields of the region, bounds-checked: the one set of
//! such helpers of the format, which every layout and payload uses.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::FormatError;

pub(super) fn get_array<const N: usize>(bytes: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    let s = bytes.get(off..end)?;
    <[u8; N]>::try_from(s).ok()
}

pub(super) fn get_u16(bytes: &[u8], off: usize) -> u16 {
    get_array::<2>(bytes, off).map_or(0, u16::from_le_bytes)
}

pub(super) fn get_u32(bytes: &[u8], off: usize) -> u32 {
    get_array::<4>(bytes, off).map_or(0, u32::from_le_bytes)
}

pub(super) fn get_u64(bytes: &[u8], off: usize) -> u64 {
    get_array::<8>(bytes, off).map_or(0, u64::from_le_bytes)
}

pub(super) fn put(bytes: &mut [u8], off: usize, src: &[u8]) {
    if let Some(end) = off.checked_add(src.len()) {
        if let Some(dst) = bytes.get_mut(off..end) {
            dst.copy_from_slice(src);
        }
    }
}

pub(super) fn need(bytes: &[u8], offset: usize, needed: usize) -> Result<(), FormatError> {
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

pub(super) fn out_need(out: &[u8], needed: usize) -> Result<(), FormatError> {
    if out.len() < needed {
        Err(FormatError::BufferTooSmall {
            needed,
            available: out.len(),
        })
    } else {
        Ok(())
    }
}

pub(super) fn put_padded(
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
pub(super) fn trim_nul(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes.get(..n).unwrap_or(&[])
}

/// Writes consecutive little-endian fields into a buffer; what does not fit is dropped (callers
/// check the size first).
pub(super) struct LeWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> LeWriter<'a> {
    /// Starts writing at the start of `buf`.
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Writes `b` and moves past it.
    pub(super) fn bytes(&mut self, b: &[u8]) {
        put(self.buf, self.pos, b);
        self.pos = self.pos.saturating_add(b.len());
    }

    /// Writes a `u16`.
    pub(super) fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }

    /// Writes a `u32`.
    pub(super) fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    /// Writes a `u64`.
    pub(super) fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

/// Reads consecutive little-endian fields from a buffer; what is past its end reads as zero
/// (callers check the size first).
pub(super) struct LeReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> LeReader<'a> {
    /// Starts reading at the start of `buf`.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Reads `N` bytes.
    pub(super) fn take<const N: usize>(&mut self) -> [u8; N] {
        let v = get_array::<N>(self.buf, self.pos).unwrap_or([0; N]);
        self.pos = self.pos.saturating_add(N);
        v
    }

    /// Reads a `u8`.
    pub(super) fn u8(&mut self) -> u8 {
        let [b] = self.take::<1>();
        b
    }

    /// Reads a `u16`.
    pub(super) fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    /// Reads a `u32`.
    pub(super) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    /// Reads a `u64`.
    pub(super) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

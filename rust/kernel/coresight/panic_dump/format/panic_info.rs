// SPDX-License-Identifier: GPL-2.0

//! The panic info record's payload: who panicked, and the message.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{get_u32, need, out_need, put},
    FormatError, //
};

/// Size in bytes of the fixed part of a panic info payload, before the message.
pub const PANIC_INFO_HEADER_SIZE: usize = 16;

/// Maximum size in bytes of the panic message kept in a panic info payload.
pub const PANIC_MESSAGE_MAX: usize = 1024;

/// Maximum size in bytes of a panic info payload.
pub const PANIC_INFO_MAX_SIZE: usize = PANIC_INFO_HEADER_SIZE + PANIC_MESSAGE_MAX;

/// Bit in the panic info flags set when the message was cut to fit.
pub const PANIC_FLAG_TRUNCATED: u32 = 1;

// Offsets in the panic info payload.
const PI_CPU: usize = 0;
const PI_FLAGS: usize = 4;
const PI_LENGTH: usize = 8;

/// Payload of the panic info record: who panicked and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicInfo<'a> {
    /// The CPU that panicked, or [`CPU_NONE`](super::CPU_NONE).
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

// SPDX-License-Identifier: GPL-2.0

//! The CRC of the format: CRC-32/IEEE 802.3 (reflected polynomial `0xEDB88320`, initial value and
//! final XOR `0xFFFFFFFF`), that is `~crc32_le(~0, ..)` in the kernel's terms.
//!
//! The computation is the kernel's `crc32_le()` ([`kernel::crc`]); on the host, the host crate of
//! the same name computes it with `crc32fast`. Both are checked against the standard check value
//! of CRC-32 by the format's tests.
//!
//! Shared with the host (`crates/kernel-host`): uses `core` and `kernel::crc::crc32_le`.

use kernel::crc::crc32_le;

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
        Self { state: !0 }
    }

    /// Adds `bytes` to the CRC.
    pub fn update(&mut self, bytes: &[u8]) {
        self.state = crc32_le(self.state, bytes);
    }

    /// Adds `count` zero bytes to the CRC.
    pub fn update_zeros(&mut self, count: usize) {
        const ZEROS: [u8; 8] = [0; 8];
        let mut left = count;
        while left > 0 {
            let n = left.min(ZEROS.len());
            self.update(ZEROS.get(..n).unwrap_or(&[]));
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

/// CRC of `bytes` with the 4 bytes at `field` counted as zero (how every header CRC is taken).
pub(super) fn crc_with_zero_field(bytes: &[u8], field: usize) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes.get(..field).unwrap_or(&[]));
    c.update_zeros(4);
    c.update(bytes.get(field.saturating_add(4)..).unwrap_or(&[]));
    c.finish()
}

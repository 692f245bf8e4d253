// SPDX-License-Identifier: GPL-2.0

//! CRC-32.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h)

/// Updates the little-endian (reflected, polynomial `0xEDB88320`) CRC-32 `crc` with `data`:
/// the kernel's `crc32_le()`.
///
/// No inversion is applied on the way in or out: the IEEE 802.3 CRC of `data` is
/// `!crc32_le(!0, data)`.
///
/// # Examples
///
/// ```
/// use kernel::crc::crc32_le;
///
/// assert_eq!(!crc32_le(!0, b"123456789"), 0xcbf4_3926);
/// ```
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes.
    unsafe { bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}

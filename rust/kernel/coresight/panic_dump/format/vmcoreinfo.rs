// SPDX-License-Identifier: GPL-2.0

//! The vmcoreinfo keys that publish the region to kdump, the text the kernel appends, and how a
//! reader finds them again.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{
        out_need,
        put,
        trim_nul, //
    },
    FormatError, //
};

/// vmcoreinfo key whose value is the physical address of the region.
pub const VMCOREINFO_PADDR_KEY: &str = "CSPD_REGION_PADDR";

/// vmcoreinfo key whose value is the size of the region in bytes.
pub const VMCOREINFO_SIZE_KEY: &str = "CSPD_REGION_SIZE";

/// vmcoreinfo key the kernel itself publishes for the KASLR offset.
pub const VMCOREINFO_KERNELOFFSET_KEY: &str = "KERNELOFFSET";

/// Size in bytes of the longest text [`format_vmcoreinfo`] writes.
pub const VMCOREINFO_TEXT_MAX: usize =
    VMCOREINFO_PADDR_KEY.len() + VMCOREINFO_SIZE_KEY.len() + 2 * (3 + 16 + 1);

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

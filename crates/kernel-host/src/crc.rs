//! CRC-32, as the kernel's `crc32_le()` (`include/linux/crc32.h`) computes it.

/// Updates the little-endian (reflected, polynomial `0xEDB88320`) CRC-32 `crc` with `data`.
///
/// Like the kernel's `crc32_le()`, no inversion is applied on the way in or out: the IEEE 802.3
/// CRC of `data` is `!crc32_le(!0, data)`.
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // `crc32fast` keeps its state inverted (the value a finished CRC has).
    let mut h = crc32fast::Hasher::new_with_initial(!crc);
    h.update(data);
    !h.finalize()
}

#[cfg(test)]
mod tests {
    use super::crc32_le;

    #[test]
    fn ieee_check_value_and_chaining() {
        assert_eq!(!crc32_le(!0, b"123456789"), 0xCBF4_3926);
        assert_eq!(!crc32_le(!0, b""), 0);
        let part = crc32_le(!0, b"1234");
        assert_eq!(!crc32_le(part, b"56789"), 0xCBF4_3926);
        // The raw function is linear: a zero seed over zeros stays zero.
        assert_eq!(crc32_le(0, &[0; 16]), 0);
    }
}

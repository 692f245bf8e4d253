// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's random number generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// Fills `buf` with random bytes.
///
/// Early in boot the bytes may come from a generator that is not yet fully seeded; they are fine
/// for identifiers, not for keys.
pub fn fill_bytes(buf: &mut [u8]) {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    unsafe { bindings::get_random_bytes(buf.as_mut_ptr().cast(), buf.len()) };
}

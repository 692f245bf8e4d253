// SPDX-License-Identifier: GPL-2.0

//! What crash tools learn about the running kernel: vmcoreinfo and the kernel's identity.
//!
//! `vmcoreinfo` is the note that kdump's `/proc/vmcore` (and QEMU's `dump-guest-memory`, with the
//! `vmcoreinfo` device) carry: `KEY=VALUE` lines that tell a tool where things are.
//!
//! C headers: [`include/linux/vmcore_info.h`](srctree/include/linux/vmcore_info.h),
//! [`include/linux/crash_dump.h`](srctree/include/linux/crash_dump.h)

use crate::{
    error::to_result,
    prelude::*,
    str::CStrExt, //
};

/// Appends `line` (which should end in `\n`) to the vmcoreinfo note.
///
/// The note is rebuilt at once, so a hypervisor's memory dump (QEMU `dump-guest-memory` with the
/// `vmcoreinfo` device) sees the line too. Only code built into the kernel can do this, and it
/// must happen before user space loads a capture kernel with `kexec -p`: the note is copied then.
/// Returns [`EOPNOTSUPP`] when the kernel has no vmcoreinfo (`CONFIG_VMCORE_INFO`), [`ENODEV`]
/// before it is set up.
pub fn append(line: &CStr) -> Result {
    // SAFETY: `line` is a valid NUL-terminated string, formatted with "%s" by the helper.
    to_result(unsafe { bindings::cspd_vmcoreinfo_append(line.as_char_ptr()) })
}

/// Where the running kernel is and which one it is: what a tool needs to symbolise its addresses.
#[derive(Clone, Copy, Debug)]
pub struct KernelIdentity {
    /// `uname -r`.
    pub release: &'static CStr,
    /// GNU build id of vmlinux (empty when the kernel does not record it).
    pub build_id: &'static [u8],
    /// KASLR offset of the kernel image (0 without KASLR).
    pub kaslr_offset: u64,
    /// Virtual address of `_text`.
    pub text_start: u64,
    /// Start of the linear map (`PAGE_OFFSET`).
    pub page_offset: u64,
    /// Physical address of the start of memory (arm64 `memstart_addr`).
    pub memstart: u64,
    /// Kernel image virtual minus physical address (arm64 `kimage_voffset`).
    pub kimage_voffset: u64,
}

impl KernelIdentity {
    /// Collects the identity of the running kernel.
    pub fn current() -> Self {
        let mut len: usize = 0;
        // SAFETY: `len` is valid for writes; the returned array is static.
        let id = unsafe { bindings::cspd_build_id(&mut len) };
        let build_id = if id.is_null() {
            &[][..]
        } else {
            // SAFETY: The helper returned a static array of `len` bytes.
            unsafe { core::slice::from_raw_parts(id, len) }
        };
        Self {
            // SAFETY: The release string of the initial UTS namespace is static and
            // NUL-terminated.
            release: unsafe { CStr::from_char_ptr(bindings::cspd_uts_release()) },
            build_id,
            // SAFETY: The remaining helpers read boot-time constants.
            kaslr_offset: unsafe { bindings::cspd_kaslr_offset() } as u64,
            // SAFETY: As above.
            text_start: unsafe { bindings::cspd_text_start() } as u64,
            // SAFETY: As above.
            page_offset: unsafe { bindings::cspd_page_offset() } as u64,
            // SAFETY: As above.
            memstart: unsafe { bindings::cspd_memstart() },
            // SAFETY: As above.
            kimage_voffset: unsafe { bindings::cspd_kimage_voffset() },
        }
    }
}

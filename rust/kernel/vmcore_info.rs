// SPDX-License-Identifier: GPL-2.0

//! What crash tools learn about the running kernel: vmcoreinfo and the kernel's identity.
//!
//! `vmcoreinfo` is the note that kdump's `/proc/vmcore` (and QEMU's `dump-guest-memory`, with the
//! `vmcoreinfo` device) carry: `KEY=VALUE` lines that tell a tool where things are.
//!
//! C headers: [`include/linux/vmcore_info.h`](srctree/include/linux/vmcore_info.h),
//! [`include/linux/crash_dump.h`](srctree/include/linux/crash_dump.h)

use crate::{
    prelude::*,
    str::CStrExt, //
};

/// Appends `line` (which should end in `\n`) to vmcoreinfo (`vmcoreinfo_append_str()`).
///
/// A kdump capture kernel's `/proc/vmcore` has it: the kernel rebuilds the ELF note from the
/// data when it crashes into the capture kernel. Only code built into the kernel can do this.
/// Returns [`EOPNOTSUPP`] when the kernel has no vmcoreinfo (`CONFIG_VMCORE_INFO`), [`ENODEV`]
/// before it is set up.
pub fn append(line: &CStr) -> Result {
    #[cfg(CONFIG_VMCORE_INFO)]
    {
        // SAFETY: `vmcoreinfo_data` is set once at boot and never freed; reading it races with
        // nothing after that.
        if unsafe { bindings::vmcoreinfo_data }.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: The format takes one NUL-terminated string, `line`.
        unsafe { bindings::vmcoreinfo_append_str(c"%s".as_char_ptr(), line.as_char_ptr()) };
        Ok(())
    }
    #[cfg(not(CONFIG_VMCORE_INFO))]
    {
        let _ = line;
        Err(EOPNOTSUPP)
    }
}

/// Rebuilds the vmcoreinfo ELF note from the data, so that what [`append`] added is in the note
/// now, not only after a crash into a capture kernel.
///
/// Why: a hypervisor's memory dump of the guest (QEMU `dump-guest-memory` with the `vmcoreinfo`
/// device, which reads the note at the address the kernel gave it at boot) takes the note as it
/// is in memory when the guest is dumped. The kernel builds the note at boot and again only in
/// `crash_save_vmcoreinfo()` on the way into a capture kernel, so a line appended after boot is
/// missing from such a dump unless the note is rebuilt; `kernel/vmcore_info.c` has the function
/// that does it (`update_vmcoreinfo_note()`) but keeps it static. `vmcoreinfo_update_note()`
/// calls it: a kernel change this project proposes (two lines, `scripts/kernel-hooks.txt`).
/// Call it once after the lines are appended, before user space can load a capture kernel.
pub fn refresh_note() -> Result {
    #[cfg(CONFIG_VMCORE_INFO)]
    {
        // SAFETY: Both pointers are set once at boot and never freed.
        if unsafe { bindings::vmcoreinfo_data }.is_null()
            // SAFETY: As above.
            || unsafe { bindings::vmcoreinfo_note }.is_null()
        {
            return Err(ENODEV);
        }
        // SAFETY: The note and its data exist (checked above); the kernel rebuilds the note
        // from the data.
        unsafe { bindings::vmcoreinfo_update_note() };
        Ok(())
    }
    #[cfg(not(CONFIG_VMCORE_INFO))]
    {
        Err(EOPNOTSUPP)
    }
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
        #[cfg(any(CONFIG_VMCORE_INFO, CONFIG_STACKTRACE_BUILD_ID))]
        // SAFETY: `vmlinux_build_id` is written once at boot, before any module or initcall runs,
        // and never again.
        let build_id: &'static [u8] = unsafe { &*core::ptr::addr_of!(bindings::vmlinux_build_id) };
        #[cfg(not(any(CONFIG_VMCORE_INFO, CONFIG_STACKTRACE_BUILD_ID)))]
        let build_id: &'static [u8] = &[];
        #[cfg(CONFIG_ARM64)]
        // SAFETY: `memstart_addr` and `kimage_voffset` are set at boot and read-only after init.
        let (memstart, kimage_voffset) = unsafe {
            // CAST: `memstart_addr` is a physical address, kept signed by arm64.
            (bindings::memstart_addr as u64, bindings::kimage_voffset)
        };
        #[cfg(not(CONFIG_ARM64))]
        let (memstart, kimage_voffset) = (0, 0);
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
            memstart,
            kimage_voffset,
        }
    }
}

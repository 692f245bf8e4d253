// SPDX-License-Identifier: GPL-2.0

//! Kdump capture kernel support: what a driver in the capture kernel can do with the state the
//! crashed kernel left.
//!
//! A capture kernel reads the crashed kernel's memory through `/proc/vmcore`, whose ELF headers
//! list the memory that was System RAM. Memory outside them (a `no-map` reserved region, a
//! device's own RAM) can still reach the vmcore as a *device dump*: the driver copies it into a
//! buffer that `/proc/vmcore` presents as an ELF note (name `"LINUX"`, type `NT_VMCOREDD`, a
//! 44-byte dump name, then the data), which every capture tool copies with the other notes.
//!
//! C headers: [`include/linux/crash_dump.h`](srctree/include/linux/crash_dump.h),
//! [`include/uapi/linux/vmcore.h`](srctree/include/uapi/linux/vmcore.h)

use crate::prelude::*;

/// Whether this kernel is a kdump capture kernel (booted after a panic of another kernel).
pub fn is_kdump_kernel() -> bool {
    // SAFETY: Reads boot state, no requirement.
    unsafe { bindings::is_kdump_kernel() }
}

/// Longest device dump name, in bytes, without the terminating NUL.
pub const DEVICE_DUMP_NAME_MAX: usize = bindings::VMCOREDD_MAX_NAME_BYTES as usize - 1;

/// Adds a device dump of `size` bytes, named `name`, to `/proc/vmcore`; `fill` writes its data.
///
/// `fill` runs once, before this returns, with a zeroed buffer of exactly `size` bytes. The
/// kernel keeps its own copy, so nothing borrowed by `fill` needs to outlive the call. Must run
/// before user space opens `/proc/vmcore` (from a driver's probe or a built-in initcall).
///
/// Returns [`EINVAL`] for an empty or too long name (more than [`DEVICE_DUMP_NAME_MAX`] bytes)
/// or a zero size, [`EBUSY`] once `/proc/vmcore` is open, [`EOPNOTSUPP`] without
/// `CONFIG_PROC_VMCORE_DEVICE_DUMP`, and the error `fill` returns.
///
/// # Examples
///
/// ```
/// use kernel::crash_dump;
///
/// fn hand_over(saved: &[u8]) -> Result {
///     if !crash_dump::is_kdump_kernel() {
///         return Ok(());
///     }
///     crash_dump::add_device_dump(c"my_device", saved.len(), |buf| {
///         buf.copy_from_slice(saved);
///         Ok(())
///     })
/// }
/// ```
pub fn add_device_dump<F>(name: &CStr, size: usize, fill: F) -> Result
where
    F: FnOnce(&mut [u8]) -> Result,
{
    let name = name.to_bytes();
    if name.is_empty() || name.len() > DEVICE_DUMP_NAME_MAX || size == 0 {
        return Err(EINVAL);
    }
    let size = u32::try_from(size).map_err(|_| EINVAL)?;
    imp::add(name, size, fill)
}

#[cfg(CONFIG_PROC_VMCORE_DEVICE_DUMP)]
mod imp {
    use crate::{
        error::to_result,
        prelude::*, //
    };

    /// The C description with the closure that fills the buffer, so the C callback finds the
    /// closure from the description it is given.
    #[repr(C)]
    struct Request<F> {
        data: bindings::vmcoredd_data,
        fill: Option<F>,
        size: usize,
    }

    /// Called by `vmcore_add_device_dump()` with the description `add` gave it.
    ///
    /// # Safety
    ///
    /// `data` must be the `data` field of a live `Request<F>`, and `buf` valid for writes of
    /// `Request::size` bytes.
    unsafe extern "C" fn fill_callback<F>(
        data: *mut bindings::vmcoredd_data,
        buf: *mut c_void,
    ) -> c_int
    where
        F: FnOnce(&mut [u8]) -> Result,
    {
        // SAFETY: `data` is the first field of a `#[repr(C)]` `Request<F>` (see `add`), which
        // lives on `add`'s stack for the whole `vmcore_add_device_dump()` call that calls us.
        let request = unsafe { &mut *data.cast::<Request<F>>() };
        let Some(fill) = request.fill.take() else {
            return EINVAL.to_errno();
        };
        // SAFETY: `vmcore_add_device_dump()` passes a buffer with room for `data->size` bytes
        // after its note header, zeroed and owned by it alone until we return.
        let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), request.size) };
        match fill(buf) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    pub(super) fn add<F>(name: &[u8], size: u32, fill: F) -> Result
    where
        F: FnOnce(&mut [u8]) -> Result,
    {
        let mut request = Request {
            data: bindings::vmcoredd_data {
                dump_name: [0; bindings::VMCOREDD_MAX_NAME_BYTES as usize],
                size,
                vmcoredd_callback: Some(fill_callback::<F>),
            },
            fill: Some(fill),
            // CAST: `u32` fits in `usize` on every architecture with a capture kernel.
            size: size as usize,
        };
        // The caller checked that the name leaves room for the NUL.
        for (d, s) in request.data.dump_name.iter_mut().zip(name) {
            *d = *s as c_char;
        }
        // SAFETY: `request.data` is a valid description with a NUL-terminated name; its callback
        // is `fill_callback::<F>`, which expects it inside a `Request<F>`, as it is. The function
        // does not keep `data` after it returns.
        to_result(unsafe { bindings::vmcore_add_device_dump(&mut request.data) })
    }
}

#[cfg(not(CONFIG_PROC_VMCORE_DEVICE_DUMP))]
mod imp {
    use crate::prelude::*;

    pub(super) fn add<F>(_name: &[u8], _size: u32, _fill: F) -> Result
    where
        F: FnOnce(&mut [u8]) -> Result,
    {
        Err(EOPNOTSUPP)
    }
}

//! Raw bindings to the part of libkdumpfile 0.5 (`<libkdumpfile/kdumpfile.h>`) that csdump
//! uses: open a dump from a file descriptor, read physical memory, typed attributes (file
//! format, page size, the page bitmaps), VMCOREINFO and error strings.
//!
//! Written by hand from the header rather than generated: the surface is small, the types are
//! plain C (a pointer-sized union, `uint_fast64_t`, `int`-sized enums), and a hand-written list
//! keeps the build free of libclang. The layout tests below pin what the header declares. Use
//! the safe wrapper in the `kdumpfile` crate.

#![allow(non_camel_case_types)]

use libc::c_char;
use libc::c_int;
use libc::c_uint;
use libc::c_void;
use libc::size_t;

/// `kdump_num_t`: `uint_fast64_t`.
pub type kdump_num_t = u64;
/// `kdump_addr_t`: `addrxlat_addr_t`, `uint_fast64_t`.
pub type kdump_addr_t = u64;
/// `kdump_status` (a C enum).
pub type kdump_status = c_int;
/// `kdump_addrspace_t` (a C enum).
pub type kdump_addrspace_t = c_int;
/// `kdump_attr_type_t` (a C enum).
pub type kdump_attr_type_t = c_int;

/// Success.
pub const KDUMP_OK: kdump_status = 0;
/// OS error, see `errno`.
pub const KDUMP_ERR_SYSTEM: kdump_status = 1;
/// Unimplemented feature.
pub const KDUMP_ERR_NOTIMPL: kdump_status = 2;
/// Data is not stored in the dump file.
pub const KDUMP_ERR_NODATA: kdump_status = 3;
/// Corrupted file data.
pub const KDUMP_ERR_CORRUPT: kdump_status = 4;
/// Invalid value.
pub const KDUMP_ERR_INVALID: kdump_status = 5;
/// No such attribute key.
pub const KDUMP_ERR_NOKEY: kdump_status = 6;
/// Unexpected end of file.
pub const KDUMP_ERR_EOF: kdump_status = 7;
/// Too many pending requests.
pub const KDUMP_ERR_BUSY: kdump_status = 8;
/// Address translation error.
pub const KDUMP_ERR_ADDRXLAT: kdump_status = 9;

/// Kernel physical address space.
pub const KDUMP_KPHYSADDR: kdump_addrspace_t = 0;
/// Machine physical address space.
pub const KDUMP_MACHPHYSADDR: kdump_addrspace_t = 1;
/// Kernel virtual address space.
pub const KDUMP_KVADDR: kdump_addrspace_t = 2;

/// Attribute type: none (deletion).
pub const KDUMP_NIL: kdump_attr_type_t = 0;
/// Attribute type: directory.
pub const KDUMP_DIRECTORY: kdump_attr_type_t = 1;
/// Attribute type: number.
pub const KDUMP_NUMBER: kdump_attr_type_t = 2;
/// Attribute type: address.
pub const KDUMP_ADDRESS: kdump_attr_type_t = 3;
/// Attribute type: string.
pub const KDUMP_STRING: kdump_attr_type_t = 4;
/// Attribute type: bitmap.
pub const KDUMP_BITMAP: kdump_attr_type_t = 5;
/// Attribute type: binary blob.
pub const KDUMP_BLOB: kdump_attr_type_t = 6;

/// `file.mmap_policy` value: never mmap(2), always read(2).
pub const KDUMP_MMAP_NEVER: kdump_num_t = 0;

/// `KDUMP_ATTR_FILE_FORMAT`.
pub const KDUMP_ATTR_FILE_FORMAT: &[u8] = b"file.format\0";
/// `KDUMP_ATTR_FILE_PAGEMAP`: pages stored in the file.
pub const KDUMP_ATTR_FILE_PAGEMAP: &[u8] = b"file.pagemap\0";
/// `KDUMP_ATTR_MEMORY_PAGEMAP`: pages that are RAM.
pub const KDUMP_ATTR_MEMORY_PAGEMAP: &[u8] = b"memory.pagemap\0";
/// `KDUMP_ATTR_ARCH_NAME`.
pub const KDUMP_ATTR_ARCH_NAME: &[u8] = b"arch.name\0";
/// `KDUMP_ATTR_PAGE_SIZE`.
pub const KDUMP_ATTR_PAGE_SIZE: &[u8] = b"arch.page_size\0";
/// `KDUMP_ATTR_ZERO_EXCLUDED`: read pages the dump filtered out as zeros.
pub const KDUMP_ATTR_ZERO_EXCLUDED: &[u8] = b"file.zero_excluded\0";
/// The raw VMCOREINFO of a Linux dump (a blob), set from the note whatever the OS type.
pub const KDUMP_ATTR_LINUX_VMCOREINFO_RAW: &[u8] = b"linux.vmcoreinfo.raw\0";
/// `KDUMP_ATTR_FILE_MMAP_POLICY`.
pub const KDUMP_ATTR_FILE_MMAP_POLICY: &[u8] = b"file.mmap_policy\0";

/// `kdump_ctx_t`, opaque.
#[repr(C)]
pub struct kdump_ctx_t {
    _private: [u8; 0],
}

/// `kdump_bmp_t`, opaque.
#[repr(C)]
pub struct kdump_bmp_t {
    _private: [u8; 0],
}

/// `kdump_blob_t`, opaque.
#[repr(C)]
pub struct kdump_blob_t {
    _private: [u8; 0],
}

/// `kdump_attr_value_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union kdump_attr_value_t {
    /// Valid for `KDUMP_NUMBER`.
    pub number: kdump_num_t,
    /// Valid for `KDUMP_ADDRESS`.
    pub address: kdump_addr_t,
    /// Valid for `KDUMP_STRING`.
    pub string: *const c_char,
    /// Valid for `KDUMP_BITMAP`.
    pub bitmap: *mut kdump_bmp_t,
    /// Valid for `KDUMP_BLOB`.
    pub blob: *mut kdump_blob_t,
}

/// `kdump_attr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kdump_attr_t {
    /// Attribute type.
    pub type_: kdump_attr_type_t,
    /// Attribute value.
    pub val: kdump_attr_value_t,
}

extern "C" {
    /// Allocates a dump context; NULL on failure.
    pub fn kdump_new() -> *mut kdump_ctx_t;
    /// Frees a dump context and everything it holds.
    pub fn kdump_free(ctx: *mut kdump_ctx_t);
    /// The last error's text, or NULL.
    pub fn kdump_get_err(ctx: *mut kdump_ctx_t) -> *const c_char;
    /// Opens a set of dump files (one for a single-file dump).
    pub fn kdump_open_fdset(ctx: *mut kdump_ctx_t, nfds: c_uint, fds: *const c_int)
        -> kdump_status;
    /// Reads `*plength` bytes at `addr`; on error `*plength` is the number read.
    pub fn kdump_read(
        ctx: *mut kdump_ctx_t,
        as_: kdump_addrspace_t,
        addr: kdump_addr_t,
        buffer: *mut c_void,
        plength: *mut size_t,
    ) -> kdump_status;
    /// Sets an attribute.
    pub fn kdump_set_attr(
        ctx: *mut kdump_ctx_t,
        key: *const c_char,
        valp: *const kdump_attr_t,
    ) -> kdump_status;
    /// Gets an attribute, checking its type against `valp->type_`.
    pub fn kdump_get_typed_attr(
        ctx: *mut kdump_ctx_t,
        key: *const c_char,
        valp: *mut kdump_attr_t,
    ) -> kdump_status;
    /// Pins a blob's data in memory and returns it.
    pub fn kdump_blob_pin(blob: *mut kdump_blob_t) -> *mut c_void;
    /// Unpins a blob's data.
    pub fn kdump_blob_unpin(blob: *mut kdump_blob_t) -> libc::c_ulong;
    /// The size of a blob's data.
    pub fn kdump_blob_size(blob: *const kdump_blob_t) -> size_t;
    /// Takes a reference on a bitmap.
    pub fn kdump_bmp_incref(bmp: *mut kdump_bmp_t) -> libc::c_ulong;
    /// Drops a reference on a bitmap.
    pub fn kdump_bmp_decref(bmp: *mut kdump_bmp_t) -> libc::c_ulong;
    /// The bitmap's last error text.
    pub fn kdump_bmp_get_err(bmp: *const kdump_bmp_t) -> *const c_char;
    /// Finds the first set bit at or after `*idx`.
    pub fn kdump_bmp_find_set(bmp: *mut kdump_bmp_t, idx: *mut kdump_addr_t) -> kdump_status;
    /// Finds the first clear bit at or after `*idx`.
    pub fn kdump_bmp_find_clear(bmp: *mut kdump_bmp_t, idx: *mut kdump_addr_t) -> kdump_status;
    /// The description of a status code.
    pub fn kdump_strerror(status: kdump_status) -> *const c_char;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layout_matches_the_header() {
        // An int-sized enum, then a union of 64-bit values and pointers (8-byte aligned).
        assert_eq!(std::mem::size_of::<kdump_attr_value_t>(), 8);
        assert_eq!(std::mem::size_of::<kdump_attr_t>(), 16);
        assert_eq!(std::mem::offset_of!(kdump_attr_t, val), 8);
    }

    #[test]
    fn a_context_opens_and_frees() {
        // SAFETY: kdump_new has no preconditions; the context is freed once below.
        let ctx = unsafe { kdump_new() };
        assert!(!ctx.is_null());
        // SAFETY: kdump_strerror takes any status and returns a static string.
        let s = unsafe { std::ffi::CStr::from_ptr(kdump_strerror(KDUMP_ERR_NODATA)) };
        assert!(!s.to_bytes().is_empty());
        // SAFETY: ctx came from kdump_new and is not used afterwards.
        unsafe { kdump_free(ctx) };
    }
}

//! A narrow safe wrapper of libkdumpfile, the test oracle of csdump's Rust vmcore reader (csdump
//! itself does not link it: a C parser of untrusted files has no place in its process): open a
//! kernel dump file (ELF core, kdump-compressed
//! "KDUMP" with zlib, lzo, snappy or zstd pages, LKCD and the other formats the library knows),
//! read its physical memory page by page, ask which pages the file stores and which are RAM,
//! and read its VMCOREINFO text.
//!
//! libkdumpfile does not close the file it reads: [`Dump`] owns the [`File`] and closes it after
//! freeing the library's context. A context is not safe to use from two threads at once, so
//! [`Dump`] keeps it behind a mutex; every method takes `&self`.

use std::ffi::CStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::MutexGuard;

use kdumpfile_sys as sys;
use thiserror::Error;

/// Page size assumed for a dump that does not give one.
pub const DEFAULT_PAGE_SIZE: u64 = 4096;
/// Smallest page size taken from a dump.
const MIN_PAGE_SIZE: u64 = 512;

/// What kind of failure libkdumpfile reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The data is not stored in the dump (a page the dump filtered out, or no such memory).
    NoData,
    /// The file's data is corrupt (a page that does not decompress, a bad descriptor).
    Corrupt,
    /// The file ends before data it declares.
    Eof,
    /// An operating-system error.
    System,
    /// The file format or a feature it uses is not supported.
    NotImplemented,
    /// Anything else (an invalid value, a missing attribute).
    Other,
}

/// An error from libkdumpfile: its status and its message.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct Error {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// libkdumpfile's status code.
    pub status: i32,
    /// libkdumpfile's description (its error backtrace, outermost first).
    pub message: String,
}

impl Error {
    fn new(status: sys::kdump_status, message: String) -> Self {
        let kind = match status {
            sys::KDUMP_ERR_NODATA => ErrorKind::NoData,
            sys::KDUMP_ERR_CORRUPT => ErrorKind::Corrupt,
            sys::KDUMP_ERR_EOF => ErrorKind::Eof,
            sys::KDUMP_ERR_SYSTEM => ErrorKind::System,
            sys::KDUMP_ERR_NOTIMPL => ErrorKind::NotImplemented,
            _ => ErrorKind::Other,
        };
        Self {
            kind,
            status,
            message,
        }
    }
}

/// Owner of a `kdump_ctx_t`.
struct Ctx(NonNull<sys::kdump_ctx_t>, bool);

// SAFETY: a libkdumpfile context may be used from any thread, one thread at a time; `Dump`
// serialises every use through its mutex.
unsafe impl Send for Ctx {}

impl Ctx {
    fn ptr(&self) -> *mut sys::kdump_ctx_t {
        self.0.as_ptr()
    }

    /// The error text of the last failed call, with `status` for when there is none.
    fn error(&self, status: sys::kdump_status) -> Error {
        // SAFETY: the context is valid; the returned string lives until the next library call
        // on it, and is copied at once.
        let msg = unsafe { sys::kdump_get_err(self.ptr()) };
        let text = if msg.is_null() {
            // SAFETY: kdump_strerror returns a static string for any status.
            unsafe { CStr::from_ptr(sys::kdump_strerror(status)) }
                .to_string_lossy()
                .into_owned()
        } else {
            // SAFETY: a non-NULL error string is NUL-terminated.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        Error::new(status, text)
    }

    fn check(&self, status: sys::kdump_status) -> Result<(), Error> {
        if status == sys::KDUMP_OK {
            Ok(())
        } else {
            Err(self.error(status))
        }
    }

    fn get_attr(
        &self,
        key: &[u8],
        kind: sys::kdump_attr_type_t,
    ) -> Result<sys::kdump_attr_t, Error> {
        let key = CStr::from_bytes_with_nul(key)
            .map_err(|_| Error::new(sys::KDUMP_ERR_INVALID, "bad attribute key".into()))?;
        let mut attr = sys::kdump_attr_t {
            type_: kind,
            val: sys::kdump_attr_value_t { number: 0 },
        };
        // SAFETY: the context is valid, `key` is NUL-terminated and `attr` is writable.
        let st = unsafe { sys::kdump_get_typed_attr(self.ptr(), key.as_ptr(), &mut attr) };
        self.check(st)?;
        Ok(attr)
    }

    fn set_number(&self, key: &[u8], value: u64) -> Result<(), Error> {
        let key = CStr::from_bytes_with_nul(key)
            .map_err(|_| Error::new(sys::KDUMP_ERR_INVALID, "bad attribute key".into()))?;
        let attr = sys::kdump_attr_t {
            type_: sys::KDUMP_NUMBER,
            val: sys::kdump_attr_value_t { number: value },
        };
        // SAFETY: the context is valid, `key` is NUL-terminated, `attr` is a valid number.
        let st = unsafe { sys::kdump_set_attr(self.ptr(), key.as_ptr(), &attr) };
        self.check(st)
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // libkdumpfile 0.5.1 reads and writes freed memory when it frees the context of a
        // kdump-compressed ("diskdump") file, opened or not (valgrind shows it on a bare open
        // and free): such a context is left to the end of the process rather than risk the
        // heap.
        if self.1 {
            return;
        }
        // SAFETY: the context came from kdump_new and is freed once, here.
        unsafe { sys::kdump_free(self.ptr()) };
    }
}

/// A reference to one of a dump's page bitmaps (bits indexed by page frame number).
struct Bitmap(NonNull<sys::kdump_bmp_t>);

// SAFETY: libkdumpfile's bitmaps lock the shared dump data they read; they are only used under
// `Dump`'s mutex anyway.
unsafe impl Send for Bitmap {}

impl Bitmap {
    /// The first set bit at or after `idx`, if any.
    fn find_set(&self, idx: u64) -> Option<u64> {
        let mut i = idx;
        // SAFETY: the bitmap is referenced by `self`; `i` is writable.
        let st = unsafe { sys::kdump_bmp_find_set(self.0.as_ptr(), &mut i) };
        (st == sys::KDUMP_OK).then_some(i)
    }

    /// The first clear bit at or after `idx`.
    fn find_clear(&self, idx: u64) -> u64 {
        let mut i = idx;
        // SAFETY: the bitmap is referenced by `self`; `i` is writable.
        let st = unsafe { sys::kdump_bmp_find_clear(self.0.as_ptr(), &mut i) };
        if st == sys::KDUMP_OK {
            i
        } else {
            u64::MAX
        }
    }

    fn is_set(&self, idx: u64) -> bool {
        self.find_set(idx) == Some(idx)
    }
}

impl Drop for Bitmap {
    fn drop(&mut self) {
        // SAFETY: `self` holds one reference, taken in `Dump::bitmap`.
        unsafe { sys::kdump_bmp_decref(self.0.as_ptr()) };
    }
}

struct Inner {
    // Field order is drop order: the bitmaps' references go before the context.
    file_map: Option<Bitmap>,
    mem_map: Option<Bitmap>,
    ctx: Ctx,
}

/// An open dump file.
pub struct Dump {
    // Field order: the context (and its bitmaps) is freed before the file is closed.
    inner: Mutex<Inner>,
    _file: File,
    format: String,
    arch: Option<String>,
    page_size: u64,
    vmcoreinfo: Option<Vec<u8>>,
}

impl std::fmt::Debug for Dump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dump")
            .field("format", &self.format)
            .field("arch", &self.arch)
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

impl Dump {
    /// Opens the dump in `file` and reads what it says about itself.
    ///
    /// Reads use read(2), never mmap(2): a mapping of a damaged or truncated file could raise
    /// SIGBUS, and reads keep the resident memory flat whatever the file's size. Pages the dump
    /// filtered out are errors of kind [`ErrorKind::NoData`], never silently zero: the caller
    /// decides, with [`Dump::page_in_memory`], whether that is a filtered page or no memory.
    pub fn open(file: File) -> Result<Self, Error> {
        // SAFETY: kdump_new has no preconditions.
        let ctx = NonNull::new(unsafe { sys::kdump_new() })
            .map(|p| Ctx(p, false))
            .ok_or_else(|| Error::new(sys::KDUMP_ERR_SYSTEM, "cannot allocate a context".into()))?;
        ctx.set_number(sys::KDUMP_ATTR_FILE_MMAP_POLICY, sys::KDUMP_MMAP_NEVER)?;
        let mut ctx = ctx;
        // See `Ctx::drop`: decided from the file's signature, before the open, which may fail.
        let mut sig = [0u8; 8];
        ctx.1 = std::os::unix::fs::FileExt::read_exact_at(&file, &mut sig, 0).is_ok()
            && (&sig == b"KDUMP   " || &sig == b"DISKDUMP");
        let fd = file.as_raw_fd();
        // SAFETY: the context is valid; `fd` is open and outlives the context (`Dump` closes
        // the file after freeing it).
        let st = unsafe { sys::kdump_open_fdset(ctx.ptr(), 1, &fd) };
        ctx.check(st)?;
        ctx.set_number(sys::KDUMP_ATTR_ZERO_EXCLUDED, 0)?;
        let string = |key: &[u8]| -> Option<String> {
            let a = ctx.get_attr(key, sys::KDUMP_STRING).ok()?;
            // SAFETY: a string attribute's value is a NUL-terminated string owned by the
            // context, valid until the attribute changes; it is copied at once.
            let s = unsafe { a.val.string };
            (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
        };
        let format = string(sys::KDUMP_ATTR_FILE_FORMAT).unwrap_or_else(|| "unknown".into());
        let arch = string(sys::KDUMP_ATTR_ARCH_NAME);

        let get_page_size = || {
            ctx.get_attr(sys::KDUMP_ATTR_PAGE_SIZE, sys::KDUMP_NUMBER)
                // SAFETY: the attribute was checked to be a number.
                .map(|a| unsafe { a.val.number })
                .ok()
        };
        // A dump that does not say its page size (an ELF core without VMCOREINFO, as QEMU
        // writes) would be paged by bytes: take the architectures' common 4 KiB.
        let page_size = match get_page_size() {
            Some(p) if p >= MIN_PAGE_SIZE => p,
            _ => {
                ctx.set_number(sys::KDUMP_ATTR_PAGE_SIZE, DEFAULT_PAGE_SIZE)?;
                get_page_size().unwrap_or(DEFAULT_PAGE_SIZE)
            }
        };
        let vmcoreinfo = ctx
            .get_attr(sys::KDUMP_ATTR_LINUX_VMCOREINFO_RAW, sys::KDUMP_BLOB)
            .ok()
            .and_then(|a| {
                // SAFETY: the attribute was checked to be a blob.
                let blob = unsafe { a.val.blob };
                if blob.is_null() {
                    return None;
                }
                // SAFETY: the blob is valid while the attribute holds it; pinned, copied and
                // unpinned before any other library call.
                unsafe {
                    let data = sys::kdump_blob_pin(blob);
                    let size = sys::kdump_blob_size(blob);
                    let v = (!data.is_null())
                        .then(|| std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec());
                    sys::kdump_blob_unpin(blob);
                    v
                }
            });
        let file_map = Self::bitmap(&ctx, sys::KDUMP_ATTR_FILE_PAGEMAP);
        let mem_map = Self::bitmap(&ctx, sys::KDUMP_ATTR_MEMORY_PAGEMAP);
        Ok(Self {
            inner: Mutex::new(Inner {
                ctx,
                file_map,
                mem_map,
            }),
            _file: file,
            format,
            arch,
            page_size: page_size.max(1),
            vmcoreinfo,
        })
    }

    fn bitmap(ctx: &Ctx, key: &[u8]) -> Option<Bitmap> {
        let a = ctx.get_attr(key, sys::KDUMP_BITMAP).ok()?;
        // SAFETY: the attribute was checked to be a bitmap.
        let p = NonNull::new(unsafe { a.val.bitmap })?;
        // SAFETY: the bitmap is valid while the attribute holds it; the reference taken here
        // keeps it valid until `Bitmap` drops it.
        unsafe { sys::kdump_bmp_incref(p.as_ptr()) };
        Some(Bitmap(p))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while the lock was held cannot leave the context half-updated in a way
        // Rust observes: take it back.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file format, as libkdumpfile names it ("ELF dump, 64-bit", "diskdump", ...).
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The dump's architecture ("aarch64", ...), when known.
    pub fn arch(&self) -> Option<&str> {
        self.arch.as_deref()
    }

    /// The dump's page size in bytes.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The raw VMCOREINFO text, when the dump has one.
    pub fn vmcoreinfo(&self) -> Option<&[u8]> {
        self.vmcoreinfo.as_deref()
    }

    /// Reads `buf.len()` bytes of kernel physical memory at `paddr`.
    ///
    /// On error returns how many bytes were read before it, and the error.
    pub fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), (usize, Error)> {
        let inner = self.lock();
        let mut len: libc::size_t = buf.len();
        // SAFETY: the context is valid and locked; `buf` is writable for `len` bytes.
        let st = unsafe {
            sys::kdump_read(
                inner.ctx.ptr(),
                sys::KDUMP_MACHPHYSADDR,
                paddr,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if st == sys::KDUMP_OK {
            Ok(())
        } else {
            Err((len.min(buf.len()), inner.ctx.error(st)))
        }
    }

    /// Whether the file stores page frame `pfn`.
    pub fn page_in_file(&self, pfn: u64) -> bool {
        self.lock().file_map.as_ref().is_some_and(|m| m.is_set(pfn))
    }

    /// Whether page frame `pfn` is memory the dump describes (RAM), stored or filtered out.
    pub fn page_in_memory(&self, pfn: u64) -> bool {
        self.lock().mem_map.as_ref().is_some_and(|m| m.is_set(pfn))
    }

    /// The next run of pages the file stores, at or after `pfn`: `(first, end)` page frame
    /// numbers, `end` exclusive.
    pub fn next_file_pages(&self, pfn: u64) -> Option<(u64, u64)> {
        let inner = self.lock();
        let m = inner.file_map.as_ref()?;
        let first = m.find_set(pfn)?;
        Some((first, m.find_clear(first).max(first.saturating_add(1))))
    }

    /// The run of RAM pages that holds `pfn`, from `pfn` on: its end (exclusive), or `pfn`
    /// when `pfn` is not RAM.
    pub fn memory_run_end(&self, pfn: u64) -> u64 {
        let inner = self.lock();
        match inner.mem_map.as_ref() {
            Some(m) if m.is_set(pfn) => m.find_clear(pfn),
            _ => pfn,
        }
    }
}

/// The libkdumpfile version these bindings were built against.
pub const API_VERSION: &str = "0.5";

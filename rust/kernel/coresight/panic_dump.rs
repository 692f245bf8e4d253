// SPDX-License-Identifier: GPL-2.0

//! CoreSight panic dump registrations.
//!
//! A driver hands the panic-dump core a callback that copies its device's state into the reserved
//! dump region when the kernel panics. The slot is reserved when the [`Registration`] is created,
//! so nothing is allocated at panic time; dropping the registration releases it.
//!
//! The layout of the dump region, its records and their payloads is [`format`], compiled here
//! so that the core, every driver and the host tool reach the one definition.
//!
//! C header: [`include/linux/coresight-panic-dump.h`](srctree/include/linux/coresight-panic-dump.h)

use core::marker::PhantomPinned;

use crate::{
    fmt,
    prelude::*,
    str::CStrExt,
    types::Opaque, //
};

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
pub mod format;

/// The format's types print in kernel logs the way they print on the host (their
/// [`core::fmt::Display`]).
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
macro_rules! kernel_display {
    ($($ty:ty),* $(,)?) => {
        $(
            impl crate::fmt::Display for $ty {
                fn fmt(&self, f: &mut crate::fmt::Formatter<'_>) -> crate::fmt::Result {
                    core::fmt::Display::fmt(self, f)
                }
            }
        )*
    };
}

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
kernel_display!(
    format::FormatError,
    format::tmc::TmcOutcome,
    format::tmc::TmcRecordError,
    format::etr::AttachmentError,
    format::etr::EtrOutcome,
    format::etr::EtrRecordError,
    format::cpu_debug::ArchError,
    format::cpu_debug::Edcidsr,
    format::cpu_debug::Edprsr,
    format::cpu_debug::EdprsrBits,
    format::cpu_debug::Edvidsr,
    format::cpu_debug::RecordError,
    format::cpu_debug::SampleReport<'_>,
);

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
impl From<format::FormatError> for Error {
    fn from(e: format::FormatError) -> Self {
        match e {
            format::FormatError::BufferTooSmall { .. } => ENOSPC,
            format::FormatError::FieldTooLong { .. } => E2BIG,
            _ => EINVAL,
        }
    }
}

/// What layout a registration's data has (`enum coresight_dump_payload`), recorded with it.
///
/// The values are the format's `PayloadType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum DumpPayload {
    /// Bytes only the client knows.
    Opaque = bindings::coresight_dump_payload_CORESIGHT_DUMP_PAYLOAD_OPAQUE,
    /// A TMC (ETB/ETF) drain.
    Tmc = bindings::coresight_dump_payload_CORESIGHT_DUMP_PAYLOAD_TMC,
    /// An ETMv4's saved registers.
    Etm4x = bindings::coresight_dump_payload_CORESIGHT_DUMP_PAYLOAD_ETM4X,
    /// A CPU's PC sample.
    CpuDebug = bindings::coresight_dump_payload_CORESIGHT_DUMP_PAYLOAD_CPU_DEBUG,
    /// A TMC-ETR's registers and trace buffer.
    Etr = bindings::coresight_dump_payload_CORESIGHT_DUMP_PAYLOAD_ETR,
}

impl DumpPayload {
    /// Converts the C value; `None` for values the header does not define.
    pub fn from_raw(raw: u32) -> Option<Self> {
        [
            Self::Opaque,
            Self::Tmc,
            Self::Etm4x,
            Self::CpuDebug,
            Self::Etr,
        ]
        .into_iter()
        .find(|t| *t as u32 == raw)
    }
}

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
impl From<DumpPayload> for format::PayloadType {
    fn from(p: DumpPayload) -> Self {
        match p {
            DumpPayload::Opaque => Self::Opaque,
            DumpPayload::Tmc => Self::Tmc,
            DumpPayload::Etm4x => Self::Etm4x,
            DumpPayload::CpuDebug => Self::CpuDebug,
            DumpPayload::Etr => Self::Etr,
        }
    }
}

// The C values are the format's.
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
const _: () = {
    assert!(DumpPayload::Opaque as u32 == format::PayloadType::Opaque as u32);
    assert!(DumpPayload::Tmc as u32 == format::PayloadType::Tmc as u32);
    assert!(DumpPayload::Etm4x as u32 == format::PayloadType::Etm4x as u32);
    assert!(DumpPayload::CpuDebug as u32 == format::PayloadType::CpuDebug as u32);
    assert!(DumpPayload::Etr as u32 == format::PayloadType::Etr as u32);
};

/// What a registration dumps; decides the phase in which its callback runs at panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum DumpType {
    /// Phase 2: sample CPUs (CPU debug `EDPCSR`), once every trace source has stopped.
    CpuDebug = bindings::coresight_dump_type_CORESIGHT_DUMP_CPU_DEBUG,
    /// Phase 1: stop trace sources and save their registers.
    Source = bindings::coresight_dump_type_CORESIGHT_DUMP_SOURCE,
    /// Phase 3: stop and drain trace sinks.
    Sink = bindings::coresight_dump_type_CORESIGHT_DUMP_SINK,
    /// Phase 4: anything else.
    Other = bindings::coresight_dump_type_CORESIGHT_DUMP_OTHER,
}

impl DumpType {
    /// Converts the C value; `None` for values the header does not define.
    pub fn from_raw(raw: u32) -> Option<Self> {
        [Self::CpuDebug, Self::Source, Self::Sink, Self::Other]
            .into_iter()
            .find(|t| *t as u32 == raw)
    }
}

/// The C description of a registration, as `coresight_dump_add()` receives it.
pub type RawDesc = bindings::coresight_dump_desc;

/// The C callback type.
pub type RawDumpFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, *mut usize) -> c_int;

/// Bytes of a registration's name the dump keeps (the record's name field, NUL included).
pub const DUMP_NAME_SIZE: usize = 32;

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
const _: () = assert!(DUMP_NAME_SIZE == format::NAME_SIZE);

/// A registration's name as the core keeps it: a copy of its first `DUMP_NAME_SIZE - 1` bytes.
#[derive(Clone, Copy)]
pub struct DumpName {
    bytes: [u8; DUMP_NAME_SIZE],
    len: usize,
}

impl DumpName {
    /// Copies `name`, cut to `DUMP_NAME_SIZE - 1` bytes.
    pub fn new(name: &CStr) -> Self {
        let src = name.to_bytes();
        let len = src.len().min(DUMP_NAME_SIZE - 1);
        let mut bytes = [0u8; DUMP_NAME_SIZE];
        bytes[..len].copy_from_slice(&src[..len]);
        Self { bytes, len }
    }

    /// The name's bytes, without a NUL.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Display for DumpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core::str::from_utf8(self.as_bytes()) {
            Ok(s) => f.write_str(s),
            Err(_) => f.write_str("(not UTF-8)"),
        }
    }
}

/// A registration as the core sees it, read and copied from a [`RawDesc`].
#[derive(Clone, Copy)]
pub struct DescView {
    /// Device name, copied from the description.
    pub name: DumpName,
    /// What the registration dumps.
    pub kind: DumpType,
    /// CPU number, or `None` when not tied to a CPU.
    pub cpu: Option<u32>,
    /// Slot size requested.
    pub max_bytes: usize,
    /// What layout the data has.
    pub payload: DumpPayload,
    /// The callback.
    pub dump: RawDumpFn,
    /// The callback's argument.
    pub data: *mut c_void,
    /// What records the data's decode metadata while the kernel runs, if anything.
    pub metadata: Option<RawDumpFn>,
}

impl DescView {
    /// Reads, checks and copies a C description.
    ///
    /// # Safety
    ///
    /// `desc` must be null or point to a valid [`RawDesc`] whose `name` is null or a
    /// NUL-terminated string, both valid for the duration of the call.
    pub unsafe fn from_raw(desc: *const RawDesc) -> Result<Self> {
        if desc.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The caller guarantees `desc` is valid for reads.
        let d = unsafe { &*desc };
        let dump = d.dump.ok_or(EINVAL)?;
        if d.name.is_null() || d.max_bytes == 0 {
            return Err(EINVAL);
        }
        let kind = DumpType::from_raw(d.type_).ok_or(EINVAL)?;
        let payload = DumpPayload::from_raw(d.payload).ok_or(EINVAL)?;
        let cpu = match d.cpu {
            c if c < 0 => None,
            // CAST: non-negative `c_int` fits in `u32`.
            c => Some(c as u32),
        };
        Ok(Self {
            // SAFETY: The caller guarantees a NUL-terminated name, valid for this call; it is
            // copied here.
            name: DumpName::new(unsafe { CStr::from_char_ptr(d.name) }),
            kind,
            cpu,
            max_bytes: d.max_bytes,
            payload,
            dump,
            data: d.data,
            metadata: d.metadata,
        })
    }
}

/// Says once, in the kernel log, when a trace sink starts capturing while a panic would start
/// a kdump capture kernel before the panic dump runs (a capture kernel is loaded and
/// `crash_kexec_post_notifiers` is off): the trace then reaches the vmcore only through the
/// capture kernel's TMC driver, and no CPU is sampled. The kdump policy is the user's; this
/// tells them both ways. Sink drivers call it when they enable.
pub fn note_sink_enabled() {
    use crate::sync::atomic::{
        Atomic,
        Relaxed, //
    };
    static SAID: Atomic<bool> = Atomic::new(false);
    if crate::panic_notifier::kdump_runs_before_notifiers() && !SAID.xchg(true, Relaxed) {
        crate::pr_warn!(
            "coresight: a kdump capture kernel is loaded and crash_kexec_post_notifiers is off: \
             kdump starts before the CoreSight panic dump runs; the trace stays in the sink for \
             the capture kernel's TMC driver (built in, or loaded before /proc/vmcore is read) \
             to hand over, and only CPUs not online there are sampled (by its CPU debug driver); \
             to run the dump first, boot with \
             crash_kexec_post_notifiers or write 1 to \
             /sys/module/kernel/parameters/crash_kexec_post_notifiers\n"
        );
    }
}

/// Copies the crash path's entry addresses (the core's `stop_at` parameter, resolved from
/// function names) into `addrs` and returns how many there are, at most `addrs.len()` and
/// `CORESIGHT_DUMP_MAX_STOP_ADDRS`.
///
/// A trace source driver programs them as stop points when it starts tracing, so that the trace
/// ends where the crash began. Returns 0 when the list is empty (the hardware stop is off) or
/// there is no panic-dump core. Must be called in process context (it takes a mutex).
pub fn stop_addresses(addrs: &mut [u64]) -> usize {
    #[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
    {
        const MAX: usize = bindings::CORESIGHT_DUMP_MAX_STOP_ADDRS as usize;
        let mut raw: [crate::ffi::c_ulong; MAX] = [0; MAX];
        let max = addrs.len().min(MAX);
        // CAST: `max` is at most 16.
        // SAFETY: `raw` holds `MAX` values, at least `max`.
        let n = unsafe { bindings::coresight_dump_stop_addrs(raw.as_mut_ptr(), max as u32) };
        let n = usize::try_from(n).unwrap_or(0).min(max);
        for (dst, src) in addrs.iter_mut().zip(&raw[..n]) {
            // CAST: `unsigned long` is at most 64 bits wide.
            *dst = *src as u64;
        }
        n
    }
    #[cfg(not(CONFIG_CORESIGHT_PANIC_DUMP))]
    {
        let _ = addrs;
        0
    }
}

/// A dump callback, run at panic on the panicking CPU with the other CPUs stopped.
pub trait DumpCallback: Sync {
    /// Copies the device's state into `buf` and returns how many bytes it wrote.
    ///
    /// Runs in the panic path: it must not sleep, allocate, take a lock another CPU may hold, or
    /// poll without a bound. An error is recorded in the callback's record with the bytes it
    /// reports through `written` (a device that stopped answering half way keeps what was read).
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result;

    /// Whether [`DumpCallback::metadata`] records anything: only then does the core call it.
    const HAS_METADATA: bool = false;

    /// Writes what a reader needs to decode this registration's record (a trace source's
    /// configuration and ID registers) into `buf`, while the kernel runs, and returns how many
    /// bytes it wrote through `written`; [`ENODATA`] when there is nothing to record (the slot
    /// is left as it is).
    ///
    /// Called from [`metadata_changed`], with interrupts off and the core's region lock held:
    /// it must not sleep, and must not call [`metadata_changed`].
    fn metadata(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let _ = (buf, written);
        Err(ENODATA)
    }
}

/// Records the decode metadata of every registration that has some
/// ([`DumpCallback::metadata`]) in its slot and commits the region, so that a dump is decodable
/// when no panic-time step runs (kdump without `crash_kexec_post_notifiers`).
///
/// A trace source driver calls it when it starts tracing with a configuration it has not
/// recorded yet. Any context; must not be called with a lock held that a
/// [`DumpCallback::metadata`] takes. Fails with [`EBUSY`] while a panic is being dumped and
/// [`ENODEV`] without the core or a region.
pub fn metadata_changed() -> Result {
    #[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
    {
        // SAFETY: No requirement; callable in any context.
        crate::error::to_result(unsafe { bindings::coresight_dump_metadata_changed() })
    }
    #[cfg(not(CONFIG_CORESIGHT_PANIC_DUMP))]
    {
        Err(ENODEV)
    }
}

/// What a registration asks of the core.
pub struct DumpInfo<'a> {
    /// Device name, copied into the registration and kept in the record (31 bytes at most).
    pub name: &'a CStr,
    /// What the registration dumps.
    pub kind: DumpType,
    /// CPU the data belongs to, if any.
    pub cpu: Option<u32>,
    /// Bytes to reserve in the region.
    pub max_bytes: usize,
    /// What layout the data has.
    pub payload: DumpPayload,
}

/// A registration with the panic-dump core; unregisters on drop.
///
/// Dropping it returns once no panic path can run the callback any more, so what the callback
/// uses may go after it; while a panic is being dumped (its CPU may be inside the callback) the
/// drop never returns. It sleeps: drop it in process context.
///
/// # Invariants
///
/// `entry` is the core's handle for a registration whose `data` is a pointer to this pinned
/// object, valid until `PinnedDrop::drop` deletes it.
#[pin_data(PinnedDrop)]
pub struct Registration<T: DumpCallback> {
    #[pin]
    desc: Opaque<RawDesc>,
    entry: *mut bindings::coresight_dump_entry,
    #[pin]
    callback: T,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The core only calls the callback (which is `Sync`) through a shared reference.
unsafe impl<T: DumpCallback> Sync for Registration<T> {}

// SAFETY: Deleting the registration does not depend on the thread that added it.
unsafe impl<T: DumpCallback + Send> Send for Registration<T> {}

impl<T: DumpCallback> Registration<T> {
    /// Registers `callback` with the panic-dump core and reserves its slot.
    ///
    /// Fails with [`ENOSPC`] when the region has no room for `info.max_bytes` more, and with
    /// [`ENODEV`] when the kernel has no panic-dump core or no region.
    pub fn new<'a, E>(
        info: DumpInfo<'a>,
        callback: impl PinInit<T, E> + 'a,
    ) -> impl PinInit<Self, Error> + 'a
    where
        T: 'a,
        Error: From<E>,
    {
        try_pin_init!(&this in Self {
            callback <- callback,
            desc <- Opaque::ffi_init(|_slot: *mut RawDesc| {}),
            entry: core::ptr::null_mut(),
            _pin: PhantomPinned,
            _: {
                let me = this.as_ptr();
                // The core copies the name when it adds the registration.
                let name_ptr = info.name.as_char_ptr();
                // SAFETY: `me` points to the registration being initialised; `desc` is in place.
                let desc = Opaque::cast_into(unsafe { &raw const (*me).desc });
                // SAFETY: `desc` is valid for writes.
                unsafe {
                    desc.write(RawDesc {
                        name: name_ptr,
                        type_: info.kind as u32,
                        cpu: info.cpu.map_or(-1, |c| c as c_int),
                        max_bytes: info.max_bytes,
                        payload: info.payload as u32,
                        dump: Some(Self::trampoline),
                        data: me.cast(),
                        metadata: if T::HAS_METADATA {
                            Some(Self::metadata_trampoline)
                        } else {
                            None
                        },
                    })
                };
                let entry = Self::add(desc)?;
                // SAFETY: `me` is valid for writes of its fields.
                // INVARIANT: `entry` registers `me`, which stays pinned until drop.
                unsafe { (*me).entry = entry };
            },
        }? Error)
    }

    #[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
    fn add(desc: *mut RawDesc) -> Result<*mut bindings::coresight_dump_entry> {
        // SAFETY: `desc` is a fully initialised description whose name is valid for the call
        // (the core copies it) and whose data outlives the registration.
        let entry = unsafe { bindings::coresight_dump_add(desc) };
        // `coresight_dump_add` returns a valid pointer or an `ERR_PTR`.
        crate::error::from_err_ptr(entry)
    }

    #[cfg(not(CONFIG_CORESIGHT_PANIC_DUMP))]
    fn add(_desc: *mut RawDesc) -> Result<*mut bindings::coresight_dump_entry> {
        Err(ENODEV)
    }

    /// Returns the callback.
    pub fn callback(&self) -> &T {
        &self.callback
    }

    /// The C callback: calls [`DumpCallback::dump`] on the registration in `data`.
    ///
    /// # Safety
    ///
    /// `data` must be the registration passed at `coresight_dump_add()` time, `buf` valid for
    /// writes of `size` bytes with nothing else accessing them, and `len` valid for writes.
    unsafe extern "C" fn trampoline(
        data: *mut c_void,
        buf: *mut c_void,
        size: usize,
        len: *mut usize,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        unsafe { Self::call(data, buf, size, len, T::dump) }
    }

    /// The C metadata callback: calls [`DumpCallback::metadata`] on the registration in `data`.
    ///
    /// # Safety
    ///
    /// As [`Self::trampoline`].
    unsafe extern "C" fn metadata_trampoline(
        data: *mut c_void,
        buf: *mut c_void,
        size: usize,
        len: *mut usize,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        unsafe { Self::call(data, buf, size, len, T::metadata) }
    }

    /// Calls `f` on the callback of the registration in `data` with the C callback's buffer, and
    /// returns what C expects: 0 or a negative errno, the bytes written in `*len`.
    ///
    /// # Safety
    ///
    /// As [`Self::trampoline`].
    unsafe fn call(
        data: *mut c_void,
        buf: *mut c_void,
        size: usize,
        len: *mut usize,
        f: fn(&T, &mut [u8], &mut usize) -> Result,
    ) -> c_int {
        // SAFETY: By the safety requirements `data` is a live, pinned `Self`.
        let this = unsafe { &*data.cast::<Self>() };
        // SAFETY: By the safety requirements `buf` is valid for `size` bytes, exclusively.
        let slot = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
        let mut written = 0;
        let ret = match f(&this.callback, slot, &mut written) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        // SAFETY: `len` is valid for writes.
        unsafe { *len = written };
        ret
    }
}

#[pinned_drop]
impl<T: DumpCallback> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        #[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
        // SAFETY: By the type invariant `entry` is a live registration, deleted once, here.
        unsafe {
            bindings::coresight_dump_del(self.entry)
        };
        #[cfg(not(CONFIG_CORESIGHT_PANIC_DUMP))]
        let _ = self;
    }
}

/// Hands a record over from a kdump capture kernel: `fill` writes, into a data area of
/// `info.max_bytes`, what the panic path would have written for this device from what the
/// hardware kept after the crash (a trace sink the crashed kernel left capturing), and the record
/// reaches `/proc/vmcore` as a device dump ([`format::capture`]) that the host tool joins to the
/// crashed kernel's region.
///
/// `fill` works as [`DumpCallback::dump`]: it returns how many bytes it wrote through its second
/// argument, and an error that the record keeps (with the bytes written, as a partial record).
/// Runs `fill` before it returns, in process context (a driver's probe). Fails with [`EPERM`]
/// outside a capture kernel, [`EINVAL`] for a size the record cannot have, and as
/// [`crash_dump::add_device_dump`](crate::crash_dump::add_device_dump) does.
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP)]
pub fn hand_over_capture(
    info: DumpInfo<'_>,
    fill: impl FnOnce(&mut [u8], &mut usize) -> Result,
) -> Result {
    use crate::crash_dump;
    use format::{
        capture,
        RecordHeader,
        RecordKind,
        RecordStatus,
        SlotAllocator,
        BOOT_ID_SIZE,
        CPU_NONE, //
    };

    if !crash_dump::is_kdump_kernel() {
        return Err(EPERM);
    }
    let capacity = SlotAllocator::capacity_for(info.max_bytes).ok_or(EINVAL)?;
    let size = capture::capture_container_size(capacity).ok_or(EINVAL)?;
    let record_name = info.name.to_bytes();
    let mut name = [0u8; capture::CAPTURE_DUMP_NAME_MAX + 1];
    let n = capture::capture_dump_name(record_name, &mut name).ok_or(EINVAL)?;
    let name = CStr::from_bytes_with_nul(name.get(..=n).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    let kind = match info.kind {
        DumpType::CpuDebug => RecordKind::CpuDebug,
        DumpType::Source => RecordKind::Source,
        DumpType::Sink => RecordKind::Sink,
        DumpType::Other => RecordKind::Other,
    };
    crash_dump::add_device_dump(name, size, |buf| {
        let data = capture::capture_data_mut(buf, capacity).ok_or(EINVAL)?;
        let mut len = 0usize;
        let ret = fill(data, &mut len);
        let mut h = RecordHeader::new(kind, record_name, capacity, 0);
        h.cpu = info.cpu.unwrap_or(CPU_NONE);
        h.payload = info.payload.into();
        // CAST: `capacity` is a `u32`.
        let cap = capacity as usize;
        h.status = match &ret {
            _ if len > cap => RecordStatus::Truncated,
            Ok(()) => RecordStatus::Ok,
            Err(_) if len > 0 => RecordStatus::Partial,
            Err(_) => RecordStatus::CallbackError,
        };
        h.error = ret.err().map_or(0, |e| e.to_errno());
        // CAST: bounded by `capacity`.
        h.length = len.min(cap) as u32;
        let mut boot_id = [0u8; BOOT_ID_SIZE];
        crate::random::fill_bytes(&mut boot_id);
        capture::seal_capture(buf, boot_id, &h)?;
        Ok(())
    })
}

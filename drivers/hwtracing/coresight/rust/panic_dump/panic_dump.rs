// SPDX-License-Identifier: GPL-2.0

//! CoreSight panic dump core.
//!
//! Owns the dump region, keeps the registrations drivers make with `coresight_dump_add()` (or
//! [`kernel::coresight::panic_dump::Registration`]), and at panic runs their callbacks in phases
//! (stop the trace sources, sample the CPUs, drain the trace sinks, the rest), times each phase,
//! and commits the dump after each step; every record and commit is cleaned to the point of
//! coherency as soon as it is written, so that a reset at any step finds it in memory. The
//! region's layout, and the writer used here, is [`format`], shared with the host tool `csdump`.
//!
//! The kdump policy is the user's: with a capture kernel loaded, the dump runs before kdump only
//! when `crash_kexec_post_notifiers` is on, which the core never sets; a trace sink that starts
//! capturing while it is off says so once in the kernel log
//! ([`kernel::coresight::panic_dump::note_sink_enabled`]). The crash path's first functions,
//! where the trace sources stop in hardware, are the `stop_at` parameter (`exports.c`).
//!
//! The region is, in order of preference: the `reserve_mem=` region labelled `coresight_dump`,
//! the `memory-region` named "dump" of a device-tree node compatible with
//! "linux,coresight-panic-dump", or (when `kernel_buffer_kib` is not zero) a kernel buffer, which
//! only a kdump vmcore can read back. A persistent region that holds a committed dump from the
//! previous boot is copied out before it is reset, with the trace buffers its ETR records left in
//! reserved memory ([`tracedata`]): `/dev/coresight_panic_dump` reads that copy, and writing 1 to
//! it frees the copy. With debugfs, `coresight_panic_dump/last_dump` and
//! `coresight_panic_dump/clear` do the same.

use kernel::{
    c_str,
    coresight::devfile::{
        DevFile,
        DevFileRegistration, //
    },
    coresight::panic_dump::{
        format::{
            self,
            ContainerHeader,
            PayloadType,
            Phase,
            Phases,
            RecordHeader,
            RecordKind,
            RecordStatus,
            SlotAllocator,
            BOOT_ID_SIZE,
            COMMIT_RECORD_SIZE,
            CONTAINER_HEADER_SIZE,
            CPU_NONE,
            NAME_SIZE,
            PANIC_INFO_MAX_SIZE,
            PHASES_SIZE,
            RECORD_FLAG_RUNTIME,
            RECORD_HEADER_SIZE,
            VMCOREINFO_TEXT_MAX, //
        },
        DescView,
        DumpType,
        RawDesc, //
    },
    cpu::CpuId,
    crash_dump, debugfs,
    iov::{
        IovIterDest,
        IovIterSource, //
    },
    panic_notifier::{
        self,
        Counter,
        PanicHandler, //
    },
    prelude::*,
    processor::cpu_relax,
    random,
    reserved_mem::{
        Cache,
        Mapping,
        Origin,
        ReservedRegion, //
    },
    str::CString,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        new_mutex, new_spinlock_irq, Arc, Mutex, SpinLockIrq,
    },
    uaccess::UserSliceReader,
    vmcore_info::{
        self,
        KernelIdentity, //
    },
};

#[cfg(CONFIG_MODULES)]
use kernel::module_notifier::{
    self,
    LoadedModule,
    ModuleEvent,
    ModuleHandler, //
};

#[cfg(CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST)]
mod tests;
mod tracedata;

module! {
    type: PanicDump,
    name: "coresight_panic_dump",
    authors: ["coresight-panic-dump developers"],
    description: "CoreSight panic dump core",
    license: "GPL",
    params: {
        kernel_buffer_kib: u32 {
            default: 0,
            description:
                "Without a reserved region, dump into a kernel buffer of this many KiB (kdump only; 0: off)",
        },
    },
}

/// `reserve_mem=` label of the dump region.
const RESERVE_MEM_LABEL: &CStr = c_str!("coresight_dump");

/// Registrations the core can hold.
const MAX_ENTRIES: usize = 64;

/// Largest kernel buffer, in KiB, when there is no reserved region.
const KERNEL_BUFFER_MAX_KIB: u32 = 4096;

/// Entry states.
const FREE: u32 = 0;
const ACTIVE: u32 = 1;
/// Deleted; the slot stays reserved for a later registration that fits.
const RELEASED: u32 = 2;

/// The order of the phases at panic: every trace source stops first (the panicking CPU's own has
/// already stopped in hardware at the crash path's entry), so that nothing after it (CPU debug
/// sampling, printing) is traced into the sinks.
const PHASES: [(Phase, DumpType); 4] = [
    (Phase::StopSources, DumpType::Source),
    (Phase::SampleCpus, DumpType::CpuDebug),
    (Phase::DrainSinks, DumpType::Sink),
    (Phase::Other, DumpType::Other),
];

/// A registration as the panic path reads it.
#[derive(Clone, Copy)]
struct EntryInfo {
    desc: DescView,
    record: RecordKind,
    payload: PayloadType,
    name: [u8; NAME_SIZE],
    seq: u64,
    slot: usize,
    capacity: usize,
}

impl EntryInfo {
    /// The header of this registration's record, not run yet, with `stamp`.
    fn header(&self, stamp: u64) -> RecordHeader {
        // `add()` took the capacity from a `u32`: the conversion does not fail.
        let mut h = RecordHeader::new(
            self.record,
            &self.name,
            u32::try_from(self.capacity).unwrap_or(0),
            stamp,
        );
        h.cpu = self.desc.cpu.unwrap_or(CPU_NONE);
        h.payload = self.payload;
        h
    }
}

/// One registration slot.
///
/// `info` is written only with `state` not `ACTIVE`, under the registry lock; the panic path
/// reads it only after it saw `ACTIVE` with acquire ordering.
struct Entry {
    state: Atomic<u32>,
    info: core::cell::UnsafeCell<Option<EntryInfo>>,
    /// The slot this entry writes headers to, `offset << 32 | capacity` (0: none yet); set
    /// before the first header write and never changed after, so that the panic path can
    /// repair a header a stopped CPU left half written ([`format::repair_header`]).
    slot: Atomic<u64>,
}

// SAFETY: Access to `info` follows the protocol above.
unsafe impl Sync for Entry {}

/// Allocation state, changed under the registry lock.
struct Alloc {
    /// Where the next new slot goes.
    slots: SlotAllocator,
    /// Registration counter, for "registration order" within a phase.
    seq: u64,
}

/// What [`Core::release`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unregister {
    /// Released: no panic path will run its callback.
    Released,
    /// It was not an active registration.
    NotActive,
    /// A panic path had started first and may be inside its callback.
    PanicInProgress,
}

/// Where the region came from, for the log.
#[derive(Clone, Copy)]
enum Source {
    ReserveMem,
    DeviceTree,
    KernelBuffer,
}

/// The core's state; lives for the whole uptime.
#[pin_data]
struct Core {
    map: Mapping,
    header: ContainerHeader,
    panic_slot: usize,
    phases_slot: usize,
    /// The module list record's offset and data capacity.
    modules_slot: usize,
    modules_capacity: u32,
    /// Serialises the writers of the module list (the module notifier).
    #[pin]
    modules: Mutex<()>,
    entries: [Entry; MAX_ENTRIES],
    #[pin]
    alloc: Mutex<Alloc>,
    dumping: Atomic<u32>,
    /// Serialises, outside the panic path, every write of a record header and of a metadata
    /// slot with the run-time commit that covers them; holds whether a run-time commit is in
    /// the region (then every header change is committed again).
    #[pin]
    runtime: SpinLockIrq<bool>,
    /// 1 while [`Core::record_metadata`] writes into the region: the panic path waits for it,
    /// bounded, before it writes the same slots.
    writing: Atomic<u32>,
    /// Cleans to the point of coherency that failed since boot (the panic path's message says).
    clean_failures: Atomic<u32>,
}

/// The single instance, set once at init and never freed.
static CORE: Atomic<*mut Core> = Atomic::new(core::ptr::null_mut());

fn core_ref() -> Option<&'static Core> {
    let p = CORE.load(Acquire);
    // SAFETY: `CORE` is null or points to the leaked `Core` that lives forever.
    unsafe { p.as_ref() }
}

fn name_field(name: &[u8]) -> [u8; NAME_SIZE] {
    let mut out = [0u8; NAME_SIZE];
    let n = name.len().min(NAME_SIZE - 1);
    out[..n].copy_from_slice(&name[..n]);
    out
}

fn record_kind(t: DumpType) -> RecordKind {
    match t {
        DumpType::CpuDebug => RecordKind::CpuDebug,
        DumpType::Source => RecordKind::Source,
        DumpType::Sink => RecordKind::Sink,
        DumpType::Other => RecordKind::Other,
    }
}

impl Core {
    /// Resets the region for this boot (container header and the core's records, cleaned to
    /// the point of coherency) and builds the core that owns it.
    fn new(map: Mapping, header: ContainerHeader) -> Result<impl PinInit<Self, Error>> {
        let slots = reset(&map, &header)?;
        // The container and the core's records reach memory now: a panic cleans only what it
        // writes.
        if map.clean_to_poc(0, slots.first_free).is_err() {
            pr_warn!("could not clean the region's header to the point of coherency\n");
        }
        let region_size = map.len();
        // CAST: at most `MODULES_MAX` entries, a small size.
        let modules_capacity = format::modules_size(format::modules_capacity(region_size)) as u32;
        Ok(try_pin_init!(Core {
            map,
            header,
            panic_slot: slots.panic_info,
            phases_slot: slots.phases,
            modules_slot: slots.modules,
            modules_capacity,
            modules <- new_mutex!(()),
            entries: [const {
                Entry {
                    state: Atomic::new(FREE),
                    info: core::cell::UnsafeCell::new(None),
                    slot: Atomic::new(0),
                }
            }; MAX_ENTRIES],
            alloc <- new_mutex!(Alloc {
                slots: SlotAllocator::new(slots.first_free, region_size),
                seq: 0,
            }),
            dumping: Atomic::new(0),
            runtime <- new_spinlock_irq!(false),
            writing: Atomic::new(0),
            clean_failures: Atomic::new(0),
        }? Error))
    }

    fn stamp(&self) -> u64 {
        self.header.stamp
    }

    /// Writes a record header, then cleans it to the point of coherency; a new header
    /// describes a slot with no data yet.
    fn write_header(&self, offset: usize, h: &RecordHeader) -> Result {
        self.map.write(offset, &h.encode())?;
        self.clean(offset, RECORD_HEADER_SIZE);
        Ok(())
    }

    /// Makes `len` bytes at `offset`, just written, reach memory: on silicon a warm reset (a
    /// watchdog's, after a callback that never returned) need not write dirty cache lines back,
    /// so every record and every commit is cleaned to the point of coherency before the next
    /// step starts. Counts a failure for the panic path's message.
    fn clean(&self, offset: usize, len: usize) {
        if self.map.clean_to_poc(offset, len).is_err() {
            self.clean_failures.fetch_add(1, Relaxed);
        }
    }

    /// Reserves a slot for `desc`: a released one that fits, or a new one at the end.
    fn add(&self, desc: DescView) -> Result<usize> {
        let capacity = SlotAllocator::capacity_for(desc.max_bytes).ok_or(E2BIG)?;
        let mut alloc = self.alloc.lock();
        alloc.seq = alloc.seq.wrapping_add(1);
        let seq = alloc.seq;

        // A released slot that fits, else a free entry and a new slot.
        let mut chosen = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.state.load(Relaxed) == RELEASED {
                // SAFETY: Not `ACTIVE`, and we hold the lock: no one else touches `info`.
                if let Some(info) = unsafe { &*e.info.get() } {
                    if u32::try_from(info.capacity).is_ok_and(|c| c >= capacity) {
                        chosen = Some((i, info.slot, info.capacity));
                        break;
                    }
                }
            }
        }
        let (index, slot, slot_cap) = match chosen {
            Some(c) => c,
            None => {
                let index = self
                    .entries
                    .iter()
                    .position(|e| e.state.load(Relaxed) == FREE)
                    .ok_or(ENOSPC)?;
                let used = alloc.slots.used();
                let slot = alloc.slots.reserve(capacity).map_err(|_| {
                    pr_err!(
                        "region full: {} cannot have {} bytes ({} of {} in use)\n",
                        desc.name,
                        desc.max_bytes,
                        used,
                        self.map.len()
                    );
                    ENOSPC
                })?;
                // CAST: `u32` fits in `usize`.
                (index, slot, capacity as usize)
            }
        };
        let record = record_kind(desc.kind);
        let payload = PayloadType::from(desc.payload);
        let name = name_field(desc.name.as_bytes());
        let mut h = RecordHeader::new(
            record,
            &name,
            u32::try_from(slot_cap).map_err(|_| E2BIG)?,
            self.stamp(),
        );
        h.cpu = desc.cpu.unwrap_or(CPU_NONE);
        h.payload = payload;
        let e = &self.entries[index];
        // CAST: both fit in 32 bits (region offsets, `u32` capacities).
        e.slot
            .store(((slot as u64) << 32) | slot_cap as u64, Release);
        self.locked(|| {
            self.write_header(slot, &h)?;
            // SAFETY: The entry is not `ACTIVE` and we hold the lock.
            unsafe {
                *e.info.get() = Some(EntryInfo {
                    desc,
                    record,
                    payload,
                    name,
                    seq,
                    slot,
                    capacity: slot_cap,
                })
            };
            e.state.store(ACTIVE, Release);
            Ok::<(), Error>(())
        })?;
        Ok(index)
    }

    /// Deletes a registration; returns only once no panic path can be inside its callback.
    fn del(&self, index: usize) {
        if self.release(index) == Unregister::PanicInProgress {
            // A panic is being dumped, and its CPU may be inside this entry's callback, using
            // what the caller frees once this returns (the other CPUs are only asked to stop,
            // and may not). Never return: the system is going down, and this CPU stays here
            // until the panic path stops it or the machine resets.
            loop {
                cpu_relax();
            }
        }
    }

    /// Marks a registration released and frees its slot, unless a panic path has started, which
    /// may be running its callback: then the slot is left as it is and the caller must not
    /// return to a driver that would free what the callback uses.
    fn release(&self, index: usize) -> Unregister {
        let Some(e) = self.entries.get(index) else {
            return Unregister::NotActive;
        };
        let _alloc = self.alloc.lock();
        // Under the region lock too: a metadata recording, which calls the entry's callback,
        // finishes before the entry is released.
        self.locked(|| {
            if e.state.load(Relaxed) != ACTIVE {
                return Unregister::NotActive;
            }
            // Fully ordered against the panic path, which sets `dumping` with full ordering
            // before it reads any entry's state: either it sees `RELEASED` and skips the entry,
            // or this sees `dumping` set (both cannot miss the other's store).
            e.state.xchg(RELEASED, Full);
            if self.dumping.load(Relaxed) != 0 {
                return Unregister::PanicInProgress;
            }
            // SAFETY: No longer `ACTIVE`, and we hold the lock.
            if let Some(info) = unsafe { &*e.info.get() } {
                let h = RecordHeader::new(
                    RecordKind::Free,
                    b"",
                    u32::try_from(info.capacity).unwrap_or(0),
                    self.stamp(),
                );
                if self.write_header(info.slot, &h).is_err() {
                    pr_err!("could not release the slot at {:#x}\n", info.slot);
                }
            }
            Unregister::Released
        })
    }

    /// Runs one registration's callback into its slot and seals its record; returns whether the
    /// callback succeeded.
    ///
    /// # Safety
    ///
    /// Panic path only: the caller won the `dumping` flag and the other CPUs are stopped.
    unsafe fn run(&self, info: &EntryInfo) -> bool {
        let mut h = info.header(self.stamp());

        // Until the callback returns, its record says it did not finish, and the dump is
        // committed that way: a callback that never returns (a device that hangs the bus, a
        // driver bug) leaves a readable dump that names it, for a watchdog reset to recover.
        h.status = RecordStatus::Partial;
        h.error = ETIMEDOUT.to_errno();
        if self.write_header(info.slot, &h).is_ok() {
            // SAFETY: By the safety requirements.
            unsafe { self.commit() };
        }

        let data_off = info.slot + RECORD_HEADER_SIZE;
        // SAFETY: The slot belongs to this registration only; by the safety requirements nothing
        // else runs.
        let Ok(buf) = (unsafe { self.map.slice_mut(data_off, info.capacity) }) else {
            return false;
        };
        let mut len = 0usize;
        // SAFETY: `desc` was registered with `coresight_dump_add`, whose contract makes `dump` and
        // `data` valid until deletion; the entry is `ACTIVE`. `buf` holds `capacity` bytes.
        let ret = unsafe {
            (info.desc.dump)(info.desc.data, buf.as_mut_ptr().cast(), buf.len(), &mut len)
        };
        h.status = if len > info.capacity {
            RecordStatus::Truncated
        } else if ret < 0 && len > 0 {
            RecordStatus::Partial
        } else if ret < 0 {
            RecordStatus::CallbackError
        } else {
            RecordStatus::Ok
        };
        h.error = ret.min(0);
        // CAST: bounded by `capacity`, which fits in `u32`.
        h.length = len.min(info.capacity) as u32;
        // SAFETY: As above, the record's bytes are ours alone.
        if let Ok(rec) = unsafe {
            self.map
                .slice_mut(info.slot, RECORD_HEADER_SIZE + info.capacity)
        } {
            let _ = format::seal_record(rec, &h);
        }
        // CAST: `length` came from a `usize`.
        self.clean(info.slot, RECORD_HEADER_SIZE + h.length as usize);
        h.status == RecordStatus::Ok
    }

    /// Writes (or rewrites) the commit record after the last record; returns the region's used
    /// bytes (the end of the commit record).
    ///
    /// # Safety
    ///
    /// Panic path only: the caller won the `dumping` flag and the other CPUs are stopped.
    unsafe fn commit(&self) -> Option<usize> {
        // SAFETY: By the safety requirements nothing else accesses the region.
        let Ok(all) = (unsafe { self.map.slice_mut(0, self.map.len()) }) else {
            return None;
        };
        match format::write_commit(all) {
            Ok(used) => {
                // The records it covers were cleaned as they were sealed.
                self.clean(used.saturating_sub(COMMIT_RECORD_SIZE), COMMIT_RECORD_SIZE);
                Some(used)
            }
            Err(e) => {
                pr_emerg!("could not commit the dump: {}\n", e);
                None
            }
        }
    }

    /// Rewrites, as free slots, the headers a CPU stopped in the middle of `add()`, `del()` or a
    /// module list update left half written: the chain walk refuses a header that fails its CRC,
    /// which would cost the whole commit; this way it costs that slot only.
    ///
    /// # Safety
    ///
    /// Panic path only: the caller won the `dumping` flag and the other CPUs are stopped.
    unsafe fn repair_headers(&self) {
        let modules = (self.modules_slot, self.modules_capacity);
        let entries = self.entries.iter().filter_map(|e| {
            let slot = e.slot.load(Acquire);
            // CAST: the halves of what `add()` packed.
            (slot != 0).then_some(((slot >> 32) as usize, slot as u32))
        });
        for (offset, capacity) in Iterator::chain(core::iter::once(modules), entries) {
            // SAFETY: By the safety requirements nothing else accesses the region; the slice
            // dies at the end of the statement.
            let repaired = unsafe { self.map.slice_mut(offset, RECORD_HEADER_SIZE) }
                .is_ok_and(|h| format::repair_header(h, 0, capacity, self.stamp()) == Ok(true));
            if repaired {
                pr_emerg!(
                    "slot at {:#x} was being written when the panic came; freed\n",
                    offset
                );
                self.clean(offset, RECORD_HEADER_SIZE);
            }
        }
    }

    /// Writes the phase times record with what `times` holds so far.
    ///
    /// # Safety
    ///
    /// Panic path only: the caller won the `dumping` flag and the other CPUs are stopped.
    unsafe fn write_phases(&self, times: &Phases) {
        let mut data = [0u8; PHASES_SIZE];
        if times.encode(&mut data).is_err() {
            return;
        }
        // CAST: a small constant.
        let mut h = RecordHeader::new(
            RecordKind::Phases,
            b"phases",
            PHASES_SIZE as u32,
            self.stamp(),
        );
        h.status = RecordStatus::Ok;
        // SAFETY: The phase times slot is the core's own; by the safety requirements nothing
        // else runs.
        if let Ok(rec) = unsafe {
            self.map
                .slice_mut(self.phases_slot, RECORD_HEADER_SIZE + PHASES_SIZE)
        } {
            let _ = format::write_record(rec, &h, &data);
        }
        self.clean(self.phases_slot, RECORD_HEADER_SIZE + PHASES_SIZE);
    }

    /// Runs the callbacks of `kind`, in registration order (at most `MAX_ENTRIES`^2 steps);
    /// returns how many ran and how many failed.
    ///
    /// # Safety
    ///
    /// Panic path only: the caller won the `dumping` flag and the other CPUs are stopped.
    unsafe fn run_phase(&self, kind: DumpType) -> (u32, u32) {
        let (mut ran, mut failed) = (0u32, 0u32);
        let mut last = 0u64;
        loop {
            let mut next: Option<EntryInfo> = None;
            for e in &self.entries {
                if e.state.load(Acquire) != ACTIVE {
                    continue;
                }
                // SAFETY: `ACTIVE` was seen with acquire: `info` is complete and stable.
                let Some(i) = (unsafe { *e.info.get() }) else {
                    continue;
                };
                if i.desc.kind == kind && i.seq > last && next.is_none_or(|n| i.seq < n.seq) {
                    next = Some(i);
                }
            }
            let Some(i) = next else {
                break;
            };
            last = i.seq;
            ran += 1;
            // SAFETY: By the safety requirements.
            if !unsafe { self.run(&i) } {
                failed += 1;
            }
        }
        (ran, failed)
    }

    /// The panic path.
    fn dump(&self, message: &CStr) {
        let entry = Counter::read();
        // Fully ordered: set before any entry's state is read (see `del`).
        if self.dumping.cmpxchg(0, 1, Full).is_err() {
            return;
        }
        let cpu = CpuId::current().as_u32();
        self.wait_for_runtime_writer(entry);

        // Panic message first: it says what happened even if a callback never returns.
        let mut pi = [0u8; PANIC_INFO_MAX_SIZE];
        let info = format::PanicInfo {
            cpu,
            message: message.to_bytes(),
            truncated: false,
        };
        if let Ok(n) = info.encode(&mut pi) {
            let mut h = RecordHeader::new(
                RecordKind::PanicInfo,
                b"panic",
                // CAST: a small constant.
                PANIC_INFO_MAX_SIZE as u32,
                self.stamp(),
            );
            h.cpu = cpu;
            h.status = RecordStatus::Ok;
            // SAFETY: We won `dumping`; the other CPUs are stopped.
            if let Ok(rec) = unsafe {
                self.map
                    .slice_mut(self.panic_slot, RECORD_HEADER_SIZE + PANIC_INFO_MAX_SIZE)
            } {
                let _ = format::write_record(rec, &h, &pi[..n]);
            }
            self.clean(self.panic_slot, RECORD_HEADER_SIZE + PANIC_INFO_MAX_SIZE);
        }
        let mut times = Phases {
            frequency: Counter::frequency(),
            entry,
            ..Phases::default()
        };
        // SAFETY: We won `dumping`; the other CPUs are stopped.
        unsafe {
            self.repair_headers();
            self.write_phases(&times);
            self.commit();
        }

        for (phase, kind) in PHASES {
            let start = Counter::read();
            // SAFETY: We won `dumping`; the other CPUs are stopped.
            let (ran, failed) = unsafe { self.run_phase(kind) };
            let t = times.get_mut(phase);
            t.start = start;
            t.end = Counter::read();
            t.callbacks = ran;
            t.errors = failed;
            // What ran so far is in the dump even if a later callback never returns.
            // SAFETY: As above.
            unsafe { self.write_phases(&times) };
        }

        // The commit, timed; then the phase times with it, committed again.
        let start = Counter::read();
        // SAFETY: We won `dumping`; the other CPUs are stopped; the callbacks are done.
        let first = unsafe { self.commit() };
        let t = times.get_mut(Phase::Commit);
        t.start = start;
        t.end = Counter::read();
        // SAFETY: As above.
        let used = first.and_then(|_| unsafe {
            self.write_phases(&times);
            self.commit()
        });
        if used.is_none() {
            return;
        }
        let us = |p: Phase| {
            let t = times.get(p);
            Counter::us_in_ticks(t.end.wrapping_sub(t.start), times.frequency)
        };
        pr_emerg!(
            "dump committed at {:#x} (sequence {}): stop sources {} us, sample CPUs {} us, drain sinks {} us, other {} us, commit {} us; {}\n",
            self.map.phys_addr(),
            self.header.sequence,
            us(Phase::StopSources),
            us(Phase::SampleCpus),
            us(Phase::DrainSinks),
            us(Phase::Other),
            us(Phase::Commit),
            match (self.map.cache(), self.clean_failures.load(Relaxed)) {
                (Cache::WriteCombine, _) => "written through (not cached)",
                (Cache::WriteBack, 0) => "each step cleaned to the point of coherency",
                (Cache::WriteBack, _) => "NOT cleaned from the data cache",
            }
        );
    }
}

impl Core {
    /// Brings the module list record up to date with `event` for `entry`'s module; cleans it to
    /// the point of coherency. Process context (the module notifier).
    #[cfg(CONFIG_MODULES)]
    fn update_modules(&self, event: ModuleEvent, entry: &format::ModuleEntry) -> Result {
        let _guard = self.modules.lock();
        self.locked(|| self.write_modules(event, entry))
    }

    /// [`Core::update_modules`]'s writes, under both locks.
    #[cfg(CONFIG_MODULES)]
    fn write_modules(&self, event: ModuleEvent, entry: &format::ModuleEntry) -> Result {
        // CAST: `u32` fits in `usize`.
        let size = RECORD_HEADER_SIZE + self.modules_capacity as usize;
        // SAFETY: The module list's slot is written only here, under `self.modules` and the
        // region lock (a run-time commit reads its header under the latter); the panic path only
        // reads its header (the commit), after this CPU was stopped, and repairs a header this
        // left half written.
        let rec = unsafe { self.map.slice_mut(self.modules_slot, size)? };
        let data = rec.get_mut(RECORD_HEADER_SIZE..).ok_or(EINVAL)?;
        let length = match event {
            ModuleEvent::Going => format::modules_remove(data, entry.name()),
            ModuleEvent::Coming | ModuleEvent::Live => format::modules_upsert(data, entry),
        }?;
        let mut h = RecordHeader::new(
            RecordKind::Modules,
            b"modules",
            self.modules_capacity,
            self.stamp(),
        );
        h.status = RecordStatus::Ok;
        h.length = u32::try_from(length).map_err(|_| EINVAL)?;
        format::seal_record(rec, &h)?;
        // The header and the whole list (a removal moved an entry) reach memory: a later panic
        // writes neither.
        self.clean(self.modules_slot, size);
        Ok(())
    }
}

/// The module notifier: keeps the module list record current as modules load and unload.
#[cfg(CONFIG_MODULES)]
struct ModuleList;

#[cfg(CONFIG_MODULES)]
impl ModuleHandler for ModuleList {
    fn on_module(&self, event: ModuleEvent, module: &LoadedModule<'_>) {
        let Some(core) = core_ref() else {
            return;
        };
        let state = match event {
            ModuleEvent::Coming => format::ModuleState::Coming,
            ModuleEvent::Live | ModuleEvent::Going => format::ModuleState::Live,
        };
        let mut entry = format::ModuleEntry::new(module.name(), state);
        if let Some(id) = module.build_id() {
            // A build ID longer than the field (none is) is left out rather than cut.
            let _ = entry.set_build_id(id);
        }
        let text = module.text();
        // CAST: `usize` fits in `u64`.
        (entry.text_addr, entry.text_size) = (text.addr as u64, text.size as u64);
        if event == ModuleEvent::Coming {
            let init = module.init_text();
            // CAST: as above.
            (entry.init_addr, entry.init_size) = (init.addr as u64, init.size as u64);
        }
        // Once live, the init text is freed: its sections are left out with it.
        let init = module.init_text();
        module.exec_sections(event, |s| {
            if event == ModuleEvent::Live && init.contains(s.addr) {
                return true;
            }
            // CAST: as above.
            entry.add_section(format::ModuleSection {
                addr: s.addr as u64,
                index: s.index,
            })
        });
        if let Err(e) = core.update_modules(event, &entry) {
            pr_warn!("module list: could not record {:?}: {:?}\n", event, e);
        }
    }
}

/// The panic notifier.
struct Notifier;

impl PanicHandler for Notifier {
    fn on_panic(&self, message: &CStr) {
        if let Some(core) = core_ref() {
            core.dump(message);
        }
    }
}

/// A previous boot's dump, copied out of the region before it was reset.
type LastDump = Arc<Mutex<KVVec<u8>>>;

/// The longest request to clear the previous dump (`1`, with white space around it).
const CLEAR_MAX: usize = 8;

/// Frees the previous boot's dump when `request` is `1` (white space around it allowed).
fn clear_last_dump(last: &LastDump, request: &[u8]) -> Result {
    match request.trim_ascii() {
        b"1" => {
            *last.lock() = KVVec::new();
            pr_info!("previous dump cleared\n");
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// The debugfs `clear` file: [`clear_last_dump`].
fn clear_from_debugfs(last: &LastDump, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; CLEAR_MAX];
    if reader.len() > buf.len() {
        return Err(EINVAL);
    }
    let n = reader.len();
    reader.read_slice(&mut buf[..n])?;
    clear_last_dump(last, &buf[..n])
}

/// `/dev/coresight_panic_dump`: reads the previous boot's dump; writing `1` frees it.
struct LastDumpFile;

#[vtable]
impl DevFile for LastDumpFile {
    type Data = LastDump;
    type State = ();

    fn open(_last: &LastDump) -> Result {
        Ok(())
    }

    fn read(
        last: &LastDump,
        _state: &(),
        pos: &mut i64,
        out: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        out.simple_read_from_buffer(pos, &last.lock())
    }

    fn write(
        last: &LastDump,
        _state: &(),
        _pos: &mut i64,
        input: &mut IovIterSource<'_>,
    ) -> Result<usize> {
        let mut buf = [0u8; CLEAR_MAX];
        let n = input.len();
        if n > buf.len() {
            return Err(EINVAL);
        }
        if input.copy_from_iter(&mut buf[..n]) != n {
            return Err(EFAULT);
        }
        clear_last_dump(last, &buf[..n])?;
        Ok(n)
    }

    fn release(_last: &LastDump, _state: ()) {}
}

struct PanicDump {
    _notifier: Pin<KBox<panic_notifier::Registration<Notifier>>>,
    #[cfg(CONFIG_MODULES)]
    _modules: Pin<KBox<module_notifier::Registration<ModuleList>>>,
    _last: Option<LastDumpFiles>,
}

/// The previous boot's dump, as the device file and (with debugfs) its files show it.
struct LastDumpFiles {
    _dev: Pin<KBox<DevFileRegistration<LastDumpFile>>>,
    _crash: KVec<Pin<KBox<DevFileRegistration<tracedata::CrashTraceFile>>>>,
    _debugfs: DebugFiles,
}

struct DebugFiles {
    _last: Pin<KBox<debugfs::File<LastDump>>>,
    _clear: Pin<KBox<debugfs::File<LastDump>>>,
    _dir: debugfs::Dir,
}

fn find_region() -> Result<(Mapping, Source)> {
    if let Ok(r) = ReservedRegion::from_reserve_mem(RESERVE_MEM_LABEL) {
        return Ok((r.map()?, Source::ReserveMem));
    }
    if let Ok(r) =
        ReservedRegion::from_of_compatible(c_str!("linux,coresight-panic-dump"), c_str!("dump"))
    {
        return Ok((r.map()?, Source::DeviceTree));
    }
    let kib = module_parameters::kernel_buffer_kib.value();
    if kib == 0 {
        return Err(ENOENT);
    }
    if kib > KERNEL_BUFFER_MAX_KIB {
        pr_err!(
            "kernel_buffer_kib={} is above the maximum {}\n",
            kib,
            KERNEL_BUFFER_MAX_KIB
        );
        return Err(EINVAL);
    }
    let size = usize::try_from(kib).map_err(|_| EINVAL)? * 1024;
    Ok((Mapping::kernel_buffer(size)?, Source::KernelBuffer))
}

/// Name of the device dump a capture kernel adds to `/proc/vmcore` (`NT_VMCOREDD` note).
const DEVICE_DUMP_NAME: &CStr = c_str!("coresight_panic_dump");

/// In a kdump capture kernel: hands a dump in a `no-map` device-tree region over to
/// `/proc/vmcore` as a device dump, and leaves the region as it is.
///
/// The crash ELF headers list only what was System RAM, so a `no-map` region is not in
/// `/proc/vmcore`; a `reserve_mem=` region is System RAM and is found there through vmcoreinfo
/// (this kernel's own `reserve_mem=` would be a new, empty block). The copy is taken whenever the
/// region holds a container, committed or not: a dump cut short by a callback that never returned
/// is still the best account of the panic, and csdump reports what is damaged.
fn hand_over() {
    let Ok(region) =
        ReservedRegion::from_of_compatible(c_str!("linux,coresight-panic-dump"), c_str!("dump"))
    else {
        pr_info!("kdump capture kernel: no device-tree region (reserve_mem= is in the vmcore)\n");
        return;
    };
    if region.origin() != (Origin::DeviceTree { no_map: true }) {
        pr_info!("kdump capture kernel: the region is System RAM, in /proc/vmcore as it is\n");
        return;
    }
    if let Err(e) = hand_over_region(&region) {
        pr_err!(
            "kdump capture kernel: could not hand the dump at {:#x} over to /proc/vmcore: {:?}\n",
            region.base(),
            e
        );
    }
}

fn hand_over_region(region: &ReservedRegion) -> Result {
    let map = region.map()?;
    let mut copy = KVVec::with_capacity(map.len(), GFP_KERNEL)?;
    copy.resize(map.len(), 0, GFP_KERNEL)?;
    map.read(0, &mut copy)?;
    let summary = match format::validate(&copy) {
        Ok(s) => s,
        Err(e) => {
            pr_info!(
                "kdump capture kernel: no dump in the region at {:#x} ({})\n",
                map.phys_addr(),
                e
            );
            return Ok(());
        }
    };
    crash_dump::add_device_dump(DEVICE_DUMP_NAME, copy.len(), |buf| {
        buf.copy_from_slice(&copy);
        Ok(())
    })?;
    pr_info!(
        "kdump capture kernel: dump at {:#x} ({} records, {} ok, {}) added to /proc/vmcore as device dump {}\n",
        map.phys_addr(),
        summary.records,
        summary.ok,
        if summary.is_clean() {
            "committed"
        } else if summary.committed {
            "committed, damaged"
        } else {
            "not committed"
        },
        DEVICE_DUMP_NAME
    );
    Ok(())
}

/// Validates what a previous boot left; returns a copy of a committed dump and the next sequence.
fn take_previous(map: &Mapping) -> Result<(Option<KVVec<u8>>, u64)> {
    let mut head = [0u8; CONTAINER_HEADER_SIZE];
    map.read(0, &mut head)?;
    if head.iter().all(|&b| b == 0) {
        pr_info!("no previous dump in the region\n");
        return Ok((None, 0));
    }
    let mut copy = KVVec::with_capacity(map.len(), GFP_KERNEL)?;
    copy.resize(map.len(), 0, GFP_KERNEL)?;
    map.read(0, &mut copy)?;
    let next_seq = format::ContainerHeader::decode(&copy)
        .map(|h| h.sequence.wrapping_add(1))
        .unwrap_or(0);
    match format::validate(&copy) {
        Ok(s) if s.is_clean() && s.runtime_commit => {
            pr_info!(
                "region holds only the trace metadata recorded while the last boot ran (no panic dump); region reset\n"
            );
            Ok((None, next_seq))
        }
        Ok(s) if s.is_clean() => {
            pr_info!(
                "previous dump: {} records ({} ok); read it from /dev/coresight_panic_dump\n",
                s.records,
                s.ok
            );
            Ok((Some(copy), next_seq))
        }
        Ok(s) => {
            match s.first_error {
                Some(e) => pr_warn!("previous dump rejected: {}; region reset\n", e),
                None => {
                    pr_info!("region holds no committed dump (no panic last boot); region reset\n")
                }
            }
            Ok((None, next_seq))
        }
        Err(e) => {
            pr_warn!("previous dump rejected: {}; region reset\n", e);
            Ok((None, 0))
        }
    }
}

/// Writes a fresh container: header, identity, panic-info slot; zeroes the rest. Returns where
/// the core's records are.
///
/// Called at init, before the core is published: nothing else accesses the region.
fn reset(map: &Mapping, header: &ContainerHeader) -> Result<format::CoreSlots> {
    // SAFETY: At init the region is ours alone (see above), and the slice dies with this call.
    let region = unsafe { map.slice_mut(0, map.len())? };
    let id = KernelIdentity::current();
    let mut ident = format::Identity::default();
    ident.set_release(id.release.to_bytes())?;
    ident.set_build_id(id.build_id)?;
    ident.kaslr_offset = id.kaslr_offset;
    ident.text_addr = id.text_start;
    ident.page_offset = id.page_offset;
    ident.memstart = id.memstart;
    ident.kimage_voffset = id.kimage_voffset;
    ident.region_paddr = map.phys_addr();
    // CAST: `usize` fits in `u64`.
    ident.region_size = map.len() as u64;
    format::init_with_core_records(region, header, &ident)
        .inspect_err(|e| pr_err!("could not write the region: {e}\n"))
        .map_err(Error::from)
}

/// Publishes the region's address and size in vmcoreinfo, with the format's keys, and has the
/// note rebuilt so that a hypervisor's dump of this guest carries them too.
fn publish(phys: u64, size: u64) -> Result {
    let mut text = [0u8; VMCOREINFO_TEXT_MAX + 1];
    let n = format::format_vmcoreinfo(phys, size, &mut text)?;
    let line = CStr::from_bytes_with_nul(&text[..=n]).map_err(|_| EINVAL)?;
    vmcore_info::append(line)?;
    vmcore_info::refresh_note()
}

impl kernel::Module for PanicDump {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        if crash_dump::is_kdump_kernel() {
            hand_over();
            tracedata::hand_over();
            return Err(ENODEV);
        }
        let (map, source) = find_region().inspect_err(|_| {
            pr_info!(
                "no dump region (reserve_mem=SIZE:ALIGN:{}, device tree, or kernel_buffer_kib=)\n",
                RESERVE_MEM_LABEL
            );
        })?;
        let persistent = !matches!(source, Source::KernelBuffer);
        let (previous, sequence) = if persistent {
            take_previous(&map)?
        } else {
            (None, 0)
        };
        let previous = previous.map(tracedata::attach_in_place);

        let mut boot_id = [0u8; BOOT_ID_SIZE];
        random::fill_bytes(&mut boot_id);
        let size = u64::try_from(map.len()).map_err(|_| EOVERFLOW)?;
        let header = ContainerHeader::new(size, boot_id, sequence);
        let phys = map.phys_addr();
        let core = KBox::pin_init(Core::new(map, header)?, GFP_KERNEL)?;
        // SAFETY: The core is never freed or moved: the pinned box is leaked.
        let core = unsafe { Pin::into_inner_unchecked(core) };
        CORE.store(KBox::into_raw(core), Release);

        publish(phys, size)?;

        // Run before the other panic notifiers that may stop the machine (pvpanic is INT_MAX and
        // registered earlier, so it still runs first).
        let notifier = KBox::pin_init(
            panic_notifier::Registration::new(i32::MAX, Ok::<_, Error>(Notifier)),
            GFP_KERNEL,
        )?;

        // Built in, the core registers before any module loads: the list misses none.
        #[cfg(CONFIG_MODULES)]
        let modules = KBox::pin_init(
            module_notifier::Registration::new(Ok::<_, Error>(ModuleList)),
            GFP_KERNEL,
        )?;

        let last = match previous {
            Some(dump) => Some(last_dump_files(dump)?),
            None => None,
        };
        pr_info!(
            "dump region at {:#x}, {} KiB ({}), sequence {}\n",
            phys,
            size / 1024,
            match source {
                Source::ReserveMem => "reserve_mem",
                Source::DeviceTree => "device tree",
                Source::KernelBuffer => "kernel buffer, kdump only",
            },
            sequence
        );
        Ok(Self {
            _notifier: notifier,
            #[cfg(CONFIG_MODULES)]
            _modules: modules,
            _last: last,
        })
    }
}

fn last_dump_files(dump: KVVec<u8>) -> Result<LastDumpFiles> {
    let sinks = tracedata::attached_sinks(&dump);
    let last: LastDump = Arc::pin_init(new_mutex!(dump), GFP_KERNEL)?;
    let name = CString::try_from_fmt(fmt!("coresight_panic_dump"))?;
    let dev = KBox::pin_init(
        DevFileRegistration::register(name, last.clone()),
        GFP_KERNEL,
    )?;
    let mut crash = KVec::new();
    for sink in sinks {
        let shown = CStr::from_bytes_until_nul(&sink).unwrap_or(c_str!("?"));
        let name = CString::try_from_fmt(fmt!("crash_{}", shown))?;
        let data = tracedata::CrashTrace {
            last: last.clone(),
            name: sink,
        };
        // A sink without its crash device still has its trace in the dump.
        match KBox::pin_init(DevFileRegistration::register(name, data), GFP_KERNEL) {
            Ok(f) => {
                pr_info!(
                    "previous dump: the crash trace of {} is /dev/crash_{}\n",
                    shown,
                    shown
                );
                crash.push(f, GFP_KERNEL)?;
            }
            Err(e) => pr_warn!("previous dump: no /dev/crash_{}: {:?}\n", shown, e),
        }
    }
    Ok(LastDumpFiles {
        _dev: dev,
        _crash: crash,
        _debugfs: debug_files(last)?,
    })
}

/// The debugfs files of the previous boot's dump (none without debugfs).
fn debug_files(last: LastDump) -> Result<DebugFiles> {
    let dir = debugfs::Dir::new(c_str!("coresight_panic_dump"));
    let last_file = KBox::pin_init(
        dir.read_binary_file(c_str!("last_dump"), last.clone()),
        GFP_KERNEL,
    )?;
    let clear = KBox::pin_init(
        dir.write_callback_file(c_str!("clear"), last, &clear_from_debugfs),
        GFP_KERNEL,
    )?;
    Ok(DebugFiles {
        _last: last_file,
        _clear: clear,
        _dir: dir,
    })
}

/// How long the panic path waits for a metadata recording another CPU is in the middle of.
const RUNTIME_WRITER_WAIT_US: u64 = 1000;

impl Core {
    /// Runs `f` under the region lock; when the region holds a run-time commit, commits again
    /// after it (a header `f` changed, or a slot it added over the commit, is then covered).
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let committed = self.runtime.lock();
        let r = f();
        if *committed {
            // SAFETY: We hold the region lock.
            unsafe { self.runtime_commit() };
        }
        r
    }

    /// Writes the commit record of a dump committed while the kernel runs, flagged
    /// [`RECORD_FLAG_RUNTIME`], and cleans it to the point of coherency. Not while a panic is
    /// dumped: its commit is the panic path's.
    ///
    /// # Safety
    ///
    /// The caller holds the region lock (`self.runtime`).
    unsafe fn runtime_commit(&self) -> bool {
        if self.dumping.load(Acquire) != 0 {
            return false;
        }
        // SAFETY: Outside the panic path every writer of a header, of a metadata slot and of
        // the commit holds the region lock, which the caller holds; only the headers are read.
        let Ok(all) = (unsafe { self.map.slice_mut(0, self.map.len()) }) else {
            return false;
        };
        match format::write_commit_flagged(all, RECORD_FLAG_RUNTIME) {
            Ok(used) => {
                self.clean(used.saturating_sub(COMMIT_RECORD_SIZE), COMMIT_RECORD_SIZE);
                true
            }
            Err(e) => {
                pr_warn!("could not commit the trace metadata: {}\n", e);
                false
            }
        }
    }

    /// Records the decode metadata of every registration that has a metadata callback in its
    /// slot (flagged [`RECORD_FLAG_RUNTIME`]) and commits the region; any context.
    fn record_metadata(&self) -> Result {
        let mut committed = self.runtime.lock();
        // Fully ordered against the panic path's `dumping` (set, then `writing` read): either
        // it waits for this writer, or this writer sees the panic and writes nothing.
        self.writing.xchg(1, Full);
        let mut result = Ok(());
        for e in &self.entries {
            if self.dumping.load(Acquire) != 0 {
                result = Err(EBUSY);
                break;
            }
            if e.state.load(Acquire) != ACTIVE {
                continue;
            }
            // SAFETY: `ACTIVE` was seen with acquire, and entries change state only under the
            // region lock, which we hold: `info` is complete and stays.
            let Some(info) = (unsafe { *e.info.get() }) else {
                continue;
            };
            let Some(meta) = info.desc.metadata else {
                continue;
            };
            if let Err(err) = self.write_metadata(&info, meta) {
                pr_warn!(
                    "{}: trace metadata not recorded ({:?})\n",
                    info.desc.name,
                    err
                );
                result = Err(err);
            }
        }
        if result.is_ok() {
            // SAFETY: We hold the region lock.
            *committed = unsafe { self.runtime_commit() } || *committed;
        }
        self.writing.store(0, Release);
        result
    }

    /// Writes one registration's metadata into its slot and seals the record.
    ///
    /// The caller holds the region lock, with `info` an `ACTIVE` entry's.
    fn write_metadata(
        &self,
        info: &EntryInfo,
        meta: kernel::coresight::panic_dump::RawDumpFn,
    ) -> Result {
        // SAFETY: The slot belongs to this registration; outside the panic path it is written
        // only here, under the region lock, which the caller holds (the panic path waits for
        // `writing`).
        let rec = unsafe {
            self.map
                .slice_mut(info.slot, RECORD_HEADER_SIZE + info.capacity)?
        };
        let data = rec.get_mut(RECORD_HEADER_SIZE..).ok_or(EINVAL)?;
        let mut len = 0usize;
        // SAFETY: `desc` was registered with `coresight_dump_add`, whose contract keeps its
        // callbacks and `data` valid until deletion, which waits for the region lock we hold;
        // `data` holds `capacity` bytes, ours alone.
        let ret = unsafe {
            meta(
                info.desc.data,
                data.as_mut_ptr().cast(),
                data.len(),
                &mut len,
            )
        };
        if ret == ENODATA.to_errno() {
            return Ok(());
        }
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        if len > info.capacity {
            return Err(ENOSPC);
        }
        let mut h = info.header(self.stamp());
        h.status = RecordStatus::Ok;
        h.flags = RECORD_FLAG_RUNTIME;
        h.length = u32::try_from(len).map_err(|_| E2BIG)?;
        format::seal_record(rec, &h)?;
        self.clean(info.slot, RECORD_HEADER_SIZE + len);
        Ok(())
    }

    /// The panic path, once it won `dumping`: gives a metadata recording that another CPU is in
    /// the middle of (with interrupts off, so the stop request waits for it) up to
    /// [`RUNTIME_WRITER_WAIT_US`] to end, so that the two do not write the same slots.
    fn wait_for_runtime_writer(&self, start: u64) {
        let freq = Counter::frequency();
        while self.writing.load(Acquire) != 0 {
            if Counter::us_in_ticks(Counter::read().wrapping_sub(start), freq)
                > RUNTIME_WRITER_WAIT_US
            {
                pr_emerg!("trace metadata was being recorded by a CPU that did not finish\n");
                return;
            }
            cpu_relax();
        }
    }
}

impl Core {
    /// Returns the index of the entry `handle` points to, if it is one of ours.
    fn index_of(&self, handle: *const Entry) -> Option<usize> {
        self.entries.iter().position(|e| core::ptr::eq(e, handle))
    }
}

/// C API: registers a dump callback. `coresight_dump_add()` (`exports.c`, exported) calls it;
/// see `include/linux/coresight-panic-dump.h`.
///
/// Returns the registration's entry, which lives as long as the core (for ever), as the opaque
/// handle; the description is copied, its name included.
///
/// # Safety
///
/// `desc` must point to a valid description whose name is valid for the call and whose callback
/// and data stay valid until [`cspd_dump_del`] is called with the returned handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cspd_dump_add(desc: *const RawDesc) -> *mut c_void {
    // SAFETY: By the safety requirements.
    let view = match unsafe { DescView::from_raw(desc) } {
        Ok(v) => v,
        Err(e) => return e.to_ptr(),
    };
    let Some(core) = core_ref() else {
        return ENODEV.to_ptr();
    };
    match core.add(view) {
        // The entry is one of the core's, which is never freed; `del` checks that a handle is
        // one of them before it uses it.
        Ok(i) => core.entries.get(i).map_or(EINVAL.to_ptr(), |e| {
            core::ptr::from_ref(e).cast_mut().cast()
        }),
        Err(e) => e.to_ptr(),
    }
}

/// C API: removes a registration; its slot is released and its record no longer written.
/// `coresight_dump_del()` (`exports.c`, exported) calls it.
///
/// A handle that is not one of the core's entries (null, an error pointer) is ignored; it is
/// compared with them, never dereferenced.
///
/// # Safety
///
/// `entry` must be a handle returned by [`cspd_dump_add`] and not deleted yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cspd_dump_del(entry: *mut c_void) {
    if let Some(core) = core_ref() {
        if let Some(i) = core.index_of(entry.cast_const().cast()) {
            core.del(i);
        }
    }
}

/// C API: records the registrations' decode metadata and commits the region.
/// `coresight_dump_metadata_changed()` (`exports.c`, exported) calls it.
#[unsafe(no_mangle)]
pub extern "C" fn cspd_dump_metadata_changed() -> c_int {
    let Some(core) = core_ref() else {
        return ENODEV.to_errno();
    };
    match core.record_metadata() {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

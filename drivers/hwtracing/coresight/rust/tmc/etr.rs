// SPDX-License-Identifier: GPL-2.0

//! The TMC-ETR hardware sequences: enable as a sink with a buffer in system memory, and the panic
//! callback's stop, which records where the trace is and copies it when the buffer is not
//! reserved memory.
//!
//! They follow the Arm CoreSight Trace Memory Controller Technical Reference Manual (DDI 0461) and
//! the Linux C driver (`coresight-tmc-etr.c`: `__tmc_etr_enable_hw()`, `tmc_panic_sync_etr()`),
//! and are generic over [`CsAccess`] so that the KUnit and host tests run them against the
//! register-level model. The formatter, flush, stop and `TMCReady` are the ETB/ETF ones
//! ([`super::hw`]); disabling is [`super::hw::disable`].
//!
//! [`panic_stop`] stops the ETR as the C driver's crash-data path does (flush and stop unless
//! `FFSR.FtStopped` says a flush already stopped the formatter, wait for `TMCReady`) and reads
//! `STS`, the pointers and `DBA`; [`panic_record`] then writes the format's ETR record
//! ([`EtrRecordHeader`]). A buffer in reserved memory is left as it is: the record says where it
//! is. Any other buffer is copied behind the header, the newest bytes kept
//! ([`EtrLayout::newest`]): never more than the slot holds, never from outside the buffer. Every
//! poll is bounded; nothing is allocated, nothing sleeps, and the ETR is left disabled and
//! locked.
//!
//! Shared with the host (`crates/cspd-hw`): uses `core`, `kernel::coresight::access`,
//! `kernel::num::Bounded`, the format's ETR payload (`kernel::coresight::panic_dump::format::etr`)
//! and this folder's `regs.rs` and `hw.rs` (`super::`).

use kernel::{
    coresight::{
        access::{
            lock,
            unlock,
            CsAccess,
            AUTHSTATUS, //
        },
        panic_dump::format::etr::{
            EtrLayout,
            EtrOutcome,
            EtrRecordError,
            EtrRecordHeader,
            ETR_FRAME_LEN,
            ETR_RECORD_HEADER_LEN,
            ETR_RECORD_VERSION,
            ETR_REC_FLUSH_SKIPPED,
            ETR_REC_FLUSH_TIMEOUT,
            ETR_REC_IN_PLACE,
            ETR_REC_MEMERR,
            ETR_REC_READY_TIMEOUT,
            ETR_REC_TRUNCATED,
            ETR_REC_WRAPPED, //
        },
        panic_dump::format::tmc::{
            TmcOutcome,
            CS_BARRIER_LEN,
            CS_BARRIER_WORD,
            TMC_REC_FLUSH_SKIPPED,
            TMC_REC_FLUSH_TIMEOUT,
            TMC_REC_READY_TIMEOUT, //
        },
    },
    num::Bounded,
};

use super::{
    hw::{
        panic_entry,
        wait_ready,
        TmcError, //
    },
    regs::{
        ffcr_sink,
        TmcMode,
        AXICTL,
        CTL,
        DBAHI,
        DBALO,
        DEVID,
        FFSR,
        MODE,
        RRP,
        RRPHI,
        RSZ,
        RWP,
        RWPHI,
        STS,
        TRG, //
    },
};

/// The write burst the C driver programs when the firmware names none: 16 transfers.
pub const ETR_WR_BURST_16: u32 = 0xF;

/// `AXICTL.CacheCtrlBit` for outer-shareable, write-back, allocating writes (the C driver's
/// `TMC_AXICTL_AXCACHE_OS`).
pub const ETR_AXCACHE_OS: u32 = 0xF;

/// Largest buffer an ETR is given, in bytes: `RSZ` is a 31-bit count of words, and the drivers
/// keep it below 4 GiB.
pub const ETR_MAX_BUFFER: u64 = 0xFFFF_F000;

/// How the driver enables an ETR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtrSetup {
    /// Bus address of the buffer (`DBA`), aligned to the memory width.
    pub dba: u64,
    /// Size of the buffer in bytes, a multiple of 4.
    pub size: u64,
    /// Set `FFCR.StopOnFl` for the session: a flush (a trigger on `FLUSHIN`, such as a CTI wired
    /// to a watchdog or to the panic) stops the formatter, so that the buffer keeps what led to
    /// it (the sysfs `stop_on_flush`).
    pub stop_on_flush: bool,
    /// The part keeps `RRP`, `RWP` and `STS.Full` across sessions (a SoC-600 TMC-ETR): program
    /// them for a fresh buffer.
    pub save_restore: bool,
    /// `TRG`: words captured after a trigger before the trigger event (the sysfs
    /// `trigger_cntr`).
    pub trigger: u32,
}

/// Returns the `AXICTL` value for a flat buffer, from the value the ETR holds: the C driver's
/// `__tmc_etr_enable_hw()` (non-secure, 16-beat bursts, outer-shareable write-back), the bits it
/// does not own (such as a SoC-600's read cache field) kept.
pub fn axictl_flat(old: AXICTL) -> AXICTL {
    // The fields this sequence owns, cleared first (`TMC_AXICTL_CLEAR_MASK`).
    let keep = old.into_raw() & !0xFBF;
    AXICTL::from_raw(keep)
        .with_protctrl1(true)
        .with_wrburstlen(Bounded::<u32, 4>::new::<ETR_WR_BURST_16>())
        .with_cachectrl(Bounded::<u32, 4>::new::<ETR_AXCACHE_OS>())
}

/// Enables capture into the buffer `setup` describes, in Circular Buffer mode with the formatter
/// on.
///
/// Unlocks, checks `STS.TMCReady` (bounded), programs `RSZ`, `MODE`, `AXICTL` ([`axictl_flat`]),
/// `DBALO`/`DBAHI`, for a part that keeps its pointers also `RRP`, `RWP` and `STS` (`Full`
/// cleared), then `FFCR`, `TRG` and `CTL.TraceCaptEn`, and locks again. On a timeout nothing is
/// programmed and the frame is locked again.
pub fn enable<A: CsAccess>(io: &mut A, setup: &EtrSetup) -> Result<(), TmcError> {
    unlock(io);
    if let Err(e) = wait_ready(io) {
        lock(io);
        return Err(e);
    }
    // CAST: the bus address is split into its 32-bit halves.
    let (lo, hi) = (setup.dba as u32, (setup.dba >> 32) as u32);
    let words = u32::try_from(setup.size / 4).unwrap_or(u32::MAX);
    io.write_reg(RSZ::from_raw(words & 0x7FFF_FFFF));
    io.write_reg(MODE::from_raw(0).with_mode(TmcMode::CircularBuffer));
    let axictl = axictl_flat(io.read(AXICTL));
    io.write_reg(axictl);
    io.write_reg(DBALO::from_raw(lo));
    io.write_reg(DBAHI::from_raw(hi));
    if setup.save_restore {
        io.write_reg(RRP::from_raw(lo));
        io.write_reg(RRPHI::from_raw(hi));
        io.write_reg(RWP::from_raw(lo));
        io.write_reg(RWPHI::from_raw(hi));
        let sts: STS = io.read(STS);
        io.write_reg(sts.with_full(false));
    }
    io.write_reg(ffcr_sink().with_stoponfl(setup.stop_on_flush));
    io.write_reg(TRG::from_raw(setup.trigger));
    io.write_reg(CTL::from_raw(0).with_tracecapten(true));
    lock(io);
    Ok(())
}

/// The memory of a buffer the panic callback copies the trace from.
///
/// Implementations must not sleep, allocate or take a lock: the panic path calls them.
pub trait EtrMemory {
    /// Size in bytes.
    fn size(&self) -> usize;

    /// Copies `out.len()` bytes at byte offset `offset` into `out`; returns `false`, copying
    /// nothing, when they are not all inside the memory.
    fn read(&self, offset: usize, out: &mut [u8]) -> bool;
}

/// The buffer the driver gave the ETR, as the panic callback records it.
pub struct PanicBuffer<'a> {
    /// Bus address the driver programmed in `DBA`.
    pub dba: u64,
    /// Physical address of the byte at `dba`, as the CPUs see it; 0 when unknown.
    pub paddr: u64,
    /// Size in bytes of the memory at `dba`.
    pub size: u64,
    /// Where to copy the trace from; `None` for reserved memory, where the trace stays.
    pub copy_from: Option<&'a dyn EtrMemory>,
}

/// Summary of a [`panic_record`], also found in the record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtrSummary {
    /// How it ended.
    pub outcome: EtrOutcome,
    /// `ETR_REC_*` flags.
    pub flags: u16,
    /// Trace bytes copied behind the header.
    pub trace_len: usize,
    /// Bytes of trace the buffer held.
    pub data_len: u64,
    /// Bytes of the slot used by the record (header and trace).
    pub record_len: usize,
}

/// Reads a 64-bit address from its low and high registers.
fn addr64(lo: u32, hi: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Copies the bytes `layout` describes from `mem` into `out`, oldest first; returns the bytes
/// copied, or `None` when a range is outside `mem`.
fn copy_layout(mem: &dyn EtrMemory, layout: &EtrLayout, out: &mut [u8]) -> Option<usize> {
    let mut at = 0usize;
    for (off, len) in layout.ranges() {
        let off = usize::try_from(off).ok()?;
        let len = usize::try_from(len).ok()?;
        if len == 0 {
            continue;
        }
        let end = at.checked_add(len)?;
        if !mem.read(off, out.get_mut(at..end)?) {
            return None;
        }
        at = end;
    }
    Some(at)
}

/// What [`panic_stop`] found: the registers of the stopped ETR and how the stop went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtrStop {
    /// The record header so far (registers, flags, delays).
    header: EtrRecordHeader,
    /// Capture was on in Circular Buffer mode, and the ETR was stopped.
    running: bool,
    /// The first failure seen.
    failure: Option<EtrOutcome>,
}

impl EtrStop {
    /// Returns the record header as far as the registers fill it.
    pub fn header(&self) -> &EtrRecordHeader {
        &self.header
    }

    /// Returns whether the ETR was capturing (and was stopped).
    pub fn was_running(&self) -> bool {
        self.running
    }
}

// The entry of the panic path ([`panic_entry`]) speaks in a TMC record's outcome codes and flag
// bits; an ETR record gives them the same values.
const _: () = {
    assert!(ETR_REC_FLUSH_SKIPPED == TMC_REC_FLUSH_SKIPPED);
    assert!(ETR_REC_FLUSH_TIMEOUT == TMC_REC_FLUSH_TIMEOUT);
    assert!(ETR_REC_READY_TIMEOUT == TMC_REC_READY_TIMEOUT);
    assert!(EtrOutcome::Locked as u16 == TmcOutcome::Locked as u16);
    assert!(EtrOutcome::NotEnabled as u16 == TmcOutcome::NotEnabled as u16);
    assert!(EtrOutcome::NotCircularBuffer as u16 == TmcOutcome::NotCircularBuffer as u16);
    assert!(EtrOutcome::FlushTimeout as u16 == TmcOutcome::FlushTimeout as u16);
    assert!(EtrOutcome::ReadyTimeout as u16 == TmcOutcome::ReadyTimeout as u16);
};

/// Stops the ETR and reads the registers its record keeps; the first half of the panic path,
/// [`panic_record`] the second.
///
/// The sequence: the entry every TMC configuration shares ([`panic_entry`]: unlock, read `CTL`,
/// `MODE`, `FFSR`, `FFCR`, flush and stop when capturing in Circular Buffer mode); read `STS`,
/// `RRP`, `RWP`, `DBA`, `RSZ`, `FFSR`, `DEVID`, `AUTHSTATUS`, `AXICTL`; clear `CTL` (the C
/// driver's `tmc_disable_hw()`), so that the ETR writes nothing more into its buffer; lock. A
/// flush or ready timeout is recorded, and the registers are read anyway.
///
/// The register accesses are bounded: at most `2 * (TMC_POLL_TRIES + 1) + 26`, whatever the
/// buffer's size.
pub fn panic_stop<A: CsAccess>(io: &mut A) -> EtrStop {
    let mut h = EtrRecordHeader {
        version: ETR_RECORD_VERSION,
        ..EtrRecordHeader::default()
    };
    let entry = panic_entry(io);
    h.ctl = entry.ctl;
    h.mode = entry.mode;
    h.ffcr = entry.ffcr;
    h.flags |= entry.flags;
    h.flush_delays = entry.flush_delays;
    h.ready_delays = entry.ready_delays;
    let failure = entry.failure.and_then(|o| EtrOutcome::from_code(o.code()));
    let running = entry.stopped;

    let sts: STS = io.read(STS);
    h.sts = sts.into_raw();
    h.rrp = addr64(io.read(RRP).into_raw(), io.read(RRPHI).into_raw());
    h.rwp = addr64(io.read(RWP).into_raw(), io.read(RWPHI).into_raw());
    h.dba = addr64(io.read(DBALO).into_raw(), io.read(DBAHI).into_raw());
    h.rsz = io.read(RSZ).into_raw();
    h.ffsr = io.read(FFSR).into_raw();
    h.devid = io.read(DEVID).into_raw();
    h.authstatus = io.read(AUTHSTATUS).into_raw();
    h.axictl = io.read(AXICTL).into_raw();
    if running {
        io.write_reg(CTL::from_raw(0));
    }
    lock(io);
    if sts.full() {
        h.flags |= ETR_REC_WRAPPED;
    }
    if sts.memerr() {
        h.flags |= ETR_REC_MEMERR;
    }
    EtrStop {
        header: h,
        running,
        failure,
    }
}

/// Writes the record of a stopped ETR into `slot`: the second half of the panic path.
///
/// For a buffer with [`PanicBuffer::copy_from`], the newest trace that fits is copied behind the
/// header, oldest byte first ([`EtrLayout::newest`]); for reserved memory the record says where
/// the trace is ([`ETR_REC_IN_PLACE`]). Nothing is copied when the pointers are not those of
/// `buffer` (another `DBA`, an `RSZ` larger than it, `RWP` outside it:
/// [`EtrOutcome::BadPointers`]) or when `STS.MemErr` says the ETR could not write it
/// ([`EtrOutcome::MemErr`]). At most the slot's size is read from `buffer`, and only from inside
/// it.
///
/// Returns an error, writing nothing, only when `slot` cannot hold the header.
pub fn panic_record(
    stop: &EtrStop,
    buffer: Option<&PanicBuffer<'_>>,
    slot: &mut [u8],
) -> Result<EtrSummary, EtrRecordError> {
    if slot.len() < ETR_RECORD_HEADER_LEN {
        return Err(EtrRecordError::TooShort);
    }
    let (head, data) = slot.split_at_mut(ETR_RECORD_HEADER_LEN);
    let mut h = stop.header;
    let mut failure = stop.failure;
    let mut trace_len = 0usize;
    if stop.running {
        match (buffer, h.layout()) {
            (None, _) => failure = Some(EtrOutcome::NoBuffer),
            (Some(b), _) if h.has(ETR_REC_MEMERR) => {
                h.buf_paddr = b.paddr;
                h.buf_size = b.size;
                failure = Some(EtrOutcome::MemErr);
            }
            (Some(b), Ok(layout)) if b.dba == h.dba && layout.size <= b.size => {
                h.buf_paddr = b.paddr;
                h.buf_size = b.size;
                h.data_len = layout.len;
                match b.copy_from {
                    None => h.flags |= ETR_REC_IN_PLACE,
                    Some(mem) => {
                        // CAST: `usize` fits in `u64`.
                        let kept = layout.newest(data.len() as u64);
                        match copy_layout(mem, &kept, data) {
                            Some(n) => {
                                trace_len = n;
                                h.data_start = kept.start;
                                if kept.len < layout.len {
                                    h.flags |= ETR_REC_TRUNCATED;
                                    failure = failure.or(Some(EtrOutcome::Truncated));
                                }
                            }
                            None => failure = Some(EtrOutcome::BadPointers),
                        }
                    }
                }
            }
            (Some(b), _) => {
                h.buf_paddr = b.paddr;
                h.buf_size = b.size;
                failure = Some(EtrOutcome::BadPointers);
            }
        }
    }
    h.trace_len = u32::try_from(trace_len).unwrap_or(u32::MAX);
    let outcome = failure.unwrap_or(EtrOutcome::Complete);
    h.outcome_code = outcome.code();
    // The header is written last, once everything it describes is in place.
    let _ = h.encode(head);
    Ok(EtrSummary {
        outcome,
        flags: h.flags,
        trace_len,
        data_len: h.data_len,
        record_len: ETR_RECORD_HEADER_LEN.wrapping_add(trace_len),
    })
}

/// What [`perf_drain`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtrPerfDrain {
    /// Trace bytes handed to the output, whole frames.
    pub bytes: usize,
    /// Trace was lost: the buffer had wrapped, or held more than the output had room for (the
    /// oldest part was left out). The first 16 bytes handed over are then the barrier packet.
    pub lost: bool,
    /// What went wrong, if anything: a flush or ready timeout (the trace is handed over
    /// anyway), or the reasons nothing is ([`EtrOutcome::NotEnabled`],
    /// [`EtrOutcome::MemErr`], [`EtrOutcome::BadPointers`]).
    pub failure: Option<EtrOutcome>,
}

/// Bytes [`perf_drain`] reads from the buffer at a time.
const PERF_CHUNK: usize = 256;

/// Stops the ETR and hands the newest trace in its buffer, at most `room` bytes, to `out`,
/// oldest first, for a perf AUX buffer: upstream's `tmc_update_etr_buffer()` for a flat buffer.
///
/// Stops as [`panic_stop`] does (flush and stop, `CTL` cleared, locked again) and finds the trace
/// from `STS`, `RWP` and `DBA` ([`EtrLayout::newest`], whole frames). Nothing is read when the
/// ETR was not capturing, when `STS.MemErr` says it could not write, or when its pointers are not
/// those of `mem` at bus address `dba`. When trace was lost, the first 16 bytes are replaced by
/// the barrier packet, so that a decoder resynchronises there. `mem` is read a chunk at a time
/// and only inside it; the register accesses are those of [`panic_stop`].
pub fn perf_drain<A: CsAccess>(
    io: &mut A,
    mem: &dyn EtrMemory,
    dba: u64,
    room: usize,
    mut out: impl FnMut(&[u8]),
) -> EtrPerfDrain {
    let stop = panic_stop(io);
    let h = &stop.header;
    let mut d = EtrPerfDrain {
        bytes: 0,
        lost: false,
        failure: stop.failure,
    };
    if !stop.running {
        d.failure = d.failure.or(Some(EtrOutcome::NotEnabled));
        return d;
    }
    if h.has(ETR_REC_MEMERR) {
        d.failure = Some(EtrOutcome::MemErr);
        return d;
    }
    // CAST: `usize` fits in `u64`.
    let layout = match h.layout() {
        Ok(l) if h.dba == dba && l.size <= mem.size() as u64 => l,
        _ => {
            d.failure = Some(EtrOutcome::BadPointers);
            return d;
        }
    };
    // CAST: `usize` fits in `u64`.
    let room = room as u64;
    let kept = layout.newest(room - room % ETR_FRAME_LEN);
    d.lost = kept.starts_mid_stream(&layout);
    let mut chunk = [0u8; PERF_CHUNK];
    let mut first = true;
    for (off, len) in kept.ranges() {
        let (Ok(mut off), Ok(mut len)) = (usize::try_from(off), usize::try_from(len)) else {
            d.failure = Some(EtrOutcome::BadPointers);
            return d;
        };
        while len > 0 {
            let n = len.min(PERF_CHUNK);
            let Some(part) = chunk.get_mut(..n) else {
                break;
            };
            if !mem.read(off, part) {
                d.failure = Some(EtrOutcome::BadPointers);
                return d;
            }
            if d.lost && first {
                for w in part.chunks_exact_mut(4).take(CS_BARRIER_LEN / 4) {
                    w.copy_from_slice(&CS_BARRIER_WORD.to_le_bytes());
                }
            }
            first = false;
            out(part);
            d.bytes += n;
            off += n;
            len -= n;
        }
    }
    d
}

// SPDX-License-Identifier: GPL-2.0

//! The TMC (ETB/ETF) hardware sequences: enable as a sink or a link, disable, and the panic
//! drain.
//!
//! They follow the Arm CoreSight Trace Memory Controller Technical Reference Manual (DDI 0461) and
//! the Linux C driver (`coresight-tmc-core.c`, `coresight-tmc-etf.c`), and are generic over
//! [`CsAccess`], so the kernel runs them over MMIO and the KUnit and host tests run them against
//! the register-level model.
//!
//! The panic sequence, [`panic_drain`], stops the TMC the way the C driver does (set `StopOnFl`,
//! set `FlushMan`, wait for `FlushMan` to clear, wait for `TMCReady`) and then reads the trace RAM
//! through `RRD` into a caller's slot, behind the fixed header of the format's TMC payload
//! ([`TmcRecordHeader`]). Unlike the C driver, every poll and the RAM read loop are bounded, the
//! slot size is honoured (keeping the newest trace when it is too small), and whatever went wrong
//! is recorded in the header instead of stopping the dump. It allocates nothing and never sleeps.
//!
//! Shared with the host (`crates/cspd-hw`): uses `core`, `kernel::coresight::access`, the
//! format's TMC payload (`kernel::coresight::panic_dump::format::tmc`) and this folder's
//! `regs.rs` (`super::regs`).

use core::fmt;

use kernel::coresight::{
    access::{
        lock,
        unlock,
        CsAccess,
        Polled,
        AUTHSTATUS,
        LSR, //
    },
    panic_dump::format::tmc::{
        TmcOutcome,
        TmcRecordError,
        TmcRecordHeader,
        CS_BARRIER_LEN,
        CS_BARRIER_WORD,
        TMC_RECORD_HEADER_LEN,
        TMC_RECORD_VERSION,
        TMC_REC_BARRIER,
        TMC_REC_FLUSH_SKIPPED,
        TMC_REC_FLUSH_TIMEOUT,
        TMC_REC_RAM_STUCK,
        TMC_REC_READY_TIMEOUT,
        TMC_REC_RSZ_CLAMPED,
        TMC_REC_TRUNCATED,
        TMC_REC_WRAPPED, //
    },
};

use super::regs::{
    ffcr_sink,
    TmcMode,
    BUFWM,
    CTL,
    DEVID,
    FFCR,
    FFSR,
    MODE,
    RRD,
    RRP,
    RSZ,
    RWP,
    STS,
    TRG, //
};

/// The value `RRD` returns when there is no more data to read.
///
/// The formatter never produces it, so it can mark the end of the buffer.
pub const TMC_RRD_EMPTY: u32 = 0xFFFF_FFFF;

/// How many times a status bit is polled before giving up.
///
/// TIMEOUT: the C driver (`coresight_timeout()`) polls 100 times 1 us apart. At panic there is
/// nothing to hurry for and a flush cut short loses the last trace, so this allows ten times
/// longer: at most 1000 polls, about 1 ms per wait.
pub const TMC_POLL_TRIES: u32 = 1000;

/// Delay in microseconds between two polls of a status bit.
pub const TMC_POLL_DELAY_US: u32 = 1;

/// Largest `RSZ` a TMC may report at probe, in words (16 MiB of RAM).
///
/// A TMC in the ETB or ETF configuration has at most a few hundred KiB of RAM; a larger `RSZ` is
/// taken for a broken register and the device is refused, rather than asking the dump region for
/// a slot of that size. At panic the drain is bounded by the slot, whatever `RSZ` says then.
pub const TMC_MAX_RAM_WORDS: u32 = 1 << 22;

/// Errors of the run-time (non-panic) sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcError {
    /// `STS.TMCReady` did not rise within [`TMC_POLL_TRIES`] polls.
    NotReady,
    /// `FFCR.FlushMan` did not clear within [`TMC_POLL_TRIES`] polls.
    FlushTimeout,
}

impl fmt::Display for TmcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotReady => write!(f, "STS.TMCReady did not rise within {TMC_POLL_TRIES} polls"),
            Self::FlushTimeout => {
                write!(
                    f,
                    "FFCR.FlushMan did not clear within {TMC_POLL_TRIES} polls"
                )
            }
        }
    }
}

/// Returns whether the software lock is implemented and set (`LSR.SLI` and `LSR.SLK`).
pub fn is_locked<A: CsAccess>(io: &mut A) -> bool {
    io.read(LSR).locked()
}

/// Polls `STS` until `TMCReady` is set, bounded by [`TMC_POLL_TRIES`].
fn poll_ready<A: CsAccess>(io: &mut A) -> Result<Polled<STS>, Polled<STS>> {
    io.poll(
        TMC_POLL_TRIES,
        TMC_POLL_DELAY_US,
        |io| io.read(STS),
        |s: &STS| s.tmcready(),
    )
}

/// Waits, bounded, for `STS.TMCReady`; the frame must be unlocked.
///
/// Returns the number of delays spent waiting.
pub fn wait_ready<A: CsAccess>(io: &mut A) -> Result<u32, TmcError> {
    poll_ready(io)
        .map(|p| p.delays)
        .map_err(|_| TmcError::NotReady)
}

/// What [`flush_and_stop`] observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopReport {
    /// Whether `FFCR.FlushMan` cleared within the bound.
    pub flush_done: bool,
    /// Delays spent waiting for `FFCR.FlushMan` to clear.
    pub flush_delays: u32,
    /// Whether `STS.TMCReady` rose within the bound.
    pub ready: bool,
    /// Delays spent waiting for `STS.TMCReady`.
    pub ready_delays: u32,
}

impl StopReport {
    /// Converts the report into the first error it shows, if any.
    pub fn result(&self) -> Result<(), TmcError> {
        if !self.flush_done {
            Err(TmcError::FlushTimeout)
        } else if !self.ready {
            Err(TmcError::NotReady)
        } else {
            Ok(())
        }
    }

    /// Records the wait for `TMCReady`.
    fn with_ready(mut self, polled: Result<Polled<STS>, Polled<STS>>) -> Self {
        self.ready = polled.is_ok();
        self.ready_delays = match polled {
            Ok(p) | Err(p) => p.delays,
        };
        self
    }
}

/// Flushes the formatter and stops capture; the frame must be unlocked.
///
/// Sets `FFCR.StopOnFl`, then `FFCR.FlushMan`, waits (bounded) for `FlushMan` to clear and then
/// for `STS.TMCReady`, like the C driver's `tmc_flush_and_stop()`. Like it, a flush timeout does
/// not skip the wait for `TMCReady`. `CTL` is left alone.
pub fn flush_and_stop<A: CsAccess>(io: &mut A) -> StopReport {
    let ffcr = io.read(FFCR).with_stoponfl(true);
    io.write_reg(ffcr);
    io.write_reg(ffcr.with_flushman(true));
    let flush = io.poll(
        TMC_POLL_TRIES,
        TMC_POLL_DELAY_US,
        |io| io.read(FFCR),
        |f: &FFCR| !f.flushman(),
    );
    let report = StopReport {
        flush_done: flush.is_ok(),
        flush_delays: match flush {
            Ok(p) | Err(p) => p.delays,
        },
        ..StopReport::default()
    };
    report.with_ready(poll_ready(io))
}

/// What [`panic_entry`] read and did, in the terms of a TMC record; an ETR record uses the
/// same outcome codes and flag bits for these (checked where it is built, `etr.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicEntry {
    /// `CTL` on entry.
    pub ctl: u32,
    /// `MODE` on entry.
    pub mode: u32,
    /// `FFCR` on entry (before `StopOnFl` and `FlushMan` were set).
    pub ffcr: u32,
    /// The TMC was capturing in Circular Buffer mode, and was stopped.
    pub stopped: bool,
    /// The first failure: why nothing was stopped (`Locked`, `NotEnabled`,
    /// `NotCircularBuffer`; no register was written then), or a timeout of the stop.
    pub failure: Option<TmcOutcome>,
    /// [`TMC_REC_FLUSH_SKIPPED`], [`TMC_REC_FLUSH_TIMEOUT`] and [`TMC_REC_READY_TIMEOUT`] as
    /// they apply.
    pub flags: u16,
    /// Delays spent waiting for `FFCR.FlushMan` to clear.
    pub flush_delays: u32,
    /// Delays spent waiting for `STS.TMCReady`.
    pub ready_delays: u32,
}

/// The entry of the panic path of every TMC configuration: unlocks the frame; reads `CTL`,
/// `MODE`, `FFSR`, `FFCR`; when capturing in Circular Buffer mode, flushes and stops
/// ([`flush_and_stop`]) unless the formatter has already stopped, in which case it only waits
/// for `TMCReady`. The frame is left unlocked for the caller's reads.
///
/// The register accesses are at most `2 * (TMC_POLL_TRIES + 1) + 10`.
pub fn panic_entry<A: CsAccess>(io: &mut A) -> PanicEntry {
    unlock(io);
    let locked = is_locked(io);
    let ctl: CTL = io.read(CTL);
    let mode: MODE = io.read(MODE);
    let ffsr: FFSR = io.read(FFSR);
    let mut e = PanicEntry {
        ctl: ctl.into_raw(),
        mode: mode.into_raw(),
        ffcr: io.read(FFCR).into_raw(),
        stopped: false,
        failure: None,
        flags: 0,
        flush_delays: 0,
        ready_delays: 0,
    };
    e.failure = if locked {
        Some(TmcOutcome::Locked)
    } else if !ctl.tracecapten() {
        Some(TmcOutcome::NotEnabled)
    } else if mode.mode() != Ok(TmcMode::CircularBuffer) {
        Some(TmcOutcome::NotCircularBuffer)
    } else {
        let report = if ffsr.ftstopped() {
            e.flags |= TMC_REC_FLUSH_SKIPPED;
            StopReport {
                flush_done: true,
                ..StopReport::default()
            }
            .with_ready(poll_ready(io))
        } else {
            flush_and_stop(io)
        };
        e.stopped = true;
        e.flush_delays = report.flush_delays;
        e.ready_delays = report.ready_delays;
        if !report.flush_done {
            e.flags |= TMC_REC_FLUSH_TIMEOUT;
        }
        if !report.ready {
            e.flags |= TMC_REC_READY_TIMEOUT;
        }
        match report.result() {
            Err(TmcError::FlushTimeout) => Some(TmcOutcome::FlushTimeout),
            Err(_) => Some(TmcOutcome::ReadyTimeout),
            Ok(()) => None,
        }
    };
    e
}

/// Unlocks the frame and waits for `TMCReady`; on a timeout locks it again.
fn unlock_ready<A: CsAccess>(io: &mut A) -> Result<(), TmcError> {
    unlock(io);
    wait_ready(io).map(|_| ()).inspect_err(|_| lock(io))
}

/// Enables capture as a sink in Circular Buffer mode with the formatter on.
///
/// Unlocks, checks `STS.TMCReady` (bounded), programs `MODE` = Circular Buffer,
/// `FFCR` = [`ffcr_sink`], `TRG` = `trigger_count`, sets `CTL.TraceCaptEn` and locks again.
/// On a timeout nothing is programmed and the frame is locked again.
pub fn enable_circular<A: CsAccess>(io: &mut A, trigger_count: u32) -> Result<(), TmcError> {
    enable_circular_with(io, trigger_count, false)
}

/// [`enable_circular`] with `FFCR.StopOnFl` set when `stop_on_flush` (the sysfs
/// `stop_on_flush`, as the C driver's `__tmc_etb_enable_hw()` sets it).
pub fn enable_circular_with<A: CsAccess>(
    io: &mut A,
    trigger_count: u32,
    stop_on_flush: bool,
) -> Result<(), TmcError> {
    unlock_ready(io)?;
    io.write_reg(MODE::from_raw(0).with_mode(TmcMode::CircularBuffer));
    io.write_reg(ffcr_sink().with_stoponfl(stop_on_flush));
    io.write_reg(TRG::from_raw(trigger_count));
    io.write_reg(CTL::from_raw(0).with_tracecapten(true));
    lock(io);
    Ok(())
}

/// Enables an ETF as a link in Hardware FIFO mode, as the C driver's `__tmc_etf_enable_hw()`.
pub fn enable_hw_fifo<A: CsAccess>(io: &mut A) -> Result<(), TmcError> {
    unlock_ready(io)?;
    io.write_reg(MODE::from_raw(0).with_mode(TmcMode::HardwareFifo));
    io.write_reg(FFCR::from_raw(0).with_enft(true).with_enti(true));
    io.write_reg(BUFWM::from_raw(0));
    io.write_reg(CTL::from_raw(0).with_tracecapten(true));
    lock(io);
    Ok(())
}

/// Flushes, stops and disables capture, then locks the frame again.
///
/// `CTL` is cleared even when the flush or the wait for ready timed out; the first such failure
/// is returned.
pub fn disable<A: CsAccess>(io: &mut A) -> Result<(), TmcError> {
    unlock(io);
    let report = flush_and_stop(io);
    io.write_reg(CTL::from_raw(0));
    lock(io);
    report.result()
}

/// [`disable`] when capture is on (`CTL.TraceCaptEn`); else only reads `CTL`: the sink was
/// stopped already (by an ETR's [`super::etr::perf_drain`]), and no flush is asked of a stopped
/// TMC.
pub fn disable_if_capturing<A: CsAccess>(io: &mut A) -> Result<(), TmcError> {
    let ctl: CTL = io.read(CTL);
    if !ctl.tracecapten() {
        return Ok(());
    }
    disable(io)
}

/// What [`perf_drain`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfDrain {
    /// Trace bytes handed to the output, a multiple of four.
    pub bytes: usize,
    /// Trace was lost: the RAM had wrapped, or held more than the output had room for (the
    /// oldest part was skipped). The first 16 bytes handed over are then the barrier packet.
    pub lost: bool,
    /// How the flush and stop went.
    pub stop: StopReport,
}

/// Stops capture and hands the trace RAM's contents to `out`, one word at a time, oldest first,
/// for a perf AUX buffer with `room` bytes free: upstream's `tmc_update_etf_buffer()`.
///
/// Flushes and stops ([`flush_and_stop`]); the RAM holds `RSZ` words once it has wrapped
/// (`STS.Full`), else the words from `RRP` to `RWP`. When that is more than `room`, `RRP` is
/// moved so that the newest `room` bytes are read (rounded down to a frame and to the memory
/// width, as `RRP` requires). When trace was lost either way, the first four words handed over
/// are replaced by the barrier packet, so that a decoder resynchronises there. Exactly the words
/// counted are read through `RRD`; `CTL` is left alone (the sink's disable clears it) and the frame
/// is locked again.
///
/// The register accesses are one `RRD` read per word handed over and a bounded number of
/// others (at most `2 * (TMC_POLL_TRIES + 1) + 12`).
pub fn perf_drain<A: CsAccess>(io: &mut A, room: usize, mut out: impl FnMut(u32)) -> PerfDrain {
    unlock(io);
    let stop = flush_and_stop(io);
    let rrp = io.read(RRP).into_raw();
    let rwp = io.read(RWP).into_raw();
    let sts: STS = io.read(STS);
    let rsz = io.read(RSZ).into_raw();
    let mut lost = sts.full();
    let mut bytes = words_held(sts, rrp, rwp, rsz).saturating_mul(4);
    if bytes > room {
        let devid: DEVID = io.read(DEVID);
        // A frame (16 bytes) or a memory word, whichever is larger.
        let align = usize::try_from(devid.memwidth_words())
            .unwrap_or(1)
            .saturating_mul(4)
            .max(16);
        bytes = room - room % align;
        // `bytes <= room` is less than the RAM's size here, so `start` is in the RAM.
        let size = u64::from(rsz) * 4;
        let back = u64::try_from(bytes).unwrap_or(size).min(size);
        let start = (u64::from(rwp) % size.max(1) + size - back) % size.max(1);
        io.write_reg(RRP::from_raw(u32::try_from(start).unwrap_or(0)));
        lost = true;
    }
    let words = bytes / 4;
    for i in 0..words {
        let w = io.read(RRD).data().get();
        out(if lost && i < CS_BARRIER_LEN / 4 {
            CS_BARRIER_WORD
        } else {
            w
        });
    }
    lock(io);
    PerfDrain { bytes, lost, stop }
}

/// Summary of a [`panic_drain`], also found in the record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainSummary {
    /// How the drain ended.
    pub outcome: TmcOutcome,
    /// `TMC_REC_*` flags.
    pub flags: u16,
    /// Trace bytes stored after the header.
    pub trace_len: usize,
    /// Bytes of the slot used by the record (header and trace).
    pub record_len: usize,
}

/// Reads `RRD` until it returns [`TMC_RRD_EMPTY`], at most `bound` data words and one more read
/// that must return the marker, keeping the newest words that fit: word `i` goes to word
/// `i % cap` of `data` (`cap` its whole words, at least one), so that at the end the newest
/// `cap` words are in `data`, rotated left by `words % cap` once more than `cap` were read.
///
/// Returns `(words read, ended)`.
fn drain_ram<A: CsAccess>(io: &mut A, data: &mut [u8], bound: usize) -> (usize, bool) {
    let cap = (data.len() / 4).max(1);
    let mut words: usize = 0;
    loop {
        let w = io.read(RRD).data().get();
        if w == TMC_RRD_EMPTY {
            return (words, true);
        }
        if words >= bound {
            return (words, false);
        }
        let at = (words % cap).wrapping_mul(4);
        if let Some(d) = data.get_mut(at..at.wrapping_add(4)) {
            d.copy_from_slice(&w.to_le_bytes());
        }
        words += 1;
    }
}

/// Returns how many words the trace RAM holds in Stopped state, before any `RRD` read: `RSZ` once
/// the buffer has wrapped (`STS.Full`), else the words from `RRP` to `RWP` (byte addresses).
pub fn words_held(sts: STS, rrp: u32, rwp: u32, rsz: u32) -> usize {
    let bytes = u64::from(rsz) * 4;
    let held = if sts.full() || bytes == 0 {
        u64::from(rsz)
    } else {
        (u64::from(rwp) + bytes - u64::from(rrp) % bytes) % bytes / 4
    };
    usize::try_from(held).unwrap_or(usize::MAX)
}

/// Stops the TMC and copies its trace RAM into `slot` as a TMC record; the panic path.
///
/// The sequence: [`panic_entry`] (unlock; read `CTL`, `MODE`, `FFSR`, `FFCR`; when capturing in
/// Circular Buffer mode, flush and stop unless the formatter has already stopped, in which case
/// only wait for `TMCReady`); read `STS`, `RRP`, `RWP`, `RSZ`, `FFSR`, `DEVID`,
/// `AUTHSTATUS`; read `RRD` until it returns the empty marker; clear `CTL`; lock.
///
/// The drain reads the RAM through `RRD` until the empty marker, at most `RSZ` data words and
/// one more read that must return the marker (else [`TmcOutcome::RamReadStuck`]). When the slot
/// (its whole frames of memory words after the header) holds fewer words than the RAM gave (a
/// slot sized for another RAM size), it keeps the newest words that fit, the ones written last
/// before the crash, and says [`TmcOutcome::Truncated`] with the number of older words dropped;
/// a slot with no room for a frame reads nothing and says how many words the pointers say were
/// left ([`words_held`]). The trace is written straight into the slot after the header, as a
/// ring once it is full, and rotated in place to oldest-first at the end. When the buffer had
/// wrapped (`STS.Full`) or words were dropped, the first 16 bytes are replaced by the barrier
/// packet, as the C driver's `tmc_etb_dump_hw()` does, so that decoders resynchronise where the
/// stream restarts.
///
/// The register accesses are one `RRD` read per word the RAM holds (at most `RSZ`), one more
/// that reads the empty marker, and a bounded number of others (at most
/// `2 * (TMC_POLL_TRIES + 1) + 18`).
///
/// Returns an error, touching no register, only when `slot` cannot hold the header.
pub fn panic_drain<A: CsAccess>(
    io: &mut A,
    slot: &mut [u8],
) -> Result<DrainSummary, TmcRecordError> {
    if slot.len() < TMC_RECORD_HEADER_LEN {
        return Err(TmcRecordError::TooShort);
    }
    let (head, data) = slot.split_at_mut(TMC_RECORD_HEADER_LEN);

    let mut h = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        ..TmcRecordHeader::default()
    };
    let entry = panic_entry(io);
    h.ctl = entry.ctl;
    h.mode = entry.mode;
    h.ffcr = entry.ffcr;
    h.flags |= entry.flags;
    h.flush_delays = entry.flush_delays;
    h.ready_delays = entry.ready_delays;
    let mut first_failure = entry.failure;
    // Even when not ready, drain: outside Stopped state `RRD` reads the empty marker at once.
    let drain = entry.stopped;

    let sts: STS = io.read(STS);
    h.sts = sts.into_raw();
    h.rrp = io.read(RRP).into_raw();
    h.rwp = io.read(RWP).into_raw();
    h.rsz = io.read(RSZ).into_raw();
    h.ffsr = io.read(FFSR).into_raw();
    let devid: DEVID = io.read(DEVID);
    h.devid = devid.into_raw();
    h.authstatus = io.read(AUTHSTATUS).into_raw();
    if sts.full() {
        h.flags |= TMC_REC_WRAPPED;
    }

    let mut trace_len: usize = 0;
    if drain {
        // Keep whole frames (and whole memory words) so that the kept trace ends on a frame.
        let align = usize::try_from(devid.memwidth_words()).unwrap_or(1).max(4);
        let slot_words = (data.len() / 4 / align).wrapping_mul(align);
        let rsz = usize::try_from(h.rsz).unwrap_or(usize::MAX);
        let bound = rsz.min(slot_words);
        if rsz > slot_words {
            h.flags |= TMC_REC_RSZ_CLAMPED;
        }
        let mut left = 0;
        let (words, kept) = if bound == 0 {
            // No room for a frame: nothing is read; the pointers say what was left.
            left = words_held(sts, h.rrp, h.rwp, h.rsz);
            if left > 0 {
                h.flags |= TMC_REC_TRUNCATED;
                first_failure = first_failure.or(Some(TmcOutcome::Truncated));
            }
            (0, 0)
        } else {
            let ring = data
                .get_mut(..slot_words.wrapping_mul(4))
                .unwrap_or(&mut []);
            let (words, ended) = drain_ram(io, ring, rsz);
            let kept = words.min(slot_words);
            if words > slot_words {
                // The ring's oldest kept word is where the next one would have gone.
                ring.rotate_left((words % slot_words).wrapping_mul(4));
            }
            if !ended {
                h.flags |= TMC_REC_RAM_STUCK;
                first_failure = first_failure.or(Some(TmcOutcome::RamReadStuck));
            } else if words > kept {
                left = words - kept;
                h.flags |= TMC_REC_TRUNCATED;
                first_failure = first_failure.or(Some(TmcOutcome::Truncated));
            }
            (words, kept)
        };
        trace_len = kept.wrapping_mul(4);
        if h.flags & (TMC_REC_WRAPPED | TMC_REC_TRUNCATED) != 0 && trace_len >= CS_BARRIER_LEN {
            if let Some(b) = data.get_mut(..CS_BARRIER_LEN) {
                for chunk in b.chunks_exact_mut(4) {
                    chunk.copy_from_slice(&CS_BARRIER_WORD.to_le_bytes());
                }
                h.flags |= TMC_REC_BARRIER;
            }
        }
        h.words_read = u32::try_from(words).unwrap_or(u32::MAX);
        h.words_dropped = u32::try_from(left).unwrap_or(u32::MAX);
        h.trace_len = u32::try_from(trace_len).unwrap_or(u32::MAX);

        // Like the C driver after its dump: leave the TMC disabled.
        io.write_reg(CTL::from_raw(0));
    }
    lock(io);

    let outcome = first_failure.unwrap_or(TmcOutcome::Complete);
    h.outcome_code = outcome.code();
    // The header is written last, once everything it describes is in place.
    let _ = h.encode(head);
    Ok(DrainSummary {
        outcome,
        flags: h.flags,
        trace_len,
        record_len: TMC_RECORD_HEADER_LEN.wrapping_add(trace_len),
    })
}

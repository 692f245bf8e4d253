// SPDX-License-Identifier: GPL-2.0

//! Hardware logic of the CoreSight Trace Memory Controller in its ETB and ETF configurations.
//!
//! Register offsets and bits follow the Arm CoreSight Trace Memory Controller Technical Reference
//! Manual (DDI 0461) and the Linux C driver (`coresight-tmc-core.c`, `coresight-tmc-etf.c`). The
//! sequences are generic over [`CsAccess`], so the kernel runs them over MMIO and the host tests
//! run them against the register-level model.
//!
//! The panic sequence, [`panic_drain`], stops the TMC the way the C driver does (set `StopOnFl`,
//! set `FlushMan`, wait for `FlushMan` to clear, wait for `TMCReady`) and then reads the trace RAM
//! through `RRD` into a caller's slot, behind a fixed header ([`TmcRecordHeader`]). Unlike the C
//! driver, every poll and the RAM read loop are bounded, the slot size is honoured (keeping the
//! newest trace when it is too small), and whatever went wrong is recorded in the header instead of
//! stopping the dump. It allocates nothing and never sleeps.
//!
//! This file is plain `core` Rust: it is compiled into the kernel driver and into the host crates.

use crate::access::CsAccess;
use crate::access::CS_AUTHSTATUS;
use crate::access::CS_DEVID;
use crate::access::CS_LAR;
use crate::access::CS_LSR;
use crate::access::CS_UNLOCK_KEY;

/// Offset of the RAM Size register (`RSZ`): the trace RAM size in 32-bit words.
pub const TMC_RSZ: u32 = 0x004;

/// Offset of the Status register (`STS`).
pub const TMC_STS: u32 = 0x00C;

/// Offset of the RAM Read Data register (`RRD`).
///
/// In Circular Buffer mode and Stopped state each read returns the next 32-bit word of trace and
/// advances `RRP`; once all of the trace has been read it returns [`TMC_RRD_EMPTY`].
pub const TMC_RRD: u32 = 0x010;

/// Offset of the RAM Read Pointer register (`RRP`), a byte address into the trace RAM.
pub const TMC_RRP: u32 = 0x014;

/// Offset of the RAM Write Pointer register (`RWP`), a byte address into the trace RAM.
pub const TMC_RWP: u32 = 0x018;

/// Offset of the Trigger Counter register (`TRG`).
pub const TMC_TRG: u32 = 0x01C;

/// Offset of the Control register (`CTL`).
pub const TMC_CTL: u32 = 0x020;

/// Offset of the RAM Write Data register (`RWD`).
pub const TMC_RWD: u32 = 0x024;

/// Offset of the Mode register (`MODE`).
pub const TMC_MODE: u32 = 0x028;

/// Offset of the Buffer Level Water Mark register (`BUFWM`).
pub const TMC_BUFWM: u32 = 0x034;

/// Offset of the Formatter and Flush Status register (`FFSR`).
pub const TMC_FFSR: u32 = 0x300;

/// Offset of the Formatter and Flush Control register (`FFCR`).
pub const TMC_FFCR: u32 = 0x304;

/// `STS.Full`: the write pointer has wrapped, the oldest trace starts at `RWP`.
pub const TMC_STS_FULL: u32 = 1 << 0;

/// `STS.Triggered`: a trigger has been observed.
pub const TMC_STS_TRIGGERED: u32 = 1 << 1;

/// `STS.TMCReady`: the TMC is in Disabled state or has drained its pipeline in Stopped state.
pub const TMC_STS_TMCREADY: u32 = 1 << 2;

/// `STS.FtEmpty`: the formatter pipeline is empty.
pub const TMC_STS_FTEMPTY: u32 = 1 << 3;

/// `STS.Empty`: in Circular Buffer mode, all of the trace has been read through `RRD`.
pub const TMC_STS_EMPTY: u32 = 1 << 4;

/// `STS.MemErr`: an error response on the memory interface (ETR only).
pub const TMC_STS_MEMERR: u32 = 1 << 5;

/// `CTL.TraceCaptEn`: enables trace capture.
pub const TMC_CTL_CAPTEN: u32 = 1 << 0;

/// `MODE` value for Circular Buffer mode (a sink).
pub const TMC_MODE_CIRCULAR_BUFFER: u32 = 0;

/// `MODE` value for Software FIFO mode.
pub const TMC_MODE_SOFTWARE_FIFO: u32 = 1;

/// `MODE` value for Hardware FIFO mode (an ETF used as a link).
pub const TMC_MODE_HARDWARE_FIFO: u32 = 2;

/// Mask of the mode field in `MODE`.
pub const TMC_MODE_MASK: u32 = 0x3;

/// `FFSR.FlInProg`: a flush is in progress.
pub const TMC_FFSR_FLINPROG: u32 = 1 << 0;

/// `FFSR.FtStopped`: the formatter has stopped.
pub const TMC_FFSR_FTSTOPPED: u32 = 1 << 1;

/// `FFCR.EnFt`: enables the formatter.
pub const TMC_FFCR_ENFT: u32 = 1 << 0;

/// `FFCR.EnTI`: inserts triggers into the formatted stream.
pub const TMC_FFCR_ENTI: u32 = 1 << 1;

/// `FFCR.FOnFlIn`: flushes on the flush input (`FLUSHIN`).
pub const TMC_FFCR_FONFLIN: u32 = 1 << 4;

/// `FFCR.FOnTrigEvt`: flushes on a trigger event.
pub const TMC_FFCR_FONTRIGEVT: u32 = 1 << 5;

/// `FFCR.FlushMan`: requests a manual flush; reads 1 until the flush has completed.
pub const TMC_FFCR_FLUSHMAN: u32 = 1 << 6;

/// `FFCR.TrigOnTrigIn`: indicates a trigger on the trigger input (`TRIGIN`).
pub const TMC_FFCR_TRIGONTRIGIN: u32 = 1 << 8;

/// `FFCR.StopOnFl`: stops the formatter when a flush completes.
pub const TMC_FFCR_STOPONFL: u32 = 1 << 12;

/// The `FFCR` value the C driver programs for a sink in Circular Buffer mode (without `StopOnFl`).
pub const TMC_FFCR_SINK: u32 =
    TMC_FFCR_ENFT | TMC_FFCR_ENTI | TMC_FFCR_FONFLIN | TMC_FFCR_FONTRIGEVT | TMC_FFCR_TRIGONTRIGIN;

/// Shift of `DEVID.CONFIGTYPE` (bits 7:6).
pub const TMC_DEVID_CONFIGTYPE_SHIFT: u32 = 6;

/// Mask of `DEVID.CONFIGTYPE` after shifting.
pub const TMC_DEVID_CONFIGTYPE_MASK: u32 = 0x3;

/// Shift of `DEVID.MEMWIDTH` (bits 10:8).
pub const TMC_DEVID_MEMWIDTH_SHIFT: u32 = 8;

/// Mask of `DEVID.MEMWIDTH` after shifting.
pub const TMC_DEVID_MEMWIDTH_MASK: u32 = 0x7;

/// `LSR.SLI`: the software lock is implemented.
pub const CS_LSR_SLI: u32 = 1 << 0;

/// `LSR.SLK`: the software lock is set; writes other than to `LAR` are ignored.
pub const CS_LSR_SLK: u32 = 1 << 1;

/// The value `RRD` returns when there is no more data to read.
///
/// The formatter never produces it, so it can mark the end of the buffer.
pub const TMC_RRD_EMPTY: u32 = 0xFFFF_FFFF;

/// One word of the barrier packet inserted where the trace stream restarts.
///
/// Four of them are a full frame synchronisation sequence that resets the frame decoder, as in
/// the C driver's `coresight_barrier_pkt`.
pub const CS_BARRIER_WORD: u32 = 0x7FFF_FFFF;

/// Size in bytes of the barrier packet (four [`CS_BARRIER_WORD`]s).
pub const CS_BARRIER_LEN: usize = 16;

/// Size in bytes of one formatter frame.
pub const CS_FRAME_LEN: usize = 16;

/// How many times a status bit is polled before giving up.
///
/// TIMEOUT: the C driver (`coresight_timeout()`) polls 100 times 1 us apart. At panic there is
/// nothing to hurry for and a flush cut short loses the last trace, so this allows ten times
/// longer: at most 1000 polls, about 1 ms per wait.
pub const TMC_POLL_TRIES: u32 = 1000;

/// Delay in microseconds between two polls of a status bit.
pub const TMC_POLL_DELAY_US: u32 = 1;

/// Upper bound on the number of RAM words read, whatever `RSZ` says.
///
/// A TMC in the ETB or ETF configuration has at most a few hundred KiB of RAM; this bound (16 MiB)
/// only keeps a broken `RSZ` from turning the drain into a practically endless loop.
pub const TMC_MAX_RAM_WORDS: u32 = 1 << 22;

/// The TMC configuration reported by `DEVID.CONFIGTYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcConfigType {
    /// Embedded Trace Buffer: a sink with local RAM.
    Etb,
    /// Embedded Trace Router: writes trace to system memory.
    Etr,
    /// Embedded Trace FIFO: local RAM used as a sink or as a FIFO link.
    Etf,
    /// A reserved encoding.
    Reserved,
}

impl TmcConfigType {
    /// Decodes `DEVID.CONFIGTYPE`.
    pub fn from_devid(devid: u32) -> Self {
        match (devid >> TMC_DEVID_CONFIGTYPE_SHIFT) & TMC_DEVID_CONFIGTYPE_MASK {
            0 => Self::Etb,
            1 => Self::Etr,
            2 => Self::Etf,
            _ => Self::Reserved,
        }
    }
}

/// Returns the width of the trace memory in 32-bit words, from `DEVID.MEMWIDTH`.
///
/// Encodings 2..5 are 32, 64, 128 and 256 bits; anything else is taken as 32 bits.
pub fn memwidth_words(devid: u32) -> u32 {
    match (devid >> TMC_DEVID_MEMWIDTH_SHIFT) & TMC_DEVID_MEMWIDTH_MASK {
        3 => 2,
        4 => 4,
        5 => 8,
        _ => 1,
    }
}

/// Errors of the run-time (non-panic) sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcError {
    /// `STS.TMCReady` did not rise within [`TMC_POLL_TRIES`] polls.
    NotReady,
    /// `FFCR.FlushMan` did not clear within [`TMC_POLL_TRIES`] polls.
    FlushTimeout,
}

/// Unlocks the register frame by writing the key to `LAR`.
pub fn unlock<A: CsAccess + ?Sized>(io: &mut A) {
    io.write32(CS_LAR, CS_UNLOCK_KEY);
}

/// Locks the register frame again by writing anything but the key to `LAR`.
pub fn lock<A: CsAccess + ?Sized>(io: &mut A) {
    io.write32(CS_LAR, 0);
}

/// Returns whether the software lock is implemented and set (`LSR.SLI` and `LSR.SLK`).
pub fn is_locked<A: CsAccess + ?Sized>(io: &mut A) -> bool {
    let lsr = io.read32(CS_LSR);
    lsr & (CS_LSR_SLI | CS_LSR_SLK) == (CS_LSR_SLI | CS_LSR_SLK)
}

/// Polls `offset` until `(value & mask) == want`, bounded by [`TMC_POLL_TRIES`].
///
/// Returns `(reached, delays)`: whether the bit reached the wanted state, and how many delays
/// were spent waiting. Reads at most `TMC_POLL_TRIES + 1` times.
fn poll_bit<A: CsAccess + ?Sized>(io: &mut A, offset: u32, mask: u32, want: u32) -> (bool, u32) {
    let mut delays = 0;
    loop {
        if io.read32(offset) & mask == want {
            return (true, delays);
        }
        if delays >= TMC_POLL_TRIES {
            return (false, delays);
        }
        io.delay_us(TMC_POLL_DELAY_US);
        delays += 1;
    }
}

/// Waits, bounded, for `STS.TMCReady`; the frame must be unlocked.
///
/// Returns the number of delays spent waiting.
pub fn wait_ready<A: CsAccess + ?Sized>(io: &mut A) -> Result<u32, TmcError> {
    match poll_bit(io, TMC_STS, TMC_STS_TMCREADY, TMC_STS_TMCREADY) {
        (true, delays) => Ok(delays),
        (false, _) => Err(TmcError::NotReady),
    }
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
}

/// Flushes the formatter and stops capture; the frame must be unlocked.
///
/// Sets `FFCR.StopOnFl`, then `FFCR.FlushMan`, waits (bounded) for `FlushMan` to clear and then
/// for `STS.TMCReady`, like the C driver's `tmc_flush_and_stop()`. Like it, a flush timeout does
/// not skip the wait for `TMCReady`. `CTL` is left alone.
pub fn flush_and_stop<A: CsAccess + ?Sized>(io: &mut A) -> StopReport {
    let ffcr = io.read32(TMC_FFCR) | TMC_FFCR_STOPONFL;
    io.write32(TMC_FFCR, ffcr);
    io.write32(TMC_FFCR, ffcr | TMC_FFCR_FLUSHMAN);
    let (flush_done, flush_delays) = poll_bit(io, TMC_FFCR, TMC_FFCR_FLUSHMAN, 0);
    let (ready, ready_delays) = poll_bit(io, TMC_STS, TMC_STS_TMCREADY, TMC_STS_TMCREADY);
    StopReport {
        flush_done,
        flush_delays,
        ready,
        ready_delays,
    }
}

/// Enables capture as a sink in Circular Buffer mode with the formatter on.
///
/// Unlocks, checks `STS.TMCReady` (bounded), programs `MODE` = Circular Buffer,
/// `FFCR` = [`TMC_FFCR_SINK`], `TRG` = `trigger_count`, sets `CTL.TraceCaptEn` and locks again.
/// On a timeout nothing is programmed and the frame is locked again.
pub fn enable_circular<A: CsAccess + ?Sized>(
    io: &mut A,
    trigger_count: u32,
) -> Result<(), TmcError> {
    unlock(io);
    if let Err(e) = wait_ready(io) {
        lock(io);
        return Err(e);
    }
    io.write32(TMC_MODE, TMC_MODE_CIRCULAR_BUFFER);
    io.write32(TMC_FFCR, TMC_FFCR_SINK);
    io.write32(TMC_TRG, trigger_count);
    io.write32(TMC_CTL, TMC_CTL_CAPTEN);
    lock(io);
    Ok(())
}

/// Enables an ETF as a link in Hardware FIFO mode, as the C driver's `__tmc_etf_enable_hw()`.
pub fn enable_hw_fifo<A: CsAccess + ?Sized>(io: &mut A) -> Result<(), TmcError> {
    unlock(io);
    if let Err(e) = wait_ready(io) {
        lock(io);
        return Err(e);
    }
    io.write32(TMC_MODE, TMC_MODE_HARDWARE_FIFO);
    io.write32(TMC_FFCR, TMC_FFCR_ENFT | TMC_FFCR_ENTI);
    io.write32(TMC_BUFWM, 0);
    io.write32(TMC_CTL, TMC_CTL_CAPTEN);
    lock(io);
    Ok(())
}

/// Flushes, stops and disables capture, then locks the frame again.
///
/// `CTL` is cleared even when the flush or the wait for ready timed out; the first such failure
/// is returned.
pub fn disable<A: CsAccess + ?Sized>(io: &mut A) -> Result<(), TmcError> {
    unlock(io);
    let report = flush_and_stop(io);
    io.write32(TMC_CTL, 0);
    lock(io);
    report.result()
}

/// How a panic drain ended; stored in [`TmcRecordHeader::outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum TmcOutcome {
    /// The TMC stopped and all of its trace was read into the slot.
    Complete = 0,
    /// `CTL.TraceCaptEn` was clear: nothing was being captured, nothing was read.
    NotEnabled = 1,
    /// `MODE` was not Circular Buffer (an ETF used as a FIFO link): nothing was read.
    NotCircularBuffer = 2,
    /// The software lock stayed set after writing the key: nothing was read.
    Locked = 3,
    /// `FFCR.FlushMan` never cleared; the trace read afterwards may lack the last bytes.
    FlushTimeout = 4,
    /// `STS.TMCReady` never rose; whatever `RRD` returned was kept.
    ReadyTimeout = 5,
    /// `RRD` did not return the empty marker within `RSZ` words; what was read is kept.
    RamReadStuck = 6,
    /// The slot was smaller than the trace: the oldest trace was dropped.
    Truncated = 7,
}

impl TmcOutcome {
    /// Returns the outcome for a stored code, or `None` for a code this version does not know.
    pub fn from_code(code: u16) -> Option<Self> {
        Some(match code {
            0 => Self::Complete,
            1 => Self::NotEnabled,
            2 => Self::NotCircularBuffer,
            3 => Self::Locked,
            4 => Self::FlushTimeout,
            5 => Self::ReadyTimeout,
            6 => Self::RamReadStuck,
            7 => Self::Truncated,
            _ => return None,
        })
    }

    /// Returns the code stored in the record.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// Returns a short, stable name for reports (`snake_case`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::NotEnabled => "not_enabled",
            Self::NotCircularBuffer => "not_circular_buffer",
            Self::Locked => "locked",
            Self::FlushTimeout => "flush_timeout",
            Self::ReadyTimeout => "ready_timeout",
            Self::RamReadStuck => "ram_read_stuck",
            Self::Truncated => "truncated",
        }
    }
}

impl core::fmt::Display for TmcOutcome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Record flag: `STS.Full` was set, the buffer had wrapped and older trace was overwritten.
pub const TMC_REC_WRAPPED: u16 = 1 << 0;

/// Record flag: the first 16 bytes of the trace were replaced by the barrier packet.
pub const TMC_REC_BARRIER: u16 = 1 << 1;

/// Record flag: the slot was too small and the oldest words were dropped.
pub const TMC_REC_TRUNCATED: u16 = 1 << 2;

/// Record flag: the formatter had already stopped (`FFSR.FtStopped`), no flush was requested.
pub const TMC_REC_FLUSH_SKIPPED: u16 = 1 << 3;

/// Record flag: `FFCR.FlushMan` did not clear within the bound.
pub const TMC_REC_FLUSH_TIMEOUT: u16 = 1 << 4;

/// Record flag: `STS.TMCReady` did not rise within the bound.
pub const TMC_REC_READY_TIMEOUT: u16 = 1 << 5;

/// Record flag: `RRD` did not return the empty marker within the `RSZ` bound.
pub const TMC_REC_RAM_STUCK: u16 = 1 << 6;

/// Record flag: `RSZ` exceeded [`TMC_MAX_RAM_WORDS`] and the drain was bounded by the latter.
pub const TMC_REC_RSZ_CLAMPED: u16 = 1 << 7;

/// Magic at the start of a TMC record payload: `"TMCD"` in little-endian byte order.
pub const TMC_RECORD_MAGIC: u32 = u32::from_le_bytes(*b"TMCD");

/// Version of the TMC record payload layout.
pub const TMC_RECORD_VERSION: u16 = 1;

/// Size in bytes of the fixed header of a TMC record payload.
pub const TMC_RECORD_HEADER_LEN: usize = 72;

/// The fixed little-endian header in front of the trace bytes of a TMC record payload.
///
/// Layout (byte offsets, all little-endian):
///
/// | offset | size | field |
/// |-------:|-----:|-------|
/// | 0 | 4 | magic `"TMCD"` |
/// | 4 | 2 | version (1) |
/// | 6 | 2 | header length (72) |
/// | 8 | 2 | outcome code ([`TmcOutcome`]) |
/// | 10 | 2 | flags (`TMC_REC_*`) |
/// | 12 | 4 | `RSZ` |
/// | 16 | 4 | `STS` after the stop, before the drain |
/// | 20 | 4 | `CTL` on entry |
/// | 24 | 4 | `MODE` |
/// | 28 | 4 | `FFCR` on entry |
/// | 32 | 4 | `FFSR` after the stop |
/// | 36 | 4 | `RRP` before the drain |
/// | 40 | 4 | `RWP` before the drain |
/// | 44 | 4 | `DEVID` |
/// | 48 | 4 | `AUTHSTATUS` |
/// | 52 | 4 | number of trace bytes following the header |
/// | 56 | 4 | data words read from `RRD` (including dropped ones) |
/// | 60 | 4 | words dropped because the slot was too small |
/// | 64 | 4 | delays spent waiting for the flush |
/// | 68 | 4 | delays spent waiting for `TMCReady` |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TmcRecordHeader {
    /// Layout version ([`TMC_RECORD_VERSION`]).
    pub version: u16,
    /// Outcome code, see [`TmcRecordHeader::outcome`].
    pub outcome_code: u16,
    /// `TMC_REC_*` flags.
    pub flags: u16,
    /// `RSZ`: RAM size in 32-bit words.
    pub rsz: u32,
    /// `STS` after the stop, before the drain.
    pub sts: u32,
    /// `CTL` on entry.
    pub ctl: u32,
    /// `MODE`.
    pub mode: u32,
    /// `FFCR` on entry (before `StopOnFl` and `FlushMan` were set).
    pub ffcr: u32,
    /// `FFSR` after the stop.
    pub ffsr: u32,
    /// `RRP` before the drain (byte address).
    pub rrp: u32,
    /// `RWP` before the drain (byte address).
    pub rwp: u32,
    /// `DEVID`.
    pub devid: u32,
    /// `AUTHSTATUS`.
    pub authstatus: u32,
    /// Number of trace bytes that follow the header.
    pub trace_len: u32,
    /// Data words read from `RRD`, including those dropped for lack of room.
    pub words_read: u32,
    /// Oldest words dropped because the slot was too small.
    pub words_dropped: u32,
    /// Delays spent waiting for `FFCR.FlushMan` to clear.
    pub flush_delays: u32,
    /// Delays spent waiting for `STS.TMCReady`.
    pub ready_delays: u32,
}

/// Errors of [`TmcRecord::parse`] and of [`panic_drain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcRecordError {
    /// The buffer is shorter than the header (or the slot cannot hold one).
    TooShort,
    /// The magic is not [`TMC_RECORD_MAGIC`].
    BadMagic,
    /// The version is not one this code reads.
    BadVersion(u16),
    /// The header length is smaller than this version's header.
    BadHeaderLen(u16),
    /// The trace length runs past the end of the buffer.
    TraceLenOutOfBounds {
        /// The trace length in the header.
        trace_len: u32,
        /// Bytes available after the header.
        available: usize,
    },
}

impl core::fmt::Display for TmcRecordError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooShort => f.write_str("TMC record shorter than its header"),
            Self::BadMagic => f.write_str("TMC record magic is not \"TMCD\""),
            Self::BadVersion(v) => write!(f, "unknown TMC record version {v}"),
            Self::BadHeaderLen(l) => write!(f, "TMC record header length {l} too small"),
            Self::TraceLenOutOfBounds {
                trace_len,
                available,
            } => write!(
                f,
                "TMC record trace length {trace_len} exceeds the {available} bytes present"
            ),
        }
    }
}

fn put_u16(out: &mut [u8], off: usize, v: u16) {
    if let Some(d) = out.get_mut(off..off.wrapping_add(2)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u32(out: &mut [u8], off: usize, v: u32) {
    if let Some(d) = out.get_mut(off..off.wrapping_add(4)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

fn get_u16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off.wrapping_add(2)) {
        Some(&[a, c]) => u16::from_le_bytes([a, c]),
        _ => 0,
    }
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off.wrapping_add(4)) {
        Some(&[a, c, d, e]) => u32::from_le_bytes([a, c, d, e]),
        _ => 0,
    }
}

impl TmcRecordHeader {
    /// Returns the outcome, or `None` for a code this version does not know.
    pub fn outcome(&self) -> Option<TmcOutcome> {
        TmcOutcome::from_code(self.outcome_code)
    }

    /// Returns whether all of `flags` are set.
    pub fn has(&self, flags: u16) -> bool {
        self.flags & flags == flags
    }

    /// Encodes the header into the first [`TMC_RECORD_HEADER_LEN`] bytes of `out`.
    ///
    /// Returns `None`, writing nothing, when `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<()> {
        let out = out.get_mut(..TMC_RECORD_HEADER_LEN)?;
        put_u32(out, 0, TMC_RECORD_MAGIC);
        put_u16(out, 4, self.version);
        // CAST: the header length is a small constant.
        put_u16(out, 6, TMC_RECORD_HEADER_LEN as u16);
        put_u16(out, 8, self.outcome_code);
        put_u16(out, 10, self.flags);
        let words = [
            self.rsz,
            self.sts,
            self.ctl,
            self.mode,
            self.ffcr,
            self.ffsr,
            self.rrp,
            self.rwp,
            self.devid,
            self.authstatus,
            self.trace_len,
            self.words_read,
            self.words_dropped,
            self.flush_delays,
            self.ready_delays,
        ];
        let mut off = 12;
        for w in words {
            put_u32(out, off, w);
            off += 4;
        }
        Some(())
    }

    /// Decodes a header from the start of `b`, checking magic, version and header length.
    pub fn decode(b: &[u8]) -> Result<Self, TmcRecordError> {
        if b.len() < TMC_RECORD_HEADER_LEN {
            return Err(TmcRecordError::TooShort);
        }
        if get_u32(b, 0) != TMC_RECORD_MAGIC {
            return Err(TmcRecordError::BadMagic);
        }
        let version = get_u16(b, 4);
        if version != TMC_RECORD_VERSION {
            return Err(TmcRecordError::BadVersion(version));
        }
        let header_len = get_u16(b, 6);
        if usize::from(header_len) < TMC_RECORD_HEADER_LEN {
            return Err(TmcRecordError::BadHeaderLen(header_len));
        }
        Ok(Self {
            version,
            outcome_code: get_u16(b, 8),
            flags: get_u16(b, 10),
            rsz: get_u32(b, 12),
            sts: get_u32(b, 16),
            ctl: get_u32(b, 20),
            mode: get_u32(b, 24),
            ffcr: get_u32(b, 28),
            ffsr: get_u32(b, 32),
            rrp: get_u32(b, 36),
            rwp: get_u32(b, 40),
            devid: get_u32(b, 44),
            authstatus: get_u32(b, 48),
            trace_len: get_u32(b, 52),
            words_read: get_u32(b, 56),
            words_dropped: get_u32(b, 60),
            flush_delays: get_u32(b, 64),
            ready_delays: get_u32(b, 68),
        })
    }
}

/// The TMC record payload: a [`TmcRecordHeader`] followed by the trace bytes.
pub struct TmcRecord;

impl TmcRecord {
    /// Splits a record payload into its header and its trace bytes.
    ///
    /// The trace length is bounded by the buffer: a header claiming more bytes than present is an
    /// error. A header longer than this version's (a later minor extension) is skipped over.
    pub fn parse(b: &[u8]) -> Result<(TmcRecordHeader, &[u8]), TmcRecordError> {
        let h = TmcRecordHeader::decode(b)?;
        let header_len = usize::from(get_u16(b, 6));
        let rest = b.get(header_len..).ok_or(TmcRecordError::TooShort)?;
        let len = usize::try_from(h.trace_len).unwrap_or(usize::MAX);
        let trace = rest.get(..len).ok_or(TmcRecordError::TraceLenOutOfBounds {
            trace_len: h.trace_len,
            available: rest.len(),
        })?;
        Ok((h, trace))
    }

    /// Returns the slot size that holds the header and all of a RAM of `rsz_words` words.
    ///
    /// Drivers call it at probe time to size their slot; `None` on overflow.
    pub fn slot_len_for(rsz_words: u32) -> Option<usize> {
        usize::try_from(rsz_words)
            .ok()?
            .checked_mul(4)?
            .checked_add(TMC_RECORD_HEADER_LEN)
    }
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

/// Reads `RRD` until it returns [`TMC_RRD_EMPTY`], into `data` used as a ring of whole frames.
///
/// Returns `(words read, ended)`. At most `bound + 1` reads: `bound` data words and the read that
/// must return the empty marker.
fn drain_ram<A: CsAccess + ?Sized>(
    io: &mut A,
    data: &mut [u8],
    cap_words: usize,
    bound: usize,
) -> (usize, bool) {
    let mut words: usize = 0;
    loop {
        let w = io.read32(TMC_RRD);
        if w == TMC_RRD_EMPTY {
            return (words, true);
        }
        if words >= bound {
            return (words, false);
        }
        if cap_words > 0 {
            let at = (words % cap_words).wrapping_mul(4);
            if let Some(d) = data.get_mut(at..at.wrapping_add(4)) {
                d.copy_from_slice(&w.to_le_bytes());
            }
        }
        words += 1;
    }
}

/// Stops the TMC and copies its trace RAM into `slot` as a TMC record; the panic path.
///
/// The sequence: unlock; read `CTL`, `MODE`, `FFSR`, `FFCR`; when capturing in Circular Buffer
/// mode, flush and stop ([`flush_and_stop`]) unless the formatter has already stopped, in which
/// case only wait for `TMCReady`; read `STS`, `RRP`, `RWP`, `RSZ`, `FFSR`, `DEVID`,
/// `AUTHSTATUS`; read `RRD` until it returns the empty marker, at most `RSZ` data words; clear
/// `CTL`; lock.
///
/// The trace is written straight into the slot after the header. When the slot cannot hold all of
/// it, the slot is used as a ring of whole frames so that the newest trace is kept, and rotated in
/// place at the end. When the buffer had wrapped (`STS.Full`) or words were dropped, the first 16
/// bytes are replaced by the barrier packet, as the C driver's `tmc_etb_dump_hw()` does, so that
/// decoders resynchronise where the stream restarts.
///
/// The register accesses are one `RRD` read per word, one more that reads the empty marker, and a
/// bounded number of others (at most `2 * (TMC_POLL_TRIES + 1) + 18`), whatever `RSZ` is.
///
/// Returns an error, touching no register, only when `slot` cannot hold the header.
pub fn panic_drain<A: CsAccess + ?Sized>(
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
    let mut first_failure: Option<TmcOutcome> = None;

    unlock(io);
    let locked = is_locked(io);
    h.ctl = io.read32(TMC_CTL);
    h.mode = io.read32(TMC_MODE);
    let ffsr_entry = io.read32(TMC_FFSR);
    h.ffcr = io.read32(TMC_FFCR);

    let drain = if locked {
        first_failure = Some(TmcOutcome::Locked);
        false
    } else if h.ctl & TMC_CTL_CAPTEN == 0 {
        first_failure = Some(TmcOutcome::NotEnabled);
        false
    } else if h.mode & TMC_MODE_MASK != TMC_MODE_CIRCULAR_BUFFER {
        first_failure = Some(TmcOutcome::NotCircularBuffer);
        false
    } else {
        let report = if ffsr_entry & TMC_FFSR_FTSTOPPED != 0 {
            h.flags |= TMC_REC_FLUSH_SKIPPED;
            let (ready, ready_delays) = poll_bit(io, TMC_STS, TMC_STS_TMCREADY, TMC_STS_TMCREADY);
            StopReport {
                flush_done: true,
                flush_delays: 0,
                ready,
                ready_delays,
            }
        } else {
            flush_and_stop(io)
        };
        h.flush_delays = report.flush_delays;
        h.ready_delays = report.ready_delays;
        if !report.flush_done {
            h.flags |= TMC_REC_FLUSH_TIMEOUT;
            first_failure = first_failure.or(Some(TmcOutcome::FlushTimeout));
        }
        if !report.ready {
            h.flags |= TMC_REC_READY_TIMEOUT;
            first_failure = first_failure.or(Some(TmcOutcome::ReadyTimeout));
        }
        // Even when not ready, try: outside Stopped state `RRD` reads the empty marker at once.
        true
    };

    h.sts = io.read32(TMC_STS);
    h.rrp = io.read32(TMC_RRP);
    h.rwp = io.read32(TMC_RWP);
    h.rsz = io.read32(TMC_RSZ);
    h.ffsr = io.read32(TMC_FFSR);
    h.devid = io.read32(CS_DEVID);
    h.authstatus = io.read32(CS_AUTHSTATUS);
    if h.sts & TMC_STS_FULL != 0 {
        h.flags |= TMC_REC_WRAPPED;
    }

    let mut trace_len: usize = 0;
    if drain {
        let mut bound = h.rsz;
        if bound > TMC_MAX_RAM_WORDS {
            bound = TMC_MAX_RAM_WORDS;
            h.flags |= TMC_REC_RSZ_CLAMPED;
        }
        let bound = usize::try_from(bound).unwrap_or(0);
        // Keep whole frames (and whole memory words) so that the kept trace starts on a frame.
        let align = usize::try_from(memwidth_words(h.devid)).unwrap_or(1).max(4);
        let cap_words = (data.len() / 4 / align).wrapping_mul(align).min(bound);

        let (words, ended) = drain_ram(io, data, cap_words, bound);
        if !ended {
            h.flags |= TMC_REC_RAM_STUCK;
            first_failure = first_failure.or(Some(TmcOutcome::RamReadStuck));
        }
        let kept = words.min(cap_words);
        let dropped = words.wrapping_sub(kept);
        if dropped > 0 {
            h.flags |= TMC_REC_TRUNCATED;
            first_failure = first_failure.or(Some(TmcOutcome::Truncated));
            if cap_words > 0 {
                let start = (words % cap_words).wrapping_mul(4);
                if let Some(ring) = data.get_mut(..cap_words.wrapping_mul(4)) {
                    if start < ring.len() {
                        ring.rotate_left(start);
                    }
                }
            }
        }
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
        h.words_dropped = u32::try_from(dropped).unwrap_or(u32::MAX);
        h.trace_len = u32::try_from(trace_len).unwrap_or(u32::MAX);

        // Like the C driver after its dump: leave the TMC disabled.
        io.write32(TMC_CTL, 0);
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

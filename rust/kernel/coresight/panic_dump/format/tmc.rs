// SPDX-License-Identifier: GPL-2.0

//! The payload of a TMC (ETB/ETF) sink record: a fixed header with the registers read at panic
//! and how the drain went, then the trace bytes read from the trace RAM.
//!
//! Written by the TMC driver's panic drain, read by the host tool. Shared with the host
//! (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::LeWriter,
    sink::{
        from_header_error,
        leading_of,
        trace_after,
        HeaderError,
        Leading, //
    },
};

/// One word of the barrier packet inserted where the trace stream restarts.
///
/// Four of them are a full frame synchronisation sequence that resets the frame decoder, as in
/// the C driver's `coresight_barrier_pkt`.
pub const CS_BARRIER_WORD: u32 = 0x7FFF_FFFF;

/// Size in bytes of the barrier packet (four [`CS_BARRIER_WORD`]s).
pub const CS_BARRIER_LEN: usize = 16;

/// Size in bytes of one formatter frame.
pub const CS_FRAME_LEN: usize = 16;

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
    /// The slot holds fewer words than the RAM had: the drain kept the newest words that fit
    /// (the last written before the stop) and dropped the older ones. (Records of version 1
    /// kept the oldest words the slot holds and left the rest unread.)
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

/// Record flag: the slot was too small for the trace; see [`TmcOutcome::Truncated`].
pub const TMC_REC_TRUNCATED: u16 = 1 << 2;

/// Record flag: the formatter had already stopped (`FFSR.FtStopped`), no flush was requested.
pub const TMC_REC_FLUSH_SKIPPED: u16 = 1 << 3;

/// Record flag: `FFCR.FlushMan` did not clear within the bound.
pub const TMC_REC_FLUSH_TIMEOUT: u16 = 1 << 4;

/// Record flag: `STS.TMCReady` did not rise within the bound.
pub const TMC_REC_READY_TIMEOUT: u16 = 1 << 5;

/// Record flag: `RRD` did not return the empty marker within the `RSZ` bound.
pub const TMC_REC_RAM_STUCK: u16 = 1 << 6;

/// Record flag: `RSZ` was larger than the slot holds, and the drain read at most the slot's words.
pub const TMC_REC_RSZ_CLAMPED: u16 = 1 << 7;

/// Magic at the start of a TMC record payload: `"TMCD"` in little-endian byte order.
pub const TMC_RECORD_MAGIC: u32 = u32::from_le_bytes(*b"TMCD");

/// Version of the TMC record payload layout.
///
/// Version 2 keeps the newest words when the slot is too small (see [`TmcOutcome::Truncated`]);
/// version 1 records, of the same layout, are read too.
pub const TMC_RECORD_VERSION: u16 = 2;

/// Size in bytes of the fixed header of a TMC record payload.
pub const TMC_RECORD_HEADER_LEN: usize = 72;

/// The fixed little-endian header in front of the trace bytes of a TMC record payload.
///
/// Layout (byte offsets, all little-endian):
///
/// | offset | size | field |
/// |-------:|-----:|-------|
/// | 0 | 4 | magic `"TMCD"` |
/// | 4 | 2 | version (2; 1 is read too) |
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
    /// Data words read from `RRD`: the kept and the dropped (version 1: the kept only).
    pub words_read: u32,
    /// Words the record does not hold because the slot was too small: the oldest, read and
    /// dropped, or those the pointers say were left when the slot has no room for a frame
    /// (version 1: the newest, left in the RAM).
    pub words_dropped: u32,
    /// Delays spent waiting for `FFCR.FlushMan` to clear.
    pub flush_delays: u32,
    /// Delays spent waiting for `STS.TMCReady`.
    pub ready_delays: u32,
}

/// Errors of [`TmcRecord::parse`] and of the TMC driver's panic drain.
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

from_header_error!(TmcRecordError);

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
        let mut w = LeWriter::new(out);
        self.leading()
            .encode(&mut w, TMC_RECORD_MAGIC, TMC_RECORD_HEADER_LEN);
        for v in [
            self.rrp,
            self.rwp,
            self.devid,
            self.authstatus,
            self.trace_len,
            self.words_read,
            self.words_dropped,
            self.flush_delays,
            self.ready_delays,
        ] {
            w.u32(v);
        }
        Some(())
    }

    /// Decodes a header from the start of `b`, checking magic, version and header length.
    pub fn decode(b: &[u8]) -> Result<Self, TmcRecordError> {
        let (l, mut r) = Leading::decode(
            b,
            TMC_RECORD_MAGIC,
            1..=TMC_RECORD_VERSION,
            TMC_RECORD_HEADER_LEN,
        )?;
        let [rsz, sts, ctl, mode, ffcr, ffsr] = l.regs;
        Ok(Self {
            version: l.version,
            outcome_code: l.outcome_code,
            flags: l.flags,
            rsz,
            sts,
            ctl,
            mode,
            ffcr,
            ffsr,
            rrp: r.u32(),
            rwp: r.u32(),
            devid: r.u32(),
            authstatus: r.u32(),
            trace_len: r.u32(),
            words_read: r.u32(),
            words_dropped: r.u32(),
            flush_delays: r.u32(),
            ready_delays: r.u32(),
        })
    }

    /// The fields a TMC record header shares with an ETR record header.
    fn leading(&self) -> Leading {
        leading_of!(self)
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
        let trace = trace_after(b, h.trace_len)?;
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

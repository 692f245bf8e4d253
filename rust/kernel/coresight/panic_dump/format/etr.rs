// SPDX-License-Identifier: GPL-2.0

//! The payload of a TMC-ETR sink record: the registers read at panic, where the trace buffer is,
//! and, when the buffer is not reserved memory, the newest trace copied out of it.
//!
//! An ETR (the TMC in its Embedded Trace Router configuration) writes trace through its AXI
//! master into a circular buffer of `RSZ` words at `DBA` in system memory. At panic its driver
//! flushes and stops it and records the registers that say where the trace is. What happens to
//! the trace depends on the buffer:
//!
//! - a reserved `tracedata` region (the device-tree binding of the TMC crash data): the trace
//!   stays where it is ([`ETR_REC_IN_PLACE`]) and the record holds only the header. After kdump
//!   the capture kernel hands a `no-map` region over as a vmcore device dump named by
//!   [`tracedata_dump_name`]; after a warm reboot the next boot appends it to its copy of the
//!   previous dump as a [`TracedataAttachment`]; a vmcore of the whole memory holds it at its
//!   physical address;
//! - any other buffer (a DMA allocation): the newest trace, oldest byte first, is copied behind
//!   the header, at most what the slot holds ([`EtrLayout::newest`]).
//!
//! Either way [`EtrLayout`] says which bytes of the buffer hold the trace and in which order
//! (`STS.Full`: the oldest byte is at `RWP`, the buffer is full; else from `DBA` to `RWP`): the
//! driver copies with it, the host tool unwraps with it. The bytes are the buffer's as the ETR
//! wrote them; a reader puts the barrier packet ([`super::tmc::CS_BARRIER_WORD`]) over the first
//! 16 bytes of a trace that starts inside the stream (a wrapped or cut buffer), as the decoders
//! expect.
//!
//! Written by the TMC driver's panic callback and the panic-dump core (the attachment), read by
//! the host tool. Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{
        get_u16,
        get_u32,
        get_u64,
        LeWriter, //
    },
    crc::{
        crc32,
        crc_with_zero_field, //
    },
    sink::{
        from_header_error,
        leading_of,
        trace_after,
        HeaderError,
        Leading, //
    },
};

/// `STS.Full`: the write pointer wrapped, the buffer is full.
pub const ETR_STS_FULL: u32 = 1 << 0;

/// `STS.MemErr`: a write to memory failed; the buffer's content cannot be trusted.
pub const ETR_STS_MEMERR: u32 = 1 << 5;

/// Size in bytes of one formatter frame, the unit the buffer is cut in.
pub const ETR_FRAME_LEN: u64 = 16;

/// Record flag: the trace stayed in the buffer (reserved memory); no trace bytes follow.
pub const ETR_REC_IN_PLACE: u16 = 1 << 0;

/// Record flag: `STS.Full` was set, the buffer had wrapped.
pub const ETR_REC_WRAPPED: u16 = 1 << 1;

/// Record flag: the slot was smaller than the trace; the oldest bytes were not copied.
pub const ETR_REC_TRUNCATED: u16 = 1 << 2;

/// Record flag: the formatter had already stopped (`FFSR.FtStopped`), no flush was requested.
pub const ETR_REC_FLUSH_SKIPPED: u16 = 1 << 3;

/// Record flag: `FFCR.FlushMan` did not clear within the bound.
pub const ETR_REC_FLUSH_TIMEOUT: u16 = 1 << 4;

/// Record flag: `STS.TMCReady` did not rise within the bound.
pub const ETR_REC_READY_TIMEOUT: u16 = 1 << 5;

/// Record flag: `STS.MemErr` was set.
pub const ETR_REC_MEMERR: u16 = 1 << 6;

/// Magic at the start of an ETR record payload: `"ETRD"` in little-endian byte order.
pub const ETR_RECORD_MAGIC: u32 = u32::from_le_bytes(*b"ETRD");

/// Version of the ETR record payload layout.
pub const ETR_RECORD_VERSION: u16 = 1;

/// Size in bytes of the fixed header of an ETR record payload.
pub const ETR_RECORD_HEADER_LEN: usize = 120;

/// How an ETR's panic callback ended; stored in [`EtrRecordHeader::outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum EtrOutcome {
    /// The ETR stopped; the record says where all of its trace is.
    Complete = 0,
    /// `CTL.TraceCaptEn` was clear: nothing was being captured.
    NotEnabled = 1,
    /// `MODE` was not Circular Buffer: nothing was recorded of the buffer.
    NotCircularBuffer = 2,
    /// The software lock stayed set after writing the key: nothing was recorded.
    Locked = 3,
    /// `FFCR.FlushMan` never cleared; the buffer may lack the last bytes.
    FlushTimeout = 4,
    /// `STS.TMCReady` never rose; the pointers and bytes are those of a unit still running.
    ReadyTimeout = 5,
    /// `STS.MemErr` was set: the ETR could not write the buffer; no trace is usable.
    MemErr = 6,
    /// The slot was smaller than the trace: only the newest bytes were copied.
    Truncated = 7,
    /// The pointers do not lie in the buffer the driver gave the ETR: nothing is usable.
    BadPointers = 8,
    /// Capture was on, but the driver had no buffer to record (a session being set up).
    NoBuffer = 9,
}

impl EtrOutcome {
    /// Returns the outcome for a stored code, or `None` for a code this version does not know.
    pub fn from_code(code: u16) -> Option<Self> {
        Some(match code {
            0 => Self::Complete,
            1 => Self::NotEnabled,
            2 => Self::NotCircularBuffer,
            3 => Self::Locked,
            4 => Self::FlushTimeout,
            5 => Self::ReadyTimeout,
            6 => Self::MemErr,
            7 => Self::Truncated,
            8 => Self::BadPointers,
            9 => Self::NoBuffer,
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
            Self::MemErr => "memory_error",
            Self::Truncated => "truncated",
            Self::BadPointers => "bad_pointers",
            Self::NoBuffer => "no_buffer",
        }
    }

    /// Returns whether the record holds (or points to) trace worth decoding.
    pub fn has_trace(self) -> bool {
        matches!(
            self,
            Self::Complete | Self::FlushTimeout | Self::ReadyTimeout | Self::Truncated
        )
    }
}

impl core::fmt::Display for EtrOutcome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of [`EtrRecord::parse`], [`EtrLayout::from_registers`] and the driver's panic callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtrRecordError {
    /// The buffer is shorter than the header (or the slot cannot hold one).
    TooShort,
    /// The magic is not [`ETR_RECORD_MAGIC`].
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
    /// `RSZ` is zero: there is no buffer.
    NoBuffer,
    /// `RWP` is not inside the buffer of `RSZ` words at `DBA`, or not word aligned.
    PointerOutside {
        /// `RWP`.
        rwp: u64,
        /// `DBA`.
        dba: u64,
        /// Size of the buffer in bytes (`RSZ * 4`).
        size: u64,
    },
}

from_header_error!(EtrRecordError);

impl core::fmt::Display for EtrRecordError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooShort => f.write_str("ETR record shorter than its header"),
            Self::BadMagic => f.write_str("ETR record magic is not \"ETRD\""),
            Self::BadVersion(v) => write!(f, "unknown ETR record version {v}"),
            Self::BadHeaderLen(l) => write!(f, "ETR record header length {l} too small"),
            Self::TraceLenOutOfBounds {
                trace_len,
                available,
            } => write!(
                f,
                "ETR record trace length {trace_len} exceeds the {available} bytes present"
            ),
            Self::NoBuffer => f.write_str("RSZ is 0: the ETR had no buffer"),
            Self::PointerOutside { rwp, dba, size } => write!(
                f,
                "RWP {rwp:#x} is not a word inside the buffer of {size:#x} bytes at DBA {dba:#x}"
            ),
        }
    }
}

/// The fixed little-endian header of an ETR record payload.
///
/// Layout (byte offsets, all little-endian):
///
/// | offset | size | field |
/// |-------:|-----:|-------|
/// | 0 | 4 | magic `"ETRD"` |
/// | 4 | 2 | version (1) |
/// | 6 | 2 | header length (120) |
/// | 8 | 2 | outcome code ([`EtrOutcome`]) |
/// | 10 | 2 | flags (`ETR_REC_*`) |
/// | 12 | 4 | `RSZ` (buffer size in 32-bit words) |
/// | 16 | 4 | `STS` after the stop |
/// | 20 | 4 | `CTL` on entry |
/// | 24 | 4 | `MODE` |
/// | 28 | 4 | `FFCR` on entry |
/// | 32 | 4 | `FFSR` after the stop |
/// | 36 | 4 | `DEVID` |
/// | 40 | 4 | `AUTHSTATUS` |
/// | 44 | 4 | `AXICTL` |
/// | 48 | 8 | `RRP` (`RRPHI:RRP`) after the stop |
/// | 56 | 8 | `RWP` (`RWPHI:RWP`) after the stop |
/// | 64 | 8 | `DBA` (`DBAHI:DBALO`) |
/// | 72 | 8 | physical address of the buffer byte at `DBA` (0: unknown) |
/// | 80 | 8 | size in bytes of the memory the driver gave the ETR there |
/// | 88 | 8 | buffer offset (from `DBA`) of the first byte copied behind the header |
/// | 96 | 8 | bytes of trace the buffer held ([`EtrLayout::len`]) |
/// | 104 | 4 | number of trace bytes following the header |
/// | 108 | 4 | delays spent waiting for the flush |
/// | 112 | 4 | delays spent waiting for `TMCReady` |
/// | 116 | 4 | reserved, 0 |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EtrRecordHeader {
    /// Layout version ([`ETR_RECORD_VERSION`]).
    pub version: u16,
    /// Outcome code, see [`EtrRecordHeader::outcome`].
    pub outcome_code: u16,
    /// `ETR_REC_*` flags.
    pub flags: u16,
    /// `RSZ`: buffer size in 32-bit words.
    pub rsz: u32,
    /// `STS` after the stop.
    pub sts: u32,
    /// `CTL` on entry.
    pub ctl: u32,
    /// `MODE`.
    pub mode: u32,
    /// `FFCR` on entry (before `StopOnFl` and `FlushMan` were set).
    pub ffcr: u32,
    /// `FFSR` after the stop.
    pub ffsr: u32,
    /// `DEVID`.
    pub devid: u32,
    /// `AUTHSTATUS`.
    pub authstatus: u32,
    /// `AXICTL`.
    pub axictl: u32,
    /// `RRP` after the stop (a bus address).
    pub rrp: u64,
    /// `RWP` after the stop (a bus address).
    pub rwp: u64,
    /// `DBA`, the bus address of the buffer.
    pub dba: u64,
    /// Physical address of the buffer's first byte, as the CPUs see it; 0 when unknown.
    pub buf_paddr: u64,
    /// Size in bytes of the memory at `buf_paddr` that the driver gave the ETR.
    pub buf_size: u64,
    /// Buffer offset of the first trace byte copied behind the header.
    pub data_start: u64,
    /// Bytes of trace the buffer held.
    pub data_len: u64,
    /// Number of trace bytes that follow the header.
    pub trace_len: u32,
    /// Delays spent waiting for `FFCR.FlushMan` to clear.
    pub flush_delays: u32,
    /// Delays spent waiting for `STS.TMCReady`.
    pub ready_delays: u32,
}

impl EtrRecordHeader {
    /// Returns the outcome, or `None` for a code this version does not know.
    pub fn outcome(&self) -> Option<EtrOutcome> {
        EtrOutcome::from_code(self.outcome_code)
    }

    /// Returns whether all of `flags` are set.
    pub fn has(&self, flags: u16) -> bool {
        self.flags & flags == flags
    }

    /// Encodes the header into the first [`ETR_RECORD_HEADER_LEN`] bytes of `out`.
    ///
    /// Returns `None`, writing nothing, when `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<()> {
        let out = out.get_mut(..ETR_RECORD_HEADER_LEN)?;
        let mut w = LeWriter::new(out);
        self.leading()
            .encode(&mut w, ETR_RECORD_MAGIC, ETR_RECORD_HEADER_LEN);
        for v in [self.devid, self.authstatus, self.axictl] {
            w.u32(v);
        }
        for v in [
            self.rrp,
            self.rwp,
            self.dba,
            self.buf_paddr,
            self.buf_size,
            self.data_start,
            self.data_len,
        ] {
            w.u64(v);
        }
        for v in [self.trace_len, self.flush_delays, self.ready_delays, 0] {
            w.u32(v);
        }
        Some(())
    }

    /// Decodes a header from the start of `b`, checking magic, version and header length.
    pub fn decode(b: &[u8]) -> Result<Self, EtrRecordError> {
        let (l, mut r) = Leading::decode(
            b,
            ETR_RECORD_MAGIC,
            ETR_RECORD_VERSION..=ETR_RECORD_VERSION,
            ETR_RECORD_HEADER_LEN,
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
            devid: r.u32(),
            authstatus: r.u32(),
            axictl: r.u32(),
            rrp: r.u64(),
            rwp: r.u64(),
            dba: r.u64(),
            buf_paddr: r.u64(),
            buf_size: r.u64(),
            data_start: r.u64(),
            data_len: r.u64(),
            trace_len: r.u32(),
            flush_delays: r.u32(),
            ready_delays: r.u32(),
        })
    }

    /// The fields an ETR record header shares with a TMC record header.
    fn leading(&self) -> Leading {
        leading_of!(self)
    }

    /// Returns where the trace is in the buffer, from the registers recorded.
    pub fn layout(&self) -> Result<EtrLayout, EtrRecordError> {
        EtrLayout::from_registers(self.rsz, self.sts, self.rwp, self.dba)
    }
}

/// The ETR record payload: an [`EtrRecordHeader`] followed by the trace bytes copied, if any.
pub struct EtrRecord;

impl EtrRecord {
    /// Splits a record payload into its header and the trace bytes that follow it (none when
    /// the trace stayed in the buffer).
    ///
    /// The trace length is bounded by the buffer: a header claiming more bytes than present is an
    /// error. A header longer than this version's (a later minor extension) is skipped over.
    pub fn parse(b: &[u8]) -> Result<(EtrRecordHeader, &[u8]), EtrRecordError> {
        let h = EtrRecordHeader::decode(b)?;
        let trace = trace_after(b, h.trace_len)?;
        Ok((h, trace))
    }

    /// Returns the slot size that holds the header and a copy of `buffer_bytes` of trace.
    ///
    /// Drivers call it at probe time to size their slot (with 0 for a buffer in reserved
    /// memory, which is never copied); `None` on overflow.
    pub fn slot_len_for(buffer_bytes: usize) -> Option<usize> {
        buffer_bytes.checked_add(ETR_RECORD_HEADER_LEN)
    }
}

/// Where an ETR's trace is in its circular buffer: `len` bytes starting at buffer offset
/// `start`, wrapping at `size`, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtrLayout {
    /// Size of the buffer in bytes (`RSZ * 4`).
    pub size: u64,
    /// Buffer offset of the oldest byte.
    pub start: u64,
    /// Bytes of trace.
    pub len: u64,
    /// The buffer wrapped (`STS.Full`): the trace starts inside the stream.
    pub wrapped: bool,
}

impl EtrLayout {
    /// Computes the layout from the registers of a stopped ETR: with `STS.Full` the oldest byte
    /// is at `RWP` and the whole buffer holds trace, else the trace runs from `DBA` to `RWP`.
    pub fn from_registers(rsz: u32, sts: u32, rwp: u64, dba: u64) -> Result<Self, EtrRecordError> {
        let size = u64::from(rsz).wrapping_mul(4);
        if size == 0 {
            return Err(EtrRecordError::NoBuffer);
        }
        let outside = EtrRecordError::PointerOutside { rwp, dba, size };
        let off = rwp.checked_sub(dba).ok_or(outside)?;
        if off >= size || !off.is_multiple_of(4) {
            return Err(outside);
        }
        Ok(if sts & ETR_STS_FULL != 0 {
            Self {
                size,
                start: off,
                len: size,
                wrapped: true,
            }
        } else {
            Self {
                size,
                start: 0,
                len: off,
                wrapped: false,
            }
        })
    }

    /// Returns the layout of the newest `cap` bytes at most, starting on a frame boundary of
    /// the buffer (frames are written from `DBA` on, [`ETR_FRAME_LEN`] bytes each).
    pub fn newest(&self, cap: u64) -> Self {
        if cap >= self.len {
            return *self;
        }
        // The first byte kept, rounded up to a frame of the buffer.
        let skip = self.len - cap;
        let mut first = self.start.wrapping_add(skip) % self.size.max(1);
        let mis = first % ETR_FRAME_LEN;
        let mut len = cap;
        if mis != 0 {
            let up = ETR_FRAME_LEN - mis;
            first = first.wrapping_add(up) % self.size.max(1);
            len = len.saturating_sub(up);
        }
        Self {
            size: self.size,
            start: first,
            len,
            wrapped: self.wrapped,
        }
    }

    /// Returns whether these bytes start inside the stream (the buffer wrapped, or older bytes
    /// were left out), where a reader puts the barrier packet.
    pub fn starts_mid_stream(&self, full: &EtrLayout) -> bool {
        self.wrapped || self.len < full.len
    }

    /// Returns the buffer ranges `(offset, length)` that hold the trace, oldest first: the part
    /// up to the end of the buffer, then the part from its start (empty when it does not wrap).
    pub fn ranges(&self) -> [(u64, u64); 2] {
        let first = self.len.min(self.size.saturating_sub(self.start));
        [(self.start, first), (0, self.len - first)]
    }

    /// Copies the trace that `buffer` (the ETR's buffer as it used it, [`Self::size`] bytes from
    /// `DBA`) holds into `out`, oldest first, with the barrier packet over its first
    /// [`super::tmc::CS_BARRIER_LEN`] bytes when the buffer wrapped (the stream starts inside a
    /// packet there): what a reader of the sink's trace is given. Returns `None`, having copied
    /// nothing, when `buffer` is shorter than the size or `out` is not [`Self::len`] bytes long.
    pub fn copy_oldest_first(&self, buffer: &[u8], out: &mut [u8]) -> Option<()> {
        // CAST: `usize` fits in `u64`.
        if out.len() as u64 != self.len || (buffer.len() as u64) < self.size {
            return None;
        }
        let mut at = 0usize;
        for (off, n) in self.ranges() {
            let (off, n) = (usize::try_from(off).ok()?, usize::try_from(n).ok()?);
            let to = at.checked_add(n)?;
            out.get_mut(at..to)?
                .copy_from_slice(buffer.get(off..off.checked_add(n)?)?);
            at = to;
        }
        if self.wrapped {
            if let Some(head) = out.get_mut(..super::tmc::CS_BARRIER_LEN) {
                for w in head.chunks_exact_mut(4) {
                    w.copy_from_slice(&super::tmc::CS_BARRIER_WORD.to_le_bytes());
                }
            }
        }
        Some(())
    }
}

/// Magic of a [`TracedataAttachment`]: `"CSPT"` in little-endian byte order.
pub const ATTACHMENT_MAGIC: u32 = u32::from_le_bytes(*b"CSPT");

/// Version of the attachment layout.
pub const ATTACHMENT_VERSION: u16 = 1;

/// Size in bytes of an attachment header.
pub const ATTACHMENT_HEADER_LEN: usize = 32;

/// A trace buffer that stayed in reserved memory, attached behind a copy of the region.
///
/// After a warm reboot the panic-dump core exposes the previous dump as the region's bytes
/// (`region_size` of them), followed by one attachment per reserved trace buffer a record of
/// that dump left in place ([`ETR_REC_IN_PLACE`]), read from that buffer at boot:
///
/// | offset | size | field |
/// |-------:|-----:|-------|
/// | 0 | 4 | magic `"CSPT"` |
/// | 4 | 2 | version (1) |
/// | 6 | 2 | header length (32) |
/// | 8 | 8 | physical address of the first byte |
/// | 16 | 8 | length in bytes |
/// | 24 | 4 | CRC-32 of the data |
/// | 28 | 4 | CRC-32 of these 32 bytes, this field zero |
///
/// The data follows, padded with zeros to a multiple of 8 bytes; the next attachment starts
/// there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedataAttachment<'a> {
    /// Physical address of the first byte.
    pub paddr: u64,
    /// The bytes.
    pub data: &'a [u8],
}

/// Why the attachments behind a region could not all be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachmentError {
    /// Fewer bytes than a header, or than the length it gives, are left at `offset`.
    Truncated {
        /// Offset of the attachment from the end of the region.
        offset: usize,
    },
    /// The bytes at `offset` are not an attachment header (magic, version, length or CRC).
    BadHeader {
        /// Offset of the attachment from the end of the region.
        offset: usize,
    },
    /// The data of the attachment at `offset` does not match its CRC.
    DataCrc {
        /// Offset of the attachment from the end of the region.
        offset: usize,
        /// Physical address it claims.
        paddr: u64,
    },
}

impl core::fmt::Display for AttachmentError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { offset } => {
                write!(f, "attachment at {offset:#x} after the region is cut short")
            }
            Self::BadHeader { offset } => write!(
                f,
                "bytes at {offset:#x} after the region are not a trace buffer attachment"
            ),
            Self::DataCrc { offset, paddr } => write!(
                f,
                "attachment at {offset:#x} after the region (buffer at {paddr:#x}) fails its CRC"
            ),
        }
    }
}

impl<'a> TracedataAttachment<'a> {
    /// Returns the header of an attachment of `data` at `paddr`.
    pub fn header(paddr: u64, data: &[u8]) -> [u8; ATTACHMENT_HEADER_LEN] {
        let mut b = [0u8; ATTACHMENT_HEADER_LEN];
        let mut w = LeWriter::new(&mut b);
        w.u32(ATTACHMENT_MAGIC);
        w.u16(ATTACHMENT_VERSION);
        // CAST: a small constant.
        w.u16(ATTACHMENT_HEADER_LEN as u16);
        w.u64(paddr);
        // CAST: `usize` fits in `u64`.
        w.u64(data.len() as u64);
        w.u32(crc32(data));
        let crc = crc_with_zero_field(&b, 28);
        if let Some(d) = b.get_mut(28..32) {
            d.copy_from_slice(&crc.to_le_bytes());
        }
        b
    }

    /// Returns the bytes an attachment of `len` data bytes takes, header and padding included.
    pub fn total_len(len: usize) -> Option<usize> {
        super::align_up(len.checked_add(ATTACHMENT_HEADER_LEN)?)
    }

    /// Reads the attachments in `b`, the bytes after a region: every one that checks, and the
    /// first error, after which nothing more is read.
    pub fn parse_all(
        b: &'a [u8],
        mut each: impl FnMut(TracedataAttachment<'a>),
    ) -> Result<(), AttachmentError> {
        let mut off = 0usize;
        while off < b.len() {
            let rest = b.get(off..).unwrap_or(&[]);
            if rest.iter().all(|&x| x == 0) {
                // Padding, or nothing attached.
                return Ok(());
            }
            let head = rest
                .get(..ATTACHMENT_HEADER_LEN)
                .ok_or(AttachmentError::Truncated { offset: off })?;
            if get_u32(head, 0) != ATTACHMENT_MAGIC
                || get_u16(head, 4) != ATTACHMENT_VERSION
                || usize::from(get_u16(head, 6)) != ATTACHMENT_HEADER_LEN
                || get_u32(head, 28) != crc_with_zero_field(head, 28)
            {
                return Err(AttachmentError::BadHeader { offset: off });
            }
            let paddr = get_u64(head, 8);
            let len = usize::try_from(get_u64(head, 16))
                .map_err(|_| AttachmentError::Truncated { offset: off })?;
            let data = rest
                .get(ATTACHMENT_HEADER_LEN..)
                .and_then(|d| d.get(..len))
                .ok_or(AttachmentError::Truncated { offset: off })?;
            if crc32(data) != get_u32(head, 24) {
                return Err(AttachmentError::DataCrc { offset: off, paddr });
            }
            each(TracedataAttachment { paddr, data });
            let step = Self::total_len(len).ok_or(AttachmentError::Truncated { offset: off })?;
            off = off.saturating_add(step);
        }
        Ok(())
    }
}

/// Prefix of the name of the vmcore device dump that holds a reserved trace buffer.
pub const TRACEDATA_DUMP_PREFIX: &str = "coresight_tracedata@";

/// Longest device dump name [`tracedata_dump_name`] writes.
pub const TRACEDATA_DUMP_NAME_MAX: usize = TRACEDATA_DUMP_PREFIX.len() + 16;

/// Writes the name of the vmcore device dump that holds the reserved trace buffer at physical
/// address `paddr` (`coresight_tracedata@` and the address in lower-case hexadecimal, without
/// `0x`) into `out`; returns its length, or `None` when `out` is too short.
pub fn tracedata_dump_name(paddr: u64, out: &mut [u8]) -> Option<usize> {
    let mut digits = [0u8; 16];
    let mut n = 0;
    let mut v = paddr;
    loop {
        // CAST: a nibble.
        let d = (v & 0xf) as u8;
        *digits.get_mut(n)? = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        n += 1;
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let len = TRACEDATA_DUMP_PREFIX.len() + n;
    let out = out.get_mut(..len)?;
    let (p, d) = out.split_at_mut(TRACEDATA_DUMP_PREFIX.len());
    p.copy_from_slice(TRACEDATA_DUMP_PREFIX.as_bytes());
    for (o, i) in d.iter_mut().zip((0..n).rev()) {
        *o = *digits.get(i)?;
    }
    Some(len)
}

/// Returns the physical address a device dump named by [`tracedata_dump_name`] holds.
pub fn parse_tracedata_dump_name(name: &[u8]) -> Option<u64> {
    let hex = name.strip_prefix(TRACEDATA_DUMP_PREFIX.as_bytes())?;
    if hex.is_empty() || hex.len() > 16 || hex.starts_with(b"0x") {
        return None;
    }
    super::parse_hex(hex)
}

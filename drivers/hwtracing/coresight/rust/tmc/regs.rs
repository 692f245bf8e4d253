// SPDX-License-Identifier: GPL-2.0

//! The registers of the Trace Memory Controller that the driver touches, in its ETB, ETF and ETR
//! configurations (Arm CoreSight TMC Technical Reference Manual, DDI 0461; the ETR's are
//! `RRPHI`, `RWPHI`, `AXICTL`, `DBALO`, `DBAHI` and the `DEVID` fields of its AXI master). The
//! software lock (`LAR`, `LSR`) and `AUTHSTATUS` are the CoreSight ones of
//! [`kernel::coresight::access`].
//!
//! Shared with the host (`crates/cspd-hw`): uses only `kernel::io::register` and
//! `kernel::num::Bounded`.

use kernel::{
    io::register,
    num::Bounded, //
};

/// The operating mode in `MODE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcMode {
    /// Circular Buffer mode: the TMC is a sink.
    CircularBuffer = 0,
    /// Software FIFO mode.
    SoftwareFifo = 1,
    /// Hardware FIFO mode: an ETF used as a link.
    HardwareFifo = 2,
}

impl TryFrom<Bounded<u32, 2>> for TmcMode {
    type Error = u32;

    fn try_from(v: Bounded<u32, 2>) -> Result<Self, u32> {
        match v.get() {
            0 => Ok(Self::CircularBuffer),
            1 => Ok(Self::SoftwareFifo),
            2 => Ok(Self::HardwareFifo),
            other => Err(other),
        }
    }
}

impl From<TmcMode> for Bounded<u32, 2> {
    fn from(m: TmcMode) -> Self {
        match m {
            TmcMode::CircularBuffer => Self::new::<0>(),
            TmcMode::SoftwareFifo => Self::new::<1>(),
            TmcMode::HardwareFifo => Self::new::<2>(),
        }
    }
}

/// The TMC configuration in `DEVID.CONFIGTYPE`.
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

impl From<Bounded<u32, 2>> for TmcConfigType {
    fn from(v: Bounded<u32, 2>) -> Self {
        match v.get() {
            0 => Self::Etb,
            1 => Self::Etr,
            2 => Self::Etf,
            _ => Self::Reserved,
        }
    }
}

impl From<TmcConfigType> for Bounded<u32, 2> {
    fn from(c: TmcConfigType) -> Self {
        match c {
            TmcConfigType::Etb => Self::new::<0>(),
            TmcConfigType::Etr => Self::new::<1>(),
            TmcConfigType::Etf => Self::new::<2>(),
            TmcConfigType::Reserved => Self::new::<3>(),
        }
    }
}

register! {
    /// RAM Size register.
    pub RSZ(u32) @ 0x004 {
        /// Size of the trace RAM in 32-bit words.
        30:0 words;
    }

    /// Status register.
    pub STS(u32) @ 0x00C {
        /// An error response on the memory interface (ETR only).
        5:5 memerr => bool;
        /// In Circular Buffer mode, all of the trace has been read through `RRD`.
        4:4 empty => bool;
        /// The formatter pipeline is empty.
        3:3 ftempty => bool;
        /// The TMC is in Disabled state, or has drained its pipeline in Stopped state.
        2:2 tmcready => bool;
        /// A trigger has been observed.
        1:1 triggered => bool;
        /// The write pointer has wrapped: the oldest trace starts at `RWP`.
        0:0 full => bool;
    }

    /// RAM Read Data register: in Stopped state each read returns the next 32-bit word of trace
    /// and advances `RRP`, then `0xFFFFFFFF` once all of it was read.
    pub RRD(u32) @ 0x010 {
        /// The word read.
        31:0 data;
    }

    /// RAM Read Pointer register.
    pub RRP(u32) @ 0x014 {
        /// Byte address into the trace RAM; for an ETR, bits 31:0 of the bus address.
        31:0 addr;
    }

    /// RAM Write Pointer register.
    pub RWP(u32) @ 0x018 {
        /// Byte address into the trace RAM; for an ETR, bits 31:0 of the bus address.
        31:0 addr;
    }

    /// Trigger Counter register.
    pub TRG(u32) @ 0x01C {
        /// Words written after a trigger before capture stops.
        31:0 count;
    }

    /// Control register.
    pub CTL(u32) @ 0x020 {
        /// Trace capture is enabled.
        0:0 tracecapten => bool;
    }

    /// Mode register.
    pub MODE(u32) @ 0x028 {
        /// The operating mode.
        1:0 mode ?=> TmcMode;
    }

    /// Buffer Level Water Mark register.
    pub BUFWM(u32) @ 0x034 {
        /// The water mark, in words.
        31:0 level;
    }

    /// RAM Read Pointer High register (ETR).
    pub RRPHI(u32) @ 0x038 {
        /// Bits 63:32 of the read pointer's bus address.
        31:0 addr;
    }

    /// RAM Write Pointer High register (ETR).
    pub RWPHI(u32) @ 0x03C {
        /// Bits 63:32 of the write pointer's bus address.
        31:0 addr;
    }

    /// AXI Control register (ETR), in the layout of a SoC-400 TMC.
    pub AXICTL(u32) @ 0x110 {
        /// Write burst length minus one, in transfers of the memory width.
        11:8 wrburstlen;
        /// The buffer is a scatter-gather table, not a flat buffer.
        7:7 scattergather => bool;
        /// `AWCACHE` of the writes.
        5:2 cachectrl;
        /// `AWPROT[1]`: non-secure writes.
        1:1 protctrl1 => bool;
        /// `AWPROT[0]`: privileged writes.
        0:0 protctrl0 => bool;
    }

    /// Data Buffer Address Low register (ETR).
    pub DBALO(u32) @ 0x118 {
        /// Bits 31:0 of the buffer's bus address.
        31:0 addr;
    }

    /// Data Buffer Address High register (ETR).
    pub DBAHI(u32) @ 0x11C {
        /// Bits 63:32 of the buffer's bus address.
        31:0 addr;
    }

    /// Formatter and Flush Status register.
    pub FFSR(u32) @ 0x300 {
        /// The formatter has stopped.
        1:1 ftstopped => bool;
        /// A flush is in progress.
        0:0 flinprog => bool;
    }

    /// Formatter and Flush Control register.
    pub FFCR(u32) @ 0x304 {
        /// Stop the formatter when a flush completes.
        12:12 stoponfl => bool;
        /// Indicate a trigger on the trigger input (`TRIGIN`).
        8:8 trigontrigin => bool;
        /// Request a manual flush; reads 1 until the flush has completed.
        6:6 flushman => bool;
        /// Flush on a trigger event.
        5:5 fontrigevt => bool;
        /// Flush on the flush input (`FLUSHIN`).
        4:4 fonflin => bool;
        /// Insert triggers into the formatted stream.
        1:1 enti => bool;
        /// Enable the formatter.
        0:0 enft => bool;
    }

    /// Periodic Synchronization Counter register.
    pub PSCR(u32) @ 0x308 {
        /// Log2 of the bytes between synchronizations (0: none).
        4:0 pscount;
    }

    /// Device Configuration register.
    pub DEVID(u32) @ 0xFC8 {
        /// ETR: no scatter-gather (the buffer must be flat).
        24:24 noscat => bool;
        /// ETR: width of the AXI addresses, in bits, when `axiaw_valid`.
        23:17 axiaw;
        /// ETR: `axiaw` is valid.
        16:16 axiaw_valid => bool;
        /// Width of the trace memory: 2..5 for 32, 64, 128 and 256 bits.
        10:8 memwidth;
        /// Which TMC configuration this is.
        7:6 configtype => TmcConfigType;
    }
}

impl DEVID {
    /// Returns the width of an ETR's AXI addresses in bits: `AXIAW` when valid and one the C
    /// driver knows (32, 40, 44, 48, 52), else 40, as the TRM says of an ETR without the field.
    pub fn address_bits(self) -> u32 {
        match self.axiaw().get() {
            w @ (32 | 40 | 44 | 48 | 52) if self.axiaw_valid() => w,
            _ => 40,
        }
    }

    /// Returns the width of the trace memory in 32-bit words; an unknown encoding is 32 bits.
    pub fn memwidth_words(self) -> u32 {
        match self.memwidth().get() {
            3 => 2,
            4 => 4,
            5 => 8,
            _ => 1,
        }
    }
}

/// The `FFCR` value the C driver programs for a sink in Circular Buffer mode (without
/// `StopOnFl`).
pub fn ffcr_sink() -> FFCR {
    FFCR::from_raw(0)
        .with_enft(true)
        .with_enti(true)
        .with_fonflin(true)
        .with_fontrigevt(true)
        .with_trigontrigin(true)
}

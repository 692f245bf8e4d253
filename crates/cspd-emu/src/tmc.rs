//! The Trace Memory Controller (TMC) in its ETB or ETF configuration, as a window component.
//!
//! The register behaviour is `cspd_model::tmc::TmcModel`, written from the Arm CoreSight Trace
//! Memory Controller Technical Reference Manual (DDI 0461) and the trace formatter protocol of
//! the CoreSight Architecture Specification (IHI 0029). This module gives it what a driver also
//! reads on silicon:
//!
//! - the identification registers of a CoreSight SoC-400 TMC: part number 0x961, designer Arm
//!   (JEP106 continuation 4, code 0x3B), revision 1, component class 0x9 (IHI 0029, "Component
//!   and Peripheral Identification Registers");
//! - `CLAIMSET` reading the implemented claim bits (four) and `CLAIMCLR` the current tags, as
//!   IHI 0029 ("Claim Tag Set/Clear Registers") defines them;
//! - `DEVID.CONFIGTYPE` (2 for an ETF, 0 for an ETB) with a 32-bit memory interface
//!   (`DEVID.MEMWIDTH` = 2), so that `RRP`, `RWP` and `RRD` move one word at a time;
//! - `DEVTYPE` 0x21 (trace sink, buffer) and `AUTHSTATUS` 0x33 (Non-secure invasive and
//!   non-invasive debug implemented and enabled), both from the model.
//!
//! Time: each guest access advances the model's clock by 1 µs after it is applied. A manual
//! flush takes [`FLUSH_US`] and `STS.TMCReady` rises [`READY_US`] after the formatter stops, so
//! a driver sees `FFCR.FlushMan` and `STS.TMCReady` change only after a few polls. The access is
//! applied at the instant whose state the guest saw (the staged values), and only then does time
//! move; otherwise a read of `RRD` that raced with the entry to Stopped state could consume a
//! word the guest never received.
//!
//! The `linux` C driver `coresight-tmc` binds to this frame: it reads `DEVID` (configuration and
//! memory width), `RSZ`, `STS`, `FFCR` and `AUTHSTATUS`, claims the device, and drains the RAM by
//! reading `RRD` until `0xFFFFFFFF`.

use crate::bus::{with_id_regs, Component, PrimeCellId};
use cspd_model::access::RawFrame;
use cspd_model::tmc::{self as regs, RamStuck, TmcModel, TmcModelConfig};

/// Time a manual flush takes, in microseconds of the model's clock (one per guest access).
pub const FLUSH_US: u64 = 2;

/// Time from the formatter stop to `STS.TMCReady`, in microseconds (one per guest access).
pub const READY_US: u64 = 2;

/// Smallest trace RAM accepted by [`Tmc::new`], in bytes (four formatter frames).
pub const MIN_RAM_BYTES: usize = 64;

/// Largest trace RAM accepted by [`Tmc::new`], in bytes.
pub const MAX_RAM_BYTES: usize = 64 << 20;

/// `CLAIMSET` read value: claim tag bits 3:0 implemented.
pub const CLAIM_IMPLEMENTED: u32 = 0xF;

/// Identification of a CoreSight SoC-400 TMC: `PIDR0` = 0x61, `PIDR1` = 0xB9 (part 0x961,
/// designer code 0x3B low bits), `PIDR2` = 0x1B (designer high bits, JEDEC, revision 1),
/// `PIDR3` = 0, `PIDR4` = 0x04 (JEP106 continuation 4, one 4 KiB block); class 0x9 CoreSight.
pub const TMC_ID: PrimeCellId = PrimeCellId {
    pid: 0x04_001B_B961,
    cid: PrimeCellId::CORESIGHT_CID,
};

/// Offset of `LBUFLEVEL` (ETF FIFO modes only; reads zero in Circular Buffer mode).
pub(crate) const LBUFLEVEL: u32 = 0x02C;
/// Offset of `CBUFLEVEL`.
pub(crate) const CBUFLEVEL: u32 = 0x030;
/// Offset of `PSCR`, the periodic synchronization counter (not modelled: reads zero).
pub(crate) const PSCR: u32 = 0x308;

/// The registers of every TMC configuration, but the identification registers.
const COMMON_OWN: &[u32] = &[
    regs::RSZ,
    regs::STS,
    regs::RRD,
    regs::RRP,
    regs::RWP,
    regs::TRG,
    regs::CTL,
    regs::RWD,
    regs::MODE,
    LBUFLEVEL,
    CBUFLEVEL,
    regs::BUFWM,
    regs::FFSR,
    regs::FFCR,
    PSCR,
    regs::CLAIMSET,
    regs::CLAIMCLR,
    regs::LAR,
    regs::LSR,
    regs::AUTHSTATUS,
    regs::DEVID,
    regs::DEVTYPE,
];

/// The registers of every TMC configuration, identification included.
const COMMON: [u32; 34] = with_id_regs(COMMON_OWN);

/// The registers of a TMC configuration with `own` registers beside the common ones: `N` must be
/// their sum (checked when the constant is evaluated).
pub(crate) const fn frame_with<const N: usize>(own: &[u32]) -> [u32; N] {
    assert!(N == COMMON.len() + own.len());
    let mut out = [0; N];
    let mut i = 0;
    while i < COMMON.len() {
        out[i] = COMMON[i];
        i += 1;
    }
    let mut j = 0;
    while j < own.len() {
        out[i + j] = own[j];
        j += 1;
    }
    out
}

/// Every register of an ETB's or ETF's frame.
const STAGED: &[u32] = &COMMON;

/// The TMC configuration presented in `DEVID.CONFIGTYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcKind {
    /// Embedded Trace Buffer (`CONFIGTYPE` 0).
    Etb,
    /// Embedded Trace FIFO (`CONFIGTYPE` 2), used here as a sink in Circular Buffer mode.
    Etf,
    /// Embedded Trace Router (`CONFIGTYPE` 1): a buffer in system memory
    /// ([`crate::etr::Etr`]).
    Etr,
}

/// Faults the TMC can be told to show.
#[derive(Clone, Copy, Debug, Default)]
pub struct TmcFaults {
    /// `STS.TMCReady` never rises after the formatter stops.
    pub never_ready: bool,
    /// A manual flush never completes: `FFCR.FlushMan` stays set and the formatter never stops.
    pub flush_stuck: bool,
    /// In Stopped state `RRD` keeps returning the same word and `RRP` never moves: a drain
    /// never sees `0xFFFFFFFF`.
    pub rrd_stuck: bool,
    /// In Stopped state `RRD` goes on returning the RAM's words, wrapping, and never
    /// `0xFFFFFFFF`: a drain reads the whole RAM but never sees it end.
    pub rrd_never_empty: bool,
}

/// An emulated TMC-ETB or TMC-ETF behind the register window.
///
/// It owns its trace RAM. The register model borrows the RAM for as long as it lives, so the
/// RAM is allocated once and never freed: create one TMC per emulated machine.
pub struct Tmc {
    model: TmcModel<'static>,
    faults: TmcFaults,
    /// `MODE` as last read back from the model (0: Circular Buffer).
    mode: u32,
}

impl Tmc {
    /// Creates a TMC with `ram_bytes` of trace RAM, in its reset state (Disabled, software lock
    /// set, `RWP` = `RRP` = 0, RAM zeroed), showing `faults`.
    ///
    /// `ram_bytes` must be a multiple of 16 (one formatter frame), at least [`MIN_RAM_BYTES`]
    /// and at most [`MAX_RAM_BYTES`].
    pub fn new(kind: TmcKind, ram_bytes: usize, faults: TmcFaults) -> Result<Tmc, String> {
        if !ram_bytes.is_multiple_of(16) {
            return Err(format!(
                "TMC RAM size {ram_bytes} bytes is not a multiple of 16 (one formatter frame)"
            ));
        }
        if ram_bytes < MIN_RAM_BYTES {
            return Err(format!(
                "TMC RAM size {ram_bytes} bytes is below the minimum of {MIN_RAM_BYTES} bytes"
            ));
        }
        if ram_bytes > MAX_RAM_BYTES {
            return Err(format!(
                "TMC RAM size {ram_bytes} bytes is above the maximum of {MAX_RAM_BYTES} bytes (64 MiB)"
            ));
        }
        let ram: &'static mut [u32] = Box::leak(vec![0u32; ram_bytes / 4].into_boxed_slice());
        let config = match kind {
            TmcKind::Etb => TmcModelConfig::Etb,
            TmcKind::Etf => TmcModelConfig::Etf,
            TmcKind::Etr => {
                return Err("a TMC-ETR writes to system memory: it is crate::etr::Etr".into())
            }
        };
        let mut model = TmcModel::new(config, ram)
            .ok_or_else(|| format!("TMC RAM size {ram_bytes} bytes rejected by the model"))?;
        model.set_latencies(FLUSH_US, READY_US);
        model.set_id_every_frame(true);
        model.set_memwidth_code(2);
        model.set_fault_never_ready(faults.never_ready);
        model.set_fault_flush_stuck(faults.flush_stuck);
        model.set_fault_ram_stuck(if faults.rrd_stuck {
            Some(RamStuck::SameWord)
        } else if faults.rrd_never_empty {
            Some(RamStuck::NeverEmpty)
        } else {
            None
        });
        Ok(Tmc {
            model,
            faults,
            mode: 0,
        })
    }

    /// Returns whether trace is accepted: capturing, in Circular Buffer mode.
    pub fn accepting(&self) -> bool {
        self.model.is_capturing() && self.mode == 0
    }

    /// Feeds `bytes` of trace from the source with trace ID `id` through the formatter into the
    /// RAM. Returns the number of bytes accepted: all of them while [`Self::accepting`], none
    /// otherwise or for an ID above 0x7F.
    pub fn push_trace(&mut self, id: u8, bytes: &[u8]) -> usize {
        if !self.accepting() {
            return 0;
        }
        self.model.push_trace(id, bytes)
    }

    /// Returns the trace RAM.
    pub fn ram(&self) -> &[u32] {
        self.model.ram()
    }

    /// Returns `RSZ`, the RAM size in 32-bit words.
    pub fn rsz_words(&self) -> usize {
        self.model.rsz()
    }

    /// Returns the faults the TMC shows.
    pub fn faults(&self) -> TmcFaults {
        self.faults
    }

    /// Returns the RAM word at byte offset `ptr` (a value of `RRP`), wrapping.
    fn ram_word_at(&self, ptr: u32) -> u32 {
        let ram = self.model.ram();
        if ram.is_empty() {
            return regs::RRD_EMPTY;
        }
        let i = usize::try_from(ptr / 4).unwrap_or(0) % ram.len();
        ram.get(i).copied().unwrap_or(0)
    }

    /// What a read of `RRD` returns now, without its side effect (the model's `RRD` rules:
    /// locked or Running: empty marker; Disabled: the word at `RRP`; Stopped: the word at `RRP`
    /// until all was read, or always with the stuck fault).
    fn peek_rrd(&mut self) -> u32 {
        const LSR_SLK: u32 = 1 << 1;
        const STS_EMPTY: u32 = 1 << 4;
        if self.model.read32(regs::LSR) & LSR_SLK != 0 {
            return regs::RRD_EMPTY;
        }
        let rrp = self.model.read32(regs::RRP);
        if self.model.read32(regs::CTL) & 1 == 0 {
            return self.ram_word_at(rrp);
        }
        if !self.model.is_stopped() || self.model.read32(regs::MODE) != 0 {
            return regs::RRD_EMPTY;
        }
        if self.faults.rrd_stuck || self.faults.rrd_never_empty {
            return self.ram_word_at(rrp);
        }
        if self.model.read32(regs::STS) & STS_EMPTY != 0 {
            return regs::RRD_EMPTY;
        }
        self.ram_word_at(rrp)
    }

    /// Advances the clock by one access and refreshes the cached `MODE`.
    fn after_access(&mut self) {
        self.model.delay_us(1);
        self.mode = self.model.read32(regs::MODE);
    }
}

impl Component for Tmc {
    fn peek(&mut self, offset: u32) -> u32 {
        if let Some(v) = TMC_ID.reg(offset) {
            return v;
        }
        match offset {
            regs::CLAIMSET => CLAIM_IMPLEMENTED,
            regs::RRD => self.peek_rrd(),
            o if STAGED.contains(&o) => self.model.read32(o),
            _ => 0,
        }
    }

    fn read(&mut self, offset: u32) {
        if STAGED.contains(&offset) && TMC_ID.reg(offset).is_none() {
            // Only `RRD` has a side effect; the others are read for the model's counters.
            let _ = self.model.read32(offset);
        }
        self.after_access();
    }

    fn write(&mut self, offset: u32, value: u32) {
        if STAGED.contains(&offset) && TMC_ID.reg(offset).is_none() {
            self.model.write32(offset, value);
        }
        self.after_access();
    }

    fn staged(&self) -> &'static [u32] {
        STAGED
    }
}

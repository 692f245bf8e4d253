//! The Trace Memory Controller in its ETR configuration (Embedded Trace Router), as a window
//! component: trace goes through the formatter into a buffer in guest memory.
//!
//! Written from the Arm CoreSight Trace Memory Controller Technical Reference Manual (DDI 0461)
//! and from what the `linux` C driver (`coresight-tmc-core.c`, `coresight-tmc-etr.c`, with the
//! crash-data path of `memory-region-names = "tracedata", "metadata"`) reads and writes.
//!
//! # What is shared with the ETB/ETF
//!
//! The formatter, the states (Disabled, Running, Stopped), `CTL`, `MODE`, `TRG`, `BUFWM`,
//! `FFCR` (manual flush that takes time, `StopOnFl`), `FFSR` (`FtStopped`), `STS.TMCReady`
//! rising some time after the formatter stops, the software lock, the claim tags, `AUTHSTATUS`
//! and the faults are those of `cspd_model::tmc::TmcModel`, the model the ETF uses, run over a
//! small staging ring: every word its formatter writes is moved at once to guest memory at
//! `RWP`. So the ETR flushes and stops exactly as the ETF does.
//!
//! # What is the ETR's own
//!
//! | register | offset | behaviour |
//! | --- | --- | --- |
//! | `RSZ` | 0x004 | the buffer size in 32-bit words, bits 30:0, writable in Disabled state; resets to 0 |
//! | `STS` | 0x00C | `Full` (bit 0: the buffer wrapped), `MemErr` (bit 5: a write to memory failed), `Empty` (bit 4: Stopped and everything read through `RRD`), the others from the shared logic; read-only (a SoC-400 part) |
//! | `RRD` | 0x010 | reads memory at `RRP` and advances it, as the ETF's `RRD` reads its RAM: in Stopped state until all was read (then 0xFFFF_FFFF), in Disabled state without an end |
//! | `RRP`, `RRPHI` | 0x014, 0x038 | the read pointer, an address (40 bits, bits 2:0 RES0 with a 64-bit memory); writable in Disabled state |
//! | `RWP`, `RWPHI` | 0x018, 0x03C | the write pointer, an address; writable in Disabled state |
//! | `RWD` | 0x024 | in Disabled state writes the word to memory at `RWP` and advances it |
//! | `CBUFLEVEL` | 0x030 | the words held: `RSZ` once full, else from the buffer start to `RWP` |
//! | `AXICTL` | 0x110 | SoC-400 layout: `ProtCtrlBit0/1` (1:0), `CacheCtrlBit` (5:2), `ScatterGatherMode` (7), `WrBurstLen` (11:8); writable in Disabled state |
//! | `DBALO`, `DBAHI` | 0x118, 0x11C | the buffer's address (40 bits, bits 2:0 RES0); writable in Disabled state |
//! | `DEVID` | 0xFC8 | 0x0151_0340: `CONFIGTYPE` = 1 (ETR), `MEMWIDTH` = 3 (64-bit AXI data), `AXIAW_VALID` (bit 16) with `AXIAW` = 40 (bits 23:17), `NOSCAT` (bit 24): no scatter-gather |
//! | `DEVTYPE` | 0xFCC | 0x21: trace sink, buffer |
//!
//! Identification: a CoreSight SoC-400 TMC, part 0x961, as the ETB/ETF; `linux`'s `tmc_ids`
//! gives that part no unadvertised capabilities, so the driver treats it as keeping no pointers
//! across sessions (no `TMC_ETR_SAVE_RESTORE`): when capture starts (`CTL.TraceCaptEn` set in
//! Disabled state), `RWP` and `RRP` are set to `DBA` and `STS.Full` and `STS.MemErr` are
//! cleared. On entering Stopped state with `STS.Full` set, `RRP` is set to `RWP`, the oldest
//! data, which is what the driver's `tmc_etr_sync_flat_buf` and the crash-data path
//! (`tmc_prepare_crashdata`: offset `RRP - DBA`, length `RSZ` when full) read from.
//!
//! Circular Buffer mode only: the formatter's 16-byte frames are written at `RWP`, which wraps
//! from `DBA + 4 * RSZ` to `DBA` and sets `STS.Full`.
//!
//! # Scatter-gather and memory errors
//!
//! `DEVID.NOSCAT` says the unit has no scatter-gather, and the driver then never asks for it.
//! If capture starts with `AXICTL.ScatterGatherMode` set anyway, the ETR does not walk a table:
//! the first write it would make sets `STS.MemErr` and nothing is written (as a failed AXI
//! transfer would), and the refusal is named in the plugin's log. A driver then sees an error
//! status (the C driver truncates the buffer to nothing) instead of trace written somewhere it
//! did not mean. The same happens when `RWP` points outside guest RAM or into the register
//! window, or `RSZ` is 0: `STS.MemErr` is set, the write is dropped, and so are all the writes
//! after it until capture starts again.

use std::ops::Range;
use std::sync::Arc;

use crate::bus::Component;
use crate::bus::GuestMem;
use crate::tmc::{
    frame_with, TmcFaults, CBUFLEVEL, CLAIM_IMPLEMENTED, FLUSH_US, LBUFLEVEL, PSCR, READY_US,
    TMC_ID,
};
use cspd_model::access::RawFrame;
use cspd_model::tmc::{self as regs, TmcModel, TmcModelConfig};

/// Offset of `RRPHI`.
pub const RRPHI: u32 = 0x038;
/// Offset of `RWPHI`.
pub const RWPHI: u32 = 0x03C;
/// Offset of `AXICTL`.
pub const AXICTL: u32 = 0x110;
/// Offset of `DBALO`.
pub const DBALO: u32 = 0x118;
/// Offset of `DBAHI`.
pub const DBAHI: u32 = 0x11C;
/// `DEVID` of the emulated ETR (see the module documentation).
pub const ETR_DEVID: u32 = (1 << 24) | (40 << 17) | (1 << 16) | (3 << 8) | (1 << 6);
/// `DEVTYPE`: trace sink, buffer.
pub const ETR_DEVTYPE: u32 = 0x21;
/// Width of the AXI addresses (`DEVID.AXIAW`).
pub const ADDR_BITS: u32 = 40;
/// `STS.Full`.
pub const STS_FULL: u32 = 1 << 0;
/// `STS.Empty`.
pub const STS_EMPTY: u32 = 1 << 4;
/// `STS.MemErr`.
pub const STS_MEMERR: u32 = 1 << 5;
/// `AXICTL.ScatterGatherMode`.
pub const AXICTL_SG: u32 = 1 << 7;
/// The implemented bits of `AXICTL` (SoC-400 layout).
pub const AXICTL_MASK: u32 = 0xFBF;
/// The implemented bits of `RSZ`.
pub const RSZ_MASK: u32 = 0x7FFF_FFFF;

/// The bits of an address the ETR keeps: 40 bits, aligned to the 64-bit memory width.
const ADDR_MASK: u64 = ((1 << ADDR_BITS) - 1) & !7;
/// Words of the staging ring the shared logic's formatter writes into.
const STAGING_WORDS: usize = 4096;
/// Most bytes handed to the formatter at once, so that the staging ring never laps itself
/// between two moves to memory (a byte makes at most 16/14 bytes of frames).
const PUSH_CHUNK: usize = 8 * 1024;

/// Every register of the frame: the common TMC registers and the ETR's own.
const STAGED: &[u32] = &frame_with::<39>(&[RRPHI, RWPHI, AXICTL, DBALO, DBAHI]);

/// The state the shared logic is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Disabled,
    Running,
    Stopped,
}

/// An emulated TMC-ETR behind the register window, writing into guest memory.
pub struct Etr {
    model: TmcModel<'static>,
    mem: Arc<dyn GuestMem>,
    /// Guest physical addresses the ETR must not write (the register window).
    window: Range<u64>,
    faults: TmcFaults,
    state: State,
    /// The staging ring's word index up to which words were moved to memory.
    drained: usize,
    rsz: u32,
    dba: u64,
    rwp: u64,
    rrp: u64,
    full: bool,
    memerr: bool,
    axictl: u32,
    /// Capture runs in scatter-gather mode, which is refused.
    sg: bool,
    /// Words left to read through `RRD` in Stopped state.
    unread: u64,
    /// What happened that the log should say.
    events: Vec<String>,
}

impl Etr {
    /// Creates an ETR in its reset state (Disabled, software lock set, `RSZ`, `DBA`, `RWP`,
    /// `RRP` and `AXICTL` zero) that writes into `mem` but never into `window`, showing
    /// `faults`.
    ///
    /// The staging ring is allocated once and never freed: create one ETR per emulated machine.
    pub fn new(
        mem: Arc<dyn GuestMem>,
        window: Range<u64>,
        faults: TmcFaults,
    ) -> Result<Etr, String> {
        let staging: &'static mut [u32] = Box::leak(vec![0u32; STAGING_WORDS].into_boxed_slice());
        let mut model = TmcModel::new(TmcModelConfig::Etf, staging)
            .ok_or("the ETR's staging ring was rejected by the TMC model")?;
        model.set_latencies(FLUSH_US, READY_US);
        model.set_id_every_frame(true);
        model.set_fault_never_ready(faults.never_ready);
        model.set_fault_flush_stuck(faults.flush_stuck);
        Ok(Etr {
            model,
            mem,
            window,
            faults,
            state: State::Disabled,
            drained: 0,
            rsz: 0,
            dba: 0,
            rwp: 0,
            rrp: 0,
            full: false,
            memerr: false,
            axictl: 0,
            sg: false,
            unread: 0,
            events: Vec::new(),
        })
    }

    /// Returns the faults the ETR shows.
    pub fn faults(&self) -> TmcFaults {
        self.faults
    }

    /// Returns whether trace is accepted: capturing, in Circular Buffer mode.
    pub fn accepting(&mut self) -> bool {
        self.model.is_capturing() && self.model.read32(regs::MODE) == 0
    }

    /// Feeds `bytes` of trace from the source with trace ID `id` through the formatter into
    /// the buffer. Returns the number of bytes accepted: all of them while
    /// [`Self::accepting`], none otherwise or for an ID above 0x7F.
    pub fn push_trace(&mut self, id: u8, bytes: &[u8]) -> usize {
        let mut taken = 0;
        for chunk in bytes.chunks(PUSH_CHUNK) {
            let n = self.model.push_trace(id, chunk);
            self.drain();
            if n == 0 {
                break;
            }
            taken += n;
        }
        taken
    }

    /// Returns the events to log since the last call (scatter-gather refused, memory errors).
    pub fn take_events(&mut self) -> Vec<String> {
        std::mem::take(&mut self.events)
    }

    /// Returns `RSZ`, the buffer size in 32-bit words.
    pub fn rsz_words(&self) -> usize {
        self.rsz as usize
    }

    /// Returns `DBA`, the buffer's address.
    pub fn dba(&self) -> u64 {
        self.dba
    }

    /// Returns what the buffer holds, oldest byte first (from `RWP` once full, else from the
    /// buffer start to `RWP`), and whether it wrapped.
    pub fn held(&self) -> (Vec<u8>, bool) {
        let size = u64::from(self.rsz) * 4;
        let (start, len) = if self.full {
            (self.rwp, size)
        } else {
            (self.dba, self.rwp.saturating_sub(self.dba))
        };
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        let mut off = start.saturating_sub(self.dba);
        for _ in 0..len / 4 {
            if off >= size {
                off = 0;
            }
            let w = self.mem.read_u32(self.dba + off).unwrap_or(0);
            out.extend_from_slice(&w.to_le_bytes());
            off += 4;
        }
        (out, self.full)
    }

    fn locked(&mut self) -> bool {
        self.model.is_locked()
    }

    fn model_state(&mut self) -> State {
        if self.model.is_stopped() {
            State::Stopped
        } else if self.model.read32(regs::CTL) & 1 != 0 {
            State::Running
        } else {
            State::Disabled
        }
    }

    fn end(&self) -> u64 {
        self.dba + u64::from(self.rsz) * 4
    }

    /// Whether the 32-bit word at `addr` is guest RAM the ETR may write.
    fn writable(&self, addr: u64) -> bool {
        !self.window.contains(&addr) && self.mem.writable(addr, 4)
    }

    fn mem_error(&mut self, why: String) {
        if !self.memerr {
            self.memerr = true;
            self.events
                .push(format!("tmc (etr): STS.MemErr set: {why}"));
        }
    }

    /// Writes one word at `RWP` and advances it, wrapping and setting `Full`.
    fn write_out(&mut self, w: u32) {
        if self.memerr {
            return;
        }
        if self.sg {
            self.mem_error(
                "AXICTL.ScatterGatherMode is set and scatter-gather is not emulated \
                 (DEVID.NOSCAT): nothing is written"
                    .into(),
            );
            return;
        }
        if self.rsz == 0 {
            self.mem_error("RSZ is 0".into());
            return;
        }
        let addr = self.rwp;
        if !self.writable(addr) {
            self.mem_error(format!(
                "RWP {addr:#x} is not guest RAM the ETR can write (DBA {:#x}, RSZ {:#x})",
                self.dba, self.rsz
            ));
            return;
        }
        self.mem.write_u32(addr, w);
        self.rwp = addr + 4;
        if self.rwp >= self.end() {
            self.rwp = self.dba;
            self.full = true;
        }
    }

    /// Moves the words the formatter wrote to the staging ring into memory.
    fn drain(&mut self) {
        let wr = self.model.read32(regs::RWP) as usize / 4 % STAGING_WORDS;
        while self.drained != wr {
            let w = self.model.ram().get(self.drained).copied().unwrap_or(0);
            self.write_out(w);
            self.drained = (self.drained + 1) % STAGING_WORDS;
        }
    }

    /// After each access: the formatter's words to memory, and the effects of a state change.
    fn sync(&mut self) {
        self.drain();
        let now = self.model_state();
        if now == self.state {
            return;
        }
        if now == State::Stopped {
            if self.full {
                self.rrp = self.rwp;
                self.unread = u64::from(self.rsz);
            } else {
                self.unread = self.rwp.saturating_sub(self.rrp) / 4;
            }
        }
        self.state = now;
    }

    /// The start of capture: the pointers go to the buffer's start (no save/restore).
    fn start_capture(&mut self) {
        self.rwp = self.dba;
        self.rrp = self.dba;
        self.full = false;
        self.memerr = false;
        self.unread = 0;
        self.sg = self.axictl & AXICTL_SG != 0;
        if self.sg {
            self.events.push(
                "tmc (etr): capture started in scatter-gather mode (AXICTL.ScatterGatherMode), \
                 which is not emulated (DEVID.NOSCAT is set): refused, STS.MemErr at the first \
                 write"
                    .into(),
            );
        }
        self.drained = self.model.read32(regs::RWP) as usize / 4 % STAGING_WORDS;
    }

    fn sts(&mut self) -> u32 {
        // TMCReady, Triggered and FtEmpty from the shared logic; Full, Empty, MemErr the ETR's.
        let mut v = self.model.read32(regs::STS) & !(STS_FULL | STS_EMPTY | STS_MEMERR);
        if self.full {
            v |= STS_FULL;
        }
        if self.state == State::Stopped && self.unread == 0 {
            v |= STS_EMPTY;
        }
        if self.memerr {
            v |= STS_MEMERR;
        }
        v
    }

    fn rrd(&mut self) -> u32 {
        if self.locked() {
            return regs::RRD_EMPTY;
        }
        let word = |e: &Self| e.mem.read_u32(e.rrp).unwrap_or(regs::RRD_EMPTY);
        match self.state {
            State::Running => regs::RRD_EMPTY,
            State::Disabled => word(self),
            State::Stopped if self.model.read32(regs::MODE) != 0 => regs::RRD_EMPTY,
            State::Stopped if self.faults.rrd_stuck => word(self),
            State::Stopped if self.unread == 0 => regs::RRD_EMPTY,
            State::Stopped => word(self),
        }
    }

    fn advance_rrp(&mut self) {
        self.rrp += 4;
        if self.rrp >= self.end() {
            self.rrp = self.dba;
        }
    }

    /// What reading `offset` returns, when the ETR, not the shared logic, answers it.
    fn own(&mut self, offset: u32) -> Option<u32> {
        // CAST: each value is masked to 32 bits.
        let lo = |v: u64| (v & 0xFFFF_FFFF) as u32;
        let hi = |v: u64| (v >> 32) as u32;
        Some(match offset {
            regs::RSZ => self.rsz,
            regs::STS => self.sts(),
            regs::RRD => self.rrd(),
            regs::RRP => lo(self.rrp),
            RRPHI => hi(self.rrp),
            regs::RWP => lo(self.rwp),
            RWPHI => hi(self.rwp),
            LBUFLEVEL | PSCR | regs::RWD => 0,
            CBUFLEVEL => {
                if self.full {
                    self.rsz
                } else {
                    u32::try_from(self.rwp.saturating_sub(self.dba) / 4).unwrap_or(u32::MAX)
                }
            }
            AXICTL => self.axictl,
            DBALO => lo(self.dba),
            DBAHI => hi(self.dba),
            regs::DEVID => ETR_DEVID,
            regs::DEVTYPE => ETR_DEVTYPE,
            regs::CLAIMSET => CLAIM_IMPLEMENTED,
            _ => return None,
        })
    }

    /// Applies a write the ETR, not the shared logic, handles; `false` when it is not one.
    fn write_own(&mut self, offset: u32, value: u32) -> bool {
        let set_lo = |a: u64| ((a & !0xFFFF_FFFF) | u64::from(value)) & ADDR_MASK;
        let set_hi = |a: u64| ((a & 0xFFFF_FFFF) | (u64::from(value) << 32)) & ADDR_MASK;
        let own = matches!(
            offset,
            regs::RSZ
                | regs::STS
                | regs::RRD
                | regs::RRP
                | RRPHI
                | regs::RWP
                | RWPHI
                | regs::RWD
                | LBUFLEVEL
                | CBUFLEVEL
                | AXICTL
                | DBALO
                | DBAHI
                | regs::DEVID
                | regs::DEVTYPE
        );
        if !own {
            return false;
        }
        if self.locked() || self.state != State::Disabled {
            return true;
        }
        match offset {
            regs::RSZ => self.rsz = value & RSZ_MASK,
            regs::RRP => self.rrp = set_lo(self.rrp),
            RRPHI => self.rrp = set_hi(self.rrp),
            regs::RWP => self.rwp = set_lo(self.rwp),
            RWPHI => self.rwp = set_hi(self.rwp),
            regs::RWD => {
                let addr = self.rwp;
                if self.writable(addr) {
                    self.mem.write_u32(addr, value);
                }
                self.rwp = addr + 4;
                if self.rsz != 0 && self.rwp >= self.end() {
                    self.rwp = self.dba;
                }
            }
            AXICTL => self.axictl = value & AXICTL_MASK,
            DBALO => self.dba = set_lo(self.dba),
            DBAHI => self.dba = set_hi(self.dba),
            // STS is read-only on this part; the level and ID registers are read-only.
            _ => {}
        }
        true
    }

    /// Advances the shared logic's clock by one access, then applies what it led to.
    fn after_access(&mut self) {
        self.model.delay_us(1);
        self.sync();
    }
}

impl Component for Etr {
    fn peek(&mut self, offset: u32) -> u32 {
        if let Some(v) = TMC_ID.reg(offset) {
            return v;
        }
        if let Some(v) = self.own(offset) {
            return v;
        }
        if STAGED.contains(&offset) {
            let v = self.model.read32(offset);
            // A read can let a due flush complete: its frame goes to memory at once.
            self.sync();
            v
        } else {
            0
        }
    }

    fn read(&mut self, offset: u32) {
        if offset == regs::RRD && !self.locked() {
            match self.state {
                State::Disabled => self.advance_rrp(),
                State::Stopped
                    if !self.faults.rrd_stuck
                        && self.unread > 0
                        && self.model.read32(regs::MODE) == 0 =>
                {
                    self.advance_rrp();
                    self.unread -= 1;
                }
                _ => {}
            }
        }
        self.after_access();
    }

    fn write(&mut self, offset: u32, value: u32) {
        if TMC_ID.reg(offset).is_none() && !self.write_own(offset, value) {
            let starts = offset == regs::CTL
                && value & 1 != 0
                && self.state == State::Disabled
                && !self.locked();
            if starts {
                self.start_capture();
            }
            if STAGED.contains(&offset) {
                self.model.write32(offset, value);
            }
        }
        self.after_access();
    }

    fn staged(&self) -> &'static [u32] {
        STAGED
    }
}

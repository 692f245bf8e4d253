// SPDX-License-Identifier: GPL-2.0

//! Register-level model of one CPU's external debug frame (Arm DDI 0487, part H).
//!
//! The model covers what PC sampling touches:
//!
//! - **Power.** The debug registers in the core power domain (`EDPCSR`, `EDCIDSR`, `EDVIDSR`,
//!   `EDPCSR_HI`, `EDOSLAR`) answer only while the core is powered (`EDPRSR.PU`). A core in a
//!   low-power state comes up some accesses after `EDPRCR.COREPURQ` is set
//!   ([`PowerMode::OnRequest`]), never ([`PowerMode::Ignores`], a design that does not honour
//!   the request), or comes up and drops again before `EDPRCR.CORENPDRQ` lands
//!   ([`PowerMode::Flaky`]). Power-up is a cold reset of the core domain: the OS lock comes up
//!   set and the double lock clear. Clearing both request bits lets a low-power core go down
//!   again.
//! - **Locks.** The OS double lock (`EDPRSR.DLK`) and the OS lock (`EDOSLAR`, `EDPRSR.OSLK`)
//!   make the sample registers fault. The software lock (`LAR`/`LSR`) makes writes other than
//!   to `LAR` ignored.
//! - **Sampling.** A read of `EDPCSR` samples the "current CPU state" the test set
//!   ([`CpuState`]) and latches `EDPCSR_HI`, `EDCIDSR` and `EDVIDSR`; those read the latched
//!   values. When sampling is prohibited or the PE is halted, `EDPCSR` reads all ones and the
//!   latched registers become UNKNOWN ([`UNKNOWN`]).
//! - **Identification.** `EDDEVID.PCSample` and `EDDEVID1.PCSROffset` are configurable: an
//!   Armv7-like frame (offset samples), an Armv8 frame, or one without PC sampling.
//!
//! A faulting access (a real bus would return an error) reads as 0, is ignored for writes and
//! is counted ([`CpuDebugModel::faults`]). Every access is counted per register in a fixed
//! table. Power-up delays count accesses, not `delay_us` time.
//!
//! The offsets and bits here are written from the Arm documents independently of the driver
//! code, so that a wrong constant there shows up as a failing test. Plain `core`, no
//! allocation.
//!
//! Host-side only: the host tests run the driver's sequence (`crates/cspd-hw`) against it, and
//! the QEMU plugin (`crates/cspd-emu`) puts it behind its register window. Uses only `core` and
//! `kernel::coresight::access` (the host's `kernel` crate, `crates/kernel-host`).

use kernel::coresight::access::RawFrame;

// The registers of the frame (DDI 0487 part H); the tests use them too, as a register map
// written independently of the driver's `register!` declarations.

/// Offset of `EDPCSR`.
pub const EDPCSR: u32 = 0x0A0;
/// Offset of `EDCIDSR`.
pub const EDCIDSR: u32 = 0x0A4;
/// Offset of `EDVIDSR`.
pub const EDVIDSR: u32 = 0x0A8;
/// Offset of `EDPCSR_HI`.
pub const EDPCSR_HI: u32 = 0x0AC;
/// Offset of `EDOSLAR`.
pub const EDOSLAR: u32 = 0x300;
/// Offset of `EDPRCR`.
pub const EDPRCR: u32 = 0x310;
/// Offset of `EDPRSR`.
pub const EDPRSR: u32 = 0x314;
/// Offset of the software lock's `LAR`.
pub const LAR: u32 = 0xFB0;
/// Offset of the software lock's `LSR`.
pub const LSR: u32 = 0xFB4;
/// Offset of `EDDEVID1`.
pub const EDDEVID1: u32 = 0xFC4;
/// Offset of `EDDEVID`.
pub const EDDEVID: u32 = 0xFC8;

const UNLOCK_KEY: u32 = 0xC5AC_CE55;

/// `EDPRCR.CORENPDRQ`.
pub const PRCR_CORENPDRQ: u32 = 1 << 0;
const PRCR_COREPURQ: u32 = 1 << 3;

const PRSR_PU: u32 = 1 << 0;
const PRSR_SPD: u32 = 1 << 1;
const PRSR_SR: u32 = 1 << 3;
const PRSR_HALTED: u32 = 1 << 4;
const PRSR_OSLK: u32 = 1 << 5;
const PRSR_DLK: u32 = 1 << 6;

/// What the UNKNOWN latched registers read after an all-ones `EDPCSR` or an AArch32 sample's
/// `EDPCSR_HI`: a pattern no test state uses, so that a driver that trusts it is caught.
pub const UNKNOWN: u32 = 0x5A5A_A5A5;

/// `EDDEVID` with `PCSample` = 3: `EDPCSR`, `EDCIDSR` and `EDVIDSR` implemented.
pub const EDDEVID_FULL: u32 = 3;

/// `EDDEVID` with `PCSample` = 0: no PC sampling.
pub const EDDEVID_NONE: u32 = 0;

/// `EDDEVID1` with `PCSROffset` = 0 (Armv7: samples offset by instruction set state).
pub const EDDEVID1_V7_OFFSET: u32 = 0;

/// `EDDEVID1` with `PCSROffset` = 2 (Armv8: no offset, AArch32 state not sampled).
pub const EDDEVID1_V8: u32 = 2;

/// The registers counted one by one; everything else shares the last slot.
const COUNTED: [u32; 11] = [
    EDPCSR, EDCIDSR, EDVIDSR, EDPCSR_HI, EDOSLAR, EDPRCR, EDPRSR, EDDEVID1, EDDEVID, LAR, LSR,
];

const SLOTS: usize = COUNTED.len() + 1;

fn slot(offset: u32) -> usize {
    let mut i = 0;
    while i < COUNTED.len() {
        if COUNTED.get(i) == Some(&offset) {
            return i;
        }
        i += 1;
    }
    COUNTED.len()
}

/// How the core's power controller answers `EDPRCR.COREPURQ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerMode {
    /// Powers the core up `delay` accesses after the request (0: the next access sees it).
    OnRequest {
        /// Accesses between the request and `PU` reading 1.
        delay: u32,
    },
    /// Ignores the request: a low-power core never comes up.
    Ignores,
    /// Powers up after `delay` accesses, then drops power again at the next `EDPRCR` write,
    /// `drops` times.
    Flaky {
        /// Accesses between the request and `PU` reading 1.
        delay: u32,
        /// How many times power is lost right after coming up.
        drops: u32,
    },
}

/// The CPU state the next `EDPCSR` read samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuState {
    /// The address of the instruction being executed.
    pub pc: u64,
    /// `CONTEXTIDR_EL1`.
    pub context_id: u32,
    /// The VMID (16 bits; only sampled at EL1/EL0 in Non-secure or Realm state).
    pub vmid: u16,
    /// Exception level, 0 to 3.
    pub el: u8,
    /// Non-secure (`SCR_EL3.NS`).
    pub ns: bool,
    /// `SCR_EL3.NSE` (`FEAT_RME`): with `ns`, Realm; without, Root.
    pub nse: bool,
    /// AArch64 (else AArch32).
    pub aarch64: bool,
    /// Thumb state (AArch32 only).
    pub thumb: bool,
}

impl CpuState {
    /// A Non-secure AArch64 EL1 state at `pc`.
    pub const fn aarch64_el1(pc: u64) -> Self {
        Self {
            pc,
            context_id: 0,
            vmid: 0,
            el: 1,
            ns: true,
            nse: false,
            aarch64: true,
            thumb: false,
        }
    }

    /// A Non-secure AArch32 EL1 (SVC) state at `pc`, Arm or Thumb.
    pub fn aarch32_el1(pc: u32, thumb: bool) -> Self {
        Self {
            pc: u64::from(pc),
            context_id: 0,
            vmid: 0,
            el: 1,
            ns: true,
            nse: false,
            aarch64: false,
            thumb,
        }
    }
}

/// The configuration a model starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuDebugConfig {
    /// `EDDEVID` (`PCSample` in bits 3:0).
    pub eddevid: u32,
    /// `EDDEVID1` (`PCSROffset` in bits 3:0).
    pub eddevid1: u32,
    /// How the power controller answers `COREPURQ`.
    pub power: PowerMode,
    /// The core is powered at start (else it is in a low-power state).
    pub core_on: bool,
    /// The OS lock is set at start (when the core is on).
    pub os_locked: bool,
    /// The OS double lock is set at start (when the core is on).
    pub double_locked: bool,
    /// The software lock is set at start.
    pub sw_locked: bool,
    /// Sample-based profiling is prohibited (`EDPCSR` reads all ones).
    pub prohibited: bool,
    /// The PE is halted in debug state (`EDPRSR.HALTED`, `EDPCSR` all ones).
    pub halted: bool,
    /// Extra `EDPRSR` bits that read as set (e.g. `EDAD`, `EPMAD`), for decoding tests.
    pub edprsr_extra: u32,
}

impl CpuDebugConfig {
    /// An Armv8 frame (full PC sampling, `PCSROffset` 2), core on, locks clear except `LAR`.
    pub const fn v8() -> Self {
        Self {
            eddevid: EDDEVID_FULL,
            eddevid1: EDDEVID1_V8,
            power: PowerMode::OnRequest { delay: 3 },
            core_on: true,
            os_locked: false,
            double_locked: false,
            sw_locked: true,
            prohibited: false,
            halted: false,
            edprsr_extra: 0,
        }
    }

    /// An Armv7-like frame: full PC sampling with `PCSROffset` 0 (offset samples).
    pub const fn v7() -> Self {
        let mut c = Self::v8();
        c.eddevid1 = EDDEVID1_V7_OFFSET;
        c
    }

    /// A frame without PC sampling (`PCSample` 0).
    pub const fn not_implemented() -> Self {
        let mut c = Self::v8();
        c.eddevid = EDDEVID_NONE;
        c
    }
}

/// Counts of reads and writes of one register.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessCount {
    /// Reads.
    pub reads: u32,
    /// Writes.
    pub writes: u32,
}

/// The model of one CPU's external debug frame; implements [`CsAccess`].
#[derive(Debug, Clone)]
pub struct CpuDebugModel {
    cfg: CpuDebugConfig,
    state: CpuState,
    prohibited: bool,
    halted: bool,
    powered: bool,
    low_power: bool,
    pending: bool,
    countdown: u32,
    drops_left: u32,
    edprcr: u32,
    oslk: bool,
    dlk: bool,
    slk: bool,
    spd: bool,
    sr: bool,
    latched_hi: u32,
    latched_cid: u32,
    latched_vid: u32,
    counts: [AccessCount; SLOTS],
    delays: u32,
    delayed_us: u64,
    faults: u32,
    ignored_writes: u32,
}

impl CpuDebugModel {
    /// Builds a model from `cfg`; the CPU state is AArch64 EL1 at address 0 until set.
    pub const fn new(cfg: CpuDebugConfig) -> Self {
        let drops = match cfg.power {
            PowerMode::Flaky { drops, .. } => drops,
            _ => 0,
        };
        Self {
            cfg,
            state: CpuState::aarch64_el1(0),
            prohibited: cfg.prohibited,
            halted: cfg.halted,
            powered: cfg.core_on,
            low_power: !cfg.core_on,
            pending: false,
            countdown: 0,
            drops_left: drops,
            edprcr: 0,
            oslk: cfg.os_locked && cfg.core_on,
            dlk: cfg.double_locked && cfg.core_on,
            slk: cfg.sw_locked,
            spd: !cfg.core_on,
            sr: false,
            latched_hi: 0,
            latched_cid: 0,
            latched_vid: 0,
            counts: [AccessCount {
                reads: 0,
                writes: 0,
            }; SLOTS],
            delays: 0,
            delayed_us: 0,
            faults: 0,
            ignored_writes: 0,
        }
    }

    /// Sets the state the next `EDPCSR` read samples.
    pub fn set_cpu_state(&mut self, state: CpuState) {
        self.state = state;
    }

    /// Returns the state the next `EDPCSR` read samples.
    pub fn cpu_state(&self) -> CpuState {
        self.state
    }

    /// Prohibits (or allows) sample-based profiling.
    pub fn set_prohibited(&mut self, prohibited: bool) {
        self.prohibited = prohibited;
    }

    /// Puts the PE in (or out of) debug state.
    pub fn set_halted(&mut self, halted: bool) {
        self.halted = halted;
    }

    /// Sets or clears the OS double lock (the OS does this before powering a core down).
    pub fn set_double_lock(&mut self, locked: bool) {
        if self.powered {
            self.dlk = locked;
        }
    }

    /// Sets or clears the OS lock, as the OS would through `OSLAR_EL1`.
    pub fn set_os_lock(&mut self, locked: bool) {
        if self.powered {
            self.oslk = locked;
        }
    }

    /// Takes the core's power domain down and up again whatever the power requests say (a core
    /// its power controller was told to turn off, then on): `EDPRSR.SPD` and `SR` set, the OS
    /// lock set, the double lock clear, the latched sample lost.
    pub fn power_cycle(&mut self) {
        self.power_off();
        self.power_on();
    }

    /// Puts the core in a low-power state: it powers down now unless a request keeps it up.
    pub fn enter_low_power(&mut self) {
        self.low_power = true;
        if self.edprcr & (PRCR_COREPURQ | PRCR_CORENPDRQ) == 0 {
            self.power_off();
        }
    }

    /// Brings the core out of its low-power state (a CPU started again): powered, and no longer
    /// going down when the power requests are dropped.
    pub fn wake(&mut self) {
        self.low_power = false;
        if !self.powered {
            self.power_on();
        }
    }

    /// Returns whether the core is powered (`EDPRSR.PU`).
    pub fn powered(&self) -> bool {
        self.powered
    }

    /// Returns whether the OS lock is set.
    pub fn os_locked(&self) -> bool {
        self.oslk
    }

    /// Returns whether the OS double lock is set.
    pub fn double_locked(&self) -> bool {
        self.dlk
    }

    /// Returns whether the software lock is set.
    pub fn sw_locked(&self) -> bool {
        self.slk
    }

    /// Returns the current `EDPRCR` request bits.
    pub fn edprcr(&self) -> u32 {
        self.edprcr
    }

    /// Returns the access counts of the register at `offset` (other offsets share one slot).
    pub fn count(&self, offset: u32) -> AccessCount {
        self.counts.get(slot(offset)).copied().unwrap_or_default()
    }

    /// Returns the number of reads of the register at `offset`.
    pub fn reads(&self, offset: u32) -> u32 {
        self.count(offset).reads
    }

    /// Returns the number of writes of the register at `offset`.
    pub fn writes(&self, offset: u32) -> u32 {
        self.count(offset).writes
    }

    /// Returns the total number of register accesses.
    pub fn accesses(&self) -> u32 {
        self.counts.iter().fold(0u32, |acc, c| {
            acc.saturating_add(c.reads).saturating_add(c.writes)
        })
    }

    /// Returns the number of `delay_us` calls.
    pub fn delays(&self) -> u32 {
        self.delays
    }

    /// Returns the total microseconds asked for through `delay_us`.
    pub fn delayed_us(&self) -> u64 {
        self.delayed_us
    }

    /// Returns the number of accesses a real bus would have answered with an error.
    pub fn faults(&self) -> u32 {
        self.faults
    }

    /// Returns the number of writes ignored because the software lock was set.
    pub fn ignored_writes(&self) -> u32 {
        self.ignored_writes
    }

    /// Clears the access, delay and fault counters.
    pub fn reset_counts(&mut self) {
        self.counts = [AccessCount::default(); SLOTS];
        self.delays = 0;
        self.delayed_us = 0;
        self.faults = 0;
        self.ignored_writes = 0;
    }

    fn power_on(&mut self) {
        self.powered = true;
        self.pending = false;
        // A power-up is a cold reset of the core power domain: OS lock set, double lock clear.
        self.oslk = true;
        self.dlk = false;
        self.sr = true;
    }

    fn power_off(&mut self) {
        self.powered = false;
        self.pending = false;
        self.spd = true;
        self.latched_hi = UNKNOWN;
        self.latched_cid = UNKNOWN;
        self.latched_vid = UNKNOWN;
    }

    /// Advances the power controller by one access.
    fn tick(&mut self) {
        if self.pending {
            if self.countdown == 0 {
                self.power_on();
            } else {
                self.countdown -= 1;
            }
        }
    }

    fn count_access(&mut self, offset: u32, write: bool) {
        if let Some(c) = self.counts.get_mut(slot(offset)) {
            if write {
                c.writes = c.writes.saturating_add(1);
            } else {
                c.reads = c.reads.saturating_add(1);
            }
        }
    }

    fn fault(&mut self) -> u32 {
        self.faults = self.faults.saturating_add(1);
        0
    }

    /// Whether the sample registers answer: core on, no double lock, no OS lock.
    fn sample_regs_accessible(&self) -> bool {
        self.powered && !self.dlk && !self.oslk
    }

    fn pcsample(&self) -> u32 {
        self.cfg.eddevid & 0xF
    }

    fn edprsr(&mut self) -> u32 {
        let mut v = self.cfg.edprsr_extra & !0x7F;
        if self.spd {
            v |= PRSR_SPD;
        }
        if self.sr {
            v |= PRSR_SR;
        }
        if self.powered {
            v |= PRSR_PU;
            if self.halted {
                v |= PRSR_HALTED;
            }
            if self.oslk {
                v |= PRSR_OSLK;
            }
            if self.dlk {
                v |= PRSR_DLK;
            }
            // The sticky bits clear on a read while the core is powered.
            self.spd = false;
            self.sr = false;
        }
        v
    }

    /// Takes a sample of the current state: returns `EDPCSR` and latches the others.
    fn sample(&mut self) -> u32 {
        if self.prohibited || self.halted {
            self.latched_hi = UNKNOWN;
            self.latched_cid = UNKNOWN;
            self.latched_vid = UNKNOWN;
            return 0xFFFF_FFFF;
        }
        let s = self.state;
        // CAST: the low word of the PC, on purpose.
        let pc32 = s.pc as u32;
        let (lo, hi) = if s.aarch64 {
            // CAST: the high word of the PC.
            (pc32, (s.pc >> 32) as u32)
        } else {
            let lo = match self.cfg.eddevid1 & 0xF {
                // Armv7 DBGPCSR: Arm samples read the address + 8, Thumb ones the address + 4
                // with bit 0 set.
                0 if s.thumb => pc32.wrapping_add(4) | 1,
                0 => pc32.wrapping_add(8),
                1 if s.thumb => pc32 | 1,
                // PCSROffset 2: no offset, no instruction set state.
                _ => pc32,
            };
            (lo, UNKNOWN)
        };
        let mut vid = 0;
        if s.ns {
            vid |= 1 << 31;
        }
        if s.el == 2 {
            vid |= 1 << 30;
        }
        if s.el == 3 {
            vid |= 1 << 29;
        }
        if s.aarch64 {
            vid |= 1 << 28;
        }
        if s.nse {
            vid |= 1 << 27;
        }
        if s.el <= 1 && s.ns {
            vid |= u32::from(s.vmid);
        }
        self.latched_hi = hi;
        self.latched_cid = s.context_id;
        self.latched_vid = vid;
        lo
    }

    fn write_edprcr(&mut self, value: u32) {
        let was_up = self.powered;
        self.edprcr = value & (PRCR_COREPURQ | PRCR_CORENPDRQ);
        if was_up && self.drops_left > 0 && self.low_power {
            // A flaky controller lets the core go down once more before it stays up.
            self.drops_left -= 1;
            self.power_off();
        }
        if self.edprcr & PRCR_COREPURQ != 0 {
            if !self.powered && !self.pending {
                match self.cfg.power {
                    PowerMode::OnRequest { delay } | PowerMode::Flaky { delay, .. } => {
                        self.pending = true;
                        self.countdown = delay;
                    }
                    PowerMode::Ignores => {}
                }
            }
        } else {
            self.pending = false;
            if self.edprcr & PRCR_CORENPDRQ == 0 && self.low_power && self.powered {
                self.power_off();
            }
        }
    }
}

impl RawFrame for CpuDebugModel {
    fn read32(&mut self, offset: u32) -> u32 {
        self.tick();
        self.count_access(offset, false);
        match offset {
            LSR => {
                // SLI (lock implemented), SLK (locked).
                1 | if self.slk { 2 } else { 0 }
            }
            EDDEVID => self.cfg.eddevid,
            EDDEVID1 => self.cfg.eddevid1,
            EDPRCR => self.edprcr,
            EDPRSR => self.edprsr(),
            EDPCSR | EDPCSR_HI | EDCIDSR | EDVIDSR if !self.sample_regs_accessible() => {
                self.fault()
            }
            EDPCSR if self.pcsample() == 0 => 0,
            EDPCSR => self.sample(),
            EDPCSR_HI => self.latched_hi,
            EDCIDSR if self.pcsample() >= 2 => self.latched_cid,
            EDVIDSR if self.pcsample() >= 3 => self.latched_vid,
            // EDOSLAR and LAR are write-only.
            EDOSLAR | LAR => self.fault(),
            _ => 0,
        }
    }

    fn write32(&mut self, offset: u32, value: u32) {
        self.tick();
        self.count_access(offset, true);
        if offset == LAR {
            self.slk = value != UNLOCK_KEY;
            return;
        }
        if self.slk {
            self.ignored_writes = self.ignored_writes.saturating_add(1);
            return;
        }
        match offset {
            EDPRCR => self.write_edprcr(value),
            EDOSLAR if !self.powered || self.dlk => {
                self.fault();
            }
            EDOSLAR => self.oslk = value & 1 != 0,
            _ => {}
        }
    }

    fn delay_us(&mut self, us: u32) {
        self.delays = self.delays.saturating_add(1);
        self.delayed_us = self.delayed_us.saturating_add(u64::from(us));
    }
}

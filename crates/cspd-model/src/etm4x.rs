// SPDX-License-Identifier: GPL-2.0

//! Register-level model of an ETMv4 trace unit (Arm IHI 0064), as found next to a Cortex-A53
//! or Cortex-A57.
//!
//! The model keeps a 4 KiB register frame and reproduces what the driver logic depends on:
//!
//! - ID registers with the values of real Juno parts (`TRCIDR0/1/2/8..13` and
//!   `TRCAUTHSTATUS` as captured in OpenCSD's `juno-ret-stck` snapshot; `TRCIDR3..7` with the
//!   Cortex-A53/A55 documented layout).
//! - The OS lock, set at reset as on real parts: while it is set, trace registers read as zero
//!   and ignore writes.
//! - The software lock (`LAR`/`LSR`) of the memory-mapped interface.
//! - `TRCSTATR.IDLE`/`PMSTABLE` that take a number of accesses to follow `TRCPRGCTLR.EN`.
//! - Trace registers that ignore writes while the unit is not idle.
//! - Faults on demand: a unit that never goes idle, never leaves idle, never reports a stable
//!   programmers' model, an OS lock that will not clear, a powered-down trace domain.
//! - Counters of every kind of access, so tests can bound what the driver did.
//!
//! It is plain `core` Rust with no allocation.
//!
//! Host-side only: the host tests run the driver's sequences (`crates/cspd-hw`) against it, and
//! the QEMU plugin (`crates/cspd-emu`) puts it behind its register window. Uses only `core` and
//! `kernel::coresight::access` (the host's `kernel` crate, `crates/kernel-host`).

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;
use kernel::coresight::access::{
    RawFrame,
    CS_UNLOCK_KEY, //
};

/// Number of 32-bit registers in the frame.
const FRAME_WORDS: usize = 1024;

// The registers and bits of the architecture (IHI 0064) the model implements; the tests use
// them too, as a register map written independently of the driver's `register!` declarations.

/// Offset of `TRCPRGCTLR`.
pub const TRCPRGCTLR: u32 = 0x004;
/// Offset of `TRCSTATR`.
pub const TRCSTATR: u32 = 0x00C;
/// Offset of `TRCCONFIGR`.
pub const TRCCONFIGR: u32 = 0x010;
/// Offset of `TRCEVENTCTL0R`.
pub const TRCEVENTCTL0R: u32 = 0x020;
/// Offset of `TRCEVENTCTL1R`.
pub const TRCEVENTCTL1R: u32 = 0x024;
/// Offset of `TRCSTALLCTLR`.
pub const TRCSTALLCTLR: u32 = 0x02C;
/// Offset of `TRCTSCTLR`.
pub const TRCTSCTLR: u32 = 0x030;
/// Offset of `TRCSYNCPR`.
pub const TRCSYNCPR: u32 = 0x034;
/// Offset of `TRCCCCTLR`.
pub const TRCCCCTLR: u32 = 0x038;
/// Offset of `TRCBBCTLR`.
pub const TRCBBCTLR: u32 = 0x03C;
/// Offset of `TRCTRACEIDR`.
pub const TRCTRACEIDR: u32 = 0x040;
/// Offset of `TRCVICTLR`.
pub const TRCVICTLR: u32 = 0x080;
/// Offset of `TRCVIIECTLR`.
pub const TRCVIIECTLR: u32 = 0x084;
/// Offset of `TRCVISSCTLR`.
pub const TRCVISSCTLR: u32 = 0x088;
/// Offset of `TRCIDR8`.
pub const TRCIDR8: u32 = 0x180;
/// Offset of `TRCIDR13`.
pub const TRCIDR13: u32 = 0x194;
/// Offset of `TRCIDR0`.
pub const TRCIDR0: u32 = 0x1E0;
/// Offset of `TRCIDR7`.
pub const TRCIDR7: u32 = 0x1FC;
/// Offset of `TRCOSLAR`.
pub const TRCOSLAR: u32 = 0x300;
/// Offset of `TRCOSLSR`.
pub const TRCOSLSR: u32 = 0x304;
/// Offset of `TRCPDCR`.
pub const TRCPDCR: u32 = 0x310;
/// Offset of `TRCPDSR`.
pub const TRCPDSR: u32 = 0x314;
/// Offset of the software lock's `LAR`.
pub const TRCLAR: u32 = 0xFB0;
/// Offset of the software lock's `LSR`.
pub const TRCLSR: u32 = 0xFB4;
/// Offset of `TRCAUTHSTATUS`.
pub const TRCAUTHSTATUS: u32 = 0xFB8;
/// Offset of `TRCDEVARCH`.
pub const TRCDEVARCH: u32 = 0xFBC;
/// Offset of `TRCDEVID`.
pub const TRCDEVID: u32 = 0xFC8;
/// Offset of `TRCDEVTYPE`.
pub const TRCDEVTYPE: u32 = 0xFCC;

/// `TRCPRGCTLR.EN`.
pub const PRGCTLR_EN: u32 = 1 << 0;
/// `TRCSTATR.IDLE`.
pub const STATR_IDLE: u32 = 1 << 0;
/// `TRCSTATR.PMSTABLE`.
pub const STATR_PMSTABLE: u32 = 1 << 1;
/// `TRCOSLSR.OSLM` = 0b010: the OS lock is implemented (bit 3).
const OSLSR_OSLM_IMPL: u32 = 1 << 3;
const OSLSR_OSLK: u32 = 1 << 1;
/// `TRCPDCR.PU`.
pub const PDCR_PU: u32 = 1 << 3;
/// `TRCPDSR.POWER`.
pub const PDSR_POWER: u32 = 1 << 0;
const PDSR_STICKYPD: u32 = 1 << 1;
const PDSR_OSLK: u32 = 1 << 5;
const LSR_SLI: u32 = 1 << 0;
const LSR_SLK: u32 = 1 << 1;
/// `TRCCONFIGR.CID`.
pub const CONFIGR_CID: u32 = 1 << 6;
/// `TRCCONFIGR.TS`.
pub const CONFIGR_TS: u32 = 1 << 11;
/// `TRCIDR0.TSSIZE`.
pub const IDR0_TSSIZE_MASK: u32 = 0x1F << 24;
/// `TRCVICTLR.EVENT`.
pub const VICTLR_EVENT_MASK: u32 = 0xFF;
/// `TRCVICTLR.EVENT` value of the always-true resource.
pub const VICTLR_EVENT_ALWAYS: u32 = 0x01;
/// `TRCVICTLR.SSSTATUS`.
pub const VICTLR_SSSTATUS: u32 = 1 << 9;
/// `TRCVICTLR.EXLEVEL_S`.
pub const VICTLR_EXLEVEL_S_MASK: u32 = 0xF << 16;
/// `TRCVICTLR.EXLEVEL_NS`.
pub const VICTLR_EXLEVEL_NS_MASK: u32 = 0x7 << 20;

/// Which interface the model is reached through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelInterface {
    /// Memory-mapped: software lock and power-down registers present.
    Mmio,
    /// System registers: no software lock (`LSR` reads zero), no `TRCPDSR`.
    SysReg,
}

/// Identification values of a modelled trace unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelIds {
    /// `TRCIDR0..=TRCIDR13`.
    pub idr: [u32; 14],
    /// `TRCAUTHSTATUS`.
    pub authstatus: u32,
    /// `TRCDEVARCH`.
    pub devarch: u32,
    /// `TRCDEVTYPE`.
    pub devtype: u32,
}

/// `TRCDEVARCH` of an ETMv4.0: architect Arm, present, revision 0, archid 0x4A13.
pub const MODEL_DEVARCH_ETMV4: u32 = 0x4770_4A13;
/// `TRCDEVTYPE` of a trace source associated with a processor.
pub const MODEL_DEVTYPE_ETM: u32 = 0x13;

impl ModelIds {
    /// Cortex-A53 ETM as on Juno (`TRCIDR1` revision 3).
    pub const CORTEX_A53: Self = Self {
        idr: [
            0x2800_0EA1, // TRCIDR0: 64-bit TS, RETSTACK, CCI, COND, BB, INSTP0=0
            0x4100_F403, // TRCIDR1: Arm, ETMv4.0, revision 3
            0x0000_0488, // TRCIDR2: 64-bit IA, 32-bit CID, 8-bit VMID
            0x0D7B_0004, // TRCIDR3: NS EL0-2, S EL0/1/3, CCITMIN 4
            0x1117_0004, // TRCIDR4: 4 address comparator pairs, 8 resource pairs
            0x28C7_0004, // TRCIDR5: 7-bit trace ID, 2 counters, 4 sequencer states
            0,
            0,
            0, // TRCIDR8: no speculation
            0,
            0,
            0,
            0,
            0,
        ],
        authstatus: 0xCC,
        devarch: MODEL_DEVARCH_ETMV4,
        devtype: MODEL_DEVTYPE_ETM,
    };

    /// Cortex-A57 ETM as on Juno (`TRCIDR1` revision 2).
    pub const CORTEX_A57: Self = Self {
        idr: [
            0x2800_0EA1,
            0x4100_F402,
            0x0000_0488,
            0x0D7B_0004,
            0x1117_0004,
            0x28C7_0004,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
        authstatus: 0xCC,
        devarch: MODEL_DEVARCH_ETMV4,
        devtype: MODEL_DEVTYPE_ETM,
    };
}

/// Faults the model can be told to show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Etm4xFaults {
    /// `TRCSTATR.IDLE` never sets after `EN` is cleared.
    pub stuck_busy: bool,
    /// `TRCSTATR.IDLE` never clears after `EN` is set.
    pub never_starts: bool,
    /// `TRCSTATR.PMSTABLE` never sets.
    pub pm_unstable: bool,
    /// Writing zero to `TRCOSLAR` does not clear the OS lock.
    pub os_lock_stuck: bool,
    /// The trace power domain is down: `TRCPDSR.POWER` reads zero, trace registers read
    /// zero and ignore writes.
    pub powered_down: bool,
}

/// Counters of the accesses the model has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Etm4xStats {
    /// Register reads.
    pub reads: u64,
    /// Register writes.
    pub writes: u64,
    /// Calls to `delay_us`.
    pub delays: u64,
    /// Sum of the microseconds asked for by `delay_us`.
    pub delay_us: u64,
    /// Trace register accesses refused because the OS lock was set or power was down.
    pub blocked: u64,
    /// Writes refused because the software lock was set.
    pub sw_locked_writes: u64,
    /// Writes to trace registers refused because the unit was not idle.
    pub busy_writes: u64,
}

/// A modelled ETMv4 trace unit.
pub struct Etm4xModel {
    regs: [u32; FRAME_WORDS],
    ids: ModelIds,
    iface: ModelInterface,
    os_locked: bool,
    sw_locked: bool,
    sticky_pd: bool,
    enabled: bool,
    idle: bool,
    pmstable: bool,
    /// Accesses left before `idle`/`pmstable` follow `enabled`.
    pending: u32,
    latency: u32,
    faults: Etm4xFaults,
    stats: Etm4xStats,
}

/// Returns `true` for offsets in the trace register space (as opposed to management and
/// CoreSight identification registers).
const fn is_trace_reg(offset: u32) -> bool {
    offset < 0x300 || (offset >= 0x318 && offset < 0xF00)
}

/// Returns `true` for registers that software cannot write.
const fn is_read_only(offset: u32) -> bool {
    matches!(
        offset,
        TRCSTATR | TRCOSLSR | TRCPDSR | TRCLSR | TRCAUTHSTATUS | TRCDEVARCH | TRCDEVID | TRCDEVTYPE
    ) || (offset >= TRCIDR8 && offset <= TRCIDR13)
        || (offset >= TRCIDR0 && offset <= TRCIDR7)
        || offset >= 0xFD0
}

impl Etm4xModel {
    /// Creates a unit in its reset state: OS lock set, software lock set, trace disabled and
    /// idle, `TRCPDSR.STICKYPD` set, and a latency of 3 accesses for status changes.
    pub fn new(ids: ModelIds, iface: ModelInterface) -> Self {
        let mut m = MaybeUninit::uninit();
        Self::new_in(&mut m, ids, iface);
        // SAFETY: `new_in` initialised every field.
        unsafe { m.assume_init() }
    }

    /// Like [`Self::new`], but builds the unit in `slot`, so that its 4 KiB register file is
    /// never copied through the stack (for kernel probe paths, whose stacks are small).
    pub fn new_in(slot: &mut MaybeUninit<Self>, ids: ModelIds, iface: ModelInterface) -> &mut Self {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is valid for writes and aligned; every field is written below, and zero is
        // a valid register file.
        unsafe {
            addr_of_mut!((*p).regs).write_bytes(0, 1);
            addr_of_mut!((*p).ids).write(ids);
            addr_of_mut!((*p).iface).write(iface);
            addr_of_mut!((*p).os_locked).write(true);
            addr_of_mut!((*p).sw_locked).write(iface == ModelInterface::Mmio);
            addr_of_mut!((*p).sticky_pd).write(true);
            addr_of_mut!((*p).enabled).write(false);
            addr_of_mut!((*p).idle).write(true);
            addr_of_mut!((*p).pmstable).write(true);
            addr_of_mut!((*p).pending).write(0);
            addr_of_mut!((*p).latency).write(3);
            addr_of_mut!((*p).faults).write(Etm4xFaults::default());
            addr_of_mut!((*p).stats).write(Etm4xStats::default());
        }
        // SAFETY: Every field was initialised above.
        let m = unsafe { slot.assume_init_mut() };
        for (n, v) in ids.idr.iter().enumerate() {
            // CAST: `n < 14`.
            let off = if n < 8 {
                TRCIDR0 + 4 * n as u32
            } else {
                TRCIDR8 + 4 * (n as u32 - 8)
            };
            m.store(off, *v);
        }
        m.store(TRCAUTHSTATUS, ids.authstatus);
        m.store(TRCDEVARCH, ids.devarch);
        m.store(TRCDEVTYPE, ids.devtype);
        m
    }

    /// Creates a Cortex-A53 unit reached through the memory-mapped interface.
    pub fn cortex_a53() -> Self {
        Self::new(ModelIds::CORTEX_A53, ModelInterface::Mmio)
    }

    /// Creates a Cortex-A57 unit reached through the memory-mapped interface.
    pub fn cortex_a57() -> Self {
        Self::new(ModelIds::CORTEX_A57, ModelInterface::Mmio)
    }

    /// Sets how many accesses `TRCSTATR` takes to follow a change of `TRCPRGCTLR.EN`.
    pub fn set_latency(&mut self, accesses: u32) {
        self.latency = accesses;
    }

    /// Replaces the set of active faults.
    pub fn set_faults(&mut self, faults: Etm4xFaults) {
        self.faults = faults;
    }

    /// Returns the active faults.
    pub fn faults(&self) -> Etm4xFaults {
        self.faults
    }

    /// Returns the access counters.
    pub fn stats(&self) -> Etm4xStats {
        self.stats
    }

    /// Returns the identification values the unit was built with.
    pub fn ids(&self) -> &ModelIds {
        &self.ids
    }

    /// Returns `true` while the OS lock is set.
    pub fn os_locked(&self) -> bool {
        self.os_locked
    }

    /// Sets or clears the OS lock directly, as firmware or a previous owner would have.
    pub fn set_os_locked(&mut self, locked: bool) {
        self.os_locked = locked;
    }

    /// Returns `true` while the software lock is set.
    pub fn sw_locked(&self) -> bool {
        self.sw_locked
    }

    /// Returns `true` while `TRCPRGCTLR.EN` is set.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Returns `true` while `TRCSTATR.IDLE` reads as one.
    pub fn idle(&self) -> bool {
        self.idle
    }

    /// Puts the unit into the tracing state directly (OS lock clear, `EN` set, not idle), with
    /// `configr` and `traceidr` programmed, as a running system would have left it.
    pub fn start_tracing(&mut self, configr: u32, traceidr: u32) {
        self.store(0x010, configr);
        self.store(0x040, traceidr);
        self.store(TRCPRGCTLR, 1);
        self.enabled = true;
        self.idle = false;
        self.pmstable = false;
        self.pending = 0;
    }

    /// Returns the stored value of the register at `offset` without side effects.
    ///
    /// For status registers this is the value a read would return now.
    pub fn peek(&self, offset: u32) -> u32 {
        match offset {
            TRCSTATR => self.statr(),
            TRCOSLSR => self.oslsr(),
            TRCPDSR => self.pdsr(),
            TRCLSR => self.lsr(),
            _ => self.load(offset),
        }
    }

    fn index(offset: u32) -> Option<usize> {
        if offset & 3 != 0 {
            return None;
        }
        let i = usize::try_from(offset / 4).ok()?;
        (i < FRAME_WORDS).then_some(i)
    }

    fn load(&self, offset: u32) -> u32 {
        Self::index(offset)
            .and_then(|i| self.regs.get(i))
            .copied()
            .unwrap_or(0)
    }

    fn store(&mut self, offset: u32, value: u32) {
        if let Some(slot) = Self::index(offset).and_then(|i| self.regs.get_mut(i)) {
            *slot = value;
        }
    }

    fn statr(&self) -> u32 {
        let mut v = 0;
        if self.idle {
            v |= STATR_IDLE;
        }
        if self.pmstable {
            v |= STATR_PMSTABLE;
        }
        v
    }

    fn oslsr(&self) -> u32 {
        OSLSR_OSLM_IMPL | if self.os_locked { OSLSR_OSLK } else { 0 }
    }

    fn pdsr(&self) -> u32 {
        if self.iface == ModelInterface::SysReg {
            return 0;
        }
        let mut v = 0;
        if !self.faults.powered_down {
            v |= PDSR_POWER;
        }
        if self.sticky_pd {
            v |= PDSR_STICKYPD;
        }
        if self.os_locked {
            v |= PDSR_OSLK;
        }
        v
    }

    fn lsr(&self) -> u32 {
        match self.iface {
            ModelInterface::Mmio => LSR_SLI | if self.sw_locked { LSR_SLK } else { 0 },
            ModelInterface::SysReg => 0,
        }
    }

    /// Advances the model by one access and lets pending status changes land.
    fn tick(&mut self) {
        if self.pending > 0 {
            self.pending -= 1;
        }
        if self.pending != 0 {
            return;
        }
        if self.enabled {
            if !self.faults.never_starts {
                self.idle = false;
                self.pmstable = false;
            }
        } else if !self.faults.stuck_busy {
            self.idle = true;
            self.pmstable = !self.faults.pm_unstable;
        }
    }

    /// Returns `true` when a trace register access must be refused.
    fn trace_blocked(&self, offset: u32) -> bool {
        is_trace_reg(offset) && (self.os_locked || self.faults.powered_down)
    }

    fn mmio_only(&self, offset: u32) -> bool {
        matches!(offset, TRCPDCR | TRCPDSR | TRCLAR | TRCLSR | TRCDEVTYPE)
            && self.iface == ModelInterface::SysReg
    }
}

impl RawFrame for Etm4xModel {
    fn read32(&mut self, offset: u32) -> u32 {
        self.stats.reads = self.stats.reads.wrapping_add(1);
        self.tick();
        if self.mmio_only(offset) {
            return 0;
        }
        if self.trace_blocked(offset) {
            self.stats.blocked = self.stats.blocked.wrapping_add(1);
            return 0;
        }
        match offset {
            TRCSTATR => self.statr(),
            TRCOSLSR => self.oslsr(),
            TRCPDSR => {
                let v = self.pdsr();
                // Reading TRCPDSR clears the sticky power-down bit.
                if !self.faults.powered_down {
                    self.sticky_pd = false;
                }
                v
            }
            TRCLSR => self.lsr(),
            TRCLAR | TRCOSLAR => 0,
            _ => self.load(offset),
        }
    }

    fn write32(&mut self, offset: u32, value: u32) {
        self.stats.writes = self.stats.writes.wrapping_add(1);
        self.tick();
        if self.mmio_only(offset) {
            return;
        }
        if offset == TRCLAR {
            self.sw_locked = value != CS_UNLOCK_KEY;
            return;
        }
        if self.sw_locked {
            self.stats.sw_locked_writes = self.stats.sw_locked_writes.wrapping_add(1);
            return;
        }
        if offset == TRCOSLAR {
            let lock = value & 1 != 0;
            if lock || !self.faults.os_lock_stuck {
                self.os_locked = lock;
            }
            return;
        }
        if self.trace_blocked(offset) {
            self.stats.blocked = self.stats.blocked.wrapping_add(1);
            return;
        }
        if is_read_only(offset) {
            return;
        }
        if offset == TRCPRGCTLR {
            let en = value & 1 != 0;
            self.store(TRCPRGCTLR, value & 1);
            if en != self.enabled {
                self.enabled = en;
                self.pending = self.latency;
                if self.pending == 0 {
                    // Zero latency: the status follows at once.
                    self.pending = 1;
                    self.tick();
                }
            }
            return;
        }
        if is_trace_reg(offset) && !self.idle {
            self.stats.busy_writes = self.stats.busy_writes.wrapping_add(1);
            return;
        }
        self.store(offset, value);
    }

    fn delay_us(&mut self, us: u32) {
        self.stats.delays = self.stats.delays.wrapping_add(1);
        self.stats.delay_us = self.stats.delay_us.wrapping_add(u64::from(us));
        self.tick();
    }
}

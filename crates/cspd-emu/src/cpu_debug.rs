//! One CPU's Armv8-A external debug interface, as a window component.
//!
//! The register behaviour is `cspd_model::cpu_debug::CpuDebugModel`, written from the Arm
//! Architecture Reference Manual for A-profile (DDI 0487), part H "External Debug": power
//! (`EDPRCR.COREPURQ`/`CORENPDRQ`, `EDPRSR.PU`, `SPD`, `SR`, `OSLK`, `DLK`), the OS lock
//! (`EDOSLAR`), the software lock (`EDLAR`/`EDLSR`) and PC sampling (`EDPCSR`, `EDPCSR_HI`,
//! `EDCIDSR`, `EDVIDSR`). The frame is an Armv8.0 one: `EDDEVID.PCSample` = 3 (`EDPCSR`,
//! `EDCIDSR` and `EDVIDSR` implemented) and `EDDEVID1.PCSROffset` = 2 (samples carry no offset).
//! This module adds:
//!
//! - `EDDEVARCH` (0xFBC) 0x4770_6A15: architect Arm, present, Armv8.0 debug (ARCHVER 6,
//!   ARCHPART 0xA15); `EDDEVTYPE` (0xFCC) 0x15: debug logic of a processor; `EDDEVID2` 0;
//! - `EDAUTHSTATUS` (0xFB8) 0xFF: Secure and Non-secure, invasive and non-invasive debug
//!   implemented and enabled;
//! - `DBGCLAIMSET`/`DBGCLAIMCLR` (0xFA0/0xFA4): eight claim tags; `CLAIMSET` reads the implemented
//!   bits (0xFF), `CLAIMCLR` the current tags; writes are ignored while the software lock is set;
//! - identification: part 0xD07 (Cortex-A57 debug), designer Arm, revision 1, class 0x9.
//!
//! # Sampling without tearing
//!
//! The CPU's current state is set by [`CpuDebug::set_sample`] as the vCPU runs. A guest read of
//! `EDPCSR` returns what was staged, the low half of the state current at that staging
//! ([`Component::peek`]); the read's side effect ([`Component::read`]) then latches
//! `EDPCSR_HI`, `EDCIDSR` and `EDVIDSR` of that same state, even if the CPU moved on in between.
//! The halves of one sample therefore always belong together.
//!
//! # Time
//!
//! The model's clock counts accesses: each guest access is one tick, and a power-up request is
//! granted [`POWER_UP_ACCESSES`] ticks after it is made.
//!
//! # The `linux` C driver
//!
//! `coresight-cpu-debug` matches the part number, reads `EDDEVID`/`EDDEVID1`, and to sample:
//! unlocks `EDLAR`, writes `EDOSLAR` = 0, saves `EDPRCR`, sets `COREPURQ`, polls `EDPRSR.PU`,
//! sets `COREPURQ | CORENPDRQ`, checks `EDPRSR.PU` and `DLK`, reads `EDPCSR`, `EDPCSR_HI`,
//! `EDCIDSR`, `EDVIDSR`, and restores `EDPRCR`. All of it is served here.

use crate::bus::{with_id_regs, Component, PrimeCellId};
use cspd_model::access::RawFrame;
use cspd_model::cpu_debug::{CpuDebugConfig, CpuDebugModel, CpuState, PowerMode};

/// The register offsets this component shares with the register-level model.
pub use cspd_model::cpu_debug::{
    EDCIDSR, EDDEVID, EDDEVID1, EDOSLAR, EDPCSR, EDPCSR_HI, EDPRCR, EDPRSR, EDVIDSR,
};
/// Offset of `DBGCLAIMSET`.
pub const CLAIMSET: u32 = 0xFA0;
/// Offset of `DBGCLAIMCLR`.
pub const CLAIMCLR: u32 = 0xFA4;
/// Offset of `EDLAR`.
pub const EDLAR: u32 = 0xFB0;
/// Offset of `EDLSR`.
pub const EDLSR: u32 = 0xFB4;
/// Offset of `EDAUTHSTATUS`.
pub const EDAUTHSTATUS: u32 = 0xFB8;
/// Offset of `EDDEVARCH`.
pub const EDDEVARCH: u32 = 0xFBC;
/// Offset of `EDDEVID2`.
pub const EDDEVID2: u32 = 0xFC0;
/// Offset of `EDDEVTYPE`.
pub const EDDEVTYPE: u32 = 0xFCC;

/// `EDPRCR.COREPURQ`: core power-up request.
pub const EDPRCR_COREPURQ: u32 = 1 << 3;
/// `EDPRCR.CORENPDRQ`: core no-power-down request.
pub const EDPRCR_CORENPDRQ: u32 = 1 << 0;

/// `EDDEVARCH` of Armv8.0 external debug.
pub const DEBUG_DEVARCH: u32 = 0x4770_6A15;
/// `EDDEVTYPE`: major type 0x5 (debug logic), sub-type 0x1 (processor).
pub const DEBUG_DEVTYPE: u32 = 0x15;
/// `EDAUTHSTATUS`: all debug implemented and enabled.
pub const DEBUG_AUTHSTATUS: u32 = 0xFF;
/// `DBGCLAIMSET` read value: claim tag bits 7:0 implemented.
pub const CLAIM_IMPLEMENTED: u32 = 0xFF;
/// Accesses between a power-up request and `EDPRSR.PU` (when the core is down and the
/// controller honours the request).
pub const POWER_UP_ACCESSES: u32 = 2;

/// Identification of a Cortex-A57 debug frame: part 0xD07, designer Arm, revision 1, class 0x9.
pub const DEBUG_ID: PrimeCellId = PrimeCellId {
    pid: 0x04_001B_BD07,
    cid: PrimeCellId::CORESIGHT_CID,
};

/// The registers whose accesses go to the register model.
const FORWARDED: &[u32] = &[
    EDPCSR, EDCIDSR, EDVIDSR, EDPCSR_HI, EDOSLAR, EDPRCR, EDPRSR, EDLAR, EDLSR, EDDEVID1, EDDEVID,
];

/// The frame's registers other than the identification registers.
const OWN: &[u32] = &[
    EDPCSR,
    EDCIDSR,
    EDVIDSR,
    EDPCSR_HI,
    EDOSLAR,
    EDPRCR,
    EDPRSR,
    CLAIMSET,
    CLAIMCLR,
    EDLAR,
    EDLSR,
    EDAUTHSTATUS,
    EDDEVARCH,
    EDDEVID2,
    EDDEVID1,
    EDDEVID,
    EDDEVTYPE,
];

/// Every register of the frame, identification included.
const STAGED: &[u32] = &with_id_regs::<{ OWN.len() + 12 }>(OWN);

/// Faults the debug interface can be told to show.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuDebugFaults {
    /// The core is powered down and never comes up: `EDPRCR` holds the request, but
    /// `EDPRSR.PU` stays 0 and the sample registers do not answer (they read 0).
    pub power_stays_off: bool,
    /// The core is in a low-power state and `EDPRCR.COREPURQ` is ignored (RAZ/WI): the request
    /// never reaches the power controller, so `EDPRSR.PU` stays 0. Unlike `power_stays_off`,
    /// `EDPRCR` reads the request bit back as 0.
    pub ignores_corepurq: bool,
    /// The OS double lock is set (`EDPRSR.DLK`): the sample registers do not answer and
    /// `EDOSLAR` ignores writes.
    pub double_lock: bool,
}

/// An emulated CPU debug frame behind the register window.
#[derive(Clone, Debug)]
pub struct CpuDebug {
    cpu: usize,
    model: CpuDebugModel,
    faults: CpuDebugFaults,
    claim: u32,
    /// The CPU state whose `EDPCSR` was last staged: what a guest read of `EDPCSR` returned.
    shown: Option<CpuState>,
}

impl CpuDebug {
    /// Creates the debug frame of CPU `cpu` in the state of a running system: core powered,
    /// OS lock and double lock clear (unless `faults` say otherwise), software lock set, claim
    /// tags clear; the sample is AArch64 Non-secure EL1 at address 0 until [`Self::set_sample`].
    pub fn new(cpu: usize, faults: CpuDebugFaults) -> CpuDebug {
        let mut cfg = CpuDebugConfig::v8();
        cfg.power = PowerMode::OnRequest {
            delay: POWER_UP_ACCESSES,
        };
        cfg.core_on = !(faults.power_stays_off || faults.ignores_corepurq);
        if faults.power_stays_off {
            cfg.power = PowerMode::Ignores;
        }
        cfg.os_locked = false;
        cfg.double_locked = faults.double_lock;
        cfg.sw_locked = true;
        CpuDebug {
            cpu,
            model: CpuDebugModel::new(cfg),
            faults,
            claim: 0,
            shown: None,
        }
    }

    /// What the CPU is executing now: the PC (an address it executed), its exception level and
    /// security state. AArch64, context ID and VMID 0.
    pub fn set_sample(&mut self, pc: u64, el: u8, non_secure: bool) {
        let mut s = CpuState::aarch64_el1(pc);
        s.el = el;
        s.ns = non_secure;
        self.model.set_cpu_state(s);
    }

    /// Returns the CPU this frame belongs to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Returns the faults the frame shows.
    pub fn faults(&self) -> CpuDebugFaults {
        self.faults
    }

    /// The core went through a power-down and came back (a CPU taken offline and online): the
    /// debug logic of its power domain is reset, the OS lock set.
    pub fn power_cycle(&mut self) {
        self.model.power_cycle();
        self.model.wake();
    }

    /// The core was powered off (PSCI `CPU_OFF`): `EDPRSR.PU` reads 0 and the sample registers
    /// do not answer, until a power-up request (`EDPRCR.COREPURQ`, which the model grants) or
    /// [`Self::power_cycle`] when the CPU is started again.
    pub fn power_off(&mut self) {
        self.model.enter_low_power();
    }

    /// Returns whether the core is powered (`EDPRSR.PU`).
    pub fn powered(&self) -> bool {
        self.model.powered()
    }

    /// Advances the model's clock by one access for a register it does not hold: a read of
    /// `EDDEVID`, which has no side effect but the tick.
    fn tick(&mut self) {
        let _ = self.model.read32(EDDEVID);
    }
}

impl Component for CpuDebug {
    fn peek(&mut self, offset: u32) -> u32 {
        if let Some(v) = DEBUG_ID.reg(offset) {
            return v;
        }
        match offset {
            CLAIMSET => CLAIM_IMPLEMENTED,
            CLAIMCLR => self.claim,
            EDAUTHSTATUS => DEBUG_AUTHSTATUS,
            EDDEVARCH => DEBUG_DEVARCH,
            EDDEVTYPE => DEBUG_DEVTYPE,
            // Write-only: the model counts a read of them as a faulting access.
            EDOSLAR | EDLAR => 0,
            EDPCSR => {
                self.shown = Some(self.model.cpu_state());
                self.model.clone().read32(EDPCSR)
            }
            o if FORWARDED.contains(&o) => self.model.clone().read32(o),
            _ => 0,
        }
    }

    fn read(&mut self, offset: u32) {
        if offset == EDPCSR {
            // Sample the state the guest saw, then return to the current one.
            let now = self.model.cpu_state();
            if let Some(shown) = self.shown {
                self.model.set_cpu_state(shown);
            }
            let _ = self.model.read32(EDPCSR);
            self.model.set_cpu_state(now);
        } else if FORWARDED.contains(&offset) {
            let _ = self.model.read32(offset);
        } else {
            self.tick();
        }
    }

    fn write(&mut self, offset: u32, value: u32) {
        if offset == EDPRCR && self.faults.ignores_corepurq {
            self.model.write32(EDPRCR, value & !EDPRCR_COREPURQ);
            return;
        }
        if FORWARDED.contains(&offset) {
            self.model.write32(offset, value);
            return;
        }
        self.tick();
        if self.model.sw_locked() {
            return;
        }
        match offset {
            CLAIMSET => self.claim |= value & CLAIM_IMPLEMENTED,
            CLAIMCLR => self.claim &= !(value & CLAIM_IMPLEMENTED),
            _ => {}
        }
    }

    fn staged(&self) -> &'static [u32] {
        STAGED
    }
}

//! A memory-mapped ETMv4 trace unit of a Cortex-A57-like CPU, as a window component.
//!
//! The register behaviour is `cspd_model::etm4x::Etm4xModel`, written from the Arm Embedded Trace
//! Macrocell Architecture Specification ETMv4 (IHI 0064): the OS lock (set at reset; while it is
//! set the trace registers read as zero and ignore writes), the software lock, `TRCPDSR`,
//! `TRCSTATR.IDLE`/`PMSTABLE` following `TRCPRGCTLR.EN` a few accesses later, and trace registers
//! that ignore writes while the unit is not idle. This module adds the claim tags and the
//! CoreSight identification registers (IHI 0029), makes the unimplemented context ID and VMID
//! comparator controls RAZ/WI, and decodes what the driver programmed into a [`TraceProgram`].
//!
//! # Identification
//!
//! The ID registers are those of a Cortex-A57 ETM (`ModelIds::CORTEX_A57`, Juno values) with the
//! features the emulation cannot produce advertised absent:
//!
//! | register | value | meaning |
//! | --- | --- | --- |
//! | `TRCIDR0` | 0x2000_0C01 | COMMOPT = 1 (commit mode 1), TSSIZE = 0 (no global timestamp), NUMEVENT = 3 (four events), no return stack (RETSTACK = 0), no cycle counting (TRCCCI = 0), no conditional tracing (TRCCOND = 0, CONDTYPE = 0), no branch broadcast (TRCBB = 0), no data trace, INSTP0 = 0, bit 0 RES1 |
//! | `TRCIDR1` | 0x4100_F402 | designer Arm (0x41), ETMv4.0, revision 2 |
//! | `TRCIDR2` | 0x0000_0008 | IASIZE = 8 (64-bit instruction addresses), CIDSIZE = 0 (no context ID), VMIDSIZE = 0 (no VMID), no data addresses or values |
//! | `TRCIDR3` | 0x0D7B_0000 | EL0, EL1 and EL3 in Secure state, EL0 to EL2 in Non-secure state (EXLEVEL_S = 0b1011, EXLEVEL_NS = 0b0111), TRCERR, STALLCTL, SYSSTALL, TRCSYNCPR writable (SYNCPR = 0), one PE, CCITMIN = 0 (RES0 without cycle counting) |
//! | `TRCIDR4` | 0x0017_0004 | four address comparator pairs, no data value comparators, no PE comparator inputs, eight resource selector pairs (NUMRSPAIR = 7), one single-shot comparator control, no context ID comparators (NUMCIDC = 0), no VMID comparators (NUMVMIDC = 0) |
//! | `TRCIDR5` | 0x28C7_0004 | four external inputs, 7-bit trace ID, ATB trigger, low-power override, four sequencer states, two counters |
//! | `TRCIDR6`, `TRCIDR7`, `TRCIDR8..13` | 0 | no speculation (MAXSPEC = 0), no P0 keys |
//! | `TRCAUTHSTATUS` | 0xCC | Secure and Non-secure non-invasive debug implemented and enabled, no invasive debug |
//! | `TRCDEVARCH` | 0x4770_4A13 | architect Arm, present, ETMv4 (ARCHID 0x4A13), revision 0 |
//! | `TRCDEVTYPE` | 0x13 | trace source associated with a processor |
//! | `TRCDEVID` | 0 | |
//! | PIDR/CIDR | part 0x95E | the Cortex-A57 ETM (`linux`'s `coresight-etm4x` table: 0x95D is the Cortex-A53's), designer Arm, revision 1, class 0x9 |
//!
//! `TRCCLAIMSET` reads 0xF (four claim tags implemented), `TRCCLAIMCLR` the current tags.
//!
//! # Locks
//!
//! The software lock (`TRCLAR`/`TRCLSR`, set at reset) makes writes to every register but
//! `TRCLAR` and `TRCOSLAR` ignored. `TRCOSLAR` is left out on purpose, unlike in the register
//! model: `linux` clears the OS lock before it unlocks the software lock (`etm4_init_arch_data`,
//! and `etm4_starting_cpu` on CPU hotplug, which never touches `TRCLAR`), and that works on
//! Cortex-A53/A57 silicon, whose trace registers it then reads.
//!
//! # Time
//!
//! The model's clock counts accesses: each guest access is one tick, and `TRCSTATR.IDLE` follows
//! `TRCPRGCTLR.EN` [`STATUS_LATENCY`] ticks after the write.
//!
//! # The `linux` C driver
//!
//! `coresight-etm4x` checks the CIDR class, `TRCDEVTYPE` and `TRCDEVARCH`, reads `TRCOSLSR`
//! (OSLM = 0b10: OS lock implemented), clears the OS lock, reads `TRCIDR0..5` and `TRCSSCSR0`;
//! on enable it claims the unit, writes `TRCPRGCTLR` = 0, polls `TRCSTATR.IDLE`, programs the
//! trace registers, sets `TRCPDCR.PU`, writes `TRCPRGCTLR` = 1 and polls for `IDLE` clear; on
//! disable it writes `TRCPRGCTLR` = 0 and polls `PMSTABLE` and `IDLE`. All of it is served here.

use crate::bus::{Component, PrimeCellId};
use cspd_model::access::CsAccess;
use cspd_model::etm4x::{
    Etm4xFaults, Etm4xModel, ModelIds, ModelInterface, MODEL_DEVARCH_ETMV4, MODEL_DEVTYPE_ETM,
};

/// Offset of `TRCPRGCTLR`.
pub const TRCPRGCTLR: u32 = 0x004;
/// Offset of `TRCSTATR`.
pub const TRCSTATR: u32 = 0x00C;
/// Offset of `TRCCONFIGR`.
pub const TRCCONFIGR: u32 = 0x010;
/// Offset of `TRCAUXCTLR`.
pub const TRCAUXCTLR: u32 = 0x018;
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
/// Offset of `TRCIDR0`; `TRCIDRn` (n < 8) is at `TRCIDR0 + 4 * n`.
pub const TRCIDR0: u32 = 0x1E0;
/// Offset of `TRCIDR8`; `TRCIDRn` (8 <= n < 14) is at `TRCIDR8 + 4 * (n - 8)`.
pub const TRCIDR8: u32 = 0x180;
/// Offset of `TRCOSLAR`.
pub const TRCOSLAR: u32 = 0x300;
/// Offset of `TRCOSLSR`.
pub const TRCOSLSR: u32 = 0x304;
/// Offset of `TRCPDCR`.
pub const TRCPDCR: u32 = 0x310;
/// Offset of `TRCPDSR`.
pub const TRCPDSR: u32 = 0x314;
/// Offset of the low word of `TRCACVR0`; comparator `n` is at `TRCACVR0 + 8 * n` (low word)
/// and `+ 4` (high word).
pub const TRCACVR0: u32 = 0x400;
/// Offset of the low word of `TRCACATR0`; comparator `n` is at `TRCACATR0 + 8 * n`.
pub const TRCACATR0: u32 = 0x480;
/// Offset of `TRCCIDCCTLR0` (RAZ/WI: no context ID comparators).
pub const TRCCIDCCTLR0: u32 = 0x680;
/// Offset of `TRCVMIDCCTLR0` (RAZ/WI: no VMID comparators).
pub const TRCVMIDCCTLR0: u32 = 0x688;
/// Offset of `TRCCLAIMSET`.
pub const TRCCLAIMSET: u32 = 0xFA0;
/// Offset of `TRCCLAIMCLR`.
pub const TRCCLAIMCLR: u32 = 0xFA4;
/// Offset of `TRCLAR`.
pub const TRCLAR: u32 = 0xFB0;
/// Offset of `TRCLSR`.
pub const TRCLSR: u32 = 0xFB4;
/// Offset of `TRCAUTHSTATUS`.
pub const TRCAUTHSTATUS: u32 = 0xFB8;
/// Offset of `TRCDEVARCH`.
pub const TRCDEVARCH: u32 = 0xFBC;
/// Offset of `TRCDEVID`.
pub const TRCDEVID: u32 = 0xFC8;
/// Offset of `TRCDEVTYPE`.
pub const TRCDEVTYPE: u32 = 0xFCC;

/// Number of address comparator pairs (`TRCIDR4.NUMACPAIRS`).
pub const ADDR_CMP_PAIRS: usize = 4;

/// Accesses `TRCSTATR` takes to follow a change of `TRCPRGCTLR.EN`.
pub const STATUS_LATENCY: u32 = 3;

/// `TRCCLAIMSET` read value: claim tag bits 3:0 implemented.
pub const CLAIM_IMPLEMENTED: u32 = 0xF;

/// The identification values of the emulated unit (see the module documentation).
pub const ETM_IDS: ModelIds = ModelIds {
    idr: [
        0x2000_0C01, // TRCIDR0
        0x4100_F402, // TRCIDR1
        0x0000_0008, // TRCIDR2
        0x0D7B_0000, // TRCIDR3
        0x0017_0004, // TRCIDR4
        0x28C7_0004, // TRCIDR5
        0,           // TRCIDR6
        0,           // TRCIDR7
        0,           // TRCIDR8
        0,           // TRCIDR9
        0,           // TRCIDR10
        0,           // TRCIDR11
        0,           // TRCIDR12
        0,           // TRCIDR13
    ],
    authstatus: 0xCC,
    devarch: MODEL_DEVARCH_ETMV4,
    devtype: MODEL_DEVTYPE_ETM,
};

/// Identification of a Cortex-A57 ETM: part 0x95E, designer Arm, revision 1, class 0x9.
pub const ETM_ID: PrimeCellId = PrimeCellId {
    pid: 0x04_001B_B95E,
    cid: PrimeCellId::CORESIGHT_CID,
};

const TRCVICTLR_SSSTATUS: u32 = 1 << 9;
const TRCVICTLR_EVENT_TYPE: u32 = 1 << 7;
const TRCVICTLR_EVENT_SEL: u32 = 0x1F;

/// Registers that read as zero and ignore writes.
const RAZ_WI: &[u32] = &[TRCCIDCCTLR0, TRCVMIDCCTLR0];

/// Every register of the frame, identification included.
const STAGED: &[u32] = &[
    TRCPRGCTLR,
    TRCSTATR,
    TRCCONFIGR,
    TRCAUXCTLR,
    TRCEVENTCTL0R,
    TRCEVENTCTL1R,
    TRCSTALLCTLR,
    TRCTSCTLR,
    TRCSYNCPR,
    TRCCCCTLR,
    TRCBBCTLR,
    TRCTRACEIDR,
    TRCVICTLR,
    TRCVIIECTLR,
    TRCVISSCTLR,
    // TRCSEQEVR0..2, TRCSEQRSTEVR, TRCSEQSTR, TRCEXTINSELR.
    0x100,
    0x104,
    0x108,
    0x118,
    0x11C,
    0x120,
    // TRCCNTRLDVR0..1, TRCCNTCTLR0..1, TRCCNTVR0..1.
    0x140,
    0x144,
    0x150,
    0x154,
    0x160,
    0x164,
    // TRCIDR8..13, TRCIMSPEC0, TRCIDR0..7.
    0x180,
    0x184,
    0x188,
    0x18C,
    0x190,
    0x194,
    0x1C0,
    0x1E0,
    0x1E4,
    0x1E8,
    0x1EC,
    0x1F0,
    0x1F4,
    0x1F8,
    0x1FC,
    // TRCRSCTLR2..15 (selectors 0 and 1 are the fixed FALSE and TRUE).
    0x208,
    0x20C,
    0x210,
    0x214,
    0x218,
    0x21C,
    0x220,
    0x224,
    0x228,
    0x22C,
    0x230,
    0x234,
    0x238,
    0x23C,
    // TRCSSCCR0, TRCSSCSR0.
    0x280,
    0x2A0,
    TRCOSLAR,
    TRCOSLSR,
    TRCPDCR,
    TRCPDSR,
    // TRCACVR0..7, low and high words.
    0x400,
    0x404,
    0x408,
    0x40C,
    0x410,
    0x414,
    0x418,
    0x41C,
    0x420,
    0x424,
    0x428,
    0x42C,
    0x430,
    0x434,
    0x438,
    0x43C,
    // TRCACATR0..7, low and high words.
    0x480,
    0x484,
    0x488,
    0x48C,
    0x490,
    0x494,
    0x498,
    0x49C,
    0x4A0,
    0x4A4,
    0x4A8,
    0x4AC,
    0x4B0,
    0x4B4,
    0x4B8,
    0x4BC,
    TRCCIDCCTLR0,
    TRCVMIDCCTLR0,
    TRCCLAIMSET,
    TRCCLAIMCLR,
    TRCLAR,
    TRCLSR,
    TRCAUTHSTATUS,
    TRCDEVARCH,
    TRCDEVID,
    TRCDEVTYPE,
    0xFD0,
    0xFD4,
    0xFD8,
    0xFDC,
    0xFE0,
    0xFE4,
    0xFE8,
    0xFEC,
    0xFF0,
    0xFF4,
    0xFF8,
    0xFFC,
];

/// Faults the trace unit can be told to show.
#[derive(Clone, Copy, Debug, Default)]
pub struct EtmFaults {
    /// Writing 0 to `TRCOSLAR` does not clear the OS lock: `TRCOSLSR.OSLK` stays set and the
    /// trace registers stay inaccessible.
    pub os_lock_stuck: bool,
    /// `TRCSTATR.IDLE` never rises after `TRCPRGCTLR.EN` is cleared (nor `PMSTABLE`).
    pub never_idle: bool,
}

/// What the driver programmed, decoded from the trace registers while the unit is enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceProgram {
    /// `TRCTRACEIDR[6:0]`.
    pub trace_id: u8,
    /// `TRCCONFIGR` as programmed.
    pub configr: u32,
    /// `TRCVICTLR.EXLEVEL_NS` (bits 23:20): bit `n` set means Non-secure EL`n` is not traced.
    pub exclude_el_ns: u8,
    /// `TRCVICTLR.EXLEVEL_S` (bits 19:16): bit `n` set means Secure EL`n` is not traced.
    pub exclude_el_s: u8,
    /// `TRCVICTLR.EVENT` selects the single resource 0, which is always FALSE: nothing is traced.
    /// Any other selection is reported as `false` (the emulation treats it as TRUE).
    pub event_always_false: bool,
    /// The ViewInst start/stop function (`TRCVISSCTLR`), `None` when no start or stop comparator
    /// is selected.
    pub start_stop: Option<StartStop>,
    /// Include ranges (`TRCVIIECTLR.INCLUDE`), each `(TRCACVR<2m>, TRCACVR<2m+1>)` for range
    /// comparator `m`; both bounds are inclusive (an address range comparator matches
    /// `lower <= address <= upper`). Empty: everything is included.
    pub include: Vec<(u64, u64)>,
    /// Exclude ranges (`TRCVIIECTLR.EXCLUDE`), with the same bounds as `include`.
    pub exclude: Vec<(u64, u64)>,
    /// The periodic synchronization period from `TRCSYNCPR.PERIOD`: 2^PERIOD bytes of trace,
    /// or 0 when `PERIOD` is 0 (no periodic synchronization).
    pub sync_period_bytes: usize,
}

/// The ViewInst start/stop function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartStop {
    /// Addresses of the single address comparators selected to start trace
    /// (`TRCVISSCTLR.START`, bits 7:0), lowest comparator first.
    pub start: Vec<u64>,
    /// Addresses of the single address comparators selected to stop trace
    /// (`TRCVISSCTLR.STOP`, bits 23:16), lowest comparator first.
    pub stop: Vec<u64>,
    /// `TRCVICTLR.SSSTATUS` when the unit was enabled: the start/stop logic starts in the
    /// started state.
    pub started: bool,
}

/// An emulated memory-mapped ETMv4 trace unit behind the register window.
pub struct Etm {
    cpu: usize,
    model: Box<Etm4xModel>,
    faults: EtmFaults,
    claim: u32,
}

/// Returns `true` for offsets in the trace register space (as opposed to the management and
/// identification registers): they read as zero and ignore writes while the OS lock is set.
const fn is_trace_reg(offset: u32) -> bool {
    offset < 0x300 || (offset >= 0x318 && offset < 0xF00)
}

/// Returns `true` for the registers whose access goes to the register model.
fn forwarded(offset: u32) -> bool {
    STAGED.contains(&offset)
        && ETM_ID.reg(offset).is_none()
        && !RAZ_WI.contains(&offset)
        && !matches!(offset, TRCCLAIMSET | TRCCLAIMCLR)
}

impl Etm {
    /// Creates the trace unit of CPU `cpu` in its reset state (OS lock set, software lock set,
    /// disabled and idle, `TRCPDSR.STICKYPD` set, claim tags clear), showing `faults`.
    pub fn new(cpu: usize, faults: EtmFaults) -> Etm {
        let mut model = Box::new(Etm4xModel::new(ETM_IDS, ModelInterface::Mmio));
        model.set_latency(STATUS_LATENCY);
        model.set_faults(Etm4xFaults {
            stuck_busy: faults.never_idle,
            os_lock_stuck: faults.os_lock_stuck,
            ..Etm4xFaults::default()
        });
        Etm {
            cpu,
            model,
            faults,
            claim: 0,
        }
    }

    /// Returns the CPU this trace unit belongs to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Returns the faults the unit shows.
    pub fn faults(&self) -> EtmFaults {
        self.faults
    }

    /// Returns whether the unit is enabled (`TRCPRGCTLR.EN`).
    pub fn enabled(&self) -> bool {
        self.model.enabled()
    }

    /// Returns what the driver programmed, while the unit is enabled; `None` when it is not.
    pub fn program(&self) -> Option<TraceProgram> {
        if !self.model.enabled() {
            return None;
        }
        let reg = |o: u32| self.model.peek(o);
        let acvr = |n: u32| -> u64 {
            let lo = reg(TRCACVR0 + 8 * n);
            let hi = reg(TRCACVR0 + 8 * n + 4);
            (u64::from(hi) << 32) | u64::from(lo)
        };
        let victlr = reg(TRCVICTLR);
        let viiectlr = reg(TRCVIIECTLR);
        let vissctlr = reg(TRCVISSCTLR);
        // CAST: at most 4 pairs.
        let pairs = ADDR_CMP_PAIRS as u32;
        let singles = 2 * pairs;

        let ranges = |shift: u32| -> Vec<(u64, u64)> {
            (0..pairs)
                .filter(|m| viiectlr & (1 << (m + shift)) != 0)
                .map(|m| (acvr(2 * m), acvr(2 * m + 1)))
                .collect()
        };
        let singles_of = |shift: u32| -> Vec<u64> {
            (0..singles)
                .filter(|m| vissctlr & (1 << (m + shift)) != 0)
                .map(acvr)
                .collect()
        };
        let start = singles_of(0);
        let stop = singles_of(16);
        let start_stop = (!start.is_empty() || !stop.is_empty()).then_some(StartStop {
            start,
            stop,
            started: victlr & TRCVICTLR_SSSTATUS != 0,
        });

        let period = reg(TRCSYNCPR) & 0x1F;
        let sync_period_bytes = if period == 0 { 0 } else { 1usize << period };

        Some(TraceProgram {
            // CAST: masked to 7 bits.
            trace_id: (reg(TRCTRACEIDR) & 0x7F) as u8,
            configr: reg(TRCCONFIGR),
            // CAST: masked to 4 bits.
            exclude_el_ns: ((victlr >> 20) & 0xF) as u8,
            // CAST: masked to 4 bits.
            exclude_el_s: ((victlr >> 16) & 0xF) as u8,
            event_always_false: victlr & TRCVICTLR_EVENT_TYPE == 0
                && victlr & TRCVICTLR_EVENT_SEL == 0,
            start_stop,
            include: ranges(0),
            exclude: ranges(16),
            sync_period_bytes,
        })
    }
}

impl Component for Etm {
    fn peek(&mut self, offset: u32) -> u32 {
        if let Some(v) = ETM_ID.reg(offset) {
            return v;
        }
        match offset {
            TRCCLAIMSET => CLAIM_IMPLEMENTED,
            TRCCLAIMCLR => self.claim,
            // Write-only.
            TRCOSLAR | TRCLAR => 0,
            o if !forwarded(o) => 0,
            o if is_trace_reg(o) && self.model.os_locked() => 0,
            o => self.model.peek(o),
        }
    }

    fn read(&mut self, offset: u32) {
        if forwarded(offset) {
            // Side effects: the status clock, and `TRCPDSR.STICKYPD` clears.
            let _ = self.model.read32(offset);
        } else {
            // One tick of the status clock, as any access.
            self.model.delay_us(1);
        }
    }

    fn write(&mut self, offset: u32, value: u32) {
        if offset == TRCOSLAR {
            // Not gated by the software lock (see the module documentation).
            self.model.delay_us(1);
            if value & 1 != 0 || !self.faults.os_lock_stuck {
                self.model.set_os_locked(value & 1 != 0);
            }
            return;
        }
        if forwarded(offset) {
            self.model.write32(offset, value);
            return;
        }
        self.model.delay_us(1);
        if self.model.sw_locked() {
            return;
        }
        match offset {
            TRCCLAIMSET => self.claim |= value & CLAIM_IMPLEMENTED,
            TRCCLAIMCLR => self.claim &= !(value & CLAIM_IMPLEMENTED),
            _ => {}
        }
    }

    fn staged(&self) -> &'static [u32] {
        STAGED
    }
}

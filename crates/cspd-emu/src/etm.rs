//! A memory-mapped ETMv4 trace unit of a Cortex-A57-like CPU, as a window component.
//!
//! The register behaviour is `cspd_model::etm4x::Etm4xModel`, written from the Arm Embedded Trace
//! Macrocell Architecture Specification ETMv4 (IHI 0064): the OS lock (set at reset; while it is
//! set the trace registers read as zero and ignore writes), the software lock, `TRCPDSR`,
//! `TRCSTATR.IDLE`/`PMSTABLE` following `TRCPRGCTLR.EN` a few accesses later, and trace registers
//! that ignore writes while the unit is not idle. This module adds the claim tags and the
//! CoreSight identification registers (IHI 0029), the ViewInst, address comparator and resource
//! selection registers (below), makes the unimplemented context ID and VMID comparator controls
//! RAZ/WI, and decodes what the driver programmed into a [`TraceProgram`].
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
//! # ViewInst filtering registers
//!
//! Implemented here with their fields (IHI 0064, "ViewInst function" and the register
//! descriptions); every other bit is RES0 and reads as zero. They reset to zero (IHI 0064 leaves
//! them UNKNOWN), read as zero while the OS lock is set, and ignore writes while the software or
//! OS lock is set or the unit is not idle, like every trace register.
//!
//! | register | implemented bits | |
//! | --- | --- | --- |
//! | `TRCVICTLR` (0x080) | 0x007B_0E8F | `EVENT` (`TYPE` bit 7, `SEL` bits 3:0 of 16 resources), `SSSTATUS` (9), `TRCRESET` (10), `TRCERR` (11), `EXLEVEL_S` of S EL0/EL1/EL3 (16, 17, 19), `EXLEVEL_NS` of NS EL0-EL2 (22:20) |
//! | `TRCVIIECTLR` (0x084) | 0x000F_000F | `INCLUDE` and `EXCLUDE`, one bit per comparator pair |
//! | `TRCVISSCTLR` (0x088) | 0x00FF_00FF | `START` and `STOP`, one bit per single comparator |
//! | `TRCACVR0..7` (0x400, 64-bit) | all 64 | the instruction address (`TRCIDR2.IASIZE`: 64 bits) |
//! | `TRCACATR0..7` (0x480, 64-bit) | 0x7B00 | `EXLEVEL_S` (11:8) and `EXLEVEL_NS` (14:12) of the implemented levels: `TYPE` is RES0 (instruction addresses only, no data trace), `CONTEXTTYPE`/`CONTEXT` are RES0 (no context ID or VMID comparators), the data match fields are RES0 |
//! | `TRCACVR8..15`, `TRCACATR8..15` | none | not implemented (`TRCIDR4.NUMACPAIRS` = 4) |
//! | `TRCRSCTLR2..15` (0x208) | 0x003F_FFFF (even), 0x001F_FFFF (odd) | `SELECT`, `GROUP`, `INV`, `PAIRINV` (even only); `TRCRSCTLR0/1` are RAZ/WI (resources 0 and 1 are FALSE and TRUE) |
//! | `TRCSSCCR0` (0x280) | 0x010F_00FF | `SAC`, `ARC`, `RST` (stored: single-shot matching is not emulated) |
//! | `TRCSSCSR0` (0x2A0) | bit 31 | `STATUS`; `INST` (bit 0) reads one |
//!
//! What the trace does with them is in [`crate::tracker`]: ViewInst is active for an
//! instruction when the event is TRUE, its exception level is not excluded, the include/exclude
//! ranges let it through and the start/stop logic is started or the instruction is a start
//! point; a stop point is traced and the instructions after it are not.
//!
//! The event is evaluated for resource 0 (FALSE), resource 1 (TRUE) and resources whose
//! selector selects nothing (FALSE, or TRUE with `INV`); any other selection is treated as TRUE
//! and named in the plugin's log.
//!
//! `TRCVICTLR.SSSTATUS` is written by the driver to set the start/stop logic's state at
//! enable; while the unit is enabled it reads as programmed (IHI 0064: stable only when
//! `TRCSTATR.PMSTABLE` is set); once the unit is disabled it reads the state the logic was left
//! in (0 after a stop point), as the C driver's `etm4_disable_perf` relies on.
//!
//! `TRCRESET` and `TRCERR` are stored but have no effect: the emulated CPUs take no Reset
//! exception while traced, and an SError taken while ViewInst is inactive is not traced even
//! with `TRCERR` set (QEMU's `virt` machine raises none).
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

use crate::bus::{with_id_regs, Component, PrimeCellId};
use cspd_model::access::RawFrame;
use cspd_model::etm4x::{
    Etm4xFaults, Etm4xModel, ModelIds, ModelInterface, MODEL_DEVARCH_ETMV4, MODEL_DEVTYPE_ETM,
};

/// The register offsets this component shares with the register-level model.
pub use cspd_model::etm4x::{
    TRCAUTHSTATUS, TRCBBCTLR, TRCCCCTLR, TRCCONFIGR, TRCDEVARCH, TRCDEVID, TRCDEVTYPE,
    TRCEVENTCTL0R, TRCEVENTCTL1R, TRCIDR0, TRCIDR8, TRCLAR, TRCLSR, TRCOSLAR, TRCOSLSR, TRCPDCR,
    TRCPDSR, TRCPRGCTLR, TRCSTALLCTLR, TRCSTATR, TRCSYNCPR, TRCTRACEIDR, TRCTSCTLR, TRCVICTLR,
    TRCVIIECTLR, TRCVISSCTLR, VICTLR_SSSTATUS,
};
/// Offset of `TRCAUXCTLR`.
pub const TRCAUXCTLR: u32 = 0x018;
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

/// Offset of `TRCRSCTLR0`; `TRCRSCTLRn` is at `TRCRSCTLR0 + 4 * n`.
pub const TRCRSCTLR0: u32 = 0x200;
/// Offset of `TRCSSCCR0`, the single-shot comparator control.
pub const TRCSSCCR0: u32 = 0x280;
/// Offset of `TRCSSCSR0`, the single-shot comparator status.
pub const TRCSSCSR0: u32 = 0x2A0;

/// Number of address comparator pairs (`TRCIDR4.NUMACPAIRS`).
pub const ADDR_CMP_PAIRS: usize = 4;

/// Number of single address comparators (two per pair).
pub const ADDR_CMPS: usize = 2 * ADDR_CMP_PAIRS;

/// Number of resources: two per resource selector pair (`TRCIDR4.NUMRSPAIR` + 1 = 8 pairs).
/// Resources 0 (always FALSE) and 1 (always TRUE) have no selector register.
pub const RESOURCES: usize = 16;

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

/// `TRCVICTLR.EVENT.SEL`: the resource (or resource pair) number, 16 resources.
const VICTLR_EVENT_SEL: u32 = 0x0F;
/// `TRCVICTLR.EVENT.TYPE`: 0 a single resource, 1 a Boolean-combined resource pair.
const VICTLR_EVENT_TYPE: u32 = 1 << 7;
/// `TRCVICTLR.TRCRESET`.
const VICTLR_TRCRESET: u32 = 1 << 10;
/// `TRCVICTLR.TRCERR` (implemented: `TRCIDR3.TRCERR` is set).
const VICTLR_TRCERR: u32 = 1 << 11;
/// The Secure exception levels the unit implements (`TRCIDR3.EXLEVEL_S`): EL0, EL1, EL3.
const EXLEVEL_S_IMPL: u32 = (ETM_IDS.idr[3] >> 16) & 0xF;
/// The Non-secure exception levels the unit implements (`TRCIDR3.EXLEVEL_NS`): EL0 to EL2.
const EXLEVEL_NS_IMPL: u32 = (ETM_IDS.idr[3] >> 20) & 0x7;
/// The implemented bits of `TRCVICTLR`; the others are RES0 (read as zero, writes ignored).
pub const VICTLR_MASK: u32 = VICTLR_EVENT_TYPE
    | VICTLR_EVENT_SEL
    | VICTLR_SSSTATUS
    | VICTLR_TRCRESET
    | VICTLR_TRCERR
    | (EXLEVEL_S_IMPL << 16)
    | (EXLEVEL_NS_IMPL << 20);
/// The implemented bits of `TRCVIIECTLR`: `INCLUDE[3:0]` and `EXCLUDE[19:16]`, one per pair.
pub const VIIECTLR_MASK: u32 = 0x000F_000F;
/// The implemented bits of `TRCVISSCTLR`: `START[7:0]` and `STOP[23:16]`, one per comparator.
pub const VISSCTLR_MASK: u32 = 0x00FF_00FF;
/// The implemented bits of `TRCACATRn` (low word; the high word is RES0): `EXLEVEL_S` (bits
/// 11:8) and `EXLEVEL_NS` (bits 14:12) of the implemented exception levels. `TYPE` (bits 1:0)
/// is RES0 without data trace (instruction address comparisons only), `CONTEXTTYPE` and
/// `CONTEXT` (bits 6:2) are RES0 without context ID or VMID comparators, and the data match
/// fields are RES0 without data value comparators.
pub const ACATR_MASK: u32 = (EXLEVEL_S_IMPL << 8) | (EXLEVEL_NS_IMPL << 12);
/// The implemented bits of `TRCRSCTLRn` for even `n`: `SELECT[15:0]`, `GROUP[19:16]`, `INV`
/// (bit 20) and `PAIRINV` (bit 21, only in the lower register of a pair).
const RSCTLR_EVEN_MASK: u32 = 0x003F_FFFF;
/// The implemented bits of `TRCRSCTLRn` for odd `n` (no `PAIRINV`).
const RSCTLR_ODD_MASK: u32 = 0x001F_FFFF;
/// `TRCRSCTLRn.SELECT`.
const RSCTLR_SELECT: u32 = 0xFFFF;
/// `TRCRSCTLRn.INV`.
const RSCTLR_INV: u32 = 1 << 20;
/// The implemented bits of `TRCSSCCR0`: `SAC[7:0]`, `ARC[19:16]`, `RST` (bit 24).
const SSCCR_MASK: u32 = 0x010F_00FF;
/// `TRCSSCSR0.STATUS` (bit 31, writable) and `INST` (bit 0, read-only: the comparator control
/// supports instruction address comparisons).
const SSCSR_STATUS: u32 = 1 << 31;
const SSCSR_INST: u32 = 1 << 0;

/// Registers that read as zero and ignore writes (besides the comparators beyond
/// `TRCIDR4.NUMACPAIRS`, see [`is_raz_wi`]).
const RAZ_WI: &[u32] = &[TRCCIDCCTLR0, TRCVMIDCCTLR0, TRCRSCTLR0, TRCRSCTLR0 + 4];

/// Returns `true` for the registers that read as zero and ignore writes: the unimplemented
/// context ID and VMID comparator controls, `TRCRSCTLR0` and `TRCRSCTLR1`, and the address
/// comparators 8 to 15.
fn is_raz_wi(offset: u32) -> bool {
    RAZ_WI.contains(&offset) || (0x440..0x480).contains(&offset) || (0x4C0..0x500).contains(&offset)
}

/// The frame's registers other than the identification registers.
const OWN: &[u32] = &[
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
    // TRCRSCTLR0..15 (0 and 1 RAZ/WI: resources 0 and 1 are the fixed FALSE and TRUE).
    0x200,
    0x204,
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
    // TRCACVR8..15 (not implemented: NUMACPAIRS = 4), RAZ/WI.
    0x440,
    0x444,
    0x448,
    0x44C,
    0x450,
    0x454,
    0x458,
    0x45C,
    0x460,
    0x464,
    0x468,
    0x46C,
    0x470,
    0x474,
    0x478,
    0x47C,
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
    // TRCACATR8..15, RAZ/WI.
    0x4C0,
    0x4C4,
    0x4C8,
    0x4CC,
    0x4D0,
    0x4D4,
    0x4D8,
    0x4DC,
    0x4E0,
    0x4E4,
    0x4E8,
    0x4EC,
    0x4F0,
    0x4F4,
    0x4F8,
    0x4FC,
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
];

/// Every register of the frame, identification included.
const STAGED: &[u32] = &with_id_regs::<{ OWN.len() + 12 }>(OWN);

/// Faults the trace unit can be told to show.
#[derive(Clone, Copy, Debug, Default)]
pub struct EtmFaults {
    /// Writing 0 to `TRCOSLAR` does not clear the OS lock: `TRCOSLSR.OSLK` stays set and the
    /// trace registers stay inaccessible.
    pub os_lock_stuck: bool,
    /// `TRCSTATR.IDLE` never rises after `TRCPRGCTLR.EN` is cleared (nor `PMSTABLE`).
    pub never_idle: bool,
}

/// A single address comparator as the ViewInst start/stop logic uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrComparator {
    /// The comparator number `n` (`TRCACVRn`, `TRCACATRn`).
    pub index: u8,
    /// `TRCACVRn`: the instruction address compared.
    pub addr: u64,
    /// `TRCACATRn.EXLEVEL_NS`: bit `n` set means the comparator never matches in Non-secure ELn.
    pub exclude_el_ns: u8,
    /// `TRCACATRn.EXLEVEL_S`: bit `n` set means the comparator never matches in Secure ELn.
    pub exclude_el_s: u8,
}

impl AddrComparator {
    /// Returns whether the comparator matches the A64 instruction at `insn` executed at
    /// Non-secure EL`el`: `TRCACVRn` is an address of one of the instruction's four bytes, and
    /// the comparator is not disabled at that exception level.
    pub fn matches(&self, insn: u64, el: u8) -> bool {
        self.addr & !3 == insn && self.exclude_el_ns & (1 << el) == 0
    }
}

/// An address range comparator (a pair `2m`, `2m + 1`) as the ViewInst include/exclude control
/// uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrRange {
    /// The pair number `m`.
    pub pair: u8,
    /// `TRCACVR<2m>`, the lower bound, inclusive.
    pub lo: u64,
    /// `TRCACVR<2m+1>`, the upper bound, inclusive.
    pub hi: u64,
    /// `TRCACATR<2m>.EXLEVEL_NS` (the pair's access type is its lower comparator's).
    pub exclude_el_ns: u8,
}

impl AddrRange {
    /// Returns whether the range matches the instruction at `insn` executed at Non-secure EL`el`.
    pub fn matches(&self, insn: u64, el: u8) -> bool {
        insn >= self.lo && insn <= self.hi && self.exclude_el_ns & (1 << el) == 0
    }
}

/// The resource `TRCVICTLR.EVENT` selects, as far as the emulation evaluates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewEvent {
    /// Always FALSE: resource 0, or a resource whose selector selects nothing (not inverted).
    False,
    /// Always TRUE: resource 1, or a resource whose selector selects nothing, inverted.
    True,
    /// A resource the emulation does not evaluate (a Boolean-combined pair, or a selector with
    /// inputs): `TRCVICTLR.EVENT` as programmed. Treated as TRUE, and named in the log.
    NotEmulated(u8),
}

/// What the driver programmed, decoded from the trace registers while the unit is enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceProgram {
    /// `TRCTRACEIDR[6:0]`.
    pub trace_id: u8,
    /// `TRCCONFIGR` as programmed.
    pub configr: u32,
    /// `TRCVICTLR` as programmed.
    pub victlr: u32,
    /// `TRCVICTLR.EXLEVEL_NS` (bits 22:20): bit `n` set means Non-secure EL`n` is not traced.
    pub exclude_el_ns: u8,
    /// `TRCVICTLR.EXLEVEL_S` (bits 19:16): bit `n` set means Secure EL`n` is not traced.
    pub exclude_el_s: u8,
    /// The ViewInst event (`TRCVICTLR.EVENT`).
    pub event: ViewEvent,
    /// `TRCVICTLR.SSSTATUS`: the start/stop logic starts in the started state.
    pub started: bool,
    /// The ViewInst start/stop control (`TRCVISSCTLR`), `None` when no start or stop comparator
    /// is selected (the start/stop logic then stays in the state `started` gives).
    pub start_stop: Option<StartStop>,
    /// Include ranges (`TRCVIIECTLR.INCLUDE`). Empty: everything is included.
    pub include: Vec<AddrRange>,
    /// Exclude ranges (`TRCVIIECTLR.EXCLUDE`).
    pub exclude: Vec<AddrRange>,
    /// The periodic synchronization period from `TRCSYNCPR.PERIOD`: 2^PERIOD bytes of trace,
    /// or 0 when `PERIOD` is 0 (no periodic synchronization).
    pub sync_period_bytes: usize,
}

impl TraceProgram {
    /// Returns whether the event is always FALSE: nothing is traced.
    pub fn event_always_false(&self) -> bool {
        self.event == ViewEvent::False
    }
}

/// The single address comparators of the ViewInst start/stop control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartStop {
    /// The comparators selected to start trace (`TRCVISSCTLR.START`, bits 7:0), lowest first.
    pub start: Vec<AddrComparator>,
    /// The comparators selected to stop trace (`TRCVISSCTLR.STOP`, bits 23:16), lowest first.
    pub stop: Vec<AddrComparator>,
}

/// The ViewInst and resource registers, which the unit implements itself (the register model
/// keeps the others): their implemented bits, their reset values and the start/stop state.
#[derive(Clone, Debug, Default)]
struct ViewRegs {
    victlr: u32,
    viiectlr: u32,
    vissctlr: u32,
    acvr: [u64; ADDR_CMPS],
    acatr: [u32; ADDR_CMPS],
    rsctlr: [u32; RESOURCES],
    ssccr0: u32,
    sscsr0_status: bool,
}

/// Which register of [`ViewRegs`] an offset is, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ViewReg {
    Victlr,
    Viiectlr,
    Vissctlr,
    /// Comparator `n`, the low (`false`) or high (`true`) word of `TRCACVRn`.
    Acvr(usize, bool),
    /// Comparator `n`, the low or high word of `TRCACATRn`.
    Acatr(usize, bool),
    /// `TRCRSCTLRn`, 2 <= n < 16.
    Rsctlr(usize),
    Ssccr0,
    Sscsr0,
}

fn view_reg(offset: u32) -> Option<ViewReg> {
    let word = |base: u32| -> (usize, bool) {
        let o = offset - base;
        // CAST: o < 0x40.
        ((o / 8) as usize, o % 8 == 4)
    };
    Some(match offset {
        TRCVICTLR => ViewReg::Victlr,
        TRCVIIECTLR => ViewReg::Viiectlr,
        TRCVISSCTLR => ViewReg::Vissctlr,
        0x208..=0x23C if offset.is_multiple_of(4) => {
            // CAST: at most 15.
            ViewReg::Rsctlr(((offset - TRCRSCTLR0) / 4) as usize)
        }
        TRCSSCCR0 => ViewReg::Ssccr0,
        TRCSSCSR0 => ViewReg::Sscsr0,
        0x400..=0x43C if offset.is_multiple_of(4) => {
            let (n, hi) = word(TRCACVR0);
            ViewReg::Acvr(n, hi)
        }
        0x480..=0x4BC if offset.is_multiple_of(4) => {
            let (n, hi) = word(TRCACATR0);
            ViewReg::Acatr(n, hi)
        }
        _ => return None,
    })
}

impl ViewRegs {
    fn read(&self, r: ViewReg) -> u32 {
        let half = |v: u64, hi: bool| -> u32 {
            // CAST: one 32-bit half.
            (if hi { v >> 32 } else { v & 0xFFFF_FFFF }) as u32
        };
        match r {
            ViewReg::Victlr => self.victlr,
            ViewReg::Viiectlr => self.viiectlr,
            ViewReg::Vissctlr => self.vissctlr,
            ViewReg::Acvr(n, hi) => self.acvr.get(n).map_or(0, |&v| half(v, hi)),
            ViewReg::Acatr(n, false) => self.acatr.get(n).copied().unwrap_or(0),
            ViewReg::Acatr(_, true) => 0,
            ViewReg::Rsctlr(n) => self.rsctlr.get(n).copied().unwrap_or(0),
            ViewReg::Ssccr0 => self.ssccr0,
            ViewReg::Sscsr0 => SSCSR_INST | if self.sscsr0_status { SSCSR_STATUS } else { 0 },
        }
    }

    fn write(&mut self, r: ViewReg, v: u32) {
        match r {
            ViewReg::Victlr => self.victlr = v & VICTLR_MASK,
            ViewReg::Viiectlr => self.viiectlr = v & VIIECTLR_MASK,
            ViewReg::Vissctlr => self.vissctlr = v & VISSCTLR_MASK,
            ViewReg::Acvr(n, hi) => {
                if let Some(a) = self.acvr.get_mut(n) {
                    *a = if hi {
                        (*a & 0xFFFF_FFFF) | (u64::from(v) << 32)
                    } else {
                        (*a & !0xFFFF_FFFF) | u64::from(v)
                    };
                }
            }
            ViewReg::Acatr(n, false) => {
                if let Some(a) = self.acatr.get_mut(n) {
                    *a = v & ACATR_MASK;
                }
            }
            ViewReg::Acatr(_, true) => {}
            ViewReg::Rsctlr(n) => {
                let mask = if n % 2 == 0 {
                    RSCTLR_EVEN_MASK
                } else {
                    RSCTLR_ODD_MASK
                };
                if let Some(x) = self.rsctlr.get_mut(n) {
                    *x = v & mask;
                }
            }
            ViewReg::Ssccr0 => self.ssccr0 = v & SSCCR_MASK,
            ViewReg::Sscsr0 => self.sscsr0_status = v & SSCSR_STATUS != 0,
        }
    }

    fn comparator(&self, n: usize) -> Option<AddrComparator> {
        let attr = *self.acatr.get(n)?;
        Some(AddrComparator {
            // CAST: n < 8.
            index: n as u8,
            addr: *self.acvr.get(n)?,
            // CAST: masked to 3 bits.
            exclude_el_ns: ((attr >> 12) & 0x7) as u8,
            // CAST: masked to 4 bits.
            exclude_el_s: ((attr >> 8) & 0xF) as u8,
        })
    }

    /// The resource `TRCVICTLR.EVENT` selects.
    fn event(&self) -> ViewEvent {
        // CAST: masked to a byte.
        let event = (self.victlr & 0xFF) as u8;
        if self.victlr & VICTLR_EVENT_TYPE != 0 {
            return ViewEvent::NotEmulated(event);
        }
        match (self.victlr & VICTLR_EVENT_SEL) as usize {
            0 => ViewEvent::False,
            1 => ViewEvent::True,
            n => match self.rsctlr.get(n) {
                Some(&r) if r & RSCTLR_SELECT == 0 => {
                    // Nothing selected: the resource is FALSE, or TRUE when inverted.
                    if r & RSCTLR_INV != 0 {
                        ViewEvent::True
                    } else {
                        ViewEvent::False
                    }
                }
                _ => ViewEvent::NotEmulated(event),
            },
        }
    }
}

/// An emulated memory-mapped ETMv4 trace unit behind the register window.
pub struct Etm {
    cpu: usize,
    model: Box<Etm4xModel>,
    faults: EtmFaults,
    claim: u32,
    view: ViewRegs,
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
        && !is_raz_wi(offset)
        && !matches!(offset, TRCCLAIMSET | TRCCLAIMCLR)
        && view_reg(offset).is_none()
}

impl Etm {
    /// Creates the trace unit of CPU `cpu` in its reset state (OS lock set, software lock set,
    /// disabled and idle, `TRCPDSR.STICKYPD` set, claim tags clear, every ViewInst, comparator
    /// and resource register zero), showing `faults`.
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
            view: ViewRegs::default(),
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

    /// Sets `TRCVICTLR.SSSTATUS` to the state the start/stop logic is in, as the unit does when
    /// it is disabled (the bit then reads the state the logic stopped in).
    pub fn set_ssstatus(&mut self, started: bool) {
        if started {
            self.view.victlr |= VICTLR_SSSTATUS;
        } else {
            self.view.victlr &= !VICTLR_SSSTATUS;
        }
    }

    /// Returns what the driver programmed, while the unit is enabled; `None` when it is not.
    pub fn program(&self) -> Option<TraceProgram> {
        if !self.model.enabled() {
            return None;
        }
        let reg = |o: u32| self.model.peek(o);
        let v = &self.view;
        let victlr = v.victlr;
        let ranges = |shift: u32| -> Vec<AddrRange> {
            (0..ADDR_CMP_PAIRS)
                .filter(|m| v.viiectlr & (1 << (m + shift as usize)) != 0)
                .filter_map(|m| {
                    let lo = v.comparator(2 * m)?;
                    let hi = v.comparator(2 * m + 1)?;
                    Some(AddrRange {
                        // CAST: m < 4.
                        pair: m as u8,
                        lo: lo.addr,
                        hi: hi.addr,
                        exclude_el_ns: lo.exclude_el_ns,
                    })
                })
                .collect()
        };
        let singles = |shift: u32| -> Vec<AddrComparator> {
            (0..ADDR_CMPS)
                .filter(|n| v.vissctlr & (1 << (n + shift as usize)) != 0)
                .filter_map(|n| v.comparator(n))
                .collect()
        };
        let start = singles(0);
        let stop = singles(16);
        let start_stop =
            (!start.is_empty() || !stop.is_empty()).then_some(StartStop { start, stop });

        let period = reg(TRCSYNCPR) & 0x1F;
        let sync_period_bytes = if period == 0 { 0 } else { 1usize << period };

        Some(TraceProgram {
            // CAST: masked to 7 bits.
            trace_id: (reg(TRCTRACEIDR) & 0x7F) as u8,
            configr: reg(TRCCONFIGR),
            victlr,
            // CAST: masked to 3 bits.
            exclude_el_ns: ((victlr >> 20) & 0x7) as u8,
            // CAST: masked to 4 bits.
            exclude_el_s: ((victlr >> 16) & 0xF) as u8,
            event: v.event(),
            started: victlr & VICTLR_SSSTATUS != 0,
            start_stop,
            include: ranges(0),
            exclude: ranges(16),
            sync_period_bytes,
        })
    }

    /// A write to a register of [`ViewRegs`]: one tick of the status clock, then the write
    /// lands unless the software lock or the OS lock is set or the unit is not idle (IHI 0064:
    /// the trace registers ignore writes while the unit is not idle).
    fn write_view(&mut self, r: ViewReg, value: u32) {
        self.model.delay_us(1);
        if self.model.sw_locked() || self.model.os_locked() || !self.model.idle() {
            return;
        }
        self.view.write(r, value);
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
            o if is_trace_reg(o) && self.model.os_locked() => 0,
            o => match view_reg(o) {
                Some(r) => self.view.read(r),
                None if forwarded(o) => self.model.peek(o),
                None => 0,
            },
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
        if let Some(r) = view_reg(offset) {
            self.write_view(r, value);
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

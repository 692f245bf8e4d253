// SPDX-License-Identifier: GPL-2.0

//! What the sampled registers say: `EDPRSR`, `EDVIDSR` and `EDCIDSR` decoded, and a sample
//! reported in the C driver's words.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use core::fmt;

use super::{
    CpuSample,
    Outcome,
    PcKind, //
};

/// `EDPRSR.PU`: the core power domain is powered up.
pub const EDPRSR_PU: u32 = 1 << 0;

/// `EDPRSR.SPD`: sticky core power-down (the core was powered down since the last read).
pub const EDPRSR_SPD: u32 = 1 << 1;

/// `EDPRSR.R`: the core is in reset.
pub const EDPRSR_R: u32 = 1 << 2;

/// `EDPRSR.SR`: sticky core reset (the core was reset since the last read).
pub const EDPRSR_SR: u32 = 1 << 3;

/// `EDPRSR.HALTED`: the PE is in debug state.
pub const EDPRSR_HALTED: u32 = 1 << 4;

/// `EDPRSR.OSLK`: the OS lock is set.
pub const EDPRSR_OSLK: u32 = 1 << 5;

/// `EDPRSR.DLK`: the OS double lock is set (the core is about to power down).
pub const EDPRSR_DLK: u32 = 1 << 6;

/// `EDPRSR.EDAD`: external debug access is disabled.
pub const EDPRSR_EDAD: u32 = 1 << 7;

/// `EDPRSR.SDAD`: sticky external debug access disabled error.
pub const EDPRSR_SDAD: u32 = 1 << 8;

/// `EDPRSR.EPMAD`: external performance monitors access is disabled.
pub const EDPRSR_EPMAD: u32 = 1 << 9;

/// `EDPRSR.SPMAD`: sticky external performance monitors access disabled error.
pub const EDPRSR_SPMAD: u32 = 1 << 10;

/// `EDPRSR.SDR`: sticky debug restart (the PE left debug state since the last read).
pub const EDPRSR_SDR: u32 = 1 << 11;

/// `EDVIDSR.NS`: the sample was taken in Non-secure state.
pub const EDVIDSR_NS: u32 = 1 << 31;

/// `EDVIDSR.E2`: the sample was taken at EL2.
pub const EDVIDSR_E2: u32 = 1 << 30;

/// `EDVIDSR.E3`: the sample was taken at EL3.
pub const EDVIDSR_E3: u32 = 1 << 29;

/// `EDVIDSR.HV`: `EDPCSR_HI` is valid (the sample was taken in AArch64 state).
pub const EDVIDSR_HV: u32 = 1 << 28;

/// `EDVIDSR.NSE`: with `NS`, the Realm or Root state (`FEAT_RME`; RES0 without it).
pub const EDVIDSR_NSE: u32 = 1 << 27;

/// `EDVIDSR.VMID` bits 7:0, the VMID the C driver prints.
pub const EDVIDSR_VMID: u32 = 0xFF;

/// `EDVIDSR` bits 15:0, the VMID when 16-bit VMIDs are implemented (bits 15:8 RES0 otherwise).
pub const EDVIDSR_VMID16: u32 = 0xFFFF;

/// A decoded `EDPRSR` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edprsr(pub u32);

impl Edprsr {
    /// Returns `PU`: the core is powered up.
    pub fn powered_up(self) -> bool {
        self.0 & EDPRSR_PU != 0
    }

    /// Returns `SPD`: the core was powered down since `EDPRSR` was last read.
    pub fn sticky_powered_down(self) -> bool {
        self.0 & EDPRSR_SPD != 0
    }

    /// Returns `R`: the core is in reset.
    pub fn in_reset(self) -> bool {
        self.0 & EDPRSR_R != 0
    }

    /// Returns `SR`: the core was reset since `EDPRSR` was last read.
    pub fn sticky_reset(self) -> bool {
        self.0 & EDPRSR_SR != 0
    }

    /// Returns `HALTED`: the PE is in debug state.
    pub fn halted(self) -> bool {
        self.0 & EDPRSR_HALTED != 0
    }

    /// Returns `OSLK`: the OS lock is set.
    pub fn os_locked(self) -> bool {
        self.0 & EDPRSR_OSLK != 0
    }

    /// Returns `DLK`: the OS double lock is set.
    pub fn double_locked(self) -> bool {
        self.0 & EDPRSR_DLK != 0
    }

    /// Returns `EDAD`: external debug access is disabled.
    pub fn debug_access_disabled(self) -> bool {
        self.0 & EDPRSR_EDAD != 0
    }

    /// Returns `EPMAD`: external performance monitors access is disabled.
    pub fn pmu_access_disabled(self) -> bool {
        self.0 & EDPRSR_EPMAD != 0
    }

    /// Returns whether the debug registers may be accessed (powered up, not double-locked).
    pub fn access_permitted(self) -> bool {
        self.powered_up() && !self.double_locked()
    }

    /// Returns the names of the set bits, for verbose reports (`PU SPD OSLK`, `-` if none).
    pub fn bits(self) -> EdprsrBits {
        EdprsrBits(self.0)
    }
}

/// `EDPRSR` as the C driver prints it: `EDPRSR:  00000001 (Power:On DLK:Unlock)`.
///
/// The C driver's line has one more space in front (after the device prefix); kernel glue that
/// wants the same log prints `" {}"`.
impl fmt::Display for Edprsr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EDPRSR:  {:08x} (Power:{} DLK:{})",
            self.0,
            if self.powered_up() { "On" } else { "Off" },
            if self.double_locked() {
                "Lock"
            } else {
                "Unlock"
            }
        )
    }
}

/// The names of the bits set in an `EDPRSR` value, space separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdprsrBits(pub u32);

const EDPRSR_NAMES: [(u32, &str); 12] = [
    (EDPRSR_PU, "PU"),
    (EDPRSR_SPD, "SPD"),
    (EDPRSR_R, "R"),
    (EDPRSR_SR, "SR"),
    (EDPRSR_HALTED, "HALTED"),
    (EDPRSR_OSLK, "OSLK"),
    (EDPRSR_DLK, "DLK"),
    (EDPRSR_EDAD, "EDAD"),
    (EDPRSR_SDAD, "SDAD"),
    (EDPRSR_EPMAD, "EPMAD"),
    (EDPRSR_SPMAD, "SPMAD"),
    (EDPRSR_SDR, "SDR"),
];

impl fmt::Display for EdprsrBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (bit, name) in EDPRSR_NAMES {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str(" ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        let rest = self.0 & !0xFFF;
        if rest != 0 {
            if !first {
                f.write_str(" ")?;
            }
            write!(f, "other:{rest:#x}")?;
            first = false;
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// The security state a sample was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SecurityState {
    /// Secure state (`NSE` 0, `NS` 0).
    Secure = 0,
    /// Non-secure state (`NSE` 0, `NS` 1).
    NonSecure = 1,
    /// Root state (`NSE` 1, `NS` 0; `FEAT_RME`).
    Root = 2,
    /// Realm state (`NSE` 1, `NS` 1; `FEAT_RME`).
    Realm = 3,
}

impl SecurityState {
    /// Returns the name the C driver uses (`Secure`, `Non-secure`), or `Root`/`Realm`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Secure => "Secure",
            Self::NonSecure => "Non-secure",
            Self::Root => "Root",
            Self::Realm => "Realm",
        }
    }

    /// Decodes the record code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Secure),
            1 => Some(Self::NonSecure),
            2 => Some(Self::Root),
            3 => Some(Self::Realm),
            _ => None,
        }
    }
}

/// The exception level a sample was taken at, as the C driver groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SampleEl {
    /// EL1 or EL0 (neither `E2` nor `E3` set).
    El1El0 = 1,
    /// EL2 (`E2` set, `E3` clear).
    El2 = 2,
    /// EL3 (`E3` set).
    El3 = 3,
}

impl SampleEl {
    /// Returns the name the C driver prints (`EL1/0`, `EL2`, `EL3`).
    pub fn name(self) -> &'static str {
        match self {
            Self::El1El0 => "EL1/0",
            Self::El2 => "EL2",
            Self::El3 => "EL3",
        }
    }

    /// Decodes the record code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::El1El0),
            2 => Some(Self::El2),
            3 => Some(Self::El3),
            _ => None,
        }
    }
}

/// A decoded `EDVIDSR` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edvidsr(pub u32);

impl Edvidsr {
    /// Returns the security state; `NSE` is RES0 without `FEAT_RME`, so older CPUs decode as
    /// Secure or Non-secure from `NS` alone.
    pub fn state(self) -> SecurityState {
        match (self.0 & EDVIDSR_NSE != 0, self.0 & EDVIDSR_NS != 0) {
            (false, false) => SecurityState::Secure,
            (false, true) => SecurityState::NonSecure,
            (true, false) => SecurityState::Root,
            (true, true) => SecurityState::Realm,
        }
    }

    /// Returns the exception level: `E3` wins over `E2`, as in the C driver.
    pub fn el(self) -> SampleEl {
        if self.0 & EDVIDSR_E3 != 0 {
            SampleEl::El3
        } else if self.0 & EDVIDSR_E2 != 0 {
            SampleEl::El2
        } else {
            SampleEl::El1El0
        }
    }

    /// Returns whether `EDPCSR_HI` is valid (`HV`): the sample was taken in AArch64 state.
    pub fn hi_valid(self) -> bool {
        self.0 & EDVIDSR_HV != 0
    }

    /// Returns the width the C driver prints: 64 when `HV` is set, else 32.
    pub fn width(self) -> u8 {
        if self.hi_valid() {
            64
        } else {
            32
        }
    }

    /// Returns `VMID` bits 7:0, what the C driver prints.
    pub fn vmid(self) -> u8 {
        // CAST: masked to 8 bits.
        (self.0 & EDVIDSR_VMID) as u8
    }

    /// Returns bits 15:0, the VMID with 16-bit VMIDs (bits 15:8 are RES0 otherwise).
    pub fn vmid16(self) -> u16 {
        // CAST: masked to 16 bits.
        (self.0 & EDVIDSR_VMID16) as u16
    }
}

/// `EDVIDSR` as the C driver prints it:
/// `EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)`.
///
/// The text is the C driver's for every value with `NSE` clear (all CPUs without `FEAT_RME`);
/// with `NSE` set the state reads `Root` or `Realm` where the C driver would say `Secure` or
/// `Non-secure`.
impl fmt::Display for Edvidsr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EDVIDSR: {:08x} (State:{} Mode:{} Width:{}bits VMID:{:x})",
            self.0,
            self.state().name(),
            self.el().name(),
            self.width(),
            self.vmid()
        )
    }
}

/// `EDCIDSR` as the C driver prints it: `EDCIDSR: 00000000`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edcidsr(pub u32);

impl fmt::Display for Edcidsr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EDCIDSR: {:08x}", self.0)
    }
}

/// A multi-line report of one sample in the C driver's words, for logs and `csdump`.
///
/// ```text
/// CPU[0]:
///  EDPRSR:  00000001 (Power:On DLK:Unlock)
///  EDPCSR:  0xffff800080123456
///  EDCIDSR: 00000000
///  EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)
/// ```
///
/// The C driver prints the PC with `%pS`; this prints the address (the reader resolves the
/// symbol). A CPU that was not sampled gets the C driver's message and a `not sampled:` line.
pub struct SampleReport<'a>(pub &'a CpuSample);

/// What a report adds to a sample whose power-up wait the phase budget cut short.
pub const BUDGET_CUT_NOTE: &str = "the wait was cut short by the CPU debug time budget";

impl fmt::Display for SampleReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        writeln!(f, "CPU[{}]:", s.cpu)?;
        if matches!(
            s.outcome,
            Outcome::NotImplemented | Outcome::NotReached | Outcome::Recorded
        ) {
            return write!(f, " not sampled: {}", s.reason());
        }
        write!(f, " {}", Edprsr(s.edprsr))?;
        match s.outcome {
            Outcome::Sampled => {}
            Outcome::PoweredDown | Outcome::DoubleLocked => {
                writeln!(f)?;
                writeln!(f, "No permission to access debug registers!")?;
                write!(f, " not sampled: {}", s.reason())?;
                if s.budget_cut() {
                    write!(f, "; {BUDGET_CUT_NOTE}")?;
                }
                return Ok(());
            }
            _ => {
                writeln!(f)?;
                writeln!(f, "CPU is in Debug state or profiling is prohibited!")?;
                return write!(f, " not sampled: {}", s.outcome.reason());
            }
        }
        writeln!(f)?;
        match s.pc.kind {
            PcKind::ImplementationDefined => {
                writeln!(f, "Instruction offset is implementation defined")?;
            }
            PcKind::AArch32NoState => {
                writeln!(f, "AArch32 instruction set state not sampled")?;
            }
            _ => {}
        }
        write!(f, " EDPCSR:  {:#x}", s.pc.pc)?;
        if let Some(c) = s.cidsr() {
            write!(f, "\n {c}")?;
        }
        if let Some(v) = s.vidsr() {
            write!(f, "\n {v}")?;
        }
        Ok(())
    }
}

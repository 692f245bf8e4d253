// SPDX-License-Identifier: GPL-2.0

//! CPU debug (Armv8-A external debug) program counter sampling.
//!
//! Every CPU has an external debug register frame (Arm DDI 0487, part H). Its sample-based
//! profiling registers hold the last program counter the CPU retired ([`EDPCSR`],
//! [`EDPCSR_HI`]), the context ID ([`EDCIDSR`]) and the security state, exception level, width
//! and VMID ([`EDVIDSR`]) of that sample. At panic the dump samples every CPU once with
//! [`sample_cpu`] and stores one [`CpuSample`] record per CPU.
//!
//! # Sequence
//!
//! [`sample_cpu`] does, on one CPU's frame:
//!
//! 1. Unlock the CoreSight software lock (`LAR`).
//! 2. Save `EDPRCR`, request core power-up (`EDPRCR.COREPURQ`) and poll `EDPRSR.PU` a bounded
//!    number of times; once up, also request no power-down (`EDPRCR.CORENPDRQ`) and check that
//!    the core stayed up.
//! 3. Check access: `EDPRSR.PU` set and `EDPRSR.DLK` (OS double lock) clear.
//! 4. Remember `EDPRSR.OSLK` and clear the OS lock (`EDOSLAR`) if it was set.
//! 5. Read `EDPCSR` first: the read latches `EDPCSR_HI`, `EDCIDSR` and `EDVIDSR`. All ones means
//!    sampling is prohibited or the CPU is in debug state, and the latched registers are
//!    UNKNOWN, so they are not read.
//! 6. Read `EDPCSR_HI` (64-bit PCs), `EDCIDSR` and `EDVIDSR` when implemented.
//! 7. Set the OS lock again if it was set, restore `EDPRCR`, lock the software lock.
//!
//! The OS lock is cleared after the power-up, not before as the C driver does: `EDOSLAR` and
//! `EDPRSR.OSLK` live in the core power domain, so the lock can only be read and changed once
//! the core is powered. Unlike the C driver, the OS lock is left as it was found.
//!
//! A CPU that cannot be sampled still gets a record that says why ([`Outcome`]).
//!
//! # PC calibration
//!
//! `EDDEVID1.PCSROffset` says how a sample relates to the instruction address
//! ([`calibrate_pc`]):
//!
//! - `0b0000` (Armv7 `DBGDEVID1`): samples are offset by the instruction set state. Bit 0 set
//!   means Thumb (address = sample with bit 0 cleared, minus 4); bits 1:0 = `0b00` means Arm
//!   (address = sample minus 8); bits 1:0 = `0b10` is implementation defined and kept as read.
//! - `0b0001`: no offset; the state bits are still stripped as above.
//! - `0b0010` (Armv8): no offset, and the instruction set state is not sampled in AArch32 state.
//!   This shows as `EDVIDSR.HV` = 0 (`Width:32bits`): `EDPCSR_HI` is then not valid and bit 0
//!   is not a Thumb flag. Such a sample is reported as [`PcKind::AArch32NoState`], the address
//!   is the low word as read, and nothing is subtracted. A 32-bit kernel cannot use such a
//!   device at all ([`ArchError::AArch32NotSampled`]).
//!
//! A 64-bit sample (`EDVIDSR.HV` = 1, or `EDVIDSR` not implemented on a 64-bit kernel) is
//! `EDPCSR_HI:EDPCSR` with no offset.
//!
//! This file is plain `core` Rust: it is compiled into the kernel driver and into the host
//! crates (`cspd-hw`), where the tests drive it against the register-level model.

use crate::access::CsAccess;
use crate::access::CS_LAR;
use crate::access::CS_LSR;
use crate::access::CS_UNLOCK_KEY;
use core::fmt;

/// Offset of `EDPCSR` (bits 31:0 of the PC sample); reading it latches the other samples.
pub const EDPCSR: u32 = 0x0A0;

/// Offset of `EDCIDSR`, the context ID (`CONTEXTIDR_EL1`) latched with the PC sample.
pub const EDCIDSR: u32 = 0x0A4;

/// Offset of `EDVIDSR`, the virtual context (state, EL, width, VMID) latched with the sample.
pub const EDVIDSR: u32 = 0x0A8;

/// Offset of `EDPCSR_HI`, bits 63:32 of the PC sample, latched by reading [`EDPCSR`].
pub const EDPCSR_HI: u32 = 0x0AC;

/// Offset of `EDOSLAR`, the OS Lock Access Register (write 1 to lock, 0 to unlock).
pub const EDOSLAR: u32 = 0x300;

/// Offset of `EDPRCR`, the external debug power/reset control register.
pub const EDPRCR: u32 = 0x310;

/// Offset of `EDPRSR`, the external debug processor status register.
pub const EDPRSR: u32 = 0x314;

/// Offset of `EDDEVID1` (`PCSROffset` in bits 3:0).
pub const EDDEVID1: u32 = 0xFC4;

/// Offset of `EDDEVID` (`PCSample` in bits 3:0).
pub const EDDEVID: u32 = 0xFC8;

/// Offset of the software Lock Access Register (CoreSight `LAR`).
pub const LAR: u32 = CS_LAR;

/// Offset of the software Lock Status Register (CoreSight `LSR`).
pub const LSR: u32 = CS_LSR;

/// `EDOSLAR.OSLK`: writing 1 sets the OS lock, writing 0 clears it.
pub const EDOSLAR_OSLK: u32 = 1 << 0;

/// `EDPRCR.CORENPDRQ`: core no-powerdown request (emulate power-down instead).
pub const EDPRCR_CORENPDRQ: u32 = 1 << 0;

/// `EDPRCR.CWRR`: warm reset request (write-only; never written here).
pub const EDPRCR_CWRR: u32 = 1 << 1;

/// `EDPRCR.COREPURQ`: core power-up request to the power controller.
pub const EDPRCR_COREPURQ: u32 = 1 << 3;

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

/// `EDDEVID.PCSample` field mask (bits 3:0).
pub const EDDEVID_PCSAMPLE: u32 = 0xF;

/// `EDDEVID1.PCSROffset` field mask (bits 3:0).
pub const EDDEVID1_PCSROFFSET: u32 = 0xF;

/// The value `EDPCSR` reads when sampling is prohibited or the PE is in debug state.
pub const EDPCSR_PROHIBITED: u32 = 0xFFFF_FFFF;

/// How many times `EDPRSR.PU` is polled after one power-up request.
// TIMEOUT: 32 polls 1 ms apart, the 32 ms the C driver allows a power controller to bring a
// core up. A design that ignores COREPURQ costs that much per CPU, and only once per attempt.
pub const POWER_UP_POLLS: u32 = 32;

/// Microseconds between two polls of `EDPRSR.PU`.
pub const POWER_UP_DELAY_US: u32 = 1000;

/// How many times the power-up request is made when the core drops power again right away.
///
/// The C driver retries without limit; the panic path may not.
pub const POWER_UP_ATTEMPTS: u32 = 3;

/// The most register accesses [`sample_cpu`] makes on one CPU.
///
/// Per attempt: one `EDPRCR` write, `1 + POWER_UP_POLLS` `EDPRSR` reads, one `EDPRCR` write and
/// one `EDPRSR` read; plus `LAR` unlock, `EDPRCR` save, two `EDOSLAR` writes, four sample
/// reads, the `EDPRCR` restore and the `LAR` lock.
pub const MAX_ACCESSES_PER_SAMPLE: u32 = POWER_UP_ATTEMPTS * (POWER_UP_POLLS + 4) + 10;

/// The most `delay_us` calls [`sample_cpu`] makes on one CPU.
pub const MAX_DELAYS_PER_SAMPLE: u32 = POWER_UP_ATTEMPTS * POWER_UP_POLLS;

/// What `EDDEVID.PCSample` says is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PcSample {
    /// `EDPCSR` (and `EDPCSR_HI`) only.
    Pcsr = 1,
    /// `EDPCSR` and `EDCIDSR`.
    PcsrCidsr = 2,
    /// `EDPCSR`, `EDCIDSR` and `EDVIDSR`.
    Full = 3,
}

/// What `EDDEVID1.PCSROffset` says about the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcsrOffset {
    /// `0b0000`: samples are offset by the instruction set state (Armv7: Arm +8, Thumb +4).
    InstructionSet,
    /// `0b0001`: samples have no offset.
    NoOffset,
    /// `0b0010`: no offset, and the instruction set state is not sampled in AArch32 state.
    NoOffsetNoAArch32,
    /// Any other value: reserved, treated as no offset (as the C driver does).
    Reserved(u8),
}

impl PcsrOffset {
    /// Decodes `EDDEVID1`.
    pub fn from_eddevid1(eddevid1: u32) -> Self {
        match eddevid1 & EDDEVID1_PCSROFFSET {
            0 => Self::InstructionSet,
            1 => Self::NoOffset,
            2 => Self::NoOffsetNoAArch32,
            // CAST: masked to 4 bits above.
            other => Self::Reserved(other as u8),
        }
    }

    /// Returns the raw 4-bit field value.
    pub fn raw(self) -> u8 {
        match self {
            Self::InstructionSet => 0,
            Self::NoOffset => 1,
            Self::NoOffsetNoAArch32 => 2,
            Self::Reserved(v) => v & 0xF,
        }
    }
}

/// Why a CPU debug device cannot be used for PC sampling (the probe fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchError {
    /// `EDDEVID.PCSample` says sample-based profiling is not implemented.
    NoPcSampling {
        /// The raw `EDDEVID.PCSample` value.
        pcsample: u8,
    },
    /// `PCSROffset` is `0b0010` (no AArch32 sampling) and the kernel is 32-bit.
    AArch32NotSampled,
}

impl fmt::Display for ArchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoPcSampling { pcsample } => write!(
                f,
                "sample-based profiling isn't implemented (EDDEVID.PCSample {pcsample:#x})"
            ),
            Self::AArch32NotSampled => {
                f.write_str("EDPCSR does not sample AArch32 state (EDDEVID1.PCSROffset 0b0010)")
            }
        }
    }
}

/// The sampling features of one CPU's debug frame, read once at probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchData {
    /// Which sample registers exist.
    pub pcsample: PcSample,
    /// How samples relate to instruction addresses.
    pub pcsr_offset: PcsrOffset,
    /// Whether the PC is 64-bit (a 64-bit kernel: `EDPCSR_HI` is read).
    pub pc64: bool,
}

impl ArchData {
    /// Decodes `EDDEVID` and `EDDEVID1`; `pc64` is true on a 64-bit kernel.
    ///
    /// Returns an error when the device cannot sample the PC, so that the probe fails cleanly.
    pub fn from_ids(eddevid: u32, eddevid1: u32, pc64: bool) -> Result<Self, ArchError> {
        let pcsample = match eddevid & EDDEVID_PCSAMPLE {
            1 => PcSample::Pcsr,
            2 => PcSample::PcsrCidsr,
            3 => PcSample::Full,
            // CAST: masked to 4 bits above.
            other => {
                return Err(ArchError::NoPcSampling {
                    pcsample: other as u8,
                })
            }
        };
        let pcsr_offset = PcsrOffset::from_eddevid1(eddevid1);
        if !pc64 && pcsr_offset == PcsrOffset::NoOffsetNoAArch32 {
            return Err(ArchError::AArch32NotSampled);
        }
        Ok(Self {
            pcsample,
            pcsr_offset,
            pc64,
        })
    }

    /// Reads `EDDEVID` and `EDDEVID1` from the frame (unlocking and locking it) and decodes them.
    ///
    /// The ID registers are in the debug power domain: this is safe while the core is off.
    pub fn read<A: CsAccess + ?Sized>(io: &mut A, pc64: bool) -> Result<Self, ArchError> {
        io.write32(LAR, CS_UNLOCK_KEY);
        let eddevid = io.read32(EDDEVID);
        let eddevid1 = io.read32(EDDEVID1);
        io.write32(LAR, 0);
        Self::from_ids(eddevid, eddevid1, pc64)
    }

    /// Returns whether `EDCIDSR` is implemented.
    pub fn edcidsr_present(&self) -> bool {
        matches!(self.pcsample, PcSample::PcsrCidsr | PcSample::Full)
    }

    /// Returns whether `EDVIDSR` is implemented.
    pub fn edvidsr_present(&self) -> bool {
        self.pcsample == PcSample::Full
    }

    /// Returns whether AArch32 samples carry the Armv7 instruction-set offset (Arm 8, Thumb 4).
    pub fn pc_has_offset(&self) -> bool {
        self.pcsr_offset == PcsrOffset::InstructionSet
    }
}

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

/// What a calibrated PC sample is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PcKind {
    /// No PC (the CPU was not sampled).
    None = 0,
    /// A 64-bit AArch64 PC, `EDPCSR_HI:EDPCSR`, no offset.
    AArch64 = 1,
    /// An AArch32 Arm-state PC (bits 1:0 of the sample were `0b00`).
    Arm = 2,
    /// An AArch32 Thumb-state PC (bit 0 of the sample was set).
    Thumb = 3,
    /// Bits 1:0 were `0b10`: the offset is implementation defined; the sample is kept as read.
    ImplementationDefined = 4,
    /// An AArch32 sample on a `PCSROffset` `0b0010` device: no offset, state not sampled.
    AArch32NoState = 5,
}

impl PcKind {
    /// Decodes the record code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::None),
            1 => Some(Self::AArch64),
            2 => Some(Self::Arm),
            3 => Some(Self::Thumb),
            4 => Some(Self::ImplementationDefined),
            5 => Some(Self::AArch32NoState),
            _ => None,
        }
    }
}

/// A PC sample turned into an instruction address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcCalibration {
    /// The instruction address (or the sample as read, see [`PcKind`]).
    pub pc: u64,
    /// How `pc` was obtained.
    pub kind: PcKind,
}

/// Turns the raw sample registers into an instruction address (see the module documentation).
///
/// `edvidsr` is `None` when `EDVIDSR` is not implemented; `edpcsr_hi` is ignored for 32-bit
/// samples.
pub fn calibrate_pc(
    arch: &ArchData,
    edpcsr: u32,
    edpcsr_hi: u32,
    edvidsr: Option<u32>,
) -> PcCalibration {
    let aarch64 = arch.pc64 && edvidsr.is_none_or(|v| Edvidsr(v).hi_valid());
    if aarch64 {
        return PcCalibration {
            pc: (u64::from(edpcsr_hi) << 32) | u64::from(edpcsr),
            kind: PcKind::AArch64,
        };
    }
    let (arm_offset, thumb_offset) = match arch.pcsr_offset {
        PcsrOffset::NoOffsetNoAArch32 => {
            return PcCalibration {
                pc: u64::from(edpcsr),
                kind: PcKind::AArch32NoState,
            }
        }
        PcsrOffset::InstructionSet => (8, 4),
        PcsrOffset::NoOffset | PcsrOffset::Reserved(_) => (0, 0),
    };
    let (pc, kind) = if edpcsr & 1 != 0 {
        ((edpcsr & !1).wrapping_sub(thumb_offset), PcKind::Thumb)
    } else if edpcsr & 2 != 0 {
        (edpcsr, PcKind::ImplementationDefined)
    } else {
        ((edpcsr & !3).wrapping_sub(arm_offset), PcKind::Arm)
    };
    PcCalibration {
        pc: u64::from(pc),
        kind,
    }
}

/// The result of sampling one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// The PC was sampled.
    Sampled = 0,
    /// The core did not power up: `EDPRSR.PU` stayed clear for the whole bound.
    PoweredDown = 1,
    /// The OS double lock is set (`EDPRSR.DLK`): the registers may not be accessed.
    DoubleLocked = 2,
    /// `EDPCSR` read all ones and the PE is not halted: sampling is prohibited.
    Prohibited = 3,
    /// `EDPCSR` read all ones and `EDPRSR.HALTED` is set: the PE is in debug state.
    DebugState = 4,
    /// The device does not implement PC sampling.
    NotImplemented = 5,
}

impl Outcome {
    /// Decodes the record code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Sampled),
            1 => Some(Self::PoweredDown),
            2 => Some(Self::DoubleLocked),
            3 => Some(Self::Prohibited),
            4 => Some(Self::DebugState),
            5 => Some(Self::NotImplemented),
            _ => None,
        }
    }

    /// Returns a short reason, for `not sampled: <reason>` lines.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Sampled => "sampled",
            Self::PoweredDown => "powered down (EDPRSR.PU never set)",
            Self::DoubleLocked => "OS double lock set (EDPRSR.DLK)",
            Self::Prohibited => "sampling prohibited (EDPCSR all ones)",
            Self::DebugState => "in debug state (EDPCSR all ones, EDPRSR.HALTED)",
            Self::NotImplemented => "PC sampling not implemented",
        }
    }
}

/// `CpuSample::flags`: the OS lock was set when the sample started (and was set again).
pub const FLAG_OS_LOCK_WAS_LOCKED: u8 = 1 << 0;

/// `CpuSample::flags`: the kernel is 64-bit (`EDPCSR_HI` is read).
pub const FLAG_PC64: u8 = 1 << 1;

/// `CpuSample::flags`: `EDCIDSR` is implemented.
pub const FLAG_EDCIDSR_PRESENT: u8 = 1 << 2;

/// `CpuSample::flags`: `EDVIDSR` is implemented.
pub const FLAG_EDVIDSR_PRESENT: u8 = 1 << 3;

/// `CpuSample::flags`: the core had to be powered up (`PU` was clear on the first poll).
pub const FLAG_WAS_POWERED_DOWN: u8 = 1 << 4;

const FLAGS_KNOWN: u8 = 0x1F;

/// One CPU's sample: raw registers, outcome and decoded fields; one record per CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSample {
    /// Logical CPU number.
    pub cpu: u32,
    /// What happened.
    pub outcome: Outcome,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Raw `EDDEVID.PCSample` (bits 3:0).
    pub pcsample: u8,
    /// Raw `EDDEVID1.PCSROffset` (bits 3:0).
    pub pcsr_offset: u8,
    /// `EDPRSR` from the first poll after the power-up request.
    pub edprsr_first: u32,
    /// `EDPRSR` the access check used (the last one read).
    pub edprsr: u32,
    /// `EDPRCR` as found (and restored).
    pub edprcr_saved: u32,
    /// `EDPRSR` reads spent waiting for `PU`, over all attempts.
    pub power_polls: u32,
    /// `EDPCSR` as read (0 when not read).
    pub edpcsr: u32,
    /// `EDPCSR_HI` as read (0 when not read).
    pub edpcsr_hi: u32,
    /// `EDCIDSR` as read (0 when not read).
    pub edcidsr: u32,
    /// `EDVIDSR` as read (0 when not read).
    pub edvidsr: u32,
    /// The calibrated PC.
    pub pc: PcCalibration,
}

impl CpuSample {
    fn empty(cpu: u32, outcome: Outcome) -> Self {
        Self {
            cpu,
            outcome,
            flags: 0,
            pcsample: 0,
            pcsr_offset: 0,
            edprsr_first: 0,
            edprsr: 0,
            edprcr_saved: 0,
            power_polls: 0,
            edpcsr: 0,
            edpcsr_hi: 0,
            edcidsr: 0,
            edvidsr: 0,
            pc: PcCalibration {
                pc: 0,
                kind: PcKind::None,
            },
        }
    }

    fn for_arch(cpu: u32, arch: &ArchData) -> Self {
        let mut s = Self::empty(cpu, Outcome::PoweredDown);
        // CAST: `PcSample` is `repr(u8)`.
        s.pcsample = arch.pcsample as u8;
        s.pcsr_offset = arch.pcsr_offset.raw();
        if arch.pc64 {
            s.flags |= FLAG_PC64;
        }
        if arch.edcidsr_present() {
            s.flags |= FLAG_EDCIDSR_PRESENT;
        }
        if arch.edvidsr_present() {
            s.flags |= FLAG_EDVIDSR_PRESENT;
        }
        s
    }

    /// A record for a CPU whose device does not implement PC sampling (no register is read).
    pub fn not_implemented(cpu: u32, eddevid: u32, eddevid1: u32) -> Self {
        let mut s = Self::empty(cpu, Outcome::NotImplemented);
        // CAST: masked to 4 bits.
        s.pcsample = (eddevid & EDDEVID_PCSAMPLE) as u8;
        // CAST: masked to 4 bits.
        s.pcsr_offset = (eddevid1 & EDDEVID1_PCSROFFSET) as u8;
        s
    }

    /// Returns whether the OS lock was set when the sample started.
    pub fn os_lock_was_locked(&self) -> bool {
        self.flags & FLAG_OS_LOCK_WAS_LOCKED != 0
    }

    /// Returns the decoded `EDVIDSR`, when it was implemented and read.
    pub fn vidsr(&self) -> Option<Edvidsr> {
        if self.outcome == Outcome::Sampled && self.flags & FLAG_EDVIDSR_PRESENT != 0 {
            Some(Edvidsr(self.edvidsr))
        } else {
            None
        }
    }

    /// Returns the decoded `EDCIDSR`, when it was implemented and read.
    pub fn cidsr(&self) -> Option<Edcidsr> {
        if self.outcome == Outcome::Sampled && self.flags & FLAG_EDCIDSR_PRESENT != 0 {
            Some(Edcidsr(self.edcidsr))
        } else {
            None
        }
    }

    /// Returns a multi-line report in the C driver's words (see [`SampleReport`]).
    pub fn report(&self) -> SampleReport<'_> {
        SampleReport(self)
    }
}

/// Requests core power-up and waits, bounded; returns whether `PU` is set.
fn power_up<A: CsAccess + ?Sized>(io: &mut A, saved: u32, s: &mut CpuSample) -> bool {
    for attempt in 0..POWER_UP_ATTEMPTS {
        io.write32(EDPRCR, saved | EDPRCR_COREPURQ);
        let mut v = io.read32(EDPRSR);
        s.power_polls = s.power_polls.saturating_add(1);
        if attempt == 0 {
            s.edprsr_first = v;
            if v & EDPRSR_PU == 0 {
                s.flags |= FLAG_WAS_POWERED_DOWN;
            }
        }
        let mut left = POWER_UP_POLLS;
        while v & EDPRSR_PU == 0 {
            if left == 0 {
                s.edprsr = v;
                return false;
            }
            left -= 1;
            io.delay_us(POWER_UP_DELAY_US);
            v = io.read32(EDPRSR);
            s.power_polls = s.power_polls.saturating_add(1);
        }
        // Powered: ask the power controller not to take the core down while we read.
        io.write32(EDPRCR, saved | EDPRCR_COREPURQ | EDPRCR_CORENPDRQ);
        v = io.read32(EDPRSR);
        s.edprsr = v;
        if v & EDPRSR_PU != 0 {
            return true;
        }
        // The core powered down again before the no-powerdown request took: try again.
    }
    false
}

/// Samples one CPU's PC through its external debug frame, at panic.
///
/// Never fails: a CPU that cannot be sampled gets a record with the reason. Makes at most
/// [`MAX_ACCESSES_PER_SAMPLE`] accesses and [`MAX_DELAYS_PER_SAMPLE`] delays; leaves `EDPRCR`
/// and the OS lock as found and the software lock locked.
pub fn sample_cpu<A: CsAccess + ?Sized>(io: &mut A, cpu: u32, arch: &ArchData) -> CpuSample {
    let mut s = CpuSample::for_arch(cpu, arch);

    io.write32(LAR, CS_UNLOCK_KEY);
    let saved = io.read32(EDPRCR);
    s.edprcr_saved = saved;

    if !power_up(io, saved, &mut s) {
        s.outcome = Outcome::PoweredDown;
    } else if Edprsr(s.edprsr).double_locked() {
        s.outcome = Outcome::DoubleLocked;
    } else {
        let os_locked = Edprsr(s.edprsr).os_locked();
        if os_locked {
            s.flags |= FLAG_OS_LOCK_WAS_LOCKED;
            io.write32(EDOSLAR, 0);
        }
        read_sample(io, arch, &mut s);
        if os_locked {
            io.write32(EDOSLAR, EDOSLAR_OSLK);
        }
    }

    io.write32(EDPRCR, saved);
    io.write32(LAR, 0);
    s
}

/// Reads the sample registers, `EDPCSR` first, into `s`.
fn read_sample<A: CsAccess + ?Sized>(io: &mut A, arch: &ArchData, s: &mut CpuSample) {
    let lo = io.read32(EDPCSR);
    s.edpcsr = lo;
    if lo == EDPCSR_PROHIBITED {
        // The latched registers are UNKNOWN now: do not read them.
        s.outcome = if Edprsr(s.edprsr).halted() {
            Outcome::DebugState
        } else {
            Outcome::Prohibited
        };
        return;
    }
    if arch.pc64 {
        s.edpcsr_hi = io.read32(EDPCSR_HI);
    }
    if arch.edcidsr_present() {
        s.edcidsr = io.read32(EDCIDSR);
    }
    let vidsr = if arch.edvidsr_present() {
        let v = io.read32(EDVIDSR);
        s.edvidsr = v;
        Some(v)
    } else {
        None
    };
    s.pc = calibrate_pc(arch, lo, s.edpcsr_hi, vidsr);
    s.outcome = Outcome::Sampled;
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

impl fmt::Display for SampleReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        writeln!(f, "CPU[{}]:", s.cpu)?;
        if s.outcome == Outcome::NotImplemented {
            return write!(f, " not sampled: {}", s.outcome.reason());
        }
        write!(f, " {}", Edprsr(s.edprsr))?;
        match s.outcome {
            Outcome::Sampled => {}
            Outcome::PoweredDown | Outcome::DoubleLocked => {
                writeln!(f)?;
                writeln!(f, "No permission to access debug registers!")?;
                return write!(f, " not sampled: {}", s.outcome.reason());
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

/// Record payload format version.
pub const RECORD_VERSION: u16 = 1;

/// Size in bytes of one encoded [`CpuSample`] record payload.
///
/// Layout (little-endian): `u16` version, `u16` size, `u32` cpu, `u8` outcome, `u8` PC kind,
/// `u8` flags, `u8` ids (`PCSample` << 4 | `PCSROffset`), `u32` `EDPRSR`, `u32` `EDPRCR` saved,
/// `u32` `EDPCSR`, `u32` `EDPCSR_HI`, `u32` `EDCIDSR`, `u32` `EDVIDSR`, `u32` power polls,
/// `u64` calibrated PC, `u8` state, `u8` EL, `u8` width, `u8` VMID (decoded from `EDVIDSR`,
/// `0xFF`/0 when not read), `u32` first `EDPRSR`, 8 reserved zero bytes.
pub const RECORD_LEN: usize = 64;

/// Why a record could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// The buffer is shorter than [`RECORD_LEN`].
    TooShort {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// Unknown payload version.
    BadVersion(u16),
    /// The size field is not [`RECORD_LEN`].
    BadSize(u16),
    /// Unknown outcome code.
    BadOutcome(u8),
    /// Unknown PC kind code.
    BadPcKind(u8),
    /// A field contradicts another one; names the field.
    Inconsistent(&'static str),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { need, got } => {
                write!(f, "CPU debug record too short: {got} bytes, need {need}")
            }
            Self::BadVersion(v) => write!(f, "unknown CPU debug record version {v}"),
            Self::BadSize(v) => write!(f, "CPU debug record size field {v}, expected {RECORD_LEN}"),
            Self::BadOutcome(v) => write!(f, "unknown CPU debug outcome code {v}"),
            Self::BadPcKind(v) => write!(f, "unknown CPU debug PC kind code {v}"),
            Self::Inconsistent(what) => write!(f, "inconsistent CPU debug record field: {what}"),
        }
    }
}

const DECODED_NONE: u8 = 0xFF;

struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        let end = self.pos.saturating_add(b.len());
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(b);
        }
        self.pos = end;
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let end = self.pos.saturating_add(N);
        if let Some(src) = self.buf.get(self.pos..end) {
            out.copy_from_slice(src);
        }
        self.pos = end;
        out
    }

    fn u8(&mut self) -> u8 {
        let [b] = self.take::<1>();
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// The decoded `EDVIDSR` fields stored in the record: state, EL, width, VMID.
fn decoded_fields(s: &CpuSample) -> [u8; 4] {
    match s.vidsr() {
        // CAST: the enums are `repr(u8)`.
        Some(v) => [v.state() as u8, v.el() as u8, v.width(), v.vmid()],
        None => [DECODED_NONE, DECODED_NONE, 0, 0],
    }
}

impl CpuSample {
    /// Encodes the record payload into `out`; returns the number of bytes written
    /// ([`RECORD_LEN`]).
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, RecordError> {
        if out.len() < RECORD_LEN {
            return Err(RecordError::TooShort {
                need: RECORD_LEN,
                got: out.len(),
            });
        }
        let mut w = Writer { buf: out, pos: 0 };
        w.bytes(&RECORD_VERSION.to_le_bytes());
        // CAST: `RECORD_LEN` is 64.
        w.bytes(&(RECORD_LEN as u16).to_le_bytes());
        w.bytes(&self.cpu.to_le_bytes());
        // CAST: the enums are `repr(u8)`.
        w.bytes(&[
            self.outcome as u8,
            self.pc.kind as u8,
            self.flags,
            ((self.pcsample & 0xF) << 4) | (self.pcsr_offset & 0xF),
        ]);
        for v in [
            self.edprsr,
            self.edprcr_saved,
            self.edpcsr,
            self.edpcsr_hi,
            self.edcidsr,
            self.edvidsr,
            self.power_polls,
        ] {
            w.bytes(&v.to_le_bytes());
        }
        w.bytes(&self.pc.pc.to_le_bytes());
        w.bytes(&decoded_fields(self));
        w.bytes(&self.edprsr_first.to_le_bytes());
        w.bytes(&[0u8; 8]);
        Ok(RECORD_LEN)
    }

    /// Decodes a record payload, checking every field; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        if bytes.len() < RECORD_LEN {
            return Err(RecordError::TooShort {
                need: RECORD_LEN,
                got: bytes.len(),
            });
        }
        let mut r = Reader { buf: bytes, pos: 0 };
        let version = r.u16();
        if version != RECORD_VERSION {
            return Err(RecordError::BadVersion(version));
        }
        let size = r.u16();
        if usize::from(size) != RECORD_LEN {
            return Err(RecordError::BadSize(size));
        }
        let cpu = r.u32();
        let outcome_code = r.u8();
        let outcome =
            Outcome::from_code(outcome_code).ok_or(RecordError::BadOutcome(outcome_code))?;
        let kind_code = r.u8();
        let kind = PcKind::from_code(kind_code).ok_or(RecordError::BadPcKind(kind_code))?;
        let flags = r.u8();
        let ids = r.u8();
        let mut s = Self::empty(cpu, outcome);
        s.flags = flags;
        s.pcsample = ids >> 4;
        s.pcsr_offset = ids & 0xF;
        s.edprsr = r.u32();
        s.edprcr_saved = r.u32();
        s.edpcsr = r.u32();
        s.edpcsr_hi = r.u32();
        s.edcidsr = r.u32();
        s.edvidsr = r.u32();
        s.power_polls = r.u32();
        s.pc = PcCalibration { pc: r.u64(), kind };
        let decoded = r.take::<4>();
        s.edprsr_first = r.u32();
        let reserved = r.take::<8>();

        if flags & !FLAGS_KNOWN != 0 {
            return Err(RecordError::Inconsistent("flags"));
        }
        if outcome != Outcome::NotImplemented {
            let presence = FLAG_EDCIDSR_PRESENT | FLAG_EDVIDSR_PRESENT;
            let want = match s.pcsample {
                1 => 0,
                2 => FLAG_EDCIDSR_PRESENT,
                3 => presence,
                _ => return Err(RecordError::Inconsistent("EDDEVID.PCSample")),
            };
            if flags & presence != want {
                return Err(RecordError::Inconsistent("register presence flags"));
            }
        }
        if reserved != [0u8; 8] {
            return Err(RecordError::Inconsistent("reserved"));
        }
        if (outcome == Outcome::Sampled) != (kind != PcKind::None) {
            return Err(RecordError::Inconsistent("PC kind"));
        }
        if outcome != Outcome::Sampled && s.pc.pc != 0 {
            return Err(RecordError::Inconsistent("PC"));
        }
        if decoded != decoded_fields(&s) {
            return Err(RecordError::Inconsistent("decoded EDVIDSR fields"));
        }
        if outcome == Outcome::Sampled {
            let arch = ArchData::from_ids(
                u32::from(s.pcsample),
                u32::from(s.pcsr_offset),
                flags & FLAG_PC64 != 0,
            )
            .map_err(|_| RecordError::Inconsistent("EDDEVID/EDDEVID1"))?;
            let vidsr = s.vidsr().map(|v| v.0);
            if calibrate_pc(&arch, s.edpcsr, s.edpcsr_hi, vidsr) != s.pc {
                return Err(RecordError::Inconsistent("calibrated PC"));
            }
        }
        Ok(s)
    }
}

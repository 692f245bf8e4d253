// SPDX-License-Identifier: GPL-2.0

//! What a CPU debug frame can sample (`EDDEVID`, `EDDEVID1`) and how a sample becomes an
//! instruction address.
//!
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
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use core::fmt;

use super::Edvidsr;

/// `EDDEVID.PCSample` field mask (bits 3:0).
pub const EDDEVID_PCSAMPLE: u32 = 0xF;

/// `EDDEVID1.PCSROffset` field mask (bits 3:0).
pub const EDDEVID1_PCSROFFSET: u32 = 0xF;

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

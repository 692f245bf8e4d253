// SPDX-License-Identifier: GPL-2.0

//! The payload of a CPU debug record: one CPU's program counter sample, taken at panic through
//! its external debug frame (Arm DDI 0487, part H), with the raw registers, how the sampling
//! went ([`Outcome`]) and the calibrated PC ([`calibrate_pc`]).
//!
//! Written by the CPU debug driver, read by the host tool, which also prints it the way the C
//! driver does ([`SampleReport`]). Shared with the host (`crates/kernel-host`): uses only `core`
//! and its siblings.

mod pc;
mod values;

pub use self::{
    pc::*,
    values::*, //
};

use core::fmt;

use super::bytes::{
    LeReader,
    LeWriter, //
};

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
    /// Not sampled: the time budget of the CPU debug phase was spent before this CPU's turn;
    /// no register was touched.
    NotReached = 6,
    /// Not sampled: the record was written when the device was bound, to name the CPU (its
    /// MPIDR) for a capture kernel's sample; no panic-time step ran after it.
    Recorded = 7,
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
            6 => Some(Self::NotReached),
            7 => Some(Self::Recorded),
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
            Self::NotReached => "not reached (the CPU debug phase's time budget was spent)",
            Self::Recorded => "recorded when the device was bound; no panic-time step ran",
        }
    }
}

/// Why a CPU that a capture kernel found powered down was not sampled.
pub const POWERED_OFF_REASON: &str =
    "powered off (EDPRSR.PU clear as found; the capture kernel requested no power-up)";

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

/// `CpuSample::flags`: the wait for the core to power up was cut short by the CPU debug phase's
/// time budget (the CPU's share of what was left), before its own bound.
pub const FLAG_BUDGET_CUT: u8 = 1 << 5;

/// `CpuSample::flags`: the CPU's MPIDR (its affinity fields, as the device tree's `cpu` node
/// gives them) is in [`CpuSample::mpidr`].
pub const FLAG_MPIDR: u8 = 1 << 6;

/// `CpuSample::flags`: the CPU was sampled as it was found, by a kdump capture kernel in which
/// it is not online: no power-up was requested and no register but the OS lock was changed (a
/// powered-down core stays down: [`Outcome::PoweredDown`] then means the CPU was off).
pub const FLAG_AS_FOUND: u8 = 1 << 7;

const FLAGS_KNOWN: u8 = 0xFF;

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
    /// The CPU's MPIDR affinity (`MPIDR_EL1` & `MPIDR_HWID_BITMASK`), when known: how a capture
    /// kernel, which numbers CPUs its own way, names the crashed kernel's CPU.
    pub mpidr: Option<u64>,
}

impl CpuSample {
    /// A record of `cpu` with `outcome` and nothing read.
    pub fn empty(cpu: u32, outcome: Outcome) -> Self {
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
            mpidr: None,
        }
    }

    /// A record of `cpu`, not sampled yet ([`Outcome::PoweredDown`]), with what its device
    /// implements.
    pub fn for_arch(cpu: u32, arch: &ArchData) -> Self {
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

    /// A record for a CPU the CPU debug phase's time budget did not reach (no register is read).
    pub fn not_reached(cpu: u32, arch: &ArchData) -> Self {
        let mut s = Self::for_arch(cpu, arch);
        s.outcome = Outcome::NotReached;
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

    /// A record of `cpu` written when its device is bound ([`Outcome::Recorded`]): what it
    /// implements and, when known, its MPIDR; no register is read.
    pub fn recorded(cpu: u32, arch: &ArchData, mpidr: Option<u64>) -> Self {
        let mut s = Self::for_arch(cpu, arch);
        s.outcome = Outcome::Recorded;
        s.set_mpidr(mpidr);
        s
    }

    /// Sets the CPU's MPIDR ([`FLAG_MPIDR`] with it).
    pub fn set_mpidr(&mut self, mpidr: Option<u64>) {
        self.mpidr = mpidr;
        if mpidr.is_some() {
            self.flags |= FLAG_MPIDR;
        } else {
            self.flags &= !FLAG_MPIDR;
        }
    }

    /// Returns why the CPU was not sampled (or `sampled`): the outcome's reason, except for a
    /// core a capture kernel found powered down ([`POWERED_OFF_REASON`]).
    pub fn reason(&self) -> &'static str {
        if self.outcome == Outcome::PoweredDown && self.as_found() {
            POWERED_OFF_REASON
        } else {
            self.outcome.reason()
        }
    }

    /// Returns whether the sample was taken as found by a capture kernel ([`FLAG_AS_FOUND`]).
    pub fn as_found(&self) -> bool {
        self.flags & FLAG_AS_FOUND != 0
    }

    /// Returns whether the phase's time budget cut the power-up wait short.
    pub fn budget_cut(&self) -> bool {
        self.flags & FLAG_BUDGET_CUT != 0
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

/// Record payload format version: 2 has the MPIDR ([`FLAG_MPIDR`]) where version 1 had 8
/// reserved bytes; a version 1 record still decodes (without an MPIDR).
pub const RECORD_VERSION: u16 = 2;

/// Size in bytes of one encoded [`CpuSample`] record payload.
///
/// Layout (little-endian): `u16` version, `u16` size, `u32` cpu, `u8` outcome, `u8` PC kind,
/// `u8` flags, `u8` ids (`PCSample` << 4 | `PCSROffset`), `u32` `EDPRSR`, `u32` `EDPRCR` saved,
/// `u32` `EDPCSR`, `u32` `EDPCSR_HI`, `u32` `EDCIDSR`, `u32` `EDVIDSR`, `u32` power polls,
/// `u64` calibrated PC, `u8` state, `u8` EL, `u8` width, `u8` VMID (decoded from `EDVIDSR`,
/// `0xFF`/0 when not read), `u32` first `EDPRSR`, `u64` MPIDR (0 without [`FLAG_MPIDR`]).
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
        let mut w = LeWriter::new(out);
        w.u16(RECORD_VERSION);
        // CAST: `RECORD_LEN` is 64.
        w.u16(RECORD_LEN as u16);
        w.u32(self.cpu);
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
            w.u32(v);
        }
        w.u64(self.pc.pc);
        w.bytes(&decoded_fields(self));
        w.u32(self.edprsr_first);
        w.u64(self.mpidr.unwrap_or(0));
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
        let mut r = LeReader::new(bytes);
        let version = r.u16();
        if !(1..=RECORD_VERSION).contains(&version) {
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
        let mpidr = r.u64();

        // Version 1 knew the flags below `FLAG_MPIDR` and had reserved zero bytes instead.
        let known = if version == 1 { 0x3F } else { FLAGS_KNOWN };
        if flags & !known != 0 {
            return Err(RecordError::Inconsistent("flags"));
        }
        if flags & FLAG_MPIDR != 0 {
            s.mpidr = Some(mpidr);
        } else if mpidr != 0 {
            return Err(RecordError::Inconsistent("MPIDR without its flag"));
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

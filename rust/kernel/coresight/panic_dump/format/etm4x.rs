// SPDX-License-Identifier: GPL-2.0

//! The payload of an ETMv4 source record: the trace unit's registers a decoder needs, read back
//! from it at panic, and how the save went.
//!
//! Written by the ETMv4 driver's panic save, read by the host tool (which also turns it into
//! perf's `cs_etm` metadata). Shared with the host (`crates/kernel-host`): uses only `core` and
//! its siblings.

use super::bytes::{
    get_u32,
    put, //
};

/// Number of ID registers `TRCIDR0..=TRCIDR13` a saved state holds.
pub const NR_IDR: usize = 14;

/// Number of single address comparators a saved state has room for (the architecture's most).
pub const NR_ADDR_CMP: usize = 16;

fn put_u32le(out: &mut [u8], off: usize, v: u32) {
    put(out, off, &v.to_le_bytes());
}

/// What the panic-time save achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum SaveOutcome {
    /// The trace unit was stopped and every register saved.
    #[default]
    Ok = 0,
    /// `TRCSTATR.IDLE` never set after clearing `EN`; registers saved anyway.
    IdleTimeout = 1,
    /// `TRCSTATR.PMSTABLE` never set; registers saved anyway.
    PmStableTimeout = 2,
    /// The OS lock was set and could not be cleared; trace registers not read.
    OsLocked = 3,
    /// The trace unit power domain was down (`TRCPDSR.POWER` clear); nothing read.
    PoweredDown = 4,
    /// `TRCDEVARCH` did not identify an ETMv4; nothing else read.
    NotEtmV4 = 5,
    /// The software lock could not be cleared; nothing else read.
    SoftwareLocked = 6,
    /// A system-register trace unit of another CPU: only its own CPU can reach it, and that CPU
    /// was stopped by the panic; nothing read.
    Unreachable = 7,
    /// A CPU stopped by the panic was in the middle of a register sequence on the unit; not
    /// touched.
    Busy = 8,
}

impl SaveOutcome {
    /// Returns a short lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::IdleTimeout => "idle-timeout",
            Self::PmStableTimeout => "pmstable-timeout",
            Self::OsLocked => "os-locked",
            Self::PoweredDown => "powered-down",
            Self::NotEtmV4 => "not-etmv4",
            Self::SoftwareLocked => "software-locked",
            Self::Unreachable => "unreachable",
            Self::Busy => "busy",
        }
    }

    /// Converts the value stored in a record.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::IdleTimeout,
            2 => Self::PmStableTimeout,
            3 => Self::OsLocked,
            4 => Self::PoweredDown,
            5 => Self::NotEtmV4,
            6 => Self::SoftwareLocked,
            7 => Self::Unreachable,
            8 => Self::Busy,
            _ => return None,
        })
    }
}

/// [`SavedState::flags`] bit: `TRCCONFIGR`, `TRCTRACEIDR` and `TRCIDR*` were read.
pub const SAVED_REGS_VALID: u32 = 1 << 0;
/// [`SavedState::flags`] bit: the OS lock was set on entry.
pub const SAVED_OS_LOCK_FOUND: u32 = 1 << 1;
/// [`SavedState::flags`] bit: the OS lock was set again and reads back as set.
pub const SAVED_OS_LOCK_RESTORED: u32 = 1 << 2;
/// [`SavedState::flags`] bit: the software lock was set on entry.
pub const SAVED_SW_LOCK_FOUND: u32 = 1 << 3;
/// [`SavedState::flags`] bit: `TRCVICTLR` and `TRCVISSCTLR` were read after the stop (version 2).
pub const SAVED_VIEWINST_VALID: u32 = 1 << 4;
/// [`SavedState::flags`] bit: the unit was tracing for a sysfs session (`enable_source`).
pub const SAVED_SESSION_SYSFS: u32 = 1 << 5;
/// [`SavedState::flags`] bit: the unit was tracing for a perf session (`cs_etm`), with the
/// configuration perf gave it (the registers saved are that configuration).
pub const SAVED_SESSION_PERF: u32 = 1 << 6;
/// [`SavedState::flags`] bit: `TRCVIIECTLR` and the address comparators the ViewInst controls
/// select were read (version 3).
pub const SAVED_FILTER_VALID: u32 = 1 << 7;
/// [`SavedState::flags`] bit: the registers are the configuration the unit was programmed with
/// when its source was enabled, recorded while the kernel ran, not read from the unit at panic:
/// `TRCPRGCTLR`, `TRCSTATR`, `TRCOSLSR` and `TRCPDSR` are not known, and `TRCVICTLR.SSSTATUS`
/// is as programmed, not where the start/stop logic was at the crash.
pub const SAVED_PROGRAMMED: u32 = 1 << 8;

/// Version of the [`SavedState`] payload layout this code writes.
///
/// Version 2 added `TRCVICTLR` and `TRCVISSCTLR` after the ID registers, version 3
/// `TRCVIIECTLR` and the address comparators; version 1 ([`SAVED_STATE_V1_SIZE`] bytes) and 2
/// ([`SAVED_STATE_V2_SIZE`]) payloads are read too.
pub const SAVED_STATE_VERSION: u32 = 3;

/// Size in bytes of an encoded [`SavedState`].
pub const SAVED_STATE_SIZE: usize = 312;

/// Size in bytes of a version 1 payload.
pub const SAVED_STATE_V1_SIZE: usize = 104;

/// Size in bytes of a version 2 payload.
pub const SAVED_STATE_V2_SIZE: usize = 112;

/// `TRCVICTLR.SSSTATUS`: the ViewInst start/stop logic is in the started state.
pub const VICTLR_SSSTATUS: u32 = 1 << 9;

// Payload layout, little-endian u32 words at these byte offsets.
const OFF_VERSION: usize = 0;
const OFF_CPU: usize = 4;
const OFF_OUTCOME: usize = 8;
const OFF_FLAGS: usize = 12;
const OFF_CONFIGR: usize = 16;
const OFF_TRACEIDR: usize = 20;
const OFF_AUTHSTATUS: usize = 24;
const OFF_DEVARCH: usize = 28;
const OFF_PRGCTLR: usize = 32;
const OFF_STATR: usize = 36;
const OFF_OSLSR: usize = 40;
const OFF_PDSR: usize = 44;
const OFF_IDR: usize = 48;
const OFF_VICTLR: usize = 104;
const OFF_VISSCTLR: usize = 108;
const OFF_VIIECTLR: usize = 112;
const OFF_CMP_SAVED: usize = 116;
const OFF_ACATR: usize = 120;
const OFF_ACVR: usize = OFF_ACATR + 4 * NR_ADDR_CMP;

// The ID registers end a version 1 payload; the ViewInst registers follow in version 2, the
// include/exclude control and the comparators in version 3 (`TRCACATRn` low words, then the
// 64-bit `TRCACVRn` as two words each, the low one first).
const _: () = assert!(OFF_IDR + 4 * NR_IDR == SAVED_STATE_V1_SIZE);
const _: () = assert!(OFF_VISSCTLR + 4 == SAVED_STATE_V2_SIZE);
const _: () = assert!(OFF_ACVR + 8 * NR_ADDR_CMP == SAVED_STATE_SIZE);

/// The state of one trace unit saved at panic time: the payload of a source record.
///
/// Encoded as [`SAVED_STATE_SIZE`] bytes of little-endian 32-bit words: version, cpu,
/// outcome, flags, `TRCCONFIGR`, `TRCTRACEIDR`, `TRCAUTHSTATUS`, `TRCDEVARCH`,
/// `TRCPRGCTLR` (as found), `TRCSTATR` (after stopping), `TRCOSLSR` (as found), `TRCPDSR`,
/// `TRCIDR0..=TRCIDR13`, then `TRCVICTLR` and `TRCVISSCTLR` (after stopping; version 2), then
/// `TRCVIIECTLR`, the mask of comparators saved, their `TRCACATRn` and `TRCACVRn` (version 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SavedState {
    /// The CPU the trace unit belongs to.
    pub cpu: u32,
    /// What the save achieved.
    pub outcome: SaveOutcome,
    /// `SAVED_*` flag bits.
    pub flags: u32,
    /// `TRCCONFIGR`.
    pub trcconfigr: u32,
    /// `TRCTRACEIDR`.
    pub trctraceidr: u32,
    /// `TRCAUTHSTATUS`.
    pub authstatus: u32,
    /// `TRCDEVARCH`.
    pub devarch: u32,
    /// `TRCPRGCTLR` as found (bit 0 set: the unit was tracing).
    pub trcprgctlr: u32,
    /// `TRCSTATR` after stopping.
    pub trcstatr: u32,
    /// `TRCOSLSR` as found.
    pub trcoslsr: u32,
    /// `TRCPDSR` (zero through system registers).
    pub trcpdsr: u32,
    /// `TRCIDR0..=TRCIDR13`.
    pub idr: [u32; NR_IDR],
    /// `TRCVICTLR` after stopping: its `SSSTATUS` says whether the start/stop logic was still
    /// started (0 after a stop point was reached); valid with [`SAVED_VIEWINST_VALID`].
    pub trcvictlr: u32,
    /// `TRCVISSCTLR`: the single address comparators programmed as stop (bits 31:16) and start
    /// (15:0) points; valid with [`SAVED_VIEWINST_VALID`].
    pub trcvissctlr: u32,
    /// `TRCVIIECTLR`: the address range comparator pairs that include (bits 15:0) and exclude
    /// (31:16) code; valid with [`SAVED_FILTER_VALID`].
    pub trcviiectlr: u32,
    /// The single address comparators saved, one bit each: those `TRCVIIECTLR` and
    /// `TRCVISSCTLR` select; valid with [`SAVED_FILTER_VALID`].
    pub cmp_saved: u32,
    /// `TRCACATRn` (low word) of the comparators in [`Self::cmp_saved`].
    pub acatr: [u32; NR_ADDR_CMP],
    /// `TRCACVRn` of the comparators in [`Self::cmp_saved`].
    pub acvr: [u64; NR_ADDR_CMP],
}

/// Why a [`SavedState`] could not be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// The buffer holds fewer bytes than its version's payload size.
    TooShort(usize),
    /// The version word is not one this code knows.
    Version(u32),
    /// The outcome word is not a known [`SaveOutcome`].
    Outcome(u32),
}

impl SavedState {
    /// Returns `true` when the configuration and ID registers were read from the unit.
    pub fn regs_valid(&self) -> bool {
        self.flags & SAVED_REGS_VALID != 0
    }

    /// Returns who had the unit tracing when the panic came: `"sysfs"`, `"perf"`, or `None`
    /// (not enabled, or a dump from before the session flags).
    pub fn session(&self) -> Option<&'static str> {
        if self.flags & SAVED_SESSION_PERF != 0 {
            Some("perf")
        } else if self.flags & SAVED_SESSION_SYSFS != 0 {
            Some("sysfs")
        } else {
            None
        }
    }

    /// Returns the hardware stop the unit was programmed with, when its ViewInst registers were
    /// saved: how many stop points (single address comparators in `TRCVISSCTLR.STOP`) were
    /// armed, and whether the start/stop logic was found stopped (`TRCVICTLR.SSSTATUS` 0;
    /// not known for registers recorded at enable, [`SAVED_PROGRAMMED`]).
    pub fn hw_stop(&self) -> Option<HwStop> {
        if self.flags & SAVED_VIEWINST_VALID == 0 {
            return None;
        }
        Some(HwStop {
            stop_points: (self.trcvissctlr >> 16).count_ones(),
            stopped: (self.flags & SAVED_PROGRAMMED == 0)
                .then_some(self.trcvictlr & VICTLR_SSSTATUS == 0),
        })
    }

    /// Returns `true` when the registers are the configuration recorded at enable
    /// ([`SAVED_PROGRAMMED`]), not read from the unit at panic.
    pub fn programmed_only(&self) -> bool {
        self.flags & SAVED_PROGRAMMED != 0
    }

    /// Encodes the payload into the start of `out`; returns the number of bytes written.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, PayloadError> {
        if out.len() < SAVED_STATE_SIZE {
            return Err(PayloadError::TooShort(out.len()));
        }
        put_u32le(out, OFF_VERSION, SAVED_STATE_VERSION);
        put_u32le(out, OFF_CPU, self.cpu);
        put_u32le(out, OFF_OUTCOME, self.outcome as u32);
        put_u32le(out, OFF_FLAGS, self.flags);
        put_u32le(out, OFF_CONFIGR, self.trcconfigr);
        put_u32le(out, OFF_TRACEIDR, self.trctraceidr);
        put_u32le(out, OFF_AUTHSTATUS, self.authstatus);
        put_u32le(out, OFF_DEVARCH, self.devarch);
        put_u32le(out, OFF_PRGCTLR, self.trcprgctlr);
        put_u32le(out, OFF_STATR, self.trcstatr);
        put_u32le(out, OFF_OSLSR, self.trcoslsr);
        put_u32le(out, OFF_PDSR, self.trcpdsr);
        for (i, v) in self.idr.iter().enumerate() {
            put_u32le(out, OFF_IDR + 4 * i, *v);
        }
        put_u32le(out, OFF_VICTLR, self.trcvictlr);
        put_u32le(out, OFF_VISSCTLR, self.trcvissctlr);
        put_u32le(out, OFF_VIIECTLR, self.trcviiectlr);
        put_u32le(out, OFF_CMP_SAVED, self.cmp_saved);
        for (i, v) in self.acatr.iter().enumerate() {
            put_u32le(out, OFF_ACATR + 4 * i, *v);
        }
        for (i, v) in self.acvr.iter().enumerate() {
            put(out, OFF_ACVR + 8 * i, &v.to_le_bytes());
        }
        Ok(SAVED_STATE_SIZE)
    }

    /// Decodes a payload written by [`Self::encode`] (or a version 1 or 2 payload); trailing
    /// bytes are ignored.
    pub fn decode(buf: &[u8]) -> Result<Self, PayloadError> {
        if buf.len() < SAVED_STATE_V1_SIZE {
            return Err(PayloadError::TooShort(buf.len()));
        }
        let version = get_u32(buf, OFF_VERSION);
        let size = match version {
            1 => SAVED_STATE_V1_SIZE,
            2 => SAVED_STATE_V2_SIZE,
            SAVED_STATE_VERSION => SAVED_STATE_SIZE,
            _ => return Err(PayloadError::Version(version)),
        };
        if buf.len() < size {
            return Err(PayloadError::TooShort(buf.len()));
        }
        let (v2, v3) = (version >= 2, version >= 3);
        let flags = get_u32(buf, OFF_FLAGS);
        let raw_outcome = get_u32(buf, OFF_OUTCOME);
        let outcome =
            SaveOutcome::from_u32(raw_outcome).ok_or(PayloadError::Outcome(raw_outcome))?;
        let mut idr = [0u32; NR_IDR];
        for (i, v) in idr.iter_mut().enumerate() {
            *v = get_u32(buf, OFF_IDR + 4 * i);
        }
        let (mut acatr, mut acvr) = ([0u32; NR_ADDR_CMP], [0u64; NR_ADDR_CMP]);
        if v3 {
            for (i, v) in acatr.iter_mut().enumerate() {
                *v = get_u32(buf, OFF_ACATR + 4 * i);
            }
            for (i, v) in acvr.iter_mut().enumerate() {
                let lo = get_u32(buf, OFF_ACVR + 8 * i);
                let hi = get_u32(buf, OFF_ACVR + 8 * i + 4);
                *v = u64::from(lo) | (u64::from(hi) << 32);
            }
        }
        // Registers an older payload has no room for are not valid, whatever its flags say.
        let mut flags = flags;
        if !v2 {
            flags &= !SAVED_VIEWINST_VALID;
        }
        if !v3 {
            flags &= !SAVED_FILTER_VALID;
        }
        Ok(Self {
            cpu: get_u32(buf, OFF_CPU),
            outcome,
            flags,
            trcconfigr: get_u32(buf, OFF_CONFIGR),
            trctraceidr: get_u32(buf, OFF_TRACEIDR),
            authstatus: get_u32(buf, OFF_AUTHSTATUS),
            devarch: get_u32(buf, OFF_DEVARCH),
            trcprgctlr: get_u32(buf, OFF_PRGCTLR),
            trcstatr: get_u32(buf, OFF_STATR),
            trcoslsr: get_u32(buf, OFF_OSLSR),
            trcpdsr: get_u32(buf, OFF_PDSR),
            idr,
            trcvictlr: if v2 { get_u32(buf, OFF_VICTLR) } else { 0 },
            trcvissctlr: if v2 { get_u32(buf, OFF_VISSCTLR) } else { 0 },
            trcviiectlr: if v3 { get_u32(buf, OFF_VIIECTLR) } else { 0 },
            cmp_saved: if v3 { get_u32(buf, OFF_CMP_SAVED) } else { 0 },
            acatr,
            acvr,
        })
    }

    /// Returns perf's `cs_etm` ETMv4 per-CPU metadata block for this trace unit.
    ///
    /// The layout is `tools/perf/util/cs-etm.h`: magic, cpu, number of parameters, then
    /// `TRCCONFIGR`, `TRCTRACEIDR`, `TRCIDR0`, `TRCIDR1`, `TRCIDR2`, `TRCIDR8`,
    /// `TRCAUTHSTATUS` and `TS_SOURCE` (`-1` when unknown, stored as two's complement).
    pub fn perf_metadata(&self, ts_source: i64) -> [u64; PERF_ETMV4_BLOCK_LEN] {
        [
            PERF_ETMV4_MAGIC,
            u64::from(self.cpu),
            PERF_ETMV4_NR_PARAMS,
            u64::from(self.trcconfigr),
            u64::from(self.trctraceidr),
            u64::from(self.idr[0]),
            u64::from(self.idr[1]),
            u64::from(self.idr[2]),
            u64::from(self.idr[8]),
            u64::from(self.authstatus),
            // CAST: perf stores the signed value in a u64 slot.
            ts_source as u64,
        ]
    }
}

/// The hardware stop a trace unit was programmed with, from its saved ViewInst registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwStop {
    /// Stop points armed (single address comparators selected in `TRCVISSCTLR.STOP`).
    pub stop_points: u32,
    /// The start/stop logic was found stopped (a stop point was reached), or `None` when the
    /// unit was not read at panic ([`SAVED_PROGRAMMED`]).
    pub stopped: Option<bool>,
}

/// Magic value that opens an ETMv4 block in perf's `cs_etm` auxtrace info.
pub const PERF_ETMV4_MAGIC: u64 = 0x4040_4040_4040_4040;
/// Number of trace parameters in perf's ETMv4 block (`CS_ETMV4_PRIV_MAX - CS_ETMV4_TRCCONFIGR`).
pub const PERF_ETMV4_NR_PARAMS: u64 = 8;
/// Number of `u64` values in perf's ETMv4 per-CPU block (3 common + 8 parameters).
pub const PERF_ETMV4_BLOCK_LEN: usize = 11;

// SPDX-License-Identifier: GPL-2.0

//! The phase times record's payload: when each phase of the panic path started and ended.
//!
//! The core runs the registrations' callbacks in phases ([`Phase`]): stop the trace sources,
//! sample the CPUs, drain the sinks, the rest, then write the commit record. It reads a free
//! running counter (on arm64 the architected timer's virtual count, `CNTVCT_EL0`) at the start
//! and end of each phase and stores the counts with the counter's frequency, so that a reader
//! turns them into durations ([`Phases::duration_ns`]) without knowing the machine.
//!
//! Layout (little-endian, [`PHASES_SIZE`] bytes): `u16` version ([`PHASES_VERSION`]), `u16`
//! size, `u16` number of phases ([`PHASE_COUNT`]), `u16` flags (zero), `u64` counter frequency in
//! Hz (0 when unknown), `u64` count when the notifier started, then per phase in [`Phase`] order:
//! `u64` start count, `u64` end count, `u32` callbacks run, `u32` callbacks that returned an
//! error. A phase that did not run has start and end zero.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use core::fmt;

use super::bytes::{
    LeReader,
    LeWriter, //
};

/// The phases of the panic path, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Stop every trace source (ETMs) and save its registers.
    StopSources = 0,
    /// Sample each CPU's program counter (CPU debug).
    SampleCpus = 1,
    /// Stop and drain the trace sinks (TMC).
    DrainSinks = 2,
    /// The other registrations.
    Other = 3,
    /// Write the commit record.
    Commit = 4,
}

/// Number of phases a [`Phases`] record holds.
pub const PHASE_COUNT: usize = 5;

impl Phase {
    /// Every phase, in the order they run.
    pub const ALL: [Self; PHASE_COUNT] = [
        Self::StopSources,
        Self::SampleCpus,
        Self::DrainSinks,
        Self::Other,
        Self::Commit,
    ];

    /// Returns a short lower-case name, used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::StopSources => "stop-sources",
            Self::SampleCpus => "sample-cpus",
            Self::DrainSinks => "drain-sinks",
            Self::Other => "other",
            Self::Commit => "commit",
        }
    }

    /// Returns the index of the phase in [`Phases::phases`].
    pub fn index(self) -> usize {
        // CAST: the discriminants are 0..PHASE_COUNT.
        self as usize
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Version of the [`Phases`] payload layout.
pub const PHASES_VERSION: u16 = 1;

/// Size in bytes of an encoded [`Phases`] payload.
pub const PHASES_SIZE: usize = 24 + PHASE_COUNT * 24;

/// The counts of one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTime {
    /// Counter value when the phase started (0: it did not run).
    pub start: u64,
    /// Counter value when it ended.
    pub end: u64,
    /// Callbacks it ran.
    pub callbacks: u32,
    /// Callbacks that returned an error.
    pub errors: u32,
}

impl PhaseTime {
    /// Returns whether the phase ran.
    pub fn ran(&self) -> bool {
        self.start != 0 || self.end != 0
    }
}

/// The payload of the phase times record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// Frequency of the counter in Hz; 0 when unknown.
    pub frequency: u64,
    /// Counter value when the panic notifier started.
    pub entry: u64,
    /// Each phase, indexed by [`Phase::index`].
    pub phases: [PhaseTime; PHASE_COUNT],
}

/// Why a [`Phases`] payload could not be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhasesError {
    /// The buffer holds fewer than [`PHASES_SIZE`] bytes.
    TooShort(usize),
    /// The version is not [`PHASES_VERSION`].
    Version(u16),
    /// The size or phase count field is not this version's.
    Layout {
        /// The size field.
        size: u16,
        /// The phase count field.
        count: u16,
    },
    /// A phase ends before it starts, or starts before the notifier did; names the phase.
    Inconsistent(Phase),
}

impl fmt::Display for PhasesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort(n) => {
                write!(
                    f,
                    "phase times payload too short: {n} bytes, need {PHASES_SIZE}"
                )
            }
            Self::Version(v) => write!(f, "unknown phase times payload version {v}"),
            Self::Layout { size, count } => write!(
                f,
                "phase times payload of {size} bytes and {count} phases, \
                 expected {PHASES_SIZE} and {PHASE_COUNT}"
            ),
            Self::Inconsistent(p) => {
                write!(
                    f,
                    "phase times: phase {p} ends before it starts or before the notifier"
                )
            }
        }
    }
}

impl Phases {
    /// Returns the times of `phase`.
    pub fn get(&self, phase: Phase) -> &PhaseTime {
        // The index is in range by construction; `PhaseTime::default()` is never returned.
        &self.phases[phase.index()]
    }

    /// Returns the times of `phase` for writing.
    pub fn get_mut(&mut self, phase: Phase) -> &mut PhaseTime {
        &mut self.phases[phase.index()]
    }

    /// Returns how long `phase` took in nanoseconds; `None` when it did not run or the frequency
    /// is unknown.
    pub fn duration_ns(&self, phase: Phase) -> Option<u64> {
        let t = self.get(phase);
        if !t.ran() {
            return None;
        }
        self.ns(t.end.wrapping_sub(t.start))
    }

    /// Returns how long the panic path took from the notifier's start to the end of the last
    /// phase that ran, in nanoseconds; `None` when no phase ran or the frequency is unknown.
    pub fn total_ns(&self) -> Option<u64> {
        let end = self
            .phases
            .iter()
            .filter(|t| t.ran())
            .map(|t| t.end)
            .max()?;
        self.ns(end.wrapping_sub(self.entry))
    }

    fn ns(&self, ticks: u64) -> Option<u64> {
        // 64-bit arithmetic only (the kernel has no 128-bit division), exact for any counter
        // below 18 GHz: whole seconds, then the rest.
        let f = self.frequency;
        if f == 0 {
            return None;
        }
        let secs = (ticks / f).checked_mul(1_000_000_000)?;
        let rest = (ticks % f).checked_mul(1_000_000_000)? / f;
        secs.checked_add(rest)
    }

    /// Encodes the payload into `out`; returns its length, [`PHASES_SIZE`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, PhasesError> {
        if out.len() < PHASES_SIZE {
            return Err(PhasesError::TooShort(out.len()));
        }
        let mut w = LeWriter::new(out);
        w.u16(PHASES_VERSION);
        // CAST: both are small constants.
        w.u16(PHASES_SIZE as u16);
        w.u16(PHASE_COUNT as u16);
        w.u16(0);
        w.u64(self.frequency);
        w.u64(self.entry);
        for t in &self.phases {
            w.u64(t.start);
            w.u64(t.end);
            w.u32(t.callbacks);
            w.u32(t.errors);
        }
        Ok(PHASES_SIZE)
    }

    /// Decodes a payload (a record's `data[..length]`), checking every field.
    pub fn decode(bytes: &[u8]) -> Result<Self, PhasesError> {
        if bytes.len() < PHASES_SIZE {
            return Err(PhasesError::TooShort(bytes.len()));
        }
        let mut r = LeReader::new(bytes);
        let version = r.u16();
        if version != PHASES_VERSION {
            return Err(PhasesError::Version(version));
        }
        let size = r.u16();
        let count = r.u16();
        let _flags = r.u16();
        if usize::from(size) != PHASES_SIZE || usize::from(count) != PHASE_COUNT {
            return Err(PhasesError::Layout { size, count });
        }
        let mut p = Self {
            frequency: r.u64(),
            entry: r.u64(),
            ..Self::default()
        };
        for (t, phase) in p.phases.iter_mut().zip(Phase::ALL) {
            *t = PhaseTime {
                start: r.u64(),
                end: r.u64(),
                callbacks: r.u32(),
                errors: r.u32(),
            };
            if t.ran() && (t.end < t.start || t.start < p.entry) {
                return Err(PhasesError::Inconsistent(phase));
            }
        }
        Ok(p)
    }
}

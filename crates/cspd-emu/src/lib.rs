//! Emulated CoreSight components for a QEMU TCG plugin, and the trace of what the vCPUs execute.
//!
//! The components are the register-level models of `cspd-model` (written from the Arm documents:
//! TMC DDI 0461, ETMv4 IHI 0064, external debug DDI 0487 part H) placed behind a window of guest
//! physical memory ([`bus`]), with the identification registers and the side effects a driver sees
//! on silicon. The ETMs encode what each vCPU executes as ETMv4 instruction trace, the funnel and
//! the TMC's formatter frame it into the trace RAM (or, for a TMC in ETR configuration, [`etr`],
//! into a buffer in guest memory), and a ground truth of each vCPU's last branches is kept apart
//! from the encoder.
//!
//! Plain Rust with no I/O beyond the [`GuestMem`] trait, so that host tests drive it directly.

pub mod bus;

// Components (registers and their side effects).
pub mod cpu_debug;
pub mod etm;
pub mod etr;
pub mod funnel;
pub mod tmc;

// The trace of what the vCPUs execute.
pub mod a64;
pub mod encoder;
pub mod tracker;
pub mod truth;

// Configuration and the whole machine.
pub mod config;
mod emu;
pub mod instrumentation;

pub use bus::GuestMem;
pub use emu::{AccessCounts, Emu, EmuStats, COUNTED_CPUS};

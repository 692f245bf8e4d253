//! Register-level models of CoreSight components, written from the Arm documents.
//!
//! The model files live in the kernel overlay (`samples/rust/coresight_sim/`) because the QEMU
//! sim devices compile them too; they are plain `core` Rust and refer to the register-access
//! trait as `crate::access`.
#![no_std]

pub use cspd_hw::access;

#[path = "../../../samples/rust/coresight_sim/model_tmc.rs"]
pub mod tmc;

#[path = "../../../samples/rust/coresight_sim/model_etm4x.rs"]
pub mod etm4x;

#[path = "../../../samples/rust/coresight_sim/model_cpu_debug.rs"]
pub mod cpu_debug;

#[path = "../../../samples/rust/coresight_sim/etm4x_gen.rs"]
pub mod etm4x_gen;

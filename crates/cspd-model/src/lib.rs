//! Register-level models of CoreSight components, written from the Arm documents.
//!
//! The model files are the KUnit tests' fixtures and live next to them
//! (`drivers/hwtracing/coresight/rust/kunit/model_*.rs`), so the kernel and the host run the
//! same models; they are plain `core` Rust and refer to the register-access trait as
//! `crate::access`. The trace generator (`etm4x_gen`) is host-only.
#![no_std]

pub use cspd_hw::access;

#[path = "../../../drivers/hwtracing/coresight/rust/kunit/model_tmc.rs"]
pub mod tmc;

#[path = "../../../drivers/hwtracing/coresight/rust/kunit/model_etm4x.rs"]
pub mod etm4x;

#[path = "../../../drivers/hwtracing/coresight/rust/kunit/model_cpu_debug.rs"]
pub mod cpu_debug;

pub mod etm4x_gen;

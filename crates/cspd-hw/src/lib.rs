//! CoreSight hardware sequences, compiled from the same files as the kernel drivers.
//!
//! Each module is a file in the kernel overlay (`drivers/hwtracing/coresight/rust/`), written in
//! plain `core` Rust over [`access::CsAccess`]. The host builds them here so that tests and
//! benchmarks drive the exact code the kernel runs against the register-level models in
//! `cspd-model`.
#![no_std]

pub mod a64;

#[path = "../../../drivers/hwtracing/coresight/rust/common/access.rs"]
pub mod access;

#[path = "../../../drivers/hwtracing/coresight/rust/tmc/hw.rs"]
pub mod tmc;

#[path = "../../../drivers/hwtracing/coresight/rust/etm4x/hw.rs"]
pub mod etm4x;

#[path = "../../../drivers/hwtracing/coresight/rust/cpu_debug/hw.rs"]
pub mod cpu_debug;

//! Register-level models of CoreSight components, written from the Arm documents.
//!
//! The host tests run the drivers' hardware sequences (`crates/cspd-hw`, compiled from the
//! drivers' own files) against these models, and the QEMU plugin (`crates/cspd-emu`) puts them
//! behind its register window. They are plain `core` Rust over `kernel::coresight::access`
//! (from the host's `kernel` crate, `crates/kernel-host`); the kernel's KUnit tests use small
//! scripted devices of their own instead. The trace generator (`etm4x_gen`) is host-only too.
#![no_std]

pub use kernel::coresight::access;

pub mod cpu_debug;
pub mod etm4x;
pub mod tmc;

pub mod etm4x_gen;

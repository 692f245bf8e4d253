//! The coresight-panic-dump format (the dump ABI), for the host tools.
//!
//! This is the kernel crate's `kernel::coresight::panic_dump::format`
//! (`rust/kernel/coresight/panic_dump/format.rs` and `format/`), the same files the kernel
//! compiles, built here through the host's `kernel` crate (`crates/kernel-host`): the format
//! computes its CRC with `kernel::crc`, which the host crate provides, and the shared hardware
//! sequences reach the format at its kernel path, so the files are compiled once, there, and
//! re-exported under this name for `csdump` and the tests.
#![no_std]

pub use kernel::coresight::panic_dump::format::*;

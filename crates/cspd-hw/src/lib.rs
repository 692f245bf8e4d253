//! CoreSight hardware sequences, compiled from the same files as the kernel drivers.
//!
//! Each device's `regs.rs` (its registers, declared with `register!`) and `hw.rs` (its hardware
//! sequences, generic over [`access::CsAccess`]) are files of its kernel driver folder
//! (`drivers/hwtracing/coresight/rust/<device>/`), included here with one path per device. They
//! use only what the host's `kernel` crate (`crates/kernel-host`) provides, and refer to each
//! other as `super::regs`. The tests and benchmarks drive the exact code the kernel runs against
//! the register-level models of `cspd-model`. Each module also re-exports the format's payload of
//! its device (`kernel::coresight::panic_dump::format::<device>`), which the sequence writes.
#![no_std]

pub mod a64;

pub use kernel::coresight::access;
pub use kernel::io::register::{Array, Register};

/// The TMC (ETB/ETF/ETR) driver's registers and sequences.
#[path = "../../../drivers/hwtracing/coresight/rust/tmc"]
pub mod tmc {
    pub mod etr;
    pub mod hw;
    pub mod regs;

    pub use self::hw::*;
    pub use kernel::coresight::panic_dump::format::tmc::*;
}

/// The ETMv4 driver's registers and sequences.
#[path = "../../../drivers/hwtracing/coresight/rust/etm4x"]
pub mod etm4x {
    pub mod hw;
    pub mod regs;

    pub use self::hw::*;
    pub use kernel::coresight::panic_dump::format::etm4x::*;
}

/// The CPU debug driver's registers and sequences.
#[path = "../../../drivers/hwtracing/coresight/rust/cpu_debug"]
pub mod cpu_debug {
    pub mod hw;
    pub mod regs;

    pub use self::hw::*;
    pub use kernel::coresight::panic_dump::format::cpu_debug::*;
}

//! The host's `kernel` crate: the part of the Linux kernel crate's API that this project's shared
//! kernel files use, written for the host, so that those files compile unchanged in both places.
//!
//! # What is shared, and the rule
//!
//! A *shared unit* is a kernel file of this repository that the host crates compile too:
//!
//! - the dump format, `kernel::coresight::panic_dump::format`
//!   (`rust/kernel/coresight/panic_dump/format.rs` and `format/`), and the register-access trait,
//!   `kernel::coresight::access` (`rust/kernel/coresight/access.rs`): files of the kernel crate,
//!   included here at the same module paths;
//! - each device's registers and hardware sequence (`drivers/hwtracing/coresight/rust/<device>/`
//!   `regs.rs` and `hw.rs`, compiled by `cspd-hw`).
//!
//! The register-level models (`crates/cspd-model`) are host code; they use the access trait from
//! here.
//!
//! A shared file uses only `core`, the siblings of its own folder (through `super::`), and these
//! items of `kernel`: [`register!`] (fixed registers and register arrays), [`num::Bounded`],
//! [`io::IoLoc`] and [`io::Region`], [`crc::crc32_le`], [`coresight::access`] and
//! [`coresight::panic_dump::format`]. Every shared file lists what it imports at its top. The rule
//! is enforced by compiling each shared file on both sides: `cargo test`/`cargo clippy` here and
//! the kernel builds of `make check` (a file that uses anything else fails one of the two).
//!
//! Everything here is written from the kernel crate's documented behaviour, not copied from it.
#![no_std]
#![warn(missing_docs)]

extern crate self as kernel;

#[doc(hidden)]
pub mod bitfield;
pub mod crc;
pub mod io;
pub mod num;

/// Helpers the macros expand to.
#[doc(hidden)]
pub mod macros {
    pub use paste::paste;
}

/// The shared files of `rust/kernel/coresight/` (one path per shared unit).
#[path = "../../../rust/kernel/coresight"]
mod coresight_files {
    pub mod access;
}

/// The shared files of `rust/kernel/coresight/panic_dump/`.
#[path = "../../../rust/kernel/coresight/panic_dump"]
mod panic_dump_files {
    pub mod format;
}

/// CoreSight: what the kernel crate's `kernel::coresight` shares with the host.
pub mod coresight {
    pub use crate::coresight_files::access;

    /// The panic dump: its format.
    pub mod panic_dump {
        pub use crate::panic_dump_files::format;
    }
}

//! Register-level models of CoreSight components, written from the Arm documents.
//!
//! Each model is the KUnit fixture of its driver (`drivers/hwtracing/coresight/rust/<device>/
//! model.rs`), included here with one path per device, so the kernel and the host run the same
//! models. They are plain `core` Rust over `kernel::coresight::access` (from the host's `kernel`
//! crate, `crates/kernel-host`). The trace generator (`etm4x_gen`) is host-only.
#![no_std]

pub use kernel::coresight::access;

#[path = "../../../drivers/hwtracing/coresight/rust/etm4x"]
mod etm4x_files {
    pub mod model;
}

#[path = "../../../drivers/hwtracing/coresight/rust/cpu_debug"]
mod cpu_debug_files {
    pub mod model;
}

pub use cpu_debug_files::model as cpu_debug;
pub use etm4x_files::model as etm4x;
pub mod tmc;

pub mod etm4x_gen;

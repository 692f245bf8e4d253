//! The dump container format, compiled from the same file as the kernel core.
#![no_std]
#![warn(missing_docs)]

#[path = "../../../drivers/hwtracing/coresight/rust/panic_dump/format.rs"]
mod format;

pub use format::*;

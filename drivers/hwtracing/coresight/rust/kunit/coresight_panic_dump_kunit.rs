// SPDX-License-Identifier: GPL-2.0

//! KUnit tests of the CoreSight panic dump code, compiled the way the kernel compiles it.
//!
//! The container format of the panic-dump core and the hardware sequences of the Rust TMC, ETMv4
//! and CPU debug drivers are plain `core` Rust. The host crates test them on the host; these
//! suites run the same files in the kernel (kernel target, `no_std`, the kernel's `core` and
//! `alloc`), included here the way the drivers include them.
//!
//! The sequences run against the register-level models of the components, which are test
//! fixtures: they live next to this file (`model_*.rs`) and are compiled into this test module
//! only, never into a driver. The host crate `cspd-model` compiles the same files, for the host
//! tests and the QEMU plugin's emulated components.
//!
//! Run them with `scripts/kunit.sh` (kunit.py under QEMU), or load the module built with
//! `CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST=m`.

use kernel::prelude::*;

#[path = "../common/access.rs"]
pub mod access;
#[path = "../cpu_debug/hw.rs"]
pub mod cpu_debug_hw;
#[path = "../etm4x/hw.rs"]
pub mod etm4x_hw;
#[path = "../panic_dump/format.rs"]
pub mod format;
pub mod model_cpu_debug;
pub mod model_etm4x;
pub mod model_tmc;
#[path = "../tmc/hw.rs"]
pub mod tmc_hw;

mod cpu_debug_test;
mod etm4x_test;
mod format_test;
mod tmc_test;

module! {
    type: CoresightPanicDumpKunit,
    name: "coresight_panic_dump_kunit",
    authors: ["coresight-panic-dump developers"],
    description: "KUnit tests of the CoreSight panic dump code",
    license: "GPL",
}

/// The module; the suites are registered with KUnit, which runs them.
struct CoresightPanicDumpKunit;

impl kernel::Module for CoresightPanicDumpKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}

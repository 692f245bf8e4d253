// SPDX-License-Identifier: GPL-2.0

//! Arm CoreSight CPU debug module driver.
//!
//! Each CPU's external debug interface (ARMv8-A, DDI 0487 part H) samples the CPU's program
//! counter in `EDPCSR`. At panic this driver, in the panic dump's "sample CPUs" phase, reads every
//! CPU's sample, prints it the way the C `coresight-cpu-debug` driver does, and saves the raw
//! registers, the calibrated PC and the decoded fields in the dump. A CPU it cannot sample gets a
//! record saying why; none is skipped silently. The phase runs after every trace source has
//! stopped, so nothing it does is traced, and within one time budget for all CPUs (`budget_ms`,
//! default 50): each CPU may wait for its core to power up for its share of what is left, and a
//! CPU the budget does not reach is recorded as not reached.
//!
//! Sampling is off until enabled: `debug=1` or `enable=1` at load,
//! `coresight_cpu_debug.enable=1` on the command line,
//! `CONFIG_CORESIGHT_CPU_DEBUG_DEFAULT_ON`, or `/sys/kernel/debug/coresight_cpu_debug/enable`.

use kernel::prelude::*;

mod driver;
pub mod hw;
// `register!` documents each register and field, not the mask, shift and range constants it
// generates for them.
#[expect(missing_docs)]
pub mod regs;
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST)]
mod tests;

module! {
    type: driver::CpuDebugModule,
    name: "coresight_cpu_debug",
    authors: ["coresight-panic-dump developers"],
    description: "Arm CoreSight CPU debug module driver",
    license: "GPL",
    params: {
        debug: bool {
            default: false,
            description: "Sample every CPU's PC at panic (same as enable)",
        },
        enable: bool {
            default: false,
            description: "Sample every CPU's PC at panic",
        },
        budget_ms: u32 {
            default: 50,
            description: "Time budget of the whole CPU debug phase at panic, in ms (1..=10000)",
        },
    },
}

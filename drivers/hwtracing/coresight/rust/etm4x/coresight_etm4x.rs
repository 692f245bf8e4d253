// SPDX-License-Identifier: GPL-2.0

//! Arm CoreSight ETMv4 trace unit driver.
//!
//! Each CPU's ETMv4 trace unit (Arm IHI 0064) is registered with the CoreSight core as a per-CPU
//! source: `echo 1 > /sys/bus/coresight/devices/etmN/enable_source` programs it (all
//! instructions at Non-secure EL0/EL1/EL2, context IDs, the trace ID the core assigned to the
//! path) and starts it, into the sink enabled with `enable_sink`. At panic, in the panic dump's
//! "stop sources" phase, each unit is stopped so that the sink receives its last packets, and the
//! registers a decoder needs (`TRCCONFIGR`, `TRCTRACEIDR`, `TRCIDR0`..`TRCIDR13`,
//! `TRCAUTHSTATUS`, `TRCDEVARCH`) are read back from it into the dump, with the CPU number. The OS
//! lock and the software lock are put back as they were found.
//!
//! Like the C driver, enable and disable run on the unit's own CPU (memory-mapped units sit in
//! their CPU's power domain; system-register units only answer there). At panic the panicking
//! CPU stops every memory-mapped unit itself; a system-register unit of another CPU is recorded
//! as unreachable.
//!
//! Memory-mapped units bind through the AMBA bus (`arm,coresight-etm4x` primecells, matched by
//! their peripheral IDs). Units reached through system registers (`arm,coresight-etm4x-sysreg`,
//! ACPI `ARMHC500`) bind through the platform bus and are operated with `MRS`/`MSR` on their CPU.
//! That path is compiled, and its register sequences are tested against the host models, but its
//! accesses need silicon that implements the trace system registers: the test bench emulates
//! memory-mapped units only.
//!
//! In perf mode each unit is enabled, paused, resumed and disabled on its own CPU from perf's
//! callbacks, with the `cs_etm` format's options and perf's address filters
//! ([`hw::TraceConfig::for_perf`]).

use kernel::{
    amba,
    c_str,
    cpuhp,
    driver::Registration,
    platform,
    prelude::*, //
};

mod driver;
pub mod hw;
// `register!` documents each register and field, not the mask, shift and range constants it
// generates for them.
#[expect(missing_docs)]
pub mod regs;
mod sysreg;
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST)]
mod tests;

module! {
    type: Etm4xModule,
    name: "coresight_etm4x",
    authors: ["coresight-panic-dump developers"],
    description: "Arm CoreSight ETMv4 trace unit driver with panic dump",
    license: "GPL",
    params: {
        timestamps: bool {
            default: false,
            description: "Request global timestamps in the trace",
        },
        pm_save_enable: i32 {
            default: 0,
            description: "Save/restore state on power down: 1 = never, 2 = self-hosted",
        },
    },
}

/// Name the C driver has.
const DRIVER_NAME: &CStr = c_str!("coresight-etm4x");

/// The module: the CPU hotplug state that probes the units whose CPU was offline, and the
/// registrations of the memory-mapped units' AMBA driver and of the system-register units'
/// platform driver. Dropped in that order: no probe from the hotplug state once the drivers go,
/// the units still waiting for their CPU forgotten last.
struct Etm4xModule {
    _online: cpuhp::Registration<driver::ProbeWhenOnline>,
    _amba: Pin<KBox<Registration<amba::Adapter<driver::Etm4xAmba>>>>,
    _sysreg: Pin<KBox<Registration<platform::Adapter<sysreg::Etm4xSysReg>>>>,
    _waiting: driver::Waiting,
}

impl kernel::Module for Etm4xModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let pm = module_parameters::pm_save_enable.value();
        if !(driver::PM_SAVE_FIRMWARE..=driver::PM_SAVE_SELF_HOSTED).contains(&pm) {
            pr_err!("pm_save_enable={pm}: 0 (as the firmware says), 1 (never) or 2 (always)\n");
            return Err(EINVAL);
        }
        let waiting = driver::Waiting::init();
        Ok(Self {
            _online: cpuhp::Registration::new(c_str!("hwtracing/coresight_etm4x:online"))?,
            _amba: KBox::pin_init(Registration::new(DRIVER_NAME, module), GFP_KERNEL)?,
            _sysreg: KBox::pin_init(
                Registration::new(c_str!("coresight-etm4x-sysreg"), module),
                GFP_KERNEL,
            )?,
            _waiting: waiting,
        })
    }
}

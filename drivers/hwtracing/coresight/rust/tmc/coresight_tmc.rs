// SPDX-License-Identifier: GPL-2.0

//! Arm CoreSight Trace Memory Controller driver, ETB, ETF and ETR configurations.
//!
//! An ETB's or ETF's trace RAM holds the last few kilobytes of trace; an ETR writes trace into a
//! buffer in system memory. This driver registers each TMC with the CoreSight core as a sink, so
//! that `echo 1 > /sys/bus/coresight/devices/<name>/enable_sink` selects it and enabling a source
//! starts capture in Circular Buffer mode. At panic, in the panic dump's "drain sinks" phase, it
//! flushes and stops the TMC and copies an ETB's or ETF's whole RAM into its dump slot
//! ([`hw::panic_drain`]); an ETR's record says where its buffer is, and holds a copy of it
//! unless it is the node's `tracedata` reserved region ([`etr`]). No allocation, no sleeping,
//! every poll bounded, and a TMC that stops answering leaves a record that says where it stopped.
//!
//! Every configuration is also a perf sink: the ETB/ETF hands its RAM to perf's AUX buffer
//! ([`hw::perf_drain`]), the ETR each session's flat DMA buffer ([`etr::perf_drain`]). The
//! device file (`/dev/tmc_etf0`, `/dev/tmc_etr0`) gives a sysfs session's trace as the C driver's
//! does.

use kernel::prelude::*;

mod driver;
pub mod etr;
mod etr_driver;
pub mod hw;
mod probe;
// `register!` documents each register and field, not the mask, shift and range constants it
// generates for them.
#[expect(missing_docs)]
pub mod regs;
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST)]
mod tests;

module! {
    type: probe::TmcModule,
    name: "coresight_tmc",
    authors: ["coresight-panic-dump developers"],
    description: "Arm CoreSight TMC-ETB/ETF/ETR driver with panic dump",
    license: "GPL",
}

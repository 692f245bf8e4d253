// SPDX-License-Identifier: GPL-2.0

//! CoreSight: Arm's debug and trace components.
//!
//! C header: [`include/linux/coresight.h`](srctree/include/linux/coresight.h)

use crate::{
    device::Device,
    prelude::*, //
};

pub mod panic_dump;

/// Returns the CPU a CoreSight component belongs to, from its firmware description (the `cpu`
/// phandle in the device tree).
///
/// Returns [`ENODEV`] when the component is not tied to a CPU.
pub fn get_cpu(dev: &Device) -> Result<u32> {
    // SAFETY: `dev.as_raw()` is a valid `struct device` for the duration of the call.
    let cpu = unsafe { bindings::coresight_get_cpu(dev.as_raw()) };
    u32::try_from(cpu).map_err(|_| ENODEV)
}

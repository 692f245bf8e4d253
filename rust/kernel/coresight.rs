// SPDX-License-Identifier: GPL-2.0

//! CoreSight: Arm's debug and trace components.
//!
//! C header: [`include/linux/coresight.h`](srctree/include/linux/coresight.h)

pub mod panic_dump;

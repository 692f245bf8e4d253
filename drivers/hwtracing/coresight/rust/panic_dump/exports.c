// SPDX-License-Identifier: GPL-2.0
/*
 * Exports of the CoreSight panic dump core, whose functions are written in Rust
 * (panic_dump.rs) with the C prototypes of <linux/coresight-panic-dump.h>.
 */
#include <linux/coresight-panic-dump.h>
#include <linux/export.h>

EXPORT_SYMBOL_GPL(coresight_dump_add);
EXPORT_SYMBOL_GPL(coresight_dump_del);

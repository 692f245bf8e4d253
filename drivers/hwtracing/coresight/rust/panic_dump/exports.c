// SPDX-License-Identifier: GPL-2.0
/*
 * The exported C API of the CoreSight panic dump core (<linux/coresight-panic-dump.h>), over its
 * entry points written in Rust (panic_dump.rs).
 */
#include <linux/export.h>

#include "panic_dump.h"

struct coresight_dump_entry *coresight_dump_add(const struct coresight_dump_desc *desc)
{
	return cspd_dump_add(desc);
}
EXPORT_SYMBOL_GPL(coresight_dump_add);

void coresight_dump_del(struct coresight_dump_entry *entry)
{
	cspd_dump_del(entry);
}
EXPORT_SYMBOL_GPL(coresight_dump_del);

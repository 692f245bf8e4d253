/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The CoreSight panic dump core's entry points written in Rust (panic_dump.rs); exports.c wraps
 * them in the exported API of <linux/coresight-panic-dump.h>.
 */
#ifndef _CORESIGHT_PANIC_DUMP_INTERNAL_H
#define _CORESIGHT_PANIC_DUMP_INTERNAL_H

#include <linux/coresight-panic-dump.h>

struct coresight_dump_entry *cspd_dump_add(const struct coresight_dump_desc *desc);
void cspd_dump_del(struct coresight_dump_entry *entry);
int cspd_dump_metadata_changed(void);

#endif /* _CORESIGHT_PANIC_DUMP_INTERNAL_H */

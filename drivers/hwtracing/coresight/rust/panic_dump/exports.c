// SPDX-License-Identifier: GPL-2.0
/*
 * The exported C API of the CoreSight panic dump core (<linux/coresight-panic-dump.h>), over its
 * entry points written in Rust (panic_dump.rs), and the core's stop_at parameter: the crash
 * path's first functions, where trace sources stop tracing in hardware.
 *
 * stop_at is resolved here, in C, because only code built into the kernel may look a function
 * up by name (kallsyms_lookup_name() is not exported): the drivers, which may be modules, get
 * the addresses through coresight_dump_stop_addrs().
 */
#include <linux/export.h>
#include <linux/kallsyms.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/sysfs.h>

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

int coresight_dump_metadata_changed(void)
{
	return cspd_dump_metadata_changed();
}
EXPORT_SYMBOL_GPL(coresight_dump_metadata_changed);

/*
 * The crash path's first printing functions: panic(), and for an oops die() and, before it,
 * arm64's die_kernel_fault(), which prints the fault before it calls die().
 */
#define STOP_AT_DEFAULT "panic,die,die_kernel_fault"
#define STOP_AT_LEN 256

static DEFINE_MUTEX(stop_at_lock);
/* The names in effect, comma-separated, and their entry addresses; under stop_at_lock. */
static char stop_at_names[STOP_AT_LEN] = STOP_AT_DEFAULT;
static unsigned long stop_at_addrs[CORESIGHT_DUMP_MAX_STOP_ADDRS];
static unsigned int stop_at_nr;
/* The addresses are those of stop_at_names (the default is resolved when first asked for). */
static bool stop_at_resolved;

/*
 * Resolves a comma-separated list of function names into names (the list as kept) and addrs.
 * An unknown name, or one that is not kernel text, fails with -EINVAL and a message that names
 * it, unless skip_unknown (the default list, whose functions a kernel may lack): then it is left
 * out with a warning.
 */
static int stop_at_parse(const char *val, char *names, unsigned long *addrs, unsigned int *nr,
			 bool skip_unknown)
{
	char buf[STOP_AT_LEN], *cur, *name;
	unsigned int n = 0, i;

	if (strscpy(buf, val) < 0) {
		pr_err("stop_at: the list is longer than %zu bytes\n", sizeof(buf) - 1);
		return -E2BIG;
	}
	names[0] = '\0';
	cur = strim(buf);
	while ((name = strsep(&cur, ",")) != NULL) {
		unsigned long addr;

		name = strim(name);
		if (!*name)
			continue;
		addr = kallsyms_lookup_name(name);
		if (!addr || !core_kernel_text(addr)) {
			if (skip_unknown) {
				pr_warn("stop_at: no function %s in this kernel; left out\n", name);
				continue;
			}
			pr_err("stop_at: %s is not a function of this kernel\n", name);
			return -EINVAL;
		}
		for (i = 0; i < n && addrs[i] != addr; i++)
			;
		if (i < n)
			continue;
		if (n == CORESIGHT_DUMP_MAX_STOP_ADDRS) {
			pr_err("stop_at: more than %d functions\n", CORESIGHT_DUMP_MAX_STOP_ADDRS);
			return -E2BIG;
		}
		addrs[n++] = addr;
		if (names[0])
			strlcat(names, ",", STOP_AT_LEN);
		strlcat(names, name, STOP_AT_LEN);
	}
	*nr = n;
	return 0;
}

/* Resolves the default list if nothing was set; under stop_at_lock. */
static void stop_at_resolve_default(void)
{
	char names[STOP_AT_LEN];

	if (stop_at_resolved)
		return;
	if (stop_at_parse(STOP_AT_DEFAULT, names, stop_at_addrs, &stop_at_nr, true))
		stop_at_nr = 0;
	else
		strscpy(stop_at_names, names);
	stop_at_resolved = true;
}

static int stop_at_set(const char *val, const struct kernel_param *kp)
{
	char names[STOP_AT_LEN];
	unsigned long addrs[CORESIGHT_DUMP_MAX_STOP_ADDRS];
	unsigned int nr;
	int ret;

	ret = stop_at_parse(val, names, addrs, &nr, false);
	if (ret)
		return ret;
	mutex_lock(&stop_at_lock);
	strscpy(stop_at_names, names);
	memcpy(stop_at_addrs, addrs, sizeof(addrs));
	stop_at_nr = nr;
	stop_at_resolved = true;
	mutex_unlock(&stop_at_lock);
	if (nr)
		pr_info("stop_at: trace sources enabled from now on stop at %s\n", names);
	else
		pr_info("stop_at: empty, trace sources enabled from now on trace to the end\n");
	return 0;
}

static int stop_at_get(char *buf, const struct kernel_param *kp)
{
	int n;

	mutex_lock(&stop_at_lock);
	stop_at_resolve_default();
	n = sysfs_emit(buf, "%s\n", stop_at_names);
	mutex_unlock(&stop_at_lock);
	return n;
}

static const struct kernel_param_ops stop_at_ops = {
	.set = stop_at_set,
	.get = stop_at_get,
};

module_param_cb(stop_at, &stop_at_ops, NULL, 0644);
MODULE_PARM_DESC(stop_at,
		 "Functions (comma-separated) whose entry stops the trace sources in hardware (default "
		 STOP_AT_DEFAULT "; empty: off)");

int coresight_dump_stop_addrs(unsigned long *addrs, unsigned int max)
{
	unsigned int n;

	mutex_lock(&stop_at_lock);
	stop_at_resolve_default();
	n = min(max, stop_at_nr);
	memcpy(addrs, stop_at_addrs, n * sizeof(*addrs));
	mutex_unlock(&stop_at_lock);
	return n;
}
EXPORT_SYMBOL_GPL(coresight_dump_stop_addrs);

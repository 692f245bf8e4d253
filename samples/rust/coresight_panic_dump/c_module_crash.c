// SPDX-License-Identifier: GPL-2.0
/*
 * A crash inside a loadable module, on demand, for the project's QEMU tests of the panic dump:
 * most crashes a BSP engineer chases happen in a driver built as a module, whose functions are
 * in no System.map. Writing "oops" to /sys/module/c_module_crash/parameters/crash calls two
 * functions of this module, the second of which stores to NULL with the module's spinlock held,
 * as a driver crashes inside its lock: an oops in process context (not preemptible, so the crash
 * path runs through to die() on the same CPU), which panics with panic_on_oops=1.
 */
#include <linux/compiler.h>
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/spinlock.h>
#include <linux/string.h>

static int *c_module_crash_target;
static DEFINE_SPINLOCK(c_module_crash_lock);

static noinline void c_module_crash_store(int value)
{
	pr_emerg("c_module_crash: a store to NULL in module code\n");
	spin_lock(&c_module_crash_lock);
	WRITE_ONCE(*c_module_crash_target, value);
	spin_unlock(&c_module_crash_lock);
}

static noinline int c_module_crash_oops(int value)
{
	c_module_crash_store(value + 1);
	return 0;
}

static int c_module_crash_set(const char *val, const struct kernel_param *kp)
{
	if (sysfs_streq(val, "oops"))
		return c_module_crash_oops(0);
	return -EINVAL;
}

static const struct kernel_param_ops c_module_crash_ops = {
	.set = c_module_crash_set,
};

module_param_cb(crash, &c_module_crash_ops, NULL, 0200);
MODULE_PARM_DESC(crash, "oops: a store to NULL in this module's code");

MODULE_DESCRIPTION("A crash inside a loadable module, for the panic dump's tests");
MODULE_LICENSE("GPL");

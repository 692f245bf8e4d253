// SPDX-License-Identifier: GPL-2.0
/*
 * Crashes as users' kernels crash, on demand, for the project's QEMU tests of the panic dump.
 * Built in, so that its functions are named in System.map, and triggered by writing to its
 * parameter /sys/module/c_crash/parameters/crash:
 *
 *   irq-oops   a store to NULL in a timer callback: an oops in interrupt (softirq) context,
 *              which panics with panic_on_oops=1 ("Fatal exception in interrupt");
 *   two-cpus   CPUs 0 and 1 panic at once: a kthread bound to each, they meet with interrupts
 *              off, then both call panic(); the one that loses panic()'s race stops itself there.
 */
#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/init.h>
#include <linux/irqflags.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/panic.h>
#include <linux/printk.h>
#include <linux/processor.h>
#include <linux/string.h>
#include <linux/timer.h>

static struct timer_list c_crash_timer;
static atomic_t c_crash_met = ATOMIC_INIT(0);

static noinline void c_crash_irq_oops(struct timer_list *t)
{
	pr_emerg("c_crash: a store to NULL in a timer callback\n");
	WRITE_ONCE(*(int *)NULL, 0x63737064);
}

static noinline int c_crash_panic_thread(void *arg)
{
	/*
	 * With interrupts off, the first CPU's stop IPI cannot catch the other one before it calls
	 * panic() itself: both crash.
	 */
	local_irq_disable();
	atomic_inc(&c_crash_met);
	while (atomic_read(&c_crash_met) < 2)
		cpu_relax();
	panic("c_crash: CPUs 0 and 1 panic at once");
	return 0;
}

static int c_crash_two_cpus(void)
{
	struct task_struct *t[2];
	unsigned int cpu;

	if (!cpu_online(0) || !cpu_online(1))
		return -ENODEV;
	for (cpu = 0; cpu < 2; cpu++) {
		t[cpu] = kthread_create_on_cpu(c_crash_panic_thread, NULL, cpu, "c_crash/%u");
		if (IS_ERR(t[cpu]))
			return PTR_ERR(t[cpu]);
	}
	pr_emerg("c_crash: CPUs 0 and 1 panic at once\n");
	wake_up_process(t[0]);
	wake_up_process(t[1]);
	return 0;
}

static int c_crash_set(const char *val, const struct kernel_param *kp)
{
	if (sysfs_streq(val, "irq-oops")) {
		timer_setup(&c_crash_timer, c_crash_irq_oops, 0);
		mod_timer(&c_crash_timer, jiffies + 1);
		return 0;
	}
	if (sysfs_streq(val, "two-cpus"))
		return c_crash_two_cpus();
	return -EINVAL;
}

static const struct kernel_param_ops c_crash_ops = {
	.set = c_crash_set,
};

module_param_cb(crash, &c_crash_ops, NULL, 0200);
MODULE_PARM_DESC(crash, "irq-oops: an oops in a timer callback; two-cpus: CPUs 0 and 1 panic at once");

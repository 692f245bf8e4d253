// SPDX-License-Identifier: GPL-2.0
/*
 * A CPU low-power state's notifications on demand, for the project's QEMU tests of the panic
 * dump: writing a CPU number to /sys/module/c_cpu_pm/parameters/cycle runs cpu_pm_enter() and
 * cpu_pm_exit() on that CPU with interrupts off, as cpuidle does around an idle state that loses
 * the CPU's context. QEMU's virt machine has no such state (its PSCI CPU_SUSPEND is a WFI), so
 * without this nothing would ever call the CPU PM notifiers there, among them the CoreSight
 * core's, which saves and restores the CPU's trace source. The CPU does not leave: the
 * notifiers run back to back.
 */
#include <linux/cpu_pm.h>
#include <linux/cpumask.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/smp.h>

/* On the CPU, interrupts off (a cross-CPU call): enter, then exit unless the enter failed. */
static void c_cpu_pm_cycle(void *result)
{
	int ret = cpu_pm_enter();

	if (!ret)
		ret = cpu_pm_exit();
	*(int *)result = ret;
}

static int c_cpu_pm_set(const char *val, const struct kernel_param *kp)
{
	unsigned int cpu;
	int result = 0;
	int ret;

	ret = kstrtouint(val, 0, &cpu);
	if (ret)
		return ret;
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	ret = smp_call_function_single(cpu, c_cpu_pm_cycle, &result, 1);
	if (ret)
		return ret;
	pr_info("c_cpu_pm: CPU%u: CPU PM enter and exit: %d\n", cpu, result);
	return result;
}

static const struct kernel_param_ops c_cpu_pm_ops = {
	.set = c_cpu_pm_set,
};

module_param_cb(cycle, &c_cpu_pm_ops, NULL, 0200);
MODULE_PARM_DESC(cycle, "a CPU number: run its CPU PM notifiers, enter then exit");

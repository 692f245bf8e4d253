// SPDX-License-Identifier: GPL-2.0

/* The kernel crate's CoreSight abstractions are built with the panic dump core only. */
#if IS_ENABLED(CONFIG_CORESIGHT_PANIC_DUMP)
#include <linux/coresight.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/of.h>
#include <linux/perf_event.h>
#include <linux/pid.h>
#include "../../drivers/hwtracing/coresight/coresight-etm-perf.h"
#ifdef CONFIG_ARM64
#include <asm/barrier.h>
#include <asm/sysreg.h>
#include <asm/virt.h>
#endif

__rust_helper bool rust_helper_cspd_kernel_in_hyp_mode(void)
{
#ifdef CONFIG_ARM64
	return is_kernel_in_hyp_mode();
#else
	return false;
#endif
}

/*
 * The hardware ID (MPIDR affinity on arm64) of the CPU a component's `cpu` phandle names, from the
 * device tree whether or not the CPU is possible here; ~0 when there is none.
 */
__rust_helper u64 rust_helper_cspd_cpu_hwid(struct device *dev)
{
	struct device_node *np;
	u64 hwid;

	if (!dev->of_node)
		return ~0ULL;
	np = of_parse_phandle(dev->of_node, "cpu", 0);
	if (!np)
		return ~0ULL;
	hwid = of_get_cpu_hwid(np, 0);
	of_node_put(np);
	return hwid;
}

__rust_helper bool rust_helper_cspd_cpu_online(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_online(cpu);
}

__rust_helper enum cs_mode rust_helper_coresight_get_mode(struct coresight_device *csdev)
{
	return coresight_get_mode(csdev);
}

__rust_helper bool rust_helper_coresight_take_mode(struct coresight_device *csdev,
						   enum cs_mode new_mode)
{
	return coresight_take_mode(csdev, new_mode);
}

__rust_helper void rust_helper_coresight_set_mode(struct coresight_device *csdev,
						  enum cs_mode new_mode)
{
	coresight_set_mode(csdev, new_mode);
}

__rust_helper u64 rust_helper_cspd_read_id_aa64dfr0(void)
{
#ifdef CONFIG_ARM64
	return read_sysreg(id_aa64dfr0_el1);
#else
	return 0;
#endif
}

__rust_helper void rust_helper_cspd_write_trfcr(u64 val)
{
#ifdef CONFIG_ARM64
	write_sysreg_s(val, SYS_TRFCR_EL1);
	isb();
#endif
}

__rust_helper void rust_helper_cspd_trace_synchronize(void)
{
#ifdef CONFIG_ARM64
	dsb(sy);
	isb();
	tsb_csync();
#endif
}

__rust_helper void rust_helper_cspd_isb(void)
{
#ifdef CONFIG_ARM64
	isb();
#endif
}

/*
 * perf: what kernel::coresight::perf reads of an event and an AUX transaction. The filter types
 * are handed over as 1 (range), 2 (start), 3 (stop), 0 (anything else).
 */

__rust_helper u64 rust_helper_cspd_perf_event_config(struct perf_event *event, u32 n)
{
	switch (n) {
	case 0:
		return event->attr.config;
	case 1:
		return event->attr.config1;
	case 2:
		return event->attr.config2;
	case 3:
		return event->attr.config3;
	default:
		return 0;
	}
}

__rust_helper u32 rust_helper_cspd_perf_event_exclude(struct perf_event *event)
{
	return (event->attr.exclude_kernel ? 1 : 0) | (event->attr.exclude_user ? 2 : 0);
}

__rust_helper bool rust_helper_cspd_perf_event_active(struct perf_event *event)
{
	return !READ_ONCE(event->hw.state);
}

__rust_helper bool rust_helper_cspd_perf_event_aux_paused(struct perf_event *event)
{
	return !!READ_ONCE(event->hw.aux_paused);
}

__rust_helper int rust_helper_cspd_perf_event_owner_pid(struct perf_event *event)
{
	struct task_struct *owner = READ_ONCE(event->owner);

	/* An owner that exited is a tombstone, (void *)-1. */
	if (IS_ERR_OR_NULL(owner))
		return -1;
	return task_pid_nr(owner);
}

__rust_helper u32 rust_helper_cspd_etm_event_filters(struct perf_event *event, u64 *starts,
						     u64 *stops, u8 *types, u32 max,
						     bool *ssstatus)
{
	struct etm_filters *filters = event->hw.addr_filters;
	u32 i, n;

	*ssstatus = false;
	if (!filters)
		return 0;
	perf_event_addr_filters_sync(event);
	n = min_t(u32, filters->nr_filters, max);
	for (i = 0; i < n; i++) {
		starts[i] = filters->etm_filter[i].start_addr;
		stops[i] = filters->etm_filter[i].stop_addr;
		switch (filters->etm_filter[i].type) {
		case ETM_ADDR_TYPE_RANGE:
			types[i] = 1;
			break;
		case ETM_ADDR_TYPE_START:
			types[i] = 2;
			break;
		case ETM_ADDR_TYPE_STOP:
			types[i] = 3;
			break;
		default:
			types[i] = 0;
			break;
		}
	}
	*ssstatus = filters->ssstatus;
	return n;
}

__rust_helper void rust_helper_cspd_etm_event_set_ssstatus(struct perf_event *event, bool on)
{
	struct etm_filters *filters = event->hw.addr_filters;

	if (filters)
		filters->ssstatus = on;
}

__rust_helper void *rust_helper_cspd_etm_perf_sink_config(struct perf_output_handle *handle)
{
	return etm_perf_sink_config(handle);
}

__rust_helper unsigned long rust_helper_cspd_aux_head(struct perf_output_handle *handle)
{
	return handle->head;
}

__rust_helper unsigned long rust_helper_cspd_aux_size(struct perf_output_handle *handle)
{
	return handle->size;
}

__rust_helper void rust_helper_cspd_aux_advance_head(struct perf_output_handle *handle,
						     unsigned long bytes)
{
	handle->head += bytes;
}

__rust_helper struct perf_event *rust_helper_cspd_aux_event(struct perf_output_handle *handle)
{
	return READ_ONCE(handle->event);
}

__rust_helper struct perf_output_handle *rust_helper_cspd_path_handle(struct coresight_path *path)
{
	return path->handle;
}

__rust_helper int rust_helper_cspd_etm_perf_symlink(struct coresight_device *csdev, bool link)
{
	return etm_perf_symlink(csdev, link);
}

#endif /* CONFIG_CORESIGHT_PANIC_DUMP */

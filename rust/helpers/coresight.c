// SPDX-License-Identifier: GPL-2.0

#include <linux/coresight.h>

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

#ifdef CONFIG_CORESIGHT_RUST_SIM
#include <linux/cpuidle.h>
#include <linux/panic.h>
#include <linux/sched.h>
#include <asm/sections.h>

/* The kernel text, for model-backed trace units that trace real code. */
__rust_helper unsigned long rust_helper_cspd_kernel_text_start(void)
{
	return (unsigned long)_stext;
}

__rust_helper unsigned long rust_helper_cspd_kernel_text_end(void)
{
	return (unsigned long)_etext;
}

/* Where model-backed trace units start their paths. */
__rust_helper unsigned long rust_helper_cspd_sim_path_start(int which)
{
	switch (which) {
	case 0:
		return (unsigned long)panic;
	case 1:
		return (unsigned long)default_idle_call;
	default:
		return (unsigned long)schedule;
	}
}
#endif

// SPDX-License-Identifier: GPL-2.0

#include <linux/coresight.h>
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

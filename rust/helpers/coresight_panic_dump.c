// SPDX-License-Identifier: GPL-2.0

/* The kernel crate's CoreSight abstractions are built with the panic dump core only. */
#if IS_ENABLED(CONFIG_CORESIGHT_PANIC_DUMP)
/*
 * Wrappers of the inline functions and macros the project's kernel-crate abstractions call.
 * What is a real function or a variable is used from Rust directly.
 */

#include <linux/crash_dump.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/of.h>
#include <linux/panic_notifier.h>
#include <linux/timekeeping.h>
#include <linux/utsname.h>
#include <asm/sections.h>
#ifdef CONFIG_ARM64
#include <clocksource/arm_arch_timer.h>
#endif

__rust_helper phys_addr_t rust_helper_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

__rust_helper bool rust_helper_is_kdump_kernel(void)
{
	return is_kdump_kernel();
}

__rust_helper bool rust_helper_cspd_crash_kexec_post_notifiers(void)
{
	return READ_ONCE(crash_kexec_post_notifiers);
}

/* A free-running count for the panic path's phase times: the arm64 virtual counter. */
__rust_helper u64 rust_helper_cspd_counter_read(void)
{
#ifdef CONFIG_ARM64
	return arch_timer_read_counter();
#else
	return ktime_get_mono_fast_ns();
#endif
}

/* The frequency of rust_helper_cspd_counter_read() in Hz; 0 when unknown. */
__rust_helper u64 rust_helper_cspd_counter_frequency(void)
{
#ifdef CONFIG_ARM64
	return arch_timer_get_rate();
#else
	return NSEC_PER_SEC;
#endif
}

__rust_helper const char *rust_helper_cspd_uts_release(void)
{
	return init_utsname()->release;
}

__rust_helper unsigned long rust_helper_cspd_text_start(void)
{
	return (unsigned long)_text;
}

__rust_helper unsigned long rust_helper_cspd_kaslr_offset(void)
{
#ifdef CONFIG_ARM64
	return kaslr_offset();
#else
	return 0;
#endif
}

__rust_helper unsigned long rust_helper_cspd_page_offset(void)
{
	return PAGE_OFFSET;
}

__rust_helper phys_addr_t rust_helper_virt_to_phys(const void *address)
{
	return virt_to_phys(address);
}

__rust_helper struct device_node *rust_helper_of_parse_phandle(const struct device_node *np,
							       const char *phandle_name,
							       int index)
{
	return of_parse_phandle(np, phandle_name, index);
}

/* of_node_put() is a function only with CONFIG_OF_DYNAMIC, an empty inline without it. */
__rust_helper void rust_helper_cspd_of_node_put(struct device_node *np)
{
	of_node_put(np);
}

__rust_helper int rust_helper_dma_mapping_error(struct device *dev, dma_addr_t addr)
{
	return dma_mapping_error(dev, addr);
}

#endif /* CONFIG_CORESIGHT_PANIC_DUMP */

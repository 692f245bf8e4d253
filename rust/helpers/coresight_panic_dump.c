// SPDX-License-Identifier: GPL-2.0

#include <linux/buildid.h>
#include <linux/cacheflush.h>
#include <linux/kexec.h>
#include <linux/crash_dump.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/of.h>
#include <linux/panic_notifier.h>
#include <linux/timekeeping.h>
#include <linux/utsname.h>
#include <linux/vmcore_info.h>
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

__rust_helper bool rust_helper_cspd_crash_kernel_loaded(void)
{
	return kexec_crash_loaded();
}

/* vmcoreinfo_append_str() is variadic and built-in only: take one preformatted line. */
__rust_helper int rust_helper_cspd_vmcoreinfo_append(const char *line)
{
#ifdef CONFIG_VMCORE_INFO
	if (!vmcoreinfo_data)
		return -ENODEV;
	vmcoreinfo_append_str("%s", line);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * Rebuilds the vmcoreinfo ELF note from its data, as kernel/vmcore_info.c's static
 * update_vmcoreinfo_note() does (see kernel::vmcore_info::refresh_note for why).
 */
__rust_helper int rust_helper_cspd_vmcoreinfo_refresh_note(void)
{
#ifdef CONFIG_VMCORE_INFO
	u32 *buf;

	if (!vmcoreinfo_data || !vmcoreinfo_note)
		return -ENODEV;
	buf = append_elf_note(vmcoreinfo_note, VMCOREINFO_NOTE_NAME, 0, vmcoreinfo_data,
			      vmcoreinfo_size);
	final_note(buf);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
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

/* Cleans [addr, addr + len) of the data cache to the point of coherency. */
__rust_helper int rust_helper_cspd_dcache_clean_poc(void *addr, size_t len)
{
#ifdef CONFIG_ARM64
	dcache_clean_poc((unsigned long)addr, (unsigned long)addr + len);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

__rust_helper const char *rust_helper_cspd_uts_release(void)
{
	return init_utsname()->release;
}

__rust_helper const unsigned char *rust_helper_cspd_build_id(size_t *len)
{
#if IS_ENABLED(CONFIG_VMCORE_INFO) || IS_ENABLED(CONFIG_STACKTRACE_BUILD_ID)
	*len = BUILD_ID_SIZE_MAX;
	return vmlinux_build_id;
#else
	*len = 0;
	return NULL;
#endif
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

__rust_helper u64 rust_helper_cspd_memstart(void)
{
#ifdef CONFIG_ARM64
	return (u64)memstart_addr;
#else
	return 0;
#endif
}

__rust_helper u64 rust_helper_cspd_kimage_voffset(void)
{
#ifdef CONFIG_ARM64
	return kimage_voffset;
#else
	return 0;
#endif
}

__rust_helper phys_addr_t rust_helper_virt_to_phys(const void *address)
{
	return virt_to_phys(address);
}

__rust_helper struct device_node *
rust_helper_cspd_of_memory_region_byname(struct device_node *np, const char *name)
{
	int i = of_property_match_string(np, "memory-region-names", name);

	if (i < 0)
		return NULL;
	return of_parse_phandle(np, "memory-region", i);
}

__rust_helper void rust_helper_cspd_of_node_put(struct device_node *np)
{
	of_node_put(np);
}

__rust_helper int rust_helper_cspd_dma_mapping_error(struct device *dev, dma_addr_t addr)
{
	return dma_mapping_error(dev, addr);
}

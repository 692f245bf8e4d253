// SPDX-License-Identifier: GPL-2.0

#include <linux/buildid.h>
#include <linux/crash_dump.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/of.h>
#include <linux/panic_notifier.h>
#include <linux/utsname.h>
#include <linux/vmcore_info.h>
#include <asm/sections.h>

__rust_helper phys_addr_t rust_helper_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

__rust_helper bool rust_helper_is_kdump_kernel(void)
{
	return is_kdump_kernel();
}

__rust_helper void rust_helper_cspd_set_crash_kexec_post_notifiers(bool on)
{
	crash_kexec_post_notifiers = on;
}

/*
 * vmcoreinfo_append_str() is variadic and built-in only: take one preformatted line. The ELF note
 * that crash tools read is rebuilt from the data only at boot and at kdump time; rebuild it here
 * too (as update_vmcoreinfo_note() does), so that a hypervisor's memory dump sees the line.
 */
__rust_helper int rust_helper_cspd_vmcoreinfo_append(const char *line)
{
#ifdef CONFIG_VMCORE_INFO
	u32 *buf;

	if (!vmcoreinfo_data || !vmcoreinfo_note)
		return -ENODEV;
	vmcoreinfo_append_str("%s", line);
	buf = append_elf_note(vmcoreinfo_note, VMCOREINFO_NOTE_NAME, 0, vmcoreinfo_data,
			      vmcoreinfo_size);
	final_note(buf);
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

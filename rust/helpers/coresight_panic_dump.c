// SPDX-License-Identifier: GPL-2.0

#include <linux/mm.h>

__rust_helper phys_addr_t rust_helper_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

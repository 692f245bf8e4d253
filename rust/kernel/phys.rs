// SPDX-License-Identifier: GPL-2.0

//! Physical addresses of kernel memory.
//!
//! Crash tools (kdump's vmcore, a hypervisor's memory dump) see memory by physical address, so
//! code that leaves data for them has to say where it put it.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)

use crate::{
    io::PhysAddr,
    page::Page, //
};

/// Returns the physical address of `ptr`, an address in the kernel's linear map (memory from
/// `kmalloc` or the page allocator, not `vmalloc`).
pub fn virt_to_phys<T>(ptr: *const T) -> PhysAddr {
    // SAFETY: `virt_to_phys` only computes an address; it does not access memory.
    unsafe { bindings::virt_to_phys(ptr.cast()) }
}

/// Returns the physical address of the first byte of `page`.
pub fn page_to_phys(page: &Page) -> PhysAddr {
    // SAFETY: `page.as_ptr()` points to a valid `struct page` for as long as `page` lives.
    unsafe { bindings::page_to_phys(page.as_ptr()) }
}

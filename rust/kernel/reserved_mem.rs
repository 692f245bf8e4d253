// SPDX-License-Identifier: GPL-2.0

//! Reserved memory regions and their mappings.
//!
//! A region set aside at boot, either by the `reserve_mem=size:align:label` command line parameter
//! or by a device-tree `memory-region` phandle, keeps its physical address across warm reboots:
//! what one boot leaves there the next one (or a kdump capture kernel) can read.
//!
//! C headers: [`include/linux/mm.h`](srctree/include/linux/mm.h),
//! [`include/linux/of_reserved_mem.h`](srctree/include/linux/of_reserved_mem.h),
//! [`include/linux/io.h`](srctree/include/linux/io.h)

use core::ptr::NonNull;

use crate::{
    device::{
        Bound,
        Device, //
    },
    dma::DmaAddress,
    io::{
        PhysAddr,
        ResourceSize, //
    },
    prelude::*,
    sync::aref::ARef, //
};

/// Where a reserved region came from, which decides how it may be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `reserve_mem=`: memblock-reserved System RAM, mapped write-back.
    ReserveMem,
    /// A device-tree reserved-memory node; `no_map` regions are outside the linear map and are
    /// mapped write-combined.
    DeviceTree {
        /// The node has the `no-map` property.
        no_map: bool,
    },
}

/// A physical memory region reserved at boot.
#[derive(Clone, Copy, Debug)]
pub struct ReservedRegion {
    base: PhysAddr,
    size: ResourceSize,
    origin: Origin,
}

impl ReservedRegion {
    /// Looks up the region a `reserve_mem=size:align:label` parameter reserved under `label`.
    ///
    /// Returns [`ENOENT`] when the command line has no such region.
    pub fn from_reserve_mem(label: &CStr) -> Result<Self> {
        let mut base: bindings::phys_addr_t = 0;
        let mut size: bindings::phys_addr_t = 0;
        // SAFETY: `label` is a valid NUL-terminated string; `base` and `size` are valid for writes.
        let found = unsafe {
            bindings::reserve_mem_find_by_name(label.as_char_ptr(), &mut base, &mut size)
        };
        if found == 0 || size == 0 {
            return Err(ENOENT);
        }
        Ok(Self {
            base,
            size,
            origin: Origin::ReserveMem,
        })
    }

    /// Looks up the `memory-region` named `name` (in `memory-region-names`) of the first
    /// device-tree node compatible with `compatible`.
    ///
    /// Returns [`ENOENT`] when there is no such node or region.
    pub fn from_of_compatible(compatible: &CStr, name: &CStr) -> Result<Self> {
        let mut found = Err(ENOENT);
        Self::for_each_of_compatible(compatible, name, |r| {
            found = Ok(r);
            false
        });
        found
    }

    /// Calls `f` with the `memory-region` named `name` of every device-tree node compatible
    /// with `compatible` that has one, in the tree's order, until `f` returns `false`.
    ///
    /// For a driver-independent view of a binding's regions, such as the trace buffers of every
    /// TMC (`arm,coresight-tmc`, `tracedata`) whichever driver binds them.
    pub fn for_each_of_compatible(
        compatible: &CStr,
        name: &CStr,
        mut f: impl FnMut(ReservedRegion) -> bool,
    ) {
        let mut np: *mut bindings::device_node = core::ptr::null_mut();
        loop {
            // SAFETY: `compatible` is a valid NUL-terminated string; `np` is null or a node
            // reference from the previous call, which this call releases.
            np = unsafe {
                bindings::of_find_compatible_node(np, core::ptr::null(), compatible.as_char_ptr())
            };
            if np.is_null() {
                return;
            }
            // SAFETY: `np` is a valid node reference, held until the next call (or the put
            // below).
            if let Ok(r) = unsafe { Self::from_node(np, name) } {
                if !f(r) {
                    // SAFETY: `np` came from `of_find_compatible_node`, which took a reference.
                    unsafe { bindings::cspd_of_node_put(np) };
                    return;
                }
            }
        }
    }

    /// Looks up the `memory-region` named `name` (in `memory-region-names`) of `dev`'s
    /// device-tree node, as a driver finds the regions its binding gives it.
    ///
    /// Returns [`ENOENT`] when the device has no device-tree node or no such region.
    pub fn from_device(dev: &Device, name: &CStr) -> Result<Self> {
        // SAFETY: `dev.as_raw()` is a valid `struct device`; `of_node` does not change while it
        // is bound to a driver.
        let np = unsafe { (*dev.as_raw()).of_node };
        if np.is_null() {
            return Err(ENOENT);
        }
        // SAFETY: `np` is the device's node, which lives at least as long as the device.
        unsafe { Self::from_node(np, name) }
    }

    /// Looks up the `memory-region` named `name` of the node `np`.
    ///
    /// # Safety
    ///
    /// `np` must be a valid device-tree node for the duration of the call.
    unsafe fn from_node(np: *mut bindings::device_node, name: &CStr) -> Result<Self> {
        let mut res = bindings::resource::default();
        // SAFETY: `np` is valid (the caller's guarantee); `name` is NUL-terminated and `res` is
        // valid for writes.
        let ret = unsafe {
            bindings::of_reserved_mem_region_to_resource_byname(np, name.as_char_ptr(), &mut res)
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `np` is valid; both strings are NUL-terminated.
        let index = unsafe {
            bindings::of_property_match_string(
                np,
                c"memory-region-names".as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        let target = if index < 0 {
            core::ptr::null_mut()
        } else {
            // SAFETY: `np` is valid and the string is NUL-terminated; returns a reference or
            // null.
            unsafe { bindings::of_parse_phandle(np, c"memory-region".as_char_ptr(), index) }
        };
        let no_map = !target.is_null()
            // SAFETY: `target` is a valid node reference.
            && unsafe { bindings::of_property_read_bool(target, c"no-map".as_char_ptr()) };
        // SAFETY: `of_parse_phandle` returned a reference (or null, which `of_node_put`
        // accepts).
        unsafe { bindings::cspd_of_node_put(target) };
        let size = res.end.wrapping_sub(res.start).wrapping_add(1);
        if res.start == 0 || size == 0 {
            return Err(ENOENT);
        }
        Ok(Self {
            base: res.start,
            size,
            origin: Origin::DeviceTree { no_map },
        })
    }

    /// Returns whether `[paddr, paddr + len)` lies inside the region.
    pub fn contains(&self, paddr: PhysAddr, len: u64) -> bool {
        paddr >= self.base
            && paddr
                .checked_add(len)
                .is_some_and(|end| end <= self.base.saturating_add(self.size))
    }

    /// Physical address of the first byte.
    pub fn base(&self) -> PhysAddr {
        self.base
    }

    /// Size in bytes.
    pub fn size(&self) -> ResourceSize {
        self.size
    }

    /// Where the region came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Maps the region for `dev` to write into by DMA (`dma_map_resource()`, as for memory the
    /// device's driver did not allocate): the returned mapping holds the bus address to give the
    /// device (the physical address when no IOMMU translates its accesses).
    pub fn dma_map(&self, dev: &Device<Bound>) -> Result<DmaRegion> {
        let size = usize::try_from(self.size).map_err(|_| EOVERFLOW)?;
        // SAFETY: `dev` is a bound device; the range is a reserved region that stays reserved,
        // and no mapping attributes are asked for.
        let addr = unsafe {
            bindings::dma_map_resource(
                dev.as_raw(),
                self.base,
                size,
                bindings::dma_data_direction::DMA_FROM_DEVICE,
                0,
            )
        };
        // SAFETY: `dev` is valid and `addr` came from `dma_map_resource` for it.
        if unsafe { bindings::dma_mapping_error(dev.as_raw(), addr) } != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: `addr` maps `size` bytes for `dev`.
        Ok(DmaRegion {
            dev: dev.into(),
            addr,
            size,
        })
    }

    /// Maps the region: write-back for System RAM, write-combined for `no-map` regions (which
    /// `memremap` refuses to map write-back only when they are RAM).
    pub fn map(&self) -> Result<Mapping> {
        let cache = match self.origin {
            Origin::DeviceTree { no_map: true } => Cache::WriteCombine,
            _ => Cache::WriteBack,
        };
        // SAFETY: The range was reserved at boot for whoever finds it by its label or node: no
        // allocator hands it out, so nothing else owns it.
        unsafe { Mapping::memremap(self.base, self.size, cache) }
    }
}

/// A reserved region mapped for a device's DMA ([`ReservedRegion::dma_map`]); unmapped on drop.
///
/// The device must be stopped before the mapping is dropped.
///
/// # Invariants
///
/// `addr` is the bus address `dma_map_resource()` returned for `size` bytes and `dev`.
pub struct DmaRegion {
    dev: ARef<Device>,
    addr: DmaAddress,
    size: usize,
}

impl DmaRegion {
    /// Returns the bus address to give the device.
    pub fn dma_address(&self) -> DmaAddress {
        self.addr
    }

    /// Returns the size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the mapping is live; it is unmapped once, here.
        unsafe {
            bindings::dma_unmap_resource(
                self.dev.as_raw(),
                self.addr,
                self.size,
                bindings::dma_data_direction::DMA_FROM_DEVICE,
                0,
            )
        };
    }
}

/// Caching attribute of a [`Mapping`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    /// `MEMREMAP_WB`: cached; the only choice for System RAM.
    WriteBack,
    /// `MEMREMAP_WC`: write-combined; for memory outside the linear map.
    WriteCombine,
}

/// Reserved memory mapped with bounds-checked, volatile access: a [`ReservedRegion`]
/// ([`ReservedRegion::map`]), or a kernel buffer it owns ([`Mapping::kernel_buffer`]) for a
/// user of the same interface that has no reserved region.
///
/// # Invariants
///
/// `ptr` is the start of `len` bytes of memory at physical address `phys` that nothing else
/// accesses: a live `memremap` mapping of a reserved range when `buffer` is `None`, else the
/// contents of `buffer`, which is never used as a vector while it is held here.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    phys: PhysAddr,
    cache: Cache,
    buffer: Option<KVec<u8>>,
}

// SAFETY: The mapping is plain memory; it can be used and unmapped from any thread.
unsafe impl Send for Mapping {}

// SAFETY: All access through `&self` is volatile and bounds-checked; callers coordinate concurrent
// writers to the same bytes, as with MMIO.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `size` bytes of physical memory at `phys` with the given caching.
    ///
    /// # Safety
    ///
    /// `phys..phys + size` is memory that nothing else owns or accesses for the life of the
    /// mapping (a range reserved at boot), since the mapping's safe methods write to it.
    unsafe fn memremap(phys: PhysAddr, size: ResourceSize, cache: Cache) -> Result<Self> {
        let len = usize::try_from(size).map_err(|_| EOVERFLOW)?;
        if len == 0 {
            return Err(EINVAL);
        }
        let flags = match cache {
            Cache::WriteBack => bindings::MEMREMAP_WB,
            Cache::WriteCombine => bindings::MEMREMAP_WC,
        };
        // SAFETY: `memremap` validates the range and returns null on failure; what the mapping
        // may then touch is the caller's promise.
        let ptr = unsafe { bindings::memremap(phys, len, flags as usize) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` maps `len` bytes at `phys`, which the caller guarantees nothing else
        // uses.
        Ok(Self {
            ptr,
            len,
            phys,
            cache,
            buffer: None,
        })
    }

    /// Allocates a zeroed kernel buffer of `size` bytes and gives it the interface of a
    /// write-back mapping: for a user without a reserved region (only a kdump capture kernel,
    /// which reads all of memory, sees what was written there after a panic).
    pub fn kernel_buffer(size: usize) -> Result<Self> {
        if size == 0 {
            return Err(EINVAL);
        }
        let mut buffer = KVec::from_elem(0u8, size, GFP_KERNEL)?;
        let phys = crate::phys::virt_to_phys(buffer.as_ptr());
        let ptr = NonNull::new(buffer.as_mut_ptr()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` is the start of the `size` bytes of `buffer`, which moves into the
        // mapping (its heap storage stays where it is) and is only accessed through `ptr`.
        Ok(Self {
            ptr,
            len: size,
            phys,
            cache: Cache::WriteBack,
            buffer: Some(buffer),
        })
    }

    /// Size of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: empty ranges and buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Physical address of the first byte.
    pub fn phys_addr(&self) -> PhysAddr {
        self.phys
    }

    /// Caching attribute of the mapping.
    pub fn cache(&self) -> Cache {
        self.cache
    }

    /// Makes what was written to `offset..offset + len` reach memory: cleans those bytes of the
    /// data cache to the point of coherency when the mapping is write-back (on arm64,
    /// `dcache_clean_poc()`), and waits for the writes of a write-combined one (`wmb()`).
    ///
    /// For memory that must survive a reset which does not write dirty cache lines back, such
    /// as a warm reboot on many arm64 systems. Returns whether a clean was issued; [`EOPNOTSUPP`]
    /// for a write-back mapping on an architecture without the helper. Usable at panic time: no
    /// lock, no allocation.
    pub fn clean_to_poc(&self, offset: usize, len: usize) -> Result<bool> {
        self.check(offset, len)?;
        match self.cache {
            #[cfg(CONFIG_ARM64)]
            Cache::WriteBack => {
                // SAFETY: `offset..offset + len` is inside the live mapping (checked above,
                // invariant).
                let start = unsafe { self.ptr.as_ptr().add(offset) } as usize;
                // SAFETY: The range is mapped (as above); cleaning cache lines does not change
                // their content.
                unsafe { bindings::dcache_clean_poc(start, start.wrapping_add(len)) };
                Ok(true)
            }
            #[cfg(not(CONFIG_ARM64))]
            Cache::WriteBack => Err(EOPNOTSUPP),
            Cache::WriteCombine => {
                crate::sync::barrier::mb(crate::sync::barrier::Write);
                Ok(false)
            }
        }
    }

    fn check(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result {
        self.check(offset, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: `offset + i < len` was checked above; the mapping is live (invariant).
            *b = unsafe { self.ptr.as_ptr().add(offset + i).read_volatile() };
        }
        Ok(())
    }

    /// Writes `data` at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        self.check(offset, data.len())?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: `offset + i < len` was checked above; the mapping is live (invariant).
            unsafe { self.ptr.as_ptr().add(offset + i).write_volatile(*b) };
        }
        Ok(())
    }

    /// Sets `len` bytes at `offset` to `value`.
    pub fn fill(&self, offset: usize, len: usize, value: u8) -> Result {
        self.check(offset, len)?;
        for i in 0..len {
            // SAFETY: `offset + i < self.len` was checked above; the mapping is live (invariant).
            unsafe { self.ptr.as_ptr().add(offset + i).write_volatile(value) };
        }
        Ok(())
    }

    /// Returns the bytes at `offset..offset + len` as a mutable slice.
    ///
    /// For code that fills a whole part of the region at once, such as a panic callback copying
    /// trace into its slot.
    ///
    /// # Safety
    ///
    /// For the life of the returned slice, nothing else may access those bytes, through this
    /// mapping or otherwise.
    #[expect(
        clippy::mut_from_ref,
        reason = "the bytes are not Rust-owned memory; exclusivity is the caller's safety duty"
    )]
    pub unsafe fn slice_mut(&self, offset: usize, len: usize) -> Result<&mut [u8]> {
        self.check(offset, len)?;
        // SAFETY: The range is inside the live mapping (checked above, invariant); the caller
        // guarantees exclusive access for the life of the slice.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().add(offset), len) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.buffer.is_none() {
            // SAFETY: Without a buffer, `ptr` came from `memremap` (invariant) and is unmapped
            // once, here.
            unsafe { bindings::memunmap(self.ptr.as_ptr().cast()) };
        }
        // A buffer is freed when its field is dropped, after this.
    }
}

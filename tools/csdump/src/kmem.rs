//! Kernel virtual memory in a vmcore: the arm64 kernel page tables walked from `swapper_pg_dir`.
//!
//! The decoder needs the code that ran, and on a kernel with modules that code is not all in
//! vmlinux: module text lives in the vmalloc area, mapped page by page. vmcoreinfo names what the
//! walk needs (`SYMBOL(swapper_pg_dir)`, `NUMBER(kimage_voffset)`, `NUMBER(TCR_EL1_T1SZ)` or
//! `NUMBER(VA_BITS)`, `PAGESIZE`); the translation tables are those of the Arm ARM (D8, VMSAv8-64) for a 4 KiB
//! granule with 39- or 48-bit virtual addresses, the configurations arm64 kernels use with 4 KiB
//! pages.

use crate::vmcore::Vmcore;

const PAGE: u64 = 4096;
/// Output address bits 47:12 of a descriptor.
const OA_MASK: u64 = 0x0000_FFFF_FFFF_F000;

/// A kernel address space read through the page tables in a vmcore.
pub struct KernelMemory<'c> {
    core: &'c Vmcore,
    /// Physical address of the top-level table.
    root: u64,
    /// Level the walk starts at (0 for 48-bit, 1 for 39-bit addresses).
    start_level: u32,
}

fn key(vmcoreinfo: &str, name: &str) -> Option<u64> {
    let v = vmcoreinfo
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .trim();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None if name.starts_with("SYMBOL(") => u64::from_str_radix(v, 16).ok(),
        None => v.parse().ok(),
    }
}

impl<'c> KernelMemory<'c> {
    /// Returns the kernel address space of `core`, or `None` when vmcoreinfo lacks a key or
    /// names a layout this walk does not handle (another page size, 52-bit addresses).
    pub fn new(core: &'c Vmcore, vmcoreinfo: &str) -> Option<Self> {
        if key(vmcoreinfo, "PAGESIZE=")? != PAGE {
            return None;
        }
        // The size the kernel runs with: TCR_EL1.T1SZ (a 52-bit kernel on a CPU without LPA2
        // runs with 48 bits), else VA_BITS.
        let va_bits = match key(vmcoreinfo, "NUMBER(TCR_EL1_T1SZ)=") {
            Some(t1sz) => 64u64.checked_sub(t1sz)?,
            None => key(vmcoreinfo, "NUMBER(VA_BITS)=")?,
        };
        let start_level = match va_bits {
            48 => 0,
            39 => 1,
            _ => return None,
        };
        let pgd = key(vmcoreinfo, "SYMBOL(swapper_pg_dir)=")?;
        let voff = key(vmcoreinfo, "NUMBER(kimage_voffset)=")?;
        Some(Self {
            core,
            root: pgd.checked_sub(voff)?,
            start_level,
        })
    }

    fn entry(&self, table: u64, index: u64) -> Option<u64> {
        let b = self.core.read_phys(table + index * 8, 8).ok()?;
        Some(u64::from_le_bytes(b.as_slice().try_into().ok()?))
    }

    /// Translates the kernel virtual address `va`; `None` when it is not mapped (or the tables
    /// are not in the vmcore).
    pub fn phys(&self, va: u64) -> Option<u64> {
        let mut table = self.root;
        for level in self.start_level..=3 {
            let shift = 12 + 9 * (3 - level);
            let desc = self.entry(table, (va >> shift) & 0x1FF)?;
            match (desc & 3, level) {
                (3, 3) => return Some((desc & OA_MASK) | (va & (PAGE - 1))),
                (3, _) => table = desc & OA_MASK,
                (1, 1 | 2) => {
                    let size = 1u64 << shift;
                    return Some((desc & OA_MASK & !(size - 1)) | (va & (size - 1)));
                }
                _ => return None,
            }
        }
        None
    }

    /// Reads the mapped pages around `va`: back at most `before` bytes and on at most `after`,
    /// stopping at the first page that is not mapped. Returns the start address and the bytes.
    pub fn read_around(&self, va: u64, before: u64, after: u64) -> Option<(u64, Vec<u8>)> {
        let page = va & !(PAGE - 1);
        self.phys(page)?;
        let mut start = page;
        while page - start < before {
            let prev = start.checked_sub(PAGE)?;
            if self.phys(prev).is_none() {
                break;
            }
            start = prev;
        }
        let mut bytes = Vec::new();
        let mut at = start;
        while at < page.saturating_add(after) {
            let Some(pa) = self.phys(at) else {
                break;
            };
            let Ok(b) = self.core.read_phys(pa, PAGE) else {
                break;
            };
            bytes.extend_from_slice(&b);
            at += PAGE;
        }
        Some((start, bytes))
    }

    /// Reads `len` bytes of kernel virtual memory at `va`, page by page through the page
    /// tables; `None` when a page is not mapped or not in the vmcore. Pages the dump filtered
    /// out read as zeros.
    pub fn read(&self, va: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        out.try_reserve_exact(len).ok()?;
        let mut at = va;
        while out.len() < len {
            let in_page = at & (PAGE - 1);
            let take = usize::try_from(PAGE - in_page).ok()?.min(len - out.len());
            let pa = self.phys(at)?;
            let b = self.core.read_phys(pa, take as u64).ok()?;
            out.extend_from_slice(&b);
            at = at.checked_add(take as u64)?;
        }
        Some(out)
    }
}

//! The memory the stub serves, and the relocation between GDB's addresses and the dump's.
//!
//! GDB debugs with vmlinux as built, so the stub speaks in vmlinux's link-time addresses: an
//! address inside the kernel image is the runtime one minus the KASLR offset; anything else
//! (modules, the linear map, vmalloc) is not moved. Reads are served, in this order, from the
//! vmcore (the kernel image through `kimage_voffset`, everything else through the kernel's page
//! tables: what the memory held at the panic, text as the kernel patched it), from the memory
//! images of an OpenCSD snapshot, and from vmlinux's executable sections (text as built, for a
//! dump without a vmcore).

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::capture::Capture;
use crate::capture::Origin;
use crate::kmem::KernelMemory;
use crate::snapshot::VmlinuxImage;
use crate::vmcore::Vmcore;

const PAGE: u64 = 4096;

/// The shift between where the kernel image ran and where vmlinux links it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    /// Runtime address minus link-time address, inside the image.
    offset: u64,
    /// The kernel image at link time, `[start, end)`; `None`: nothing is moved.
    image: Option<(u64, u64)>,
}

impl Relocation {
    /// No relocation: GDB sees the addresses the trace holds.
    pub fn none() -> Self {
        Self {
            offset: 0,
            image: None,
        }
    }

    /// Addresses in the link-time image `image` run `offset` higher.
    pub fn new(offset: u64, image: Option<(u64, u64)>) -> Self {
        Self {
            offset,
            image: image.filter(|&(s, e)| s < e),
        }
    }

    /// Runtime minus link-time address of the kernel image (0 when nothing moves).
    pub fn offset(&self) -> u64 {
        if self.image.is_some() {
            self.offset
        } else {
            0
        }
    }

    /// Whether runtime address `rt` is in the kernel image (`false` when the image is unknown).
    pub fn in_image(&self, rt: u64) -> bool {
        self.linked(rt.wrapping_sub(self.offset))
    }

    fn linked(&self, link: u64) -> bool {
        self.image.is_some_and(|(s, e)| (s..e).contains(&link))
    }

    /// The link-time address of runtime address `rt`.
    pub fn to_link(&self, rt: u64) -> u64 {
        let l = rt.wrapping_sub(self.offset);
        if self.linked(l) {
            l
        } else {
            rt
        }
    }

    /// The runtime address of link-time address `link`.
    pub fn to_runtime(&self, link: u64) -> u64 {
        if self.linked(link) {
            link.wrapping_add(self.offset)
        } else {
            link
        }
    }

    /// Whether runtime address `rt` is outside the running image yet inside the link-time one:
    /// GDB would take it for an image address.
    pub fn ambiguous(&self, rt: u64) -> bool {
        self.to_link(rt) == rt && self.linked(rt)
    }
}

/// The relocation for `capture` with `vmlinux`: the dump's `_text` against vmlinux's (the KASLR
/// offset). For a snapshot, whose images say nothing of `_text`, an image of exactly the size of
/// one of vmlinux's executable sections gives it (csdump's snapshots hold one image per section).
pub fn relocation(capture: &Capture<'_>, vmlinux: Option<&VmlinuxImage<'_>>) -> Relocation {
    let Some(v) = vmlinux else {
        return Relocation::none();
    };
    let mut offset = capture.kernel_relocation(&v.elf);
    if matches!(capture.origin, Origin::Snapshot(_)) {
        if let Some(o) = capture.memory.iter().find_map(|m| {
            v.elf
                .exec
                .iter()
                .find(|s| s.size == m.length && s.size >= PAGE)
                .map(|s| m.address.wrapping_sub(s.addr))
        }) {
            offset = o;
        }
    }
    let start = v
        .elf
        .text
        .or_else(|| v.elf.exec.iter().map(|s| s.addr).min());
    let end = v.elf.end.or_else(|| {
        v.elf
            .exec
            .iter()
            .map(|s| s.addr.saturating_add(s.size))
            .max()
    });
    Relocation::new(offset, start.zip(end))
}

/// Memory GDB can read.
pub trait Memory {
    /// Fills `buf` from (link-time) address `addr` on, as far as memory is readable; returns how
    /// many bytes it filled.
    fn read(&self, addr: u64, buf: &mut [u8]) -> usize;
}

/// A snapshot memory image, read from its file on demand.
struct FileImage {
    address: u64,
    length: u64,
    offset: u64,
    file: File,
}

/// The memory of a dump or snapshot, at link-time addresses.
pub struct DumpMemory<'a> {
    reloc: Relocation,
    core: Option<&'a Vmcore>,
    kimage_voffset: Option<u64>,
    kmem: Option<KernelMemory<'a>>,
    /// vmlinux's executable sections: link-time address and bytes.
    text: Vec<(u64, &'a [u8])>,
    files: Vec<FileImage>,
    /// Images that could not be opened, in words.
    pub notes: Vec<String>,
}

impl<'a> DumpMemory<'a> {
    /// The memory of `capture`, with `vmlinux`'s text, relocated with `reloc`.
    pub fn new(
        capture: &Capture<'a>,
        vmlinux: Option<&VmlinuxImage<'a>>,
        reloc: Relocation,
    ) -> Self {
        let mut m = Self {
            reloc,
            core: capture.core,
            kimage_voffset: capture.kernel.kimage_voffset,
            kmem: None,
            text: Vec::new(),
            files: Vec::new(),
            notes: Vec::new(),
        };
        if let (Some(core), Some(info)) = (capture.core, capture.vmcoreinfo) {
            m.kmem = KernelMemory::new(core, info);
        }
        if let Some(v) = vmlinux {
            for s in &v.elf.exec {
                let bytes = usize::try_from(s.offset)
                    .ok()
                    .zip(usize::try_from(s.size).ok())
                    .and_then(|(o, n)| v.bytes.get(o..o.checked_add(n)?));
                if let Some(b) = bytes {
                    m.text.push((s.addr, b));
                }
            }
        }
        for i in &capture.memory {
            match File::open(&i.path) {
                Ok(file) => m.files.push(FileImage {
                    address: i.address,
                    length: i.length,
                    offset: i.offset,
                    file,
                }),
                Err(e) => m.notes.push(format!("{}: {e}", i.path.display())),
            }
        }
        m
    }

    /// Whether anything can be read at all.
    pub fn is_empty(&self) -> bool {
        self.core.is_none() && self.text.is_empty() && self.files.is_empty()
    }

    /// Reads kernel memory at runtime address `rt` from the vmcore: the adapter over csdump's
    /// kernel memory access (the image through `kimage_voffset`, the rest through the kernel's
    /// page tables). `buf` does not cross a page.
    fn kernel(&self, rt: u64, buf: &mut [u8]) -> bool {
        let Some(core) = self.core else {
            return false;
        };
        let len = buf.len() as u64;
        let image = self
            .kimage_voffset
            .filter(|_| self.reloc.in_image(rt))
            .and_then(|kv| core.read_phys(rt.wrapping_sub(kv), len).ok());
        let bytes = match image {
            Some(b) => Some(b),
            None => self
                .kmem
                .as_ref()
                .and_then(|k| k.phys(rt))
                .and_then(|pa| core.read_phys(pa, len).ok()),
        };
        match bytes {
            Some(b) if b.len() == buf.len() => {
                buf.copy_from_slice(&b);
                true
            }
            _ => false,
        }
    }

    fn vmlinux_text(&self, link: u64, buf: &mut [u8]) -> bool {
        for &(addr, bytes) in &self.text {
            let Some(off) = link.checked_sub(addr).and_then(|o| usize::try_from(o).ok()) else {
                continue;
            };
            if let Some(src) = off.checked_add(buf.len()).and_then(|e| bytes.get(off..e)) {
                buf.copy_from_slice(src);
                return true;
            }
        }
        false
    }

    fn images(&self, rt: u64, buf: &mut [u8]) -> bool {
        for i in &self.files {
            let Some(off) = rt.checked_sub(i.address) else {
                continue;
            };
            if off.saturating_add(buf.len() as u64) > i.length {
                continue;
            }
            if i.file
                .read_exact_at(buf, i.offset.saturating_add(off))
                .is_ok()
            {
                return true;
            }
        }
        false
    }
}

impl DumpMemory<'_> {
    /// Like [`Memory::read`], at runtime address `rt`.
    pub fn read_runtime(&self, rt: u64, buf: &mut [u8]) -> usize {
        self.read_at(self.reloc.to_link(rt), rt, buf)
    }

    /// Reads at link-time address `link`, runtime address `rt`, page by page (the KASLR offset
    /// is a whole number of pages).
    fn read_at(&self, link: u64, rt: u64, buf: &mut [u8]) -> usize {
        let mut done = 0;
        while done < buf.len() {
            let (l, r) = (link.wrapping_add(done as u64), rt.wrapping_add(done as u64));
            let n = ((PAGE - r % PAGE) as usize).min(buf.len() - done);
            let chunk = &mut buf[done..done + n];
            if !(self.kernel(r, chunk) || self.images(r, chunk) || self.vmlinux_text(l, chunk)) {
                break;
            }
            done += n;
        }
        done
    }
}

impl Memory for DumpMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        self.read_at(addr, self.reloc.to_runtime(addr), buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocation_moves_only_the_image() {
        let r = Relocation::new(
            0x20_0000,
            Some((0xffff_8000_8000_0000, 0xffff_8000_8200_0000)),
        );
        assert_eq!(r.offset(), 0x20_0000);
        assert_eq!(r.to_link(0xffff_8000_8020_1000), 0xffff_8000_8000_1000);
        assert_eq!(r.to_runtime(0xffff_8000_8000_1000), 0xffff_8000_8020_1000);
        // Modules and the linear map do not move.
        assert_eq!(r.to_link(0xffff_8000_7a00_0000), 0xffff_8000_7a00_0000);
        assert_eq!(r.to_runtime(0xffff_0000_4000_0000), 0xffff_0000_4000_0000);
        // The runtime image's last bytes are past the link-time end: still the image.
        assert_eq!(r.to_link(0xffff_8000_821f_fff0), 0xffff_8000_81ff_fff0);
        // A module address inside the link-time image, outside the running one, is ambiguous.
        assert!(r.ambiguous(0xffff_8000_8010_0000));
        assert!(!r.ambiguous(0xffff_8000_8030_0000));
        assert!(r.in_image(0xffff_8000_8020_0000));
        assert!(!r.in_image(0xffff_8000_8000_0000));
        assert_eq!(Relocation::new(7, None).offset(), 0);
        assert_eq!(Relocation::none().to_link(5), 5);
    }
}

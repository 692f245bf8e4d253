//! Vmcores of a small test machine in every format a kdump set-up saves: ELF, makedumpfile's
//! kdump-compressed (zlib, lzo, snappy, zstd or uncompressed pages, a dump level), its
//! flattened format, gzip'ed. Written from the formats' own definitions (makedumpfile's
//! diskdump_mod.h and makedumpfile.h, the kernel's include/uapi/linux/vmcore.h), independently
//! of csdump's reader.

use std::io::Write;

use super::*;

pub const RAM: u64 = 0x4000_0000;
pub const REGION_PADDR: u64 = 0x4800_0000;
/// Eight pages: the records fill about one, the rest is zero (makedumpfile's -d 1 drops it).
pub const REGION_SIZE: usize = 0x8000;
pub const PAGE: u64 = 4096;

/// The physical memory of the test machine: page frame number -> page bytes.
pub struct Memory {
    /// RAM ranges (first pfn, pages).
    pub ram: Vec<(u64, u64)>,
    pub pages: std::collections::BTreeMap<u64, Vec<u8>>,
}

impl Memory {
    pub fn page(&self, pfn: u64) -> Vec<u8> {
        self.pages
            .get(&pfn)
            .cloned()
            .unwrap_or_else(|| vec![0; PAGE as usize])
    }

    pub fn is_ram(&self, pfn: u64) -> bool {
        self.ram.iter().any(|&(a, n)| pfn >= a && pfn < a + n)
    }
}

pub fn memory(region: &[u8]) -> Memory {
    let mut pages = std::collections::BTreeMap::new();
    let mut text = vec![0u8; PAGE as usize];
    text[..16].copy_from_slice(b"some kernel text");
    pages.insert(RAM / PAGE + 1, text);
    for (i, chunk) in region.chunks(PAGE as usize).enumerate() {
        let mut p = chunk.to_vec();
        p.resize(PAGE as usize, 0);
        pages.insert(REGION_PADDR / PAGE + i as u64, p);
    }
    Memory {
        ram: vec![
            (RAM / PAGE, 0x100),
            (
                (REGION_PADDR - 0x2000) / PAGE,
                2 + REGION_SIZE as u64 / PAGE + 3,
            ),
        ],
        pages,
    }
}

pub fn elf_of(mem: &Memory, notes: &[NoteSpec]) -> Vec<u8> {
    let loads: Vec<LoadSpec> = mem
        .ram
        .iter()
        .map(|&(a, n)| LoadSpec {
            paddr: a * PAGE,
            size: n * PAGE,
            chunks: (a..a + n)
                .filter(|p| mem.pages.contains_key(p))
                .map(|p| ((p - a) * PAGE, mem.page(p)))
                .collect(),
        })
        .collect();
    elf_core(notes, &loads)
}

pub fn note_bytes(notes: &[NoteSpec]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in notes {
        let mut name = n.name.clone();
        name.push(0);
        out.extend((name.len() as u32).to_le_bytes());
        out.extend((n.desc.len() as u32).to_le_bytes());
        out.extend(n.kind.to_le_bytes());
        out.extend(&name);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out.extend(&n.desc);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    }
    out
}

/// Page compression of a kdump-compressed file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compress {
    Zlib,
    Lzo,
    Snappy,
    Zstd,
    None,
}

impl Compress {
    /// Every compression makedumpfile writes, and none.
    pub const ALL: [Compress; 5] = [
        Compress::Zlib,
        Compress::Lzo,
        Compress::Snappy,
        Compress::Zstd,
        Compress::None,
    ];

    /// The flag of the header's status and of a compressed page's descriptor.
    pub fn flag(self) -> u32 {
        match self {
            Compress::Zlib => 0x1,
            Compress::Lzo => 0x2,
            Compress::Snappy => 0x4,
            Compress::Zstd => 0x20,
            Compress::None => 0,
        }
    }

    /// `page` compressed as makedumpfile does (zlib's compress2, lzo1x_1, snappy's raw
    /// format, one zstd frame).
    pub fn compress(self, page: &[u8]) -> Vec<u8> {
        match self {
            Compress::Zlib => {
                let mut z =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(page).unwrap();
                z.finish().unwrap()
            }
            Compress::Lzo => lzo1x::compress(page, lzo1x::CompressLevel::default()),
            Compress::Snappy => snap::raw::Encoder::new().compress_vec(page).unwrap(),
            Compress::Zstd => {
                ruzstd::encoding::compress_to_vec(page, ruzstd::encoding::CompressionLevel::Fastest)
            }
            Compress::None => page.to_vec(),
        }
    }
}

/// Writes makedumpfile's kdump-compressed format (diskdump_mod.h, header version 6) of `mem`:
/// every RAM page in the first bitmap, all but `dropped` (the pages its filter excludes: cache,
/// user, free) in the second; with dump level 1 every zero page shares one stored zero page
/// (makedumpfile's `pd_zero`), the others are compressed when that makes them smaller.
pub fn kdump_of(
    mem: &Memory,
    notes: &[NoteSpec],
    compress: Compress,
    dump_level: i32,
    dropped: &[u64],
) -> Vec<u8> {
    let bs = PAGE as usize;
    let max_mapnr = mem.ram.iter().map(|&(a, n)| a + n).max().unwrap();
    let note = note_bytes(notes);
    let sub_size = 104;
    let sub_hdr_blocks = (sub_size + note.len()).div_ceil(bs);
    let half = (max_mapnr as usize).div_ceil(8).next_multiple_of(bs);
    let bitmap_blocks = 2 * half / bs;
    let mut h = vec![0u8; bs];
    h[..8].copy_from_slice(b"KDUMP   ");
    h[8..12].copy_from_slice(&6i32.to_le_bytes());
    // utsname: sysname, nodename, release, version, machine, domainname (65 bytes each).
    let uts = |h: &mut Vec<u8>, i: usize, s: &[u8]| {
        h[12 + 65 * i..12 + 65 * i + s.len()].copy_from_slice(s)
    };
    uts(&mut h, 0, b"Linux");
    uts(&mut h, 1, b"board");
    uts(&mut h, 2, b"7.3.0-cspd-test");
    uts(&mut h, 4, b"aarch64");
    let status: u32 = compress.flag();
    h[424..428].copy_from_slice(&status.to_le_bytes());
    h[428..432].copy_from_slice(&(bs as i32).to_le_bytes());
    h[432..436].copy_from_slice(&(sub_hdr_blocks as i32).to_le_bytes());
    h[436..440].copy_from_slice(&(bitmap_blocks as u32).to_le_bytes());
    h[440..444].copy_from_slice(&(max_mapnr as u32).to_le_bytes());
    h[460..464].copy_from_slice(&2i32.to_le_bytes());
    let mut out = h;
    // Sub-header and notes.
    let mut sub = vec![0u8; sub_hdr_blocks * bs];
    sub[8..12].copy_from_slice(&dump_level.to_le_bytes());
    let note_off = (bs + sub_size) as u64;
    // The vmcoreinfo descriptor inside the notes.
    let mut pos = 0usize;
    for n in notes {
        let name_len = n.name.len() + 1;
        let desc_at = pos + 12 + name_len.next_multiple_of(4);
        if n.name == b"VMCOREINFO" {
            sub[32..40].copy_from_slice(&(note_off + desc_at as u64).to_le_bytes());
            sub[40..48].copy_from_slice(&(n.desc.len() as u64).to_le_bytes());
        }
        pos = desc_at + n.desc.len().next_multiple_of(4);
    }
    sub[48..56].copy_from_slice(&note_off.to_le_bytes());
    sub[56..64].copy_from_slice(&(note.len() as u64).to_le_bytes());
    sub[96..104].copy_from_slice(&max_mapnr.to_le_bytes());
    sub[sub_size..sub_size + note.len()].copy_from_slice(&note);
    out.extend(&sub);
    // Bitmaps.
    let mut bm1 = vec![0u8; half];
    let mut bm2 = vec![0u8; half];
    let mut dumpable = Vec::new();
    for pfn in 0..max_mapnr {
        if !mem.is_ram(pfn) {
            continue;
        }
        bm1[pfn as usize / 8] |= 1 << (pfn % 8);
        if !dropped.contains(&pfn) {
            bm2[pfn as usize / 8] |= 1 << (pfn % 8);
            dumpable.push(pfn);
        }
    }
    out.extend(&bm1);
    out.extend(&bm2);
    // Page descriptors, then the data.
    let pd_at = out.len();
    let mut data_at = pd_at + 24 * dumpable.len();
    let mut descs = Vec::new();
    let mut data = Vec::new();
    let zero_page = if dump_level & 1 != 0 {
        let at = data_at as u64;
        data.extend(vec![0u8; PAGE as usize]);
        data_at += PAGE as usize;
        Some(at)
    } else {
        None
    };
    for &pfn in &dumpable {
        let page = mem.page(pfn);
        if let (Some(at), true) = (zero_page, page.iter().all(|&b| b == 0)) {
            descs.extend(at.to_le_bytes());
            descs.extend((PAGE as u32).to_le_bytes());
            descs.extend(0u32.to_le_bytes());
            descs.extend(0u64.to_le_bytes());
            continue;
        }
        // Compressed only when that makes it smaller, as makedumpfile does.
        let c = compress.compress(&page);
        let (bytes, flags) = if compress != Compress::None && c.len() < page.len() {
            (c, compress.flag())
        } else {
            (page, 0)
        };
        descs.extend((data_at as u64).to_le_bytes());
        descs.extend((bytes.len() as u32).to_le_bytes());
        descs.extend(flags.to_le_bytes());
        descs.extend(0u64.to_le_bytes());
        data_at += bytes.len();
        data.extend(bytes);
    }
    out.extend(descs);
    out.extend(data);
    out
}

/// Writes makedumpfile's flattened format (makedumpfile.h) of `file`: the 4096-byte header,
/// then (offset, size, data) records, big-endian, here out of order and with the first block
/// written twice (zeros first, as makedumpfile writes a header it fills in later), then the end
/// marker.
pub fn flatten(file: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 4096];
    out[..12].copy_from_slice(b"makedumpfile");
    out[16..24].copy_from_slice(&1i64.to_be_bytes());
    out[24..32].copy_from_slice(&1i64.to_be_bytes());
    let rec = |out: &mut Vec<u8>, off: usize, data: &[u8]| {
        out.extend((off as i64).to_be_bytes());
        out.extend((data.len() as i64).to_be_bytes());
        out.extend(data);
    };
    rec(&mut out, 0, &vec![0u8; 4096.min(file.len())]);
    let chunks: Vec<(usize, &[u8])> = file
        .chunks(3000)
        .enumerate()
        .map(|(i, c)| (i * 3000, c))
        .collect();
    for (off, c) in chunks.iter().rev() {
        rec(&mut out, *off, c);
    }
    out.extend((-1i64).to_be_bytes());
    out.extend((-1i64).to_be_bytes());
    out
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(data).unwrap();
    z.finish().unwrap()
}

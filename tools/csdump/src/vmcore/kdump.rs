//! The kdump-compressed (and older diskdump) format, read in Rust from makedumpfile's layout
//! (`diskdump_mod.h`, its IMPLEMENTATION notes).
//!
//! ```text
//! block 0                        struct disk_dump_header (signature "KDUMP   " or "DISKDUMP")
//! block 1 .. 1+sub_hdr_size      struct kdump_sub_header, then vmcoreinfo and the ELF notes
//! next bitmap_blocks blocks      bitmap 1 (pages that are memory), then bitmap 2 (pages stored)
//! next                           one page_desc_t {offset u64, size u32, flags u32, page_flags u64}
//!                                per page set in bitmap 2, in page frame order
//! then                           the pages' data, each zlib, lzo, snappy or zstd compressed,
//!                                or as is (exactly one block)
//! ```
//!
//! Every number read from the file is checked before it is used: the block size (a power of
//! two, 512 bytes to 1 MiB), the bitmaps (in the file, at most [`MAX_BITMAP_BYTES`] each), a
//! page descriptor (in the file; its data in the file, at most one block, exactly one block
//! when not compressed), and the page its data decompresses to (exactly one block). Nothing is
//! allocated from a number the file gives before that number is checked against the file's
//! size or those limits. Decompression is pure Rust: flate2 on miniz_oxide (zlib), lzo1x
//! (a safe port of LZO1X), snap (snappy) and ruzstd (zstd, its window bounded).

use std::fs::File;

use super::le32;
use super::le64;
use super::read_at;
use super::VmcoreError;

/// Size of a page descriptor (`page_desc_t`).
pub const PAGE_DESC_SIZE: u64 = 24;
/// Largest bitmap csdump reads (each of the two): 2^31 pages, 8 TiB of memory in 4 KiB pages.
pub const MAX_BITMAP_BYTES: u64 = 256 << 20;
/// Smallest block (page) size csdump accepts.
pub const MIN_BLOCK_SIZE: u64 = 512;
/// Largest block (page) size csdump accepts.
pub const MAX_BLOCK_SIZE: u64 = 1 << 20;
/// Largest zstd window a page's frame may ask for (a page is at most [`MAX_BLOCK_SIZE`]).
const MAX_ZSTD_WINDOW: u64 = 2 * MAX_BLOCK_SIZE;

/// `DUMP_DH_COMPRESSED_ZLIB` (header status and page descriptor flags).
pub const FLAG_ZLIB: u32 = 0x1;
/// `DUMP_DH_COMPRESSED_LZO`.
pub const FLAG_LZO: u32 = 0x2;
/// `DUMP_DH_COMPRESSED_SNAPPY`.
pub const FLAG_SNAPPY: u32 = 0x4;
/// `DUMP_DH_COMPRESSED_INCOMPLETE` (header status only).
pub const FLAG_INCOMPLETE: u32 = 0x8;
/// `DUMP_DH_COMPRESSED_ZSTD`.
pub const FLAG_ZSTD: u32 = 0x20;
const COMPRESSED: u32 = FLAG_ZLIB | FLAG_LZO | FLAG_SNAPPY | FLAG_ZSTD;

/// Pages per rank checkpoint (one `u64` of the stored-page bitmap is 64 pages).
const RANK_CHUNK_WORDS: usize = 64;

/// The header fields csdump uses (`struct disk_dump_header`, 64-bit target).
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// `header_version`.
    pub version: u32,
    /// `status`: the compression, the incomplete flag.
    pub status: u32,
    /// `block_size`: the page size.
    pub block_size: u64,
    /// `sub_hdr_size`, in blocks.
    pub sub_hdr_blocks: u64,
    /// `bitmap_blocks`: both bitmaps, in blocks.
    pub bitmap_blocks: u64,
}

impl Header {
    /// Reads the header at the start of `head`; checks the block size.
    pub fn parse(head: &[u8]) -> Result<Self, VmcoreError> {
        if head.len() < 464 {
            return Err(VmcoreError::Invalid {
                offset: 0,
                what: format!(
                    "the kdump header needs 464 bytes, the file has {:#x} (truncated dump)",
                    head.len()
                ),
            });
        }
        let h = Header {
            version: le32(head, 8),
            status: le32(head, 424),
            block_size: u64::from(le32(head, 428)),
            sub_hdr_blocks: u64::from(le32(head, 432)),
            bitmap_blocks: u64::from(le32(head, 436)),
        };
        if !h.block_size.is_power_of_two()
            || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&h.block_size)
        {
            return Err(VmcoreError::Invalid {
                offset: 428,
                what: format!(
                    "kdump header: block size {:#x} is not a power of two from {MIN_BLOCK_SIZE:#x} to {MAX_BLOCK_SIZE:#x}",
                    h.block_size
                ),
            });
        }
        Ok(h)
    }

    /// The page compression the header announces.
    pub fn compression(&self) -> &'static str {
        compression_name(self.status)
    }

    /// The machine name in the header's `utsname` ("aarch64"), when it has one.
    pub fn machine(head: &[u8]) -> Option<String> {
        // new_utsname: six 65-byte strings from offset 12; machine is the fifth.
        let m = head.get(12 + 65 * 4..12 + 65 * 5)?;
        let m = m.split(|&b| b == 0).next().unwrap_or(&[]);
        (!m.is_empty() && m.iter().all(u8::is_ascii_graphic))
            .then(|| String::from_utf8_lossy(m).into_owned())
    }
}

fn compression_name(flags: u32) -> &'static str {
    if flags & FLAG_ZLIB != 0 {
        "zlib"
    } else if flags & FLAG_LZO != 0 {
        "lzo"
    } else if flags & FLAG_SNAPPY != 0 {
        "snappy"
    } else if flags & FLAG_ZSTD != 0 {
        "zstd"
    } else {
        "uncompressed"
    }
}

/// What reading one page of a kdump-compressed file gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Page {
    /// The page is stored; its bytes are in the buffer.
    Stored,
    /// The page is memory, but makedumpfile left it out (its dump level): zeros.
    Excluded,
    /// The page is not memory this dump describes.
    NotMemory,
    /// The page is stored but cannot be read back; the buffer is zeros.
    Damaged(String),
}

/// The page maps and page descriptor table of an open kdump-compressed file.
pub struct Kdump {
    /// Block (page) size.
    pub block_size: u64,
    /// File offset of the page descriptor table.
    pub pd_table: u64,
    /// Bitmap 1: pages that are memory, 64 to a word, page `n` at bit `n % 64` of word `n / 64`.
    mem_map: Vec<u64>,
    /// Bitmap 2: pages the file stores.
    file_map: Vec<u64>,
    /// Stored pages before each [`RANK_CHUNK_WORDS`]-word chunk of `file_map`.
    rank_base: Vec<u64>,
    file_len: u64,
}

impl std::fmt::Debug for Kdump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kdump")
            .field("block_size", &self.block_size)
            .field("pd_table", &self.pd_table)
            .field("pages", &(self.mem_map.len() * 64))
            .finish_non_exhaustive()
    }
}

/// Reads `len` bytes of bitmap at `offset` into words; the caller has checked the range.
fn read_bitmap(file: &File, offset: u64, len: u64, what: &str) -> Result<Vec<u64>, VmcoreError> {
    let bytes = super::read_exact_at(file, offset, usize::try_from(len).unwrap_or(0), what)?;
    Ok(bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect())
}

impl Kdump {
    /// Reads the bitmaps of the file described by `h`, after checking they are in the file.
    pub fn open(file: &File, file_len: u64, h: &Header) -> Result<Self, VmcoreError> {
        let bs = h.block_size;
        let bitmaps_at = (1 + h.sub_hdr_blocks).saturating_mul(bs);
        let bitmaps_len = h.bitmap_blocks.saturating_mul(bs);
        let pd_table = bitmaps_at.saturating_add(bitmaps_len);
        if h.bitmap_blocks == 0 || h.bitmap_blocks % 2 != 0 {
            return Err(VmcoreError::Invalid {
                offset: 436,
                what: format!(
                    "kdump header: {} bitmap blocks (two bitmaps of equal size are needed)",
                    h.bitmap_blocks
                ),
            });
        }
        let half = bitmaps_len / 2;
        if half > MAX_BITMAP_BYTES {
            return Err(VmcoreError::Unsupported(format!(
                "the dump's page bitmaps are {half:#x} bytes each (more than {} pages); csdump reads at most {MAX_BITMAP_BYTES:#x}",
                MAX_BITMAP_BYTES * 8
            )));
        }
        if file_len < pd_table {
            return Err(VmcoreError::Invalid {
                offset: file_len,
                what: format!(
                    "the file ends inside its page bitmaps, which end at file offset {pd_table:#x} (truncated dump)"
                ),
            });
        }
        let mem_map = read_bitmap(file, bitmaps_at, half, "page bitmap 1 (memory)")?;
        let file_map = read_bitmap(
            file,
            bitmaps_at + half,
            half,
            "page bitmap 2 (stored pages)",
        )?;
        let mut rank_base = Vec::with_capacity(file_map.len() / RANK_CHUNK_WORDS + 1);
        let mut rank = 0u64;
        for chunk in file_map.chunks(RANK_CHUNK_WORDS) {
            rank_base.push(rank);
            rank += chunk.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        }
        Ok(Kdump {
            block_size: bs,
            pd_table,
            mem_map,
            file_map,
            rank_base,
            file_len,
        })
    }

    fn bit(map: &[u64], pfn: u64) -> bool {
        usize::try_from(pfn / 64)
            .ok()
            .and_then(|i| map.get(i))
            .is_some_and(|w| w >> (pfn % 64) & 1 != 0)
    }

    /// The first page at or after `pfn` whose bit in `map` is `set`; `None` past the map.
    fn find(map: &[u64], pfn: u64, set: bool) -> Option<u64> {
        let mut i = usize::try_from(pfn / 64).ok()?;
        let flip = if set { 0 } else { u64::MAX };
        let mut w = (*map.get(i)? ^ flip) & (u64::MAX << (pfn % 64));
        loop {
            if w != 0 {
                return Some(i as u64 * 64 + u64::from(w.trailing_zeros()));
            }
            i += 1;
            w = *map.get(i)? ^ flip;
        }
    }

    /// Pages the bitmaps describe (stored or not).
    pub fn pages(&self) -> u64 {
        self.mem_map.len() as u64 * 64
    }

    /// Pages the file stores (bits set in bitmap 2).
    pub fn stored_pages(&self) -> u64 {
        let last = self.file_map.len().div_ceil(RANK_CHUNK_WORDS);
        let tail: u64 = self
            .file_map
            .get(last.saturating_sub(1) * RANK_CHUNK_WORDS..)
            .unwrap_or(&[])
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        self.rank_base.last().copied().unwrap_or(0) + tail
    }

    /// The first memory page at or after `pfn` (bitmap 1).
    pub fn next_memory_page(&self, pfn: u64) -> Option<u64> {
        Self::find(&self.mem_map, pfn, true)
    }

    /// Whether page `pfn` is memory this dump describes (bitmap 1).
    pub fn page_in_memory(&self, pfn: u64) -> bool {
        Self::bit(&self.mem_map, pfn)
    }

    /// Whether the file stores page `pfn` (bitmap 2).
    pub fn page_in_file(&self, pfn: u64) -> bool {
        Self::bit(&self.file_map, pfn)
    }

    /// The next run of stored pages at or after `pfn`: `(first, end)`, `end` exclusive.
    pub fn next_file_pages(&self, pfn: u64) -> Option<(u64, u64)> {
        let a = Self::find(&self.file_map, pfn, true)?;
        let b = Self::find(&self.file_map, a, false).unwrap_or(self.pages());
        Some((a, b))
    }

    /// The end (exclusive) of the run of memory pages from `pfn`; `pfn` when it is not memory.
    pub fn memory_run_end(&self, pfn: u64) -> u64 {
        if !self.page_in_memory(pfn) {
            return pfn;
        }
        Self::find(&self.mem_map, pfn, false).unwrap_or(self.pages())
    }

    /// Index of stored page `pfn` in the page descriptor table.
    fn rank(&self, pfn: u64) -> Option<u64> {
        let word = usize::try_from(pfn / 64).ok()?;
        let chunk = word / RANK_CHUNK_WORDS;
        let base = *self.rank_base.get(chunk)?;
        let from = chunk * RANK_CHUNK_WORDS;
        let whole: u64 = self
            .file_map
            .get(from..word)?
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        let part = self.file_map.get(word)? & ((1u64 << (pfn % 64)) - 1);
        Some(base + whole + u64::from(part.count_ones()))
    }

    /// Reads and checks the page descriptor of stored page `pfn`: `(data offset, size, flags)`.
    pub fn descriptor(&self, file: &File, pfn: u64) -> Result<(u64, u64, u32), String> {
        let rank = self
            .rank(pfn)
            .ok_or_else(|| format!("page {pfn:#x} is outside the page bitmaps"))?;
        let at = rank
            .checked_mul(PAGE_DESC_SIZE)
            .and_then(|r| r.checked_add(self.pd_table))
            .ok_or_else(|| "its page descriptor is past any file offset".to_string())?;
        let mut pd = [0u8; PAGE_DESC_SIZE as usize];
        let n = read_at(file, at, &mut pd).map_err(|e| format!("its page descriptor: {e}"))?;
        if n < pd.len() {
            return Err(format!(
                "its page descriptor: file offset {at:#x}: page descriptor needs {:#x} bytes, the file has {n:#x} (truncated?)",
                pd.len()
            ));
        }
        self.check_descriptor(at, &pd)
    }

    /// Checks a page descriptor read at file offset `at`.
    pub fn check_descriptor(&self, at: u64, pd: &[u8]) -> Result<(u64, u64, u32), String> {
        let off = le64(pd, 0);
        let size = u64::from(le32(pd, 8));
        let flags = le32(pd, 12);
        // makedumpfile stores a page compressed only when that makes it smaller, else as is;
        // one compression at a time.
        let compressed = flags & COMPRESSED;
        let bad = if compressed != 0 {
            !compressed.is_power_of_two() || size == 0 || size > self.block_size
        } else {
            size != self.block_size
        };
        if bad {
            return Err(format!(
                "its page descriptor (file offset {at:#x}) is corrupt: {size:#x} bytes, flags {flags:#x}"
            ));
        }
        if off.checked_add(size).is_none_or(|end| end > self.file_len) {
            return Err(format!(
                "its data ({size:#x} bytes at file offset {off:#x}) is past the end of the file ({:#x} bytes; truncated dump?)",
                self.file_len
            ));
        }
        Ok((off, size, flags))
    }

    /// Reads page `pfn` into `buf` (one block): stored, excluded or not memory (`buf` zeroed),
    /// or damaged (`buf` zeroed, with what is wrong). `scratch` holds compressed data.
    pub fn read_page(&self, file: &File, pfn: u64, buf: &mut [u8], scratch: &mut Vec<u8>) -> Page {
        if !self.page_in_file(pfn) {
            buf.fill(0);
            return if self.page_in_memory(pfn) {
                Page::Excluded
            } else {
                Page::NotMemory
            };
        }
        let r = self
            .descriptor(file, pfn)
            .and_then(|(off, size, flags)| self.read_data(file, off, size, flags, buf, scratch));
        match r {
            Ok(()) => Page::Stored,
            Err(why) => {
                buf.fill(0);
                Page::Damaged(why)
            }
        }
    }

    /// Reads a page's data, `size` bytes at `off` (checked by [`Self::check_descriptor`]),
    /// and decompresses it into `buf`.
    pub fn read_data(
        &self,
        file: &File,
        off: u64,
        size: u64,
        flags: u32,
        buf: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<(), String> {
        // `size` is at most one block (checked), and `buf` is one block.
        let size = usize::try_from(size).map_err(|_| "page data too large".to_string())?;
        if flags & COMPRESSED == 0 {
            let dst = buf
                .get_mut(..size)
                .ok_or_else(|| "page data larger than a page".to_string())?;
            return match read_at(file, off, dst) {
                Ok(n) if n == size => Ok(()),
                Ok(n) => Err(format!(
                    "its data ({size:#x} bytes at file offset {off:#x}) is cut after {n:#x} bytes (truncated dump?)"
                )),
                Err(e) => Err(format!("its data at file offset {off:#x}: {e}")),
            };
        }
        scratch.resize(size, 0);
        match read_at(file, off, scratch) {
            Ok(n) if n == size => {}
            Ok(n) => {
                return Err(format!(
                    "its data ({size:#x} bytes at file offset {off:#x}) is cut after {n:#x} bytes (truncated dump?)"
                ))
            }
            Err(e) => return Err(format!("its data at file offset {off:#x}: {e}")),
        }
        decompress(flags, scratch, buf).map_err(|e| {
            format!(
                "its {} data ({size:#x} bytes at file offset {off:#x}) does not decompress to a {:#x}-byte page: {e}",
                compression_name(flags),
                buf.len()
            )
        })
    }
}

/// Decompresses one page, `src`, compressed as `flags` says, into all of `dst`: the data must
/// decompress to exactly `dst.len()` bytes.
pub fn decompress(flags: u32, src: &[u8], dst: &mut [u8]) -> Result<(), String> {
    if flags & FLAG_ZLIB != 0 {
        let mut z = flate2::Decompress::new(true);
        let st = z
            .decompress(src, dst, flate2::FlushDecompress::Finish)
            .map_err(|e| format!("zlib: {e}"))?;
        if st != flate2::Status::StreamEnd {
            return Err(format!(
                "zlib: the stream does not end within the page ({:#x} bytes out)",
                z.total_out()
            ));
        }
        if z.total_out() != dst.len() as u64 {
            return Err(format!("zlib: {:#x} bytes out", z.total_out()));
        }
        Ok(())
    } else if flags & FLAG_LZO != 0 {
        lzo1x::decompress(src, dst).map_err(|e| format!("lzo: {e}"))
    } else if flags & FLAG_SNAPPY != 0 {
        let n = snap::raw::decompress_len(src).map_err(|e| format!("snappy: {e}"))?;
        if n != dst.len() {
            return Err(format!("snappy: the data says {n:#x} bytes"));
        }
        let got = snap::raw::Decoder::new()
            .decompress(src, dst)
            .map_err(|e| format!("snappy: {e}"))?;
        if got != dst.len() {
            return Err(format!("snappy: {got:#x} bytes out"));
        }
        Ok(())
    } else if flags & FLAG_ZSTD != 0 {
        use std::io::Read;
        let mut dec = ruzstd::decoding::FrameDecoder::new();
        dec.set_max_window_size(MAX_ZSTD_WINDOW);
        let mut r = ruzstd::decoding::StreamingDecoder::new_with_decoder(src, dec)
            .map_err(|e| format!("zstd: {e}"))?;
        let mut done = 0;
        while done < dst.len() {
            match r.read(&mut dst[done..]) {
                Ok(0) => return Err(format!("zstd: {done:#x} bytes out")),
                Ok(n) => done += n,
                Err(e) => return Err(format!("zstd: {e}")),
            }
        }
        let mut extra = [0u8; 1];
        match r.read(&mut extra) {
            Ok(0) => Ok(()),
            Ok(_) => Err("zstd: more than a page out".into()),
            Err(e) => Err(format!("zstd: {e}")),
        }
    } else {
        dst.copy_from_slice(src.get(..dst.len()).ok_or("page data too short")?);
        Ok(())
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The dump ABI: the one layout of the CoreSight panic dump region, its records and their
//! payloads, the CRC, the writer the kernel uses and the reader the host tool uses.
//!
//! All integers are little-endian; every offset is a byte offset from the start of the region.
//!
//! - Container header (64 bytes) at offset 0: magic `b"CSPDUMP\0"`, version u16 (3; 2 is read
//!   too), header size
//!   u16 (64), record header size u16 (80), flags u16, region size u64, boot id `[u8; 16]`, stamp
//!   u64 (first 8 bytes of the boot id), sequence u64 (dump counter across boots), offset of the
//!   first record u32 (8-aligned), header CRC u32 (over the 64 bytes with the CRC field zero).
//!   ([`layout`])
//! - Records follow back to back, each an 80-byte header then `capacity` data bytes; the next
//!   record starts at `offset + 80 + capacity`. Header: magic `b"CSPR"`, kind u16, status u16,
//!   cpu u32 (`u32::MAX` = none), error i32 (negative errno), capacity u32 (multiple of 8), length
//!   u32 (<= capacity), data CRC u32 (over `data[..length]`), flags u32, stamp u64 (the
//!   container's), name `[u8; 32]` (NUL-padded), header CRC u32 (CRC field zero), payload type
//!   u16 ([`PayloadType`]: what layout the data has), reserved u16. ([`layout`])
//! - A zero magic ends the chain (readers look past a zeroed or broken header for the next valid
//!   one, so one bad record hides no other). `Free` records are skipped by readers. The
//!   `Commit` record is written last at panic; its 40-byte payload holds stamp, sequence, number of
//!   records before it, CRC over their headers in order, used bytes (end of the commit record)
//!   and its own CRC. A region with no commit is a torn (or not yet written) dump. ([`commit`],
//!   [`reader`], [`writer`])
//! - Payloads of the core's records: `Identity` (144 bytes: release `[u8; 64]`, build id
//!   `[u8; 20]`, build id length u8, 3 pad, then u64 each: KASLR offset, `_text`, `PAGE_OFFSET`,
//!   `memstart_addr`, `kimage_voffset`, region address, region size; [`identity`]); `PanicInfo`
//!   (cpu u32, flags u32 with bit 0 = truncated, message length u32, reserved u32, then up to 1024
//!   bytes; [`panic_info`]); `Phases` (format version 3: the counter frequency and, for each phase
//!   of the panic path, its start and end counts; [`phases`]).
//! - Payloads of the drivers' records, one module each: the TMC's trace RAM ([`tmc`]), a TMC-ETR's
//!   registers and buffer ([`etr`], with the attachment that carries a reserved trace buffer
//!   behind the region after a warm reboot), an ETMv4's registers ([`etm4x`]), a CPU's PC sample
//!   ([`cpu_debug`]). A C client's record is [`PayloadType::Opaque`].
//! - CRC is CRC-32/IEEE (reflected 0xEDB88320, init and xorout 0xFFFFFFFF), as `~crc32_le(~0, ..)`
//!   ([`crc`]).
//! - The region's address and size are published in vmcoreinfo ([`vmcoreinfo`]).
//! - A record's flags say who wrote it when the panic path did not: the kernel while it ran (a
//!   trace source's decode metadata, at enable; a commit made then) or a kdump capture kernel,
//!   which hands its records over in containers of their own ([`capture`]).
//!
//! The module is plain `core` Rust with no allocation, no panic on bad input and no unbounded
//! loop. It is compiled into the kernel crate and, unchanged, into the host crates (through
//! `crates/kernel-host`, at the same module path): its files use only `core`, each other, and
//! [`kernel::crc`].

mod bytes;
pub mod capture;
pub mod commit;
pub mod cpu_debug;
pub mod crc;
pub mod error;
pub mod etm4x;
pub mod etr;
pub mod identity;
pub mod layout;
pub mod modules;
pub mod panic_info;
pub mod phases;
pub mod reader;
mod sink;
#[cfg(CONFIG_CORESIGHT_PANIC_DUMP_KUNIT_TEST)]
mod tests;
pub mod tmc;
pub mod vmcoreinfo;
pub mod writer;

pub use self::{
    commit::*,
    crc::{
        crc32,
        Crc32, //
    },
    error::FormatError,
    identity::*,
    layout::*,
    modules::*,
    panic_info::*,
    phases::*,
    reader::*,
    vmcoreinfo::*,
    writer::*, //
};

// SPDX-License-Identifier: GPL-2.0

//! The writer of a region, the one the kernel uses: a fresh container with the core's records,
//! the slots of the registrations, records sealed with their CRCs, and the commit written last.
//!
//! Shared with the host (`crates/kernel-host`), where the tests build their dumps with it: uses
//! only `core` and its siblings.

use super::{
    bytes::{
        out_need,
        put, //
    },
    chain_end,
    crc::crc32,
    layout::{
        align_up,
        ContainerHeader,
        RecordHeader,
        RecordKind,
        RecordStatus,
        CONTAINER_HEADER_SIZE,
        RECORD_ALIGN,
        RECORD_HEADER_SIZE, //
    },
    modules_capacity,
    modules_init,
    modules_size,
    Commit,
    FormatError,
    Identity,
    COMMIT_RECORD_SIZE,
    COMMIT_SIZE,
    IDENTITY_SIZE,
    MODULES_HEADER_SIZE,
    PANIC_INFO_MAX_SIZE,
    PHASES_SIZE, //
};

/// Finishes a record in place: computes the data CRC and writes the header.
///
/// `slot` is the record's bytes in the region (header then data area, at least
/// `RECORD_HEADER_SIZE + header.length` bytes). Returns the header as written.
pub fn seal_record(slot: &mut [u8], header: &RecordHeader) -> Result<RecordHeader, FormatError> {
    if header.length > header.capacity {
        return Err(FormatError::FieldTooLong {
            field: "record length",
            length: usize::try_from(header.length).unwrap_or(usize::MAX),
            max: usize::try_from(header.capacity).unwrap_or(usize::MAX),
        });
    }
    let length = usize::try_from(header.length).unwrap_or(usize::MAX);
    let end = RECORD_HEADER_SIZE.saturating_add(length);
    out_need(slot, end)?;
    let mut h = *header;
    h.data_crc = crc32(slot.get(RECORD_HEADER_SIZE..end).unwrap_or(&[]));
    put(slot, 0, &h.encode());
    Ok(h)
}

/// Makes the record header at `offset` whole again if a write of it was cut short.
///
/// The core writes a slot's header when a client registers or unregisters; a CPU stopped by a
/// panic in the middle of that write leaves a header that is part old, part new, and the chain
/// walk ([`chain_end`]) refuses a header whose CRC fails, which would cost the whole commit. The
/// core knows every slot's place and capacity without reading the region: a header there that
/// does not decode, or does not have that capacity, is rewritten as a free slot of that capacity
/// (the registration it belonged to was not complete). Returns whether it was rewritten.
pub fn repair_header(
    region: &mut [u8],
    offset: usize,
    capacity: u32,
    stamp: u64,
) -> Result<bool, FormatError> {
    let end = offset
        .checked_add(RECORD_HEADER_SIZE)
        .ok_or(FormatError::BufferTooSmall {
            needed: usize::MAX,
            available: region.len(),
        })?;
    let Some(raw) = region.get(offset..end) else {
        return Err(FormatError::BufferTooSmall {
            needed: end,
            available: region.len(),
        });
    };
    if RecordHeader::decode_at(raw, offset).is_ok_and(|h| h.capacity == capacity) {
        return Ok(false);
    }
    let free = RecordHeader::new(RecordKind::Free, b"", capacity, stamp);
    let slot = region.get_mut(offset..).unwrap_or(&mut []);
    seal_record(slot, &free)?;
    Ok(true)
}

/// Writes `data` into the data area of the record at the start of `slot` and seals it.
///
/// The header written is `header` with `length` set to `data.len()` and the data CRC computed.
/// Returns the header as written.
pub fn write_record(
    slot: &mut [u8],
    header: &RecordHeader,
    data: &[u8],
) -> Result<RecordHeader, FormatError> {
    let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
    if length > header.capacity {
        return Err(FormatError::FieldTooLong {
            field: "record data",
            length: data.len(),
            max: usize::try_from(header.capacity).unwrap_or(usize::MAX),
        });
    }
    let start = RECORD_HEADER_SIZE;
    let end = start.saturating_add(data.len());
    out_need(slot, end)?;
    put(slot, start, data);
    let mut h = *header;
    h.length = length;
    seal_record(slot, &h)
}

/// Writes a container header at the start of `region` and zeroes the rest of the region.
///
/// Called at boot, once what a previous boot left has been read. Fails if `region` is shorter
/// than `header.region_size` or than a container header.
pub fn init_region(region: &mut [u8], header: &ContainerHeader) -> Result<(), FormatError> {
    let size = usize::try_from(header.region_size).unwrap_or(usize::MAX);
    let size = size.max(CONTAINER_HEADER_SIZE);
    let available = region.len();
    let r = region.get_mut(..size).ok_or(FormatError::BufferTooSmall {
        needed: size,
        available,
    })?;
    r.fill(0);
    put(r, 0, &header.encode());
    Ok(())
}

/// Appends a record at the end of the chain and returns its region offset.
///
/// The header is written as given (its data CRC computed over the first `length` bytes of the
/// data area, which is zeroed first). Room for [`COMMIT_RECORD_SIZE`] bytes is kept after it so
/// that the commit always fits.
pub fn append_record(region: &mut [u8], header: &RecordHeader) -> Result<usize, FormatError> {
    let container = ContainerHeader::decode(region)?;
    let end = chain_end(region)?;
    let size = usize::try_from(container.region_size)
        .unwrap_or(usize::MAX)
        .min(region.len());
    let record = header.record_size().ok_or(FormatError::BufferTooSmall {
        needed: usize::MAX,
        available: size,
    })?;
    let record_end = end.offset.checked_add(record);
    let needed = record_end.and_then(|e| e.checked_add(COMMIT_RECORD_SIZE));
    let (Some(record_end), Some(needed)) = (record_end, needed) else {
        return Err(FormatError::BufferTooSmall {
            needed: usize::MAX,
            available: size,
        });
    };
    if needed > size {
        return Err(FormatError::BufferTooSmall {
            needed,
            available: size,
        });
    }
    if header.capacity & (RECORD_ALIGN as u32 - 1) != 0 {
        return Err(FormatError::BadCapacity {
            offset: end.offset,
            capacity: header.capacity,
        });
    }
    let slot = region
        .get_mut(end.offset..record_end)
        .ok_or(FormatError::BufferTooSmall {
            needed: record_end,
            available: size,
        })?;
    slot.fill(0);
    seal_record(slot, header)?;
    Ok(end.offset)
}

/// Writes the commit record at the end of the chain and returns the region's used bytes.
///
/// Called last at panic, after every other record is sealed. Fails (writing nothing) if the
/// chain is broken or there is no room for [`COMMIT_RECORD_SIZE`] bytes.
pub fn write_commit(region: &mut [u8]) -> Result<usize, FormatError> {
    write_commit_flagged(region, 0)
}

/// Writes the commit record as [`write_commit`] does, its header carrying `flags`
/// ([`RECORD_FLAG_RUNTIME`](super::RECORD_FLAG_RUNTIME) for a commit made while the kernel ran).
pub fn write_commit_flagged(region: &mut [u8], flags: u32) -> Result<usize, FormatError> {
    let header = ContainerHeader::decode(region)?;
    let end = chain_end(region)?;
    let used = end
        .offset
        .checked_add(COMMIT_RECORD_SIZE)
        .ok_or(FormatError::BufferTooSmall {
            needed: usize::MAX,
            available: region.len(),
        })?;
    let size = usize::try_from(header.region_size)
        .unwrap_or(usize::MAX)
        .min(region.len());
    if used > size {
        return Err(FormatError::BufferTooSmall {
            needed: used,
            available: size,
        });
    }
    let commit = Commit {
        stamp: header.stamp,
        sequence: header.sequence,
        records: end.records,
        headers_crc: end.headers_crc,
        used_bytes: u64::try_from(used).unwrap_or(u64::MAX),
    };
    let slot = region
        .get_mut(end.offset..used)
        .ok_or(FormatError::BufferTooSmall {
            needed: used,
            available: size,
        })?;
    let data = slot.get_mut(RECORD_HEADER_SIZE..).unwrap_or(&mut []);
    commit.encode(data)?;
    // CAST: COMMIT_SIZE is a small constant.
    let mut h = core_header(
        RecordKind::Commit,
        b"commit",
        COMMIT_SIZE as u32,
        header.stamp,
    );
    h.length = COMMIT_SIZE as u32;
    h.flags = flags;
    seal_record(slot, &h)?;
    Ok(used)
}

/// The header of a record the core writes itself (identity, commit): status ok.
fn core_header(kind: RecordKind, name: &[u8], capacity: u32, stamp: u64) -> RecordHeader {
    let mut h = RecordHeader::new(kind, name, capacity, stamp);
    h.status = RecordStatus::Ok;
    h
}

/// Where the core's records of a fresh region are, from [`init_with_core_records`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreSlots {
    /// Offset of the panic info record, written at panic.
    pub panic_info: usize,
    /// Offset of the phase times record, written at panic before the last commit.
    pub phases: usize,
    /// Offset of the module list record, kept current while the kernel runs.
    pub modules: usize,
    /// Offset of the first byte after the core's records: where the first registration goes.
    pub first_free: usize,
}

/// Writes a fresh container: the header, the identity record (written, [`RecordStatus::Ok`]), the
/// panic info slot of [`PANIC_INFO_MAX_SIZE`] bytes and the phase times slot of [`PHASES_SIZE`]
/// bytes (both not run), and the module list with room for [`modules_capacity`] modules (written,
/// empty); zeroes the rest.
///
/// Called at boot, once what a previous boot left has been read.
pub fn init_with_core_records(
    region: &mut [u8],
    header: &ContainerHeader,
    identity: &Identity,
) -> Result<CoreSlots, FormatError> {
    init_region(region, header)?;
    let mut data = [0u8; IDENTITY_SIZE];
    let n = identity.encode(&mut data)?;
    // CAST: a small constant.
    let h = core_header(
        RecordKind::Identity,
        b"identity",
        IDENTITY_SIZE as u32,
        header.stamp,
    );
    let first = usize::try_from(header.first_record).unwrap_or(usize::MAX);
    let available = region.len();
    let slot = region.get_mut(first..).ok_or(FormatError::BufferTooSmall {
        needed: first,
        available,
    })?;
    write_record(slot, &h, data.get(..n).unwrap_or(&[]))?;

    // The panic info slot waits, not run, for the panic.
    // CAST: a small constant.
    let h = RecordHeader::new(
        RecordKind::PanicInfo,
        b"panic",
        PANIC_INFO_MAX_SIZE as u32,
        header.stamp,
    );
    let panic_info = first.saturating_add(RECORD_HEADER_SIZE + IDENTITY_SIZE);
    let end = panic_info.saturating_add(RECORD_HEADER_SIZE);
    let slot = region
        .get_mut(panic_info..end)
        .ok_or(FormatError::BufferTooSmall {
            needed: end,
            available,
        })?;
    put(slot, 0, &h.encode());

    // The phase times slot, written at panic before the last commit.
    // CAST: a small constant.
    let h = RecordHeader::new(
        RecordKind::Phases,
        b"phases",
        PHASES_SIZE as u32,
        header.stamp,
    );
    let phases = panic_info.saturating_add(RECORD_HEADER_SIZE + PANIC_INFO_MAX_SIZE);
    let end = phases.saturating_add(RECORD_HEADER_SIZE);
    let slot = region
        .get_mut(phases..end)
        .ok_or(FormatError::BufferTooSmall {
            needed: end,
            available,
        })?;
    put(slot, 0, &h.encode());

    // The module list, empty until the first module loads.
    // CAST: small constants.
    let capacity = modules_capacity(available);
    let size = modules_size(capacity);
    // CAST: at most MODULES_MAX entries, a small size.
    let mut h = RecordHeader::new(RecordKind::Modules, b"modules", size as u32, header.stamp);
    h.status = RecordStatus::Ok;
    let modules = phases.saturating_add(RECORD_HEADER_SIZE + PHASES_SIZE);
    let end = modules
        .saturating_add(RECORD_HEADER_SIZE)
        .saturating_add(size);
    let slot = region
        .get_mut(modules..end)
        .ok_or(FormatError::BufferTooSmall {
            needed: end,
            available,
        })?;
    let mut data = [0u8; MODULES_HEADER_SIZE];
    // CAST: at most MODULES_MAX.
    modules_init(&mut data, capacity as u32)?;
    write_record(slot, &h, &data)?;
    Ok(CoreSlots {
        panic_info,
        phases,
        modules,
        first_free: end,
    })
}

/// Hands out the slots of the registrations, back to back after the core's records, each with
/// room left for the commit record after it.
///
/// The kernel reserves a slot when a driver registers, never at panic time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotAllocator {
    next: usize,
    size: usize,
}

impl SlotAllocator {
    /// Starts handing out slots at `first_free` (see [`CoreSlots`]) in a region of `size` bytes.
    pub const fn new(first_free: usize, size: usize) -> Self {
        Self {
            next: first_free,
            size,
        }
    }

    /// Returns the capacity of the slot a registration of `max_bytes` gets: rounded up to
    /// [`RECORD_ALIGN`]. `None` when it does not fit a record header's 32-bit capacity.
    pub fn capacity_for(max_bytes: usize) -> Option<u32> {
        u32::try_from(align_up(max_bytes)?).ok()
    }

    /// Returns the offset where the next slot would start: the bytes in use so far.
    pub const fn used(&self) -> usize {
        self.next
    }

    /// Reserves a slot of `capacity` data bytes (a multiple of [`RECORD_ALIGN`]) and returns its
    /// offset; fails when the slot and the commit record after it do not fit in the region.
    pub fn reserve(&mut self, capacity: u32) -> Result<usize, FormatError> {
        if capacity & (RECORD_ALIGN as u32 - 1) != 0 {
            return Err(FormatError::BadCapacity {
                offset: self.next,
                capacity,
            });
        }
        let cap = usize::try_from(capacity).unwrap_or(usize::MAX);
        let end = self
            .next
            .checked_add(RECORD_HEADER_SIZE)
            .and_then(|v| v.checked_add(cap));
        let needed = end.and_then(|e| e.checked_add(COMMIT_RECORD_SIZE));
        match (end, needed) {
            (Some(end), Some(needed)) if needed <= self.size => {
                let slot = self.next;
                self.next = end;
                Ok(slot)
            }
            (_, needed) => Err(FormatError::BufferTooSmall {
                needed: needed.unwrap_or(usize::MAX),
                available: self.size,
            }),
        }
    }
}

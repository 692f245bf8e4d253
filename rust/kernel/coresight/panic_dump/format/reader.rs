// SPDX-License-Identifier: GPL-2.0

//! The reader of a region: the container header checked against the region, the walk over the
//! records (which goes on past a broken one), the validation summary, and the end of the chain
//! (where the kernel writes the commit).
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::get_u32,
    crc::{
        crc32,
        crc_with_zero_field,
        Crc32, //
    },
    layout::{
        align_up,
        ContainerHeader,
        RecordHeader,
        RecordKind,
        RecordStatus,
        CONTAINER_HEADER_SIZE,
        RECORD_ALIGN,
        RECORD_HEADER_SIZE,
        RECORD_MAGIC,
        RH_CAPACITY,
        RH_CRC,
        RH_MAGIC, //
    },
    Commit,
    FormatError, //
};

/// A record read from a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Region offset of the record header.
    pub offset: usize,
    /// The decoded header.
    pub header: RecordHeader,
    /// The data written, `length` bytes.
    pub data: &'a [u8],
}

impl Record<'_> {
    /// Returns the region offset of the record's data area.
    pub fn data_offset(&self) -> usize {
        self.offset.saturating_add(RECORD_HEADER_SIZE)
    }
}

/// A validated container header over the bytes of a region.
#[derive(Clone, Copy, Debug)]
pub struct Region<'a> {
    bytes: &'a [u8],
    header: ContainerHeader,
}

/// Parses the container header at the start of `bytes` and checks it against the region.
///
/// `bytes` may be longer than the region (the rest is ignored) but not shorter. Records are read
/// with [`Region::records`].
pub fn parse_region(bytes: &[u8]) -> Result<Region<'_>, FormatError> {
    let header = ContainerHeader::decode(bytes)?;
    let size = usize::try_from(header.region_size).unwrap_or(usize::MAX);
    if size < CONTAINER_HEADER_SIZE {
        return Err(FormatError::Truncated {
            offset: 0,
            needed: CONTAINER_HEADER_SIZE,
            available: size,
        });
    }
    let region = bytes.get(..size).ok_or(FormatError::Truncated {
        offset: 0,
        needed: size,
        available: bytes.len(),
    })?;
    let first = usize::try_from(header.first_record).unwrap_or(usize::MAX);
    if first < CONTAINER_HEADER_SIZE || first & (RECORD_ALIGN - 1) != 0 || first > size {
        return Err(FormatError::BadFirstRecord {
            offset: 0,
            first_record: header.first_record,
        });
    }
    Ok(Region {
        bytes: region,
        header,
    })
}

impl<'a> Region<'a> {
    /// Returns the container header.
    pub fn header(&self) -> &ContainerHeader {
        &self.header
    }

    /// Returns the region's bytes (`region_size` of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Returns an iterator over the records, skipping free ones.
    pub fn records(&self) -> Records<'a> {
        Records {
            bytes: self.bytes,
            stamp: self.header.stamp,
            sequence: self.header.sequence,
            offset: usize::try_from(self.header.first_record).unwrap_or(usize::MAX),
            count: 0,
            crc: Crc32::new(),
            include_free: false,
            state: IterState::Walking,
        }
    }

    /// Returns an iterator over the records, free ones included.
    pub fn records_with_free(&self) -> Records<'a> {
        let mut r = self.records();
        r.include_free = true;
        r
    }

    /// Reads the record header at `offset` without checking its CRC, stamp or data.
    ///
    /// For salvaging the data of a record whose checks failed: the length is cut to the
    /// capacity and to the region. Returns `None` if there is no record magic at `offset` or the
    /// kind or status is unknown.
    pub fn salvage(&self, offset: usize) -> Option<Record<'a>> {
        let raw = self
            .bytes
            .get(offset..offset.checked_add(RECORD_HEADER_SIZE)?)?;
        let mut header = RecordHeader::decode_unchecked(raw)?;
        let length = header.length.min(header.capacity);
        let start = offset.checked_add(RECORD_HEADER_SIZE)?;
        let avail = self.bytes.len().saturating_sub(start);
        let n = usize::try_from(length).ok()?.min(avail);
        let data = self.bytes.get(start..start.checked_add(n)?)?;
        // CAST: n is at most length, a u32.
        header.length = n as u32;
        Some(Record {
            offset,
            header,
            data,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IterState {
    Walking,
    Done,
}

/// Iterator over the records of a region, from [`Region::records`].
///
/// Yields each record, or an error for a record that fails its checks; after an error the walk
/// goes on with the next record (found by its capacity when the header is sound, else by looking
/// for the next valid header at the following 8-byte boundaries), so one corrupt record does not
/// hide the others. The commit record is yielded (after its checks) and ends the walk; a chain
/// that ends without one yields [`FormatError::MissingCommit`] last.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    stamp: u64,
    sequence: u64,
    offset: usize,
    count: u32,
    crc: Crc32,
    include_free: bool,
    state: IterState,
}

/// Whether a valid record header (magic and CRC) starts at `off`.
fn header_valid_at(bytes: &[u8], off: usize) -> bool {
    match off.checked_add(RECORD_HEADER_SIZE) {
        Some(end) => match bytes.get(off..end) {
            Some(raw) => {
                get_u32(raw, RH_MAGIC) == RECORD_MAGIC
                    && get_u32(raw, RH_CRC) == crc_with_zero_field(raw, RH_CRC)
            }
            None => false,
        },
        None => false,
    }
}

/// Finds the next 8-aligned offset at or after `from` holding a valid record header.
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    let mut off = align_up(from)?;
    let last = bytes.len().checked_sub(RECORD_HEADER_SIZE)?;
    while off <= last {
        if header_valid_at(bytes, off) {
            return Some(off);
        }
        off = off.checked_add(RECORD_ALIGN)?;
    }
    None
}

impl<'a> Records<'a> {
    /// Returns the region offset the walk has reached.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Moves to the next valid header after a broken one at `at`; ends the walk with a missing
    /// commit if there is none.
    fn skip_broken(&mut self, at: usize) {
        match resync(self.bytes, at.saturating_add(RECORD_ALIGN)) {
            Some(next) => self.offset = next,
            None => {
                // No record after this one: the walk ends at `at`, without a commit.
                self.offset = self.bytes.len();
            }
        }
    }

    fn account(&mut self, off: usize) {
        if let Some(raw) = off
            .checked_add(RECORD_HEADER_SIZE)
            .and_then(|end| self.bytes.get(off..end))
        {
            self.crc.update(raw);
        }
        self.count = self.count.saturating_add(1);
    }

    fn check_commit(&self, rec: &Record<'a>, end: usize) -> Result<(), FormatError> {
        let offset = rec.offset;
        let c = Commit::decode_at(rec.data, offset)?;
        if c.stamp != self.stamp {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "stamp",
                stored: c.stamp,
                expected: self.stamp,
            });
        }
        if c.sequence != self.sequence {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "sequence",
                stored: c.sequence,
                expected: self.sequence,
            });
        }
        if c.records != self.count {
            return Err(FormatError::CommitCount {
                offset,
                stored: c.records,
                counted: self.count,
            });
        }
        let computed = self.crc.finish();
        if c.headers_crc != computed {
            return Err(FormatError::CommitHeadersCrc {
                offset,
                stored: c.headers_crc,
                computed,
            });
        }
        let end = u64::try_from(end).unwrap_or(u64::MAX);
        if c.used_bytes != end {
            return Err(FormatError::CommitMismatch {
                offset,
                field: "used bytes",
                stored: c.used_bytes,
                expected: end,
            });
        }
        Ok(())
    }

    /// Reads one step of the walk: `None` when done, `Some(None)` for a skipped free record.
    fn step(&mut self) -> Option<Option<Result<Record<'a>, FormatError>>> {
        if self.state == IterState::Done {
            return None;
        }
        let off = self.offset;
        let available = self.bytes.len().saturating_sub(off);
        if available < RECORD_HEADER_SIZE {
            self.state = IterState::Done;
            return Some(Some(Err(FormatError::MissingCommit { offset: off })));
        }
        let raw = self.bytes.get(off..).unwrap_or(&[]);
        let magic = get_u32(raw, RH_MAGIC);
        if magic == 0 {
            // End of the chain, unless a valid header follows a zeroed one.
            match resync(self.bytes, off.saturating_add(RECORD_ALIGN)) {
                Some(next) => {
                    self.offset = next;
                    return Some(Some(Err(FormatError::BadRecordMagic {
                        offset: off,
                        found: 0,
                    })));
                }
                None => {
                    self.state = IterState::Done;
                    return Some(Some(Err(FormatError::MissingCommit { offset: off })));
                }
            }
        }
        let header = match RecordHeader::decode_at(raw, off) {
            Ok(h) => h,
            Err(e) => {
                match e {
                    FormatError::LengthExceedsCapacity { .. }
                    | FormatError::UnknownKind { .. }
                    | FormatError::UnknownStatus { .. }
                    | FormatError::UnknownPayload { .. } => {
                        // The header itself is sound: its capacity finds the next record.
                        self.account(off);
                        let cap = usize::try_from(get_u32(raw, RH_CAPACITY)).unwrap_or(usize::MAX);
                        match off
                            .checked_add(RECORD_HEADER_SIZE)
                            .and_then(|v| v.checked_add(cap))
                        {
                            Some(next) if next <= self.bytes.len() => self.offset = next,
                            _ => self.skip_broken(off),
                        }
                    }
                    _ => self.skip_broken(off),
                }
                return Some(Some(Err(e)));
            }
        };
        let cap = usize::try_from(header.capacity).unwrap_or(usize::MAX);
        let end = match off
            .checked_add(RECORD_HEADER_SIZE)
            .and_then(|v| v.checked_add(cap))
        {
            Some(end) if end <= self.bytes.len() => end,
            _ => {
                self.skip_broken(off);
                return Some(Some(Err(FormatError::Truncated {
                    offset: off,
                    needed: RECORD_HEADER_SIZE.saturating_add(cap),
                    available,
                })));
            }
        };
        let is_commit = header.kind == RecordKind::Commit;
        self.offset = end;
        let data_start = off.saturating_add(RECORD_HEADER_SIZE);
        let length = usize::try_from(header.length).unwrap_or(usize::MAX);
        let data = self
            .bytes
            .get(data_start..data_start.saturating_add(length))
            .unwrap_or(&[]);
        let record = Record {
            offset: off,
            header,
            data,
        };
        if header.stamp != self.stamp {
            if is_commit {
                // A commit, even a broken one, ends the chain.
                self.state = IterState::Done;
            } else {
                self.account(off);
            }
            return Some(Some(Err(FormatError::StaleRecord {
                offset: off,
                stamp: header.stamp,
                expected: self.stamp,
            })));
        }
        let computed = crc32(data);
        if computed != header.data_crc {
            if is_commit {
                self.state = IterState::Done;
            } else {
                self.account(off);
            }
            return Some(Some(Err(FormatError::DataCrc {
                offset: off,
                stored: header.data_crc,
                computed,
            })));
        }
        if is_commit {
            self.state = IterState::Done;
            return Some(Some(self.check_commit(&record, end).map(|()| record)));
        }
        self.account(off);
        if header.kind == RecordKind::Free && !self.include_free {
            return Some(None);
        }
        Some(Some(Ok(record)))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Every step either ends the walk or moves `offset` forward by at least 8 bytes, so the
        // loop is bounded by the region size.
        loop {
            if let Some(item) = self.step()? {
                return Some(item);
            }
        }
    }
}

/// Counts of what [`validate`] found in a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records that passed every check, commit and free ones not included.
    pub records: u32,
    /// Of those, records whose status is [`RecordStatus::Ok`].
    pub ok: u32,
    /// Free records skipped.
    pub free: u32,
    /// Records (or places where one was expected) that failed a check, commit included.
    pub errors: u32,
    /// Whether a commit record was found and passed its checks.
    pub committed: bool,
    /// Whether that commit was made while the kernel ran
    /// ([`RECORD_FLAG_RUNTIME`](super::RECORD_FLAG_RUNTIME)): no panic-time step ran since.
    pub runtime_commit: bool,
    /// The first error met, if any.
    pub first_error: Option<FormatError>,
    /// Bytes of the region the walk covered (end of the last record read).
    pub used_bytes: usize,
}

impl Summary {
    /// Whether the region holds a complete dump with no error.
    pub fn is_clean(&self) -> bool {
        self.committed && self.errors == 0
    }
}

/// Validates a region: the container header (an error there is fatal and returned), then every
/// record, counted in the [`Summary`] with the first record error.
pub fn validate(bytes: &[u8]) -> Result<Summary, FormatError> {
    let region = parse_region(bytes)?;
    let mut s = Summary::default();
    let mut it = region.records_with_free();
    while let Some(item) = it.next() {
        match item {
            Ok(r) if r.header.kind == RecordKind::Commit => {
                s.committed = true;
                s.runtime_commit = r.header.flags & super::RECORD_FLAG_RUNTIME != 0;
            }
            Ok(r) if r.header.kind == RecordKind::Free => s.free = s.free.saturating_add(1),
            Ok(r) => {
                s.records = s.records.saturating_add(1);
                if r.header.status == RecordStatus::Ok {
                    s.ok = s.ok.saturating_add(1);
                }
            }
            Err(e) => {
                s.errors = s.errors.saturating_add(1);
                if s.first_error.is_none() {
                    s.first_error = Some(e);
                }
            }
        }
        s.used_bytes = it.offset().min(region.bytes().len());
    }
    Ok(s)
}

/// Where the chain of records of a region ends, from [`chain_end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainEnd {
    /// Offset right after the last record: where the commit record goes.
    pub offset: usize,
    /// Number of records in the chain.
    pub records: u32,
    /// CRC over their headers, in order.
    pub headers_crc: u32,
}

/// Walks the record chain of a region strictly (every header must have its magic and CRC) up to
/// the first zero magic or a commit record.
///
/// This is what the kernel calls at panic to build the commit. It reads headers only.
pub fn chain_end(bytes: &[u8]) -> Result<ChainEnd, FormatError> {
    let region = parse_region(bytes)?;
    let b = region.bytes();
    let mut off = usize::try_from(region.header().first_record).unwrap_or(usize::MAX);
    let mut crc = Crc32::new();
    let mut records: u32 = 0;
    // Each pass moves at least RECORD_HEADER_SIZE bytes forward, so the loop is bounded.
    while let Some(end) = off.checked_add(RECORD_HEADER_SIZE) {
        let Some(raw) = b.get(off..end) else {
            break;
        };
        let magic = get_u32(raw, RH_MAGIC);
        if magic == 0 {
            break;
        }
        let h = RecordHeader::decode_at(raw, off)?;
        if h.kind == RecordKind::Commit {
            break;
        }
        let next = h
            .record_size()
            .and_then(|s| off.checked_add(s))
            .filter(|&n| n <= b.len())
            .ok_or(FormatError::Truncated {
                offset: off,
                needed: h.record_size().unwrap_or(usize::MAX),
                available: b.len().saturating_sub(off),
            })?;
        crc.update(raw);
        records = records.saturating_add(1);
        off = next;
    }
    Ok(ChainEnd {
        offset: off,
        records,
        headers_crc: crc.finish(),
    })
}

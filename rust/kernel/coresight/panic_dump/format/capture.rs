// SPDX-License-Identifier: GPL-2.0

//! What a kdump capture kernel hands over: a record it wrote from what the hardware kept after
//! the crash, in a container of its own, as a vmcore device dump.
//!
//! With `crash_kexec_post_notifiers` off, the crashed kernel runs no panic-time step: its trace
//! sources stopped in hardware, its trace sink kept what it had. The capture kernel's driver
//! drains the sink and writes the record the panic path would have written, flagged
//! [`RECORD_FLAG_CAPTURE`], into a small container (container header, the record, a commit):
//! it is read with [`parse_region`](super::parse_region) like the region, and a reader joins its
//! record to the crashed kernel's region, whose trace sources' records say how to decode it.
//!
//! The device dump is named [`CAPTURE_DUMP_PREFIX`] and the record's name (cut to fit the
//! kernel's 43-byte limit; the record inside has the whole name).
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::put,
    write_commit,
    ContainerHeader,
    FormatError,
    RecordHeader,
    BOOT_ID_SIZE,
    COMMIT_RECORD_SIZE,
    CONTAINER_HEADER_SIZE,
    RECORD_FLAG_CAPTURE,
    RECORD_HEADER_SIZE, //
};

/// Start of the name of a capture kernel's device dump.
pub const CAPTURE_DUMP_PREFIX: &str = "coresight_capture:";

/// Longest device dump name (the kernel's `VMCOREDD_MAX_NAME_BYTES` less its NUL).
pub const CAPTURE_DUMP_NAME_MAX: usize = 43;

/// Writes the device dump name of the record named `name` into `out`; returns its length, or
/// `None` when `out` is too short or `name` is empty. The name is cut to
/// [`CAPTURE_DUMP_NAME_MAX`] bytes.
pub fn capture_dump_name(name: &[u8], out: &mut [u8]) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let p = CAPTURE_DUMP_PREFIX.len();
    let len = (p + name.len()).min(CAPTURE_DUMP_NAME_MAX);
    let out = out.get_mut(..len)?;
    let (head, tail) = out.split_at_mut(p);
    head.copy_from_slice(CAPTURE_DUMP_PREFIX.as_bytes());
    tail.copy_from_slice(name.get(..len - p)?);
    Some(len)
}

/// Returns whether `name` is a capture kernel's device dump name.
pub fn is_capture_dump_name(name: &[u8]) -> bool {
    name.len() > CAPTURE_DUMP_PREFIX.len() && name.starts_with(CAPTURE_DUMP_PREFIX.as_bytes())
}

/// Bytes of a capture container holding one record of `capacity` data bytes, or `None` on
/// overflow or a capacity that is not a multiple of 8.
pub fn capture_container_size(capacity: u32) -> Option<usize> {
    if capacity & 7 != 0 {
        return None;
    }
    let cap = usize::try_from(capacity).ok()?;
    CONTAINER_HEADER_SIZE
        .checked_add(RECORD_HEADER_SIZE)?
        .checked_add(cap)?
        .checked_add(COMMIT_RECORD_SIZE)
}

/// The data area of the record in a capture container `buf` built by
/// [`capture_container_size`] for `capacity` bytes: where the caller writes the record's data
/// before [`seal_capture`].
pub fn capture_data_mut(buf: &mut [u8], capacity: u32) -> Option<&mut [u8]> {
    let start = CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE;
    let end = start.checked_add(usize::try_from(capacity).ok()?)?;
    buf.get_mut(start..end)
}

/// Finishes the capture container `buf`: its container header (`boot_id` is the capture
/// kernel's), the record `header` (its `length` bytes of data already in place, flagged
/// [`RECORD_FLAG_CAPTURE`]) and the commit. `buf` must be [`capture_container_size`] bytes for
/// `header.capacity`; returns the bytes used (all of them).
pub fn seal_capture(
    buf: &mut [u8],
    boot_id: [u8; BOOT_ID_SIZE],
    header: &RecordHeader,
) -> Result<usize, FormatError> {
    let size = capture_container_size(header.capacity).ok_or(FormatError::BadCapacity {
        offset: CONTAINER_HEADER_SIZE,
        capacity: header.capacity,
    })?;
    if buf.len() != size {
        return Err(FormatError::BufferTooSmall {
            needed: size,
            available: buf.len(),
        });
    }
    let container = ContainerHeader::new(u64::try_from(size).unwrap_or(u64::MAX), boot_id, 0);
    put(buf, 0, &container.encode());
    let mut h = *header;
    h.flags |= RECORD_FLAG_CAPTURE;
    h.stamp = container.stamp;
    let slot = buf.get_mut(CONTAINER_HEADER_SIZE..).unwrap_or(&mut []);
    super::seal_record(slot, &h)?;
    // Whatever followed the record (a previous use of the buffer) is not a record.
    let end = CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE + usize::try_from(h.capacity).unwrap_or(0);
    if let Some(rest) = buf.get_mut(end..) {
        rest.fill(0);
    }
    write_commit(buf)
}

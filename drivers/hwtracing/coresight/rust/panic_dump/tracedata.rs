// SPDX-License-Identifier: GPL-2.0

//! The TMC-ETR trace buffers that stay in reserved memory: how the dump reaches them after the
//! panic.
//!
//! An ETR whose device-tree node has a `tracedata` reserved region writes its trace there, and at
//! panic its record only says where the trace is (the format's
//! [`ETR_REC_IN_PLACE`](kernel::coresight::panic_dump::format::etr::ETR_REC_IN_PLACE)). Afterwards:
//!
//! - in a kdump capture kernel, a `no-map` region is not in `/proc/vmcore` (the crash headers list
//!   System RAM only), so [`hand_over`] adds every such region of a TMC node as a vmcore device
//!   dump, named by its physical address
//!   ([`tracedata_dump_name`](kernel::coresight::panic_dump::format::etr::tracedata_dump_name));
//! - after a warm reboot, [`attach_in_place`] reads each buffer a record of the previous dump
//!   left in place, from its reserved region, and appends it to the copy of that dump that
//!   `/dev/coresight_panic_dump` (and debugfs' `last_dump`) reads, as a
//!   [`TracedataAttachment`](kernel::coresight::panic_dump::format::etr::TracedataAttachment):
//!   the one file holds the dump and its trace.
//!
//! Each sink whose buffer was attached so also gets `/dev/crash_<sink>` ([`CrashTraceFile`]), the
//! name and contents of the TMC's crash data device in the C driver: the trace of the previous
//! boot's crash, oldest first.
//!
//! Only ranges inside a `tracedata` region of a node compatible with `arm,coresight-tmc` are ever
//! read, whatever a record says.

use kernel::{
    c_str,
    coresight::devfile::DevFile,
    coresight::panic_dump::format::{
        self,
        etr::{
            tracedata_dump_name,
            EtrRecord,
            TracedataAttachment,
            ETR_REC_IN_PLACE,
            TRACEDATA_DUMP_NAME_MAX, //
        },
        ContainerHeader,
        PayloadType,
        RecordKind,
        NAME_SIZE, //
    },
    crash_dump,
    iov::IovIterDest,
    prelude::*,
    reserved_mem::{
        Origin,
        ReservedRegion, //
    },
};

use super::LastDump;

/// The binding whose reserved regions hold trace buffers: the TMC's, `tracedata`.
const TMC_COMPATIBLE: &CStr = c_str!("arm,coresight-tmc");
const TRACEDATA: &CStr = c_str!("tracedata");

/// In a kdump capture kernel: adds each `no-map` `tracedata` region of a TMC node to
/// `/proc/vmcore` as a device dump, and leaves the regions as they are.
pub(crate) fn hand_over() {
    ReservedRegion::for_each_of_compatible(TMC_COMPATIBLE, TRACEDATA, |r| {
        if r.origin() != (Origin::DeviceTree { no_map: true }) {
            pr_info!(
                "kdump capture kernel: the trace buffer at {:#x} is System RAM, in /proc/vmcore as it is\n",
                r.base()
            );
        } else if let Err(e) = hand_over_region(&r) {
            pr_err!(
                "kdump capture kernel: could not hand the trace buffer at {:#x} over to /proc/vmcore: {:?}\n",
                r.base(),
                e
            );
        }
        true
    });
}

fn hand_over_region(r: &ReservedRegion) -> Result {
    let map = r.map()?;
    let mut name = [0u8; TRACEDATA_DUMP_NAME_MAX + 1];
    let n = tracedata_dump_name(r.base(), &mut name).ok_or(EINVAL)?;
    let name = CStr::from_bytes_with_nul(name.get(..=n).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    crash_dump::add_device_dump(name, map.len(), |buf| map.read(0, buf))?;
    pr_info!(
        "kdump capture kernel: trace buffer at {:#x} ({} KiB) added to /proc/vmcore as device dump {}\n",
        r.base(),
        map.len() / 1024,
        name
    );
    Ok(())
}

/// Returns the `tracedata` region of a TMC node that holds `[paddr, paddr + len)`.
fn region_holding(paddr: u64, len: u64) -> Option<ReservedRegion> {
    let mut found = None;
    ReservedRegion::for_each_of_compatible(TMC_COMPATIBLE, TRACEDATA, |r| {
        if r.contains(paddr, len) {
            found = Some(r);
            false
        } else {
            true
        }
    });
    found
}

/// Appends to `dump`, a copy of the previous boot's region, the trace buffers its ETR records
/// left in place, each read from its reserved region as a trace buffer attachment.
///
/// A buffer that is not inside a `tracedata` region of this boot's device tree, or that cannot be
/// read, is left out with a warning; the dump itself is kept as it is.
pub(crate) fn attach_in_place(mut dump: KVVec<u8>) -> KVVec<u8> {
    // (name, physical address, length) of each buffer to attach.
    let mut wanted: KVec<([u8; format::NAME_SIZE], u64, u64)> = KVec::new();
    if let Ok(region) = format::parse_region(&dump) {
        for rec in region.records().flatten() {
            if rec.header.kind != RecordKind::Sink || rec.header.payload != PayloadType::Etr {
                continue;
            }
            let Ok((h, _)) = EtrRecord::parse(rec.data) else {
                continue;
            };
            let Ok(layout) = h.layout() else {
                continue;
            };
            if h.has(ETR_REC_IN_PLACE) && h.buf_paddr != 0 {
                // The buffer as the ETR used it: `RSZ` words from its first byte.
                let _ = wanted.push((rec.header.name, h.buf_paddr, layout.size), GFP_KERNEL);
            }
        }
    }
    for (name, paddr, len) in wanted {
        let name = CStr::from_bytes_until_nul(&name).unwrap_or(c_str!("?"));
        match attach(&mut dump, paddr, len) {
            Ok(()) => pr_info!(
                "previous dump: trace buffer of {} at {:#x} ({} KiB) read from its tracedata region behind the dump\n",
                name,
                paddr,
                len / 1024
            ),
            Err(e) => pr_warn!(
                "previous dump: trace buffer of {} at {:#x} ({} bytes) not attached: {:?}\n",
                name,
                paddr,
                len,
                e
            ),
        }
    }
    dump
}

/// Reads `len` bytes at `paddr` from the `tracedata` region that holds them and appends them to
/// `dump` as an attachment.
fn attach(dump: &mut KVVec<u8>, paddr: u64, len: u64) -> Result {
    let region = region_holding(paddr, len).ok_or(ENOENT)?;
    let map = region.map()?;
    let offset = paddr
        .checked_sub(region.base())
        .and_then(|o| usize::try_from(o).ok())
        .ok_or(EINVAL)?;
    let len = usize::try_from(len).map_err(|_| EOVERFLOW)?;
    let total = TracedataAttachment::total_len(len).ok_or(EOVERFLOW)?;
    let start = dump.len();
    dump.resize(start + total, 0, GFP_KERNEL)?;
    let data_at = start + format::etr::ATTACHMENT_HEADER_LEN;
    let read = dump
        .get_mut(data_at..data_at + len)
        .ok_or(EINVAL)
        .and_then(|d| map.read(offset, d));
    if let Err(e) = read {
        dump.truncate(start);
        return Err(e);
    }
    let header =
        TracedataAttachment::header(paddr, dump.get(data_at..data_at + len).ok_or(EINVAL)?);
    dump.get_mut(start..data_at)
        .ok_or(EINVAL)?
        .copy_from_slice(&header);
    Ok(())
}

/// The ETR records of `dump` (a previous boot's region) that left their buffer in place: each
/// one's name, physical address and layout.
fn in_place_records(
    dump: &[u8],
    mut each: impl FnMut([u8; NAME_SIZE], u64, format::etr::EtrLayout),
) {
    let Ok(region) = format::parse_region(dump) else {
        return;
    };
    for rec in region.records().flatten() {
        if rec.header.kind != RecordKind::Sink || rec.header.payload != PayloadType::Etr {
            continue;
        }
        let Ok((h, _)) = EtrRecord::parse(rec.data) else {
            continue;
        };
        if let Ok(layout) = h.layout() {
            if h.has(ETR_REC_IN_PLACE) && h.buf_paddr != 0 {
                each(rec.header.name, h.buf_paddr, layout);
            }
        }
    }
}

/// The sinks of `dump` (a previous boot's region with its attachments) whose trace buffer is
/// attached behind it: the names `/dev/crash_<sink>` is registered for.
pub(crate) fn attached_sinks(dump: &[u8]) -> KVec<[u8; NAME_SIZE]> {
    let mut names = KVec::new();
    in_place_records(dump, |name, paddr, _| {
        if attachment(dump, paddr).is_some() {
            let _ = names.push(name, GFP_KERNEL);
        }
    });
    names
}

/// The data of the attachment of the buffer at `paddr` behind the region `dump` starts with.
fn attachment(dump: &[u8], paddr: u64) -> Option<&[u8]> {
    let size = usize::try_from(ContainerHeader::decode(dump).ok()?.region_size).ok()?;
    let mut found = None;
    // An attachment after a damaged one is not reached: that sink has no crash trace.
    let _ = TracedataAttachment::parse_all(dump.get(size..)?, |a| {
        if a.paddr == paddr {
            found = Some(a.data);
        }
    });
    found
}

/// The crash trace of sink `name` in `dump`: its buffer's trace oldest first, with the barrier
/// packet over the first bytes when the buffer wrapped (the stream starts inside a packet
/// there), as the C driver's crash device gives it.
fn crash_trace(dump: &[u8], name: &[u8; NAME_SIZE]) -> Result<KVVec<u8>> {
    let mut wanted = None;
    in_place_records(dump, |n, paddr, layout| {
        if n == *name {
            wanted = Some((paddr, layout));
        }
    });
    let (paddr, layout) = wanted.ok_or(ENOENT)?;
    let data = attachment(dump, paddr).ok_or(ENOENT)?;
    let len = usize::try_from(layout.len).map_err(|_| EOVERFLOW)?;
    let mut out = KVVec::from_elem(0u8, len, GFP_KERNEL)?;
    layout.copy_oldest_first(data, &mut out).ok_or(EINVAL)?;
    Ok(out)
}

/// What `/dev/crash_<sink>` reads: the previous boot's dump and the sink's name in it.
pub(crate) struct CrashTrace {
    /// The previous boot's dump, with its attachments; emptied when it is cleared.
    pub(crate) last: LastDump,
    /// The sink's record name.
    pub(crate) name: [u8; NAME_SIZE],
}

/// `/dev/crash_<sink>`: the trace an ETR left in its reserved `tracedata` buffer at the previous
/// boot's crash, as the C TMC driver's crash data device names and reads it. Opening copies the
/// trace out of the previous dump (`ENOENT` once that dump was cleared through
/// `/dev/coresight_panic_dump`); reads are from that copy.
pub(crate) struct CrashTraceFile;

#[vtable]
impl DevFile for CrashTraceFile {
    type Data = CrashTrace;
    type State = KVVec<u8>;

    fn open(c: &CrashTrace) -> Result<KVVec<u8>> {
        crash_trace(&c.last.lock(), &c.name)
    }

    fn read(
        _c: &CrashTrace,
        trace: &KVVec<u8>,
        pos: &mut i64,
        out: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        out.simple_read_from_buffer(pos, trace)
    }

    fn release(_c: &CrashTrace, _trace: KVVec<u8>) {}
}

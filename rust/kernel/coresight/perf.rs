// SPDX-License-Identifier: GPL-2.0

//! What a CoreSight sink and source see of a perf session (`cs_etm`, `coresight-etm-perf.c`).
//!
//! perf drives CoreSight through the core's `cs_etm` PMU: when the AUX area is mapped the core
//! builds a path per CPU and asks the sink for a buffer of the session ([`AuxBuffer`], around
//! perf's AUX pages); every time the traced task is scheduled in on a CPU it starts an AUX
//! transaction ([`AuxHandle`]), enables the path (the sink for [`super::Mode::Perf`]) and the
//! source for the event ([`PerfEvent`]); when it is scheduled out it disables the source, asks the
//! sink to copy its trace into the AUX pages (`update_buffer`) and ends the transaction with the
//! size the sink gave. The core itself reports the trace ID of each CPU to perf
//! (`PERF_RECORD_AUX_OUTPUT_HW_ID`, once per CPU and event), and lists a sink that can allocate a
//! buffer under `/sys/bus/event_source/devices/cs_etm/sinks/`.
//!
//! These callbacks run on the event's CPU with interrupts off: nothing here sleeps or allocates
//! but [`super::Operations::alloc_buffer`].
//!
//! C headers: [`include/linux/perf_event.h`](srctree/include/linux/perf_event.h),
//! [`coresight-etm-perf.h`](srctree/drivers/hwtracing/coresight/coresight-etm-perf.h)

use crate::{
    bindings,
    prelude::*,
    types::Opaque, //
};

use core::ptr::NonNull;

/// The most address filters a `cs_etm` event carries (`ETM_ADDR_CMP_MAX`).
pub const MAX_ADDR_FILTERS: usize = 8;

/// One address filter of a `cs_etm` event (`perf record --filter`), with the addresses perf
/// resolved for the traced task (`struct etm_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrFilter {
    /// `filter START/SIZE`: trace only the instructions in `start..stop`.
    Range {
        /// The first address traced.
        start: u64,
        /// The first address after the range.
        stop: u64,
    },
    /// `start ADDR`: tracing starts when the instruction at the address executes.
    Start(u64),
    /// `stop ADDR`: tracing stops after the instruction at the address executes.
    Stop(u64),
}

/// The address filters of an event, as perf last resolved them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrFilters {
    filters: [Option<AddrFilter>; MAX_ADDR_FILTERS],
    /// The start/stop logic was started when the event was last scheduled out (a start address
    /// was hit, no stop address yet): it must start in that state again.
    pub started: bool,
    /// A filter of a kind a trace unit cannot take (upstream refuses it with [`EINVAL`]).
    pub unsupported: bool,
}

impl AddrFilters {
    /// Returns the filters, in the order perf gave them.
    pub fn iter(&self) -> impl Iterator<Item = AddrFilter> + '_ {
        self.filters.iter().flatten().copied()
    }

    /// Returns whether there is no filter: everything is traced.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// A perf event of the `cs_etm` PMU (`struct perf_event`), as a source or sink sees it.
///
/// # Invariants
///
/// The wrapped `struct perf_event` is a live event for as long as the reference exists.
#[repr(transparent)]
pub struct PerfEvent(Opaque<bindings::perf_event>);

impl PerfEvent {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live `struct perf_event` that stays live for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::perf_event) -> &'a Self {
        // SAFETY: `PerfEvent` is a transparent wrapper; the caller guarantees validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    fn as_raw(&self) -> *mut bindings::perf_event {
        self.0.get()
    }

    /// Returns `attr.config`, `config1`, `config2` or `config3` (`n` = 0 to 3; 0 otherwise): the
    /// format fields of `/sys/bus/event_source/devices/cs_etm/format/`.
    pub fn config(&self, n: u32) -> u64 {
        // SAFETY: By the type invariant the event is live; its attributes do not change.
        unsafe { bindings::cspd_perf_event_config(self.as_raw(), n) }
    }

    /// Returns whether the event excludes the kernel (`/u`, `attr.exclude_kernel`).
    pub fn exclude_kernel(&self) -> bool {
        // SAFETY: By the type invariant the event is live.
        unsafe { bindings::cspd_perf_event_exclude(self.as_raw()) & 1 != 0 }
    }

    /// Returns whether the event excludes user space (`/k`, `attr.exclude_user`).
    pub fn exclude_user(&self) -> bool {
        // SAFETY: By the type invariant the event is live.
        unsafe { bindings::cspd_perf_event_exclude(self.as_raw()) & 2 != 0 }
    }

    /// Returns whether the event is running (`hw.state` clear): a sink's update while it is,
    /// is for an AUX pause, after which tracing resumes into the sink.
    pub fn is_active(&self) -> bool {
        // SAFETY: By the type invariant the event is live.
        unsafe { bindings::cspd_perf_event_active(self.as_raw()) }
    }

    /// Returns whether perf holds the event's AUX output paused (`hw.aux_paused`: started with
    /// `aux-action=start-paused`, or paused by another event of its group): a source enabled for
    /// it is programmed but does not trace until perf resumes it.
    pub fn aux_paused(&self) -> bool {
        // SAFETY: By the type invariant the event is live.
        unsafe { bindings::cspd_perf_event_aux_paused(self.as_raw()) }
    }

    /// Returns the process ID of the event's owner (the perf tool's process), or `None` for an
    /// event without one: what makes a sink belong to one session at a time.
    pub fn owner_pid(&self) -> Option<i32> {
        // SAFETY: By the type invariant the event is live.
        let pid = unsafe { bindings::cspd_perf_event_owner_pid(self.as_raw()) };
        (pid >= 0).then_some(pid)
    }

    /// Returns the event's address filters, after bringing them up to date with perf
    /// (`perf_event_addr_filters_sync()`); empty for an event without filters.
    pub fn addr_filters(&self) -> AddrFilters {
        let mut starts = [0u64; MAX_ADDR_FILTERS];
        let mut stops = [0u64; MAX_ADDR_FILTERS];
        let mut types = [0u8; MAX_ADDR_FILTERS];
        let mut started = false;
        // SAFETY: By the type invariant the event is live; the arrays hold `MAX_ADDR_FILTERS`
        // entries each, as the helper is told.
        let n = unsafe {
            bindings::cspd_etm_event_filters(
                self.as_raw(),
                starts.as_mut_ptr(),
                stops.as_mut_ptr(),
                types.as_mut_ptr(),
                // CAST: 8 fits in `u32`.
                MAX_ADDR_FILTERS as u32,
                &mut started,
            )
        };
        let mut filters = [None; MAX_ADDR_FILTERS];
        let mut unsupported = false;
        let n = usize::try_from(n).unwrap_or(0).min(MAX_ADDR_FILTERS);
        for (i, f) in filters.iter_mut().enumerate().take(n) {
            // The helper's codes: 1 range, 2 start, 3 stop.
            *f = match types[i] {
                1 => Some(AddrFilter::Range {
                    start: starts[i],
                    stop: stops[i],
                }),
                2 => Some(AddrFilter::Start(starts[i])),
                3 => Some(AddrFilter::Stop(stops[i])),
                _ => {
                    unsupported = true;
                    None
                }
            };
        }
        AddrFilters {
            filters,
            started,
            unsupported,
        }
    }

    /// Records whether the start/stop logic was started when tracing for this event stopped,
    /// so that [`Self::addr_filters`] says so the next time it starts.
    pub fn set_filters_started(&self, started: bool) {
        // SAFETY: By the type invariant the event is live; the source's enable and disable for
        // one event run on one CPU at a time.
        unsafe { bindings::cspd_etm_event_set_ssstatus(self.as_raw(), started) }
    }
}

/// Flags of an AUX transaction (`PERF_AUX_FLAG_*`), for [`AuxHandle::flag`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuxFlag {
    /// Trace was lost: what is handed over is not all the sink captured
    /// (`PERF_AUX_FLAG_TRUNCATED`).
    Truncated,
    /// The record holds a partial packet (`PERF_AUX_FLAG_PARTIAL`).
    Partial,
}

/// An open AUX transaction of a perf session on this CPU (`struct perf_output_handle`): where the
/// sink's trace goes in the AUX pages, and how much room there is.
///
/// # Invariants
///
/// The wrapped handle is the one the CoreSight core began for the event being traced on this
/// CPU, and stays begun (or ended by the core only) while the reference exists.
#[repr(transparent)]
pub struct AuxHandle(Opaque<bindings::perf_output_handle>);

impl AuxHandle {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to the `struct perf_output_handle` of an AUX transaction the CoreSight core
    /// began, valid for `'a`, used by nothing else meanwhile but perf's core.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::perf_output_handle) -> &'a Self {
        // SAFETY: Transparent wrapper; validity guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::perf_output_handle {
        self.0.get()
    }

    /// Returns the position in the AUX area where this transaction writes (`handle->head`), in
    /// bytes from the start of the area (the sink wraps it at the area's size).
    pub fn head(&self) -> usize {
        // SAFETY: By the type invariant the handle is valid.
        unsafe { bindings::cspd_aux_head(self.as_raw()) }
    }

    /// Returns how many bytes the transaction may write (`handle->size`).
    pub fn size(&self) -> usize {
        // SAFETY: By the type invariant the handle is valid.
        unsafe { bindings::cspd_aux_size(self.as_raw()) }
    }

    /// Advances the head by `bytes`: in snapshot mode the sink says where the newest data ends
    /// this way, and ends the transaction with the size it wrote.
    pub fn advance_head(&self, bytes: usize) {
        // SAFETY: By the type invariant the handle is valid; the sink's update is the only
        // writer of the head during the transaction.
        unsafe { bindings::cspd_aux_advance_head(self.as_raw(), bytes) }
    }

    /// Marks the transaction with `flag` (`perf_aux_output_flag()`).
    pub fn flag(&self, flag: AuxFlag) {
        let bits = match flag {
            AuxFlag::Truncated => bindings::PERF_AUX_FLAG_TRUNCATED,
            AuxFlag::Partial => bindings::PERF_AUX_FLAG_PARTIAL,
        };
        // SAFETY: By the type invariant the handle is valid.
        unsafe { bindings::perf_aux_output_flag(self.as_raw(), u64::from(bits)) }
    }

    /// Returns the event the transaction is for.
    pub fn event(&self) -> Option<&PerfEvent> {
        // SAFETY: By the type invariant the handle is valid.
        let event = unsafe { bindings::cspd_aux_event(self.as_raw()) };
        // SAFETY: A begun handle's event is live while the transaction is open.
        (!event.is_null()).then(|| unsafe { PerfEvent::from_raw(event) })
    }
}

/// A sink's buffer for a perf session: perf's AUX pages, whether the session is in snapshot mode,
/// and the sink's own data `T` ([`super::Operations::PerfBuffer`]).
///
/// The CoreSight abstraction allocates it when perf maps the AUX area and frees it when the
/// session ends; a sink only ever borrows it, so its pages cannot outlive the mapping.
///
/// # Invariants
///
/// `pages` points to `nr_pages` (a power of two, at least one) pointers to pages of the AUX
/// area, valid until the buffer is freed by the core's `free_buffer` call.
pub struct AuxBuffer<T> {
    pages: NonNull<*mut c_void>,
    nr_pages: usize,
    snapshot: bool,
    data: T,
}

// SAFETY: The buffer owns `T` and only writes the AUX pages through `AuxWriter`, which a sink uses
// under its own lock; the page pointers stay valid from any CPU.
unsafe impl<T: Send> Send for AuxBuffer<T> {}

// SAFETY: `&AuxBuffer` gives out `&T` and `AuxWriter`s; see `Send`.
unsafe impl<T: Sync> Sync for AuxBuffer<T> {}

impl<T> AuxBuffer<T> {
    /// Wraps perf's AUX pages.
    ///
    /// # Safety
    ///
    /// `pages` points to `nr_pages` pointers to pages of an AUX area that stay valid until the
    /// buffer is dropped.
    pub(crate) unsafe fn new(
        pages: *mut *mut c_void,
        nr_pages: usize,
        snapshot: bool,
        data: T,
    ) -> Result<Self> {
        let pages = NonNull::new(pages).ok_or(EINVAL)?;
        if nr_pages == 0 || !nr_pages.is_power_of_two() {
            return Err(EINVAL);
        }
        Ok(Self {
            pages,
            nr_pages,
            snapshot,
            data,
        })
    }

    /// Returns the sink's data.
    pub fn data(&self) -> &T {
        &self.data
    }

    /// Returns whether the session is in snapshot mode (`perf record --snapshot`): the AUX area
    /// is a ring the sink overwrites, and perf copies it out when asked.
    pub fn snapshot(&self) -> bool {
        self.snapshot
    }

    /// Returns the size of the AUX area in bytes.
    pub fn len(&self) -> usize {
        self.nr_pages.saturating_mul(crate::page::PAGE_SIZE)
    }

    /// Returns whether the AUX area is empty (never: it has at least one page).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns a writer that puts words into the AUX area from byte `head` on (wrapped at the
    /// area's size, rounded down to a word), wrapping at its end.
    ///
    /// The sink must write only within the room of the transaction it serves
    /// ([`AuxHandle::size`] bytes from [`AuxHandle::head`]), under its own lock: perf's reader
    /// owns the rest of the area.
    pub fn writer(&self, head: usize) -> AuxWriter<'_, T> {
        let at = (head % self.len().max(1)) & !3;
        AuxWriter {
            buf: self,
            page: at / crate::page::PAGE_SIZE,
            offset: at % crate::page::PAGE_SIZE,
        }
    }
}

/// Writes 32-bit words into an [`AuxBuffer`]'s pages, in order, wrapping at the end of the area.
pub struct AuxWriter<'a, T> {
    buf: &'a AuxBuffer<T>,
    page: usize,
    offset: usize,
}

impl<T> AuxWriter<'_, T> {
    /// Writes `word` (little-endian, as the trace bus orders its bytes) and moves on.
    pub fn put_u32(&mut self, word: u32) {
        self.put_slice(&word.to_le_bytes());
    }

    /// Writes `bytes` and moves on, a page at a time, wrapping at the end of the area.
    pub fn put_slice(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = bytes
                .len()
                .min(crate::page::PAGE_SIZE.saturating_sub(self.offset));
            let (now, rest) = bytes.split_at(n);
            // SAFETY: By the invariants of `AuxBuffer` the table holds `nr_pages` valid page
            // pointers, and `page < nr_pages`.
            let page = unsafe { *self.buf.pages.as_ptr().add(self.page) };
            if !page.is_null() {
                // SAFETY: `offset + n <= PAGE_SIZE`, so the bytes are in the page; the page is
                // the AUX area's, which perf's reader only reads, and the sink writes it under
                // its own lock. `now` is not in the AUX area.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        now.as_ptr(),
                        page.cast::<u8>().add(self.offset),
                        n,
                    )
                };
            }
            self.offset += n;
            if self.offset >= crate::page::PAGE_SIZE {
                self.offset = 0;
                self.page = (self.page + 1) % self.buf.nr_pages;
            }
            bytes = rest;
        }
    }
}

#[kunit_tests(coresight_perf_aux)]
mod tests {
    use super::*;
    use crate::page::PAGE_SIZE;

    /// A "page" of the AUX area.
    type AuxPage = KBox<[u8; PAGE_SIZE]>;

    /// Two pages of the AUX area, for perf's table of page addresses.
    fn two_pages() -> Result<(AuxPage, AuxPage)> {
        Ok((
            KBox::new([0u8; PAGE_SIZE], GFP_KERNEL)?,
            KBox::new([0u8; PAGE_SIZE], GFP_KERNEL)?,
        ))
    }

    #[test]
    fn the_writer_crosses_pages_and_wraps_at_the_end() -> Result {
        let (mut p0, mut p1) = two_pages()?;
        let mut table: [*mut c_void; 2] = [p0.as_mut_ptr().cast(), p1.as_mut_ptr().cast()];
        {
            // SAFETY: The table holds two pointers to `PAGE_SIZE` bytes that outlive the buffer.
            let buf = unsafe { AuxBuffer::new(table.as_mut_ptr(), 2, false, ())? };
            assert_eq!(buf.len(), 2 * PAGE_SIZE);
            // Two words before the end, then around to the start.
            let mut w = buf.writer(2 * PAGE_SIZE - 8);
            for word in [0x1111_1111u32, 0x2222_2222, 0x3333_3333, 0x4444_4444] {
                w.put_u32(word);
            }
        }
        assert_eq!(
            &p1[PAGE_SIZE - 8..],
            &[0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22]
        );
        assert_eq!(&p0[..8], &[0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44]);
        // Nothing else written.
        assert!(p0[8..].iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn a_head_past_the_area_wraps_and_a_word_crosses_into_the_next_page() -> Result {
        let (mut p0, mut p1) = two_pages()?;
        let mut table: [*mut c_void; 2] = [p0.as_mut_ptr().cast(), p1.as_mut_ptr().cast()];
        {
            // SAFETY: As above.
            let buf = unsafe { AuxBuffer::new(table.as_mut_ptr(), 2, true, ())? };
            assert!(buf.snapshot());
            // perf's head only grows: 5 areas and a page, less a word, in.
            let mut w = buf.writer(11 * PAGE_SIZE - 4);
            w.put_u32(0xAABB_CCDD);
            w.put_u32(0x0102_0304);
        }
        // Little-endian.
        assert_eq!(&p0[PAGE_SIZE - 4..], &[0xDD, 0xCC, 0xBB, 0xAA]);
        assert_eq!(&p1[..4], &[0x04, 0x03, 0x02, 0x01]);
        Ok(())
    }

    #[test]
    fn a_slice_is_copied_across_pages_and_wraps_at_the_end() -> Result {
        let (mut p0, mut p1) = two_pages()?;
        let mut table: [*mut c_void; 2] = [p0.as_mut_ptr().cast(), p1.as_mut_ptr().cast()];
        let mut src = KVec::with_capacity(PAGE_SIZE + 16, GFP_KERNEL)?;
        for i in 0..PAGE_SIZE + 16 {
            // CAST: the pattern is the low byte of the index.
            src.push((i % 251) as u8, GFP_KERNEL)?;
        }
        {
            // SAFETY: Both pages live until the end of the test, after the buffer.
            let buf = unsafe { AuxBuffer::new(table.as_mut_ptr(), 2, false, ())? };
            // 8 bytes before the end of the area: 8 there, the rest from the start of page 0
            // into page 1.
            let mut w = buf.writer(2 * PAGE_SIZE - 8);
            w.put_slice(&src);
            w.put_u32(0x1122_3344);
        }
        assert_eq!(&p1[PAGE_SIZE - 8..], &src[..8]);
        assert_eq!(&p0[..], &src[8..PAGE_SIZE + 8]);
        assert_eq!(&p1[..8], &src[PAGE_SIZE + 8..]);
        assert_eq!(&p1[8..12], &[0x44, 0x33, 0x22, 0x11]);
        assert!(p1[12..PAGE_SIZE - 8].iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn a_page_table_perf_cannot_give_is_refused() {
        let mut table: [*mut c_void; 3] = [core::ptr::null_mut(); 3];
        // SAFETY: Refused before any page is used.
        let three = unsafe { AuxBuffer::new(table.as_mut_ptr(), 3, false, ()) };
        // Not a power of two.
        assert!(three.is_err());
        // SAFETY: As above.
        let none = unsafe { AuxBuffer::new(table.as_mut_ptr(), 0, false, ()) };
        // No page.
        assert!(none.is_err());
        // SAFETY: As above.
        let null = unsafe { AuxBuffer::new(core::ptr::null_mut(), 1, false, ()) };
        // No table.
        assert!(null.is_err());
    }
}

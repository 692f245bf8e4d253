// SPDX-License-Identifier: GPL-2.0

//! KUnit tests of the core's registry against its panic path, on a kernel buffer: a `del` that
//! races the panic path (before it, and while the panic path is inside that registration's
//! callback), a header a CPU stopped in the middle of `add()` left half written, and the decode
//! metadata recorded and committed while the kernel runs.

use kernel::prelude::*;

#[kunit_tests(coresight_panic_dump_core)]
mod kunit {
    use crate::{
        Core,
        Unregister, //
    };
    use core::ffi::{
        c_int,
        c_void, //
    };
    use kernel::{
        c_str,
        coresight::panic_dump::{
            format::{
                self,
                ContainerHeader,
                RecordHeader,
                RecordKind,
                BOOT_ID_SIZE,
                RECORD_HEADER_SIZE, //
            },
            DescView,
            DumpName,
            DumpPayload,
            DumpType, //
        },
        prelude::*,
        reserved_mem::Mapping,
        sync::atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
    };

    const REGION: usize = 64 * 1024;

    /// What the test callback saw: how often it ran, and what a `del` made from inside it gave.
    struct Probe {
        core: *const Core,
        index: Atomic<u32>,
        calls: Atomic<u32>,
        release: Atomic<u32>,
    }

    const NO_RELEASE: u32 = 0;

    fn release_code(r: Unregister) -> u32 {
        match r {
            Unregister::Released => 1,
            Unregister::NotActive => 2,
            Unregister::PanicInProgress => 3,
        }
    }

    /// A client's callback; with `core` set, it unregisters its own registration meanwhile, as
    /// a driver's remove running on another CPU would while the panic path is inside it.
    ///
    /// # Safety
    ///
    /// `data` points to a [`Probe`] whose `core` is null or a live core, and `out` is writable.
    unsafe extern "C" fn callback(
        data: *mut c_void,
        _buf: *mut c_void,
        _len: usize,
        out: *mut usize,
    ) -> c_int {
        // SAFETY: The tests register a live `Probe` that outlives the core.
        let p = unsafe { &*data.cast::<Probe>() };
        p.calls.fetch_add(1, Relaxed);
        // SAFETY: As above: the core outlives every call.
        if let Some(core) = unsafe { p.core.as_ref() } {
            // CAST: the index was a `usize` below `MAX_ENTRIES`.
            p.release.store(
                release_code(core.release(p.index.load(Relaxed) as usize)),
                Relaxed,
            );
        }
        // SAFETY: The core passes a writable length.
        unsafe { *out = 0 };
        0
    }

    fn new_core() -> Result<Pin<KBox<Core>>> {
        let map = Mapping::kernel_buffer(REGION)?;
        let header = ContainerHeader::new(REGION as u64, [7; BOOT_ID_SIZE], 0);
        KBox::pin_init(Core::new(map, header)?, GFP_KERNEL)
    }

    fn desc(name: &CStr, probe: &Probe) -> DescView {
        DescView {
            name: DumpName::new(name),
            kind: DumpType::Other,
            cpu: None,
            max_bytes: 128,
            payload: DumpPayload::Opaque,
            dump: callback,
            data: core::ptr::from_ref(probe).cast_mut().cast(),
            metadata: None,
        }
    }

    /// The bytes [`metadata`] records.
    const METADATA: [u8; 12] = *b"kunit-config";

    /// A client's metadata callback: records [`METADATA`], or nothing while its probe's `index`
    /// is `u32::MAX`; counts its calls in `calls`.
    ///
    /// # Safety
    ///
    /// `data` points to a [`Probe`], `buf` is writable for `len` bytes and `out` is writable.
    unsafe extern "C" fn metadata(
        data: *mut c_void,
        buf: *mut c_void,
        len: usize,
        out: *mut usize,
    ) -> c_int {
        // SAFETY: The tests register a live `Probe` that outlives the core.
        let p = unsafe { &*data.cast::<Probe>() };
        p.calls.fetch_add(1, Relaxed);
        if p.index.load(Relaxed) == u32::MAX || len < METADATA.len() {
            return ENODATA.to_errno();
        }
        // SAFETY: `buf` is writable for `len` bytes, at least `METADATA.len()`.
        unsafe { core::ptr::copy_nonoverlapping(METADATA.as_ptr(), buf.cast(), METADATA.len()) };
        // SAFETY: The core passes a writable length.
        unsafe { *out = METADATA.len() };
        0
    }

    /// Whether the region is committed while the kernel ran, and the flags and data of a record.
    type RuntimeView = (bool, Option<(u32, KVec<u8>)>);

    /// The commit's run-time flag, and the flags and data of the record named `name`.
    fn runtime_view(core: &Core, name: &[u8]) -> Result<RuntimeView> {
        let mut bytes = KVec::from_elem(0u8, REGION, GFP_KERNEL)?;
        core.map.read(0, &mut bytes)?;
        let runtime = format::validate(&bytes).is_ok_and(|s| s.is_clean() && s.runtime_commit);
        let mut found = None;
        if let Ok(r) = format::parse_region(&bytes) {
            if let Some(rec) = r
                .records()
                .flatten()
                .find(|rec| rec.header.name_bytes() == name)
            {
                let mut data = KVec::new();
                data.extend_from_slice(rec.data, GFP_KERNEL)?;
                found = Some((rec.header.flags, data));
            }
        }
        Ok((runtime, found))
    }

    fn probe() -> Probe {
        Probe {
            core: core::ptr::null(),
            index: Atomic::new(0),
            calls: Atomic::new(0),
            release: Atomic::new(NO_RELEASE),
        }
    }

    /// The region as the core left it: committed and clean, and the kind of the record named
    /// `name` (`None` when there is none, a freed slot included).
    fn record_kind(core: &Core, name: &[u8]) -> Result<(bool, Option<RecordKind>)> {
        let mut bytes = KVec::from_elem(0u8, REGION, GFP_KERNEL)?;
        core.map.read(0, &mut bytes)?;
        let clean = format::validate(&bytes).is_ok_and(|s| s.is_clean());
        let kind = format::parse_region(&bytes).ok().and_then(|r| {
            r.records()
                .flatten()
                .find(|rec| rec.header.name_bytes() == name)
                .map(|rec| rec.header.kind)
        });
        Ok((clean, kind))
    }

    /// A `del` before the panic: the panic path skips the registration, the slot is free.
    #[test]
    fn a_del_before_the_panic_is_skipped() -> Result {
        let core = new_core()?;
        let p = probe();
        let i = core.add(desc(c_str!("kunit-gone"), &p))?;
        assert_eq!(core.release(i), Unregister::Released);
        core.dump(c_str!("kunit: panic"));
        assert_eq!(p.calls.load(Relaxed), 0);
        let (clean, kind) = record_kind(&core, b"kunit-gone")?;
        assert!(clean);
        assert!(kind.is_none());
        Ok(())
    }

    /// A `del` once the panic path has claimed the dump: it is told a panic is in progress (and
    /// `del()` then never returns), and the slot is left as it was.
    #[test]
    fn a_del_after_the_panic_started_does_not_free() -> Result {
        let core = new_core()?;
        let p = probe();
        let i = core.add(desc(c_str!("kunit-kept"), &p))?;
        assert!(core.dumping.cmpxchg(0, 1, Full).is_ok());
        assert_eq!(core.release(i), Unregister::PanicInProgress);
        let (_, kind) = record_kind(&core, b"kunit-kept")?;
        assert_eq!(kind, Some(RecordKind::Other));
        Ok(())
    }

    /// A `del` made while the panic path is inside that registration's callback (another CPU
    /// that did not stop): told a panic is in progress, so the driver cannot free what the
    /// running callback uses; the dump still commits with the record.
    #[test]
    fn a_del_during_its_callback_waits_for_the_panic() -> Result {
        let core = new_core()?;
        let mut p = probe();
        p.core = &*core;
        let i = core.add(desc(c_str!("kunit-racing"), &p))?;
        // CAST: an index below `MAX_ENTRIES`.
        p.index.store(i as u32, Relaxed);
        core.dump(c_str!("kunit: panic"));
        assert_eq!(p.calls.load(Relaxed), 1);
        assert_eq!(
            p.release.load(Relaxed),
            release_code(Unregister::PanicInProgress)
        );
        let (clean, kind) = record_kind(&core, b"kunit-racing")?;
        assert!(clean);
        assert_eq!(kind, Some(RecordKind::Other));
        Ok(())
    }

    /// A CPU stopped while it rewrote a released slot's header for a new registration: the
    /// panic path frees that slot, and the commit and the later registration survive.
    #[test]
    fn a_header_torn_by_a_stopped_add_costs_its_slot_only() -> Result {
        let core = new_core()?;
        let (p, q) = (probe(), probe());
        let i = core.add(desc(c_str!("kunit-old"), &p))?;
        core.add(desc(c_str!("kunit-later"), &q))?;
        assert_eq!(core.release(i), Unregister::Released);
        // CAST: the slot's offset, as `add()` packed it.
        let slot = (core.entries[i].slot.load(Relaxed) >> 32) as usize;
        // The new registration's header, cut after 41 of its bytes.
        let torn = RecordHeader::new(RecordKind::Source, b"kunit-new", 128, core.stamp()).encode();
        core.map.write(slot, &torn[..41])?;
        assert!(41 < RECORD_HEADER_SIZE);
        core.dump(c_str!("kunit: panic"));
        assert_eq!(q.calls.load(Relaxed), 1);
        let (clean, kind) = record_kind(&core, b"kunit-later")?;
        assert!(clean);
        assert_eq!(kind, Some(RecordKind::Other));
        Ok(())
    }

    /// Metadata recorded while the kernel runs is committed, flagged, and stays committed as
    /// registrations come and go; a client with nothing to record keeps its slot as it was; the
    /// panic path's own record and commit replace them.
    #[test]
    fn metadata_is_committed_while_the_kernel_runs() -> Result {
        let core = new_core()?;
        let (p, quiet, other) = (probe(), probe(), probe());
        quiet.index.store(u32::MAX, Relaxed);
        let mut d = desc(c_str!("kunit-meta"), &p);
        d.metadata = Some(metadata);
        core.add(d)?;
        let mut d = desc(c_str!("kunit-quiet"), &quiet);
        d.metadata = Some(metadata);
        core.add(d)?;
        assert!(!runtime_view(&core, b"kunit-meta")?.0);
        core.record_metadata()?;
        assert_eq!(p.calls.load(Relaxed), 1);
        assert_eq!(quiet.calls.load(Relaxed), 1);
        let (runtime, rec) = runtime_view(&core, b"kunit-meta")?;
        assert!(runtime);
        let (flags, data) = rec.ok_or(ENOENT)?;
        assert_eq!(flags, format::RECORD_FLAG_RUNTIME);
        assert_eq!(&data[..], &METADATA[..]);
        let (_, rec) = runtime_view(&core, b"kunit-quiet")?;
        assert!(rec.is_some_and(|(flags, data)| flags == 0 && data.is_empty()));
        // A registration added over the commit, then one released: committed again each time.
        let i = core.add(desc(c_str!("kunit-other"), &other))?;
        assert!(runtime_view(&core, b"kunit-other")?.0);
        assert_eq!(core.release(i), Unregister::Released);
        assert!(runtime_view(&core, b"kunit-meta")?.0);
        // The panic path's callback writes the record again, and its commit is not flagged.
        core.dump(c_str!("kunit: panic"));
        let (runtime, rec) = runtime_view(&core, b"kunit-meta")?;
        assert!(!runtime);
        assert!(rec.is_some_and(|(flags, data)| flags == 0 && data.is_empty()));
        let (clean, _) = record_kind(&core, b"kunit-meta")?;
        assert!(clean);
        Ok(())
    }

    /// Once a panic is being dumped, recording metadata writes nothing and says so.
    #[test]
    fn metadata_is_not_recorded_during_a_panic() -> Result {
        let core = new_core()?;
        let p = probe();
        let mut d = desc(c_str!("kunit-late"), &p);
        d.metadata = Some(metadata);
        core.add(d)?;
        assert!(core.dumping.cmpxchg(0, 1, Full).is_ok());
        assert_eq!(core.record_metadata(), Err(EBUSY));
        assert_eq!(p.calls.load(Relaxed), 0);
        assert_eq!(core.writing.load(Relaxed), 0);
        assert!(runtime_view(&core, b"kunit-late")?
            .1
            .is_some_and(|(_, d)| d.is_empty()));
        Ok(())
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The TMC in its ETR configuration: its buffer, its sink operations and sysfs attributes, and
//! its panic callback ([`etr::panic_stop`], [`etr::panic_record`]).
//!
//! The buffer is the node's `tracedata` reserved region when it has one (the binding of the TMC
//! crash data, `memory-region-names = "tracedata", "metadata"`; the `metadata` region is the C
//! driver's and is not used), given to the ETR for every session and never copied: at panic the
//! record says where the trace is. Otherwise each sysfs session allocates a DMA buffer of
//! `buffer_size` bytes (1 MiB unless set), freed when the session ends, and at panic its newest
//! trace is copied into the dump slot, which holds a buffer of the size the driver had at probe.
//!
//! In perf mode each session has its own flat DMA buffer of `buffer_size` bytes, shared by the
//! session's events (one per CPU of a CPU-wide session) as upstream shares it, allocated when perf
//! maps the AUX area and freed when the last of them goes. The session's last CPU to stop copies
//! the newest trace into the AUX pages ([`etr::perf_drain`]); a panic during the session copies
//! it into the dump slot like a sysfs session's.
//!
//! The device file (`/dev/tmc_etrN`, [`EtrFile`]) gives a copy of a sysfs session's newest trace
//! when it traces into a DMA buffer, with the ETB/ETF's semantics ([`Tmc::open_reader_with`]).

use core::{
    fmt::Write,
    marker::PhantomData, //
};

use kernel::{
    c_str,
    coresight::{
        self,
        component::{
            Backend,
            Component,
            ComponentInfo, //
        },
        devfile::{
            DevFile,
            DevFileRegistration, //
        },
        panic_dump::{
            format::etr::{
                EtrOutcome,
                EtrRecord,
                EtrRecordError,
                ETR_RECORD_HEADER_LEN, //
            },
            DumpCallback,
            DumpInfo,
            DumpPayload,
            DumpType, //
        },
        perf::{
            AuxBuffer,
            AuxHandle,
            PerfEvent, //
        },
        Attribute,
        AttributeBuf,
        AttributeGroup,
        AttributeMode,
        CsDevice,
        Kind,
        Mode,
        Path,
        SinkKind, //
    },
    crash_dump,
    device::{
        Bound,
        Core,
        Device, //
    },
    dma::{
        self,
        Coherent,
        DmaMask, //
    },
    io::{
        io_project,
        Io, //
    },
    iov::IovIterDest,
    page::PAGE_SIZE,
    prelude::*,
    reserved_mem::{
        DmaRegion,
        Mapping,
        Origin,
        ReservedRegion, //
    },
    str::{
        CStr,
        CString, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_mutex,
        new_spinlock,
        new_spinlock_irq,
        Arc,
        Mutex,
        SpinLock,
        SpinLockIrq, //
    },
};

use crate::{
    driver::{
        parse_number,
        show_hex,
        Tmc,
        MGMT_GROUP,
        TMC_ATTRIBUTES, //
    },
    etr::{
        self,
        EtrMemory,
        EtrSetup,
        PanicBuffer,
        ETR_MAX_BUFFER, //
    },
    regs::DEVID,
};

/// Size of the DMA buffer of a session when `buffer_size` was not written, as the C driver's.
pub(crate) const ETR_DEFAULT_BUFFER: u32 = 1 << 20;

/// The reserved `tracedata` region and its mapping for the ETR.
struct Reserved {
    region: ReservedRegion,
    dma: DmaRegion,
    /// The bytes given to the ETR: the region's size, cut to whole frames and the `RSZ` range.
    size: u64,
}

/// One perf session's flat buffer and how many of the session's events share it.
struct Session {
    /// The process ID of the session's owner (`perf record`).
    pid: i32,
    buf: Arc<Coherent<[u8]>>,
    /// Events whose AUX area keeps the buffer ([`EtrPerfBuffer`]).
    events: u32,
}

/// The perf sessions' buffers, by owner, as upstream shares them (`tmc_etr_get_etr_buf()`).
type Sessions = Mutex<KVec<Session>>;

/// What the ETR keeps with a perf event's AUX pages: the session's buffer.
pub(crate) struct EtrPerfBuffer {
    sessions: Arc<Sessions>,
    pid: i32,
    buf: Arc<Coherent<[u8]>>,
}

impl Drop for EtrPerfBuffer {
    /// Lets the session's buffer go with its last event (in process context, where the
    /// abstraction frees perf's buffers, and after every event stopped: the sink does not hold
    /// it any more).
    fn drop(&mut self) {
        let gone = {
            let mut list = self.sessions.lock();
            let at = list
                .iter()
                .position(|s| s.pid == self.pid && Arc::ptr_eq(&s.buf, &self.buf));
            match at {
                Some(i) => {
                    let last = list.get_mut(i).is_some_and(|s| {
                        s.events = s.events.saturating_sub(1);
                        s.events == 0
                    });
                    if last {
                        list.remove(i).ok()
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        drop(gone);
    }
}

/// One ETR, shared by its sink operations, its sysfs attributes and its panic callback.
#[pin_data]
pub(crate) struct Etr<'a, B: Backend> {
    #[pin]
    tmc: Tmc<B>,
    /// The device the buffers are allocated for.
    dev: &'a Device<Bound>,
    reserved: Option<Reserved>,
    /// The DMA buffer of the running session, when there is no reserved region. Taken with
    /// `try_lock` at panic; a buffer is dropped only outside the lock.
    #[pin]
    dma: SpinLock<Option<Coherent<[u8]>>>,
    /// The buffer of the perf session the ETR captures for: set by the session's first CPU
    /// (perf's enable, interrupts off), cleared by its last; taken with `try_lock` at panic.
    /// Never the buffer's last reference: the session's AUX areas keep it until they go.
    #[pin]
    perf: SpinLockIrq<Option<Arc<Coherent<[u8]>>>>,
    /// The perf sessions' buffers.
    sessions: Arc<Sessions>,
    /// `buffer_size`: bytes of the next session's DMA buffer.
    buffer_size: Atomic<u32>,
    /// `buf_mode_preferred`: an index of [`BUF_MODES`] among those [`Etr::buf_mode_ok`] takes.
    buf_mode: Atomic<u32>,
    /// A SoC-600 TMC-ETR keeps its pointers across sessions: they are set for each.
    save_restore: bool,
}

impl<B: Backend> Etr<'_, B> {
    /// Allocates a sysfs session's DMA buffer of `buffer_size` bytes (none with a reserved
    /// region), before any lock is taken.
    fn alloc_dma(&self, csdev: &CsDevice) -> Result<Option<Coherent<[u8]>>> {
        if self.reserved.is_some() {
            return Ok(None);
        }
        let size = self.buffer_size.load(Relaxed);
        let size_bytes = usize::try_from(size).map_err(|_| EINVAL)?;
        Coherent::<u8>::zeroed_slice(self.dev, size_bytes, GFP_KERNEL)
            .inspect_err(|e| {
                dev_err!(
                    csdev.as_device(),
                    "no DMA buffer of {size:#x} bytes: {e:?}\n"
                )
            })
            .map(Some)
    }

    /// Gives the ETR the reserved region or `fresh` (from [`Etr::alloc_dma`]) and starts
    /// capture, the users locked. Returns the buffer the caller frees once its locks are
    /// dropped (a DMA buffer is never freed with interrupts off): the one `fresh` replaced, or
    /// `fresh` itself when the ETR did not start (the buffer it had is put back).
    fn start(
        &self,
        csdev: &CsDevice,
        fresh: Option<Coherent<[u8]>>,
    ) -> (Result, Option<Coherent<[u8]>>) {
        let (dba, size, old) = match (&self.reserved, fresh) {
            (Some(r), _) => (r.dma.dma_address(), r.size, None),
            (None, Some(buf)) => {
                let dba = buf.dma_address();
                // CAST: `usize` fits in `u64`.
                let size = buf.size() as u64;
                // Known before the ETR writes into it, so that a panic finds it.
                let old = self.dma.lock().replace(buf);
                (dba, size, old)
            }
            (None, None) => return (Err(EINVAL), None),
        };
        let setup = EtrSetup {
            dba,
            size,
            stop_on_flush: self.tmc.stop_on_flush.load(Relaxed),
            save_restore: self.save_restore,
            trigger: self.tmc.trigger_cntr.load(Relaxed),
        };
        let r = self.tmc.io(|io| etr::enable(io, &setup)).and_then(|r| {
            r.inspect_err(|e| dev_err!(csdev.as_device(), "ETR not enabled: {e}\n"))
                .map_err(Error::from)
        });
        if r.is_err() {
            // The buffer the ETR had stays its own (it may still write into a kept one).
            let fresh = core::mem::replace(&mut *self.dma.lock(), old);
            return (r, fresh);
        }
        dev_dbg!(
            csdev.as_device(),
            "TMC-ETR enabled: {size:#x} bytes at {dba:#x}\n"
        );
        (r, old)
    }

    /// The setup of the sysfs session's capture: into the reserved region or its DMA buffer
    /// (`dma`, locked by the caller).
    fn sysfs_setup(&self, dma: Option<&Coherent<[u8]>>) -> Option<EtrSetup> {
        match (&self.reserved, dma) {
            (Some(r), _) => Some(EtrSetup {
                dba: r.dma.dma_address(),
                size: r.size,
                stop_on_flush: self.tmc.stop_on_flush.load(Relaxed),
                save_restore: self.save_restore,
                trigger: self.tmc.trigger_cntr.load(Relaxed),
            }),
            (None, Some(buf)) => Some(self.setup_for(buf)),
            (None, None) => None,
        }
    }

    /// Stops the sysfs session's capture and copies the newest trace of its DMA buffer into
    /// `trace` (emptied first; at most its capacity), as upstream's `tmc_etr_sync_sysfs_buf()`:
    /// the panic path's stop ([`etr::perf_drain`]), barrier first when the buffer wrapped. The
    /// users locked. Nothing is copied from a reserved region (not mapped for the CPU).
    fn drain_sysfs(&self, trace: &mut KVVec<u8>) -> Result {
        trace.clear();
        let room = trace.capacity();
        let dma = self.dma.lock();
        let Some(buf) = dma.as_ref() else {
            return self.tmc.io(crate::hw::disable_if_capturing).map(|_| ());
        };
        let mem = DmaMemory(buf);
        let drained = self.tmc.io(|io| {
            etr::perf_drain(io, &mem, buf.dma_address(), room, |b| {
                // Within the capacity: `perf_drain` hands over at most `room` bytes.
                let _ = trace.extend_from_slice(b, GFP_NOWAIT);
            })
        })?;
        if let Some(f) = drained.failure {
            dev_warn!(self.dev, "ETR drain for reading: {}\n", f.name());
        }
        Ok(())
    }

    /// Starts the sysfs session's capture again, into the same buffer, after a read stopped it
    /// (the users locked).
    fn restart_sysfs(&self) {
        let dma = self.dma.lock();
        let Some(setup) = self.sysfs_setup(dma.as_ref()) else {
            return;
        };
        match self.tmc.io(|io| etr::enable(io, &setup)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => dev_warn!(self.dev, "ETR capture not restarted: {e}\n"),
            Err(_) => dev_warn!(self.dev, "ETR capture not restarted: registers busy\n"),
        }
    }

    /// Bytes a copy of the running sysfs session's trace needs (0 with none, or with a
    /// reserved region, which is not copied).
    fn sysfs_trace_bytes(&self) -> usize {
        if !self.tmc.users().sysfs_sink {
            return 0;
        }
        self.dma.lock().as_ref().map_or(0, |b| b.size())
    }

    /// The setup of a capture into `buf`.
    fn setup_for(&self, buf: &Coherent<[u8]>) -> EtrSetup {
        EtrSetup {
            dba: buf.dma_address(),
            // CAST: `usize` fits in `u64`.
            size: buf.size() as u64,
            stop_on_flush: self.tmc.stop_on_flush.load(Relaxed),
            save_restore: self.save_restore,
            trigger: self.tmc.trigger_cntr.load(Relaxed),
        }
    }

    /// Starts capture into a perf session's buffer (the session's first CPU, interrupts off).
    fn start_perf(&self, csdev: &CsDevice, buf: &Arc<Coherent<[u8]>>) -> Result {
        // Known before the ETR writes into it, so that a panic finds it.
        *self.perf.lock() = Some(buf.clone());
        let setup = self.setup_for(buf);
        self.tmc
            .io(|io| etr::enable(io, &setup))
            .and_then(|r| {
                r.inspect_err(|e| dev_err!(csdev.as_device(), "ETR not enabled for perf: {e}\n"))
                    .map_err(Error::from)
            })
            .inspect_err(|_| {
                let _ = self.perf.lock().take();
            })
    }

    /// Whether the buffer mode `BUF_MODES[mode]` is one this ETR uses: `auto`; the `tracedata`
    /// region (`resrv`) when the node has one, else a flat DMA buffer (`flat`). Scatter-gather
    /// (`tmc-sg`) and the CATU (`catu`) are not implemented.
    fn buf_mode_ok(&self, mode: usize) -> bool {
        match BUF_MODES.get(mode) {
            Some(&"auto") => true,
            Some(&"flat") => self.reserved.is_none(),
            Some(&"resrv") => self.reserved.is_some(),
            _ => false,
        }
    }

    /// Frees the session's DMA buffer, if any, outside the lock.
    fn free_dma(&self) {
        let old = self.dma.lock().take();
        drop(old);
    }

    /// Opens the device file: a copy of the sysfs session's trace (its capture stopped until
    /// [`Etr::close_reader`]) or of the last session's, as upstream's
    /// `tmc_read_prepare_etr()`; the errors of [`Tmc::open_reader_with`], and [`EINVAL`] with a
    /// reserved region (its trace is read from the dump after a panic).
    fn open_reader(&self) -> Result<KVVec<u8>> {
        if self.reserved.is_some() {
            return Err(EINVAL);
        }
        // Room for the copy, allocated before any lock; the copy a session left, freed after.
        let mut spare = match self.sysfs_trace_bytes() {
            0 => KVVec::new(),
            n => KVVec::with_capacity(n, GFP_KERNEL)?,
        };
        let r = self.tmc.open_reader_with(
            &mut spare,
            |trace| self.drain_sysfs(trace),
            || self.restart_sysfs(),
        );
        drop(spare);
        r
    }

    /// Releases the device file, starting the session's capture again when it still runs.
    fn close_reader(&self, trace: KVVec<u8>) {
        self.tmc.close_reader_with(trace, || self.restart_sysfs());
    }
}

/// The ETR's device file (`/dev/tmc_etrN`), as upstream's `tmc_fops` for an ETR: the open file
/// holds a copy of the trace.
pub(crate) struct EtrFile<'a, B: Backend>(PhantomData<&'a B>);

#[vtable]
impl<'a, B: Backend + 'a> DevFile for EtrFile<'a, B> {
    type Data = Arc<Etr<'a, B>>;
    type State = KVVec<u8>;

    fn open(etr: &Arc<Etr<'a, B>>) -> Result<KVVec<u8>> {
        etr.open_reader()
    }

    fn read(
        _etr: &Arc<Etr<'a, B>>,
        trace: &KVVec<u8>,
        pos: &mut i64,
        out: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        out.simple_read_from_buffer(pos, trace)
    }

    fn release(etr: &Arc<Etr<'a, B>>, trace: KVVec<u8>) {
        etr.close_reader(trace);
    }
}

/// The ETR as a CoreSight sink.
pub(crate) struct EtrOps<'a, B: Backend>(Arc<Etr<'a, B>>);

/// Index of `buffer_size` in [`EtrOps`]' attributes.
const ATTR_BUFFER_SIZE: usize = 0;
/// Index of `buf_modes_available` in [`EtrOps`]' attributes.
const ATTR_BUF_MODES_AVAILABLE: usize = 1;
/// Index of `buf_mode_preferred` in [`EtrOps`]' attributes; [`TMC_ATTRIBUTES`] and the `mgmt/`
/// group follow.
const ATTR_BUF_MODE_PREFERRED: usize = 2;

/// The buffer modes of upstream's `buf_mode_preferred`, by the index [`Etr::buf_mode`] keeps.
const BUF_MODES: [&str; 5] = ["auto", "flat", "tmc-sg", "catu", "resrv"];
/// `auto` in [`BUF_MODES`].
const BUF_MODE_AUTO: u32 = 0;

#[vtable]
impl<B: Backend> coresight::Operations for EtrOps<'_, B> {
    /// The session's flat buffer.
    type PerfBuffer = EtrPerfBuffer;

    const ATTRIBUTE_GROUPS: &'static [AttributeGroup] = &[
        AttributeGroup {
            name: None,
            attributes: &[
                Attribute {
                    name: c_str!("buffer_size"),
                    mode: AttributeMode::ReadWrite,
                },
                Attribute {
                    name: c_str!("buf_modes_available"),
                    mode: AttributeMode::ReadOnly,
                },
                Attribute {
                    name: c_str!("buf_mode_preferred"),
                    mode: AttributeMode::ReadWrite,
                },
                TMC_ATTRIBUTES[0],
                TMC_ATTRIBUTES[1],
            ],
        },
        MGMT_GROUP,
    ];

    fn show(&self, _csdev: &CsDevice, index: usize, out: &mut AttributeBuf<'_>) -> Result {
        let this = &*self.0;
        match index {
            ATTR_BUFFER_SIZE => match &this.reserved {
                Some(r) => show_hex(out, r.size),
                None => show_hex(out, u64::from(this.buffer_size.load(Relaxed))),
            },
            ATTR_BUF_MODES_AVAILABLE => {
                for (i, m) in BUF_MODES.iter().enumerate() {
                    if this.buf_mode_ok(i) {
                        write!(out, "{m} ").map_err(|_| EINVAL)?;
                    }
                }
                writeln!(out).map_err(|_| EINVAL)
            }
            ATTR_BUF_MODE_PREFERRED => {
                let i = usize::try_from(this.buf_mode.load(Relaxed)).map_err(|_| EINVAL)?;
                writeln!(out, "{}", BUF_MODES.get(i).ok_or(EINVAL)?).map_err(|_| EINVAL)
            }
            _ => this
                .tmc
                .show_common(ATTR_BUF_MODE_PREFERRED + 1, index, out)
                .unwrap_or(Err(EINVAL)),
        }
    }

    fn store(&self, csdev: &CsDevice, index: usize, input: &[u8]) -> Result {
        let this = &*self.0;
        if index == ATTR_BUF_MODE_PREFERRED {
            let name = input.strip_suffix(b"\n").unwrap_or(input);
            let i = BUF_MODES
                .iter()
                .position(|m| m.as_bytes() == name)
                .ok_or(EINVAL)?;
            if !this.buf_mode_ok(i) {
                dev_info!(
                    csdev.as_device(),
                    "buffer mode {} is not available: this driver gives the ETR {}\n",
                    BUF_MODES.get(i).copied().unwrap_or("?"),
                    if this.reserved.is_some() {
                        "its tracedata region"
                    } else {
                        "a flat DMA buffer (no scatter-gather, no CATU)"
                    }
                );
                return Err(EINVAL);
            }
            this.buf_mode
                .store(u32::try_from(i).map_err(|_| EINVAL)?, Relaxed);
            return Ok(());
        }
        if let Some(r) = this
            .tmc
            .store_common(ATTR_BUF_MODE_PREFERRED + 1, index, input)
        {
            return r;
        }
        let v = parse_number(input)?;
        match index {
            ATTR_BUFFER_SIZE => {
                if let Some(r) = &this.reserved {
                    dev_info!(
                        csdev.as_device(),
                        "the buffer is the tracedata region at {:#x} ({:#x} bytes)\n",
                        r.region.base(),
                        r.size
                    );
                    return Err(EPERM);
                }
                // CAST: a page is far below `u64::MAX`.
                if v == 0 || !v.is_multiple_of(PAGE_SIZE as u64) || v > ETR_MAX_BUFFER {
                    return Err(EINVAL);
                }
                this.buffer_size
                    .store(u32::try_from(v).map_err(|_| EINVAL)?, Relaxed);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    fn sink_enable(&self, csdev: &CsDevice, mode: Mode, _path: &Path) -> Result {
        let this = &*self.0;
        if mode != Mode::Sysfs {
            return Err(EINVAL);
        }
        // The session's buffer, allocated before the lock (the sysfs sessions' enables and
        // disables are serialised by the CoreSight core: the mode stays as read here).
        let fresh = if csdev.mode() == Mode::Sysfs {
            None
        } else {
            this.alloc_dma(csdev)?
        };
        let mut users = this.tmc.users();
        let (r, unused) = if users.reading {
            (Err(EBUSY), fresh)
        } else if csdev.mode() == Mode::Sysfs {
            users.count = users.count.saturating_add(1);
            return Ok(());
        } else if !csdev.take_mode(Mode::Sysfs) {
            (Err(EBUSY), fresh)
        } else {
            let (r, old) = this.start(csdev, fresh);
            if r.is_ok() {
                users.count = 1;
                users.sysfs_sink = true;
            } else {
                csdev.set_mode(Mode::Disabled);
            }
            (r, old)
        };
        drop(users);
        drop(unused);
        r?;
        coresight::panic_dump::note_sink_enabled();
        Ok(())
    }

    fn alloc_buffer(&self, csdev: &CsDevice, event: &PerfEvent) -> Result<EtrPerfBuffer> {
        let this = &*self.0;
        let pid = event.owner_pid().ok_or(EINVAL)?;
        let mut list = this.sessions.lock();
        if let Some(s) = list.iter_mut().find(|s| s.pid == pid) {
            s.events = s.events.saturating_add(1);
            return Ok(EtrPerfBuffer {
                sessions: this.sessions.clone(),
                pid,
                buf: s.buf.clone(),
            });
        }
        let size = usize::try_from(this.buffer_size.load(Relaxed)).map_err(|_| EINVAL)?;
        let coherent =
            Coherent::<u8>::zeroed_slice(this.dev, size, GFP_KERNEL).inspect_err(|e| {
                dev_err!(
                    csdev.as_device(),
                    "no flat DMA buffer of {size:#x} bytes for perf: {e:?}\n"
                )
            })?;
        let buf = Arc::new(coherent, GFP_KERNEL)?;
        list.push(
            Session {
                pid,
                buf: buf.clone(),
                events: 1,
            },
            GFP_KERNEL,
        )?;
        Ok(EtrPerfBuffer {
            sessions: this.sessions.clone(),
            pid,
            buf,
        })
    }

    fn sink_enable_perf(
        &self,
        csdev: &CsDevice,
        _path: &Path,
        handle: &AuxHandle,
        buf: &AuxBuffer<EtrPerfBuffer>,
    ) -> Result {
        let this = &*self.0;
        let pid = handle.event().and_then(|e| e.owner_pid()).ok_or(EINVAL)?;
        this.tmc
            .perf_enable(csdev, pid, || this.start_perf(csdev, &buf.data().buf))
    }

    fn update_buffer(
        &self,
        csdev: &CsDevice,
        handle: &AuxHandle,
        buf: &AuxBuffer<EtrPerfBuffer>,
    ) -> usize {
        let this = &*self.0;
        this.tmc
            .perf_update(csdev, || update_etr(this, csdev, handle, buf))
            .unwrap_or(0)
    }

    fn sink_disable(&self, csdev: &CsDevice) -> Result {
        let this = &*self.0;
        let mode = csdev.mode();
        if mode == Mode::Perf {
            if this.tmc.drop_user() > 0 {
                return Err(EBUSY);
            }
            // The last CPU's `update_buffer` stopped it already.
            let r = this.tmc.io(crate::hw::disable_if_capturing);
            csdev.set_mode(Mode::Disabled);
            // Not the buffer's last reference (see `Etr::perf`): nothing is freed here.
            let session = this.perf.lock().take();
            drop(session);
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => dev_warn!(csdev.as_device(), "ETR stop after perf: {e}\n"),
                Err(e) => dev_warn!(
                    csdev.as_device(),
                    "ETR stop after perf: registers busy ({})\n",
                    e.to_errno()
                ),
            }
            return Ok(());
        }
        // The session's last user: room for the copy of its trace that the device file reads
        // once it ends, allocated before the lock (sysfs disables are serialised).
        let mut spare = if this.tmc.users().count == 1 && this.sysfs_trace_bytes() > 0 {
            KVVec::with_capacity(this.sysfs_trace_bytes(), GFP_KERNEL)
                .unwrap_or_else(|_| KVVec::new())
        } else {
            KVVec::new()
        };
        let mut users = this.tmc.users();
        users.count = users.count.saturating_sub(1);
        if users.count > 0 {
            return Err(EBUSY);
        }
        users.perf_owner = None;
        let sysfs = core::mem::replace(&mut users.sysfs_sink, false);
        if mode == Mode::Disabled {
            return Ok(());
        }
        // A reader stopped the ETR and holds its copy of the trace already.
        let r = if users.reading {
            this.tmc.io(crate::hw::disable_if_capturing)
        } else if sysfs {
            if spare.capacity() > users.trace.capacity() {
                core::mem::swap(&mut users.trace, &mut spare);
            }
            let mut trace = core::mem::take(&mut users.trace);
            let r = this.drain_sysfs(&mut trace);
            users.trace = trace;
            r.and_then(|()| this.tmc.io(crate::hw::disable_if_capturing))
        } else {
            this.tmc.io(crate::hw::disable)
        };
        csdev.set_mode(Mode::Disabled);
        drop(users);
        drop(spare);
        match r {
            Ok(Ok(())) => this.free_dma(),
            Ok(Err(e)) => {
                // The ETR may still write: keep its buffer until the next session.
                dev_warn!(csdev.as_device(), "ETR stop: {e}; its buffer is kept\n")
            }
            Err(e) => dev_warn!(
                csdev.as_device(),
                "ETR stop: registers busy ({}); its buffer is kept\n",
                e.to_errno()
            ),
        }
        dev_dbg!(csdev.as_device(), "TMC-ETR disabled\n");
        Ok(())
    }
}

/// Copies the ETR's trace into the AUX pages for perf's `update_buffer`, the session's last CPU
/// with the users locked; returns the bytes written.
fn update_etr<B: Backend>(
    this: &Etr<'_, B>,
    csdev: &CsDevice,
    handle: &AuxHandle,
    buf: &AuxBuffer<EtrPerfBuffer>,
) -> usize {
    let session = &buf.data().buf;
    // Snapshot mode: the whole buffer, newest last; perf keeps the newest of its ring.
    let room = if buf.snapshot() {
        usize::MAX
    } else {
        handle.size()
    };
    // An update while the event runs is an AUX pause: the ETR captures again afterwards.
    let restart = handle.event().is_some_and(|e| e.is_active());
    let setup = this.setup_for(session);
    let mem = DmaMemory(session);
    let mut out = buf.writer(handle.head());
    let Ok((drained, restarted)) = this.tmc.io(|io| {
        let d = etr::perf_drain(io, &mem, setup.dba, room, |b| out.put_slice(b));
        let r = restart.then(|| etr::enable(io, &setup));
        (d, r)
    }) else {
        return 0;
    };
    if let Some(f) = drained.failure {
        dev_warn!(csdev.as_device(), "ETR drain for perf: {}\n", f.name());
    }
    crate::driver::perf_update_done(
        csdev,
        handle,
        buf.snapshot(),
        drained.bytes,
        drained.lost,
        restarted,
    )
}

/// Writes the record of the stopped ETR with a copy of the DMA buffer `coherent` into `slot`.
fn record_copy(
    stop: &etr::EtrStop,
    coherent: &Coherent<[u8]>,
    slot: &mut [u8],
) -> core::result::Result<etr::EtrSummary, EtrRecordError> {
    let mem = DmaMemory(coherent);
    let b = PanicBuffer {
        dba: coherent.dma_address(),
        paddr: 0,
        // CAST: `usize` fits in `u64`.
        size: coherent.size() as u64,
        copy_from: Some(&mem),
    };
    etr::panic_record(stop, Some(&b), slot)
}

/// The session's DMA buffer, as the panic callback reads it.
struct DmaMemory<'a>(&'a Coherent<[u8]>);

impl EtrMemory for DmaMemory<'_> {
    fn size(&self) -> usize {
        self.0.size()
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        copy_out(self.0, offset, out).is_ok()
    }
}

/// Copies `out.len()` bytes at `offset` of `buf` into `out`.
fn copy_out(buf: &Coherent<[u8]>, offset: usize, out: &mut [u8]) -> Result {
    let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
    io_project!(buf, [try: offset..end]).copy_to_slice(out);
    Ok(())
}

/// The record's outcome as the error its record keeps (`None`: complete, or nothing captured).
fn record_error(outcome: EtrOutcome) -> Option<Error> {
    match outcome {
        EtrOutcome::Complete | EtrOutcome::NotEnabled | EtrOutcome::NotCircularBuffer => None,
        EtrOutcome::Locked => Some(EACCES),
        EtrOutcome::Truncated => Some(ENOSPC),
        EtrOutcome::FlushTimeout | EtrOutcome::ReadyTimeout => Some(ETIMEDOUT),
        EtrOutcome::MemErr => Some(EIO),
        EtrOutcome::BadPointers | EtrOutcome::NoBuffer => Some(ENODATA),
    }
}

/// The ETR's panic callback.
pub(crate) struct EtrDrain<'a, B: Backend>(Arc<Etr<'a, B>>);

impl<B: Backend> DumpCallback for EtrDrain<'_, B> {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let this = &*self.0;
        let name = &*this.tmc.name;
        if buf.len() < ETR_RECORD_HEADER_LEN {
            return Err(ENOSPC);
        }
        let Ok(stop) = this.tmc.io(etr::panic_stop) else {
            // A CPU stopped by the panic was in the middle of a register sequence.
            pr_emerg!("{name}: registers in use by a stopped CPU; not stopped\n");
            return Err(EBUSY);
        };
        // A perf session's buffer first: the ETR writes there while perf owns it.
        let perf = this.perf.try_lock();
        let perf_buf = perf.as_ref().and_then(|g| (**g).as_deref());
        let summary = match (&this.reserved, perf_buf) {
            (_, Some(coherent)) => record_copy(&stop, coherent, buf),
            (Some(r), None) => {
                let b = PanicBuffer {
                    dba: r.dma.dma_address(),
                    paddr: r.region.base(),
                    size: r.size,
                    copy_from: None,
                };
                etr::panic_record(&stop, Some(&b), buf)
            }
            (None, None) => match this.dma.try_lock() {
                Some(guard) => match (*guard).as_ref() {
                    Some(coherent) => record_copy(&stop, coherent, buf),
                    None => etr::panic_record(&stop, None, buf),
                },
                // A stopped CPU was changing the buffer: none is known.
                None => etr::panic_record(&stop, None, buf),
            },
        };
        let summary = summary.map_err(|_| ENOSPC)?;
        *written = summary.record_len;
        let Some(err) = record_error(summary.outcome) else {
            return Ok(());
        };
        pr_emerg!(
            "{name}: trace record: {}, {} of {} trace bytes copied\n",
            summary.outcome.name(),
            summary.trace_len,
            summary.data_len
        );
        Err(err)
    }
}

/// A reserved region's mapping, as a capture kernel copies a trace buffer from it.
struct MappedMemory(Mapping);

impl EtrMemory for MappedMemory {
    fn size(&self) -> usize {
        self.0.len()
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        self.0.read(offset, out).is_ok()
    }
}

/// In a kdump capture kernel, before anything else touches the ETR: when the crashed kernel left
/// it capturing (no panic-time step ran: kdump without `crash_kexec_post_notifiers`), flushes and
/// stops it as the panic path does, and hands its record over as the vmcore device dump
/// `coresight_capture:NAME`, which the host tool joins to the crashed kernel's region.
///
/// The record holds the registers, and the trace stays where the ETR wrote it: in the crashed
/// kernel's memory or a `tracedata` region the vmcore holds. A `no-map` `tracedata` region
/// reaches the vmcore only as the core's device dump, copied when the core started, before this
/// stop: its trace, as the stop left it, is copied into the record.
fn hand_over_capture<B: Backend>(
    dev: &Device<Core<'_>>,
    backend: &mut B,
    name: &CStr,
    reserved: Option<&Reserved>,
) {
    if !crate::driver::left_capturing(dev, backend, name) {
        return;
    }
    let copy = match reserved {
        Some(r) if r.region.origin() == (Origin::DeviceTree { no_map: true }) => {
            match r.region.map() {
                Ok(m) => Some(MappedMemory(m)),
                Err(e) => {
                    dev_err!(dev, "{}: tracedata region not mapped: {:?}\n", name, e);
                    None
                }
            }
        }
        _ => None,
    };
    let bytes = copy.as_ref().map_or(0, |m| m.size());
    let Some(slot) = EtrRecord::slot_len_for(bytes) else {
        return;
    };
    let info = DumpInfo {
        name,
        kind: DumpType::Sink,
        cpu: None,
        max_bytes: slot,
        payload: DumpPayload::Etr,
    };
    let mut summary = None;
    let done = coresight::panic_dump::hand_over_capture(info, |buf, written| {
        let stop = backend.with_io(etr::panic_stop)?;
        let buffer = match reserved {
            Some(r) => PanicBuffer {
                dba: r.dma.dma_address(),
                paddr: r.region.base(),
                size: r.size,
                copy_from: copy.as_ref().map(|m| m as &dyn EtrMemory),
            },
            // The crashed kernel's DMA buffer: where `DBA` points, which is its physical address
            // when no IOMMU translates the ETR's writes.
            None => {
                let h = stop.header();
                PanicBuffer {
                    dba: h.dba,
                    paddr: h.dba,
                    size: h.layout().map_or(0, |l| l.size),
                    copy_from: None,
                }
            }
        };
        let s = etr::panic_record(&stop, Some(&buffer), buf).map_err(|_| ENOSPC)?;
        *written = s.record_len;
        summary = Some(s);
        record_error(s.outcome).map_or(Ok(()), Err)
    });
    match (done, summary) {
        (Ok(()), Some(s)) => dev_info!(
            dev,
            "{}: the crashed kernel left it capturing: stopped ({}), {} trace bytes ({} copied) \
             handed over as a vmcore device dump\n",
            name,
            s.outcome.name(),
            s.data_len,
            s.trace_len
        ),
        (Ok(()), None) => {}
        (Err(e), _) => dev_err!(
            dev,
            "{}: the crashed kernel's trace not handed over ({})\n",
            name,
            e.to_errno()
        ),
    }
}

/// A bound ETR.
pub(crate) type EtrDevice<'a, B> = Component<EtrOps<'a, B>, EtrDrain<'a, B>>;

/// Finds the node's `tracedata` region and maps it for the ETR.
fn reserved_buffer(dev: &Device<Bound>) -> Result<Option<Reserved>> {
    let Ok(region) = ReservedRegion::from_device(dev, c_str!("tracedata")) else {
        return Ok(None);
    };
    // Whole frames, and an `RSZ` the register holds.
    let size = (region.size() & !15).min(ETR_MAX_BUFFER);
    if !region.base().is_multiple_of(8) || size == 0 {
        dev_err!(
            dev,
            "tracedata region at {:#x} ({:#x} bytes) is not 8-byte aligned or too small\n",
            region.base(),
            region.size()
        );
        return Err(EINVAL);
    }
    let dma = region.dma_map(dev).inspect_err(|e| {
        dev_err!(
            dev,
            "tracedata region at {:#x} cannot be mapped for DMA: {e:?}\n",
            region.base()
        )
    })?;
    Ok(Some(Reserved { region, dma, size }))
}

/// Probes a TMC whose `DEVID` says it is an ETR.
///
/// Sets the DMA mask from `DEVID.AXIAW`, finds the `tracedata` region, and registers the sink and
/// its panic callback, whose slot holds a copy of a default-sized DMA buffer when there is no
/// reserved region and the record header only when there is.
pub(crate) fn probe_etr<'a, B: Backend + 'a>(
    adev: &'a kernel::amba::Device<Core<'_>>,
    mut backend: B,
    devid: DEVID,
) -> Result<(impl PinInit<EtrDevice<'a, B>, Error> + 'a, Arc<Etr<'a, B>>)> {
    let dev: &Device<Core<'_>> = adev.as_ref();
    let bits = devid.address_bits();
    let mask = DmaMask::try_new(bits)?;
    // SAFETY: At probe nothing allocates or maps DMA memory for this device yet.
    unsafe { dma::Device::dma_set_mask_and_coherent(adev, mask) }
        .inspect_err(|e| dev_err!(dev, "no {bits}-bit DMA mask: {e:?}\n"))?;
    dev_info!(dev, "Detected dma mask {bits}bits\n");

    let bound: &'a Device<Bound> = dev;
    let reserved = reserved_buffer(bound)?;
    let slot = match &reserved {
        Some(_) => EtrRecord::slot_len_for(0),
        // CAST: `u32` fits in `usize` on the 64-bit machines with CoreSight ETRs.
        None => EtrRecord::slot_len_for(ETR_DEFAULT_BUFFER as usize),
    }
    .ok_or(EINVAL)?;
    // The SoC-600 TMC-ETR (part 0x9e8) keeps its pointers across sessions.
    let save_restore = adev.periphid() & 0xFFF == 0x9E8;
    let name = coresight::alloc_device_name(c_str!("tmc_etr"), bound)?;
    match &reserved {
        Some(r) => dev_info!(
            dev,
            "{}: trace buffer in the tracedata region at {:#x}, {} KiB, dump slot {} bytes\n",
            &*name,
            r.region.base(),
            r.size / 1024,
            slot
        ),
        None => dev_info!(
            dev,
            "{}: DMA trace buffer of buffer_size bytes ({} KiB), dump slot {} bytes\n",
            &*name,
            ETR_DEFAULT_BUFFER / 1024,
            slot
        ),
    }
    if crash_dump::is_kdump_kernel() {
        hand_over_capture(dev, &mut backend, &name, reserved.as_ref());
    }
    let record_name = CString::try_from_fmt(fmt!("{}", &*name))?;
    let etr = Arc::pin_init(
        try_pin_init!(Etr {
            tmc <- Tmc::new(backend, name, 0),
            dev: bound,
            reserved,
            dma <- new_spinlock!(None),
            perf <- new_spinlock_irq!(None, "coresight_etr_perf"),
            sessions: Arc::pin_init(new_mutex!(KVec::new()), GFP_KERNEL)?,
            buffer_size: Atomic::new(ETR_DEFAULT_BUFFER),
            buf_mode: Atomic::new(BUF_MODE_AUTO),
            save_restore,
        }),
        GFP_KERNEL,
    )?;
    let component = Component::new(
        bound,
        ComponentInfo {
            name: record_name,
            kind: Kind::Sink(SinkKind::SysMem),
            cpu: None,
            dump: DumpType::Sink,
            max_bytes: slot,
            payload: DumpPayload::Etr,
            pm_save: false,
        },
        EtrOps(etr.clone()),
        EtrDrain(etr.clone()),
    );
    Ok((component, etr))
}

/// The device file of the ETR `etr`, named after it.
pub(crate) fn etr_file<'a, B: Backend + 'a>(
    etr: Arc<Etr<'a, B>>,
) -> Result<impl PinInit<DevFileRegistration<EtrFile<'a, B>>, Error>> {
    let name = CString::try_from_fmt(fmt!("{}", &*etr.tmc.name))?;
    Ok(DevFileRegistration::register(name, etr))
}

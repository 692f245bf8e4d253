// SPDX-License-Identifier: GPL-2.0

//! An ETB or ETF: its CoreSight sink and link operations, and the panic callback that drains the
//! trace RAM into the dump ([`hw::panic_drain`]). [`crate::probe`] binds it; an ETR is driven by
//! [`crate::etr_driver`].

use core::{
    fmt::Write,
    marker::PhantomData, //
};

use kernel::{
    c_str,
    coresight::{
        self,
        access::{
            CsAccess,
            AUTHSTATUS, //
        },
        component::{
            Backend,
            Component,
            ComponentInfo,
            Regs, //
        },
        devfile::{
            DevFile,
            DevFileRegistration, //
        },
        panic_dump::{
            format::tmc::{
                TmcOutcome,
                TmcRecord, //
            },
            DumpCallback,
            DumpInfo,
            DumpPayload,
            DumpType, //
        },
        perf::{
            AuxBuffer,
            AuxFlag,
            AuxHandle,
            PerfEvent, //
        },
        Attribute,
        AttributeBuf,
        AttributeGroup,
        AttributeMode,
        CsDevice,
        Kind,
        LinkKind,
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
    fmt,
    iov::IovIterDest,
    prelude::*,
    str::{
        CStr,
        CString, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            smp_mb,
            Full, //
        },
        new_spinlock_irq,
        Arc,
        SpinLockIrq,
        SpinLockIrqGuard, //
    },
};

use crate::{
    hw::{
        self,
        TmcError, //
    },
    regs::{
        TmcConfigType,
        AXICTL,
        CTL,
        DBAHI,
        DBALO,
        DEVID,
        FFCR,
        FFSR,
        MODE,
        PSCR,
        RRP,
        RRPHI,
        RSZ,
        RWP,
        RWPHI,
        STS,
        TRG, //
    },
};

/// Who is using a TMC: the sources writing into it, in perf mode the perf session, and the
/// device file's reader.
#[derive(Default)]
pub(crate) struct Users {
    /// Sources writing into this sink (or paths through this link).
    pub(crate) count: u32,
    /// The process ID of the perf session that owns the sink, in perf mode: one session at a
    /// time, as upstream's `drvdata->pid`.
    pub(crate) perf_owner: Option<i32>,
    /// A sysfs session has the TMC as its sink (not as a link).
    pub(crate) sysfs_sink: bool,
    /// The device file is open: no session starts until it is released, as upstream's
    /// `drvdata->reading`.
    pub(crate) reading: bool,
    /// What the last sysfs session captured, drained when it stopped or when the device file
    /// was opened: the device file's contents. Its capacity (the ETB's or ETF's RAM, the ETR's
    /// buffer) is allocated before the lock is taken; the open file holds it while it is open.
    pub(crate) trace: KVVec<u8>,
}

/// One TMC, shared by its CoreSight operations and its panic callback.
#[pin_data]
pub(crate) struct Tmc<B: Backend> {
    /// The registers, claimed around every register sequence.
    #[pin]
    regs: Regs<B>,
    /// Who uses the sink. Taken before the registers (never at panic): perf enables, updates and
    /// disables the sink from several CPUs at once, with interrupts off.
    #[pin]
    users: SpinLockIrq<Users>,
    /// The name on the CoreSight bus and of the dump record.
    pub(crate) name: CString,
    /// `trigger_cntr`: `TRG` of the next session.
    pub(crate) trigger_cntr: Atomic<u32>,
    /// `stop_on_flush`: set `FFCR.StopOnFl` for the next session.
    pub(crate) stop_on_flush: Atomic<bool>,
    /// The trace RAM's size in bytes.
    ram_bytes: usize,
}

impl<B: Backend> Tmc<B> {
    /// Returns a TMC with no users, whose registers `backend` reaches and whose trace RAM holds
    /// `ram_bytes` (0 for an ETR, which writes to memory).
    pub(crate) fn new(backend: B, name: CString, ram_bytes: usize) -> impl PinInit<Self> {
        pin_init!(Self {
            regs <- Regs::new(backend),
            users <- new_spinlock_irq!(Users::default(), "coresight_tmc_users"),
            name,
            trigger_cntr: Atomic::new(0),
            stop_on_flush: Atomic::new(false),
            ram_bytes,
        })
    }

    /// Reads register `i` of [`MGMT_ATTRIBUTES`] (`mgmt/`), a pair of registers as one value.
    fn mgmt(&self, i: usize) -> Result<u64> {
        self.io(|io| {
            let r = |v: u32| Some(u64::from(v));
            let pair = |lo: u32, hi: u32| Some(u64::from(hi) << 32 | u64::from(lo));
            match i {
                0 => r(io.read(RSZ).into_raw()),
                1 => r(io.read(STS).into_raw()),
                2 => pair(io.read(RRP).into_raw(), io.read(RRPHI).into_raw()),
                3 => pair(io.read(RWP).into_raw(), io.read(RWPHI).into_raw()),
                4 => r(io.read(TRG).into_raw()),
                5 => r(io.read(CTL).into_raw()),
                6 => r(io.read(FFSR).into_raw()),
                7 => r(io.read(FFCR).into_raw()),
                8 => r(io.read(MODE).into_raw()),
                9 => r(io.read(PSCR).into_raw()),
                10 => r(io.read(DEVID).into_raw()),
                11 => pair(io.read(DBALO).into_raw(), io.read(DBAHI).into_raw()),
                12 => r(io.read(AXICTL).into_raw()),
                13 => r(io.read(AUTHSTATUS).into_raw()),
                _ => None,
            }
        })?
        .ok_or(EINVAL)
    }

    /// Shows attribute `index` of the common ones ([`TMC_ATTRIBUTES`] from `first`, then
    /// [`MGMT_ATTRIBUTES`]); `None` for another index.
    pub(crate) fn show_common(
        &self,
        first: usize,
        index: usize,
        out: &mut AttributeBuf<'_>,
    ) -> Option<Result> {
        match index.checked_sub(first)? {
            TRIGGER_CNTR => Some(show_hex(out, u64::from(self.trigger_cntr.load(Relaxed)))),
            STOP_ON_FLUSH => Some(show_hex(out, u64::from(self.stop_on_flush.load(Relaxed)))),
            i => {
                let m = i.checked_sub(TMC_ATTRIBUTES.len())?;
                (m < MGMT_ATTRIBUTES.len()).then(|| {
                    let v = self.mgmt(m)?;
                    writeln!(out, "{v:#x}").map_err(|_| EINVAL)
                })
            }
        }
    }

    /// Stores attribute `index` of the common ones from `first` on, as upstream parses them;
    /// `None` for another index (or `buffer_size`, the configuration's own).
    pub(crate) fn store_common(&self, first: usize, index: usize, input: &[u8]) -> Option<Result> {
        match index.checked_sub(first)? {
            // `kstrtoul(buf, 16)`: hexadecimal, with or without `0x`.
            TRIGGER_CNTR => Some(parse_hex(input).and_then(|v| {
                self.trigger_cntr
                    .store(u32::try_from(v).map_err(|_| ERANGE)?, Relaxed);
                Ok(())
            })),
            STOP_ON_FLUSH => Some(parse_number(input).map(|v| {
                self.stop_on_flush.store(v != 0, Relaxed);
            })),
            _ => None,
        }
    }

    /// Locks the users (never at panic; before the registers).
    pub(crate) fn users(&self) -> SpinLockIrqGuard<'_, Users> {
        self.users.lock()
    }

    /// Drops one user and returns how many are left (never below zero); the last one leaves
    /// no perf owner.
    pub(crate) fn drop_user(&self) -> u32 {
        let mut u = self.users.lock();
        u.count = u.count.saturating_sub(1);
        if u.count == 0 {
            u.perf_owner = None;
        }
        u.count
    }

    /// Enables the sink for the perf session of process `pid` (perf's enable: interrupts off).
    ///
    /// The session's capture may run already (another CPU of a CPU-wide session): that CPU
    /// joins it. Another session or sysfs has the sink: [`EBUSY`], as upstream's drivers. Else
    /// the sink is taken for perf and `start` starts capture; the sink is left disabled when it
    /// fails.
    pub(crate) fn perf_enable(
        &self,
        csdev: &CsDevice,
        pid: i32,
        start: impl FnOnce() -> Result,
    ) -> Result {
        let mut users = self.users.lock();
        if users.reading {
            return Err(EBUSY);
        }
        match csdev.mode() {
            // sysfs has it: perf waits until it is done.
            Mode::Sysfs => return Err(EBUSY),
            Mode::Perf => {
                if users.perf_owner != Some(pid) {
                    return Err(EBUSY);
                }
                users.count = users.count.saturating_add(1);
                return Ok(());
            }
            Mode::Disabled => {}
        }
        if !csdev.take_mode(Mode::Perf) {
            return Err(EBUSY);
        }
        start().inspect_err(|_| csdev.set_mode(Mode::Disabled))?;
        users.count = 1;
        users.perf_owner = Some(pid);
        drop(users);
        coresight::panic_dump::note_sink_enabled();
        Ok(())
    }

    /// Runs `update` for perf's `update_buffer` when the caller is the last CPU of the session
    /// writing into the sink (the others still write into it: it is drained by the last one),
    /// with the users locked; `None` otherwise.
    pub(crate) fn perf_update<R>(&self, csdev: &CsDevice, update: impl FnOnce() -> R) -> Option<R> {
        if csdev.mode() != Mode::Perf {
            return None;
        }
        let users = self.users.lock();
        let r = (users.count == 1).then(update);
        drop(users);
        r
    }

    /// Runs `f` with the registers, unless another caller has them ([`EBUSY`]).
    pub(crate) fn io<R>(&self, f: impl FnOnce(&mut B::Io) -> R) -> Result<R> {
        let mut claim = self.regs.try_claim().ok_or(EBUSY)?;
        claim.with_io(f)
    }

    /// Starts capture in Circular Buffer mode for `mode`, which `csdev` was taken for; gives the
    /// mode back on failure.
    fn start_capture(&self, csdev: &CsDevice) -> Result {
        let (trg, sof) = (
            self.trigger_cntr.load(Relaxed),
            self.stop_on_flush.load(Relaxed),
        );
        self.io(|io| hw::enable_circular_with(io, trg, sof))
            .and_then(|r| {
                r.inspect_err(|e| dev_err!(csdev.as_device(), "TMC not enabled: {e}\n"))
                    .map_err(Error::from)
            })
            .inspect_err(|_| csdev.set_mode(Mode::Disabled))
    }

    /// Stops capture and drains the RAM into `trace` (emptied first; never beyond its
    /// capacity), then disables the TMC: upstream's `tmc_etb_disable_hw()` in sysfs mode.
    fn drain_and_disable(
        &self,
        trace: &mut KVVec<u8>,
    ) -> Result<core::result::Result<(), TmcError>> {
        trace.clear();
        let room = trace.capacity();
        self.io(|io| {
            let drained = hw::perf_drain(io, room, |w| {
                // Within the capacity: `perf_drain` hands over at most `room` bytes.
                let _ = trace.extend_from_slice(&w.to_le_bytes(), GFP_NOWAIT);
            });
            drained.stop.result().and(hw::disable(io))
        })
    }

    /// Opens the device file: takes what the last sysfs session captured, stopping the
    /// session's capture first (it resumes at [`Tmc::close_reader`]). [`EBUSY`] while another
    /// reader has it; [`EINVAL`] while perf has the sink, while the TMC is a link (a hardware
    /// FIFO keeps nothing to read) or when no sysfs session captured anything, as upstream's
    /// `tmc_read_prepare_etb()`.
    pub(crate) fn open_reader(&self) -> Result<KVVec<u8>> {
        self.open_reader_with(
            &mut KVVec::new(),
            |trace| match self.drain_and_disable(trace) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => {
                    pr_warn!("{}: stop for reading: {e}\n", &*self.name);
                    Ok(())
                }
                Err(e) => Err(e),
            },
            || self.restart_capture(),
        )
    }

    /// [`Tmc::open_reader`] with a configuration's own stop and restart: `stop` stops a running
    /// sysfs session's capture and drains it into the buffer it is given (emptied, room for all
    /// of it); `restart` starts capture again. `spare`, allocated before any lock, replaces the
    /// device file's buffer when it has more room; the buffer it replaced is left in `spare`,
    /// for the caller to free.
    pub(crate) fn open_reader_with(
        &self,
        spare: &mut KVVec<u8>,
        stop: impl FnOnce(&mut KVVec<u8>) -> Result,
        restart: impl FnOnce(),
    ) -> Result<KVVec<u8>> {
        let mut users = self.users.lock();
        if users.reading {
            return Err(EBUSY);
        }
        if users.perf_owner.is_some() || (users.count > 0 && !users.sysfs_sink) {
            return Err(EINVAL);
        }
        if users.sysfs_sink {
            if spare.capacity() > users.trace.capacity() {
                core::mem::swap(&mut users.trace, spare);
            }
            let mut trace = core::mem::take(&mut users.trace);
            let r = stop(&mut trace);
            users.trace = trace;
            r?;
        }
        if users.trace.is_empty() {
            if users.sysfs_sink {
                restart();
            }
            return Err(EINVAL);
        }
        users.reading = true;
        Ok(core::mem::take(&mut users.trace))
    }

    /// Starts the sysfs session's capture again after a read stopped it (the users locked).
    fn restart_capture(&self) {
        let (trg, sof) = (
            self.trigger_cntr.load(Relaxed),
            self.stop_on_flush.load(Relaxed),
        );
        match self.io(|io| hw::enable_circular_with(io, trg, sof)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => pr_warn!("{}: capture not restarted: {e}\n", &*self.name),
            Err(_) => pr_warn!("{}: capture not restarted: registers busy\n", &*self.name),
        }
    }

    /// Releases the device file: gives `trace` back and, when the sysfs session still runs,
    /// starts its capture again, as upstream's `tmc_read_unprepare_etb()`.
    pub(crate) fn close_reader(&self, trace: KVVec<u8>) {
        self.close_reader_with(trace, || self.restart_capture());
    }

    /// [`Tmc::close_reader`] with a configuration's own `restart`.
    pub(crate) fn close_reader_with(&self, trace: KVVec<u8>, restart: impl FnOnce()) {
        let mut users = self.users.lock();
        users.reading = false;
        users.trace = trace;
        if users.sysfs_sink {
            restart();
        }
    }
}

/// The TMC as a CoreSight sink (and, for an ETF, a link).
pub(crate) struct SinkOps<B: Backend>(Arc<Tmc<B>>);

/// The attributes every TMC shows, as upstream's `coresight_tmc_group`, in this order after a
/// configuration's own (`buffer_size` is each configuration's).
pub(crate) const TMC_ATTRIBUTES: [Attribute; 2] = [
    Attribute {
        name: c_str!("trigger_cntr"),
        mode: AttributeMode::ReadWrite,
    },
    Attribute {
        name: c_str!("stop_on_flush"),
        mode: AttributeMode::ReadWrite,
    },
];
/// Index of `trigger_cntr` in [`TMC_ATTRIBUTES`].
const TRIGGER_CNTR: usize = 0;
/// Index of `stop_on_flush` in [`TMC_ATTRIBUTES`].
const STOP_ON_FLUSH: usize = 1;

/// A read-only attribute.
const fn ro(name: &'static CStr) -> Attribute {
    Attribute {
        name,
        mode: AttributeMode::ReadOnly,
    }
}

/// `mgmt/`: the registers upstream's TMC driver shows, by its names and in its order (`rrp`,
/// `rwp` and `dba` with their high halves).
pub(crate) const MGMT_ATTRIBUTES: [Attribute; 14] = [
    ro(c_str!("rsz")),
    ro(c_str!("sts")),
    ro(c_str!("rrp")),
    ro(c_str!("rwp")),
    ro(c_str!("trg")),
    ro(c_str!("ctl")),
    ro(c_str!("ffsr")),
    ro(c_str!("ffcr")),
    ro(c_str!("mode")),
    ro(c_str!("pscr")),
    ro(c_str!("devid")),
    ro(c_str!("dba")),
    ro(c_str!("axictl")),
    ro(c_str!("authstatus")),
];

/// The `mgmt/` group.
pub(crate) const MGMT_GROUP: AttributeGroup = AttributeGroup {
    name: Some(c_str!("mgmt")),
    attributes: &MGMT_ATTRIBUTES,
};

/// Index of `buffer_size` in [`SinkOps`]' attributes; [`TMC_ATTRIBUTES`] follow.
const ETF_BUFFER_SIZE: usize = 0;

/// Parses a number as `kstrtoul(buf, 0, ...)` does: `0x` for hexadecimal, a leading `0` for
/// octal, else decimal; a trailing newline is allowed.
pub(crate) fn parse_number(input: &[u8]) -> Result<u64> {
    let s = input.strip_suffix(b"\n").unwrap_or(input);
    let (digits, radix) = if let Some(h) = s.strip_prefix(b"0x").or(s.strip_prefix(b"0X")) {
        (h, 16)
    } else if s.len() > 1 && s.first() == Some(&b'0') {
        (s.get(1..).unwrap_or(&[]), 8)
    } else {
        (s, 10)
    };
    parse_digits(digits, radix)
}

/// Parses a number as `kstrtoul(buf, 16, ...)` does: hexadecimal, `0x` allowed.
fn parse_hex(input: &[u8]) -> Result<u64> {
    let s = input.strip_suffix(b"\n").unwrap_or(input);
    parse_digits(
        s.strip_prefix(b"0x").or(s.strip_prefix(b"0X")).unwrap_or(s),
        16,
    )
}

fn parse_digits(digits: &[u8], radix: u32) -> Result<u64> {
    if digits.is_empty() {
        return Err(EINVAL);
    }
    let mut v: u64 = 0;
    for &c in digits {
        let d = char::from(c).to_digit(radix).ok_or(EINVAL)?;
        v = v
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(ERANGE)?;
    }
    Ok(v)
}

/// Writes `v` as the C driver's `sprintf("%#x\n")` does in the kernel (`0x0` for zero too).
pub(crate) fn show_hex(out: &mut AttributeBuf<'_>, v: u64) -> Result {
    writeln!(out, "{v:#x}").map_err(|_| EINVAL)
}

#[vtable]
impl<B: Backend> coresight::Operations for SinkOps<B> {
    /// The ETB/ETF keeps nothing per session: it writes where each transaction's head is.
    type PerfBuffer = ();

    const ATTRIBUTE_GROUPS: &'static [AttributeGroup] = &[
        AttributeGroup {
            name: None,
            attributes: &[
                Attribute {
                    name: c_str!("buffer_size"),
                    mode: AttributeMode::ReadWrite,
                },
                TMC_ATTRIBUTES[0],
                TMC_ATTRIBUTES[1],
            ],
        },
        MGMT_GROUP,
    ];

    fn show(&self, _csdev: &CsDevice, index: usize, out: &mut AttributeBuf<'_>) -> Result {
        let tmc = &*self.0;
        if index == ETF_BUFFER_SIZE {
            // The RAM's size in bytes, as upstream's `drvdata->size`.
            let words = tmc.io(|io| io.read(RSZ).words().get())?;
            return show_hex(out, u64::from(words) * 4);
        }
        tmc.show_common(ETF_BUFFER_SIZE + 1, index, out)
            .unwrap_or(Err(EINVAL))
    }

    fn store(&self, _csdev: &CsDevice, index: usize, input: &[u8]) -> Result {
        let tmc = &*self.0;
        if index == ETF_BUFFER_SIZE {
            // Only an ETR's buffer has a size to choose, as upstream.
            return Err(EPERM);
        }
        tmc.store_common(ETF_BUFFER_SIZE + 1, index, input)
            .unwrap_or(Err(EINVAL))
    }

    fn sink_enable(&self, csdev: &CsDevice, mode: Mode, _path: &Path) -> Result {
        let tmc = &*self.0;
        if mode != Mode::Sysfs {
            return Err(EINVAL);
        }
        // The device file's buffer, allocated before the lock (kept from an earlier session).
        let mut spare = if tmc.users.lock().trace.capacity() < tmc.ram_bytes {
            KVVec::with_capacity(tmc.ram_bytes, GFP_KERNEL)?
        } else {
            KVVec::new()
        };
        let mut users = tmc.users.lock();
        if users.reading {
            return Err(EBUSY);
        }
        if csdev.mode() == Mode::Sysfs {
            users.count = users.count.saturating_add(1);
            return Ok(());
        }
        if !csdev.take_mode(Mode::Sysfs) {
            return Err(EBUSY);
        }
        tmc.start_capture(csdev)?;
        users.count = 1;
        users.sysfs_sink = true;
        if users.trace.capacity() < spare.capacity() {
            core::mem::swap(&mut users.trace, &mut spare);
        }
        drop(users);
        drop(spare);
        dev_dbg!(csdev.as_device(), "TMC-ETB/ETF enabled\n");
        coresight::panic_dump::note_sink_enabled();
        Ok(())
    }

    fn alloc_buffer(&self, _csdev: &CsDevice, _event: &PerfEvent) -> Result {
        Ok(())
    }

    fn sink_enable_perf(
        &self,
        csdev: &CsDevice,
        _path: &Path,
        handle: &AuxHandle,
        _buf: &AuxBuffer<()>,
    ) -> Result {
        let tmc = &*self.0;
        let pid = handle.event().and_then(|e| e.owner_pid()).ok_or(EINVAL)?;
        tmc.perf_enable(csdev, pid, || tmc.start_capture(csdev))
    }

    fn update_buffer(&self, csdev: &CsDevice, handle: &AuxHandle, buf: &AuxBuffer<()>) -> usize {
        let tmc = &*self.0;
        tmc.perf_update(csdev, || update_etf(tmc, csdev, handle, buf))
            .unwrap_or(0)
    }

    fn sink_disable(&self, csdev: &CsDevice) -> Result {
        let tmc = &*self.0;
        let mut users = tmc.users.lock();
        users.count = users.count.saturating_sub(1);
        if users.count > 0 {
            return Err(EBUSY);
        }
        users.perf_owner = None;
        let sysfs = core::mem::replace(&mut users.sysfs_sink, false);
        if csdev.mode() == Mode::Disabled {
            return Ok(());
        }
        // A sysfs session's trace stays readable through the device file; a reader stopped
        // the TMC already.
        let r = if users.reading {
            tmc.io(hw::disable_if_capturing)
        } else if sysfs {
            let mut trace = core::mem::take(&mut users.trace);
            let r = tmc.drain_and_disable(&mut trace);
            users.trace = trace;
            r
        } else {
            tmc.io(hw::disable)
        };
        csdev.set_mode(Mode::Disabled);
        drop(users);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => dev_warn!(csdev.as_device(), "TMC stop: {e}\n"),
            Err(e) => dev_warn!(
                csdev.as_device(),
                "TMC stop: registers busy ({})\n",
                e.to_errno()
            ),
        }
        dev_dbg!(csdev.as_device(), "TMC-ETB/ETF disabled\n");
        Ok(())
    }

    fn link_enable(
        &self,
        csdev: &CsDevice,
        _in: &coresight::Connection,
        _out: &coresight::Connection,
    ) -> Result {
        let tmc = &*self.0;
        let mut users = tmc.users.lock();
        if csdev.mode() == Mode::Sysfs {
            users.count = users.count.saturating_add(1);
            return Ok(());
        }
        if !csdev.take_mode(Mode::Sysfs) {
            return Err(EBUSY);
        }
        tmc.io(hw::enable_hw_fifo)
            .and_then(|r| {
                r.inspect_err(|e| dev_err!(csdev.as_device(), "TMC link not enabled: {e}\n"))
                    .map_err(Error::from)
            })
            .inspect_err(|_| csdev.set_mode(Mode::Disabled))?;
        users.count = 1;
        Ok(())
    }

    fn link_disable(
        &self,
        csdev: &CsDevice,
        _in: &coresight::Connection,
        _out: &coresight::Connection,
    ) {
        let tmc = &*self.0;
        let mut users = tmc.users.lock();
        users.count = users.count.saturating_sub(1);
        if users.count == 0 && csdev.mode() != Mode::Disabled {
            let _ = tmc.io(hw::disable);
            csdev.set_mode(Mode::Disabled);
        }
    }
}

/// Drains the ETF into the AUX pages for perf's `update_buffer`, the session's last CPU with
/// the users locked; returns the bytes written.
fn update_etf<B: Backend>(
    tmc: &Tmc<B>,
    csdev: &CsDevice,
    handle: &AuxHandle,
    buf: &AuxBuffer<()>,
) -> usize {
    // In snapshot mode the whole RAM goes, newest data last: perf keeps the newest of the AUX
    // ring, so no room is respected and nothing is flagged lost (a TRUNCATED record would keep
    // the perf core from starting the event again), as upstream's ETF driver.
    let room = if buf.snapshot() {
        usize::MAX
    } else {
        handle.size()
    };
    // An update while the event runs is an AUX pause: the sink captures again afterwards, ready
    // for the resume.
    let restart = handle.event().is_some_and(|e| e.is_active());
    let mut out = buf.writer(handle.head());
    let Ok((drained, restarted)) = tmc.io(|io| {
        let d = hw::perf_drain(io, room, |w| out.put_u32(w));
        let (trg, sof) = (
            tmc.trigger_cntr.load(Relaxed),
            tmc.stop_on_flush.load(Relaxed),
        );
        let r =
            restart.then(|| hw::disable(io).and_then(|()| hw::enable_circular_with(io, trg, sof)));
        (d, r)
    }) else {
        return 0;
    };
    if let Err(e) = drained.stop.result() {
        dev_warn!(csdev.as_device(), "TMC stop for perf: {e}\n");
    }
    perf_update_done(
        csdev,
        handle,
        buf.snapshot(),
        drained.bytes,
        drained.lost,
        restarted,
    )
}

/// Ends a sink's `update_buffer` that wrote `bytes` into the AUX pages: warns when the capture
/// an AUX pause restarts (`restarted`) did not start; in snapshot mode moves the head on (perf
/// finds the newest data by where it ends), else flags the transaction when trace was `lost`;
/// and makes the trace visible before perf publishes the new head, as upstream's `CS_LOCK()`
/// barrier does. Returns `bytes`.
pub(crate) fn perf_update_done<E: fmt::Display>(
    csdev: &CsDevice,
    handle: &AuxHandle,
    snapshot: bool,
    bytes: usize,
    lost: bool,
    restarted: Option<core::result::Result<(), E>>,
) -> usize {
    if let Some(Err(e)) = restarted {
        dev_warn!(
            csdev.as_device(),
            "sink not restarted after an AUX pause: {e}\n"
        );
    }
    if snapshot {
        handle.advance_head(bytes);
    } else if lost {
        handle.flag(AuxFlag::Truncated);
    }
    smp_mb(Full);
    bytes
}

impl fmt::Display for TmcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl From<TmcError> for Error {
    fn from(e: TmcError) -> Self {
        match e {
            TmcError::NotReady | TmcError::FlushTimeout => ETIMEDOUT,
        }
    }
}

/// The TMC's panic callback.
pub(crate) struct Drain<B: Backend>(Arc<Tmc<B>>);

impl<B: Backend> DumpCallback for Drain<B> {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let tmc = &*self.0;
        let Ok(summary) = tmc.io(|io| hw::panic_drain(io, buf)) else {
            // A CPU stopped by the panic was in the middle of a register sequence.
            pr_emerg!(
                "{}: registers in use by a stopped CPU; not drained\n",
                &*tmc.name
            );
            return Err(EBUSY);
        };
        let summary = summary.map_err(|_| ENOSPC)?;
        *written = summary.record_len;
        let Some(err) = drain_error(summary.outcome) else {
            return Ok(());
        };
        pr_emerg!(
            "{}: trace drain: {}, {} trace bytes kept\n",
            &*tmc.name,
            summary.outcome.name(),
            summary.trace_len
        );
        Err(err)
    }
}

/// The drain's outcome as the error its record keeps (`None`: complete, or nothing captured).
fn drain_error(outcome: TmcOutcome) -> Option<Error> {
    match outcome {
        TmcOutcome::Complete | TmcOutcome::NotEnabled | TmcOutcome::NotCircularBuffer => None,
        TmcOutcome::Locked => Some(EACCES),
        TmcOutcome::Truncated => Some(ENOSPC),
        TmcOutcome::FlushTimeout | TmcOutcome::ReadyTimeout | TmcOutcome::RamReadStuck => {
            Some(ETIMEDOUT)
        }
    }
}

/// In a kdump capture kernel: whether the crashed kernel left the TMC capturing (`CTL.TraceCaptEn`;
/// said in the log when it did not).
pub(crate) fn left_capturing<B: Backend>(
    dev: &Device<Core<'_>>,
    backend: &mut B,
    name: &CStr,
) -> bool {
    let capturing = matches!(backend.with_io(|io| io.read(CTL).tracecapten()), Ok(true));
    if !capturing {
        dev_info!(
            dev,
            "{}: not capturing: no trace left by the crashed kernel\n",
            name
        );
    }
    capturing
}

/// In a kdump capture kernel, before anything else touches the TMC: when the crashed kernel left
/// it capturing (no panic-time step ran: kdump without `crash_kexec_post_notifiers`), flushes,
/// stops and drains it as the panic path does, and hands the record over as the vmcore device
/// dump `coresight_capture:NAME`, which the host tool joins to the crashed kernel's region.
fn hand_over_capture<B: Backend>(
    dev: &Device<Core<'_>>,
    backend: &mut B,
    name: &CStr,
    slot: usize,
) {
    if !left_capturing(dev, backend, name) {
        return;
    }
    let mut kept = 0;
    let mut outcome = None;
    let info = DumpInfo {
        name,
        kind: DumpType::Sink,
        cpu: None,
        max_bytes: slot,
        payload: DumpPayload::Tmc,
    };
    let done = coresight::panic_dump::hand_over_capture(info, |buf, written| {
        let summary = backend
            .with_io(|io| hw::panic_drain(io, buf))?
            .map_err(|_| ENOSPC)?;
        *written = summary.record_len;
        kept = summary.trace_len;
        outcome = Some(summary.outcome);
        drain_error(summary.outcome).map_or(Ok(()), Err)
    });
    match (done, outcome) {
        (Ok(()), Some(o)) => dev_info!(
            dev,
            "{}: the crashed kernel left it capturing: drained ({}), {} trace bytes handed \
             over as a vmcore device dump\n",
            name,
            o.name(),
            kept
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

/// A bound TMC.
pub(crate) type TmcDevice<B> = Component<SinkOps<B>, Drain<B>>;

/// The device file of an ETB or ETF (`/dev/tmc_etf0`): what the last sysfs session captured,
/// as upstream's `tmc_fops`.
pub(crate) struct TmcFile<B: Backend>(PhantomData<B>);

#[vtable]
impl<B: Backend> DevFile for TmcFile<B> {
    type Data = Arc<Tmc<B>>;
    type State = KVVec<u8>;

    fn open(tmc: &Arc<Tmc<B>>) -> Result<KVVec<u8>> {
        tmc.open_reader()
    }

    fn read(
        _tmc: &Arc<Tmc<B>>,
        trace: &KVVec<u8>,
        pos: &mut i64,
        out: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        out.simple_read_from_buffer(pos, trace)
    }

    fn release(tmc: &Arc<Tmc<B>>, trace: KVVec<u8>) {
        tmc.close_reader(trace);
    }
}

/// Probes a TMC in its ETB or ETF configuration whose registers `backend` reaches.
pub(crate) fn probe_tmc<'a, B: Backend + 'a>(
    dev: &'a Device<Core<'_>>,
    mut backend: B,
    devid: DEVID,
) -> Result<(impl PinInit<TmcDevice<B>, Error> + 'a, Arc<Tmc<B>>)> {
    // Probe owns the registers until they are put behind the lock below.
    let rsz: RSZ = backend.with_io(|io| io.read(RSZ))?;
    let config = devid.configtype();
    let rsz = rsz.words().get();
    let (prefix, kind) = match config {
        TmcConfigType::Etb => (c_str!("tmc_etb"), Kind::Sink(SinkKind::Buffer)),
        TmcConfigType::Etf => (
            c_str!("tmc_etf"),
            Kind::LinkSink(LinkKind::Fifo, SinkKind::Buffer),
        ),
        _ => {
            dev_err!(
                dev,
                "TMC configuration {:#x} is not an ETB, ETF or ETR\n",
                devid.into_raw()
            );
            return Err(ENODEV);
        }
    };
    if rsz == 0 || rsz > hw::TMC_MAX_RAM_WORDS {
        dev_err!(dev, "TMC RAM size {:#x} words is out of range\n", rsz);
        return Err(ENODEV);
    }
    let slot = TmcRecord::slot_len_for(rsz).ok_or(EINVAL)?;
    let bound: &Device<Bound> = dev;
    let name = coresight::alloc_device_name(prefix, bound)?;
    if crash_dump::is_kdump_kernel() {
        hand_over_capture(dev, &mut backend, &name, slot);
    }
    let ram_bytes = usize::try_from(rsz)
        .ok()
        .and_then(|w| w.checked_mul(4))
        .ok_or(EINVAL)?;
    let tmc = Arc::pin_init(Tmc::new(backend, name, ram_bytes), GFP_KERNEL)?;
    dev_info!(
        dev,
        "{}: {} KiB trace RAM, dump slot {} bytes\n",
        &*tmc.name,
        rsz / 256,
        slot
    );
    let for_dump = tmc.clone();
    let component = Component::new(
        bound,
        ComponentInfo {
            name: CString::try_from_fmt(fmt!("{}", &*tmc.name))?,
            kind,
            cpu: None,
            dump: DumpType::Sink,
            max_bytes: slot,
            payload: DumpPayload::Tmc,
            pm_save: false,
        },
        SinkOps(tmc.clone()),
        Drain(for_dump),
    );
    Ok((component, tmc))
}

/// The device file of the ETB or ETF `tmc`, named after it.
pub(crate) fn tmc_file<B: Backend>(
    tmc: Arc<Tmc<B>>,
) -> Result<impl PinInit<DevFileRegistration<TmcFile<B>>, Error>> {
    let name = CString::try_from_fmt(fmt!("{}", &*tmc.name))?;
    Ok(DevFileRegistration::register(name, tmc))
}

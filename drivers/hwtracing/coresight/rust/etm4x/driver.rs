// SPDX-License-Identifier: GPL-2.0

//! The ETMv4 driver: the AMBA driver of memory-mapped trace units, the CoreSight source
//! operations, and the panic callback that stops the unit and saves its registers
//! ([`Etm4x::panic_save`]).

use core::fmt::Write;

use kernel::{
    amba, c_str,
    coresight::{
        self,
        access::{
            CsAccess,
            FRAME,
            LSR, //
        },
        component::{
            Backend,
            Component,
            ComponentInfo,
            Regs, //
        },
        kernel_at_el2,
        panic_dump,
        panic_dump::{
            format::{
                etm4x::{
                    SaveOutcome,
                    SavedState,
                    SAVED_SESSION_PERF,
                    SAVED_SESSION_SYSFS,
                    SAVED_STATE_SIZE, //
                },
                vmcoreinfo, //
            },
            DumpCallback,
            DumpPayload,
            DumpType, //
        },
        perf::{
            AddrFilter,
            PerfEvent,
            MAX_ADDR_FILTERS, //
        },
        self_hosted,
        Attribute,
        AttributeBuf,
        AttributeGroup,
        AttributeMode,
        CsDevice,
        Kind,
        Mode,
        Path,
        SourceKind, //
    },
    cpu::CpuId,
    cpuhp,
    device::{
        Bound,
        Core,
        Device, //
    },
    fmt,
    io::{
        mem::IoMem,
        register::Array, //
    },
    prelude::*,
    smp,
    str::CString,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_spinlock,
        new_spinlock_irq,
        Arc,
        SpinLock,
        SpinLockIrq, //
    },
};

use crate::{
    hw::{
        AddrSetting,
        CmpView,
        Etm4x,
        Etm4xError,
        Etm4xIds,
        FoundLocks,
        Interface,
        OwnCpu,
        PerfFilter,
        PerfOptions,
        SettingError,
        SysfsSettings,
        Timeout,
        TraceConfig, //
    },
    module_parameters,
    regs::{
        MAX_ADDR_COMPARATORS,
        TRCCONFIGR,
        TRCDEVID,
        TRCOSLSR,
        TRCPDCR,
        TRCPDSR,
        TRCPIDR, //
    },
};

/// One trace unit, shared by its CoreSight operations and its panic callback.
#[pin_data]
pub(crate) struct Etm<B: Backend> {
    /// The registers, claimed around every register sequence.
    #[pin]
    pub(crate) regs: Regs<B>,
    cpu: u32,
    iface: Interface,
    ids: Etm4xIds,
    /// The locks found by the last enable, to put back at disable: bit 0 OS lock, bit 1
    /// software lock.
    found: Atomic<u32>,
    /// The session the unit traces for, as its record says it at panic: 0, or
    /// [`SAVED_SESSION_SYSFS`] or [`SAVED_SESSION_PERF`].
    session: Atomic<u32>,
    /// What the user set through sysfs for the next sysfs session (`mode`, the address
    /// comparators).
    #[pin]
    settings: SpinLock<SysfsSettings>,
    /// The programming of the session the unit traces for (`None` when it traces for none),
    /// which [`SourceOps::source_pm_restore`] puts back after a CPU low-power state; taken in
    /// perf's callbacks and the CPU PM notifier, interrupts off.
    #[pin]
    programmed: SpinLockIrq<Option<TraceConfig>>,
    /// perf holds the session paused (1) or not (0): the unit is programmed back paused.
    paused: Atomic<u32>,
    /// The last configuration the unit was enabled with, and its session: what its record
    /// holds while the kernel runs (see [`Etm::record_config`]); kept after a disable, since
    /// the sink may still hold that session's trace.
    #[pin]
    recorded: SpinLockIrq<Option<(TraceConfig, u32)>>,
    name: CString,
}

/// Runs `f` on the trace unit that `backend` reaches, from the unit's CPU when it has one; for
/// probe, which owns the backend before it is put behind its lock.
fn probe_run<B: Backend, R: Send>(
    backend: &mut B,
    iface: Interface,
    f: impl for<'x> FnOnce(&mut Etm4x<'x, B::Io>) -> R + Send,
) -> Result<R> {
    let cpu = backend.cpu();
    let run = || backend.with_io(|io| f(&mut Etm4x::new(io, iface, Timeout::DEFAULT)));
    match cpu {
        None => run(),
        Some(cpu) => smp::call_on_cpu(CpuId::from_u32(cpu).ok_or(ENODEV)?, run)?,
    }
}

/// The executing CPU, when it is the trace unit's own (see [`OwnCpu`]).
struct ThisCpu;

impl OwnCpu for ThisCpu {
    fn prohibit_trace(&self) {
        self_hosted::set_trace_allowed(false);
    }

    fn allow_trace(&self) {
        self_hosted::set_trace_allowed(true);
    }

    fn synchronize(&self) {
        self_hosted::synchronize();
    }

    fn isb(&self) {
        self_hosted::isb();
    }
}

impl<B: Backend> Etm<B> {
    /// A trace unit of `cpu` with the identification `ids` read at probe.
    pub(crate) fn new(
        backend: B,
        cpu: u32,
        iface: Interface,
        ids: Etm4xIds,
        name: CString,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            regs <- Regs::new(backend),
            cpu,
            iface,
            ids,
            found: Atomic::new(0),
            session: Atomic::new(0),
            settings <- new_spinlock!(SysfsSettings::default(), "coresight_etm4x_settings"),
            programmed <- new_spinlock_irq!(None, "coresight_etm4x_programmed"),
            paused: Atomic::new(0),
            recorded <- new_spinlock_irq!(None, "coresight_etm4x_recorded"),
            name,
        })
    }

    /// Has the panic-dump core record `cfg` as this unit's decode metadata, when it is not the
    /// configuration recorded last: a dump that no panic-time step completes (kdump without
    /// `crash_kexec_post_notifiers`) is then decodable. Any context (perf's, interrupts off).
    fn record_config(&self, cfg: TraceConfig, session: u32) {
        {
            let mut recorded = self.recorded.lock();
            if *recorded == Some((cfg, session)) {
                return;
            }
            *recorded = Some((cfg, session));
        }
        // The lock is released: the core calls back into `Save::metadata`, which takes it.
        match panic_dump::metadata_changed() {
            Ok(()) | Err(ENODEV) => {}
            Err(e) => pr_warn!(
                "{}: trace configuration not recorded in the dump region ({})\n",
                &*self.name,
                e.to_errno()
            ),
        }
    }

    /// Runs `f` on the trace unit with its registers claimed, on the unit's CPU (where its power
    /// domain is up, and where system registers are reached); [`EBUSY`] when another sequence
    /// has them.
    pub(crate) fn with<R: Send>(
        &self,
        f: impl for<'x> FnOnce(&mut Etm4x<'x, B::Io>) -> R + Send,
    ) -> Result<R> {
        let iface = self.iface;
        // Run by a cross-CPU call on the unit's own CPU: the steps only that CPU can take
        // (barriers, its trace filter) are taken.
        let own = self.regs.cpu() == Some(self.cpu);
        let run = || -> Result<R> {
            let mut claim = self.regs.try_claim().ok_or(EBUSY)?;
            claim.with_io(|io| {
                let unit = Etm4x::new(io, iface, Timeout::DEFAULT);
                f(&mut if own { unit.on_own_cpu(&ThisCpu) } else { unit })
            })
        };
        match self.regs.cpu() {
            None => run(),
            Some(cpu) => smp::call_on_cpu(CpuId::from_u32(cpu).ok_or(ENODEV)?, run)?,
        }
    }

    /// Reads a management register with `f` on the unit's CPU, no lock touched (as upstream's
    /// `mgmt/` files read them).
    fn read_live(&self, f: impl FnOnce(&mut B::Io) -> u32 + Send) -> Result<u32> {
        self.with(|u| f(u.io()))
    }

    /// Reads trace registers with `f` on the unit's CPU, the locks cleared for the read and put
    /// back as found.
    fn read_unlocked(&self, f: impl FnOnce(&mut B::Io) -> u32 + Send) -> Result<u32> {
        self.with(|u| {
            let found = u.unlock()?;
            let v = f(u.io());
            u.restore_locks(found);
            Ok(v)
        })?
        .map_err(|e: Etm4xError| Error::from(e))
    }

    /// Runs `f` on the trace unit at panic time, on the panicking CPU with the others stopped.
    ///
    /// Fails with the outcome to record when the unit can only be reached from another CPU, or
    /// when a stopped CPU was in the middle of a register sequence on it.
    fn with_at_panic<R>(
        &self,
        f: impl for<'x> FnOnce(&mut Etm4x<'x, B::Io>) -> R,
    ) -> Result<R, SaveOutcome> {
        if !self.regs.reachable_from_any_cpu()
            && self
                .regs
                .cpu()
                .is_some_and(|cpu| CpuId::current().as_u32() != cpu)
        {
            return Err(SaveOutcome::Unreachable);
        }
        let mut claim = self.regs.try_claim().ok_or(SaveOutcome::Busy)?;
        // The panicking CPU's own unit: it takes the barriers and prohibits its trace before the
        // stop; the other CPUs' units are stopped over MMIO only.
        let own = CpuId::current().as_u32() == self.cpu;
        claim
            .with_io(|io| {
                let unit = Etm4x::new(io, self.iface, Timeout::DEFAULT);
                f(&mut if own { unit.on_own_cpu(&ThisCpu) } else { unit })
            })
            .map_err(|_| SaveOutcome::Unreachable)
    }

    /// Runs `f` on the trace unit from its own CPU, where the caller runs with interrupts off
    /// (perf's callbacks): no cross-CPU call. [`EINVAL`] on another CPU, [`EBUSY`] when another
    /// sequence has the registers.
    fn with_local<R>(&self, f: impl for<'x> FnOnce(&mut Etm4x<'x, B::Io>) -> R) -> Result<R> {
        if CpuId::current().as_u32() != self.cpu {
            return Err(EINVAL);
        }
        let mut claim = self.regs.try_claim().ok_or(EBUSY)?;
        claim.with_io(|io| {
            let unit = Etm4x::new(io, self.iface, Timeout::DEFAULT);
            f(&mut unit.on_own_cpu(&ThisCpu))
        })
    }

    /// The trace configuration of a sysfs enable: what the user set through sysfs
    /// ([`TraceConfig::for_sysfs`]; the default one unless set) with the trace ID, and the
    /// crash path's entries the panic-dump core names as hardware stop points.
    fn config(&self, csdev: &CsDevice, trace_id: u8) -> Result<TraceConfig, Etm4xError> {
        let ts = module_parameters::timestamps.value();
        let settings = *self.settings.lock();
        let cfg = TraceConfig::for_sysfs(&self.ids, trace_id, ts, &settings, kernel_at_el2())?;
        Ok(self.with_stop_points(csdev, cfg))
    }

    /// The trace configuration of a perf event ([`TraceConfig::for_perf`]), with the stop
    /// points.
    fn perf_config(
        &self,
        csdev: &CsDevice,
        event: &PerfEvent,
        trace_id: u8,
    ) -> Result<TraceConfig> {
        // `configid` (config2 bits 63:32): configurations of the CoreSight configuration
        // manager, which this driver does not take.
        if event.config(2) >> 32 != 0 {
            dev_dbg!(csdev.as_device(), "perf: configid is not supported\n");
            return Err(EINVAL);
        }
        let filters = event.addr_filters();
        if filters.unsupported {
            dev_dbg!(
                csdev.as_device(),
                "perf: an address filter of an unknown kind\n"
            );
            return Err(EINVAL);
        }
        let mut list = [PerfFilter::Start(0); MAX_ADDR_FILTERS];
        let mut n = 0;
        for (slot, f) in list.iter_mut().zip(filters.iter()) {
            *slot = match f {
                AddrFilter::Range { start, stop } => PerfFilter::Range { start, stop },
                AddrFilter::Start(a) => PerfFilter::Start(a),
                AddrFilter::Stop(a) => PerfFilter::Stop(a),
            };
            n += 1;
        }
        let opts = PerfOptions {
            exclude_kernel: event.exclude_kernel(),
            exclude_user: event.exclude_user(),
            filters: list.get(..n).unwrap_or(&[]),
            filters_started: filters.started,
            ..PerfOptions::default()
        }
        .with_config(event.config(0));
        let cfg = TraceConfig::for_perf(&self.ids, trace_id, &opts, kernel_at_el2())
            .inspect_err(|e| dev_dbg!(csdev.as_device(), "perf: {e}\n"))?;
        Ok(self.with_stop_points(csdev, cfg))
    }

    /// Adds the crash path's entries the panic-dump core names as hardware stop points to `cfg`.
    fn with_stop_points(&self, csdev: &CsDevice, cfg: TraceConfig) -> TraceConfig {
        let mut stops = [0u64; MAX_ADDR_COMPARATORS];
        let n = panic_dump::stop_addresses(&mut stops);
        let (cfg, left) = cfg.with_stop_points(&self.ids, &stops[..n], kernel_at_el2());
        if left > 0 {
            dev_warn!(
                csdev.as_device(),
                "{} of {} stop points programmed: {} address comparators\n",
                cfg.nr_stops,
                n,
                TraceConfig::addr_comparators(&self.ids)
            );
        }
        cfg
    }

    /// Records the locks `found` by an enable, to put back at disable.
    fn note_found(&self, found: FoundLocks) {
        let bits = u32::from(found.os_locked) | u32::from(found.sw_locked) << 1;
        self.found.store(bits, Relaxed);
    }

    /// The locks the last enable found.
    fn found(&self) -> FoundLocks {
        let bits = self.found.load(Relaxed);
        FoundLocks {
            os_locked: bits & 1 != 0,
            sw_locked: bits & 2 != 0,
        }
    }
}

impl fmt::Display for Etm4xError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl From<Etm4xError> for Error {
    fn from(e: Etm4xError) -> Self {
        match e {
            Etm4xError::InvalidTraceId(_) | Etm4xError::NotEtmV4(_) => EINVAL,
            Etm4xError::PoweredDown | Etm4xError::OsLocked | Etm4xError::SoftwareLocked => EPERM,
            Etm4xError::IdleTimeout(_) | Etm4xError::PmStableTimeout(_) => ETIMEDOUT,
            Etm4xError::Unsupported(_) => EINVAL,
            Etm4xError::NoComparator => ENOSPC,
        }
    }
}

/// The trace unit as a CoreSight source.
pub(crate) struct SourceOps<B: Backend>(Arc<Etm<B>>);

/// Index of `ts_source` in [`SourceOps`]' attributes.
const ATTR_TS_SOURCE: usize = 0;
/// Index of `cpu`.
const ATTR_CPU: usize = 1;
/// Index of `mgmt/trcauthstatus`; `mgmt/trcdevarch` and `mgmt/trcdevtype` follow, then
/// `mgmt/trcconfig` ([`ATTR_TRCCONFIG`]) and `mgmt/trctraceid`.
const ATTR_MGMT: usize = 2;
/// Index of `mgmt/trcconfig`, read live; `mgmt/trctraceid` follows.
const ATTR_TRCCONFIG: usize = 5;
/// Index of `mgmt/trcpdcr`, the first of the management registers read live as they are:
/// `trcpdsr`, `trclsr`, `trcoslsr`, `trcdevid` and `trcpidr0` to `trcpidr3` follow.
const ATTR_MGMT_LIVE: usize = 7;
/// Index of `trcidr/trcidr0`; the ID registers of [`TRCIDR_LISTED`] follow, in its order.
const ATTR_TRCIDR: usize = ATTR_MGMT_LIVE + 9;
/// Index of `mode`, the first of the configuration files (upstream's names, in the unit's
/// directory): `reset`, `nr_addr_cmp`, `addr_idx`, `addr_range`, `addr_start`, `addr_stop`,
/// `addr_single`, `addr_exlevel_s_ns` and `addr_cmp_view` follow.
const ATTR_MODE: usize = ATTR_TRCIDR + TRCIDR_LISTED.len();
/// Index of `reset`.
const ATTR_RESET: usize = ATTR_MODE + 1;
/// Index of `nr_addr_cmp`.
const ATTR_NR_ADDR_CMP: usize = ATTR_MODE + 2;
/// Index of `addr_idx`.
const ATTR_ADDR_IDX: usize = ATTR_MODE + 3;
/// Index of `addr_range`.
const ATTR_ADDR_RANGE: usize = ATTR_MODE + 4;
/// Index of `addr_start`.
const ATTR_ADDR_START: usize = ATTR_MODE + 5;
/// Index of `addr_stop`.
const ATTR_ADDR_STOP: usize = ATTR_MODE + 6;
/// Index of `addr_single`.
const ATTR_ADDR_SINGLE: usize = ATTR_MODE + 7;
/// Index of `addr_exlevel_s_ns`.
const ATTR_ADDR_EXLEVEL: usize = ATTR_MODE + 8;
/// Index of `addr_cmp_view`.
const ATTR_ADDR_CMP_VIEW: usize = ATTR_MODE + 9;
/// Index of `nr_pe_cmp`, the first of the unit's resources as upstream counts them from its ID
/// registers: `nr_cntr`, `nr_ext_inp`, `nr_resource`, `nr_ss_cmp`, `nrseqstate`, `numcidc`
/// and `numvmidc` follow.
const ATTR_COUNTS: usize = ATTR_MODE + 10;
/// The ID registers listed in `trcidr/`, as upstream lists them (6 and 7 are reserved).
const TRCIDR_LISTED: [usize; 12] = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13];

/// A read-only attribute.
const fn ro(name: &'static CStr) -> Attribute {
    Attribute {
        name,
        mode: AttributeMode::ReadOnly,
    }
}

/// An attribute root may write.
const fn rw(name: &'static CStr) -> Attribute {
    Attribute {
        name,
        mode: AttributeMode::ReadWrite,
    }
}

impl From<SettingError> for Error {
    fn from(e: SettingError) -> Self {
        match e {
            SettingError::Invalid => EINVAL,
            SettingError::OtherKind => EPERM,
        }
    }
}

/// Parses a number as `kstrtoul(buf, 16, ...)` does: hexadecimal, `0x` allowed, a trailing
/// newline allowed.
fn parse_hex(input: &[u8]) -> Result<u64> {
    vmcoreinfo::parse_hex(input.strip_suffix(b"\n").unwrap_or(input)).ok_or(EINVAL)
}

/// Parses a number as `kstrtoul(buf, 0, ...)` does: `0x` hexadecimal, a leading `0` octal,
/// else decimal; a trailing newline allowed.
fn parse_auto(input: &[u8]) -> Result<u64> {
    let text =
        core::str::from_utf8(input.strip_suffix(b"\n").unwrap_or(input)).map_err(|_| EINVAL)?;
    let (digits, radix) =
        if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            (h, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (&text[1..], 8)
        } else {
            (text, 10)
        };
    u64::from_str_radix(digits, radix).map_err(|_| EINVAL)
}

/// The unit's resources upstream counts from its ID registers (`etm4_init_arch_data()`), in the
/// order of the files from `nr_pe_cmp` on.
fn resource_count(ids: &Etm4xIds, n: usize) -> Result<u32> {
    let (idr4, idr5) = (ids.idr(4), ids.idr(5));
    let field = |v: u32, lo: u32, bits: u32| (v >> lo) & ((1 << bits) - 1);
    Ok(match n {
        0 => field(idr4, 12, 4),
        1 => field(idr5, 28, 3),
        2 => field(idr5, 0, 9),
        3 => {
            // NUMRSPAIR: before ETMv4.3, or when not zero, the pairs are N + 1.
            let pairs = field(idr4, 16, 4);
            let v4_3 = field(ids.idr(1), 8, 4) > 4
                || (field(ids.idr(1), 8, 4) == 4 && field(ids.idr(1), 4, 4) >= 3);
            if !v4_3 || pairs > 0 {
                pairs + 1
            } else {
                pairs
            }
        }
        4 => field(idr4, 20, 4),
        5 => field(idr5, 25, 3),
        6 => field(idr4, 24, 4),
        7 => field(idr4, 28, 4),
        _ => return Err(EINVAL),
    })
}

/// `addr_cmp_view` as upstream prints it.
fn write_cmp_view(out: &mut AttributeBuf<'_>, v: &CmpView) -> core::fmt::Result {
    let (kind, addr) = match v.setting {
        AddrSetting::None => return writeln!(out, "addr_cmp[{}] unused", v.index),
        AddrSetting::Single(a) => ("single", a),
        AddrSetting::Range(a) => ("range", a),
        AddrSetting::Start(a) => ("start", a),
        AddrSetting::Stop(a) => ("stop", a),
    };
    write!(out, "addr_cmp[{}] {kind} {addr:#x}", v.index)?;
    if let AddrSetting::Range(_) = v.setting {
        let how = if v.exclude { "exclude" } else { "include" };
        write!(out, " {:#x} {how}", v.range_end)?;
    }
    writeln!(out, " ctrl({:#x})", v.ctrl)
}
#[vtable]
impl<B: Backend> coresight::Operations for SourceOps<B> {
    /// A source has no sink buffer.
    type PerfBuffer = ();

    /// What perf reads for its metadata (`cs_etm/cpuN/trcidr/trcidr0`, `mgmt/trcauthstatus`,
    /// `ts_source`), with upstream's names, from the values read at probe.
    const ATTRIBUTE_GROUPS: &'static [AttributeGroup] = &[
        AttributeGroup {
            name: None,
            attributes: &[ro(c_str!("ts_source")), ro(c_str!("cpu"))],
        },
        AttributeGroup {
            name: Some(c_str!("mgmt")),
            attributes: &[
                ro(c_str!("trcauthstatus")),
                ro(c_str!("trcdevarch")),
                ro(c_str!("trcdevtype")),
                ro(c_str!("trcconfig")),
                ro(c_str!("trctraceid")),
                ro(c_str!("trcpdcr")),
                ro(c_str!("trcpdsr")),
                ro(c_str!("trclsr")),
                ro(c_str!("trcoslsr")),
                ro(c_str!("trcdevid")),
                ro(c_str!("trcpidr0")),
                ro(c_str!("trcpidr1")),
                ro(c_str!("trcpidr2")),
                ro(c_str!("trcpidr3")),
            ],
        },
        AttributeGroup {
            name: Some(c_str!("trcidr")),
            attributes: &[
                ro(c_str!("trcidr0")),
                ro(c_str!("trcidr1")),
                ro(c_str!("trcidr2")),
                ro(c_str!("trcidr3")),
                ro(c_str!("trcidr4")),
                ro(c_str!("trcidr5")),
                ro(c_str!("trcidr8")),
                ro(c_str!("trcidr9")),
                ro(c_str!("trcidr10")),
                ro(c_str!("trcidr11")),
                ro(c_str!("trcidr12")),
                ro(c_str!("trcidr13")),
            ],
        },
        AttributeGroup {
            name: None,
            attributes: &[
                rw(c_str!("mode")),
                Attribute {
                    name: c_str!("reset"),
                    mode: AttributeMode::WriteOnly,
                },
                ro(c_str!("nr_addr_cmp")),
                rw(c_str!("addr_idx")),
                rw(c_str!("addr_range")),
                rw(c_str!("addr_start")),
                rw(c_str!("addr_stop")),
                rw(c_str!("addr_single")),
                rw(c_str!("addr_exlevel_s_ns")),
                ro(c_str!("addr_cmp_view")),
                ro(c_str!("nr_pe_cmp")),
                ro(c_str!("nr_cntr")),
                ro(c_str!("nr_ext_inp")),
                ro(c_str!("nr_resource")),
                ro(c_str!("nr_ss_cmp")),
                ro(c_str!("nrseqstate")),
                ro(c_str!("numcidc")),
                ro(c_str!("numvmidc")),
            ],
        },
    ];

    fn show(&self, csdev: &CsDevice, index: usize, out: &mut AttributeBuf<'_>) -> Result {
        let ids = &self.0.ids;
        if index >= ATTR_MODE {
            let s = *self.0.settings.lock();
            // As upstream prints them: the kernel's `%#lx` (zero as `0x0`), a range as two.
            let value = match index {
                ATTR_MODE => u64::from(s.mode),
                // CAST: at most 16 comparators.
                ATTR_NR_ADDR_CMP => (TraceConfig::addr_comparators(ids) / 2) as u64,
                ATTR_ADDR_IDX => s.addr_idx as u64,
                ATTR_ADDR_RANGE => {
                    let (lo, hi) = s.range()?;
                    return writeln!(out, "{lo:#x} {hi:#x}").map_err(|_| EINVAL);
                }
                ATTR_ADDR_START => s.point(false)?,
                ATTR_ADDR_STOP => s.point(true)?,
                ATTR_ADDR_SINGLE => s.single()?,
                ATTR_ADDR_EXLEVEL => s.exlevel(),
                ATTR_ADDR_CMP_VIEW => {
                    return write_cmp_view(out, &s.cmp_view()).map_err(|_| EINVAL);
                }
                i => u64::from(resource_count(
                    ids,
                    i.checked_sub(ATTR_COUNTS).ok_or(EINVAL)?,
                )?),
            };
            return writeln!(out, "{value:#x}").map_err(|_| EINVAL);
        }
        let value = match index {
            // Upstream shows the timestamp source of TRFCR_EL1's TS field, -1 when the driver
            // leaves it alone; this one does (the emulated unit has no timestamps).
            ATTR_TS_SOURCE => return writeln!(out, "-1").map_err(|_| EINVAL),
            ATTR_CPU => return writeln!(out, "{}", self.0.cpu).map_err(|_| EINVAL),
            // What the unit is programmed with, read on its CPU as upstream does; with the OS
            // lock clear for the read (trace registers read as zero under it), then put back.
            ATTR_TRCCONFIG => self.0.read_unlocked(|io| io.read(TRCCONFIGR).into_raw())?,
            // The trace ID a sysfs session of the unit gets, as upstream shows it.
            i if i == ATTR_TRCCONFIG + 1 => u32::from(csdev.etm_trace_id(Mode::Sysfs, None)?),
            i if (ATTR_MGMT_LIVE..ATTR_TRCIDR).contains(&i) => {
                // Registers of the memory-mapped interface: a system-register unit has none
                // (upstream hides these files there).
                if self.0.iface != Interface::Mmio {
                    return Err(EOPNOTSUPP);
                }
                match i - ATTR_MGMT_LIVE {
                    0 => self.0.read_live(|io| io.read(TRCPDCR).into_raw())?,
                    1 => self.0.read_live(|io| io.read(TRCPDSR).into_raw())?,
                    2 => self.0.read_live(|io| io.read(LSR).into_raw())?,
                    3 => self.0.read_live(|io| io.read(TRCOSLSR).into_raw())?,
                    4 => self.0.read_live(|io| io.read(TRCDEVID).into_raw())?,
                    k => self.0.read_live(move |io| {
                        // The index is bounded here, where the access is checked at build time.
                        TRCPIDR::try_at(k - 5).map_or(0, |loc| io.read(loc).into_raw())
                    })?,
                }
            }
            ATTR_MGMT => ids.authstatus,
            i if i == ATTR_MGMT + 1 => ids.devarch,
            i if i == ATTR_MGMT + 2 => ids.devtype,
            i => {
                let n = i
                    .checked_sub(ATTR_TRCIDR)
                    .and_then(|k| TRCIDR_LISTED.get(k));
                ids.idr(*n.ok_or(EINVAL)?)
            }
        };
        writeln!(out, "{value:#x}").map_err(|_| EINVAL)
    }

    /// The configuration files: they set the next sysfs session's configuration (a session
    /// running keeps the one it started with), as upstream's do.
    fn store(&self, _csdev: &CsDevice, index: usize, input: &[u8]) -> Result {
        let ids = &self.0.ids;
        let mut s = self.0.settings.lock();
        match index {
            ATTR_MODE => s.set_mode(parse_hex(input)?),
            ATTR_RESET => s.reset(parse_hex(input)?, ids),
            ATTR_ADDR_IDX => s.set_addr_idx(parse_hex(input)?, ids)?,
            ATTR_ADDR_RANGE => {
                // "%lx %lx [%x]": the range, and an optional exclude flag.
                let text = core::str::from_utf8(input).map_err(|_| EINVAL)?;
                let mut words = text.split_ascii_whitespace();
                let mut next = || words.next().map(|w| parse_hex(w.as_bytes()));
                let lo = next().ok_or(EINVAL)??;
                let hi = next().ok_or(EINVAL)??;
                let exclude = next().transpose()?.map(|v| v != 0);
                s.set_range(lo, hi, exclude)?;
            }
            ATTR_ADDR_START => s.set_point(parse_hex(input)?, false, ids)?,
            ATTR_ADDR_STOP => s.set_point(parse_hex(input)?, true, ids)?,
            ATTR_ADDR_SINGLE => s.set_single(parse_hex(input)?)?,
            ATTR_ADDR_EXLEVEL => s.set_exlevel(parse_auto(input)?)?,
            _ => return Err(EINVAL),
        }
        Ok(())
    }

    fn trace_id(&self, csdev: &CsDevice, mode: Mode, sink: Option<&CsDevice>) -> Result<u8> {
        csdev.etm_trace_id(mode, sink)
    }

    fn source_enable(&self, csdev: &CsDevice, mode: Mode, path: &Path) -> Result {
        let etm = &*self.0;
        if mode != Mode::Sysfs {
            return Err(EINVAL);
        }
        if !csdev.take_mode(mode) {
            return Err(EBUSY);
        }
        let mut programmed = None;
        let enabled = match etm.config(csdev, path.trace_id()) {
            Ok(cfg) => {
                programmed = Some(cfg);
                etm.with(move |u| u.enable(&cfg))
            }
            Err(e) => Ok(Err(e)),
        };
        let found = enabled
            .and_then(|r| {
                r.inspect_err(|e| dev_err!(csdev.as_device(), "ETM not enabled: {e}\n"))
                    .map_err(Error::from)
            })
            .inspect_err(|_| csdev.set_mode(Mode::Disabled))?;
        etm.note_found(found);
        etm.paused.store(0, Relaxed);
        *etm.programmed.lock() = programmed;
        etm.session.store(SAVED_SESSION_SYSFS, Relaxed);
        if let Some(cfg) = programmed {
            etm.record_config(cfg, SAVED_SESSION_SYSFS);
        }
        dev_dbg!(
            csdev.as_device(),
            "ETM tracing enabled, trace ID {:#x}\n",
            path.trace_id()
        );
        Ok(())
    }

    fn source_enable_perf(&self, csdev: &CsDevice, event: &PerfEvent, path: &Path) -> Result {
        let etm = &*self.0;
        if CpuId::current().as_u32() != etm.cpu {
            return Err(EINVAL);
        }
        if !csdev.take_mode(Mode::Perf) {
            return Err(EBUSY);
        }
        // perf holds the event paused (started paused, or paused when it was scheduled out):
        // programmed, not tracing until perf resumes it, as upstream's `drvdata->paused`.
        let paused = event.aux_paused();
        let mut programmed = None;
        let found = etm
            .perf_config(csdev, event, path.trace_id())
            .and_then(|cfg| {
                programmed = Some(cfg);
                etm.with_local(|u| {
                    if paused {
                        u.enable_paused(&cfg)
                    } else {
                        u.enable(&cfg)
                    }
                })?
                .map_err(|e| {
                    dev_err!(csdev.as_device(), "ETM not enabled for perf: {e}\n");
                    Error::from(e)
                })
            })
            .inspect_err(|_| csdev.set_mode(Mode::Disabled))?;
        etm.note_found(found);
        etm.paused.store(u32::from(paused), Relaxed);
        *etm.programmed.lock() = programmed;
        etm.session.store(SAVED_SESSION_PERF, Relaxed);
        if let Some(cfg) = programmed {
            etm.record_config(cfg, SAVED_SESSION_PERF);
        }
        Ok(())
    }

    fn source_pause_perf(&self, csdev: &CsDevice) {
        let etm = &*self.0;
        if csdev.mode() != Mode::Perf {
            return;
        }
        // On this CPU, interrupts off: a pause that cannot be done leaves the unit tracing,
        // which costs AUX room and loses nothing.
        match etm.with_local(|u| u.pause()) {
            Ok(Ok(())) => etm.paused.store(1, Relaxed),
            Ok(Err(e)) => dev_err!(csdev.as_device(), "ETM not paused: {e}\n"),
            Err(e) => dev_err!(
                csdev.as_device(),
                "ETM not paused: registers busy ({})\n",
                e.to_errno()
            ),
        }
    }

    fn source_resume_perf(&self, csdev: &CsDevice) -> Result {
        let etm = &*self.0;
        if csdev.mode() != Mode::Perf {
            return Err(EINVAL);
        }
        etm.with_local(|u| u.resume())?.map_err(|e| {
            dev_err!(csdev.as_device(), "ETM not resumed: {e}\n");
            Error::from(e)
        })?;
        etm.paused.store(0, Relaxed);
        Ok(())
    }

    fn source_pm_save(&self, csdev: &CsDevice) -> Result {
        let etm = &*self.0;
        if etm.programmed.lock().is_none() {
            return Ok(());
        }
        // The unit stops as at a disable (its trace drained to the sink), with the locks put
        // back as the enable found them: the core then disables the path's links.
        let found = etm.found();
        etm.with_local(|u| {
            let r = u.disable();
            u.restore_locks(found);
            r
        })?
        .map_err(|e| {
            dev_err!(
                csdev.as_device(),
                "ETM not saved for a CPU low-power state: {e}\n"
            );
            Error::from(e)
        })
    }

    fn source_pm_restore(&self, csdev: &CsDevice) {
        let etm = &*self.0;
        let Some(cfg) = *etm.programmed.lock() else {
            return;
        };
        // Programmed again whole, as at its enable: a power-down left the unit at its reset
        // values.
        let paused = etm.paused.load(Relaxed) != 0;
        match etm.with_local(|u| {
            if paused {
                u.enable_paused(&cfg)
            } else {
                u.enable(&cfg)
            }
        }) {
            Ok(Ok(found)) => etm.note_found(found),
            Ok(Err(e)) => dev_err!(
                csdev.as_device(),
                "ETM not restored after a CPU low-power state: {e}\n"
            ),
            Err(e) => dev_err!(
                csdev.as_device(),
                "ETM not restored after a CPU low-power state: registers busy ({})\n",
                e.to_errno()
            ),
        }
    }

    fn source_disable(&self, csdev: &CsDevice, event: Option<&PerfEvent>) {
        let etm = &*self.0;
        let found = etm.found();
        let stop = |u: &mut Etm4x<'_, B::Io>| {
            let r = u.disable();
            // Where the start/stop filters left the logic, for the next schedule-in.
            let started = u.start_stop_started();
            u.restore_locks(found);
            (r, started)
        };
        let done = match event {
            // perf: on this CPU, interrupts off.
            Some(event) => etm.with_local(stop).map(|(r, started)| {
                event.set_filters_started(started);
                r
            }),
            None => etm.with(|u| stop(u).0),
        };
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => dev_err!(csdev.as_device(), "ETM not disabled: {e}\n"),
            Err(e) => dev_err!(
                csdev.as_device(),
                "trace unit not reachable ({})\n",
                e.to_errno()
            ),
        }
        *etm.programmed.lock() = None;
        etm.session.store(0, Relaxed);
        csdev.set_mode(Mode::Disabled);
        dev_dbg!(csdev.as_device(), "ETM tracing disabled\n");
    }
}

/// The trace unit's panic callback.
pub(crate) struct Save<B: Backend>(pub(crate) Arc<Etm<B>>);

impl<B: Backend> DumpCallback for Save<B> {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let etm = &*self.0;
        let mut saved = etm
            .with_at_panic(|u| u.panic_save(etm.cpu))
            .unwrap_or_else(|outcome| SavedState {
                cpu: etm.cpu,
                outcome,
                ..SavedState::default()
            });
        saved.flags |= etm.session.load(Relaxed);
        *written = saved.encode(buf).map_err(|_| ENOSPC)?;
        if saved.outcome != SaveOutcome::Ok {
            pr_emerg!("{}: {}\n", &*etm.name, saved.outcome.name());
            return Err(EIO);
        }
        Ok(())
    }

    const HAS_METADATA: bool = true;

    fn metadata(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let etm = &*self.0;
        let Some((cfg, session)) = *etm.recorded.lock() else {
            return Err(ENODATA);
        };
        let state = cfg.recorded_state(&etm.ids, etm.cpu, session);
        *written = state.encode(buf).map_err(|_| ENOSPC)?;
        Ok(())
    }
}

/// A bound trace unit.
pub(crate) type EtmDevice<B> = Component<SourceOps<B>, Save<B>>;

/// Probes the trace unit of `cpu` whose registers `backend` reaches.
pub(crate) fn probe_etm<'a, B: Backend + 'a>(
    dev: &'a Device<Core<'_>>,
    mut backend: B,
    iface: Interface,
) -> Result<impl PinInit<EtmDevice<B>, Error> + 'a> {
    let cpu =
        coresight::get_cpu(dev).inspect_err(|_| dev_err!(dev, "no CPU for this trace unit\n"))?;
    let ids = probe_run(&mut backend, iface, |u| {
        let found = u.unlock()?;
        let ids = u.read_ids();
        u.restore_locks(found);
        ids
    })
    .inspect_err(|e| {
        // The unit is read from its own CPU: probed again when the CPU comes online, as
        // upstream's driver does.
        if *e == ENXIO {
            match Waiting::add(cpu, dev.into()) {
                Ok(()) => dev_info!(dev, "CPU{cpu} is offline: probed when it comes online\n"),
                Err(_) => dev_err!(dev, "CPU{cpu} is offline, and cannot be waited for\n"),
            }
        }
    })?
    .inspect_err(|e| dev_err!(dev, "trace unit not usable: {e}\n"))?;
    let name = CString::try_from_fmt(fmt!("etm{}", cpu))?;
    let etm = Arc::pin_init(Etm::new(backend, cpu, iface, ids, name), GFP_KERNEL)?;
    dev_info!(
        dev,
        "CPU{}: ETMv4.{} initialized (TRCIDR1 {:#010x})\n",
        cpu,
        (ids.idr(1) >> 4) & 0xf,
        ids.idr(1)
    );
    let for_dump = etm.clone();
    let bound: &Device<Bound> = dev;
    Ok(Component::new(
        bound,
        ComponentInfo {
            name: CString::try_from_fmt(fmt!("{}", &*etm.name))?,
            kind: Kind::Source(SourceKind::Proc),
            cpu: Some(cpu),
            dump: DumpType::Source,
            max_bytes: SAVED_STATE_SIZE,
            payload: DumpPayload::Etm4x,
            pm_save: pm_save_needed(dev, iface),
        },
        SourceOps(etm.clone()),
        Save(for_dump),
    ))
}

kernel::sync::global_lock! {
    // SAFETY: Initialised in `Waiting::init`, called once from the module's init before anything
    // else uses it.
    unsafe(uninit) static WAITING: Mutex<KVec<(u32, ARef<Device>)>> = KVec::new();
}

/// The units whose probe waits for their CPU to come online, with their CPU: emptied when the
/// module goes (the value, owned by the module, drops last).
pub(crate) struct Waiting(());

impl Waiting {
    /// Prepares the list; once, from the module's init.
    pub(crate) fn init() -> Self {
        // SAFETY: Called once, from the module's init, before any probe or CPU hotplug callback
        // of this module can use the lock.
        unsafe { WAITING.init() };
        Waiting(())
    }

    /// Puts `dev` on the list for `cpu`.
    fn add(cpu: u32, dev: ARef<Device>) -> Result {
        let mut list = WAITING.lock();
        if !list
            .iter()
            .any(|(c, d)| *c == cpu && core::ptr::eq::<Device>(&**d, &*dev))
        {
            list.push((cpu, dev), GFP_KERNEL)?;
        }
        Ok(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.lock().clear();
    }
}

/// Probes again, when a CPU comes online, the units that waited for it.
pub(crate) struct ProbeWhenOnline;

impl cpuhp::Online for ProbeWhenOnline {
    fn online(cpu: u32) -> Result {
        let mut waiting = KVec::new();
        {
            let mut list = WAITING.lock();
            let mut i = 0;
            while i < list.len() {
                if list[i].0 == cpu {
                    let (_, dev) = list.remove(i).map_err(|_| EINVAL)?;
                    waiting.push(dev, GFP_KERNEL)?;
                } else {
                    i += 1;
                }
            }
        }
        for dev in waiting {
            // A unit that still cannot be probed says why; the CPU comes online regardless.
            if let Err(e) = coresight::probe_again(&dev) {
                dev_err!(
                    &*dev,
                    "not probed after CPU{cpu} came online ({})\n",
                    e.to_errno()
                );
            }
        }
        Ok(())
    }
}

/// `pm_save_enable`: save and restore as the firmware describes the unit.
pub(crate) const PM_SAVE_FIRMWARE: i32 = 0;
/// `pm_save_enable`: never save and restore.
pub(crate) const PM_SAVE_NEVER: i32 = 1;
/// `pm_save_enable`: always save and restore.
pub(crate) const PM_SAVE_SELF_HOSTED: i32 = 2;

/// Whether the unit loses its context with its CPU's power, so that the core saves and restores
/// it around the CPU's low-power states: always when it is reached through system registers (it
/// is in the CPU's power domain), else as `pm_save_enable` says (the firmware's word by default:
/// the device tree property `arm,coresight-loses-context-with-cpu`), as upstream's driver
/// decides it.
fn pm_save_needed(dev: &Device<Core<'_>>, iface: Interface) -> bool {
    if iface == Interface::SysReg {
        return true;
    }
    match module_parameters::pm_save_enable.value() {
        PM_SAVE_NEVER => false,
        PM_SAVE_SELF_HOSTED => true,
        _ => dev
            .fwnode()
            .is_some_and(|n| n.property_present(c_str!("arm,coresight-loses-context-with-cpu"))),
    }
}

/// A memory-mapped trace unit. Any CPU reaches its frame, but like the C driver this one
/// operates it from its own CPU at run time, where its power domain is up; at panic the
/// panicking CPU reaches it directly.
pub(crate) struct EtmMmio<'a> {
    io: IoMem<'a, FRAME>,
    cpu: u32,
}

impl<'r> Backend for EtmMmio<'r> {
    type Io = IoMem<'r, FRAME>;

    fn with_io<R>(&mut self, f: impl FnOnce(&mut Self::Io) -> R) -> Result<R> {
        Ok(f(&mut self.io))
    }

    fn cpu(&self) -> Option<u32> {
        Some(self.cpu)
    }
}

/// The AMBA driver for memory-mapped trace units.
pub(crate) struct Etm4xAmba;

/// `DEVARCH`/`DEVTYPE` of an ETMv4 trace unit, for UCI matching.
static UCI_ETM4: amba::CsUci = amba::CsUci::new(0x4770_4a13, 0xfff0_ffff, 0x0000_0013);

kernel::amba_device_table!(
    AMBA_TABLE,
    [
        // Cortex-A53.
        amba::DeviceId::new(0x000b_b95d, 0x000f_ffff),
        // Cortex-A57.
        amba::DeviceId::new(0x000b_b95e, 0x000f_ffff),
        // Cortex-A72.
        amba::DeviceId::new(0x000b_b95a, 0x000f_ffff),
        // Cortex-A73.
        amba::DeviceId::new(0x000b_b959, 0x000f_ffff),
        // Cortex-A35.
        amba::DeviceId::with_uci(0x000b_b9da, 0x000f_ffff, &UCI_ETM4),
        // Cortex-A55.
        amba::DeviceId::with_uci(0x000b_bd05, 0x000f_ffff, &UCI_ETM4),
        // Cortex-A75.
        amba::DeviceId::with_uci(0x000b_bd0a, 0x000f_ffff, &UCI_ETM4),
        // Neoverse N1.
        amba::DeviceId::with_uci(0x000b_bd0c, 0x000f_ffff, &UCI_ETM4),
        // Cortex-A78.
        amba::DeviceId::with_uci(0x000b_bd41, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo.
        amba::DeviceId::with_uci(0x000f_0205, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo.
        amba::DeviceId::with_uci(0x000f_0211, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo 385 Cortex-A55.
        amba::DeviceId::with_uci(0x000b_b802, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo 385 Cortex-A75.
        amba::DeviceId::with_uci(0x000b_b803, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo 4XX Cortex-A55.
        amba::DeviceId::with_uci(0x000b_b805, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo 4XX Cortex-A76.
        amba::DeviceId::with_uci(0x000b_b804, 0x000f_ffff, &UCI_ETM4),
        // Qualcomm Kryo 5XX Cortex-A77.
        amba::DeviceId::with_uci(0x000b_bd0d, 0x000f_ffff, &UCI_ETM4),
        // Marvell ThunderX2.
        amba::DeviceId::with_uci(0x000c_c0af, 0x000f_ffff, &UCI_ETM4),
        // HiSilicon Hip08.
        amba::DeviceId::with_uci(0x000b_6d01, 0x000f_ffff, &UCI_ETM4),
        // HiSilicon Hip09.
        amba::DeviceId::with_uci(0x000b_6d02, 0x000f_ffff, &UCI_ETM4),
    ]
);

impl amba::Driver for Etm4xAmba {
    type Data<'bound> = Pin<KBox<EtmDevice<EtmMmio<'bound>>>>;
    const ID_TABLE: amba::IdTable = &AMBA_TABLE;

    fn probe<'bound>(
        adev: &'bound amba::Device<Core<'_>>,
        _id: &'bound amba::DeviceId,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = adev.as_ref();
        let cpu = coresight::get_cpu(dev)
            .inspect_err(|_| dev_err!(dev, "no CPU for this trace unit\n"))?;
        let io = adev.io_request().iomap_sized::<FRAME>()?;
        KBox::pin_init(
            probe_etm(dev, EtmMmio { io, cpu }, Interface::Mmio)?,
            GFP_KERNEL,
        )
    }
}

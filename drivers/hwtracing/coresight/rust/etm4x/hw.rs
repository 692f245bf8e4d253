// SPDX-License-Identifier: GPL-2.0

//! The ETMv4 hardware sequences: OS lock and software lock handling, enable/disable, and the
//! panic-time save.
//!
//! Written from the ETMv4 architecture (Arm IHI 0064) and checked against what the Linux C
//! driver (`coresight-etm4x-core.c`) does. The sequences are generic over [`CsAccess`], so the
//! same code runs in the kernel driver (MMIO or system registers) and in the KUnit and host tests
//! against the register-level model.
//!
//! Every poll is bounded by [`Timeout`]; nothing allocates; no function can panic on any value
//! read from the hardware.
//!
//! Shared with the host (`crates/cspd-hw`): uses `core`, `kernel::coresight::access`, the
//! format's ETMv4 payload (`kernel::coresight::panic_dump::format::etm4x`) and this folder's
//! `regs.rs` (`super::regs`).

use core::fmt;

use kernel::{
    coresight::{
        access::{
            CsAccess,
            AUTHSTATUS,
            CS_UNLOCK_KEY,
            DEVARCH,
            DEVTYPE,
            LAR,
            LSR, //
        },
        panic_dump::format::etm4x::{
            SaveOutcome,
            SavedState,
            NR_IDR,
            SAVED_FILTER_VALID,
            SAVED_OS_LOCK_FOUND,
            SAVED_OS_LOCK_RESTORED,
            SAVED_PROGRAMMED,
            SAVED_REGS_VALID,
            SAVED_SW_LOCK_FOUND,
            SAVED_VIEWINST_VALID, //
        },
    },
    io::register::{
        Array,
        Register, //
    },
    num::Bounded,
};

use super::regs::{
    ETM_CYC_THRESHOLD_DEFAULT, MAX_ADDR_COMPARATORS, TRCACATR, TRCACVR, TRCBBCTLR, TRCCCCTLR,
    TRCCONFIGR, TRCEVENTCTL0R, TRCEVENTCTL1R, TRCIDR0_7, TRCIDR0_RETSTACK, TRCIDR0_TRCBB,
    TRCIDR0_TRCCCI, TRCIDR0_TSSIZE_MASK, TRCIDR2_CIDSIZE_MASK, TRCIDR3_EXLEVEL_S_MASK,
    TRCIDR4_NUMACPAIRS_MASK, TRCIDR8_13, TRCOSLAR, TRCOSLSR, TRCPDCR, TRCPDSR, TRCPRGCTLR,
    TRCSTALLCTLR, TRCSTATR, TRCSYNCPR, TRCTRACEIDR, TRCTSCTLR, TRCVICTLR, TRCVIIECTLR, TRCVISSCTLR,
};

/// Mask of the `TRCDEVARCH` fields that identify an ETMv4 (architect, present, archid).
pub const DEVARCH_ID_MASK: u32 = 0xFFF0_FFFF;
/// `TRCDEVARCH` value (under [`DEVARCH_ID_MASK`]) of an Arm ETMv4 trace unit.
pub const DEVARCH_ETMV4: u32 = 0x4770_4A13;

/// Lowest valid CoreSight trace ID.
pub const TRACE_ID_MIN: u8 = 0x01;
/// Highest valid CoreSight trace ID (0x70 and above are reserved).
pub const TRACE_ID_MAX: u8 = 0x6F;

/// Returns the trace ID the Linux driver uses by default for `cpu` (`0x10 + 2 * cpu`).
///
/// Returns `None` when that ID would be outside [`TRACE_ID_MIN`]`..=`[`TRACE_ID_MAX`].
pub const fn legacy_trace_id(cpu: u32) -> Option<u8> {
    if cpu > 47 {
        return None;
    }
    // CAST: `cpu <= 47`, so the result is at most 0x6E.
    Some((0x10 + 2 * cpu) as u8)
}

/// Returns the offset of `TRCIDR<n>` for `n` in `0..=13`, or `None` for any other `n`.
pub fn trcidr_offset(n: usize) -> Option<u32> {
    let off = match n {
        0..=7 => TRCIDR0_7::OFFSET + 4 * n,
        8..=13 => TRCIDR8_13::OFFSET + 4 * (n - 8),
        _ => return None,
    };
    u32::try_from(off).ok()
}

/// The AArch64 system-register encoding of an ETMv4 register.
///
/// Trace units that have no memory-mapped interface are reached with `MRS`/`MSR` on
/// `S2_<op1>_C<crn>_C<crm>_<op2>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysReg {
    /// `op0` field (always 2 for trace registers).
    pub op0: u8,
    /// `op1` field (always 1 for trace registers).
    pub op1: u8,
    /// `CRn` field.
    pub crn: u8,
    /// `CRm` field.
    pub crm: u8,
    /// `op2` field.
    pub op2: u8,
}

impl SysReg {
    /// Returns the encoding in the layout of the kernel's `sys_reg()` macro.
    pub const fn encoding(self) -> u32 {
        ((self.op0 as u32) << 19)
            | ((self.op1 as u32) << 16)
            | ((self.crn as u32) << 12)
            | ((self.crm as u32) << 8)
            | ((self.op2 as u32) << 5)
    }
}

/// Returns the system-register encoding of the register at byte offset `offset`.
///
/// Register `n = offset >> 2` is `sys_reg(2, 1, (n >> 7) & 7, n & 0xf, (n >> 4) & 7)`.
pub const fn sysreg_of_offset(offset: u32) -> SysReg {
    let n = offset >> 2;
    SysReg {
        op0: 2,
        op1: 1,
        // CAST: each field is masked to at most 4 bits.
        crn: ((n >> 7) & 0x7) as u8,
        crm: (n & 0xF) as u8,
        op2: ((n >> 4) & 0x7) as u8,
    }
}

/// How the trace unit's registers are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// Memory-mapped (external debug) interface: software lock and power registers exist.
    Mmio,
    /// System instructions: no software lock, no `TRCPDSR`/`TRCPDCR`/`TRCDEVTYPE`.
    SysReg,
}

/// Poll bounds for status bits that take time to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// Number of re-reads after the first read.
    pub tries: u32,
    /// Delay between two reads, in microseconds.
    pub delay_us: u32,
}

impl Timeout {
    /// The C driver's bound: 100 polls one microsecond apart.
    pub const DEFAULT: Self = Self {
        tries: 100,
        delay_us: 1,
    };
}

/// Why an ETMv4 operation did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Etm4xError {
    /// The trace ID is outside `0x01..=0x6F`.
    InvalidTraceId(u8),
    /// `TRCDEVARCH` does not describe an ETMv4 (the value read is kept).
    NotEtmV4(u32),
    /// The trace unit power domain is down (`TRCPDSR.POWER` clear).
    PoweredDown,
    /// The OS lock stayed set after writing zero to `TRCOSLAR`.
    OsLocked,
    /// The software lock stayed set after writing the key to `LAR`.
    SoftwareLocked,
    /// `TRCSTATR.IDLE` did not reach the wanted value (the last `TRCSTATR` is kept).
    IdleTimeout(u32),
    /// `TRCSTATR.PMSTABLE` did not set (the last `TRCSTATR` is kept).
    PmStableTimeout(u32),
    /// A perf option the unit or the kernel cannot take (its `cs_etm` format name).
    Unsupported(&'static str),
    /// More address filters than the unit has comparators for.
    NoComparator,
}

impl fmt::Display for Etm4xError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::InvalidTraceId(id) => write!(f, "trace ID {id:#x} is outside 0x01..=0x6f"),
            Self::NotEtmV4(devarch) => write!(f, "TRCDEVARCH {devarch:#010x} is not an ETMv4"),
            Self::PoweredDown => f.write_str("trace unit powered down (TRCPDSR.POWER clear)"),
            Self::OsLocked => f.write_str("OS lock stayed set"),
            Self::SoftwareLocked => f.write_str("software lock stayed set"),
            Self::IdleTimeout(statr) => {
                write!(f, "TRCSTATR.IDLE did not change (TRCSTATR {statr:#x})")
            }
            Self::PmStableTimeout(statr) => {
                write!(f, "TRCSTATR.PMSTABLE did not set (TRCSTATR {statr:#x})")
            }
            Self::Unsupported(option) => write!(f, "{option} is not supported"),
            Self::NoComparator => f.write_str("no address comparator left for the filters"),
        }
    }
}

/// ID and identification registers of one trace unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Etm4xIds {
    /// `TRCIDR0..=TRCIDR13`, indexed by register number.
    pub idr: [u32; NR_IDR],
    /// `TRCDEVARCH`.
    pub devarch: u32,
    /// `TRCDEVTYPE` (zero through system registers, where it does not exist).
    pub devtype: u32,
    /// `TRCAUTHSTATUS`.
    pub authstatus: u32,
}

impl Etm4xIds {
    /// Returns `TRCIDR<n>`, or zero for `n > 13`.
    pub fn idr(&self, n: usize) -> u32 {
        self.idr.get(n).copied().unwrap_or(0)
    }

    /// Returns `true` when `TRCDEVARCH` identifies an Arm ETMv4.
    pub fn is_etmv4(&self) -> bool {
        self.devarch & DEVARCH_ID_MASK == DEVARCH_ETMV4
    }
}

/// The registers programmed by [`Etm4x::enable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceConfig {
    /// `TRCCONFIGR`.
    pub configr: u32,
    /// `TRCEVENTCTL0R`.
    pub eventctl0r: u32,
    /// `TRCEVENTCTL1R`.
    pub eventctl1r: u32,
    /// `TRCSTALLCTLR`.
    pub stallctlr: u32,
    /// `TRCTSCTLR`.
    pub tsctlr: u32,
    /// `TRCSYNCPR` (a trace synchronisation every `2^syncpr` bytes).
    pub syncpr: u32,
    /// `TRCCCCTLR`.
    pub ccctlr: u32,
    /// `TRCBBCTLR`.
    pub bbctlr: u32,
    /// `TRCTRACEIDR`.
    pub traceidr: u32,
    /// `TRCVICTLR`.
    pub victlr: u32,
    /// `TRCVIIECTLR`.
    pub viiectlr: u32,
    /// `TRCVISSCTLR`.
    pub vissctlr: u32,
    /// The addresses of single address comparators `0..nr_comparators`: perf's address filters
    /// ([`TraceConfig::for_perf`]), then the stop points, each selected in `TRCVISSCTLR.STOP`
    /// ([`TraceConfig::with_stop_points`]).
    pub comparators: [u64; MAX_ADDR_COMPARATORS],
    /// How many of `comparators` are programmed.
    pub nr_comparators: usize,
    /// How many of the programmed comparators are stop points (the last ones).
    pub nr_stops: usize,
    /// `TRCACATRn` of the programmed comparators (low half; the high half is zero).
    pub acatr: u32,
    /// Exception levels comparator `n` is set not to match at besides those of [`Self::acatr`]
    /// (`TRCACATRn.EXLEVEL_S` and `EXLEVEL_NS`, bits 14:8; the sysfs `addr_exlevel_s_ns`).
    pub acatr_levels: [u32; MAX_ADDR_COMPARATORS],
}

impl TraceConfig {
    /// Returns the default configuration: all instructions at Non-secure EL0, EL1 and EL2,
    /// context IDs when implemented, optional timestamps, and `trace_id` on the trace bus.
    ///
    /// Secure exception levels are excluded, like the C driver does. The trace ID must be in
    /// `0x01..=0x6F`.
    pub fn default_for(ids: &Etm4xIds, trace_id: u8, timestamps: bool) -> Result<Self, Etm4xError> {
        if !(TRACE_ID_MIN..=TRACE_ID_MAX).contains(&trace_id) {
            return Err(Etm4xError::InvalidTraceId(trace_id));
        }
        let configr = TRCCONFIGR::from_raw(0)
            .with_res1(true)
            .with_cid(ids.idr(2) & TRCIDR2_CIDSIZE_MASK != 0)
            .with_ts(timestamps && ids.idr(0) & TRCIDR0_TSSIZE_MASK != 0);
        let victlr = TRCVICTLR::from_raw(ids.idr(3) & TRCIDR3_EXLEVEL_S_MASK)
            .with_const_event::<0x01>()
            .with_ssstatus(true);
        Ok(Self {
            configr: configr.into_raw(),
            eventctl0r: 0,
            eventctl1r: 0,
            stallctlr: 0,
            tsctlr: 0,
            syncpr: 0xC,
            ccctlr: 0,
            bbctlr: 0,
            traceidr: u32::from(trace_id),
            victlr: victlr.into_raw(),
            viiectlr: 0,
            vissctlr: 0,
            comparators: [0; MAX_ADDR_COMPARATORS],
            nr_comparators: 0,
            nr_stops: 0,
            acatr: 0,
            acatr_levels: [0; MAX_ADDR_COMPARATORS],
        })
    }

    /// Returns how many single address comparators the unit has (`TRCIDR4.NUMACPAIRS` * 2).
    pub fn addr_comparators(ids: &Etm4xIds) -> usize {
        // CAST: a 4-bit field.
        let pairs = (ids.idr(4) & TRCIDR4_NUMACPAIRS_MASK) as usize;
        (pairs * 2).min(MAX_ADDR_COMPARATORS)
    }

    /// Adds a hardware stop: the ViewInst start/stop logic stops the trace on the first
    /// instruction at any of `addrs` (the entries of the crash path's first functions), that
    /// instruction included, nothing after it (IHI 0064, `TRCVISSCTLR`).
    ///
    /// Programs single address comparator `n` with `addrs[n]` (`TRCACVRn`), an access type that
    /// matches the executed instruction's address at every level the trace includes
    /// (`TRCACATRn`: the Secure levels the unit implements and, unless the kernel runs at EL2,
    /// Non-secure EL2 excluded, as the C driver's `etm4_get_comparator_access_type()`), and
    /// selects each as a stop point in `TRCVISSCTLR.STOP`, no start point; `TRCVICTLR` keeps
    /// `SSSTATUS` set, so the logic starts started and everything is traced until a stop point.
    ///
    /// The stop points take the single comparators after those already programmed (perf's
    /// address filters): the unit has [`Self::addr_comparators`] single comparators; when
    /// `addrs` holds more than are left, the first ones that fit are programmed and the number
    /// left out is returned.
    pub fn with_stop_points(
        mut self,
        ids: &Etm4xIds,
        addrs: &[u64],
        kernel_el2: bool,
    ) -> (Self, usize) {
        let first = self.nr_comparators.min(Self::addr_comparators(ids));
        let n = addrs.len().min(Self::addr_comparators(ids) - first);
        let mut stop: u32 = 0;
        for (k, addr) in addrs.iter().take(n).enumerate() {
            let i = first + k;
            if let Some(slot) = self.comparators.get_mut(i) {
                *slot = *addr;
                stop |= 1 << i;
            }
        }
        self.nr_comparators = first + n;
        self.nr_stops = n;
        let vissctlr = TRCVISSCTLR::from_raw(self.vissctlr);
        // The bits of at most 16 comparators always fit the field.
        let stop =
            Bounded::<u32, 16>::try_new(vissctlr.stop().get() | stop)
                .unwrap_or(Bounded::<u32, 16>::new::<0>());
        self.vissctlr = vissctlr.with_stop(stop).into_raw();
        let excluded = TRCVICTLR::from_raw(self.victlr).exlevel_ns().get();
        self.acatr = Self::comparator_access(ids, kernel_el2, excluded);
        (self, addrs.len() - n)
    }

    /// Returns `TRCACATRn` (low half) for an instruction address comparator that matches at every
    /// level the trace includes: the Secure levels the unit implements, not the Non-secure
    /// levels the trace excludes (`excluded`, `TRCVICTLR.EXLEVEL_NS`: EL0 or the kernel's level
    /// left out by the user), and unless the kernel runs at EL2 not Non-secure EL2, as the C
    /// driver's `etm4_get_comparator_access_type()`.
    fn comparator_access(ids: &Etm4xIds, kernel_el2: bool, excluded: u32) -> u32 {
        let exlevel_s = Bounded::<u32, 4>::try_new((ids.idr(3) & TRCIDR3_EXLEVEL_S_MASK) >> 16)
            .unwrap_or(Bounded::<u32, 4>::new::<0>());
        // Non-secure EL2 (bit 2 of the field) is the hypervisor's: not traced, not matched.
        let hyp = if kernel_el2 { 0 } else { 0b100 };
        let exlevel_ns =
            Bounded::<u32, 3>::try_new((excluded | hyp) & 0b111)
                .unwrap_or(Bounded::<u32, 3>::new::<0b100>());
        TRCACATR::from_raw(0)
            .with_exlevel_s(exlevel_s)
            .with_exlevel_ns(exlevel_ns)
            .into_raw()
    }

    /// Returns the configuration of a perf session (`cs_etm`): the default one
    /// ([`Self::default_for`], without the context IDs and timestamps it may add) with what the
    /// event asks for, as upstream's `etm4_parse_event_config()` and `etm4_set_event_filters()`
    /// read it.
    ///
    /// - `/k` and `/u` exclude Non-secure EL0 or EL1 (and EL2 where the kernel runs there) from
    ///   ViewInst (`TRCVICTLR.EXLEVEL_NS`);
    /// - cycle counting, timestamps, context IDs and the return stack are enabled when the unit
    ///   implements them (`TRCIDR0`, `TRCIDR2`) and left out otherwise, as upstream does (their
    ///   `TRCCONFIGR` bits are RES0 there); timestamps need no counter event here (upstream
    ///   programs one for a timestamp level below the maximum);
    /// - branch broadcast on a unit without it is refused ([`Etm4xError::Unsupported`]), as is
    ///   the VMID as context ID (`contextid2`) unless the kernel runs at EL2, as upstream refuses
    ///   them;
    /// - address filters: a range takes a comparator pair and includes it
    ///   (`TRCVIIECTLR.INCLUDE`), a start or stop address a single comparator
    ///   (`TRCVISSCTLR.START`/`STOP`); with a start address the start/stop logic begins stopped
    ///   unless `opts.filters_started` says a start address was hit before the task was
    ///   scheduled out; a range or no start address begins started. More filters than
    ///   comparators are refused ([`Etm4xError::NoComparator`]). Unlike upstream, which keeps
    ///   only the kind given last, ranges and start/stop addresses combine.
    pub fn for_perf(
        ids: &Etm4xIds,
        trace_id: u8,
        opts: &PerfOptions<'_>,
        kernel_el2: bool,
    ) -> Result<Self, Etm4xError> {
        let mut cfg = Self::default_for(ids, trace_id, false)?;
        let idr0 = ids.idr(0);
        let mut configr = TRCCONFIGR::from_raw(cfg.configr).with_cid(false);
        if opts.cycacc && idr0 & TRCIDR0_TRCCCI != 0 {
            configr = configr.with_cci(true);
            cfg.ccctlr = ETM_CYC_THRESHOLD_DEFAULT.max((ids.idr(3) & 0xFFF).max(1));
        }
        if opts.timestamp && idr0 & TRCIDR0_TSSIZE_MASK != 0 {
            configr = configr.with_ts(true);
        }
        if opts.contextid1 && ids.idr(2) & TRCIDR2_CIDSIZE_MASK != 0 {
            configr = configr.with_cid(true);
        }
        if opts.contextid2 {
            if !kernel_el2 {
                return Err(Etm4xError::Unsupported("contextid2"));
            }
            configr = configr.with_vmid(true).with_vmidopt(true);
        }
        if opts.retstack && idr0 & TRCIDR0_RETSTACK != 0 {
            configr = configr.with_rs(true);
        }
        if opts.branch_broadcast {
            if idr0 & TRCIDR0_TRCBB == 0 {
                return Err(Etm4xError::Unsupported("branch_broadcast"));
            }
            configr = configr.with_bb(true);
        }
        cfg.configr = configr.into_raw();
        let started = opts.filters_started
            || !opts
                .filters
                .iter()
                .any(|f| matches!(f, PerfFilter::Start(_)));
        cfg.filtered(
            ids,
            opts.exclude_user,
            opts.exclude_kernel,
            opts.filters,
            started,
            kernel_el2,
        )
    }

    /// Returns the configuration a user set through the unit's sysfs files (`settings`, the C
    /// driver's names and meanings) on top of the default one ([`Self::default_for`], with
    /// `timestamps` or the `mode` bit asking for them):
    ///
    /// - of `mode`'s feature bits, those the unit implements (branch broadcast, cycle counting,
    ///   return stack, timestamps); the others are kept in `mode` and do nothing, as upstream;
    /// - `mode`'s exclude-kernel and exclude-user bits exclude those levels from ViewInst and
    ///   from every address comparator's match;
    /// - each address comparator at the index the user set it (`addr_idx`), as upstream: a
    ///   range pair (`addr_range`) included or excluded (`TRCVIIECTLR`), a start or stop point
    ///   (`addr_start`, `addr_stop`: `TRCVISSCTLR`), a single address (`addr_single`:
    ///   programmed, selected nowhere: the unit's resource selectors are not provided), each
    ///   with the levels `addr_exlevel_s_ns` leaves out added to its access type; the
    ///   start/stop logic starts started when `mode`'s ViewInst start/stop bit is set (the
    ///   default), as upstream.
    pub fn for_sysfs(
        ids: &Etm4xIds,
        trace_id: u8,
        timestamps: bool,
        settings: &SysfsSettings,
        kernel_el2: bool,
    ) -> Result<Self, Etm4xError> {
        let m = settings.mode;
        let mut cfg = Self::default_for(ids, trace_id, timestamps || m & mode::TIMESTAMP != 0)?;
        let idr0 = ids.idr(0);
        let mut configr = TRCCONFIGR::from_raw(cfg.configr);
        if m & mode::CYCACC != 0 && idr0 & TRCIDR0_TRCCCI != 0 {
            configr = configr.with_cci(true);
            cfg.ccctlr = ETM_CYC_THRESHOLD_DEFAULT.max((ids.idr(3) & 0xFFF).max(1));
        }
        if m & mode::RETURNSTACK != 0 && idr0 & TRCIDR0_RETSTACK != 0 {
            configr = configr.with_rs(true);
        }
        if m & mode::BB != 0 && idr0 & TRCIDR0_TRCBB != 0 {
            configr = configr.with_bb(true);
        }
        cfg.configr = configr.into_raw();
        let mut cfg = cfg.filtered(
            ids,
            m & mode::EXCL_USER != 0,
            m & mode::EXCL_KERN != 0,
            &[],
            m & mode::VIEWINST_STARTSTOP != 0,
            kernel_el2,
        )?;
        let (mut include, mut exclude, mut start, mut stop) = (0u32, 0u32, 0u32, 0u32);
        let total = Self::addr_comparators(ids);
        for (i, a) in settings.addr.iter().enumerate().take(total) {
            let (addr, bits) = match *a {
                AddrSetting::None => continue,
                AddrSetting::Range(addr) if i.is_multiple_of(2) => {
                    if settings.exclude & (1 << (i / 2)) != 0 {
                        exclude |= 1 << (i / 2);
                    } else {
                        include |= 1 << (i / 2);
                    }
                    (addr, None)
                }
                AddrSetting::Range(addr) | AddrSetting::Single(addr) => (addr, None),
                AddrSetting::Start(addr) => (addr, Some(&mut start)),
                AddrSetting::Stop(addr) => (addr, Some(&mut stop)),
            };
            if let Some(b) = bits {
                *b |= 1 << i;
            }
            if let (Some(slot), Some(levels), Some(set)) = (
                cfg.comparators.get_mut(i),
                cfg.acatr_levels.get_mut(i),
                settings.exlevel.get(i),
            ) {
                *slot = addr;
                *levels = u32::from(*set) << 8;
            }
            cfg.nr_comparators = i + 1;
        }
        cfg.viiectlr = include | (exclude << 16);
        cfg.vissctlr = Self::start_stop(start, stop);
        if cfg.nr_comparators > 0 {
            let excluded = TRCVICTLR::from_raw(cfg.victlr).exlevel_ns().get();
            cfg.acatr = Self::comparator_access(ids, kernel_el2, excluded);
        }
        Ok(cfg)
    }

    /// Returns `TRCVISSCTLR` with the comparators of `start` and `stop` (one bit each) as start
    /// and stop points.
    fn start_stop(start: u32, stop: u32) -> u32 {
        // At most 16 comparators: the bits fit the fields.
        TRCVISSCTLR::from_raw(0)
            .with_start(
                Bounded::<u32, 16>::try_new(start).unwrap_or(Bounded::<u32, 16>::new::<0>()),
            )
            .with_stop(Bounded::<u32, 16>::try_new(stop).unwrap_or(Bounded::<u32, 16>::new::<0>()))
            .into_raw()
    }

    /// Excludes user space or the kernel from ViewInst and programs the address `filters`
    /// (see [`Self::for_perf`]); the start/stop logic starts in the `started` state.
    fn filtered(
        mut self,
        ids: &Etm4xIds,
        exclude_user: bool,
        exclude_kernel: bool,
        filters: &[PerfFilter],
        started: bool,
        kernel_el2: bool,
    ) -> Result<Self, Etm4xError> {
        let cfg = &mut self;
        let mut victlr = TRCVICTLR::from_raw(cfg.victlr);
        let mut exclude = victlr.exlevel_ns().get();
        if exclude_user {
            exclude |= 0b001;
        }
        if exclude_kernel {
            exclude |= if kernel_el2 { 0b110 } else { 0b010 };
        }
        victlr =
            victlr.with_exlevel_ns(
                Bounded::<u32, 3>::try_new(exclude).unwrap_or(Bounded::<u32, 3>::new::<0>()),
            );

        let total = Self::addr_comparators(ids);
        let mut used = [false; MAX_ADDR_COMPARATORS];
        let mut include: u32 = 0;
        let mut start: u32 = 0;
        let mut stop: u32 = 0;
        for f in filters {
            match *f {
                PerfFilter::Range {
                    start: lo,
                    stop: hi,
                } => {
                    let pair = (0..total / 2)
                        .find(|p| !used[2 * p] && !used[2 * p + 1])
                        .ok_or(Etm4xError::NoComparator)?;
                    used[2 * pair] = true;
                    used[2 * pair + 1] = true;
                    cfg.comparators[2 * pair] = lo;
                    cfg.comparators[2 * pair + 1] = hi;
                    include |= 1 << pair;
                }
                PerfFilter::Start(addr) | PerfFilter::Stop(addr) => {
                    let c = (0..total)
                        .find(|&c| !used[c])
                        .ok_or(Etm4xError::NoComparator)?;
                    used[c] = true;
                    cfg.comparators[c] = addr;
                    if matches!(f, PerfFilter::Start(_)) {
                        start |= 1 << c;
                    } else {
                        stop |= 1 << c;
                    }
                }
            }
        }
        cfg.nr_comparators = used.iter().rposition(|&u| u).map_or(0, |last| last + 1);
        // Comparators below the last used one that no filter took match address zero, which
        // the kernel never executes; none is selected anywhere.
        cfg.viiectlr = include;
        victlr = victlr.with_ssstatus(started);
        cfg.victlr = victlr.into_raw();
        cfg.vissctlr = Self::start_stop(start, stop);
        if cfg.nr_comparators > 0 {
            cfg.acatr = Self::comparator_access(ids, kernel_el2, exclude);
        }
        Ok(self)
    }
}

/// An address filter of a perf session (`perf record --filter`), as the unit takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfFilter {
    /// Trace only `start..=stop` (an address range comparator pair).
    Range {
        /// Lower address.
        start: u64,
        /// Upper address.
        stop: u64,
    },
    /// Start tracing at this instruction.
    Start(u64),
    /// Stop tracing after this instruction.
    Stop(u64),
}

/// What a perf event asks of the trace unit: its `attr.config` bits (the `cs_etm` format),
/// `/k` and `/u`, and its address filters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfOptions<'a> {
    /// `attr.exclude_kernel` (`/u`).
    pub exclude_kernel: bool,
    /// `attr.exclude_user` (`/k`).
    pub exclude_user: bool,
    /// `cycacc`.
    pub cycacc: bool,
    /// `timestamp` (any level) or the older `timestamp` bit 28.
    pub timestamp: bool,
    /// `contextid1` (`contextid`): `CONTEXTIDR_EL1`.
    pub contextid1: bool,
    /// `contextid2`: `CONTEXTIDR_EL2` as the VMID.
    pub contextid2: bool,
    /// `retstack`.
    pub retstack: bool,
    /// `branch_broadcast`.
    pub branch_broadcast: bool,
    /// The address filters.
    pub filters: &'a [PerfFilter],
    /// The start/stop logic was started when the task was last scheduled out.
    pub filters_started: bool,
}

impl PerfOptions<'_> {
    /// Reads the format fields of `attr.config` (`/sys/bus/event_source/devices/cs_etm/format/`
    /// of Linux 7.3): `timestamp` bits 7:4 and the older bit 28, `branch_broadcast` 8, `cycacc`
    /// 12, `contextid1` 14, `contextid2` 15, `retstack` 29.
    pub fn with_config(mut self, config: u64) -> Self {
        let bit = |n: u32| config & (1u64 << n) != 0;
        self.timestamp = config & (0xF << 4) != 0 || bit(28);
        self.branch_broadcast = bit(8);
        self.cycacc = bit(12);
        self.contextid1 = bit(14);
        self.contextid2 = bit(15);
        self.retstack = bit(29);
        self
    }
}

/// The bits of the unit's sysfs `mode` file that this driver acts on: the C driver's
/// `ETM_MODE_*` and `ETMv4_MODE_*` (`coresight-etm4x.h`).
pub mod mode {
    /// `ETM_MODE_EXCLUDE`: the range pair `addr_idx` selects excludes its range.
    pub const EXCLUDE: u32 = 1 << 0;
    /// `ETM_MODE_BB`: branch broadcast.
    pub const BB: u32 = 1 << 4;
    /// `ETMv4_MODE_CYCACC`: cycle counting.
    pub const CYCACC: u32 = 1 << 5;
    /// `ETMv4_MODE_TIMESTAMP`: global timestamps.
    pub const TIMESTAMP: u32 = 1 << 11;
    /// `ETM_MODE_RETURNSTACK`: the return stack.
    pub const RETURNSTACK: u32 = 1 << 12;
    /// `ETM_MODE_VIEWINST_STARTSTOP`: the ViewInst start/stop logic starts started.
    pub const VIEWINST_STARTSTOP: u32 = 1 << 27;
    /// `ETM_MODE_EXCL_KERN`: the kernel's exception level is not traced.
    pub const EXCL_KERN: u32 = 1 << 30;
    /// `ETM_MODE_EXCL_USER`: EL0 is not traced.
    pub const EXCL_USER: u32 = 1 << 31;
    /// `ETMv4_MODE_ALL`: the bits `mode` keeps of what is written to it.
    pub const ALL: u32 = 0x0FFF_FFFF | EXCL_KERN | EXCL_USER;
}

/// What a single address comparator is set to through the unit's sysfs files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddrSetting {
    /// Not set (`ETM_ADDR_TYPE_NONE`).
    #[default]
    None,
    /// One half of an address range (`addr_range`): its address.
    Range(u64),
    /// A start point (`addr_start`).
    Start(u64),
    /// A stop point (`addr_stop`).
    Stop(u64),
    /// A single address (`addr_single`).
    Single(u64),
}

/// Why a write to the unit's sysfs configuration was refused, as the C driver refuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingError {
    /// A value out of range, or what the unit cannot do (`-EINVAL`).
    Invalid,
    /// The comparator `addr_idx` selects is set to another kind (`-EPERM`).
    OtherKind,
}

/// Largest value of `addr_exlevel_s_ns`: `TRCACATRn.EXLEVEL_S` (bits 3:0 of the value) and
/// `EXLEVEL_NS` (6:4).
pub const ADDR_EXLEVEL_MAX: u64 = 0x7F;

/// The trace configuration a user sets through the unit's sysfs files, with the C driver's
/// names and meanings: `mode`, and the address comparators that `addr_idx` selects for
/// `addr_range`, `addr_start`, `addr_stop`, `addr_single` and `addr_exlevel_s_ns`.
/// [`TraceConfig::for_sysfs`] programs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysfsSettings {
    /// `mode`.
    pub mode: u32,
    /// `addr_idx`: the comparator the address files act on.
    pub addr_idx: usize,
    /// Each single comparator's setting.
    pub addr: [AddrSetting; MAX_ADDR_COMPARATORS],
    /// The range pairs that exclude their range, one bit per pair (`TRCVIIECTLR.EXCLUDE`).
    pub exclude: u8,
    /// Each comparator's `addr_exlevel_s_ns`: levels where it does not match.
    pub exlevel: [u8; MAX_ADDR_COMPARATORS],
}

/// What `addr_cmp_view` shows of the comparator `addr_idx` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmpView {
    /// The comparator (the pair's first for a range).
    pub index: usize,
    /// Its setting.
    pub setting: AddrSetting,
    /// The pair's other address, for a range.
    pub range_end: u64,
    /// A range that excludes.
    pub exclude: bool,
    /// Its access type as set (`TRCACATRn` bits the user set: `addr_exlevel_s_ns` << 8).
    pub ctrl: u32,
}

impl Default for SysfsSettings {
    /// What the unit traces after probe: everything, the start/stop logic started (upstream's
    /// `etm4_set_default()`).
    fn default() -> Self {
        Self {
            mode: mode::VIEWINST_STARTSTOP,
            addr_idx: 0,
            addr: [AddrSetting::None; MAX_ADDR_COMPARATORS],
            exclude: 0,
            exlevel: [0; MAX_ADDR_COMPARATORS],
        }
    }
}

impl SysfsSettings {
    /// `reset`: no address comparator set, `addr_idx` 0, and `mode` cleared when `value` is not
    /// zero; the start/stop logic starts started on a unit with comparators (upstream's
    /// `reset_store()`).
    pub fn reset(&mut self, value: u64, ids: &Etm4xIds) {
        if value != 0 {
            self.mode = 0;
        }
        if TraceConfig::addr_comparators(ids) > 0 {
            self.mode |= mode::VIEWINST_STARTSTOP;
        }
        self.addr_idx = 0;
        self.addr = [AddrSetting::None; MAX_ADDR_COMPARATORS];
        self.exclude = 0;
        self.exlevel = [0; MAX_ADDR_COMPARATORS];
    }

    /// `mode`: keeps the bits upstream keeps; its exclude bit makes the range pair `addr_idx`
    /// selects exclude or include its range, when it is one (upstream's `mode_store()`).
    pub fn set_mode(&mut self, value: u64) {
        // CAST: `ALL` fits 32 bits, the rest is masked off.
        self.mode = (value & u64::from(mode::ALL)) as u32;
        self.set_pair_exclude(self.mode & mode::EXCLUDE != 0);
    }

    /// Makes the range pair at `addr_idx` exclude (or include) its range; nothing when
    /// `addr_idx` is not a set range pair's first comparator.
    fn set_pair_exclude(&mut self, exclude: bool) {
        let i = self.addr_idx;
        if i.is_multiple_of(2)
            && matches!(
                self.pair(),
                Ok((AddrSetting::Range(_), AddrSetting::Range(_)))
            )
        {
            let bit = 1u8 << (i / 2);
            if exclude {
                self.exclude |= bit;
            } else {
                self.exclude &= !bit;
            }
        }
    }

    /// `addr_idx`: a single comparator the unit has.
    pub fn set_addr_idx(&mut self, value: u64, ids: &Etm4xIds) -> Result<(), SettingError> {
        let n = TraceConfig::addr_comparators(ids);
        match usize::try_from(value) {
            Ok(i) if i < n => {
                self.addr_idx = i;
                Ok(())
            }
            _ => Err(SettingError::Invalid),
        }
    }

    /// The setting of the comparator `addr_idx` selects and of the one after it.
    fn pair(&self) -> Result<(AddrSetting, AddrSetting), SettingError> {
        let i = self.addr_idx;
        if !i.is_multiple_of(2) {
            return Err(SettingError::OtherKind);
        }
        match (self.addr.get(i), self.addr.get(i + 1)) {
            (Some(&a), Some(&b)) => Ok((a, b)),
            _ => Err(SettingError::Invalid),
        }
    }

    /// `addr_range` as read: the pair's addresses (zero while unset); [`SettingError::OtherKind`]
    /// for an odd `addr_idx` or a pair set to something else.
    pub fn range(&self) -> Result<(u64, u64), SettingError> {
        match self.pair()? {
            (AddrSetting::None, AddrSetting::None) => Ok((0, 0)),
            (AddrSetting::Range(lo), AddrSetting::Range(hi)) => Ok((lo, hi)),
            _ => Err(SettingError::OtherKind),
        }
    }

    /// `addr_range` written: the pair at `addr_idx` includes `lo..=hi` in the trace, or
    /// excludes it from the trace (a third value not zero, else `mode`'s exclude bit).
    pub fn set_range(
        &mut self,
        lo: u64,
        hi: u64,
        exclude: Option<bool>,
    ) -> Result<(), SettingError> {
        if lo > hi {
            return Err(SettingError::Invalid);
        }
        self.range()?;
        let i = self.addr_idx;
        self.addr[i] = AddrSetting::Range(lo);
        self.addr[i + 1] = AddrSetting::Range(hi);
        self.set_pair_exclude(exclude.unwrap_or(self.mode & mode::EXCLUDE != 0));
        Ok(())
    }

    /// `addr_single` as read: the address at `addr_idx` (zero while unset);
    /// [`SettingError::OtherKind`] when it is set to something else.
    pub fn single(&self) -> Result<u64, SettingError> {
        match self.addr.get(self.addr_idx) {
            Some(AddrSetting::None) => Ok(0),
            Some(AddrSetting::Single(a)) => Ok(*a),
            Some(_) => Err(SettingError::OtherKind),
            None => Err(SettingError::Invalid),
        }
    }

    /// `addr_single` written: the comparator at `addr_idx` holds `addr`.
    pub fn set_single(&mut self, addr: u64) -> Result<(), SettingError> {
        self.single()?;
        self.addr[self.addr_idx] = AddrSetting::Single(addr);
        Ok(())
    }

    /// `addr_exlevel_s_ns` as read: the levels the comparator at `addr_idx` does not match at.
    pub fn exlevel(&self) -> u64 {
        self.exlevel.get(self.addr_idx).map_or(0, |&v| u64::from(v))
    }

    /// `addr_exlevel_s_ns` written: at most [`ADDR_EXLEVEL_MAX`].
    pub fn set_exlevel(&mut self, value: u64) -> Result<(), SettingError> {
        let v = u8::try_from(value)
            .ok()
            .filter(|&v| u64::from(v) <= ADDR_EXLEVEL_MAX)
            .ok_or(SettingError::Invalid)?;
        let slot = self
            .exlevel
            .get_mut(self.addr_idx)
            .ok_or(SettingError::Invalid)?;
        *slot = v;
        Ok(())
    }

    /// `addr_cmp_view`: the comparator at `addr_idx`, as upstream shows it (a range from its
    /// first comparator).
    pub fn cmp_view(&self) -> CmpView {
        let i = self.addr_idx;
        let at = |k: usize| self.addr.get(k).copied().unwrap_or_default();
        let ctrl = u32::from(self.exlevel.get(i).copied().unwrap_or(0)) << 8;
        let setting = at(i);
        if !matches!(setting, AddrSetting::Range(_)) {
            return CmpView {
                index: i,
                setting,
                range_end: 0,
                exclude: false,
                ctrl,
            };
        }
        let first = i - i % 2;
        let addr = |k: usize| match at(k) {
            AddrSetting::Range(a) => a,
            _ => 0,
        };
        CmpView {
            index: first,
            setting: AddrSetting::Range(addr(first)),
            range_end: addr(first + 1),
            exclude: self.exclude & (1 << (first / 2)) != 0,
            ctrl,
        }
    }

    /// `addr_start` (`stop` false) or `addr_stop` as read: the address at `addr_idx` (zero while
    /// unset); [`SettingError::OtherKind`] when it is set to something else.
    pub fn point(&self, stop: bool) -> Result<u64, SettingError> {
        match (self.addr.get(self.addr_idx), stop) {
            (Some(AddrSetting::None), _) => Ok(0),
            (Some(AddrSetting::Start(a)), false) | (Some(AddrSetting::Stop(a)), true) => Ok(*a),
            (Some(_), _) => Err(SettingError::OtherKind),
            (None, _) => Err(SettingError::Invalid),
        }
    }

    /// `addr_start` (`stop` false) or `addr_stop` written: the comparator at `addr_idx` becomes
    /// a start or stop point at `addr`.
    pub fn set_point(&mut self, addr: u64, stop: bool, ids: &Etm4xIds) -> Result<(), SettingError> {
        if TraceConfig::addr_comparators(ids) == 0 {
            return Err(SettingError::Invalid);
        }
        self.point(stop)?;
        self.addr[self.addr_idx] = if stop {
            AddrSetting::Stop(addr)
        } else {
            AddrSetting::Start(addr)
        };
        Ok(())
    }
}

/// What was found on entry and must be put back on exit ("restore as found").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoundLocks {
    /// The OS lock was set on entry.
    pub os_locked: bool,
    /// The software lock was set on entry.
    pub sw_locked: bool,
}

/// What the trace unit's own CPU does around the unit's stop and start, which no other CPU can
/// do for it (IHI 0064 and the C driver's `etm4_disable_hw()`/`etm4_enable_hw()`): the barriers
/// that make what it executed reach the trace unit before `TRCPRGCTLR.EN` clears, and the
/// self-hosted trace filter (`TRFCR_EL1`, FEAT_TRF).
pub trait OwnCpu {
    /// Prohibits self-hosted trace at EL0 and EL1 in `TRFCR_EL1` where the CPU has FEAT_TRF
    /// (read from `ID_AA64DFR0_EL1`); nothing otherwise.
    fn prohibit_trace(&self);
    /// Allows self-hosted trace at EL0 and EL1 again where the CPU has FEAT_TRF.
    fn allow_trace(&self);
    /// `DSB SY; ISB; TSB CSYNC` (the last a NOP without FEAT_TRF): the instructions executed so
    /// far are traced before the trace unit is told to stop.
    fn synchronize(&self);
    /// `ISB`: the context synchronization needed between a system-register write to the trace
    /// unit and a read of its status.
    fn isb(&self);
}

/// One ETMv4 trace unit reached through `A`.
pub struct Etm4x<'a, A: CsAccess> {
    io: &'a mut A,
    iface: Interface,
    timeout: Timeout,
    own_cpu: Option<&'a dyn OwnCpu>,
}

impl<'a, A: CsAccess> Etm4x<'a, A> {
    /// Wraps the register access `io` of a trace unit reached through `iface`, from a CPU
    /// other than the unit's own (see [`Self::on_own_cpu`]).
    pub fn new(io: &'a mut A, iface: Interface, timeout: Timeout) -> Self {
        Self {
            io,
            iface,
            timeout,
            own_cpu: None,
        }
    }

    /// Says that the caller runs on the trace unit's own CPU, which `cpu` acts on: stop and
    /// enable then take the steps only that CPU can (barriers, `TRFCR_EL1`).
    pub fn on_own_cpu(mut self, cpu: &'a dyn OwnCpu) -> Self {
        self.own_cpu = Some(cpu);
        self
    }

    /// Returns the underlying register access.
    pub fn io(&mut self) -> &mut A {
        self.io
    }

    /// Returns `true` when the software lock is implemented and set.
    pub fn sw_locked(&mut self) -> bool {
        self.iface == Interface::Mmio && self.io.read(LSR).locked()
    }

    /// Clears the software lock if it is set; returns whether it was set.
    pub fn sw_unlock(&mut self) -> Result<bool, Etm4xError> {
        if !self.sw_locked() {
            return Ok(false);
        }
        self.io.write_reg(LAR::from_raw(CS_UNLOCK_KEY));
        if self.sw_locked() {
            return Err(Etm4xError::SoftwareLocked);
        }
        Ok(true)
    }

    /// Sets the software lock (memory-mapped interface only).
    pub fn sw_lock(&mut self) {
        if self.iface == Interface::Mmio {
            self.io.write_reg(LAR::from_raw(0));
        }
    }

    /// Returns `true` when the OS lock is set.
    pub fn os_locked(&mut self) -> bool {
        self.io.read(TRCOSLSR).oslk()
    }

    /// Clears the OS lock if it is set; returns whether it was set.
    pub fn os_unlock(&mut self) -> Result<bool, Etm4xError> {
        if !self.os_locked() {
            return Ok(false);
        }
        self.io.write_reg(TRCOSLAR::from_raw(0));
        if self.os_locked() {
            return Err(Etm4xError::OsLocked);
        }
        Ok(true)
    }

    /// Sets the OS lock.
    pub fn os_lock(&mut self) {
        self.io.write_reg(TRCOSLAR::from_raw(0).with_oslk(true));
    }

    /// Clears both locks and reports what was found, so that [`Self::restore_locks`] can put
    /// them back.
    ///
    /// On error, whatever was already unlocked has been restored.
    pub fn unlock(&mut self) -> Result<FoundLocks, Etm4xError> {
        let sw_locked = self.sw_unlock()?;
        self.os_unlock()
            .map(|os_locked| FoundLocks {
                os_locked,
                sw_locked,
            })
            .inspect_err(|_| {
                if sw_locked {
                    self.sw_lock();
                }
            })
    }

    /// Puts the OS lock and the software lock back as [`Self::unlock`] found them.
    pub fn restore_locks(&mut self, found: FoundLocks) {
        if found.os_locked {
            self.os_lock();
        }
        if found.sw_locked {
            self.sw_lock();
        }
    }

    /// Returns `true` when the trace unit power domain is up (always for system registers).
    pub fn powered(&mut self) -> bool {
        match self.iface {
            Interface::Mmio => self.io.read(TRCPDSR).power(),
            Interface::SysReg => true,
        }
    }

    /// Reads the management registers, which are readable whatever the OS lock state.
    fn read_management(&mut self, ids: &mut Etm4xIds) {
        ids.devarch = self.io.read(DEVARCH).into_raw();
        ids.authstatus = self.io.read(AUTHSTATUS).into_raw();
        ids.devtype = match self.iface {
            Interface::Mmio => self.io.read(DEVTYPE).into_raw(),
            Interface::SysReg => 0,
        };
    }

    /// Reads `TRCIDR0..=TRCIDR13`; the caller has the OS lock clear.
    fn read_idrs(&mut self, idr: &mut [u32; NR_IDR]) {
        for (n, slot) in idr.iter_mut().enumerate() {
            let v = match n {
                0..=7 => TRCIDR0_7::try_at(n).map(|loc| self.io.read(loc).into_raw()),
                _ => TRCIDR8_13::try_at(n - 8).map(|loc| self.io.read(loc).into_raw()),
            };
            if let Some(v) = v {
                *slot = v;
            }
        }
    }

    /// Reads the ID and identification registers, restoring the locks as found.
    pub fn read_ids(&mut self) -> Result<Etm4xIds, Etm4xError> {
        let mut ids = Etm4xIds::default();
        self.read_management(&mut ids);
        if !ids.is_etmv4() {
            return Err(Etm4xError::NotEtmV4(ids.devarch));
        }
        if !self.powered() {
            return Err(Etm4xError::PoweredDown);
        }
        let found = self.unlock()?;
        self.read_idrs(&mut ids.idr);
        self.restore_locks(found);
        Ok(ids)
    }

    /// Polls `TRCSTATR` until `cond` holds for it; returns the last `TRCSTATR` read.
    fn wait_status(&mut self, cond: impl FnMut(&TRCSTATR) -> bool) -> Result<u32, u32> {
        self.io
            .poll(
                self.timeout.tries,
                self.timeout.delay_us,
                |io| io.read(TRCSTATR),
                cond,
            )
            .map(|p| p.value.into_raw())
            .map_err(|p| p.value.into_raw())
    }

    /// Stops trace generation: on the unit's own CPU, prohibits trace in `TRFCR_EL1` and
    /// synchronizes (`DSB SY; ISB; TSB CSYNC`) first; clears `TRCPRGCTLR.EN` (then, through
    /// system registers, an `ISB` before `TRCSTATR` is read); waits for `IDLE`, then `PMSTABLE`,
    /// each within the timeout. From another CPU over MMIO only the register steps apply: that
    /// CPU's barriers order nothing on the traced one.
    ///
    /// The caller has both locks clear. Returns the last `TRCSTATR` read.
    pub fn stop(&mut self) -> Result<u32, Etm4xError> {
        if let Some(cpu) = self.own_cpu {
            cpu.prohibit_trace();
            cpu.synchronize();
        }
        self.io.write_reg(TRCPRGCTLR::from_raw(0));
        if let (Some(cpu), Interface::SysReg) = (self.own_cpu, self.iface) {
            cpu.isb();
        }
        self.wait_status(|s| s.idle())
            .map_err(Etm4xError::IdleTimeout)?;
        self.wait_status(|s| s.pmstable())
            .map_err(Etm4xError::PmStableTimeout)
    }

    /// Programs `cfg` and enables the trace unit.
    ///
    /// Follows the C driver: unlock, request power (`TRCPDCR.PU`), disable and wait for idle,
    /// program, set `EN`, wait for `IDLE` to clear, then set the software lock again. The OS lock
    /// is left clear (a traced CPU needs it clear); it was found set if the returned
    /// [`FoundLocks`] says so.
    pub fn enable(&mut self, cfg: &TraceConfig) -> Result<FoundLocks, Etm4xError> {
        self.enable_inner(cfg, true)
    }

    /// [`Self::enable`] for a perf event perf holds paused: everything is programmed and power
    /// requested, but `EN` stays clear until [`Self::resume`].
    pub fn enable_paused(&mut self, cfg: &TraceConfig) -> Result<FoundLocks, Etm4xError> {
        self.enable_inner(cfg, false)
    }

    fn enable_inner(&mut self, cfg: &TraceConfig, start: bool) -> Result<FoundLocks, Etm4xError> {
        if !(u32::from(TRACE_ID_MIN)..=u32::from(TRACE_ID_MAX)).contains(&cfg.traceidr) {
            // CAST: the value is reported truncated; it is out of range either way.
            return Err(Etm4xError::InvalidTraceId(cfg.traceidr as u8));
        }
        if !self.powered() {
            return Err(Etm4xError::PoweredDown);
        }
        let found = self.unlock()?;
        let result = self.program_and_start(cfg, start);
        if found.sw_locked {
            self.sw_lock();
        }
        result.map(|()| found)
    }

    /// Sets or clears `TRCPDCR.PU` on a memory-mapped unit: while set, the trace unit's power
    /// domain stays up even if its CPU powers down (what the C driver does while tracing).
    fn request_power(&mut self, on: bool) {
        if self.iface == Interface::Mmio {
            self.io.update(TRCPDCR, |r: TRCPDCR| r.with_pu(on));
        }
    }

    /// Writes the trace configuration registers, in the order the C driver programs them.
    fn program(&mut self, cfg: &TraceConfig) {
        let io = &mut *self.io;
        io.write_reg(TRCCONFIGR::from_raw(cfg.configr));
        io.write_reg(TRCEVENTCTL0R::from_raw(cfg.eventctl0r));
        io.write_reg(TRCEVENTCTL1R::from_raw(cfg.eventctl1r));
        io.write_reg(TRCSTALLCTLR::from_raw(cfg.stallctlr));
        io.write_reg(TRCTSCTLR::from_raw(cfg.tsctlr));
        io.write_reg(TRCSYNCPR::from_raw(cfg.syncpr));
        io.write_reg(TRCCCCTLR::from_raw(cfg.ccctlr));
        io.write_reg(TRCBBCTLR::from_raw(cfg.bbctlr));
        io.write_reg(TRCTRACEIDR::from_raw(cfg.traceidr));
        io.write_reg(TRCVICTLR::from_raw(cfg.victlr));
        io.write_reg(TRCVIIECTLR::from_raw(cfg.viiectlr));
        io.write_reg(TRCVISSCTLR::from_raw(cfg.vissctlr));
        for (n, addr) in cfg.comparators.iter().enumerate().take(cfg.nr_comparators) {
            if let (Some(value), Some(access), Some(levels)) = (
                TRCACVR::try_at(n),
                TRCACATR::try_at(n),
                cfg.acatr_levels.get(n),
            ) {
                io.write64(value, TRCACVR::from_raw(*addr));
                io.write(access, TRCACATR::from_raw(cfg.acatr | levels));
            }
        }
    }

    fn program_and_start(&mut self, cfg: &TraceConfig, start: bool) -> Result<(), Etm4xError> {
        self.request_power(true);
        self.io.write_reg(TRCPRGCTLR::from_raw(0));
        self.wait_status(|s| s.idle())
            .map_err(Etm4xError::IdleTimeout)?;
        self.program(cfg);
        if !start {
            return Ok(());
        }
        self.io.write_reg(TRCPRGCTLR::from_raw(0).with_en(true));
        if let (Some(cpu), Interface::SysReg) = (self.own_cpu, self.iface) {
            cpu.isb();
        }
        self.wait_status(|s| !s.idle())
            .map_err(Etm4xError::IdleTimeout)?;
        // What an earlier stop on this CPU prohibited.
        if let Some(cpu) = self.own_cpu {
            cpu.allow_trace();
        }
        Ok(())
    }

    /// Pauses an enabled unit (perf's AUX pause): [`Self::stop`], its programming kept for
    /// [`Self::resume`]. The power request stays; the software lock is restored as found.
    pub fn pause(&mut self) -> Result<(), Etm4xError> {
        let sw_locked = self.sw_unlock()?;
        let result = self.stop().map(|_| ());
        if sw_locked {
            self.sw_lock();
        }
        result
    }

    /// Resumes a unit [`Self::pause`] stopped, with the programming it kept: sets `EN`
    /// (through system registers, an `ISB` after it), waits for `IDLE` to clear and, on the
    /// unit's own CPU, allows trace again. The software lock is restored as found.
    pub fn resume(&mut self) -> Result<(), Etm4xError> {
        let sw_locked = self.sw_unlock()?;
        self.io.write_reg(TRCPRGCTLR::from_raw(0).with_en(true));
        if let (Some(cpu), Interface::SysReg) = (self.own_cpu, self.iface) {
            cpu.isb();
        }
        let result = self
            .wait_status(|s| !s.idle())
            .map(|_| ())
            .map_err(Etm4xError::IdleTimeout);
        if result.is_ok() {
            if let Some(cpu) = self.own_cpu {
                cpu.allow_trace();
            }
        }
        if sw_locked {
            self.sw_lock();
        }
        result
    }

    /// Returns whether the ViewInst start/stop logic is in the started state
    /// (`TRCVICTLR.SSSTATUS`), read once the unit is disabled: where a perf session's start/stop
    /// filters left it when the task was scheduled out.
    pub fn start_stop_started(&mut self) -> bool {
        self.io.read(TRCVICTLR).ssstatus()
    }

    /// Disables the trace unit, waits until it is idle with a stable programmers' model, and
    /// drops the power request.
    ///
    /// The OS lock is left clear; the software lock is restored as found.
    pub fn disable(&mut self) -> Result<(), Etm4xError> {
        let sw_locked = self.sw_unlock()?;
        self.os_unlock()?;
        let result = self.stop().map(|_| ());
        self.request_power(false);
        if sw_locked {
            self.sw_lock();
        }
        result
    }

    /// Saves what the ViewInst controls filter with: `TRCVIIECTLR` and, of the comparators the
    /// unit has (`ids`), only those it or `TRCVISSCTLR` (already in `s`) selects (two or three
    /// register reads each; none when nothing is filtered).
    fn save_filter(&mut self, s: &mut SavedState, ids: &Etm4xIds) {
        let total = TraceConfig::addr_comparators(ids);
        s.trcviiectlr = self.io.read(TRCVIIECTLR).into_raw();
        let used = selected_comparators(s.trcviiectlr, s.trcvissctlr);
        for n in 0..total {
            if used & (1 << n) == 0 {
                continue;
            }
            if let (Some(value), Some(access), Some(v), Some(a)) = (
                TRCACVR::try_at(n),
                TRCACATR::try_at(n),
                s.acvr.get_mut(n),
                s.acatr.get_mut(n),
            ) {
                *v = self.io.read64(value).into_raw();
                *a = self.io.read(access).into_raw();
                s.cmp_saved |= 1 << n;
            }
        }
        s.flags |= SAVED_FILTER_VALID;
    }

    /// Stops the trace unit at panic time and saves its state, read back from the hardware.
    ///
    /// Never fails: what could not be done is recorded in [`SavedState::outcome`], and as
    /// many registers as can safely be read are saved. The locks are restored as found.
    pub fn panic_save(&mut self, cpu: u32) -> SavedState {
        let mut s = SavedState {
            cpu,
            ..SavedState::default()
        };
        let mut ids = Etm4xIds::default();
        self.read_management(&mut ids);
        s.devarch = ids.devarch;
        s.authstatus = ids.authstatus;
        if !ids.is_etmv4() {
            s.outcome = SaveOutcome::NotEtmV4;
            return s;
        }
        if self.iface == Interface::Mmio {
            let pdsr: TRCPDSR = self.io.read(TRCPDSR);
            s.trcpdsr = pdsr.into_raw();
            if !pdsr.power() {
                s.outcome = SaveOutcome::PoweredDown;
                return s;
            }
        }
        let sw_locked = match self.sw_unlock() {
            Ok(locked) => locked,
            Err(_) => {
                s.outcome = SaveOutcome::SoftwareLocked;
                return s;
            }
        };
        s.flags |= if sw_locked { SAVED_SW_LOCK_FOUND } else { 0 };
        let oslsr: TRCOSLSR = self.io.read(TRCOSLSR);
        s.trcoslsr = oslsr.into_raw();
        let os_locked = oslsr.oslk();
        if os_locked {
            s.flags |= SAVED_OS_LOCK_FOUND;
            self.io.write_reg(TRCOSLAR::from_raw(0));
            if self.os_locked() {
                s.outcome = SaveOutcome::OsLocked;
                if sw_locked {
                    self.sw_lock();
                }
                return s;
            }
        }
        s.trcprgctlr = self.io.read(TRCPRGCTLR).into_raw();
        match self.stop() {
            Ok(statr) => s.trcstatr = statr,
            Err(Etm4xError::IdleTimeout(statr)) => {
                s.trcstatr = statr;
                s.outcome = SaveOutcome::IdleTimeout;
            }
            Err(Etm4xError::PmStableTimeout(statr)) => {
                s.trcstatr = statr;
                s.outcome = SaveOutcome::PmStableTimeout;
            }
            Err(_) => s.outcome = SaveOutcome::IdleTimeout,
        }
        s.trcconfigr = self.io.read(TRCCONFIGR).into_raw();
        s.trctraceidr = self.io.read(TRCTRACEIDR).into_raw();
        self.read_idrs(&mut s.idr);
        s.flags |= SAVED_REGS_VALID;
        // After the stop, `SSSTATUS` says whether a stop point had stopped the trace.
        s.trcvictlr = self.io.read(TRCVICTLR).into_raw();
        s.trcvissctlr = self.io.read(TRCVISSCTLR).into_raw();
        s.flags |= SAVED_VIEWINST_VALID;
        ids.idr = s.idr;
        self.save_filter(&mut s, &ids);
        if os_locked {
            self.os_lock();
            if self.os_locked() {
                s.flags |= SAVED_OS_LOCK_RESTORED;
            }
        }
        if sw_locked {
            self.sw_lock();
        }
        s
    }
}

/// The single address comparators the ViewInst controls select, one bit each: the pairs
/// `TRCVIIECTLR` includes or excludes, and the start and stop points of `TRCVISSCTLR`.
fn selected_comparators(viiectlr: u32, vissctlr: u32) -> u32 {
    // Each include or exclude bit selects a comparator pair.
    let pairs = (viiectlr | (viiectlr >> 16)) & 0xFF;
    let mut used = (vissctlr | (vissctlr >> 16)) & 0xFFFF;
    for p in 0..8 {
        if pairs & (1 << p) != 0 {
            used |= 0b11 << (2 * p);
        }
    }
    used
}

impl TraceConfig {
    /// The record of this configuration as the unit of `cpu` (identified by `ids`) is programmed
    /// with it, for a dump that no panic-time step completes: the registers a decoder needs
    /// (`TRCCONFIGR`, `TRCTRACEIDR`, the ID registers, the ViewInst controls and comparators),
    /// flagged [`SAVED_PROGRAMMED`] and with `session` (a `SAVED_SESSION_*` bit).
    pub fn recorded_state(&self, ids: &Etm4xIds, cpu: u32, session: u32) -> SavedState {
        let mut s = SavedState {
            cpu,
            flags: SAVED_REGS_VALID
                | SAVED_VIEWINST_VALID
                | SAVED_FILTER_VALID
                | SAVED_PROGRAMMED
                | session,
            trcconfigr: self.configr,
            trctraceidr: self.traceidr,
            authstatus: ids.authstatus,
            devarch: ids.devarch,
            trcprgctlr: 1,
            idr: ids.idr,
            trcvictlr: self.victlr,
            trcvissctlr: self.vissctlr,
            trcviiectlr: self.viiectlr,
            ..SavedState::default()
        };
        let used = selected_comparators(self.viiectlr, self.vissctlr);
        let programmed = self.comparators.iter().zip(self.acatr_levels.iter());
        for (n, (addr, levels)) in programmed.enumerate().take(self.nr_comparators) {
            if used & (1 << n) == 0 {
                continue;
            }
            if let (Some(v), Some(a)) = (s.acvr.get_mut(n), s.acatr.get_mut(n)) {
                *v = *addr;
                *a = self.acatr | levels;
                s.cmp_saved |= 1 << n;
            }
        }
        s
    }
}

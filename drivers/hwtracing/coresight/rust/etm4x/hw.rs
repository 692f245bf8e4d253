// SPDX-License-Identifier: GPL-2.0

//! ETMv4 trace unit: register map, OS lock handling, enable/disable and the panic-time save.
//!
//! Written from the ETMv4 architecture (Arm IHI 0064) and checked against what the Linux C
//! driver (`coresight-etm4x-core.c`) does. Everything here is plain `core` Rust over
//! [`CsAccess`], so the same code runs in the kernel driver (MMIO or system registers) and in
//! the host tests against the register-level model.
//!
//! Every poll is bounded by [`Timeout`]; nothing allocates; no function can panic on any value
//! read from the hardware.

use crate::access::poll32;
use crate::access::CsAccess;
use crate::access::CS_AUTHSTATUS;
use crate::access::CS_DEVARCH;
use crate::access::CS_DEVTYPE;
use crate::access::CS_LAR;
use crate::access::CS_LSR;
use crate::access::CS_UNLOCK_KEY;

/// Programming Control Register offset (bit 0 `EN` enables the trace unit).
pub const TRCPRGCTLR: u32 = 0x004;
/// Trace Status Register offset.
pub const TRCSTATR: u32 = 0x00C;
/// Trace Configuration Register offset.
pub const TRCCONFIGR: u32 = 0x010;
/// Auxiliary Control Register offset.
pub const TRCAUXCTLR: u32 = 0x018;
/// Event Control 0 Register offset.
pub const TRCEVENTCTL0R: u32 = 0x020;
/// Event Control 1 Register offset.
pub const TRCEVENTCTL1R: u32 = 0x024;
/// Stall Control Register offset.
pub const TRCSTALLCTLR: u32 = 0x02C;
/// Global Timestamp Control Register offset.
pub const TRCTSCTLR: u32 = 0x030;
/// Synchronization Period Register offset.
pub const TRCSYNCPR: u32 = 0x034;
/// Cycle Count Control Register offset.
pub const TRCCCCTLR: u32 = 0x038;
/// Branch Broadcast Control Register offset.
pub const TRCBBCTLR: u32 = 0x03C;
/// Trace ID Register offset.
pub const TRCTRACEIDR: u32 = 0x040;
/// ViewInst Main Control Register offset.
pub const TRCVICTLR: u32 = 0x080;
/// ViewInst Include/Exclude Control Register offset.
pub const TRCVIIECTLR: u32 = 0x084;
/// ViewInst Start/Stop Control Register offset.
pub const TRCVISSCTLR: u32 = 0x088;
/// ID Register 8 offset (maximum speculation depth).
pub const TRCIDR8: u32 = 0x180;
/// ID Register 0 offset; `TRCIDR1..=TRCIDR7` follow at 4-byte steps.
pub const TRCIDR0: u32 = 0x1E0;
/// OS Lock Access Register offset (write 1 to lock, 0 to unlock).
pub const TRCOSLAR: u32 = 0x300;
/// OS Lock Status Register offset.
pub const TRCOSLSR: u32 = 0x304;
/// Power Down Control Register offset (memory-mapped interface only).
pub const TRCPDCR: u32 = 0x310;
/// Power Down Status Register offset (memory-mapped interface only).
pub const TRCPDSR: u32 = 0x314;
/// Software Lock Access Register offset (memory-mapped interface only).
pub const TRCLAR: u32 = CS_LAR;
/// Software Lock Status Register offset (memory-mapped interface only).
pub const TRCLSR: u32 = CS_LSR;
/// Authentication Status Register offset.
pub const TRCAUTHSTATUS: u32 = CS_AUTHSTATUS;
/// Device Architecture Register offset.
pub const TRCDEVARCH: u32 = CS_DEVARCH;
/// Device Type Register offset (memory-mapped interface only).
pub const TRCDEVTYPE: u32 = CS_DEVTYPE;

/// Number of ID registers `TRCIDR0..=TRCIDR13`.
pub const NR_IDR: usize = 14;

/// Returns the offset of `TRCIDR<n>` for `n` in `0..=13`, or `None` for any other `n`.
pub const fn trcidr_offset(n: usize) -> Option<u32> {
    match n {
        // CAST: `n` is at most 13 in both arms.
        0..=7 => Some(TRCIDR0 + 4 * n as u32),
        8..=13 => Some(TRCIDR8 + 4 * (n as u32 - 8)),
        _ => None,
    }
}

/// `TRCPRGCTLR.EN`: the trace unit is enabled.
pub const TRCPRGCTLR_EN: u32 = 1 << 0;
/// `TRCSTATR.IDLE`: the trace unit is idle.
pub const TRCSTATR_IDLE: u32 = 1 << 0;
/// `TRCSTATR.PMSTABLE`: the programmers' model is stable.
pub const TRCSTATR_PMSTABLE: u32 = 1 << 1;

/// `TRCCONFIGR` bit 0 (reserved, reads as one on ETMv4.0 parts).
pub const TRCCONFIGR_RES1: u32 = 1 << 0;
/// `TRCCONFIGR.BB`: branch broadcast.
pub const TRCCONFIGR_BB: u32 = 1 << 3;
/// `TRCCONFIGR.CCI`: cycle counting in the instruction trace.
pub const TRCCONFIGR_CCI: u32 = 1 << 4;
/// `TRCCONFIGR.CID`: context ID tracing.
pub const TRCCONFIGR_CID: u32 = 1 << 6;
/// `TRCCONFIGR.VMID`: virtual machine ID tracing.
pub const TRCCONFIGR_VMID: u32 = 1 << 7;
/// `TRCCONFIGR.COND`: conditional instruction tracing (bits 10:8).
pub const TRCCONFIGR_COND_MASK: u32 = 0x7 << 8;
/// `TRCCONFIGR.TS`: global timestamps.
pub const TRCCONFIGR_TS: u32 = 1 << 11;
/// `TRCCONFIGR.RS`: return stack.
pub const TRCCONFIGR_RS: u32 = 1 << 12;
/// `TRCCONFIGR.VMIDOPT`: trace CONTEXTIDR_EL2 instead of VTTBR_EL2.VMID.
pub const TRCCONFIGR_VMIDOPT: u32 = 1 << 15;

/// `TRCVICTLR.EVENT` field (bits 7:0); resource 1 is always true.
pub const TRCVICTLR_EVENT_MASK: u32 = 0xFF;
/// `TRCVICTLR.EVENT` value selecting the always-true resource.
pub const TRCVICTLR_EVENT_ALWAYS: u32 = 0x01;
/// `TRCVICTLR.SSSTATUS`: the start/stop logic is in the started state.
pub const TRCVICTLR_SSSTATUS: u32 = 1 << 9;
/// `TRCVICTLR.EXLEVEL_S`: Secure exception levels excluded from tracing (bits 19:16).
pub const TRCVICTLR_EXLEVEL_S_MASK: u32 = 0xF << 16;
/// `TRCVICTLR.EXLEVEL_NS`: Non-secure exception levels excluded from tracing (bits 22:20).
pub const TRCVICTLR_EXLEVEL_NS_MASK: u32 = 0x7 << 20;

/// `TRCIDR3.EXLEVEL_S`: Secure exception levels that the unit can trace (bits 19:16).
pub const TRCIDR3_EXLEVEL_S_MASK: u32 = 0xF << 16;
/// `TRCIDR0.TSSIZE` field (bits 28:24): 0 when global timestamps are not implemented.
pub const TRCIDR0_TSSIZE_MASK: u32 = 0x1F << 24;
/// `TRCIDR2.CIDSIZE` field (bits 9:5): 0 when context ID tracing is not implemented.
pub const TRCIDR2_CIDSIZE_MASK: u32 = 0x1F << 5;

/// `TRCOSLSR.OSLK`: the OS lock is locked.
pub const TRCOSLSR_OSLK: u32 = 1 << 1;
/// `TRCOSLAR.OSLK`: written as one to lock, zero to unlock.
pub const TRCOSLAR_OSLK: u32 = 1 << 0;
/// `TRCPDCR.PU`: request the trace unit power domain to stay up.
pub const TRCPDCR_PU: u32 = 1 << 3;
/// `TRCPDSR.POWER`: the trace unit power domain is up.
pub const TRCPDSR_POWER: u32 = 1 << 0;
/// `TRCPDSR.STICKYPD`: power was lost since the register was last read.
pub const TRCPDSR_STICKYPD: u32 = 1 << 1;
/// `TRCPDSR.OSLK`: OS lock status mirror.
pub const TRCPDSR_OSLK: u32 = 1 << 5;
/// `LSR.SLI`: the software lock is implemented.
pub const LSR_SLI: u32 = 1 << 0;
/// `LSR.SLK`: the software lock is locked.
pub const LSR_SLK: u32 = 1 << 1;

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
        let mut configr = TRCCONFIGR_RES1;
        if ids.idr(2) & TRCIDR2_CIDSIZE_MASK != 0 {
            configr |= TRCCONFIGR_CID;
        }
        if timestamps && ids.idr(0) & TRCIDR0_TSSIZE_MASK != 0 {
            configr |= TRCCONFIGR_TS;
        }
        let exclude_secure = ids.idr(3) & TRCIDR3_EXLEVEL_S_MASK;
        Ok(Self {
            configr,
            eventctl0r: 0,
            eventctl1r: 0,
            stallctlr: 0,
            tsctlr: 0,
            syncpr: 0xC,
            ccctlr: 0,
            bbctlr: 0,
            traceidr: u32::from(trace_id),
            victlr: TRCVICTLR_EVENT_ALWAYS | TRCVICTLR_SSSTATUS | exclude_secure,
            viiectlr: 0,
            vissctlr: 0,
        })
    }

    /// Returns the `(offset, value)` pairs in programming order.
    pub fn registers(&self) -> [(u32, u32); 12] {
        [
            (TRCCONFIGR, self.configr),
            (TRCEVENTCTL0R, self.eventctl0r),
            (TRCEVENTCTL1R, self.eventctl1r),
            (TRCSTALLCTLR, self.stallctlr),
            (TRCTSCTLR, self.tsctlr),
            (TRCSYNCPR, self.syncpr),
            (TRCCCCTLR, self.ccctlr),
            (TRCBBCTLR, self.bbctlr),
            (TRCTRACEIDR, self.traceidr),
            (TRCVICTLR, self.victlr),
            (TRCVIIECTLR, self.viiectlr),
            (TRCVISSCTLR, self.vissctlr),
        ]
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

/// One ETMv4 trace unit reached through `A`.
pub struct Etm4x<'a, A: CsAccess + ?Sized> {
    io: &'a mut A,
    iface: Interface,
    timeout: Timeout,
}

impl<'a, A: CsAccess + ?Sized> Etm4x<'a, A> {
    /// Wraps the register access `io` of a trace unit reached through `iface`.
    pub fn new(io: &'a mut A, iface: Interface, timeout: Timeout) -> Self {
        Self { io, iface, timeout }
    }

    /// Returns the underlying register access.
    pub fn io(&mut self) -> &mut A {
        self.io
    }

    /// Returns `true` when the software lock is implemented and set.
    pub fn sw_locked(&mut self) -> bool {
        if self.iface != Interface::Mmio {
            return false;
        }
        let lsr = self.io.read32(TRCLSR);
        lsr & LSR_SLI != 0 && lsr & LSR_SLK != 0
    }

    /// Clears the software lock if it is set; returns whether it was set.
    pub fn sw_unlock(&mut self) -> Result<bool, Etm4xError> {
        if !self.sw_locked() {
            return Ok(false);
        }
        self.io.write32(TRCLAR, CS_UNLOCK_KEY);
        if self.sw_locked() {
            return Err(Etm4xError::SoftwareLocked);
        }
        Ok(true)
    }

    /// Sets the software lock (memory-mapped interface only).
    pub fn sw_lock(&mut self) {
        if self.iface == Interface::Mmio {
            self.io.write32(TRCLAR, 0);
        }
    }

    /// Returns `true` when the OS lock is set.
    pub fn os_locked(&mut self) -> bool {
        self.io.read32(TRCOSLSR) & TRCOSLSR_OSLK != 0
    }

    /// Clears the OS lock if it is set; returns whether it was set.
    pub fn os_unlock(&mut self) -> Result<bool, Etm4xError> {
        if !self.os_locked() {
            return Ok(false);
        }
        self.io.write32(TRCOSLAR, 0);
        if self.os_locked() {
            return Err(Etm4xError::OsLocked);
        }
        Ok(true)
    }

    /// Sets the OS lock.
    pub fn os_lock(&mut self) {
        self.io.write32(TRCOSLAR, TRCOSLAR_OSLK);
    }

    /// Clears both locks and reports what was found, so that [`Self::restore_locks`] can put
    /// them back.
    ///
    /// On error, whatever was already unlocked has been restored.
    pub fn unlock(&mut self) -> Result<FoundLocks, Etm4xError> {
        let sw_locked = self.sw_unlock()?;
        match self.os_unlock() {
            Ok(os_locked) => Ok(FoundLocks {
                os_locked,
                sw_locked,
            }),
            Err(e) => {
                if sw_locked {
                    self.sw_lock();
                }
                Err(e)
            }
        }
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
            Interface::Mmio => self.io.read32(TRCPDSR) & TRCPDSR_POWER != 0,
            Interface::SysReg => true,
        }
    }

    /// Reads the management registers, which are readable whatever the OS lock state.
    fn read_management(&mut self, ids: &mut Etm4xIds) {
        ids.devarch = self.io.read32(TRCDEVARCH);
        ids.authstatus = self.io.read32(TRCAUTHSTATUS);
        ids.devtype = match self.iface {
            Interface::Mmio => self.io.read32(TRCDEVTYPE),
            Interface::SysReg => 0,
        };
    }

    /// Reads `TRCIDR0..=TRCIDR13`; the caller has the OS lock clear.
    fn read_idrs(&mut self, idr: &mut [u32; NR_IDR]) {
        for (n, slot) in idr.iter_mut().enumerate() {
            if let Some(off) = trcidr_offset(n) {
                *slot = self.io.read32(off);
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

    /// Polls `TRCSTATR` until `bit` reads as `set`.
    fn wait_status(&mut self, bit: u32, set: bool) -> Result<u32, u32> {
        let want = if set { bit } else { 0 };
        poll32(
            self.io,
            TRCSTATR,
            bit,
            want,
            self.timeout.tries,
            self.timeout.delay_us,
        )
    }

    /// Stops trace generation: clears `TRCPRGCTLR.EN`, waits for `IDLE`, then `PMSTABLE`.
    ///
    /// The caller has both locks clear. Returns the last `TRCSTATR` read.
    pub fn stop(&mut self) -> Result<u32, Etm4xError> {
        self.io.write32(TRCPRGCTLR, 0);
        self.wait_status(TRCSTATR_IDLE, true)
            .map_err(Etm4xError::IdleTimeout)?;
        self.wait_status(TRCSTATR_PMSTABLE, true)
            .map_err(Etm4xError::PmStableTimeout)
    }

    /// Programs `cfg` and enables the trace unit.
    ///
    /// Follows the C driver: unlock, request power (`TRCPDCR.PU`), disable and wait for idle,
    /// program, set `EN`, wait for `IDLE` to clear, then set the software lock again. The OS lock
    /// is left clear (a traced CPU needs it clear); it was found set if the returned
    /// [`FoundLocks`] says so.
    pub fn enable(&mut self, cfg: &TraceConfig) -> Result<FoundLocks, Etm4xError> {
        if !(u32::from(TRACE_ID_MIN)..=u32::from(TRACE_ID_MAX)).contains(&cfg.traceidr) {
            // CAST: the value is reported truncated; it is out of range either way.
            return Err(Etm4xError::InvalidTraceId(cfg.traceidr as u8));
        }
        if !self.powered() {
            return Err(Etm4xError::PoweredDown);
        }
        let found = self.unlock()?;
        let result = self.program_and_start(cfg);
        if found.sw_locked {
            self.sw_lock();
        }
        result.map(|()| found)
    }

    /// Sets or clears `TRCPDCR.PU` on a memory-mapped unit: while set, the trace unit's power
    /// domain stays up even if its CPU powers down (what the C driver does while tracing).
    fn request_power(&mut self, on: bool) {
        if self.iface == Interface::Mmio {
            let v = self.io.read32(TRCPDCR);
            let v = if on { v | TRCPDCR_PU } else { v & !TRCPDCR_PU };
            self.io.write32(TRCPDCR, v);
        }
    }

    fn program_and_start(&mut self, cfg: &TraceConfig) -> Result<(), Etm4xError> {
        self.request_power(true);
        self.io.write32(TRCPRGCTLR, 0);
        self.wait_status(TRCSTATR_IDLE, true)
            .map_err(Etm4xError::IdleTimeout)?;
        for (off, value) in cfg.registers() {
            self.io.write32(off, value);
        }
        self.io.write32(TRCPRGCTLR, TRCPRGCTLR_EN);
        self.wait_status(TRCSTATR_IDLE, false)
            .map_err(Etm4xError::IdleTimeout)?;
        Ok(())
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
            s.trcpdsr = self.io.read32(TRCPDSR);
            if s.trcpdsr & TRCPDSR_POWER == 0 {
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
        s.trcoslsr = self.io.read32(TRCOSLSR);
        let os_locked = s.trcoslsr & TRCOSLSR_OSLK != 0;
        if os_locked {
            s.flags |= SAVED_OS_LOCK_FOUND;
            self.io.write32(TRCOSLAR, 0);
            if self.os_locked() {
                s.outcome = SaveOutcome::OsLocked;
                if sw_locked {
                    self.sw_lock();
                }
                return s;
            }
        }
        s.trcprgctlr = self.io.read32(TRCPRGCTLR);
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
        s.trcconfigr = self.io.read32(TRCCONFIGR);
        s.trctraceidr = self.io.read32(TRCTRACEIDR);
        self.read_idrs(&mut s.idr);
        s.flags |= SAVED_REGS_VALID;
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

/// What the panic-time save achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum SaveOutcome {
    /// The trace unit was stopped and every register saved.
    #[default]
    Ok = 0,
    /// `TRCSTATR.IDLE` never set after clearing `EN`; registers saved anyway.
    IdleTimeout = 1,
    /// `TRCSTATR.PMSTABLE` never set; registers saved anyway.
    PmStableTimeout = 2,
    /// The OS lock was set and could not be cleared; trace registers not read.
    OsLocked = 3,
    /// The trace unit power domain was down (`TRCPDSR.POWER` clear); nothing read.
    PoweredDown = 4,
    /// `TRCDEVARCH` did not identify an ETMv4; nothing else read.
    NotEtmV4 = 5,
    /// The software lock could not be cleared; nothing else read.
    SoftwareLocked = 6,
    /// A system-register trace unit of another CPU: only its own CPU can reach it, and that CPU
    /// was stopped by the panic; nothing read.
    Unreachable = 7,
    /// A CPU stopped by the panic was in the middle of a register sequence on the unit; not
    /// touched.
    Busy = 8,
}

impl SaveOutcome {
    /// Returns a short lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::IdleTimeout => "idle-timeout",
            Self::PmStableTimeout => "pmstable-timeout",
            Self::OsLocked => "os-locked",
            Self::PoweredDown => "powered-down",
            Self::NotEtmV4 => "not-etmv4",
            Self::SoftwareLocked => "software-locked",
            Self::Unreachable => "unreachable",
            Self::Busy => "busy",
        }
    }

    /// Converts the value stored in a record.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::IdleTimeout,
            2 => Self::PmStableTimeout,
            3 => Self::OsLocked,
            4 => Self::PoweredDown,
            5 => Self::NotEtmV4,
            6 => Self::SoftwareLocked,
            7 => Self::Unreachable,
            8 => Self::Busy,
            _ => return None,
        })
    }
}

/// [`SavedState::flags`] bit: `TRCCONFIGR`, `TRCTRACEIDR` and `TRCIDR*` were read.
pub const SAVED_REGS_VALID: u32 = 1 << 0;
/// [`SavedState::flags`] bit: the OS lock was set on entry.
pub const SAVED_OS_LOCK_FOUND: u32 = 1 << 1;
/// [`SavedState::flags`] bit: the OS lock was set again and reads back as set.
pub const SAVED_OS_LOCK_RESTORED: u32 = 1 << 2;
/// [`SavedState::flags`] bit: the software lock was set on entry.
pub const SAVED_SW_LOCK_FOUND: u32 = 1 << 3;

/// Version of the [`SavedState`] payload layout.
pub const SAVED_STATE_VERSION: u32 = 1;

/// Size in bytes of an encoded [`SavedState`].
pub const SAVED_STATE_SIZE: usize = 104;

// Payload layout, little-endian u32 words at these byte offsets.
const OFF_VERSION: usize = 0;
const OFF_CPU: usize = 4;
const OFF_OUTCOME: usize = 8;
const OFF_FLAGS: usize = 12;
const OFF_CONFIGR: usize = 16;
const OFF_TRACEIDR: usize = 20;
const OFF_AUTHSTATUS: usize = 24;
const OFF_DEVARCH: usize = 28;
const OFF_PRGCTLR: usize = 32;
const OFF_STATR: usize = 36;
const OFF_OSLSR: usize = 40;
const OFF_PDSR: usize = 44;
const OFF_IDR: usize = 48;

// The ID registers end the payload.
const _: () = assert!(OFF_IDR + 4 * NR_IDR == SAVED_STATE_SIZE);

/// The state of one trace unit saved at panic time: the payload of a source record.
///
/// Encoded as [`SAVED_STATE_SIZE`] bytes of little-endian 32-bit words: version, cpu,
/// outcome, flags, `TRCCONFIGR`, `TRCTRACEIDR`, `TRCAUTHSTATUS`, `TRCDEVARCH`,
/// `TRCPRGCTLR` (as found), `TRCSTATR` (after stopping), `TRCOSLSR` (as found), `TRCPDSR`,
/// then `TRCIDR0..=TRCIDR13`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SavedState {
    /// The CPU the trace unit belongs to.
    pub cpu: u32,
    /// What the save achieved.
    pub outcome: SaveOutcome,
    /// `SAVED_*` flag bits.
    pub flags: u32,
    /// `TRCCONFIGR`.
    pub trcconfigr: u32,
    /// `TRCTRACEIDR`.
    pub trctraceidr: u32,
    /// `TRCAUTHSTATUS`.
    pub authstatus: u32,
    /// `TRCDEVARCH`.
    pub devarch: u32,
    /// `TRCPRGCTLR` as found (bit 0 set: the unit was tracing).
    pub trcprgctlr: u32,
    /// `TRCSTATR` after stopping.
    pub trcstatr: u32,
    /// `TRCOSLSR` as found.
    pub trcoslsr: u32,
    /// `TRCPDSR` (zero through system registers).
    pub trcpdsr: u32,
    /// `TRCIDR0..=TRCIDR13`.
    pub idr: [u32; NR_IDR],
}

/// Why a [`SavedState`] could not be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// The buffer holds fewer than [`SAVED_STATE_SIZE`] bytes.
    TooShort(usize),
    /// The version word is not one this code knows.
    Version(u32),
    /// The outcome word is not a known [`SaveOutcome`].
    Outcome(u32),
}

fn put_u32(out: &mut [u8], off: usize, v: u32) {
    if let Some(dst) = off.checked_add(4).and_then(|end| out.get_mut(off..end)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

fn get_u32(buf: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(src) = off.checked_add(4).and_then(|end| buf.get(off..end)) {
        w.copy_from_slice(src);
    }
    u32::from_le_bytes(w)
}

impl SavedState {
    /// Returns `true` when the configuration and ID registers were read from the unit.
    pub fn regs_valid(&self) -> bool {
        self.flags & SAVED_REGS_VALID != 0
    }

    /// Encodes the payload into the start of `out`; returns the number of bytes written.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, PayloadError> {
        if out.len() < SAVED_STATE_SIZE {
            return Err(PayloadError::TooShort(out.len()));
        }
        put_u32(out, OFF_VERSION, SAVED_STATE_VERSION);
        put_u32(out, OFF_CPU, self.cpu);
        put_u32(out, OFF_OUTCOME, self.outcome as u32);
        put_u32(out, OFF_FLAGS, self.flags);
        put_u32(out, OFF_CONFIGR, self.trcconfigr);
        put_u32(out, OFF_TRACEIDR, self.trctraceidr);
        put_u32(out, OFF_AUTHSTATUS, self.authstatus);
        put_u32(out, OFF_DEVARCH, self.devarch);
        put_u32(out, OFF_PRGCTLR, self.trcprgctlr);
        put_u32(out, OFF_STATR, self.trcstatr);
        put_u32(out, OFF_OSLSR, self.trcoslsr);
        put_u32(out, OFF_PDSR, self.trcpdsr);
        for (i, v) in self.idr.iter().enumerate() {
            put_u32(out, OFF_IDR + 4 * i, *v);
        }
        Ok(SAVED_STATE_SIZE)
    }

    /// Decodes a payload written by [`Self::encode`]; trailing bytes are ignored.
    pub fn decode(buf: &[u8]) -> Result<Self, PayloadError> {
        if buf.len() < SAVED_STATE_SIZE {
            return Err(PayloadError::TooShort(buf.len()));
        }
        let version = get_u32(buf, OFF_VERSION);
        if version != SAVED_STATE_VERSION {
            return Err(PayloadError::Version(version));
        }
        let raw_outcome = get_u32(buf, OFF_OUTCOME);
        let outcome =
            SaveOutcome::from_u32(raw_outcome).ok_or(PayloadError::Outcome(raw_outcome))?;
        let mut idr = [0u32; NR_IDR];
        for (i, v) in idr.iter_mut().enumerate() {
            *v = get_u32(buf, OFF_IDR + 4 * i);
        }
        Ok(Self {
            cpu: get_u32(buf, OFF_CPU),
            outcome,
            flags: get_u32(buf, OFF_FLAGS),
            trcconfigr: get_u32(buf, OFF_CONFIGR),
            trctraceidr: get_u32(buf, OFF_TRACEIDR),
            authstatus: get_u32(buf, OFF_AUTHSTATUS),
            devarch: get_u32(buf, OFF_DEVARCH),
            trcprgctlr: get_u32(buf, OFF_PRGCTLR),
            trcstatr: get_u32(buf, OFF_STATR),
            trcoslsr: get_u32(buf, OFF_OSLSR),
            trcpdsr: get_u32(buf, OFF_PDSR),
            idr,
        })
    }

    /// Returns perf's `cs_etm` ETMv4 per-CPU metadata block for this trace unit.
    ///
    /// The layout is `tools/perf/util/cs-etm.h`: magic, cpu, number of parameters, then
    /// `TRCCONFIGR`, `TRCTRACEIDR`, `TRCIDR0`, `TRCIDR1`, `TRCIDR2`, `TRCIDR8`,
    /// `TRCAUTHSTATUS` and `TS_SOURCE` (`-1` when unknown, stored as two's complement).
    pub fn perf_metadata(&self, ts_source: i64) -> [u64; PERF_ETMV4_BLOCK_LEN] {
        [
            PERF_ETMV4_MAGIC,
            u64::from(self.cpu),
            PERF_ETMV4_NR_PARAMS,
            u64::from(self.trcconfigr),
            u64::from(self.trctraceidr),
            u64::from(self.idr[0]),
            u64::from(self.idr[1]),
            u64::from(self.idr[2]),
            u64::from(self.idr[8]),
            u64::from(self.authstatus),
            // CAST: perf stores the signed value in a u64 slot.
            ts_source as u64,
        ]
    }
}

/// Magic value that opens an ETMv4 block in perf's `cs_etm` auxtrace info.
pub const PERF_ETMV4_MAGIC: u64 = 0x4040_4040_4040_4040;
/// Number of trace parameters in perf's ETMv4 block (`CS_ETMV4_PRIV_MAX - CS_ETMV4_TRCCONFIGR`).
pub const PERF_ETMV4_NR_PARAMS: u64 = 8;
/// Number of `u64` values in perf's ETMv4 per-CPU block (3 common + 8 parameters).
pub const PERF_ETMV4_BLOCK_LEN: usize = 11;

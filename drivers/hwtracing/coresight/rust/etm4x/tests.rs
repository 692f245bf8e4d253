// SPDX-License-Identifier: GPL-2.0

//! The ETMv4 enable and panic save (`etm4x/hw.rs`) in the kernel, against a scripted trace unit.
//!
//! The register-level model of the host crates (`crates/cspd-model`) runs these sequences in
//! the host tests; here a [`ScriptedEtm`] answers with what the test sets, so that the
//! sequences, their locks and the saved state are checked as the kernel compiles them.

use kernel::{
    coresight::{
        access::{
            offset_of,
            RawFrame,
            CS_UNLOCK_KEY,
            LAR,
            LSR, //
        },
        component::Backend, //
    },
    prelude::*,
};

use crate::{
    hw::trcidr_offset,
    regs::{
        TRCOSLAR,
        TRCOSLSR,
        TRCPDSR,
        TRCPRGCTLR,
        TRCSTATR, //
    },
};

/// `TRCIDR0`..`TRCIDR13` of a Cortex-A53's ETM: 64-bit timestamps, return stack, cycle
/// counting, conditional and branch broadcast; Arm ETMv4.0; 64-bit addresses, 32-bit context
/// IDs; Non-secure EL0-EL2; four address comparator pairs; 7-bit trace IDs.
const A53_IDR: [u32; 14] = [
    0x2800_0EA1,
    0x4100_F403,
    0x0000_0488,
    0x0D7B_0004,
    0x1117_0004,
    0x28C7_0004,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
];

/// `TRCDEVARCH` of an ETMv4 (Arm, present, revision 4, architecture 0x4A13).
const DEVARCH_ETMV4: u32 = 0x4770_4A13;

/// A trace unit whose registers read back what the test set or the driver wrote, with the
/// identification of a Cortex-A53's ETM, except for: `TRCSTATR`, idle and stable exactly while
/// `TRCPRGCTLR.EN` is clear; `TRCOSLSR` and `TRCPDSR`, which show the OS lock as the last
/// `TRCOSLAR` write left it (unless it is stuck) and the power domain up; `LSR`, the software
/// lock of the memory-mapped interface as the last `LAR` write left it. Writes the hardware
/// would drop are dropped and counted: any but `LAR` while the software lock is set, a trace
/// register while the OS lock is set or while the unit is enabled.
struct ScriptedEtm {
    /// The frame's registers, by offset / 4.
    regs: KVec<u32>,
    /// Reads per register, by offset / 4.
    reads: KVec<u32>,
    /// The unit is memory-mapped (else reached through system registers: no software lock).
    mmio: bool,
    /// The software lock is set.
    sw_locked: bool,
    /// The OS lock is set.
    os_locked: bool,
    /// A write of 0 to `TRCOSLAR` leaves the OS lock set.
    os_lock_stuck: bool,
    /// Writes dropped because a lock was set.
    locked_writes: u32,
    /// Writes to trace registers dropped because the unit was enabled.
    busy_writes: u32,
}

impl ScriptedEtm {
    /// A locked, idle Cortex-A53 ETM, memory-mapped or not.
    fn new(mmio: bool) -> Result<KBox<Self>> {
        let mut t = KBox::new(
            Self {
                regs: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
                reads: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
                mmio,
                sw_locked: mmio,
                os_locked: false,
                os_lock_stuck: false,
                locked_writes: 0,
                busy_writes: 0,
            },
            GFP_KERNEL,
        )?;
        for (n, v) in A53_IDR.iter().enumerate() {
            if let Some(off) = trcidr_offset(n) {
                t.set_at(off, *v);
            }
        }
        t.set_at(0xFB8, 0xCC);
        t.set_at(0xFBC, DEVARCH_ETMV4);
        t.set_at(0xFCC, 0x13);
        Ok(t)
    }

    /// Sets the register at `offset` to `v`.
    fn set_at(&mut self, offset: u32, v: u32) {
        // CAST: an offset in the frame.
        if let Some(r) = self.regs.get_mut(offset as usize / 4) {
            *r = v;
        }
    }

    /// Returns the value of the register at `offset`.
    fn get_at(&self, offset: u32) -> u32 {
        // CAST: an offset in the frame.
        self.regs.get(offset as usize / 4).copied().unwrap_or(0)
    }

    /// Returns how many times the register at `offset` was read.
    fn reads_at(&self, offset: u32) -> u32 {
        // CAST: an offset in the frame.
        self.reads.get(offset as usize / 4).copied().unwrap_or(0)
    }

    /// Returns whether `TRCPRGCTLR.EN` is set.
    fn enabled(&self) -> bool {
        self.get_at(offset_of::<TRCPRGCTLR>()) & 1 != 0
    }

    /// Returns the identification registers the unit shows.
    fn idr(&self) -> [u32; 14] {
        A53_IDR
    }
}

impl RawFrame for ScriptedEtm {
    fn read32(&mut self, offset: u32) -> u32 {
        // CAST: an offset in the frame.
        if let Some(c) = self.reads.get_mut(offset as usize / 4) {
            *c += 1;
        }
        if offset == offset_of::<TRCSTATR>() {
            let idle = !self.enabled();
            return TRCSTATR::from_raw(0)
                .with_idle(idle)
                .with_pmstable(true)
                .into_raw();
        }
        if offset == offset_of::<TRCOSLSR>() {
            // OSLM: the OS lock is implemented.
            return (1 << 3) | TRCOSLSR::from_raw(0).with_oslk(self.os_locked).into_raw();
        }
        if offset == offset_of::<TRCPDSR>() {
            return TRCPDSR::from_raw(0)
                .with_power(true)
                .with_oslk(self.os_locked)
                .into_raw();
        }
        if offset == offset_of::<LSR>() {
            return if self.mmio {
                LSR::from_raw(0)
                    .with_sli(true)
                    .with_slk(self.sw_locked)
                    .into_raw()
            } else {
                0
            };
        }
        self.get_at(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        if offset == offset_of::<LAR>() {
            self.sw_locked = self.mmio && value != CS_UNLOCK_KEY;
            return;
        }
        if self.sw_locked {
            self.locked_writes += 1;
            return;
        }
        if offset == offset_of::<TRCOSLAR>() {
            let lock = TRCOSLAR::from_raw(value).oslk();
            if lock || !self.os_lock_stuck {
                self.os_locked = lock;
            }
            return;
        }
        // The trace registers: programming, filters, comparators.
        let trace_reg = offset != offset_of::<TRCPRGCTLR>() && offset < 0x300;
        if trace_reg && self.os_locked {
            self.locked_writes += 1;
            return;
        }
        if trace_reg && self.enabled() {
            self.busy_writes += 1;
            return;
        }
        self.set_at(offset, value);
    }

    fn delay_us(&mut self, _us: u32) {}
}

/// A scripted unit as the driver's register backend, reached from any CPU.
struct ScriptedBackend(KBox<ScriptedEtm>);

impl Backend for ScriptedBackend {
    type Io = ScriptedEtm;

    fn with_io<R>(&mut self, f: impl FnOnce(&mut Self::Io) -> R) -> Result<R> {
        Ok(f(&mut self.0))
    }
}

#[kunit_tests(coresight_etm4x_hw)]
mod kunit {
    use super::ScriptedEtm;
    use crate::hw::{
        Etm4x,
        Interface,
        Timeout,
        TraceConfig, //
    };
    use crate::regs::{
        TRCBBCTLR,
        TRCCCCTLR,
        TRCCONFIGR,
        TRCEVENTCTL0R,
        TRCEVENTCTL1R,
        TRCPRGCTLR,
        TRCSTALLCTLR,
        TRCSYNCPR,
        TRCTRACEIDR,
        TRCTSCTLR,
        TRCVICTLR,
        TRCVIIECTLR,
        TRCVISSCTLR, //
    };
    use kernel::coresight::panic_dump::format::etm4x::{
        PayloadError,
        SaveOutcome,
        SavedState,
        SAVED_OS_LOCK_FOUND,
        SAVED_OS_LOCK_RESTORED,
        SAVED_STATE_SIZE, //
    };
    use kernel::prelude::*;

    use kernel::coresight::access::{
        offset_of,
        CsAccess, //
    };

    const T: Timeout = Timeout {
        tries: 50,
        delay_us: 1,
    };

    /// Trace ID the tests program.
    const TRACE_ID: u8 = 0x12;

    /// `TRCSTATR.IDLE` and `TRCSTATR.PMSTABLE`; `TRCPRGCTLR.EN`.
    const STATR_IDLE: u32 = 1 << 0;
    const STATR_PMSTABLE: u32 = 1 << 1;
    const PRGCTLR_EN: u32 = 1 << 0;

    /// A unit programmed through the driver's enable sequence and tracing, as at panic.
    fn tracing_unit(hw: Interface) -> Result<(KBox<ScriptedEtm>, TraceConfig)> {
        let mut t = ScriptedEtm::new(hw == Interface::Mmio)?;
        let mut etm = Etm4x::new(&mut *t, hw, T);
        let ids = etm.read_ids().map_err(|_| EIO)?;
        let cfg = TraceConfig::default_for(&ids, TRACE_ID, true).map_err(|_| EINVAL)?;
        etm.enable(&cfg).map_err(|_| EIO)?;
        Ok((t, cfg))
    }

    #[test]
    fn enable_programs_every_register_and_starts_the_unit() -> Result {
        let (t, cfg) = tracing_unit(Interface::Mmio)?;
        assert!(t.enabled());
        for (off, value) in [
            (offset_of::<TRCCONFIGR>(), cfg.configr),
            (offset_of::<TRCEVENTCTL0R>(), cfg.eventctl0r),
            (offset_of::<TRCEVENTCTL1R>(), cfg.eventctl1r),
            (offset_of::<TRCSTALLCTLR>(), cfg.stallctlr),
            (offset_of::<TRCTSCTLR>(), cfg.tsctlr),
            (offset_of::<TRCSYNCPR>(), cfg.syncpr),
            (offset_of::<TRCCCCTLR>(), cfg.ccctlr),
            (offset_of::<TRCBBCTLR>(), cfg.bbctlr),
            (offset_of::<TRCTRACEIDR>(), cfg.traceidr),
            (offset_of::<TRCVICTLR>(), cfg.victlr),
            (offset_of::<TRCVIIECTLR>(), cfg.viiectlr),
            (offset_of::<TRCVISSCTLR>(), cfg.vissctlr),
        ] {
            assert_eq!(t.get_at(off), value);
        }
        // Programmed while idle and unlocked, locked again after.
        assert_eq!((t.busy_writes, t.locked_writes), (0, 0));
        assert!(t.sw_locked);
        assert!(!t.os_locked);
        Ok(())
    }

    #[test]
    fn panic_save_stops_the_unit_and_restores_the_os_lock_as_found() -> Result {
        for hw in [Interface::Mmio, Interface::SysReg] {
            for os_locked in [false, true] {
                let (mut t, cfg) = tracing_unit(hw)?;
                t.os_locked = os_locked;
                let s = Etm4x::new(&mut *t, hw, T).panic_save(3);
                assert!(s.outcome == SaveOutcome::Ok);
                assert!(s.regs_valid());
                assert_eq!(s.cpu, 3);
                assert_eq!(s.trcconfigr, cfg.configr);
                assert_eq!(s.trctraceidr, u32::from(TRACE_ID));
                assert_eq!(s.trcprgctlr & PRGCTLR_EN, PRGCTLR_EN);
                assert_eq!(
                    s.trcstatr & (STATR_IDLE | STATR_PMSTABLE),
                    STATR_IDLE | STATR_PMSTABLE
                );
                assert!(s.idr == t.idr());
                assert!(!t.enabled());
                assert_eq!(t.os_locked, os_locked);
                assert!((s.flags & SAVED_OS_LOCK_FOUND != 0) == os_locked);
                assert!((s.flags & SAVED_OS_LOCK_RESTORED != 0) == os_locked);
                assert_eq!(t.locked_writes, 0);
            }
        }
        Ok(())
    }

    #[test]
    fn panic_save_of_a_stuck_os_lock_reads_no_trace_register() -> Result {
        let (mut t, _) = tracing_unit(Interface::Mmio)?;
        t.os_locked = true;
        t.os_lock_stuck = true;
        let configr_reads = t.reads_at(offset_of::<TRCCONFIGR>());
        let s = Etm4x::new(&mut *t, Interface::Mmio, T).panic_save(1);
        assert!(s.outcome == SaveOutcome::OsLocked);
        assert!(!s.regs_valid());
        assert_eq!(s.devarch, super::DEVARCH_ETMV4);
        assert_eq!(t.reads_at(offset_of::<TRCCONFIGR>()), configr_reads);
        assert_eq!(t.locked_writes, 0);
        assert!(t.os_locked && t.sw_locked);
        Ok(())
    }

    #[test]
    fn saved_state_round_trips_through_its_payload() -> Result {
        let (mut t, _) = tracing_unit(Interface::Mmio)?;
        let s = Etm4x::new(&mut *t, Interface::Mmio, T).panic_save(5);
        let mut buf = [0xAAu8; SAVED_STATE_SIZE + 7];
        assert!(s.encode(&mut buf) == Ok(SAVED_STATE_SIZE));
        assert_eq!(buf[SAVED_STATE_SIZE], 0xAA);
        assert!(SavedState::decode(&buf) == Ok(s));
        assert!(
            SavedState::decode(&buf[..SAVED_STATE_SIZE - 1])
                == Err(PayloadError::TooShort(SAVED_STATE_SIZE - 1))
        );
        buf[0] = 9;
        assert!(SavedState::decode(&buf) == Err(PayloadError::Version(9)));
        Ok(())
    }

    /// Entry addresses of two kernel functions.
    const STOPS: [u64; 2] = [0xFFFF_C5E1_8012_3450, 0xFFFF_C5E1_8004_5670];

    #[test]
    fn enable_with_stop_points_programs_the_comparators() -> Result {
        let mut t = ScriptedEtm::new(true)?;
        let mut etm = Etm4x::new(&mut *t, Interface::Mmio, T);
        let ids = etm.read_ids().map_err(|_| EIO)?;
        let cfg = TraceConfig::default_for(&ids, TRACE_ID, false).map_err(|_| EINVAL)?;
        let (cfg, left) = cfg.with_stop_points(&ids, &STOPS, false);
        assert_eq!(left, 0);
        etm.enable(&cfg).map_err(|_| EIO)?;
        assert_eq!(t.get_at(offset_of::<TRCVISSCTLR>()), 0b11 << 16);
        for (n, addr) in STOPS.iter().enumerate() {
            // CAST: `n < 2`; the halves of the address.
            let acvr = 0x400 + 8 * n as u32;
            assert_eq!(t.get_at(acvr), *addr as u32);
            assert_eq!(t.get_at(acvr + 4), (*addr >> 32) as u32);
            assert_eq!(t.get_at(0x480 + 8 * n as u32), 0x4B00);
        }
        assert_eq!(t.busy_writes, 0);
        let s = Etm4x::new(&mut *t, Interface::Mmio, T).panic_save(0);
        assert!(s.hw_stop().is_some_and(|h| h.stop_points == 2));
        Ok(())
    }

    #[test]
    fn a_claim_held_by_a_stopped_cpu_leaves_the_unit_alone_at_panic() -> Result {
        use crate::driver::{
            Etm,
            Save, //
        };
        use kernel::{
            c_str,
            coresight::panic_dump::DumpCallback,
            str::CString,
            sync::Arc, //
        };

        let mut t = ScriptedEtm::new(true)?;
        let ids = Etm4x::new(&mut *t, Interface::Mmio, T)
            .read_ids()
            .map_err(|_| EIO)?;
        let name = CString::try_from_fmt(fmt!("{}", c_str!("etm0")))?;
        let etm = Arc::pin_init(
            Etm::new(super::ScriptedBackend(t), 0, Interface::Mmio, ids, name),
            GFP_KERNEL,
        )?;
        let cfg = TraceConfig::default_for(&ids, TRACE_ID, false).map_err(|_| EINVAL)?;
        etm.with(move |u| u.enable(&cfg))?.map_err(|_| EIO)?;
        let save = Save(etm.clone());
        let mut buf = [0u8; SAVED_STATE_SIZE];
        let mut written = 0;

        // A CPU stopped by the panic in the middle of a sequence holds the claim: the panic
        // callback records "busy" and touches nothing; a run-time caller gets EBUSY.
        {
            let mut held = etm.regs.try_claim().ok_or(EINVAL)?;
            let prgctlr: TRCPRGCTLR = held.with_io(|io| io.read(TRCPRGCTLR))?;
            assert!(prgctlr.en());
            assert!(etm.regs.try_claim().is_none());
            assert!(etm.with(|u| u.read_ids()).err() == Some(EBUSY));
            assert!(save.dump(&mut buf, &mut written).err() == Some(EIO));
            let s = SavedState::decode(&buf).map_err(|_| EINVAL)?;
            assert!(s.outcome == SaveOutcome::Busy);
            assert!(!s.regs_valid());
            assert!(held.with_io(|io| io.read(TRCPRGCTLR))?.en());
        }
        // Released: the panic callback stops and saves the unit.
        assert!(save.dump(&mut buf, &mut written).is_ok());
        let s = SavedState::decode(&buf).map_err(|_| EINVAL)?;
        assert!(s.outcome == SaveOutcome::Ok && s.regs_valid());
        let mut claim = etm.regs.try_claim().ok_or(EINVAL)?;
        assert!(!claim.with_io(|io| io.read(TRCPRGCTLR))?.en());
        Ok(())
    }
}

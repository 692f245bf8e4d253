// SPDX-License-Identifier: GPL-2.0

//! The ETMv4 enable and panic save (`etm4x/hw.rs`) against the register-level model.

use crate::model::{
    Etm4xModel,
    ModelIds,
    ModelInterface, //
};
use kernel::{
    coresight::{
        access::CsAccess,
        component::Backend, //
    },
    prelude::*,
};

/// Builds a model on the heap: its register file is too big for a test's stack.
fn new_model(ids: ModelIds, iface: ModelInterface) -> Result<KBox<Etm4xModel>> {
    let mut slot = KBox::<Etm4xModel>::new_uninit(GFP_KERNEL)?;
    Etm4xModel::new_in(&mut slot, ids, iface);
    // SAFETY: `new_in` initialised every field of the model.
    Ok(unsafe { slot.assume_init() })
}

/// A model as the driver's register backend, reached from any CPU.
struct ModelBackend(KBox<Etm4xModel>);

impl Backend for ModelBackend {
    fn with_io<R>(&mut self, f: impl FnOnce(&mut dyn CsAccess) -> R) -> R {
        f(&mut *self.0)
    }
}

#[kunit_tests(coresight_etm4x_hw)]
mod kunit {
    use super::new_model;
    use crate::hw::{
        Etm4x,
        Interface,
        Timeout,
        TraceConfig, //
    };
    use kernel::coresight::panic_dump::format::etm4x::{
        PayloadError,
        SaveOutcome,
        SavedState,
        SAVED_OS_LOCK_FOUND,
        SAVED_OS_LOCK_RESTORED,
        SAVED_STATE_SIZE, //
    };

    use crate::model::{
        Etm4xFaults,
        Etm4xModel,
        ModelIds,
        ModelInterface, //
        PRGCTLR_EN as TRCPRGCTLR_EN,
        STATR_IDLE as TRCSTATR_IDLE,
        STATR_PMSTABLE as TRCSTATR_PMSTABLE,
        TRCBBCTLR,
        TRCCCCTLR,
        TRCCONFIGR,
        TRCEVENTCTL0R,
        TRCEVENTCTL1R,
        TRCSTALLCTLR,
        TRCSYNCPR,
        TRCTRACEIDR,
        TRCTSCTLR,
        TRCVICTLR,
        TRCVIIECTLR,
        TRCVISSCTLR,
    };
    use kernel::prelude::*;

    const T: Timeout = Timeout {
        tries: 50,
        delay_us: 1,
    };

    /// Trace ID the tests program.
    const TRACE_ID: u8 = 0x12;

    /// A unit programmed through the driver's enable sequence and tracing, as at panic.
    fn tracing_model(iface: ModelInterface) -> Result<(KBox<Etm4xModel>, TraceConfig)> {
        let mut m = new_model(ModelIds::CORTEX_A53, iface)?;
        let hw = match iface {
            ModelInterface::Mmio => Interface::Mmio,
            ModelInterface::SysReg => Interface::SysReg,
        };
        let mut etm = Etm4x::new(&mut *m, hw, T);
        let ids = etm.read_ids().map_err(|_| EIO)?;
        let cfg = TraceConfig::default_for(&ids, TRACE_ID, true).map_err(|_| EINVAL)?;
        etm.enable(&cfg).map_err(|_| EIO)?;
        Ok((m, cfg))
    }

    #[test]
    fn enable_programs_every_register_and_starts_the_unit() -> Result {
        let (m, cfg) = tracing_model(ModelInterface::Mmio)?;
        assert!(m.enabled() && !m.idle());
        for (off, value) in [
            (TRCCONFIGR, cfg.configr),
            (TRCEVENTCTL0R, cfg.eventctl0r),
            (TRCEVENTCTL1R, cfg.eventctl1r),
            (TRCSTALLCTLR, cfg.stallctlr),
            (TRCTSCTLR, cfg.tsctlr),
            (TRCSYNCPR, cfg.syncpr),
            (TRCCCCTLR, cfg.ccctlr),
            (TRCBBCTLR, cfg.bbctlr),
            (TRCTRACEIDR, cfg.traceidr),
            (TRCVICTLR, cfg.victlr),
            (TRCVIIECTLR, cfg.viiectlr),
            (TRCVISSCTLR, cfg.vissctlr),
        ] {
            assert_eq!(m.peek(off), value);
        }
        assert_eq!(m.stats().busy_writes, 0);
        assert!(m.sw_locked());
        assert!(!m.os_locked());
        Ok(())
    }

    #[test]
    fn panic_save_stops_the_unit_and_restores_the_os_lock_as_found() -> Result {
        for (iface, hw) in [
            (ModelInterface::Mmio, Interface::Mmio),
            (ModelInterface::SysReg, Interface::SysReg),
        ] {
            for os_locked in [false, true] {
                let (mut m, cfg) = tracing_model(iface)?;
                m.set_os_locked(os_locked);
                let s = Etm4x::new(&mut *m, hw, T).panic_save(3);
                assert!(s.outcome == SaveOutcome::Ok);
                assert!(s.regs_valid());
                assert_eq!(s.cpu, 3);
                assert_eq!(s.trcconfigr, cfg.configr);
                assert_eq!(s.trcconfigr, m.peek(TRCCONFIGR));
                assert_eq!(s.trctraceidr, u32::from(TRACE_ID));
                assert_eq!(s.trctraceidr, m.peek(TRCTRACEIDR));
                assert_eq!(s.trcprgctlr & TRCPRGCTLR_EN, TRCPRGCTLR_EN);
                assert_eq!(
                    s.trcstatr & (TRCSTATR_IDLE | TRCSTATR_PMSTABLE),
                    TRCSTATR_IDLE | TRCSTATR_PMSTABLE
                );
                assert!(s.idr == m.ids().idr);
                assert!(!m.enabled() && m.idle());
                assert_eq!(m.os_locked(), os_locked);
                assert!((s.flags & SAVED_OS_LOCK_FOUND != 0) == os_locked);
                assert!((s.flags & SAVED_OS_LOCK_RESTORED != 0) == os_locked);
                assert_eq!(m.stats().blocked, 0);
            }
        }
        Ok(())
    }

    #[test]
    fn panic_save_of_a_stuck_os_lock_reads_no_trace_register() -> Result {
        let (mut m, _) = tracing_model(ModelInterface::Mmio)?;
        m.set_os_locked(true);
        m.set_faults(Etm4xFaults {
            os_lock_stuck: true,
            ..Etm4xFaults::default()
        });
        let s = Etm4x::new(&mut *m, Interface::Mmio, T).panic_save(1);
        assert!(s.outcome == SaveOutcome::OsLocked);
        assert!(!s.regs_valid());
        assert_eq!(s.devarch, m.ids().devarch);
        assert_eq!(m.stats().blocked, 0);
        assert!(m.os_locked() && m.sw_locked());
        Ok(())
    }

    #[test]
    fn saved_state_round_trips_through_its_payload() -> Result {
        let (mut m, _) = tracing_model(ModelInterface::Mmio)?;
        let s = Etm4x::new(&mut *m, Interface::Mmio, T).panic_save(5);
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
        let mut m = new_model(ModelIds::CORTEX_A57, ModelInterface::Mmio)?;
        let mut etm = Etm4x::new(&mut *m, Interface::Mmio, T);
        let ids = etm.read_ids().map_err(|_| EIO)?;
        let cfg = TraceConfig::default_for(&ids, TRACE_ID, false).map_err(|_| EINVAL)?;
        let (cfg, left) = cfg.with_stop_points(&ids, &STOPS, false);
        assert_eq!(left, 0);
        etm.enable(&cfg).map_err(|_| EIO)?;
        assert_eq!(m.peek(TRCVISSCTLR), 0b11 << 16);
        for (n, addr) in STOPS.iter().enumerate() {
            // CAST: `n < 2`; the halves of the address.
            let acvr = 0x400 + 8 * n as u32;
            assert_eq!(m.peek(acvr), *addr as u32);
            assert_eq!(m.peek(acvr + 4), (*addr >> 32) as u32);
            assert_eq!(m.peek(0x480 + 8 * n as u32), 0x4B00);
        }
        assert_eq!(m.stats().busy_writes, 0);
        let s = Etm4x::new(&mut *m, Interface::Mmio, T).panic_save(0);
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

        let mut m = new_model(ModelIds::CORTEX_A53, ModelInterface::Mmio)?;
        let ids = Etm4x::new(&mut *m, Interface::Mmio, T)
            .read_ids()
            .map_err(|_| EIO)?;
        let name = CString::try_from_fmt(fmt!("{}", c_str!("etm0")))?;
        let etm = Arc::pin_init(
            Etm::new(super::ModelBackend(m), 0, Interface::Mmio, ids, name),
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
            let reads_before = held.with_io(|io| io.read32(0x004));
            assert_eq!(reads_before & 1, 1);
            assert!(etm.regs.try_claim().is_none());
            assert!(etm.with(|u| u.read_ids()).err() == Some(EBUSY));
            assert!(save.dump(&mut buf, &mut written).err() == Some(EIO));
            let s = SavedState::decode(&buf).map_err(|_| EINVAL)?;
            assert!(s.outcome == SaveOutcome::Busy);
            assert!(!s.regs_valid());
            assert_eq!(held.with_io(|io| io.read32(0x004)) & 1, 1);
        }
        // Released: the panic callback stops and saves the unit.
        assert!(save.dump(&mut buf, &mut written).is_ok());
        let s = SavedState::decode(&buf).map_err(|_| EINVAL)?;
        assert!(s.outcome == SaveOutcome::Ok && s.regs_valid());
        let mut claim = etm.regs.try_claim().ok_or(EINVAL)?;
        assert_eq!(claim.with_io(|io| io.read32(0x004)) & 1, 0);
        Ok(())
    }
}

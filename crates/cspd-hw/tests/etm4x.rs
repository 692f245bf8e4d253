//! ETMv4 hardware logic driven against the register-level model.

use cspd_hw::etm4x::*;
use cspd_model::etm4x::Etm4xFaults;
use cspd_model::etm4x::Etm4xModel;
use cspd_model::etm4x::ModelIds;
use cspd_model::etm4x::ModelInterface;

/// The register map of the model (the test-support register map, written from IHI 0064
/// independently of the driver's `register!` declarations), under the names the tests use.
mod arch {
    pub use cspd_model::etm4x::{
        CONFIGR_CID as TRCCONFIGR_CID, CONFIGR_TS as TRCCONFIGR_TS, PDCR_PU as TRCPDCR_PU,
        PDSR_POWER as TRCPDSR_POWER, PRGCTLR_EN as TRCPRGCTLR_EN, STATR_IDLE as TRCSTATR_IDLE,
        STATR_PMSTABLE as TRCSTATR_PMSTABLE, TRCAUTHSTATUS, TRCBBCTLR, TRCCCCTLR, TRCCONFIGR,
        TRCDEVARCH, TRCEVENTCTL0R, TRCEVENTCTL1R, TRCIDR0, TRCIDR8, TRCOSLAR, TRCOSLSR, TRCPDCR,
        TRCPRGCTLR, TRCSTALLCTLR, TRCSTATR, TRCSYNCPR, TRCTRACEIDR, TRCTSCTLR, TRCVICTLR,
        TRCVIIECTLR, TRCVISSCTLR, VICTLR_EVENT_ALWAYS as TRCVICTLR_EVENT_ALWAYS,
        VICTLR_EVENT_MASK as TRCVICTLR_EVENT_MASK,
        VICTLR_EXLEVEL_NS_MASK as TRCVICTLR_EXLEVEL_NS_MASK,
        VICTLR_EXLEVEL_S_MASK as TRCVICTLR_EXLEVEL_S_MASK, VICTLR_SSSTATUS as TRCVICTLR_SSSTATUS,
    };
}
use arch::*;
use cspd_hw::etm4x::regs::TRCIDR0_TSSIZE_MASK;

/// Both ways to reach a trace unit, as the model and as the driver name them.
const INTERFACES: [(ModelInterface, Interface); 2] = [
    (ModelInterface::Mmio, Interface::Mmio),
    (ModelInterface::SysReg, Interface::SysReg),
];

const T: Timeout = Timeout {
    tries: 50,
    delay_us: 1,
};

fn idr_offsets() -> Vec<u32> {
    (0..NR_IDR).map(|n| trcidr_offset(n).unwrap()).collect()
}

/// Brings a model to the state a running system leaves at panic: programmed through the
/// shared enable sequence and tracing.
fn tracing_model(iface: ModelInterface) -> (Etm4xModel, TraceConfig) {
    let mut m = Etm4xModel::new(ModelIds::CORTEX_A53, iface);
    let hw_iface = match iface {
        ModelInterface::Mmio => Interface::Mmio,
        ModelInterface::SysReg => Interface::SysReg,
    };
    let mut etm = Etm4x::new(&mut m, hw_iface, T);
    let ids = etm.read_ids().unwrap();
    let cfg = TraceConfig::default_for(&ids, 0x12, true).unwrap();
    etm.enable(&cfg).unwrap();
    assert!(m.enabled() && !m.idle());
    (m, cfg)
}

#[test]
fn sysreg_encoding_matches_the_arm64_register_table() {
    // (offset, op0, op1, CRn, CRm, op2) from the AArch64 system register encodings of the
    // trace unit (TRCPRGCTLR_EL1 is S2_1_C0_C1_0, and so on).
    let table = [
        (TRCPRGCTLR, 2, 1, 0, 1, 0),
        (TRCSTATR, 2, 1, 0, 3, 0),
        (TRCCONFIGR, 2, 1, 0, 4, 0),
        (TRCTRACEIDR, 2, 1, 0, 0, 1),
        (TRCVICTLR, 2, 1, 0, 0, 2),
        (TRCIDR8, 2, 1, 0, 0, 6),
        (TRCIDR0, 2, 1, 0, 8, 7),
        (TRCIDR0 + 4, 2, 1, 0, 9, 7),
        (TRCOSLAR, 2, 1, 1, 0, 4),
        (TRCOSLSR, 2, 1, 1, 1, 4),
        (TRCAUTHSTATUS, 2, 1, 7, 14, 6),
        (TRCDEVARCH, 2, 1, 7, 15, 6),
        // The 64-bit address comparators: TRCACVR0/1/8 and TRCACATR0/9.
        (0x400, 2, 1, 2, 0, 0),
        (0x408, 2, 1, 2, 2, 0),
        (0x440, 2, 1, 2, 0, 1),
        (0x480, 2, 1, 2, 0, 2),
        (0x4C8, 2, 1, 2, 2, 3),
    ];
    for (off, op0, op1, crn, crm, op2) in table {
        let r = sysreg_of_offset(off);
        assert_eq!(
            (r.op0, r.op1, r.crn, r.crm, r.op2),
            (op0, op1, crn, crm, op2),
            "offset {off:#x}"
        );
        // The kernel's sys_reg(): op0 << 19 | op1 << 16 | CRn << 12 | CRm << 8 | op2 << 5.
        let want = (u32::from(op0) << 19)
            | (u32::from(op1) << 16)
            | (u32::from(crn) << 12)
            | (u32::from(crm) << 8)
            | (u32::from(op2) << 5);
        assert_eq!(r.encoding(), want);
    }
    // Usable in constants.
    const PRG: SysReg = sysreg_of_offset(TRCPRGCTLR);
    assert_eq!(PRG.encoding(), 0x0011_0100);
}

#[test]
fn read_ids_restores_the_os_lock_as_found() {
    for locked in [true, false] {
        let mut m = Etm4xModel::cortex_a57();
        m.set_os_locked(locked);
        let ids = Etm4x::new(&mut m, Interface::Mmio, T).read_ids().unwrap();
        assert_eq!(m.os_locked(), locked);
        assert!(m.sw_locked(), "software lock restored");
        assert_eq!(ids.idr, m.ids().idr);
        assert_eq!(ids.devarch, m.ids().devarch);
        assert_eq!(ids.authstatus, m.ids().authstatus);
        assert_eq!(ids.devtype, m.ids().devtype);
        assert!(ids.is_etmv4());
        assert_eq!(
            m.stats().blocked,
            0,
            "no trace register touched while locked"
        );
    }
}

#[test]
fn default_config_validates_the_trace_id() {
    let ids = Etm4xIds {
        idr: ModelIds::CORTEX_A53.idr,
        ..Etm4xIds::default()
    };
    for bad in [0u8, 0x70, 0x7F, 0xFF] {
        assert_eq!(
            TraceConfig::default_for(&ids, bad, false),
            Err(Etm4xError::InvalidTraceId(bad))
        );
    }
    for good in [TRACE_ID_MIN, 0x10, TRACE_ID_MAX] {
        let c = TraceConfig::default_for(&ids, good, false).unwrap();
        assert_eq!(c.traceidr, u32::from(good));
        assert_eq!(c.configr & TRCCONFIGR_TS, 0);
        assert_ne!(c.configr & TRCCONFIGR_CID, 0);
        // Secure ELs excluded, Non-secure EL0..2 traced, always-true event, started.
        assert_eq!(c.victlr & TRCVICTLR_EXLEVEL_S_MASK, 0xB << 16);
        assert_eq!(c.victlr & TRCVICTLR_EXLEVEL_NS_MASK, 0);
        assert_eq!(c.victlr & TRCVICTLR_EVENT_MASK, TRCVICTLR_EVENT_ALWAYS);
        assert_ne!(c.victlr & TRCVICTLR_SSSTATUS, 0);
    }
    let c = TraceConfig::default_for(&ids, 0x10, true).unwrap();
    assert_ne!(c.configr & TRCCONFIGR_TS, 0);
    // No timestamps on a unit without a timestamp source.
    let mut no_ts = ids;
    no_ts.idr[0] &= !TRCIDR0_TSSIZE_MASK;
    let c = TraceConfig::default_for(&no_ts, 0x10, true).unwrap();
    assert_eq!(c.configr & TRCCONFIGR_TS, 0);
    assert_eq!(legacy_trace_id(0), Some(0x10));
    assert_eq!(legacy_trace_id(47), Some(0x6E));
    assert_eq!(legacy_trace_id(48), None);
}

#[test]
fn enable_programs_every_register_and_starts_the_unit() {
    let (mut m, cfg) = tracing_model(ModelInterface::Mmio);
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
        assert_eq!(m.peek(off), value, "register {off:#x}");
    }
    assert_eq!(
        m.stats().busy_writes,
        0,
        "nothing written while the unit was running"
    );
    assert_eq!(m.stats().sw_locked_writes, 0);
    assert!(m.sw_locked(), "software lock set again");
    assert!(!m.os_locked(), "a traced CPU keeps the OS lock clear");
    assert_eq!(m.peek(TRCPRGCTLR), 1);
    assert_ne!(
        m.peek(TRCPDCR) & TRCPDCR_PU,
        0,
        "power requested while tracing"
    );

    let mut etm = Etm4x::new(&mut m, Interface::Mmio, T);
    etm.disable().unwrap();
    assert!(!m.enabled() && m.idle());
    assert_eq!(m.peek(TRCPDCR) & TRCPDCR_PU, 0, "power request dropped");
    assert_ne!(m.peek(TRCSTATR) & TRCSTATR_PMSTABLE, 0);
    assert!(m.sw_locked());
}

#[test]
fn enable_rejects_bad_ids_without_touching_the_unit() {
    let mut m = Etm4xModel::cortex_a53();
    let mut cfg = TraceConfig::default_for(
        &Etm4xIds {
            idr: ModelIds::CORTEX_A53.idr,
            ..Etm4xIds::default()
        },
        1,
        false,
    )
    .unwrap();
    cfg.traceidr = 0x70;
    let r = Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg);
    assert_eq!(r, Err(Etm4xError::InvalidTraceId(0x70)));
    assert_eq!(m.stats().writes, 0);
}

#[test]
fn enable_reports_a_unit_that_never_starts_within_bound() {
    let mut m = Etm4xModel::cortex_a53();
    m.set_faults(Etm4xFaults {
        never_starts: true,
        ..Etm4xFaults::default()
    });
    let ids = Etm4x::new(&mut m, Interface::Mmio, T).read_ids().unwrap();
    let cfg = TraceConfig::default_for(&ids, 0x10, false).unwrap();
    let r = Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg);
    assert!(matches!(r, Err(Etm4xError::IdleTimeout(s)) if s & TRCSTATR_IDLE != 0));
    assert!(m.stats().delays <= u64::from(T.tries) + 1);
    assert!(m.sw_locked(), "software lock restored after the failure");
}

fn check_saved_equals_model(s: &SavedState, m: &Etm4xModel, cpu: u32) {
    assert_eq!(s.cpu, cpu);
    assert!(s.regs_valid());
    assert_eq!(s.trcconfigr, m.peek(TRCCONFIGR));
    assert_eq!(s.trctraceidr, m.peek(TRCTRACEIDR));
    assert_eq!(s.authstatus, m.peek(TRCAUTHSTATUS));
    assert_eq!(s.devarch, m.peek(TRCDEVARCH));
    let model_idr: Vec<u32> = idr_offsets().iter().map(|o| m.peek(*o)).collect();
    assert_eq!(s.idr.to_vec(), model_idr);
    assert_eq!(s.idr, m.ids().idr);
}

#[test]
fn panic_save_stops_the_unit_and_saves_what_the_hardware_holds() {
    for (iface, hw) in INTERFACES {
        for os_locked in [false, true] {
            let (mut m, cfg) = tracing_model(iface);
            m.set_os_locked(os_locked);
            let s = Etm4x::new(&mut m, hw, T).panic_save(3);
            assert_eq!(s.outcome, SaveOutcome::Ok, "{iface:?} locked={os_locked}");
            check_saved_equals_model(&s, &m, 3);
            assert_eq!(s.trcconfigr, cfg.configr);
            assert_eq!(s.trctraceidr, 0x12);
            assert_eq!(s.trcprgctlr & TRCPRGCTLR_EN, 1, "was tracing");
            assert_eq!(
                s.trcstatr & (TRCSTATR_IDLE | TRCSTATR_PMSTABLE),
                TRCSTATR_IDLE | TRCSTATR_PMSTABLE
            );
            assert!(!m.enabled() && m.idle(), "unit stopped");
            assert_eq!(m.os_locked(), os_locked, "OS lock restored as found");
            assert_eq!(s.flags & SAVED_OS_LOCK_FOUND != 0, os_locked);
            assert_eq!(s.flags & SAVED_OS_LOCK_RESTORED != 0, os_locked);
            assert_eq!(m.stats().blocked, 0);
            if iface == ModelInterface::Mmio {
                assert!(m.sw_locked(), "software lock restored");
                assert_ne!(s.trcpdsr & TRCPDSR_POWER, 0);
            }
        }
    }
}

/// Runs `panic_save` on a tracing unit with `faults`, and checks that it ended within the
/// poll bound.
fn save_with(faults: Etm4xFaults, os_locked: bool) -> (SavedState, Etm4xModel) {
    let (mut m, _) = tracing_model(ModelInterface::Mmio);
    m.set_os_locked(os_locked);
    m.set_faults(faults);
    let before = m.stats();
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(1);
    let after = m.stats();
    let delays = after.delays - before.delays;
    let accesses = (after.reads + after.writes) - (before.reads + before.writes);
    // Two polls at most (IDLE, PMSTABLE), each bounded by the timeout.
    assert!(delays <= 2 * u64::from(T.tries), "{delays} delays");
    assert!(
        accesses <= 2 * u64::from(T.tries) + 40,
        "{accesses} accesses"
    );
    (s, m)
}

#[test]
fn panic_save_names_each_fault_and_ends_within_bound() {
    let (s, m) = save_with(
        Etm4xFaults {
            stuck_busy: true,
            ..Etm4xFaults::default()
        },
        false,
    );
    assert_eq!(s.outcome, SaveOutcome::IdleTimeout);
    assert_eq!(s.trcstatr & TRCSTATR_IDLE, 0);
    check_saved_equals_model(&s, &m, 1);

    let (s, m) = save_with(
        Etm4xFaults {
            pm_unstable: true,
            ..Etm4xFaults::default()
        },
        false,
    );
    assert_eq!(s.outcome, SaveOutcome::PmStableTimeout);
    check_saved_equals_model(&s, &m, 1);

    let (s, m) = save_with(
        Etm4xFaults {
            os_lock_stuck: true,
            ..Etm4xFaults::default()
        },
        true,
    );
    assert_eq!(s.outcome, SaveOutcome::OsLocked);
    assert!(!s.regs_valid());
    assert_eq!(
        s.devarch,
        m.ids().devarch,
        "management registers still saved"
    );
    assert_eq!(m.stats().blocked, 0, "no trace register read while locked");
    assert!(m.os_locked() && m.sw_locked());

    let (s, m) = save_with(
        Etm4xFaults {
            powered_down: true,
            ..Etm4xFaults::default()
        },
        false,
    );
    assert_eq!(s.outcome, SaveOutcome::PoweredDown);
    assert_eq!(s.trcpdsr & TRCPDSR_POWER, 0);
    assert!(!s.regs_valid());
    assert_eq!(m.stats().blocked, 0);

    let mut not_etm = ModelIds::CORTEX_A53;
    not_etm.devarch = 0x4770_0A17;
    let mut m = Etm4xModel::new(not_etm, ModelInterface::Mmio);
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(0);
    assert_eq!(s.outcome, SaveOutcome::NotEtmV4);
    assert_eq!(s.devarch, 0x4770_0A17);
    assert_eq!(m.stats().writes, 0);
    let r = Etm4x::new(&mut m, Interface::Mmio, T).read_ids();
    assert_eq!(r, Err(Etm4xError::NotEtmV4(0x4770_0A17)));
}

#[test]
fn payload_round_trips_and_rejects_bad_input() {
    let (mut m, _) = tracing_model(ModelInterface::Mmio);
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(5);
    let mut buf = [0xAAu8; SAVED_STATE_SIZE + 7];
    assert_eq!(s.encode(&mut buf), Ok(SAVED_STATE_SIZE));
    assert_eq!(
        buf[SAVED_STATE_SIZE], 0xAA,
        "nothing written past the payload"
    );
    assert_eq!(&buf[0..4], &SAVED_STATE_VERSION.to_le_bytes());
    assert_eq!(&buf[4..8], &5u32.to_le_bytes());
    assert_eq!(SavedState::decode(&buf), Ok(s));
    assert_eq!(
        s.encode(&mut [0u8; SAVED_STATE_SIZE - 1]),
        Err(PayloadError::TooShort(SAVED_STATE_SIZE - 1))
    );
    assert_eq!(
        SavedState::decode(&buf[..SAVED_STATE_SIZE - 1]),
        Err(PayloadError::TooShort(SAVED_STATE_SIZE - 1))
    );
    let mut bad = buf;
    bad[0] = 9;
    assert_eq!(SavedState::decode(&bad), Err(PayloadError::Version(9)));
    let mut bad = buf;
    bad[8] = 77;
    assert_eq!(SavedState::decode(&bad), Err(PayloadError::Outcome(77)));
    // Every outcome survives the trip.
    for o in 0..9 {
        let mut t = s;
        t.outcome = SaveOutcome::from_u32(o).unwrap();
        t.encode(&mut buf).unwrap();
        assert_eq!(SavedState::decode(&buf).unwrap().outcome as u32, o);
        assert!(!t.outcome.name().is_empty());
    }
    assert_eq!(SaveOutcome::from_u32(9), None);
}

#[test]
fn perf_metadata_follows_cs_etm_h() {
    let (mut m, _) = tracing_model(ModelInterface::Mmio);
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(2);
    let md = s.perf_metadata(-1);
    assert_eq!(md.len(), 3 + PERF_ETMV4_NR_PARAMS as usize);
    assert_eq!(md[0], 0x4040_4040_4040_4040);
    assert_eq!(md[1], 2);
    assert_eq!(md[2], 8);
    assert_eq!(md[3], u64::from(m.peek(TRCCONFIGR)));
    assert_eq!(md[4], 0x12);
    assert_eq!(md[5], 0x2800_0EA1);
    assert_eq!(md[6], 0x4100_F403);
    assert_eq!(md[7], 0x0000_0488);
    assert_eq!(md[8], u64::from(m.peek(TRCIDR8)));
    assert_eq!(md[9], 0xCC);
    assert_eq!(md[10] as i64, -1);
    assert_eq!(s.perf_metadata(1)[10], 1);
}

/// Entry addresses of three kernel functions, as a KASLR'd kernel has them.
const STOPS: [u64; 3] = [
    0xFFFF_C5E1_8012_3450,
    0xFFFF_C5E1_8004_5670,
    0xFFFF_C5E1_8009_8000,
];

fn ids_of(m: &mut Etm4xModel) -> Etm4xIds {
    Etm4x::new(m, Interface::Mmio, T).read_ids().unwrap()
}

#[test]
fn stop_points_program_comparators_and_the_start_stop_logic() {
    let mut m = Etm4xModel::cortex_a53();
    let ids = ids_of(&mut m);
    assert_eq!(
        TraceConfig::addr_comparators(&ids),
        8,
        "TRCIDR4.NUMACPAIRS 4"
    );
    let base = TraceConfig::default_for(&ids, 0x12, false).unwrap();
    let (cfg, left) = base.with_stop_points(&ids, &STOPS, false);
    assert_eq!(left, 0);
    // IHI 0064: STOP bits 16 + n, no START bit; SSSTATUS set and EVENT always true as before.
    assert_eq!(cfg.vissctlr, 0b111 << 16);
    assert_eq!(cfg.victlr, base.victlr);
    assert_eq!(cfg.victlr & TRCVICTLR_SSSTATUS, TRCVICTLR_SSSTATUS);
    assert_eq!(cfg.victlr & TRCVICTLR_EVENT_MASK, TRCVICTLR_EVENT_ALWAYS);
    // Secure EL0, EL1 and EL3 (TRCIDR3.EXLEVEL_S 0b1011) and Non-secure EL2 do not match: 0x4B00,
    // the C driver's value for a kernel at EL1.
    assert_eq!(cfg.acatr, 0x4B00);
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    assert_eq!(m.peek(TRCVISSCTLR), 0b111 << 16);
    assert_eq!(m.peek(TRCVIIECTLR), 0, "no include/exclude range");
    for (n, addr) in STOPS.iter().enumerate() {
        let acvr = 0x400 + 8 * n as u32;
        let acatr = 0x480 + 8 * n as u32;
        assert_eq!(m.peek(acvr), *addr as u32, "TRCACVR{n} low");
        assert_eq!(m.peek(acvr + 4), (*addr >> 32) as u32, "TRCACVR{n} high");
        assert_eq!(m.peek(acatr), 0x4B00, "TRCACATR{n}");
        assert_eq!(m.peek(acatr + 4), 0);
    }
    assert_eq!(m.peek(0x400 + 8 * 3), 0, "TRCACVR3 untouched");
    assert_eq!(m.stats().busy_writes, 0, "programmed while idle");
    // A kernel at EL2 (VHE) must match Non-secure EL2.
    let (cfg, _) = base.with_stop_points(&ids, &STOPS, true);
    assert_eq!(cfg.acatr, 0x0B00);
}

#[test]
fn more_stop_points_than_comparators_programs_what_fits() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let addrs: Vec<u64> = (0..11).map(|i| 0xFFFF_8000_8000_0000 + 0x100 * i).collect();
    let base = TraceConfig::default_for(&ids, 0x10, false).unwrap();
    let (cfg, left) = base.with_stop_points(&ids, &addrs, false);
    assert_eq!((cfg.nr_stops, left), (8, 3));
    assert_eq!(cfg.vissctlr, 0xFF << 16);
    // None at all: the configuration is the default one, nothing selected.
    let (none, left) = base.with_stop_points(&ids, &[], false);
    assert_eq!((none.nr_stops, none.vissctlr, left), (0, 0, 0));
    // A unit without comparators gets none, and says how many were left out.
    let mut no_cmp = ids;
    no_cmp.idr[4] &= !0xF;
    let (cfg, left) = base.with_stop_points(&no_cmp, &STOPS, false);
    assert_eq!((cfg.nr_stops, cfg.vissctlr, left), (0, 0, 3));
}

#[test]
fn panic_save_keeps_the_viewinst_state() {
    let mut m = Etm4xModel::cortex_a53();
    let ids = ids_of(&mut m);
    let (cfg, _) = TraceConfig::default_for(&ids, 0x12, false)
        .unwrap()
        .with_stop_points(&ids, &STOPS[..2], false);
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(1);
    assert_eq!(s.outcome, SaveOutcome::Ok);
    assert_eq!(s.trcvissctlr, 0b11 << 16);
    assert_eq!(s.trcvictlr, cfg.victlr);
    // The model has no start/stop logic: SSSTATUS reads as programmed, started.
    assert_eq!(
        s.hw_stop(),
        Some(HwStop {
            stop_points: 2,
            stopped: Some(false)
        })
    );
    // The stop points' comparators are saved, and no other.
    assert_ne!(s.flags & SAVED_FILTER_VALID, 0);
    assert_eq!((s.trcviiectlr, s.cmp_saved), (0, 0b11));
    assert_eq!(&s.acvr[..3], &[STOPS[0], STOPS[1], 0]);
    assert_eq!(&s.acatr[..3], &[cfg.acatr, cfg.acatr, 0]);
    let mut buf = [0u8; SAVED_STATE_SIZE];
    s.encode(&mut buf).unwrap();
    assert_eq!(SavedState::decode(&buf), Ok(s));
    // A version 2 payload (before the filter) is read, without it.
    let mut v2 = buf[..SAVED_STATE_V2_SIZE].to_vec();
    v2[..4].copy_from_slice(&2u32.to_le_bytes());
    let old = SavedState::decode(&v2).unwrap();
    assert_eq!(old.flags & SAVED_FILTER_VALID, 0);
    assert_eq!((old.cmp_saved, old.acvr[0]), (0, 0));
    assert_eq!(old.hw_stop(), s.hw_stop());
    // A version 1 payload (before the ViewInst registers) is read, without them.
    let mut v1 = buf[..SAVED_STATE_V1_SIZE].to_vec();
    v1[..4].copy_from_slice(&1u32.to_le_bytes());
    let old = SavedState::decode(&v1).unwrap();
    assert_eq!(old.hw_stop(), None);
    assert_eq!((old.trcvictlr, old.trcvissctlr), (0, 0));
    assert_eq!(old.trcconfigr, s.trcconfigr);
    assert_eq!(
        SavedState::decode(&buf[..SAVED_STATE_V1_SIZE]),
        Err(PayloadError::TooShort(SAVED_STATE_V1_SIZE)),
        "a version 3 payload cut to version 1's size"
    );
    assert_eq!(
        SavedState::decode(&buf[..SAVED_STATE_V2_SIZE]),
        Err(PayloadError::TooShort(SAVED_STATE_V2_SIZE)),
        "a version 3 payload cut to version 2's size"
    );
}

#[test]
fn panic_save_keeps_the_address_filter_the_user_set() {
    let mut m = Etm4xModel::cortex_a53();
    let ids = ids_of(&mut m);
    let mut set = SysfsSettings::default();
    set.set_mode(u64::from(mode::VIEWINST_STARTSTOP | mode::EXCL_USER));
    set.set_addr_idx(2, &ids).unwrap();
    set.set_range(0xFFFF_8000_8010_0000, 0xFFFF_8000_8010_0FFC, None)
        .unwrap();
    set.set_addr_idx(5, &ids).unwrap();
    set.set_point(0xFFFF_8000_8020_0000, false, &ids).unwrap();
    let cfg = TraceConfig::for_sysfs(&ids, 0x14, false, &set, false).unwrap();
    // The hardware stop takes the comparators after the filter's.
    let (cfg, _) = cfg.with_stop_points(&ids, &STOPS[..1], false);
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    let s = Etm4x::new(&mut m, Interface::Mmio, T).panic_save(2);
    assert_eq!(s.outcome, SaveOutcome::Ok);
    assert_eq!(exlevel_ns(s.trcvictlr) & 1, 1, "EL0 excluded");
    // The filter is where the user set it: pair 1 (comparators 2 and 3) and comparator 5; the
    // stop point after them, 6. Comparators 0, 1 and 4 are not read.
    assert_eq!(s.trcviiectlr, 0b10);
    assert_eq!(s.trcvissctlr, (1 << (16 + 6)) | (1 << 5));
    assert_eq!(s.cmp_saved, 0b110_1100);
    assert_eq!(
        &s.acvr[..7],
        &[
            0,
            0,
            0xFFFF_8000_8010_0000,
            0xFFFF_8000_8010_0FFC,
            0,
            0xFFFF_8000_8020_0000,
            STOPS[0],
        ]
    );
    for n in [2, 3, 5, 6] {
        assert_eq!(s.acatr[n], cfg.acatr, "TRCACATR{n}");
    }
    assert_ne!(
        cfg.acatr & (1 << 12),
        0,
        "EL0 left out of the comparators' match"
    );
    let mut buf = [0u8; SAVED_STATE_SIZE];
    s.encode(&mut buf).unwrap();
    assert_eq!(SavedState::decode(&buf), Ok(s));
    // Through system registers each comparator value is one 64-bit read.
    let mut m = Etm4xModel::new(ModelIds::CORTEX_A53, ModelInterface::SysReg);
    let ids = Etm4x::new(&mut m, Interface::SysReg, T).read_ids().unwrap();
    let cfg = TraceConfig::for_sysfs(&ids, 0x14, false, &set, false).unwrap();
    Etm4x::new(&mut m, Interface::SysReg, T)
        .enable(&cfg)
        .unwrap();
    let s = Etm4x::new(&mut m, Interface::SysReg, T).panic_save(2);
    assert_eq!((s.cmp_saved, s.acvr[3]), (0b10_1100, 0xFFFF_8000_8010_0FFC));
}

/// The kernel driver's table of trace system registers (`etm4x/sysreg.rs`: offset, `MRS`/`MSR`
/// operand, access, and the register's name in a comment), read as text: it is built only into
/// arm64 kernels and runs only on a CPU with the trace system registers, which no machine here
/// has.
const SYSREG_RS: &str = include_str!("../../../drivers/hwtracing/coresight/rust/etm4x/sysreg.rs");

/// `S2_<op1>_C<n>_C<m>_<op2>` as (op0, op1, CRn, CRm, op2).
fn generic_operand(s: &str) -> Option<(u8, u8, u8, u8, u8)> {
    let mut p = s.strip_prefix('S')?.split('_');
    let op0 = p.next()?.parse().ok()?;
    let op1 = p.next()?.parse().ok()?;
    let crn = p.next()?.strip_prefix('C')?.parse().ok()?;
    let crm = p.next()?.strip_prefix('C')?.parse().ok()?;
    let op2 = p.next()?.parse().ok()?;
    p.next().is_none().then_some((op0, op1, crn, crm, op2))
}

#[test]
fn the_drivers_system_register_table_is_the_architectures() {
    if !cspd_testdata::tool("llvm-mc-19") {
        return;
    }
    // (offset, operand, access, name)
    let mut rows = Vec::new();
    for l in SYSREG_RS.lines().map(str::trim) {
        let Some((off, rest)) = l.strip_prefix("0x").and_then(|l| l.split_once(" => \"")) else {
            continue;
        };
        let (operand, rest) = rest.split_once("\", ").expect(l);
        let (access, name) = rest.split_once("; // ").expect(l);
        let off = u32::from_str_radix(off, 16).expect(l);
        rows.push((off, operand, access, name.trim()));
    }
    assert!(rows.len() >= 60, "{} registers in sysreg.rs", rows.len());
    // Each operand is the encoding hw::sysreg_of_offset gives the offset (what the host tests
    // and the KUnit tests check against the register table above).
    for &(off, operand, _, name) in &rows {
        let r = sysreg_of_offset(off);
        assert_eq!(
            generic_operand(operand),
            Some((r.op0, r.op1, r.crn, r.crm, r.op2)),
            "{name} at {off:#x}: {operand}"
        );
    }
    // LLVM's assembler, which knows the trace registers by name, encodes the name and the
    // operand alike, reads (MRS) what the table reads and writes (MSR) what it only writes.
    let mut src = String::new();
    for &(_, operand, access, name) in &rows {
        for reg in [name, operand] {
            if access == "wo" {
                src.push_str(&format!("msr {reg}, x0\n"));
            } else {
                src.push_str(&format!("mrs x0, {reg}\n"));
            }
        }
    }
    let mut child = std::process::Command::new("llvm-mc-19")
        .args(["-triple=aarch64", "-show-encoding"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(src.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let words: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let b = l.split("encoding: [").nth(1)?.split(']').next()?;
            let v: Vec<u8> = b
                .split(',')
                .map(|x| u8::from_str_radix(x.trim().trim_start_matches("0x"), 16).unwrap())
                .collect();
            Some(u32::from_le_bytes(v.try_into().unwrap()))
        })
        .collect();
    assert_eq!(words.len(), 2 * rows.len());
    for (i, &(off, operand, access, name)) in rows.iter().enumerate() {
        let (by_name, by_operand) = (words[2 * i], words[2 * i + 1]);
        // MRS Xt is 0xD530_0000 | op0[0] << 19 | ..., MSR 0xD510_0000 | ...: the kernel's
        // sys_reg() encoding with the L bit, Rt 0.
        let base = if access == "wo" {
            0xD500_0000
        } else {
            0xD520_0000
        };
        assert_eq!(
            by_name,
            base | sysreg_of_offset(off).encoding(),
            "{name} ({operand}, {off:#x}): LLVM encodes the name as {by_name:#010x}"
        );
        assert_eq!(by_operand, by_name, "{name}: {operand}");
    }
}

/// What the stop sequence did, in order: the own CPU's steps and the writes of `TRCPRGCTLR`
/// with the value written.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Prohibit,
    Allow,
    Synchronize,
    Isb,
    Prgctlr(u32),
    StatusRead,
}

type Log = std::rc::Rc<std::cell::RefCell<Vec<Step>>>;

/// The model with every `TRCPRGCTLR` write and `TRCSTATR` read logged.
struct Logged<'a> {
    m: &'a mut Etm4xModel,
    log: Log,
}

impl cspd_hw::access::RawFrame for Logged<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        if offset == TRCSTATR {
            self.log.borrow_mut().push(Step::StatusRead);
        }
        self.m.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) {
        if offset == TRCPRGCTLR {
            self.log.borrow_mut().push(Step::Prgctlr(value));
        }
        self.m.write32(offset, value)
    }
    fn delay_us(&mut self, us: u32) {
        self.m.delay_us(us)
    }
}

struct FakeCpu(Log);

impl OwnCpu for FakeCpu {
    fn prohibit_trace(&self) {
        self.0.borrow_mut().push(Step::Prohibit);
    }
    fn allow_trace(&self) {
        self.0.borrow_mut().push(Step::Allow);
    }
    fn synchronize(&self) {
        self.0.borrow_mut().push(Step::Synchronize);
    }
    fn isb(&self) {
        self.0.borrow_mut().push(Step::Isb);
    }
}

/// The stop follows IHI 0064 and `etm4_disable_hw()`: on the unit's own CPU, trace prohibited
/// and `DSB; ISB; TSB` before `EN` clears, an `ISB` between that system-register write and the
/// first `TRCSTATR` read; from another CPU over MMIO, the register steps only. The enable on
/// the own CPU allows trace again once the unit runs.
#[test]
fn stop_takes_the_own_cpus_barriers_before_en_clears() {
    for (iface, hw) in INTERFACES {
        for own in [true, false] {
            let (mut m, cfg) = tracing_model(iface);
            let log = Log::default();
            let cpu = FakeCpu(log.clone());
            let mut io = Logged {
                m: &mut m,
                log: log.clone(),
            };
            let unit = Etm4x::new(&mut io, hw, T);
            let s = if own { unit.on_own_cpu(&cpu) } else { unit }.panic_save(0);
            assert_eq!(s.outcome, SaveOutcome::Ok);
            let steps = log.borrow().clone();
            let en_off = steps.iter().position(|s| *s == Step::Prgctlr(0)).unwrap();
            let first_read = en_off
                + steps[en_off..]
                    .iter()
                    .position(|s| *s == Step::StatusRead)
                    .unwrap();
            let before: Vec<_> = steps[..en_off]
                .iter()
                .filter(|s| !matches!(s, Step::StatusRead | Step::Prgctlr(_)))
                .cloned()
                .collect();
            let between = steps[en_off + 1..first_read].to_vec();
            match (own, hw) {
                (true, Interface::SysReg) => {
                    assert_eq!(before, [Step::Prohibit, Step::Synchronize], "{steps:?}");
                    assert_eq!(between, [Step::Isb], "{steps:?}");
                }
                (true, Interface::Mmio) => {
                    assert_eq!(before, [Step::Prohibit, Step::Synchronize], "{steps:?}");
                    assert!(between.is_empty(), "{steps:?}");
                }
                (false, _) => {
                    assert!(before.is_empty() && between.is_empty(), "{steps:?}");
                }
            }
            assert!(!m.enabled() && m.idle());

            // Enabled again on the own CPU: trace is allowed once the unit runs.
            let log = Log::default();
            let cpu = FakeCpu(log.clone());
            let mut io = Logged {
                m: &mut m,
                log: log.clone(),
            };
            let unit = Etm4x::new(&mut io, hw, T);
            if own { unit.on_own_cpu(&cpu) } else { unit }
                .enable(&cfg)
                .unwrap();
            let steps = log.borrow().clone();
            let en_on = steps.iter().position(|s| *s == Step::Prgctlr(1)).unwrap();
            assert_eq!(
                steps.iter().filter(|s| **s == Step::Allow).count(),
                usize::from(own),
                "{steps:?}"
            );
            if own {
                let allow = steps.iter().position(|s| *s == Step::Allow).unwrap();
                assert!(allow > en_on, "{steps:?}");
            }
            assert!(m.enabled());
        }
    }
}

/// `TRCVICTLR.EXLEVEL_NS` (bits 22:20), written from IHI 0064.
fn exlevel_ns(victlr: u32) -> u32 {
    (victlr >> 20) & 0b111
}

#[test]
fn perf_exclude_kernel_and_user_set_the_non_secure_levels() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let base = TraceConfig::for_perf(&ids, 0x10, &PerfOptions::default(), false).unwrap();
    assert_eq!(
        exlevel_ns(base.victlr),
        0,
        "everything at EL0 to EL2 by default"
    );
    let user_only = PerfOptions {
        exclude_kernel: true,
        ..PerfOptions::default()
    };
    let cfg = TraceConfig::for_perf(&ids, 0x10, &user_only, false).unwrap();
    assert_eq!(exlevel_ns(cfg.victlr), 0b010, "/u: EL1 excluded");
    let cfg = TraceConfig::for_perf(&ids, 0x10, &user_only, true).unwrap();
    assert_eq!(
        exlevel_ns(cfg.victlr),
        0b110,
        "/u with the kernel at EL2: EL1 and EL2"
    );
    let kernel_only = PerfOptions {
        exclude_user: true,
        ..PerfOptions::default()
    };
    let cfg = TraceConfig::for_perf(&ids, 0x10, &kernel_only, false).unwrap();
    assert_eq!(exlevel_ns(cfg.victlr), 0b001, "/k: EL0 excluded");
    assert_eq!(cfg.victlr & TRCVICTLR_SSSTATUS, TRCVICTLR_SSSTATUS);
    // Programmed as given.
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    assert_eq!(m.peek(TRCVICTLR) & TRCVICTLR_EXLEVEL_NS_MASK, 0b001 << 20);
}

#[test]
fn perf_config_bits_follow_the_cs_etm_format_and_the_unit() {
    let o = PerfOptions::default().with_config((1 << 12) | (1 << 14) | (1 << 29) | (1 << 4));
    assert!(o.cycacc && o.contextid1 && o.retstack && o.timestamp);
    assert!(!o.branch_broadcast && !o.contextid2);
    assert!(
        PerfOptions::default().with_config(1 << 28).timestamp,
        "the older timestamp bit"
    );
    assert!(PerfOptions::default().with_config(1 << 8).branch_broadcast);
    assert!(PerfOptions::default().with_config(1 << 15).contextid2);

    // A unit without cycle counting, timestamps, context IDs or return stack (as the emulated
    // one): the bits stay clear, as upstream leaves them RES0.
    let mut m = Etm4xModel::cortex_a57();
    let mut ids = ids_of(&mut m);
    ids.idr[0] &= !((1 << 5) | (1 << 7) | (1 << 9) | (0x1F << 24));
    ids.idr[2] &= !(0x1F << 5);
    let cfg = TraceConfig::for_perf(&ids, 0x10, &o, false).unwrap();
    assert_eq!(cfg.configr & (TRCCONFIGR_CID | TRCCONFIGR_TS), 0);
    assert_eq!(cfg.configr & ((1 << 4) | (1 << 12)), 0, "no CCI, no RS");
    // A unit that has them gets them.
    let mut rich = ids;
    rich.idr[0] |= (1 << 7) | (1 << 9) | (8 << 24);
    rich.idr[2] |= 4 << 5;
    let cfg = TraceConfig::for_perf(&rich, 0x10, &o, false).unwrap();
    assert_eq!(
        cfg.configr & (TRCCONFIGR_CID | TRCCONFIGR_TS | (1 << 4) | (1 << 12)),
        TRCCONFIGR_CID | TRCCONFIGR_TS | (1 << 4) | (1 << 12)
    );
    assert_eq!(
        cfg.ccctlr, 0x100,
        "upstream's default cycle count threshold"
    );

    // Refused as upstream refuses them.
    let bb = PerfOptions::default().with_config(1 << 8);
    assert_eq!(
        TraceConfig::for_perf(&ids, 0x10, &bb, false),
        Err(Etm4xError::Unsupported("branch_broadcast"))
    );
    let ctx2 = PerfOptions::default().with_config(1 << 15);
    assert_eq!(
        TraceConfig::for_perf(&ids, 0x10, &ctx2, false),
        Err(Etm4xError::Unsupported("contextid2"))
    );
    assert!(TraceConfig::for_perf(&ids, 0x10, &ctx2, true).is_ok());
}

#[test]
fn perf_filters_take_comparators_and_stop_points_come_after() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let filters = [
        PerfFilter::Range {
            start: 0x40_1000,
            stop: 0x40_1400,
        },
        PerfFilter::Start(0x40_2000),
    ];
    let opts = PerfOptions {
        filters: &filters,
        ..PerfOptions::default()
    };
    let cfg = TraceConfig::for_perf(&ids, 0x10, &opts, false).unwrap();
    assert_eq!(&cfg.comparators[..3], &[0x40_1000, 0x40_1400, 0x40_2000]);
    assert_eq!(cfg.nr_comparators, 3);
    assert_eq!(cfg.viiectlr, 0b1, "pair 0 included");
    assert_eq!(cfg.vissctlr, 1 << 2, "comparator 2 starts");
    assert_eq!(
        cfg.victlr & TRCVICTLR_SSSTATUS,
        0,
        "starts stopped until the start address"
    );
    let again = PerfOptions {
        filters_started: true,
        ..opts
    };
    let cfg2 = TraceConfig::for_perf(&ids, 0x10, &again, false).unwrap();
    assert_eq!(
        cfg2.victlr & TRCVICTLR_SSSTATUS,
        TRCVICTLR_SSSTATUS,
        "resumes started"
    );

    // stop_at keeps working under perf: its stop points take the next comparators.
    let (cfg, left) = cfg.with_stop_points(&ids, &STOPS, false);
    assert_eq!(left, 0);
    assert_eq!(cfg.nr_comparators, 6);
    assert_eq!(&cfg.comparators[3..6], &STOPS);
    assert_eq!(cfg.vissctlr, (1 << 2) | (0b111 << (16 + 3)));
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    assert_eq!(m.peek(TRCVIIECTLR), 1);
    assert_eq!(m.peek(TRCVISSCTLR), cfg.vissctlr);
    for (n, addr) in cfg.comparators[..6].iter().enumerate() {
        assert_eq!(m.peek(0x400 + 8 * n as u32), *addr as u32, "TRCACVR{n}");
        assert_eq!(m.peek(0x480 + 8 * n as u32), 0x4B00, "TRCACATR{n}");
    }

    // Four pairs: a fifth range has no comparator.
    let five = [PerfFilter::Range {
        start: 0x1000,
        stop: 0x2000,
    }; 5];
    let too_many = PerfOptions {
        filters: &five,
        ..PerfOptions::default()
    };
    assert_eq!(
        TraceConfig::for_perf(&ids, 0x10, &too_many, false),
        Err(Etm4xError::NoComparator)
    );
}

#[test]
fn pause_stops_the_unit_and_resume_restarts_it_with_its_programming() {
    for (iface, hw) in INTERFACES {
        let (mut m, cfg) = tracing_model(iface);
        let programmed =
            [TRCCONFIGR, TRCTRACEIDR, TRCVICTLR, TRCVIIECTLR, TRCVISSCTLR].map(|off| m.peek(off));
        let writes = m.stats().writes;

        let log = Log::default();
        let cpu = FakeCpu(log.clone());
        let mut io = Logged {
            m: &mut m,
            log: log.clone(),
        };
        Etm4x::new(&mut io, hw, T).on_own_cpu(&cpu).pause().unwrap();
        let steps = log.borrow().clone();
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, Step::Prgctlr(_)))
                .count(),
            1,
            "{steps:?}"
        );
        assert!(steps.contains(&Step::Prgctlr(0)), "{steps:?}");
        assert!(steps.contains(&Step::Prohibit), "{steps:?}");
        assert!(!m.enabled() && m.idle(), "paused: {hw:?}");
        if hw == Interface::Mmio {
            assert_ne!(m.peek(TRCPDCR) & TRCPDCR_PU, 0, "power kept while paused");
        }
        assert_eq!(
            m.sw_locked(),
            hw == Interface::Mmio,
            "software lock as found"
        );

        let log = Log::default();
        let cpu = FakeCpu(log.clone());
        let mut io = Logged {
            m: &mut m,
            log: log.clone(),
        };
        Etm4x::new(&mut io, hw, T)
            .on_own_cpu(&cpu)
            .resume()
            .unwrap();
        let steps = log.borrow().clone();
        let en_on = steps.iter().position(|s| *s == Step::Prgctlr(1)).unwrap();
        let allow = steps.iter().position(|s| *s == Step::Allow).unwrap();
        assert!(allow > en_on, "trace allowed once the unit runs: {steps:?}");
        assert!(m.enabled() && !m.idle(), "resumed: {hw:?}");
        let after =
            [TRCCONFIGR, TRCTRACEIDR, TRCVICTLR, TRCVIIECTLR, TRCVISSCTLR].map(|off| m.peek(off));
        assert_eq!(programmed, after, "the programming is kept");
        assert_eq!(m.peek(TRCTRACEIDR), cfg.traceidr);
        // Pause and resume write EN (and the software lock) only.
        let lock_writes = if hw == Interface::Mmio { 4 } else { 0 };
        assert_eq!(m.stats().writes - writes, 2 + lock_writes, "{hw:?}");
        assert_eq!(m.stats().busy_writes, 0);
    }
}

#[test]
fn resume_reports_a_unit_that_never_starts_within_bound() {
    let (mut m, _) = tracing_model(ModelInterface::Mmio);
    Etm4x::new(&mut m, Interface::Mmio, T).pause().unwrap();
    m.set_faults(Etm4xFaults {
        never_starts: true,
        ..Etm4xFaults::default()
    });
    let r = Etm4x::new(&mut m, Interface::Mmio, T).resume();
    assert!(matches!(r, Err(Etm4xError::IdleTimeout(s)) if s & TRCSTATR_IDLE != 0));
    assert!(m.sw_locked(), "software lock restored after the failure");
}

#[test]
fn enable_paused_programs_the_unit_and_leaves_it_stopped_until_resumed() {
    for (iface, hw) in INTERFACES {
        let mut m = Etm4xModel::new(ModelIds::CORTEX_A53, iface);
        let ids = Etm4x::new(&mut m, hw, T).read_ids().unwrap();
        let cfg = TraceConfig::default_for(&ids, 0x24, false).unwrap();
        Etm4x::new(&mut m, hw, T).enable_paused(&cfg).unwrap();
        assert!(!m.enabled() && m.idle(), "programmed, not tracing: {hw:?}");
        assert_eq!(m.peek(TRCTRACEIDR), cfg.traceidr);
        assert_eq!(m.peek(TRCCONFIGR), cfg.configr);
        assert_eq!(m.peek(TRCVICTLR), cfg.victlr);
        assert_eq!(m.peek(TRCPRGCTLR), 0);
        assert!(!m.os_locked());
        Etm4x::new(&mut m, hw, T).resume().unwrap();
        assert!(m.enabled() && !m.idle(), "resumed: {hw:?}");
        assert_eq!(m.peek(TRCTRACEIDR), cfg.traceidr);
    }
}

#[test]
fn sysfs_default_settings_give_the_default_configuration() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let s = SysfsSettings::default();
    assert_eq!(
        s.mode,
        mode::VIEWINST_STARTSTOP,
        "upstream's mode after probe"
    );
    for ts in [false, true] {
        assert_eq!(
            TraceConfig::for_sysfs(&ids, 0x10, ts, &s, false),
            TraceConfig::default_for(&ids, 0x10, ts)
        );
    }
}

#[test]
fn sysfs_mode_excludes_levels_and_keeps_upstreams_bits() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let mut s = SysfsSettings::default();
    s.set_mode(0xFFFF_FFFF);
    assert_eq!(s.mode, mode::ALL, "bits 28 and 29 are not kept");
    s.set_mode(u64::from(mode::EXCL_USER | mode::VIEWINST_STARTSTOP));
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(exlevel_ns(cfg.victlr), 0b001, "EL0 excluded");
    assert_eq!(cfg.victlr & TRCVICTLR_SSSTATUS, TRCVICTLR_SSSTATUS);
    s.set_mode(u64::from(mode::EXCL_KERN | mode::VIEWINST_STARTSTOP));
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(exlevel_ns(cfg.victlr), 0b010, "EL1 excluded");
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, true).unwrap();
    assert_eq!(
        exlevel_ns(cfg.victlr),
        0b110,
        "EL1 and EL2 with the kernel at EL2"
    );
    // Without the start/stop bit the logic starts stopped, as upstream programs it.
    s.set_mode(0);
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(cfg.victlr & TRCVICTLR_SSSTATUS, 0);
    // Branch broadcast on a unit without it: kept in mode, not programmed (upstream).
    let mut plain = ids;
    plain.idr[0] &= !(1 << 5);
    s.set_mode(u64::from(mode::BB | mode::VIEWINST_STARTSTOP));
    let cfg = TraceConfig::for_sysfs(&plain, 0x10, false, &s, false).unwrap();
    assert_eq!(cfg.configr & (1 << 3), 0);
    assert_eq!(s.mode & mode::BB, mode::BB);
}

#[test]
fn sysfs_address_comparators_follow_addr_idx_as_upstream() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let mut s = SysfsSettings::default();
    assert_eq!(s.range(), Ok((0, 0)), "an unset pair reads as zeros");
    assert_eq!(
        s.set_range(0x2000, 0x1000, None),
        Err(SettingError::Invalid)
    );
    s.set_range(0x40_1000, 0x40_1400, None).unwrap();
    assert_eq!(s.range(), Ok((0x40_1000, 0x40_1400)));
    assert_eq!(s.exclude, 0, "a range includes by default");
    // Comparator 1 is half of the range: no start point there; an odd index has no range.
    s.set_addr_idx(1, &ids).unwrap();
    assert_eq!(s.point(false), Err(SettingError::OtherKind));
    assert_eq!(
        s.set_point(0x9000, false, &ids),
        Err(SettingError::OtherKind)
    );
    assert_eq!(s.range(), Err(SettingError::OtherKind));
    assert_eq!(
        s.set_addr_idx(8, &ids),
        Err(SettingError::Invalid),
        "four pairs"
    );
    s.set_addr_idx(2, &ids).unwrap();
    s.set_point(0x40_2000, false, &ids).unwrap();
    assert_eq!(s.point(false), Ok(0x40_2000));
    assert_eq!(s.point(true), Err(SettingError::OtherKind));
    s.set_addr_idx(3, &ids).unwrap();
    s.set_point(0x40_3000, true, &ids).unwrap();

    // Programmed at the comparators the user set, started by default (mode's start/stop bit).
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(
        &cfg.comparators[..4],
        &[0x40_1000, 0x40_1400, 0x40_2000, 0x40_3000]
    );
    assert_eq!(cfg.viiectlr, 0b1);
    assert_eq!(cfg.vissctlr, (1 << 2) | (1 << (16 + 3)));
    assert_eq!(cfg.victlr & TRCVICTLR_SSSTATUS, TRCVICTLR_SSSTATUS);
    // The crash path's stop points take the comparators after them.
    let (cfg, left) = cfg.with_stop_points(&ids, &STOPS, false);
    assert_eq!(
        left, 0,
        "eight comparators, four taken: the three stop points fit"
    );
    assert_eq!(cfg.nr_comparators, 7);
    assert_eq!(&cfg.comparators[4..7], &STOPS);
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    assert_eq!(m.peek(TRCVIIECTLR), 1);

    // reset: nothing set, addr_idx 0; mode cleared with a non-zero value, the start/stop bit
    // back on a unit with comparators.
    s.set_mode(u64::from(mode::EXCL_USER));
    s.reset(0, &ids);
    assert_eq!(s.mode, mode::EXCL_USER | mode::VIEWINST_STARTSTOP);
    assert_eq!(s.addr_idx, 0);
    assert_eq!(s.range(), Ok((0, 0)));
    s.reset(1, &ids);
    assert_eq!(s, SysfsSettings::default());

    // With EL0 excluded the comparators do not match there either (upstream's access type):
    // TRCACATR.EXLEVEL_NS has EL0 and EL2 set, EXLEVEL_S the implemented Secure levels.
    s.set_range(0x40_1000, 0x40_1400, None).unwrap();
    s.set_mode(u64::from(mode::EXCL_USER | mode::VIEWINST_STARTSTOP));
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(cfg.acatr, 0x5B00);
    let (cfg, _) = cfg.with_stop_points(&ids, &STOPS, false);
    assert_eq!(cfg.acatr, 0x5B00, "the stop points' comparators too");
}

#[test]
fn sysfs_exclude_ranges_single_addresses_and_comparator_levels_as_upstream() {
    let mut m = Etm4xModel::cortex_a57();
    let ids = ids_of(&mut m);
    let mut s = SysfsSettings::default();
    // A third value excludes the range; mode's exclude bit flips the pair addr_idx selects.
    s.set_addr_idx(2, &ids).unwrap();
    s.set_range(0x40_1000, 0x40_1400, Some(true)).unwrap();
    assert_eq!(s.exclude, 0b10);
    s.set_mode(u64::from(mode::VIEWINST_STARTSTOP));
    assert_eq!(
        s.exclude, 0,
        "mode without the exclude bit makes the pair include"
    );
    s.set_mode(u64::from(mode::VIEWINST_STARTSTOP | mode::EXCLUDE));
    assert_eq!(s.exclude, 0b10);
    // With mode's exclude bit set, a range written without a third value excludes too.
    s.set_addr_idx(0, &ids).unwrap();
    s.set_range(0x50_0000, 0x50_0FFC, None).unwrap();
    assert_eq!(s.exclude, 0b11);
    s.set_range(0x50_0000, 0x50_0FFC, Some(false)).unwrap();
    assert_eq!(s.exclude, 0b10);
    // A single address, and its kind kept apart from the others.
    s.set_addr_idx(5, &ids).unwrap();
    assert_eq!(s.single(), Ok(0));
    s.set_single(0x40_5000).unwrap();
    assert_eq!(s.single(), Ok(0x40_5000));
    assert_eq!(s.point(false), Err(SettingError::OtherKind));
    s.set_addr_idx(2, &ids).unwrap();
    assert_eq!(s.set_single(0x1), Err(SettingError::OtherKind));
    // The levels a comparator does not match at: seven bits.
    assert_eq!(s.set_exlevel(0x80), Err(SettingError::Invalid));
    s.set_exlevel(0x10).unwrap();
    assert_eq!(s.exlevel(), 0x10);
    // addr_cmp_view from either comparator of a pair shows the pair.
    s.set_addr_idx(3, &ids).unwrap();
    assert_eq!(
        s.cmp_view(),
        CmpView {
            index: 2,
            setting: AddrSetting::Range(0x40_1000),
            range_end: 0x40_1400,
            exclude: true,
            ctrl: 0,
        }
    );
    s.set_addr_idx(2, &ids).unwrap();
    assert_eq!(s.cmp_view().ctrl, 0x1000);
    s.set_addr_idx(7, &ids).unwrap();
    assert_eq!(s.cmp_view().setting, AddrSetting::None);

    // Programmed: pair 0 includes, pair 1 excludes, comparator 5 holds its address selected
    // nowhere, comparator 2 also leaves out Non-secure EL0 (0x10 << 8).
    let cfg = TraceConfig::for_sysfs(&ids, 0x10, false, &s, false).unwrap();
    assert_eq!(cfg.viiectlr, 0b1 | (0b10 << 16));
    assert_eq!((cfg.vissctlr, cfg.nr_comparators), (0, 6));
    assert_eq!(cfg.comparators[5], 0x40_5000);
    Etm4x::new(&mut m, Interface::Mmio, T).enable(&cfg).unwrap();
    assert_eq!(m.peek(TRCVIIECTLR), 0b1 | (0b10 << 16));
    assert_eq!(m.peek(0x480 + 8 * 2), cfg.acatr | 0x1000, "TRCACATR2");
    assert_eq!(m.peek(0x480 + 8 * 3), cfg.acatr, "TRCACATR3");
    assert_eq!(m.peek(0x400 + 8 * 5), 0x40_5000, "TRCACVR5");
    // reset forgets all of it.
    s.reset(1, &ids);
    assert_eq!(s, SysfsSettings::default());
}

/// What the driver records at enable, for a dump no panic-time step completes, is what the panic
/// path reads back from the unit so programmed (the registers a decoder uses), and says it was
/// not read: the sysfs filter with stop points, perf's filters, on both interfaces.
#[test]
fn the_configuration_recorded_at_enable_is_what_the_unit_holds() {
    let mut set = SysfsSettings::default();
    set.set_mode(u64::from(mode::VIEWINST_STARTSTOP | mode::EXCL_USER));
    for (model_iface, iface) in INTERFACES {
        let mut m = Etm4xModel::new(ModelIds::CORTEX_A53, model_iface);
        let ids = Etm4x::new(&mut m, iface, T).read_ids().unwrap();
        let mut set = set;
        set.set_addr_idx(2, &ids).unwrap();
        set.set_range(0xFFFF_8000_8010_0000, 0xFFFF_8000_8010_0FFC, None)
            .unwrap();
        set.set_addr_idx(5, &ids).unwrap();
        set.set_point(0xFFFF_8000_8020_0000, false, &ids).unwrap();
        let sysfs = TraceConfig::for_sysfs(&ids, 0x14, true, &set, false).unwrap();
        let perf_opts = PerfOptions {
            filters: &[PerfFilter::Range {
                start: 0x40_0000,
                stop: 0x40_1000,
            }],
            ..PerfOptions::default()
        };
        let perf = TraceConfig::for_perf(&ids, 0x16, &perf_opts, false).unwrap();
        for (cfg, session) in [(sysfs, SAVED_SESSION_SYSFS), (perf, SAVED_SESSION_PERF)] {
            let (cfg, _) = cfg.with_stop_points(&ids, &STOPS[..2], false);
            Etm4x::new(&mut m, iface, T).enable(&cfg).unwrap();
            let recorded = cfg.recorded_state(&ids, 3, session);
            let read = Etm4x::new(&mut m, iface, T).panic_save(3);
            assert_eq!(read.outcome, SaveOutcome::Ok);
            assert_eq!(
                (recorded.trcconfigr, recorded.trctraceidr, recorded.idr),
                (read.trcconfigr, read.trctraceidr, read.idr),
                "{iface:?}: configuration and ID registers"
            );
            assert_eq!(
                (recorded.authstatus, recorded.devarch),
                (read.authstatus, read.devarch)
            );
            // No stop point was reached: the logic is where the enable put it.
            assert_eq!(recorded.trcvictlr, read.trcvictlr, "{iface:?}: TRCVICTLR");
            assert_eq!(
                (recorded.trcvissctlr, recorded.trcviiectlr),
                (read.trcvissctlr, read.trcviiectlr)
            );
            assert_eq!(recorded.cmp_saved, read.cmp_saved, "{iface:?}: comparators");
            assert_eq!((recorded.acvr, recorded.acatr), (read.acvr, read.acatr));
            assert_eq!(
                recorded.perf_metadata(-1),
                read.perf_metadata(-1),
                "{iface:?}: perf's metadata"
            );
            assert!(recorded.programmed_only() && !read.programmed_only());
            let want = if session == SAVED_SESSION_PERF {
                "perf"
            } else {
                "sysfs"
            };
            assert_eq!(recorded.session(), Some(want));
            assert_eq!(
                recorded.hw_stop().map(|h| (h.stop_points, h.stopped)),
                Some((2, None)),
                "whether a stop point was reached is not known at enable"
            );
            let mut buf = [0u8; SAVED_STATE_SIZE];
            recorded.encode(&mut buf).unwrap();
            assert_eq!(SavedState::decode(&buf), Ok(recorded));
            Etm4x::new(&mut m, iface, T).disable().unwrap();
        }
    }
}

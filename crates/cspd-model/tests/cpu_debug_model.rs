//! The CPU debug panic sequence (`cspd_hw::cpu_debug`) against the register-level model.
//!
//! Each test sets up a CPU the way the Arm documents describe one (powered, powered down, a
//! power controller that ignores requests, double-locked, OS-locked, prohibited, halted) and
//! checks the record the sequence produces, the bound on accesses and delays, that no access
//! would have faulted, and that the OS lock and `EDPRCR` are back as found.

use cspd_hw::access::RawFrame;
use cspd_hw::cpu_debug::read_arch;
use cspd_hw::cpu_debug::sample_cpu;
use cspd_hw::cpu_debug::sample_cpu_as_found;
use cspd_hw::cpu_debug::ArchData;
use cspd_hw::cpu_debug::ArchError;
use cspd_hw::cpu_debug::CpuSample;
use cspd_hw::cpu_debug::Edprsr;
use cspd_hw::cpu_debug::Outcome;
use cspd_hw::cpu_debug::PcKind;
use cspd_hw::cpu_debug::FLAG_AS_FOUND;
use cspd_hw::cpu_debug::FLAG_BUDGET_CUT;
use cspd_hw::cpu_debug::FLAG_WAS_POWERED_DOWN;
use cspd_hw::cpu_debug::MAX_ACCESSES_PER_SAMPLE;
use cspd_hw::cpu_debug::MAX_DELAYS_PER_SAMPLE;
use cspd_hw::cpu_debug::POWERED_OFF_REASON;
use cspd_hw::cpu_debug::POWER_UP_DELAY_US;
use cspd_hw::cpu_debug::POWER_UP_POLLS;
use cspd_hw::cpu_debug::RECORD_LEN;

use cspd_model::cpu_debug::CpuDebugConfig;
use cspd_model::cpu_debug::CpuDebugModel;
use cspd_model::cpu_debug::CpuState;
use cspd_model::cpu_debug::PowerMode;
use cspd_model::cpu_debug::UNKNOWN;
use cspd_model::cpu_debug::{
    EDCIDSR, EDOSLAR, EDPCSR, EDPCSR_HI, EDPRCR, EDPRSR, EDVIDSR, LAR,
    PRCR_CORENPDRQ as EDPRCR_CORENPDRQ,
};

const KERNEL_PC: u64 = 0xFFFF_8000_0812_3454;

fn kernel_state() -> CpuState {
    let mut s = CpuState::aarch64_el1(KERNEL_PC);
    s.context_id = 0x0000_0042;
    s
}

fn arch_of(m: &mut CpuDebugModel, pc64: bool) -> ArchData {
    read_arch(m, pc64).expect("model implements PC sampling")
}

/// Samples and checks what every sample must satisfy, whatever the outcome.
fn sample_checked(m: &mut CpuDebugModel, cpu: u32, arch: &ArchData) -> CpuSample {
    sample_within(m, cpu, arch, MAX_DELAYS_PER_SAMPLE)
}

/// Like [`sample_checked`], with a share of the phase budget of `max_delays` delays.
fn sample_within(m: &mut CpuDebugModel, cpu: u32, arch: &ArchData, max_delays: u32) -> CpuSample {
    let os_before = m.os_locked();
    let prcr_before = m.edprcr();
    let powered_before = m.powered();
    m.reset_counts();
    let s = sample_cpu(m, cpu, arch, max_delays);
    assert_eq!(m.faults(), 0, "an access would have faulted: {s:?}");
    assert!(
        m.delays() <= max_delays,
        "{} delays, share {max_delays}",
        m.delays()
    );
    assert_eq!(m.ignored_writes(), 0, "a write hit the software lock");
    assert!(m.accesses() <= MAX_ACCESSES_PER_SAMPLE, "{}", m.accesses());
    assert!(m.delays() <= MAX_DELAYS_PER_SAMPLE, "{}", m.delays());
    assert_eq!(m.edprcr(), prcr_before, "EDPRCR not restored");
    assert_eq!(s.edprcr_saved, prcr_before);
    assert!(m.sw_locked(), "software lock left open");
    if powered_before {
        assert_eq!(m.os_locked(), os_before, "OS lock not as found");
    }
    // Every record survives the trip through the dump.
    let mut buf = [0u8; RECORD_LEN];
    assert_eq!(s.encode(&mut buf), Ok(RECORD_LEN));
    assert_eq!(CpuSample::decode(&buf), Ok(s));
    s
}

#[test]
fn powered_core_aarch64_sample() {
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 0, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.kind, PcKind::AArch64);
    assert_eq!(s.pc.pc, KERNEL_PC);
    assert_eq!(s.edcidsr, 0x42);
    // Non-secure (bit 31) + HV (bit 28), EL1: 0x9000_0000.
    assert_eq!(s.edvidsr, 0x9000_0000);
    assert!(!s.os_lock_was_locked());
    assert_eq!(s.flags & FLAG_WAS_POWERED_DOWN, 0);
    // The sequence, register by register: LAR unlock and lock; EDPRCR save, request,
    // no-powerdown request, restore; EDPRSR first poll and re-check; each sample register once.
    assert_eq!(m.writes(LAR), 2);
    assert_eq!(m.reads(EDPRCR), 1);
    assert_eq!(m.writes(EDPRCR), 3);
    assert_eq!(m.reads(EDPRSR), 2);
    for reg in [EDPCSR, EDPCSR_HI, EDCIDSR, EDVIDSR] {
        assert_eq!(m.reads(reg), 1, "{reg:#x}");
    }
    assert_eq!(m.writes(EDOSLAR), 0);
    assert_eq!(m.accesses(), 12);
    assert_eq!(m.delays(), 0);
    assert_eq!(
        s.report().to_string(),
        "CPU[0]:\n EDPRSR:  00000001 (Power:On DLK:Unlock)\n EDPCSR:  0xffff800008123454\n \
         EDCIDSR: 00000042\n EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)"
    );
}

#[test]
fn latched_registers_come_from_the_same_sample() {
    // Reading EDPCSR latches the others: a second sample of a new state must see only the new
    // state, never a mix (which is what reading EDCIDSR/EDVIDSR before EDPCSR would give).
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    let arch = arch_of(&mut m, true);
    let mut first = kernel_state();
    first.vmid = 0x33;
    m.set_cpu_state(first);
    let a = sample_checked(&mut m, 1, &arch);
    let mut second = CpuState::aarch64_el1(0xFFFF_8000_0900_0000);
    second.context_id = 0x77;
    second.el = 2;
    m.set_cpu_state(second);
    let b = sample_checked(&mut m, 1, &arch);
    assert_eq!(a.pc.pc, KERNEL_PC);
    assert_eq!(a.edcidsr, 0x42);
    // NS + HV + VMID 0x33 sampled at EL1.
    assert_eq!(a.edvidsr, 0x9000_0033);
    assert_eq!(b.pc.pc, 0xFFFF_8000_0900_0000);
    assert_eq!(b.edcidsr, 0x77);
    // NS + E2 + HV; the VMID is not sampled at EL2.
    assert_eq!(b.edvidsr, 0xD000_0000);
    assert_eq!(
        b.vidsr().unwrap().to_string(),
        "EDVIDSR: d0000000 (State:Non-secure Mode:EL2 Width:64bits VMID:0)"
    );
}

#[test]
fn os_locked_core_is_sampled_and_relocked() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.os_locked = true;
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 3, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.pc, KERNEL_PC);
    assert!(s.os_lock_was_locked());
    assert!(Edprsr(s.edprsr).os_locked());
    // Unlocked once, locked again once.
    assert_eq!(m.writes(EDOSLAR), 2);
    assert!(m.os_locked());
    assert_eq!(m.accesses(), 14);
}

#[test]
fn powered_down_core_is_powered_sampled_and_let_down_again() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::OnRequest { delay: 5 };
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    assert!(!m.powered());
    let s = sample_checked(&mut m, 4, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.pc, KERNEL_PC);
    assert_ne!(s.flags & FLAG_WAS_POWERED_DOWN, 0);
    // First poll: PU clear, SPD set (powered down since the last read).
    assert_eq!(s.edprsr_first, 0x2);
    // Power-up is a cold reset of the core domain: the OS lock came up set and is set again.
    assert!(s.os_lock_was_locked());
    assert!(m.os_locked());
    // EDPRCR is back to 0, so the low-power core went down again.
    assert!(!m.powered());
    assert!(s.power_polls > 1 && s.power_polls <= POWER_UP_POLLS + 1);
    assert_eq!(m.delays(), s.power_polls - 1);
}

#[test]
fn never_powering_core_gives_a_powered_down_record_within_the_bound() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::Ignores;
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 5, &arch);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert_eq!(s.pc.kind, PcKind::None);
    // One attempt: the first read plus POWER_UP_POLLS polls, with a delay before each poll.
    assert_eq!(s.power_polls, POWER_UP_POLLS + 1);
    assert_eq!(m.reads(EDPRSR), POWER_UP_POLLS + 1);
    assert_eq!(m.delays(), POWER_UP_POLLS);
    assert_eq!(
        m.delayed_us(),
        u64::from(POWER_UP_POLLS) * u64::from(POWER_UP_DELAY_US)
    );
    // Nothing in the core power domain was touched.
    assert_eq!(m.reads(EDPCSR), 0);
    assert_eq!(m.writes(EDOSLAR), 0);
    assert!(!m.powered());
    let text = s.report().to_string();
    assert!(text.contains("(Power:Off DLK:Unlock)"), "{text}");
    assert!(
        text.ends_with("not sampled: powered down (EDPRSR.PU never set)"),
        "{text}"
    );
}

#[test]
fn the_budget_share_cuts_the_power_up_wait_and_says_so() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::Ignores;
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = sample_within(&mut m, 2, &arch, 5);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert_ne!(s.flags & FLAG_BUDGET_CUT, 0);
    assert!(s.budget_cut());
    assert_eq!(m.delays(), 5);
    assert_eq!(s.power_polls, 6);
    let text = s.report().to_string();
    assert!(
        text.ends_with(
            "not sampled: powered down (EDPRSR.PU never set); the wait was cut short by the CPU \
             debug time budget"
        ),
        "{text}"
    );
    // The hardware bound, not the budget, ends a wait given more than it: no flag.
    let mut m = CpuDebugModel::new(cfg);
    let s = sample_within(&mut m, 2, &arch, MAX_DELAYS_PER_SAMPLE * 10);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert_eq!(s.flags & FLAG_BUDGET_CUT, 0);
    assert_eq!(m.delays(), POWER_UP_POLLS);
}

#[test]
fn a_powered_core_needs_no_budget() {
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = sample_within(&mut m, 0, &arch, 0);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.pc, KERNEL_PC);
    assert_eq!(m.delays(), 0);
    // A core that needs time to power up is not waited for without a share.
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::OnRequest { delay: 5 };
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = sample_within(&mut m, 1, &arch, 0);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert!(s.budget_cut());
    assert_eq!(m.delays(), 0);
}

#[test]
fn a_cpu_the_budget_did_not_reach_is_named() {
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    let arch = arch_of(&mut m, true);
    m.reset_counts();
    let s = CpuSample::not_reached(7, &arch);
    assert_eq!(m.accesses(), 0);
    assert_eq!(s.outcome, Outcome::NotReached);
    assert_eq!(Outcome::from_code(6), Some(Outcome::NotReached));
    let mut buf = [0u8; RECORD_LEN];
    assert_eq!(s.encode(&mut buf), Ok(RECORD_LEN));
    assert_eq!(CpuSample::decode(&buf), Ok(s));
    assert_eq!(
        s.report().to_string(),
        "CPU[7]:\n not sampled: not reached (the CPU debug phase's time budget was spent)"
    );
}

#[test]
fn double_locked_core_is_not_touched() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.double_locked = true;
    cfg.os_locked = true;
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 6, &arch);
    assert_eq!(s.outcome, Outcome::DoubleLocked);
    assert!(Edprsr(s.edprsr).double_locked());
    assert_eq!(m.reads(EDPCSR), 0);
    assert_eq!(m.writes(EDOSLAR), 0);
    assert!(m.double_locked() && m.os_locked());
    assert!(s
        .report()
        .to_string()
        .contains("EDPRSR:  00000061 (Power:On DLK:Lock)"));
}

#[test]
fn prohibited_and_halted_cores_do_not_read_unknown_registers() {
    for halted in [false, true] {
        let mut cfg = CpuDebugConfig::v8();
        cfg.os_locked = true;
        cfg.prohibited = !halted;
        cfg.halted = halted;
        let mut m = CpuDebugModel::new(cfg);
        m.set_cpu_state(kernel_state());
        let arch = arch_of(&mut m, true);
        let s = sample_checked(&mut m, 7, &arch);
        let want = if halted {
            Outcome::DebugState
        } else {
            Outcome::Prohibited
        };
        assert_eq!(s.outcome, want);
        assert_eq!(s.edpcsr, 0xFFFF_FFFF);
        assert_eq!(m.reads(EDPCSR), 1);
        for reg in [EDPCSR_HI, EDCIDSR, EDVIDSR] {
            assert_eq!(m.reads(reg), 0, "{reg:#x}");
        }
        // The OS lock was cleared to read EDPCSR and is set again.
        assert!(s.os_lock_was_locked() && m.os_locked());
        assert_eq!(s.pc.kind, PcKind::None);
    }
}

#[test]
fn edprcr_is_restored_as_found() {
    // Someone (a debugger, the idle driver) had set CORENPDRQ: it must stay set, and COREPURQ
    // must not be left behind.
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    m.write32(LAR, cspd_hw::access::CS_UNLOCK_KEY);
    m.write32(EDPRCR, EDPRCR_CORENPDRQ);
    m.write32(LAR, 0);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 0, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.edprcr_saved, EDPRCR_CORENPDRQ);
    assert_eq!(m.edprcr(), EDPRCR_CORENPDRQ);
}

#[test]
fn flaky_power_is_retried_within_the_bound() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::Flaky { delay: 2, drops: 1 };
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 1, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.pc, KERNEL_PC);
    // Two power-up requests (the first lost power again).
    assert_eq!(m.writes(EDPRCR), 5);

    // A core that keeps dropping: a powered-down record, still within the bound.
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::Flaky {
        delay: 2,
        drops: 100,
    };
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 1, &arch);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert_eq!(m.reads(EDPCSR), 0);
}

#[test]
fn v7_arm_and_thumb_samples_are_calibrated() {
    // Armv7-like frame (PCSROffset 0) on a 32-bit kernel: the model returns address + 8 (Arm)
    // or (address + 4) | 1 (Thumb); the driver must give the address back.
    for (pc, thumb, kind) in [
        (0xC010_2040u32, false, PcKind::Arm),
        (0xC010_2046u32, true, PcKind::Thumb),
    ] {
        let mut m = CpuDebugModel::new(CpuDebugConfig::v7());
        m.set_cpu_state(CpuState::aarch32_el1(pc, thumb));
        let arch = arch_of(&mut m, false);
        assert!(arch.pc_has_offset());
        let s = sample_checked(&mut m, 0, &arch);
        assert_eq!(s.outcome, Outcome::Sampled);
        assert_eq!(s.pc.kind, kind);
        assert_eq!(s.pc.pc, u64::from(pc));
        assert_eq!(s.edpcsr, if thumb { pc + 5 } else { pc + 8 });
        // No EDPCSR_HI on a 32-bit kernel.
        assert_eq!(m.reads(EDPCSR_HI), 0);
        assert_eq!(s.vidsr().unwrap().width(), 32);
    }
}

#[test]
fn v8_aarch32_sample_has_no_offset_and_no_state() {
    // A compat (AArch32) task at EL0 on an Armv8 core with PCSROffset 2.
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    let mut st = CpuState::aarch32_el1(0x0001_0234, true);
    st.el = 0;
    m.set_cpu_state(st);
    let arch = arch_of(&mut m, true);
    let s = sample_checked(&mut m, 2, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.kind, PcKind::AArch32NoState);
    assert_eq!(s.pc.pc, 0x0001_0234);
    // EDPCSR_HI was read (64-bit kernel) but is UNKNOWN for AArch32 and not used.
    assert_eq!(s.edpcsr_hi, UNKNOWN);
    let v = s.vidsr().unwrap();
    assert_eq!(v.width(), 32);
    let text = s.report().to_string();
    assert!(
        text.contains("AArch32 instruction set state not sampled"),
        "{text}"
    );
    assert!(text.contains(" EDPCSR:  0x10234"), "{text}");
}

#[test]
fn probe_fails_cleanly_without_pc_sampling() {
    let mut m = CpuDebugModel::new(CpuDebugConfig::not_implemented());
    assert_eq!(
        read_arch(&mut m, true),
        Err(ArchError::NoPcSampling { pcsample: 0 })
    );
    assert!(m.sw_locked());
    assert_eq!(m.faults(), 0);
    // A 32-bit kernel cannot use an Armv8 frame.
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    assert_eq!(read_arch(&mut m, false), Err(ArchError::AArch32NotSampled));
    // The record for such a CPU still says why.
    let n = CpuSample::not_implemented(9, 0, 2);
    assert_eq!(n.outcome, Outcome::NotImplemented);
}

#[test]
fn every_cpu_gets_a_record() {
    // Four CPUs, each in a different condition: none is skipped, each says what happened.
    let mut cfgs = [CpuDebugConfig::v8(); 4];
    cfgs[1].core_on = false;
    cfgs[1].power = PowerMode::Ignores;
    cfgs[2].double_locked = true;
    cfgs[3].prohibited = true;
    let mut models = cfgs.map(CpuDebugModel::new);
    let mut outcomes = Vec::new();
    for (cpu, m) in models.iter_mut().enumerate() {
        m.set_cpu_state(kernel_state());
        let arch = arch_of(m, true);
        let s = sample_checked(m, cpu as u32, &arch);
        assert_eq!(s.cpu, cpu as u32);
        outcomes.push(s.outcome);
    }
    assert_eq!(
        outcomes,
        [
            Outcome::Sampled,
            Outcome::PoweredDown,
            Outcome::DoubleLocked,
            Outcome::Prohibited
        ]
    );
}

#[test]
fn model_faults_on_unsafe_accesses() {
    // The model itself: sample registers fault while the core is off, double-locked or
    // OS-locked, so the checks above mean something.
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    let mut m = CpuDebugModel::new(cfg);
    m.read32(EDPCSR);
    assert_eq!(m.faults(), 1);
    let mut cfg = CpuDebugConfig::v8();
    cfg.os_locked = true;
    let mut m = CpuDebugModel::new(cfg);
    m.read32(EDPCSR);
    assert_eq!(m.faults(), 1);
    // Writes are ignored while the software lock is set.
    let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
    m.write32(EDPRCR, 8);
    assert_eq!(m.edprcr(), 0);
    assert_eq!(m.ignored_writes(), 1);
}

/// Samples as a capture kernel does and checks what every such sample must satisfy: no power
/// request, `EDPRCR` untouched, no delay, the OS lock as found, the record's round trip.
fn as_found_checked(m: &mut CpuDebugModel, arch: &ArchData) -> CpuSample {
    let os_before = m.os_locked();
    let prcr_before = m.edprcr();
    let powered_before = m.powered();
    m.reset_counts();
    let mut s = sample_cpu_as_found(m, 0, arch);
    assert_eq!(m.faults(), 0, "an access would have faulted: {s:?}");
    assert_eq!(m.writes(EDPRCR), 0, "a power request was made");
    assert_eq!(m.edprcr(), prcr_before);
    assert_eq!(m.powered(), powered_before, "the core's power changed");
    assert_eq!(m.delays(), 0);
    assert!(m.accesses() <= 10, "{} accesses", m.accesses());
    assert!(m.sw_locked(), "software lock left open");
    assert_eq!(m.os_locked(), os_before, "OS lock not as found");
    assert_ne!(s.flags & FLAG_AS_FOUND, 0);
    s.set_mpidr(Some(0x8000_0100));
    let mut buf = [0u8; RECORD_LEN];
    assert_eq!(s.encode(&mut buf), Ok(RECORD_LEN));
    assert_eq!(CpuSample::decode(&buf), Ok(s));
    s
}

#[test]
fn a_capture_kernel_samples_a_hung_core_where_it_is() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.os_locked = true;
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = as_found_checked(&mut m, &arch);
    assert_eq!(s.outcome, Outcome::Sampled);
    assert_eq!(s.pc.pc, KERNEL_PC);
    assert_eq!(s.edcidsr, 0x42);
    assert!(s.os_lock_was_locked());
    // LAR unlock, EDPRCR and EDPRSR read, EDOSLAR clear, the four sample registers, EDOSLAR set,
    // LAR lock.
    assert_eq!(m.accesses(), 10);
}

#[test]
fn a_capture_kernel_names_a_powered_off_core_and_leaves_it_off() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.core_on = false;
    cfg.power = PowerMode::OnRequest { delay: 1 };
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(kernel_state());
    let arch = arch_of(&mut m, true);
    let s = as_found_checked(&mut m, &arch);
    assert_eq!(s.outcome, Outcome::PoweredDown);
    assert!(!m.powered(), "the capture kernel powered the core up");
    assert_eq!(m.reads(EDPCSR), 0);
    assert_eq!(s.reason(), POWERED_OFF_REASON);
    assert!(s
        .report()
        .to_string()
        .ends_with(&format!(" not sampled: {POWERED_OFF_REASON}")));
    // The panic path's sample of the same core powers it up: the reasons differ.
    let p = sample_checked(&mut m, 0, &arch);
    assert_eq!(p.outcome, Outcome::Sampled);
}

#[test]
fn a_capture_kernel_does_not_read_a_double_locked_core() {
    let mut cfg = CpuDebugConfig::v8();
    cfg.double_locked = true;
    let mut m = CpuDebugModel::new(cfg);
    let arch = arch_of(&mut m, true);
    let s = as_found_checked(&mut m, &arch);
    assert_eq!(s.outcome, Outcome::DoubleLocked);
    assert_eq!(m.reads(EDPCSR), 0);
    assert_eq!(m.writes(EDOSLAR), 0);
}

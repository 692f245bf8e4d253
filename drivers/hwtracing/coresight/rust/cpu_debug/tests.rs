// SPDX-License-Identifier: GPL-2.0

//! The CPU debug panic sampling (`cpu_debug/hw.rs`) against the register-level model.

use kernel::prelude::*;

/// A fixed buffer that collects formatted text, for checking what the driver prints.
struct TextBuf {
    buf: [u8; 256],
    len: usize,
}

impl TextBuf {
    /// Returns an empty buffer.
    fn new() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }

    /// Returns the text written so far.
    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl core::fmt::Write for TextBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(core::fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[kunit_tests(coresight_cpu_debug_hw)]
mod kunit {
    use super::TextBuf;
    use crate::hw::{
        read_arch,
        sample_cpu,
        MAX_ACCESSES_PER_SAMPLE,
        MAX_DELAYS_PER_SAMPLE,
        POWER_UP_POLLS, //
    };
    use kernel::coresight::panic_dump::format::cpu_debug::{
        CpuSample,
        Outcome,
        PcKind,
        FLAG_BUDGET_CUT,
        FLAG_WAS_POWERED_DOWN,
        RECORD_LEN, //
    };

    use crate::model::{
        CpuDebugConfig,
        CpuDebugModel,
        CpuState,
        PowerMode, //
        EDOSLAR,
        EDPCSR,
        EDPRCR,
        EDPRSR,
        LAR,
    };
    use core::fmt::Write;
    use kernel::prelude::*;

    const KERNEL_PC: u64 = 0xFFFF_8000_0812_3454;

    fn kernel_state() -> CpuState {
        let mut s = CpuState::aarch64_el1(KERNEL_PC);
        s.context_id = 0x42;
        s
    }

    /// Samples `m` as the driver does at panic and checks what every sample must satisfy: no
    /// access would have faulted, the bounds hold, `EDPRCR` and the locks are back as found,
    /// and the record survives its encoding.
    fn sample_checked(m: &mut CpuDebugModel, cpu: u32) -> Option<CpuSample> {
        let arch = read_arch(m, true).ok()?;
        let os_before = m.os_locked();
        let prcr_before = m.edprcr();
        let powered_before = m.powered();
        m.reset_counts();
        let s = sample_cpu(m, cpu, &arch, MAX_DELAYS_PER_SAMPLE);
        let mut buf = [0u8; RECORD_LEN];
        let ok = m.faults() == 0
            && m.ignored_writes() == 0
            && m.accesses() <= MAX_ACCESSES_PER_SAMPLE
            && m.delays() <= MAX_DELAYS_PER_SAMPLE
            && m.edprcr() == prcr_before
            && s.edprcr_saved == prcr_before
            && m.sw_locked()
            && (!powered_before || m.os_locked() == os_before)
            && s.encode(&mut buf) == Ok(RECORD_LEN)
            && CpuSample::decode(&buf) == Ok(s);
        ok.then_some(s)
    }

    #[test]
    fn powered_core_is_sampled_and_reported_like_the_c_driver() -> Result {
        let mut m = CpuDebugModel::new(CpuDebugConfig::v8());
        m.set_cpu_state(kernel_state());
        let s = sample_checked(&mut m, 0);
        assert!(s.is_some());
        let s = s.ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert!(s.pc.kind == PcKind::AArch64);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert_eq!(s.edcidsr, 0x42);
        assert_eq!(s.edvidsr, 0x9000_0000);
        // Unlock and lock; save, request, no-powerdown request, restore; one sample read.
        assert_eq!(m.writes(LAR), 2);
        assert_eq!(m.reads(EDPRCR), 1);
        assert_eq!(m.writes(EDPRCR), 3);
        assert_eq!(m.reads(EDPRSR), 2);
        assert_eq!(m.reads(EDPCSR), 1);
        assert_eq!(m.accesses(), 12);
        let mut text = TextBuf::new();
        assert!(write!(text, "{}", s.report()).is_ok());
        assert!(
            text.bytes()
                == b"CPU[0]:\n EDPRSR:  00000001 (Power:On DLK:Unlock)\n \
                     EDPCSR:  0xffff800008123454\n EDCIDSR: 00000042\n \
                     EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)"
        );
        Ok(())
    }

    #[test]
    fn os_locked_core_is_sampled_and_locked_again() -> Result {
        let mut cfg = CpuDebugConfig::v8();
        cfg.os_locked = true;
        let mut m = CpuDebugModel::new(cfg);
        m.set_cpu_state(kernel_state());
        let s = sample_checked(&mut m, 3).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert!(s.os_lock_was_locked());
        assert_eq!(m.writes(EDOSLAR), 2);
        assert!(m.os_locked());
        Ok(())
    }

    #[test]
    fn powered_down_core_is_powered_sampled_and_let_down_again() -> Result {
        let mut cfg = CpuDebugConfig::v8();
        cfg.core_on = false;
        cfg.power = PowerMode::OnRequest { delay: 5 };
        let mut m = CpuDebugModel::new(cfg);
        m.set_cpu_state(kernel_state());
        let s = sample_checked(&mut m, 4).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert!(s.flags & FLAG_WAS_POWERED_DOWN != 0);
        assert_eq!(s.edprsr_first, 0x2);
        assert!(m.os_locked());
        assert!(!m.powered());
        assert!(s.power_polls > 1 && s.power_polls <= POWER_UP_POLLS + 1);
        Ok(())
    }

    #[test]
    fn core_that_never_powers_up_is_given_up_within_the_bound() -> Result {
        let mut cfg = CpuDebugConfig::v8();
        cfg.core_on = false;
        cfg.power = PowerMode::Ignores;
        let mut m = CpuDebugModel::new(cfg);
        let s = sample_checked(&mut m, 5).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::PoweredDown);
        assert!(s.pc.kind == PcKind::None);
        assert_eq!(s.power_polls, POWER_UP_POLLS + 1);
        assert_eq!(m.delays(), POWER_UP_POLLS);
        assert_eq!(m.reads(EDPCSR), 0);
        assert!(!m.powered());
        let mut text = TextBuf::new();
        assert!(write!(text, "{}", s.report()).is_ok());
        assert!(text
            .bytes()
            .ends_with(b"not sampled: powered down (EDPRSR.PU never set)"));
        Ok(())
    }

    #[test]
    fn the_phase_budget_cuts_the_wait_and_a_cpu_it_misses_is_named() -> Result {
        let mut cfg = CpuDebugConfig::v8();
        cfg.core_on = false;
        cfg.power = PowerMode::Ignores;
        let mut m = CpuDebugModel::new(cfg);
        let arch = read_arch(&mut m, true).map_err(|_| EINVAL)?;
        m.reset_counts();
        // A share of 4 delays of the phase's budget: the wait ends there, and says why.
        let s = sample_cpu(&mut m, 3, &arch, 4);
        assert!(s.outcome == Outcome::PoweredDown);
        assert_eq!(s.flags & FLAG_BUDGET_CUT, FLAG_BUDGET_CUT);
        assert_eq!(m.delays(), 4);
        let mut text = TextBuf::new();
        assert!(write!(text, "{}", s.report()).is_ok());
        assert!(text
            .bytes()
            .ends_with(b"; the wait was cut short by the CPU debug time budget"));
        // A CPU the budget does not reach: a record that says so, no register touched.
        m.reset_counts();
        let s = CpuSample::not_reached(4, &arch);
        assert_eq!(m.accesses(), 0);
        assert!(s.outcome == Outcome::NotReached);
        let mut buf = [0u8; RECORD_LEN];
        assert!(s.encode(&mut buf) == Ok(RECORD_LEN));
        assert!(CpuSample::decode(&buf) == Ok(s));
        Ok(())
    }
}

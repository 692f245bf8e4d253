// SPDX-License-Identifier: GPL-2.0

//! The CPU debug panic sampling (`cpu_debug/hw.rs`) in the kernel, against a scripted debug
//! frame.
//!
//! The register-level model of the host crates (`crates/cspd-model`) runs the sequence in the
//! host tests; here a [`ScriptedDebug`] answers with what the test sets, so that the sampling,
//! its bounds and its report are checked as the kernel compiles them.

use kernel::{
    coresight::access::{
        offset_of,
        RawFrame,
        CS_UNLOCK_KEY,
        LAR,
        LSR, //
    },
    io::register::Register,
    prelude::*,
};

use crate::regs::{
    EDOSLAR,
    EDPRSR, //
};

/// A CPU's external debug frame whose registers read back what the test set or the driver
/// wrote, except for `EDPRSR`, which returns the scripted values one by one (the last one
/// again once the script ends), and `LSR`, which shows the software lock as the last `LAR`
/// write left it. Counts reads and writes per register, and delays; keeps the OS lock as
/// `EDOSLAR` writes leave it.
struct ScriptedDebug {
    /// The frame's registers, by offset / 4.
    regs: KVec<u32>,
    /// Reads per register, by offset / 4.
    reads: KVec<u32>,
    /// Writes per register, by offset / 4.
    writes: KVec<u32>,
    /// What `EDPRSR` returns, in order.
    prsr: KVec<u32>,
    /// The next value of `prsr`.
    next: usize,
    /// Delays so far.
    delays: u32,
    /// The software lock is set.
    sw_locked: bool,
    /// The OS lock is set.
    os_locked: bool,
}

impl ScriptedDebug {
    /// A locked frame of an Armv8 core that samples `EDPCSR`, `EDCIDSR` and `EDVIDSR` with no
    /// offset, whose `EDPRSR` reads `prsr` in turn.
    fn new(prsr: &[u32]) -> Result<Self> {
        let mut d = Self {
            regs: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
            reads: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
            writes: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
            prsr: KVec::new(),
            next: 0,
            delays: 0,
            sw_locked: true,
            os_locked: false,
        };
        d.prsr.extend_from_slice(prsr, GFP_KERNEL)?;
        d.set::<crate::regs::EDDEVID>(3);
        d.set::<crate::regs::EDDEVID1>(2);
        Ok(d)
    }

    /// Sets register `R` to `v`.
    fn set<R: Register>(&mut self, v: u32) {
        if let Some(r) = self.regs.get_mut(R::OFFSET / 4) {
            *r = v;
        }
    }

    /// Returns the value of register `R`.
    fn get<R: Register>(&self) -> u32 {
        self.regs.get(R::OFFSET / 4).copied().unwrap_or(0)
    }

    /// Returns how many times register `R` was read.
    fn reads<R: Register>(&self) -> u32 {
        self.reads.get(R::OFFSET / 4).copied().unwrap_or(0)
    }

    /// Returns how many times register `R` was written.
    fn writes<R: Register>(&self) -> u32 {
        self.writes.get(R::OFFSET / 4).copied().unwrap_or(0)
    }

    /// Returns the reads and writes of every register.
    fn accesses(&self) -> u32 {
        self.reads.iter().sum::<u32>() + self.writes.iter().sum::<u32>()
    }

    /// Forgets the counts.
    fn reset_counts(&mut self) {
        self.reads.iter_mut().for_each(|c| *c = 0);
        self.writes.iter_mut().for_each(|c| *c = 0);
        self.delays = 0;
    }
}

impl RawFrame for ScriptedDebug {
    fn read32(&mut self, offset: u32) -> u32 {
        // CAST: an offset in the frame.
        let i = offset as usize / 4;
        if let Some(c) = self.reads.get_mut(i) {
            *c += 1;
        }
        if offset == offset_of::<LSR>() {
            return LSR::from_raw(0)
                .with_sli(true)
                .with_slk(self.sw_locked)
                .into_raw();
        }
        if offset == offset_of::<EDPRSR>() {
            let v = self
                .prsr
                .get(self.next)
                .or(self.prsr.last())
                .copied()
                .unwrap_or(0);
            self.next += 1;
            return v;
        }
        self.regs.get(i).copied().unwrap_or(0)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        // CAST: an offset in the frame.
        let i = offset as usize / 4;
        if let Some(c) = self.writes.get_mut(i) {
            *c += 1;
        }
        if offset == offset_of::<LAR>() {
            self.sw_locked = value != CS_UNLOCK_KEY;
        } else if offset == offset_of::<EDOSLAR>() {
            self.os_locked = EDOSLAR::from_raw(value).oslk();
        } else if let Some(r) = self.regs.get_mut(i) {
            *r = value;
        }
    }

    fn delay_us(&mut self, _us: u32) {
        self.delays += 1;
    }
}

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
    use super::{
        ScriptedDebug,
        TextBuf, //
    };
    use crate::hw::{
        read_arch,
        sample_cpu,
        sample_cpu_as_found,
        MAX_ACCESSES_PER_SAMPLE,
        MAX_DELAYS_PER_SAMPLE,
        POWER_UP_POLLS, //
    };
    use crate::regs::{
        EDCIDSR,
        EDOSLAR,
        EDPCSR,
        EDPCSR_HI,
        EDPRCR,
        EDPRSR,
        EDVIDSR, //
    };
    use kernel::coresight::access::LAR;
    use kernel::coresight::panic_dump::format::cpu_debug::{
        CpuSample,
        Outcome,
        PcKind,
        FLAG_AS_FOUND,
        FLAG_BUDGET_CUT,
        FLAG_WAS_POWERED_DOWN,
        POWERED_OFF_REASON,
        RECORD_LEN, //
    };

    use core::fmt::Write;
    use kernel::prelude::*;

    const KERNEL_PC: u64 = 0xFFFF_8000_0812_3454;

    /// `EDPRSR` of a powered core, and of one powered down since it was last read.
    const PU: u32 = 1;
    const SPD: u32 = 1 << 1;
    /// `EDPRSR.OSLK`.
    const OSLK: u32 = 1 << 5;

    /// A frame whose core ran `KERNEL_PC` at EL1 in context 0x42, with `EDPRCR` holding
    /// `prcr` and `EDPRSR` reading `prsr` in turn.
    fn kernel_core(prsr: &[u32], prcr: u32) -> Result<ScriptedDebug> {
        let mut d = ScriptedDebug::new(prsr)?;
        // CAST: the halves of the PC.
        d.set::<EDPCSR>(KERNEL_PC as u32);
        d.set::<EDPCSR_HI>((KERNEL_PC >> 32) as u32);
        d.set::<EDCIDSR>(0x42);
        d.set::<EDVIDSR>(0x9000_0000);
        d.set::<EDPRCR>(prcr);
        Ok(d)
    }

    /// Samples `d` as the driver does at panic and checks what every sample must satisfy: the
    /// bounds hold, `EDPRCR` is back as found, the software lock is set, the OS lock is as
    /// found, and the record survives its encoding.
    fn sample_checked(d: &mut ScriptedDebug, cpu: u32) -> Option<CpuSample> {
        let arch = read_arch(d, true).ok()?;
        let os_before = d.os_locked;
        let prcr_before = d.get::<EDPRCR>();
        d.reset_counts();
        let s = sample_cpu(d, cpu, &arch, MAX_DELAYS_PER_SAMPLE);
        let mut buf = [0u8; RECORD_LEN];
        let ok = d.accesses() <= MAX_ACCESSES_PER_SAMPLE
            && d.delays <= MAX_DELAYS_PER_SAMPLE
            && d.get::<EDPRCR>() == prcr_before
            && s.edprcr_saved == prcr_before
            && d.sw_locked
            && d.os_locked == os_before
            && s.encode(&mut buf) == Ok(RECORD_LEN)
            && CpuSample::decode(&buf) == Ok(s);
        ok.then_some(s)
    }

    #[test]
    fn powered_core_is_sampled_and_reported_like_the_c_driver() -> Result {
        let mut d = kernel_core(&[PU], 0)?;
        let s = sample_checked(&mut d, 0);
        assert!(s.is_some());
        let s = s.ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert!(s.pc.kind == PcKind::AArch64);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert_eq!(s.edcidsr, 0x42);
        assert_eq!(s.edvidsr, 0x9000_0000);
        // Unlock and lock; save, request, no-powerdown request, restore; one sample read.
        assert_eq!(d.writes::<LAR>(), 2);
        assert_eq!(d.reads::<EDPRCR>(), 1);
        assert_eq!(d.writes::<EDPRCR>(), 3);
        assert_eq!(d.reads::<EDPRSR>(), 2);
        assert_eq!(d.reads::<EDPCSR>(), 1);
        assert_eq!(d.accesses(), 12);
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
        let mut d = kernel_core(&[PU | OSLK], 0)?;
        d.os_locked = true;
        let s = sample_checked(&mut d, 3).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert!(s.os_lock_was_locked());
        // Unlocked for the sample, locked again after it.
        assert_eq!(d.writes::<EDOSLAR>(), 2);
        assert!(d.os_locked);
        Ok(())
    }

    #[test]
    fn powered_down_core_is_powered_sampled_and_let_down_again() -> Result {
        // Off; the power-up request takes four more polls; the core comes out of reset with its
        // OS lock set.
        let mut d = kernel_core(&[SPD, SPD, SPD, SPD, SPD, PU | OSLK], 0)?;
        d.os_locked = true;
        let s = sample_checked(&mut d, 4).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::Sampled);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert!(s.flags & FLAG_WAS_POWERED_DOWN != 0);
        assert_eq!(s.edprsr_first, SPD);
        assert_eq!(s.power_polls, 6);
        assert_eq!(d.delays, 5);
        // The requests are withdrawn: EDPRCR is written back as it was.
        assert_eq!(d.get::<EDPRCR>(), 0);
        assert!(d.os_locked);
        Ok(())
    }

    #[test]
    fn core_that_never_powers_up_is_given_up_within_the_bound() -> Result {
        let mut d = kernel_core(&[SPD], 0)?;
        let s = sample_checked(&mut d, 5).ok_or(EINVAL)?;
        assert!(s.outcome == Outcome::PoweredDown);
        assert!(s.pc.kind == PcKind::None);
        assert_eq!(s.power_polls, POWER_UP_POLLS + 1);
        assert_eq!(d.delays, POWER_UP_POLLS);
        assert_eq!(d.reads::<EDPCSR>(), 0);
        let mut text = TextBuf::new();
        assert!(write!(text, "{}", s.report()).is_ok());
        assert!(text
            .bytes()
            .ends_with(b"not sampled: powered down (EDPRSR.PU never set)"));
        Ok(())
    }

    #[test]
    fn the_phase_budget_cuts_the_wait_and_a_cpu_it_misses_is_named() -> Result {
        let mut d = kernel_core(&[SPD], 0)?;
        let arch = read_arch(&mut d, true).map_err(|_| EINVAL)?;
        d.reset_counts();
        // A share of 4 delays of the phase's budget: the wait ends there, and says why.
        let s = sample_cpu(&mut d, 3, &arch, 4);
        assert!(s.outcome == Outcome::PoweredDown);
        assert_eq!(s.flags & FLAG_BUDGET_CUT, FLAG_BUDGET_CUT);
        assert_eq!(d.delays, 4);
        let mut text = TextBuf::new();
        assert!(write!(text, "{}", s.report()).is_ok());
        assert!(text
            .bytes()
            .ends_with(b"; the wait was cut short by the CPU debug time budget"));
        // A CPU the budget does not reach: a record that says so, no register touched.
        d.reset_counts();
        let s = CpuSample::not_reached(4, &arch);
        assert_eq!(d.accesses(), 0);
        assert!(s.outcome == Outcome::NotReached);
        let mut buf = [0u8; RECORD_LEN];
        assert!(s.encode(&mut buf) == Ok(RECORD_LEN));
        assert!(CpuSample::decode(&buf) == Ok(s));
        Ok(())
    }

    #[test]
    fn a_capture_kernel_samples_as_found_and_powers_nothing_up() -> Result {
        // A core still running (a hard lockup): sampled where it is, EDPRCR never written.
        let mut d = kernel_core(&[PU], 0)?;
        let arch = read_arch(&mut d, true).map_err(|_| EINVAL)?;
        d.reset_counts();
        let mut s = sample_cpu_as_found(&mut d, 0, &arch);
        assert!(s.outcome == Outcome::Sampled);
        assert_eq!(s.pc.pc, KERNEL_PC);
        assert_eq!(s.flags & FLAG_AS_FOUND, FLAG_AS_FOUND);
        assert_eq!(d.writes::<EDPRCR>(), 0);
        assert_eq!(d.delays, 0);
        assert!(d.sw_locked);
        s.set_mpidr(Some(0x100));
        let mut buf = [0u8; RECORD_LEN];
        assert!(s.encode(&mut buf) == Ok(RECORD_LEN));
        assert!(CpuSample::decode(&buf) == Ok(s));
        // A core the crash stop powered off: named so, left off, its sample registers unread.
        let mut d = kernel_core(&[SPD], 0)?;
        d.reset_counts();
        let s = sample_cpu_as_found(&mut d, 0, &arch);
        assert!(s.outcome == Outcome::PoweredDown);
        assert_eq!(d.writes::<EDPRCR>(), 0);
        assert_eq!(d.reads::<EDPRSR>(), 1);
        assert_eq!(d.reads::<EDPCSR>(), 0);
        assert!(s.reason() == POWERED_OFF_REASON);
        Ok(())
    }
}

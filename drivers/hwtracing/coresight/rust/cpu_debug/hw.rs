// SPDX-License-Identifier: GPL-2.0

//! The CPU debug panic sequence: sample one CPU's program counter through its external debug
//! frame (Arm DDI 0487, part H), never failing: a CPU that cannot be sampled gets a
//! [`CpuSample`] that says why.
//!
//! # Sequence
//!
//! [`sample_cpu`] does, on one CPU's frame:
//!
//! 1. Unlock the CoreSight software lock (`LAR`).
//! 2. Save `EDPRCR`, request core power-up (`EDPRCR.COREPURQ`) and poll `EDPRSR.PU` a bounded
//!    number of times; once up, also request no power-down (`EDPRCR.CORENPDRQ`) and check that
//!    the core stayed up.
//! 3. Check access: `EDPRSR.PU` set and `EDPRSR.DLK` (OS double lock) clear.
//! 4. Remember `EDPRSR.OSLK` and clear the OS lock (`EDOSLAR`) if it was set.
//! 5. Read `EDPCSR` first: the read latches `EDPCSR_HI`, `EDCIDSR` and `EDVIDSR`. All ones means
//!    sampling is prohibited or the CPU is in debug state, and the latched registers are
//!    UNKNOWN, so they are not read.
//! 6. Read `EDPCSR_HI` (64-bit PCs), `EDCIDSR` and `EDVIDSR` when implemented.
//! 7. Set the OS lock again if it was set, restore `EDPRCR`, lock the software lock.
//!
//! The OS lock is cleared after the power-up, not before as the C driver does: `EDOSLAR` and
//! `EDPRSR.OSLK` live in the core power domain, so the lock can only be read and changed once
//! the core is powered. Unlike the C driver, the OS lock is left as it was found.
//!
//! A CPU that cannot be sampled still gets a record that says why ([`Outcome`]).
//!
//! Shared with the host (`crates/cspd-hw`): uses `core`, `kernel::coresight::access`, the
//! format's CPU debug payload (`kernel::coresight::panic_dump::format::cpu_debug`) and this
//! folder's `regs.rs` (`super::regs`).

use kernel::coresight::{
    access::{
        lock,
        unlock,
        CsAccess, //
    },
    panic_dump::format::cpu_debug::{
        calibrate_pc,
        ArchData,
        ArchError,
        CpuSample,
        Outcome,
        FLAG_AS_FOUND,
        FLAG_BUDGET_CUT,
        FLAG_OS_LOCK_WAS_LOCKED,
        FLAG_WAS_POWERED_DOWN, //
    },
};

use super::regs::{
    EDCIDSR,
    EDDEVID,
    EDDEVID1,
    EDOSLAR,
    EDPCSR,
    EDPCSR_HI,
    EDPRCR,
    EDPRSR,
    EDVIDSR, //
};

/// The value `EDPCSR` reads when sampling is prohibited or the PE is in debug state.
pub const EDPCSR_PROHIBITED: u32 = 0xFFFF_FFFF;

/// How many times `EDPRSR.PU` is polled after one power-up request.
// TIMEOUT: 32 polls 1 ms apart, the 32 ms the C driver allows a power controller to bring a
// core up. A design that ignores COREPURQ costs that much per CPU, and only once per attempt.
pub const POWER_UP_POLLS: u32 = 32;

/// Microseconds between two polls of `EDPRSR.PU`.
pub const POWER_UP_DELAY_US: u32 = 1000;

/// How many times the power-up request is made when the core drops power again right away.
///
/// The C driver retries without limit; the panic path may not.
pub const POWER_UP_ATTEMPTS: u32 = 3;

/// The most register accesses [`sample_cpu`] makes on one CPU.
///
/// Per attempt: one `EDPRCR` write, `1 + POWER_UP_POLLS` `EDPRSR` reads, one `EDPRCR` write and
/// one `EDPRSR` read; plus `LAR` unlock, `EDPRCR` save, two `EDOSLAR` writes, four sample
/// reads, the `EDPRCR` restore and the `LAR` lock.
pub const MAX_ACCESSES_PER_SAMPLE: u32 = POWER_UP_ATTEMPTS * (POWER_UP_POLLS + 4) + 10;

/// The most `delay_us` calls [`sample_cpu`] makes on one CPU.
pub const MAX_DELAYS_PER_SAMPLE: u32 = POWER_UP_ATTEMPTS * POWER_UP_POLLS;

/// Reads `EDDEVID` and `EDDEVID1` from the frame (unlocking and locking it) and decodes them;
/// `pc64` is true on a 64-bit kernel.
///
/// The ID registers are in the debug power domain: this is safe while the core is off. Fails
/// when the device cannot sample the PC, so that the probe fails cleanly.
pub fn read_arch<A: CsAccess>(io: &mut A, pc64: bool) -> Result<ArchData, ArchError> {
    unlock(io);
    let eddevid: EDDEVID = io.read(EDDEVID);
    let eddevid1: EDDEVID1 = io.read(EDDEVID1);
    lock(io);
    ArchData::from_ids(eddevid.into_raw(), eddevid1.into_raw(), pc64)
}

/// Requests core power-up and waits, bounded by [`POWER_UP_ATTEMPTS`] * [`POWER_UP_POLLS`] polls
/// and by `max_delays`; leaves the last `EDPRSR` read in `s.edprsr`, whose `PU` says whether the
/// core is up.
fn power_up<A: CsAccess>(io: &mut A, saved: EDPRCR, s: &mut CpuSample, max_delays: u32) {
    let mut delays_left = max_delays;
    for attempt in 0..POWER_UP_ATTEMPTS {
        io.write_reg(saved.with_corepurq(true));
        let retry = POWER_UP_POLLS.min(delays_left);
        let mut reads = 0u32;
        let mut first = None;
        let polled = io.poll(
            retry,
            POWER_UP_DELAY_US,
            |io| {
                let v: EDPRSR = io.read(EDPRSR);
                reads += 1;
                first.get_or_insert(v);
                v
            },
            |v| v.pu(),
        );
        s.power_polls = s.power_polls.saturating_add(reads);
        if let (0, Some(first)) = (attempt, first) {
            s.edprsr_first = first.into_raw();
            if !first.pu() {
                s.flags |= FLAG_WAS_POWERED_DOWN;
            }
        }
        let last = match polled {
            Ok(p) => p,
            Err(p) => {
                s.edprsr = p.value.into_raw();
                if retry < POWER_UP_POLLS {
                    // The budget, not the hardware bound, ended the wait.
                    s.flags |= FLAG_BUDGET_CUT;
                }
                return;
            }
        };
        delays_left = delays_left.saturating_sub(last.delays);
        // Powered: ask the power controller not to take the core down while we read.
        io.write_reg(saved.with_corepurq(true).with_corenpdrq(true));
        let v: EDPRSR = io.read(EDPRSR);
        s.edprsr = v.into_raw();
        if v.pu() {
            return;
        }
        // The core powered down again before the no-powerdown request took: try again.
    }
}

/// Samples one CPU's PC through its external debug frame, at panic.
///
/// Never fails: a CPU that cannot be sampled gets a record with the reason. Makes at most
/// [`MAX_ACCESSES_PER_SAMPLE`] accesses and at most `max_delays` (and never more than
/// [`MAX_DELAYS_PER_SAMPLE`]) delays of [`POWER_UP_DELAY_US`]: the caller's share of a time
/// budget. When that share, not the hardware bound, ends the wait for power-up, the record says
/// so ([`FLAG_BUDGET_CUT`]). Leaves `EDPRCR` and the OS lock as found and the software lock
/// locked.
pub fn sample_cpu<A: CsAccess>(
    io: &mut A,
    cpu: u32,
    arch: &ArchData,
    max_delays: u32,
) -> CpuSample {
    let mut s = CpuSample::for_arch(cpu, arch);

    unlock(io);
    let saved: EDPRCR = io.read(EDPRCR);
    s.edprcr_saved = saved.into_raw();

    power_up(io, saved, &mut s, max_delays);
    sample_if_accessible(io, arch, &mut s);

    io.write_reg(saved);
    lock(io);
    s
}

/// Samples one CPU's PC as it is found, from a kdump capture kernel in which the CPU is not
/// online: a CPU that ignored the crashed kernel's stop (spinning with interrupts masked) is still
/// where it hung, a parked one where it parked; a powered-down one stays down.
///
/// Unlike [`sample_cpu`] it requests no power-up and does not touch `EDPRCR` (powering a core up
/// would start it at its reset vector, or leave it in reset, and nothing is learnt from either):
/// it reads `EDPRSR` once and samples only a powered, not double-locked core. The OS lock is
/// cleared for the read and set again, as in [`sample_cpu`]. The record has [`FLAG_AS_FOUND`];
/// [`Outcome::PoweredDown`] then means that the core was off. Makes at most 10 register accesses
/// and no delay. The caller holds the frame for the call.
pub fn sample_cpu_as_found<A: CsAccess>(io: &mut A, cpu: u32, arch: &ArchData) -> CpuSample {
    let mut s = CpuSample::for_arch(cpu, arch);
    s.flags |= FLAG_AS_FOUND;

    unlock(io);
    s.edprcr_saved = io.read(EDPRCR).into_raw();
    let found: EDPRSR = io.read(EDPRSR);
    s.edprsr_first = found.into_raw();
    s.edprsr = found.into_raw();
    sample_if_accessible(io, arch, &mut s);
    lock(io);
    s
}

/// Samples the CPU when `s.edprsr` (the `EDPRSR` the access check uses) says its registers may be
/// accessed, powered and not double-locked; otherwise sets the outcome that says why not. The OS
/// lock is cleared for the read and set again if it was set.
fn sample_if_accessible<A: CsAccess>(io: &mut A, arch: &ArchData, s: &mut CpuSample) {
    let prsr = EDPRSR::from_raw(s.edprsr);
    if !prsr.pu() {
        s.outcome = Outcome::PoweredDown;
        return;
    }
    if prsr.dlk() {
        s.outcome = Outcome::DoubleLocked;
        return;
    }
    let os_locked = prsr.oslk();
    if os_locked {
        s.flags |= FLAG_OS_LOCK_WAS_LOCKED;
        io.write_reg(EDOSLAR::from_raw(0));
    }
    read_sample(io, arch, s);
    if os_locked {
        io.write_reg(EDOSLAR::from_raw(0).with_oslk(true));
    }
}

/// Reads the sample registers, `EDPCSR` first, into `s`.
fn read_sample<A: CsAccess>(io: &mut A, arch: &ArchData, s: &mut CpuSample) {
    let lo = io.read(EDPCSR).pc_lo().get();
    s.edpcsr = lo;
    if lo == EDPCSR_PROHIBITED {
        // The latched registers are UNKNOWN now: do not read them.
        s.outcome = if EDPRSR::from_raw(s.edprsr).halted() {
            Outcome::DebugState
        } else {
            Outcome::Prohibited
        };
        return;
    }
    if arch.pc64 {
        s.edpcsr_hi = io.read(EDPCSR_HI).pc_hi().get();
    }
    if arch.edcidsr_present() {
        s.edcidsr = io.read(EDCIDSR).contextid().get();
    }
    let vidsr = if arch.edvidsr_present() {
        let v = io.read(EDVIDSR).into_raw();
        s.edvidsr = v;
        Some(v)
    } else {
        None
    };
    s.pc = calibrate_pc(arch, lo, s.edpcsr_hi, vidsr);
    s.outcome = Outcome::Sampled;
}

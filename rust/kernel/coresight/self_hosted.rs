// SPDX-License-Identifier: GPL-2.0

//! The executing CPU's side of self-hosted trace (arm64): its trace filter (`TRFCR_EL1`, where
//! the CPU has FEAT_TRF) and the barriers around its own trace unit's stop, as the C ETMv4
//! driver takes them (`etm4_disable_hw()`, `coresight-self-hosted-trace.h`).
//!
//! Every function acts on the CPU that calls it only: the caller runs on the trace unit's own
//! CPU (a cross-CPU call, or the panicking CPU for its own unit).

/// `ID_AA64DFR0_EL1.TraceFilt`, bits [43:40].
const TRACE_FILT_SHIFT: u32 = 40;
/// `TRFCR_EL1.E0TRE`: trace allowed at EL0.
const TRFCR_E0TRE: u64 = 1 << 0;
/// `TRFCR_EL1.ExTRE`: trace allowed at EL1 (EL2 with VHE, where the register is `TRFCR_EL2`).
const TRFCR_EXTRE: u64 = 1 << 1;
/// `TRFCR_EL2.CX`: the `CONTEXTIDR_EL2` is traced (kernel at EL2).
const TRFCR_EL2_CX: u64 = 1 << 3;
/// `TRFCR_EL1.TS` = 0b01: timestamps are the virtual count.
const TRFCR_TS_VIRTUAL: u64 = 1 << 5;

/// Whether the executing CPU has FEAT_TRF (`ID_AA64DFR0_EL1.TraceFilt` not zero).
pub fn has_trace_filter() -> bool {
    // SAFETY: Reads an ID register; no requirement.
    let dfr0 = unsafe { bindings::cspd_read_id_aa64dfr0() };
    (dfr0 >> TRACE_FILT_SHIFT) & 0xF != 0
}

/// Allows (EL0 and the kernel's EL, with virtual timestamps, as the C driver programs it) or
/// prohibits self-hosted trace on the executing CPU; nothing without FEAT_TRF.
pub fn set_trace_allowed(allowed: bool) {
    if !has_trace_filter() {
        return;
    }
    let mut trfcr = TRFCR_TS_VIRTUAL;
    if super::kernel_at_el2() {
        trfcr |= TRFCR_EL2_CX;
    }
    if allowed {
        trfcr |= TRFCR_EXTRE | TRFCR_E0TRE;
    }
    // SAFETY: FEAT_TRF is implemented (checked above); the value sets only architected fields.
    unsafe { bindings::cspd_write_trfcr(trfcr) };
}

/// `DSB SY; ISB; TSB CSYNC` on the executing CPU (the last a NOP without FEAT_TRF): what it
/// executed so far is traced before its trace unit is told to stop.
pub fn synchronize() {
    // SAFETY: Barriers only.
    unsafe { bindings::cspd_trace_synchronize() };
}

/// `ISB` on the executing CPU.
pub fn isb() {
    // SAFETY: A barrier only.
    unsafe { bindings::cspd_isb() };
}

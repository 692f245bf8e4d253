// SPDX-License-Identifier: GPL-2.0

//! The registers of a CPU's external debug frame that PC sampling uses (Arm DDI 0487, part H,
//! "External debug registers"). The software lock (`LAR`, `LSR`) is the CoreSight one of
//! [`kernel::coresight::access`].
//!
//! Shared with the host (`crates/cspd-hw`): uses only `kernel::io::register`.

use kernel::io::register;

register! {
    /// `EDPCSR`: bits 31:0 of the PC sample; reading it latches `EDPCSR_HI`, `EDCIDSR` and
    /// `EDVIDSR`.
    pub EDPCSR(u32) @ 0x0A0 {
        /// The low word of the sampled PC, or all ones when sampling is prohibited or the PE
        /// is in debug state.
        31:0 pc_lo;
    }

    /// `EDCIDSR`: the context ID (`CONTEXTIDR_EL1`) latched with the PC sample.
    pub EDCIDSR(u32) @ 0x0A4 {
        /// The context ID.
        31:0 contextid;
    }

    /// `EDVIDSR`: the security state, exception level, width and VMID latched with the sample.
    pub EDVIDSR(u32) @ 0x0A8 {
        /// The sample was taken in Non-secure state.
        31:31 ns => bool;
        /// The sample was taken at EL2.
        30:30 e2 => bool;
        /// The sample was taken at EL3.
        29:29 e3 => bool;
        /// `EDPCSR_HI` is valid: the sample was taken in AArch64 state.
        28:28 hv => bool;
        /// With `NS`, the Realm or Root state (`FEAT_RME`; RES0 without it).
        27:27 nse => bool;
        /// The VMID (bits 15:8 RES0 without 16-bit VMIDs).
        15:0 vmid;
    }

    /// `EDPCSR_HI`: bits 63:32 of the PC sample, latched by reading `EDPCSR`.
    pub EDPCSR_HI(u32) @ 0x0AC {
        /// The high word of the sampled PC.
        31:0 pc_hi;
    }

    /// `EDOSLAR`: the OS Lock Access Register.
    pub EDOSLAR(u32) @ 0x300 {
        /// Writing 1 sets the OS lock, writing 0 clears it.
        0:0 oslk => bool;
    }

    /// `EDPRCR`: the external debug power/reset control register.
    pub EDPRCR(u32) @ 0x310 {
        /// Core power-up request to the power controller.
        3:3 corepurq => bool;
        /// Warm reset request (write-only; never written here).
        1:1 cwrr => bool;
        /// Core no-powerdown request (emulate power-down instead).
        0:0 corenpdrq => bool;
    }

    /// `EDPRSR`: the external debug processor status register.
    pub EDPRSR(u32) @ 0x314 {
        /// Sticky debug restart.
        11:11 sdr => bool;
        /// Sticky external performance monitors access disabled error.
        10:10 spmad => bool;
        /// External performance monitors access is disabled.
        9:9 epmad => bool;
        /// Sticky external debug access disabled error.
        8:8 sdad => bool;
        /// External debug access is disabled.
        7:7 edad => bool;
        /// The OS double lock is set (the core is about to power down).
        6:6 dlk => bool;
        /// The OS lock is set.
        5:5 oslk => bool;
        /// The PE is in debug state.
        4:4 halted => bool;
        /// Sticky core reset.
        3:3 sr => bool;
        /// The core is in reset.
        2:2 r => bool;
        /// Sticky core power-down.
        1:1 spd => bool;
        /// The core power domain is powered up.
        0:0 pu => bool;
    }

    /// `EDDEVID1`: what the PC samples are relative to.
    pub EDDEVID1(u32) @ 0xFC4 {
        /// `PCSROffset`: the offset of the samples from the instruction addresses.
        3:0 pcsroffset;
    }

    /// `EDDEVID`: which sample-based profiling registers are implemented.
    pub EDDEVID(u32) @ 0xFC8 {
        /// `PCSample`: 0 none, 1 `EDPCSR`, 2 and `EDCIDSR`, 3 and `EDVIDSR`.
        3:0 pcsample;
    }
}

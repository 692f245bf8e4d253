// SPDX-License-Identifier: GPL-2.0

//! The registers of an ETMv4 trace unit that the driver touches (Arm ETMv4 architecture, IHI
//! 0064). Their offsets are those of the memory-mapped interface; a unit reached through system
//! registers maps each offset to its `MRS`/`MSR` encoding
//! ([`sysreg_of_offset`](super::hw::sysreg_of_offset)).
//! The software lock (`LAR`, `LSR`), `AUTHSTATUS`, `DEVARCH` and `DEVTYPE` are the CoreSight
//! ones of [`kernel::coresight::access`].
//!
//! Shared with the host (`crates/cspd-hw`): uses only `kernel::io::register`.

use kernel::io::register;

register! {
    /// Programming Control Register.
    pub TRCPRGCTLR(u32) @ 0x004 {
        /// The trace unit is enabled.
        0:0 en => bool;
    }

    /// Trace Status Register.
    pub TRCSTATR(u32) @ 0x00C {
        /// The programmers' model is stable.
        1:1 pmstable => bool;
        /// The trace unit is idle.
        0:0 idle => bool;
    }

    /// Trace Configuration Register.
    pub TRCCONFIGR(u32) @ 0x010 {
        /// Trace `CONTEXTIDR_EL2` instead of `VTTBR_EL2.VMID`.
        15:15 vmidopt => bool;
        /// Return stack.
        12:12 rs => bool;
        /// Global timestamps.
        11:11 ts => bool;
        /// Conditional instruction tracing.
        10:8 cond;
        /// Virtual machine ID tracing.
        7:7 vmid => bool;
        /// Context ID tracing.
        6:6 cid => bool;
        /// Cycle counting in the instruction trace.
        4:4 cci => bool;
        /// Branch broadcast.
        3:3 bb => bool;
        /// Reserved, reads as one on ETMv4.0 parts.
        0:0 res1 => bool;
    }

    /// Event Control 0 Register.
    pub TRCEVENTCTL0R(u32) @ 0x020 {
        /// The event selectors.
        31:0 value;
    }

    /// Event Control 1 Register.
    pub TRCEVENTCTL1R(u32) @ 0x024 {
        /// The event controls.
        31:0 value;
    }

    /// Stall Control Register.
    pub TRCSTALLCTLR(u32) @ 0x02C {
        /// The stall controls.
        31:0 value;
    }

    /// Global Timestamp Control Register.
    pub TRCTSCTLR(u32) @ 0x030 {
        /// The timestamp event.
        31:0 value;
    }

    /// Synchronization Period Register.
    pub TRCSYNCPR(u32) @ 0x034 {
        /// A trace synchronisation every `2^period` bytes.
        4:0 period;
    }

    /// Cycle Count Control Register.
    pub TRCCCCTLR(u32) @ 0x038 {
        /// The cycle count threshold.
        11:0 threshold;
    }

    /// Branch Broadcast Control Register.
    pub TRCBBCTLR(u32) @ 0x03C {
        /// The branch broadcast controls.
        31:0 value;
    }

    /// Trace ID Register.
    pub TRCTRACEIDR(u32) @ 0x040 {
        /// The trace ID on the trace bus.
        6:0 traceid;
    }

    /// ViewInst Main Control Register.
    pub TRCVICTLR(u32) @ 0x080 {
        /// Non-secure exception levels excluded from tracing.
        22:20 exlevel_ns;
        /// Secure exception levels excluded from tracing.
        19:16 exlevel_s;
        /// The start/stop logic is in the started state.
        9:9 ssstatus => bool;
        /// The event that enables ViewInst; resource 1 is always true.
        7:0 event;
    }

    /// ViewInst Include/Exclude Control Register.
    pub TRCVIIECTLR(u32) @ 0x084 {
        /// The address range comparators included and excluded.
        31:0 value;
    }

    /// ViewInst Start/Stop Control Register.
    pub TRCVISSCTLR(u32) @ 0x088 {
        /// The single address comparators that stop the start/stop logic, one bit each.
        31:16 stop;
        /// The single address comparators that start it, one bit each.
        15:0 start;
    }

    /// Address Comparator Value Registers 0 to 15: the address each single comparator matches,
    /// 64 bits, written whole with
    /// [`CsAccess::write64`](kernel::coresight::access::CsAccess::write64) (a system-register
    /// unit has one 64-bit register there, not two halves).
    pub TRCACVR(u64)[16] @ 0x400 {
        /// The address.
        63:0 address;
    }

    /// Address Comparator Access Type Registers 0 to 15, their low halves (the registers are
    /// 64 bits wide, 8 bytes apart; the high halves are zero for instruction address compares).
    pub TRCACATR(u32)[16, stride = 8] @ 0x480 {
        /// Non-secure exception levels at which the comparator does not match.
        14:12 exlevel_ns;
        /// Secure exception levels at which the comparator does not match.
        11:8 exlevel_s;
        /// What is compared: 0 for the address of an executed instruction.
        1:0 kind;
    }

    /// ID Registers 8 to 13.
    pub TRCIDR8_13(u32)[6] @ 0x180 {
        /// The ID value.
        31:0 value;
    }

    /// ID Registers 0 to 7.
    pub TRCIDR0_7(u32)[8] @ 0x1E0 {
        /// The ID value.
        31:0 value;
    }

    /// OS Lock Access Register.
    pub TRCOSLAR(u32) @ 0x300 {
        /// Written as one to lock, zero to unlock.
        0:0 oslk => bool;
    }

    /// OS Lock Status Register.
    pub TRCOSLSR(u32) @ 0x304 {
        /// The OS lock is locked.
        1:1 oslk => bool;
    }

    /// Power Down Control Register (memory-mapped interface only).
    pub TRCPDCR(u32) @ 0x310 {
        /// Request the trace unit power domain to stay up.
        3:3 pu => bool;
    }

    /// Power Down Status Register (memory-mapped interface only).
    pub TRCPDSR(u32) @ 0x314 {
        /// OS lock status mirror.
        5:5 oslk => bool;
        /// Power was lost since the register was last read.
        1:1 stickypd => bool;
        /// The trace unit power domain is up.
        0:0 power => bool;
    }

    /// Device Configuration Register (memory-mapped interface only).
    pub TRCDEVID(u32) @ 0xFC8 {
        31:0 value;
    }

    /// Peripheral Identification Registers 0 to 3 (memory-mapped interface only).
    pub TRCPIDR(u32)[4] @ 0xFE0 {
        7:0 value;
    }
}

/// Number of single address comparators `TRCIDR4` can announce (8 pairs).
pub const MAX_ADDR_COMPARATORS: usize = 16;

/// `TRCIDR4.NUMACPAIRS` (bits 3:0): the address comparator pairs implemented.
pub const TRCIDR4_NUMACPAIRS_MASK: u32 = 0xF;

/// `TRCIDR0.TSSIZE` (bits 28:24): 0 when global timestamps are not implemented.
pub const TRCIDR0_TSSIZE_MASK: u32 = 0x1F << 24;
/// `TRCIDR0.TRCBB`: branch broadcast implemented.
pub const TRCIDR0_TRCBB: u32 = 1 << 5;
/// `TRCIDR0.TRCCCI`: cycle counting implemented.
pub const TRCIDR0_TRCCCI: u32 = 1 << 7;
/// `TRCIDR0.RETSTACK`: return stack implemented.
pub const TRCIDR0_RETSTACK: u32 = 1 << 9;
/// The cycle count threshold upstream programs for `cycacc` (`ETM_CYC_THRESHOLD_DEFAULT`).
pub const ETM_CYC_THRESHOLD_DEFAULT: u32 = 0x100;
/// `TRCIDR2.CIDSIZE` (bits 9:5): 0 when context ID tracing is not implemented.
pub const TRCIDR2_CIDSIZE_MASK: u32 = 0x1F << 5;
/// `TRCIDR3.EXLEVEL_S` (bits 19:16): Secure exception levels that the unit can trace.
pub const TRCIDR3_EXLEVEL_S_MASK: u32 = 0xF << 16;

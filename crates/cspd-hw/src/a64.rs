//! A64 branch instructions: which words end an ETMv4 instruction range, and where a direct
//! branch goes. Host-only (the trace generator, the QEMU plugin's tracker and csdump's report
//! use it); the kernel drivers never decode instructions.

/// The kind of a branch instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchKind {
    /// `B` (and `B.AL`/`B.NV`): direct, always taken.
    Direct,
    /// `BL`: direct with link.
    DirectLink,
    /// `B.cond`, `CBZ`, `CBNZ`, `TBZ`, `TBNZ`.
    Conditional,
    /// `BR`.
    Indirect,
    /// `BLR`.
    IndirectLink,
    /// `RET`.
    Return,
}

impl BranchKind {
    /// Returns `true` when the target comes from a register and needs an address packet.
    pub fn is_indirect(self) -> bool {
        matches!(self, Self::Indirect | Self::IndirectLink | Self::Return)
    }

    /// Returns `true` when the branch writes the link register.
    pub fn is_link(self) -> bool {
        matches!(self, Self::DirectLink | Self::IndirectLink)
    }
}

/// What an A64 instruction is to the trace unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum A64Class {
    /// Not a P0 element: execution continues at the next instruction.
    Other,
    /// A branch; `offset` is the byte offset of a direct branch's target.
    Branch {
        /// Branch kind.
        kind: BranchKind,
        /// Target relative to the branch, for direct branches.
        offset: i64,
    },
    /// An instruction this generator does not model (exception generating, `ERET`, `ISB`,
    /// `WFI`/`WFE`, pointer-authenticated branches, `BC.cond`): the walk stops before it.
    Unsupported,
}

/// Sign-extends the low `bits` bits of `v`.
const fn sext(v: u32, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v as i64) << shift) >> shift
}

/// Classifies one A64 instruction word.
pub const fn classify(insn: u32) -> A64Class {
    // B / BL: imm26.
    if insn & 0x7C00_0000 == 0x1400_0000 {
        let kind = if insn & 0x8000_0000 != 0 {
            BranchKind::DirectLink
        } else {
            BranchKind::Direct
        };
        return A64Class::Branch {
            kind,
            offset: sext(insn & 0x03FF_FFFF, 26) * 4,
        };
    }
    // B.cond (bit 4 clear) and BC.cond (bit 4 set): imm19.
    if insn & 0xFF00_0000 == 0x5400_0000 {
        if insn & 0x10 != 0 {
            return A64Class::Unsupported;
        }
        let kind = if insn & 0xE == 0xE {
            BranchKind::Direct
        } else {
            BranchKind::Conditional
        };
        return A64Class::Branch {
            kind,
            offset: sext((insn >> 5) & 0x7_FFFF, 19) * 4,
        };
    }
    // CBZ / CBNZ: imm19.
    if insn & 0x7E00_0000 == 0x3400_0000 {
        return A64Class::Branch {
            kind: BranchKind::Conditional,
            offset: sext((insn >> 5) & 0x7_FFFF, 19) * 4,
        };
    }
    // TBZ / TBNZ: imm14.
    if insn & 0x7E00_0000 == 0x3600_0000 {
        return A64Class::Branch {
            kind: BranchKind::Conditional,
            offset: sext((insn >> 5) & 0x3FFF, 14) * 4,
        };
    }
    // Unconditional branch (register): BR, BLR, RET; everything else in the group
    // (ERET, DRPS, pointer-authenticated forms) is not modelled.
    if insn & 0xFE00_0000 == 0xD600_0000 {
        return match insn & 0xFFFF_FC1F {
            0xD61F_0000 => A64Class::Branch {
                kind: BranchKind::Indirect,
                offset: 0,
            },
            0xD63F_0000 => A64Class::Branch {
                kind: BranchKind::IndirectLink,
                offset: 0,
            },
            0xD65F_0000 => A64Class::Branch {
                kind: BranchKind::Return,
                offset: 0,
            },
            _ => A64Class::Unsupported,
        };
    }
    // Exception generation: SVC, HVC, SMC, BRK, HLT, DCPS.
    if insn & 0xFF00_0000 == 0xD400_0000 {
        return A64Class::Unsupported;
    }
    // ISB, and WFE/WFI/WFET/WFIT, which ETMv4 traces as P0 elements.
    if insn & 0xFFFF_F0FF == 0xD503_30DF
        || insn == 0xD503_205F
        || insn == 0xD503_207F
        || insn & 0xFFFF_FFC0 == 0xD503_1000
    {
        return A64Class::Unsupported;
    }
    A64Class::Other
}

/// Returns the target of the direct branch `insn` at `pc` (`B`, `BL`, `B.cond`, `CBZ`, `CBNZ`,
/// `TBZ`, `TBNZ`), or `None` for any other instruction.
pub fn direct_target(insn: u32, pc: u64) -> Option<u64> {
    match classify(insn) {
        A64Class::Branch { kind, offset } if !kind.is_indirect() => {
            Some(pc.wrapping_add_signed(offset))
        }
        _ => None,
    }
}

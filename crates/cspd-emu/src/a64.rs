//! What an A64 instruction is to the trace unit and to the exception tracker.
//!
//! Branch classification is the one the ETMv4 generator of `cspd-model` uses
//! ([`cspd_model::etm4x_gen::classify`]); this adds what a trace of real execution meets as well:
//! exception returns, pointer-authenticated branches, exception-generating instructions and the
//! P0 instruction that is not a branch (Arm IHI 0064, "P0 elements": `ISB`; `WFI` and `WFE` are
//! P0 elements only on units whose `TRCIDR2.WFXMODE` is set, which the emulated ETMv4.0 is not).

use cspd_model::etm4x_gen::{classify, A64Class, BranchKind};

/// The class of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Not a P0 element: execution continues at the next instruction.
    Other,
    /// `B` or `BL` (and `B.AL`): always taken to `target`.
    Direct {
        /// Writes the link register.
        link: bool,
        /// The branch target.
        target: u64,
    },
    /// `B.cond`, `CBZ`, `CBNZ`, `TBZ`, `TBNZ` to `target`, or on to the next instruction.
    Cond {
        /// The target when taken.
        target: u64,
    },
    /// A branch to a register: `BR`, `BLR`, `RET` and their pointer-authenticated forms.
    Indirect {
        /// Writes the link register.
        link: bool,
    },
    /// `ERET` (and `ERETAA`/`ERETAB`): traced as an indirect branch.
    Eret,
    /// `ISB`: a P0 element that is not a branch.
    Waypoint,
    /// `SVC`, `HVC`, `SMC`: an exception whose preferred return address is the next instruction.
    Call,
    /// `BRK`, `HLT`: an exception whose preferred return address is the instruction itself.
    Breakpoint,
}

impl Kind {
    /// Returns `true` for the instructions ETMv4 traces as P0 elements.
    pub fn is_p0(self) -> bool {
        !matches!(self, Kind::Other | Kind::Call | Kind::Breakpoint)
    }
}

/// Classifies the instruction `insn` at `addr`.
pub fn kind(addr: u64, insn: u32) -> Kind {
    match classify(insn) {
        A64Class::Other => Kind::Other,
        A64Class::Branch { kind, offset } => {
            let target = addr.wrapping_add_signed(offset);
            match kind {
                BranchKind::Direct => Kind::Direct {
                    link: false,
                    target,
                },
                BranchKind::DirectLink => Kind::Direct { link: true, target },
                BranchKind::Conditional => Kind::Cond { target },
                BranchKind::Indirect | BranchKind::Return => Kind::Indirect { link: false },
                BranchKind::IndirectLink => Kind::Indirect { link: true },
            }
        }
        A64Class::Unsupported => unsupported_kind(insn),
    }
}

/// Refines what the branch classifier leaves out.
fn unsupported_kind(insn: u32) -> Kind {
    // Unconditional branch (register) with op2 = 0b11111: opc selects the form.
    if insn & 0xFE1F_0000 == 0xD61F_0000 {
        return match (insn >> 21) & 0xF {
            0b0000 | 0b0010 | 0b1000 => Kind::Indirect { link: false },
            0b0001 | 0b1001 => Kind::Indirect { link: true },
            0b0100 => Kind::Eret,
            _ => Kind::Other,
        };
    }
    // Exception generation: SVC, HVC, SMC (LL = 1..3), BRK, HLT.
    match insn & 0xFFE0_001F {
        0xD400_0001..=0xD400_0003 => return Kind::Call,
        0xD420_0000 | 0xD440_0000 => return Kind::Breakpoint,
        _ => {}
    }
    // `ISB` is always a P0 element. `WFI`/`WFE` are P0 only where `TRCIDR2.WFXMODE` says so
    // (ETMv4.3 and later); the emulated unit is an ETMv4.0 and advertises 0.
    if insn & 0xFFFF_F0FF == 0xD503_30DF {
        return Kind::Waypoint;
    }
    Kind::Other
}

/// Returns `Some(t)` when `insn` is `MRS Xt, ELR_EL1`.
pub fn mrs_elr_el1(insn: u32) -> Option<u8> {
    // CAST: masked to 5 bits.
    (insn & 0xFFFF_FFE0 == 0xD538_4020).then_some((insn & 0x1F) as u8)
}

/// The 64-bit general-purpose registers a store instruction writes to memory, in access order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredRegs {
    /// The register stored first (at the lowest address).
    pub rt: u8,
    /// The second register of a store pair.
    pub rt2: Option<u8>,
}

/// Returns the registers stored by a 64-bit `STR`/`STUR`/`STP` (any addressing mode), else `None`.
pub fn stored_regs(insn: u32) -> Option<StoredRegs> {
    // CAST: masked to 5 bits.
    let rt = (insn & 0x1F) as u8;
    // CAST: masked to 5 bits.
    let rt2 = ((insn >> 10) & 0x1F) as u8;
    // STP (64-bit): post-index, signed offset, pre-index.
    if matches!(insn & 0xFFC0_0000, 0xA880_0000 | 0xA900_0000 | 0xA980_0000) {
        return Some(StoredRegs { rt, rt2: Some(rt2) });
    }
    // STR (immediate, unsigned offset).
    if insn & 0xFFC0_0000 == 0xF900_0000 {
        return Some(StoredRegs { rt, rt2: None });
    }
    // STUR, STR post-index, STR pre-index.
    if matches!(insn & 0xFFE0_0C00, 0xF800_0000 | 0xF800_0400 | 0xF800_0C00) {
        return Some(StoredRegs { rt, rt2: None });
    }
    None
}

/// Returns `true` for instructions of the A64 "Loads and Stores" encoding group, the ones whose
/// data access can take a Data Abort.
pub fn is_load_store(insn: u32) -> bool {
    insn & 0x0A00_0000 == 0x0800_0000
}

/// Returns `true` for the single-register 32-bit and 64-bit integer loads and stores, the only
/// instructions device accessors (`readl`/`writel`/`readq`/`writeq`, their relaxed and
/// acquire/release forms) and `/dev/mem` word accesses compile to: `LDR`/`STR` in every
/// addressing mode but the literal, `LDUR`/`STUR`, `LDAR`/`STLR` and the exclusives. Pairs,
/// bytes, halfwords and SIMD registers are left out, and so are the unprivileged `LDTR`/`STTR`:
/// they are the kernel's user-memory accessors (`copy_to_user`, `copy_from_user`, two of them
/// per 16 bytes copied), never a device accessor, and a user-space program's own loads and
/// stores (`devmem`) are plain `LDR`/`STR`. Leaving them out spares a memory callback on every
/// word a kdump capture kernel copies out of `/proc/vmcore` and onto its disk.
pub fn is_word_access(insn: u32) -> bool {
    if insn >> 30 < 2 || is_unprivileged(insn) {
        return false;
    }
    matches!(insn & 0x3F00_0000, 0x3900_0000 | 0x3800_0000 | 0x0800_0000)
}

/// Returns `true` for the unprivileged loads and stores (`LDTR*`/`STTR*`, any size): "Load/store
/// register (unprivileged)", bits 29:24 `111000`, bit 21 clear, bits 11:10 `10`.
fn is_unprivileged(insn: u32) -> bool {
    insn & 0x3F20_0C00 == 0x3800_0800
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_accesses_are_the_device_accessors() {
        for (insn, want, what) in [
            (0xB940_0020, true, "ldr w0, [x1]"),
            (0xB900_0001, true, "str w1, [x0]"),
            (0xF940_0020, true, "ldr x0, [x1]"),
            (0xB820_6820, true, "str w0, [x1, x0]"),
            (0x88DF_FC20, true, "ldar w0, [x1]"),
            (0x889F_FC20, true, "stlr w0, [x1]"),
            (0xB840_0420, true, "ldr w0, [x1], #0"),
            (0xF800_0C01, true, "str x1, [x0, #0]!"),
            (0xB840_0820, false, "ldtr w0, [x1]"),
            (0xF840_0820, false, "ldtr x0, [x1]"),
            (0xB800_0801, false, "sttr w1, [x0]"),
            (0xF800_8801, false, "sttr x1, [x0, #8]"),
            (0x3800_0801, false, "sttrb w1, [x0]"),
            (0xA9BF_7BFD, false, "stp x29, x30, [sp, #-16]!"),
            (0x3940_0020, false, "ldrb w0, [x1]"),
            (0x7940_0020, false, "ldrh w0, [x1]"),
            (0x3DC0_0020, false, "ldr q0, [x1]"),
            (0x5800_0040, false, "ldr x0, <literal>"),
            (0xD503_201F, false, "nop"),
        ] {
            assert_eq!(is_word_access(insn), want, "{what}");
        }
    }

    #[test]
    fn kernel_entry_saves_elr_with_a_store_pair() {
        assert_eq!(mrs_elr_el1(0xD538_4036), Some(22), "mrs x22, elr_el1");
        assert_eq!(mrs_elr_el1(0xD538_4037), Some(23));
        assert_eq!(mrs_elr_el1(0xD538_4016), None, "mrs x22, spsr_el1");
        // stp x22, x23, [sp, #0x100]
        assert_eq!(
            stored_regs(0xA910_5FF6),
            Some(StoredRegs {
                rt: 22,
                rt2: Some(23)
            })
        );
        // str x0, [sp, #0x138]
        assert_eq!(
            stored_regs(0xF900_9FE0),
            Some(StoredRegs { rt: 0, rt2: None })
        );
        assert_eq!(stored_regs(0xB940_0020), None, "a load");
    }
}

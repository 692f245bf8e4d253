//! The target description GDB reads with `qXfer:features:read:target.xml`: an AArch64 PE with
//! GDB's core register feature, `org.gnu.gdb.aarch64.core` (x0-x30, sp, pc, cpsr, in that
//! order: GDB numbers them 0 to 33 and the `g` packet carries them in that order).

/// Number of registers described.
pub const NUM_REGS: usize = 34;
/// GDB's number of the program counter.
pub const PC_REGNUM: usize = 32;

/// Size in bytes of register `n`, `None` past the last one.
pub fn reg_size(n: usize) -> Option<usize> {
    match n {
        0..=32 => Some(8),
        33 => Some(4),
        _ => None,
    }
}

/// Returns the target description XML.
pub fn target_xml() -> String {
    target_xml_with(false)
}

/// Returns the target description XML; `osabi_none` names the OS ABI `none`, under which GDB
/// reads the target's library list (`qXfer:libraries:read`) rather than a GNU/Linux link map.
pub fn target_xml_with(osabi_none: bool) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n\
         <!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n\
         <target version=\"1.0\">\n\
         <architecture>aarch64</architecture>\n",
    );
    if osabi_none {
        s.push_str("<osabi>none</osabi>\n");
    }
    s.push_str("<feature name=\"org.gnu.gdb.aarch64.core\">\n");
    for n in 0..=30 {
        s.push_str(&format!(
            "<reg name=\"x{n}\" bitsize=\"64\" type=\"int\"/>\n"
        ));
    }
    s.push_str(
        "<reg name=\"sp\" bitsize=\"64\" type=\"data_ptr\"/>\n\
         <reg name=\"pc\" bitsize=\"64\" type=\"code_ptr\"/>\n",
    );
    // PSTATE as the Arm ARM lays it out in SPSR_ELx for AArch64 (DDI 0487, C5.2.19): the
    // condition flags, the exception masks, the exception level and stack pointer selection.
    s.push_str("<flags id=\"pstate\" size=\"4\">\n");
    for (name, lo, hi) in [
        ("SP", 0, 0),
        ("EL", 2, 3),
        ("nRW", 4, 4),
        ("F", 6, 6),
        ("I", 7, 7),
        ("A", 8, 8),
        ("D", 9, 9),
        ("SS", 21, 21),
        ("PAN", 22, 22),
        ("V", 28, 28),
        ("C", 29, 29),
        ("Z", 30, 30),
        ("N", 31, 31),
    ] {
        s.push_str(&format!(
            "<field name=\"{name}\" start=\"{lo}\" end=\"{hi}\"/>\n"
        ));
    }
    s.push_str(
        "</flags>\n\
         <reg name=\"cpsr\" bitsize=\"32\" type=\"pstate\"/>\n\
         </feature>\n\
         </target>\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_in_gdb_order() {
        let x = target_xml();
        let regs: Vec<&str> = x
            .lines()
            .filter_map(|l| l.strip_prefix("<reg name=\""))
            .map(|l| l.split('"').next().unwrap_or(""))
            .collect();
        assert_eq!(regs.len(), NUM_REGS);
        assert_eq!(regs[0], "x0");
        assert_eq!(regs[30], "x30");
        assert_eq!(regs[31], "sp");
        assert_eq!(regs[PC_REGNUM], "pc");
        assert_eq!(regs[33], "cpsr");
        assert!(x.contains("<feature name=\"org.gnu.gdb.aarch64.core\">"));
        let bytes: usize = (0..NUM_REGS).filter_map(reg_size).sum();
        assert_eq!(bytes, 33 * 8 + 4);
        assert_eq!(reg_size(NUM_REGS), None);
    }
}

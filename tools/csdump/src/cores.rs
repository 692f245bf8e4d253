//! Core types: the architecture and profile OpenCSD gives a core, from the type name the dump
//! or a snapshot names it by.

/// The core architecture OpenCSD derives from a core's type name (`Cortex-A57`, `ARMv8-A`,
/// `ARMv8.3-A`, `ARM-AA64`…), as its snapshot reader does; `None` for a name it does not know.
pub fn core_arch(name: &str) -> Option<opencsd::Core> {
    use opencsd_sys::*;
    let a = |arch, profile| Some(opencsd::Core { arch, profile });
    // Named cores OpenCSD knows, with their architecture.
    const V8R3_A: &[&str] = &[
        "Cortex-A77",
        "Cortex-A76",
        "Cortex-A75",
        "Cortex-A65",
        "Cortex-A55",
    ];
    const V8_A: &[&str] = &[
        "Cortex-A78",
        "Cortex-A73",
        "Cortex-A72",
        "Cortex-A57",
        "Cortex-A53",
        "Cortex-A35",
        "Cortex-A32",
    ];
    const V7_A: &[&str] = &[
        "Cortex-A17",
        "Cortex-A15",
        "Cortex-A12",
        "Cortex-A9",
        "Cortex-A8",
        "Cortex-A7",
        "Cortex-A5",
    ];
    const V7_R: &[&str] = &["Cortex-R8", "Cortex-R7", "Cortex-R5", "Cortex-R4"];
    const V7_M: &[&str] = &["Cortex-M0", "Cortex-M0+", "Cortex-M3", "Cortex-M4"];
    if V8R3_A.contains(&name) {
        return a(ARCH_V8r3, profile_CortexA);
    }
    if V8_A.contains(&name) {
        return a(ARCH_V8, profile_CortexA);
    }
    if V7_A.contains(&name) {
        return a(ARCH_V7, profile_CortexA);
    }
    if V7_R.contains(&name) {
        return a(ARCH_V7, profile_CortexR);
    }
    if V7_M.contains(&name) {
        return a(ARCH_V7, profile_CortexM);
    }
    match name {
        "Cortex-R52" => return a(ARCH_V8, profile_CortexR),
        "Cortex-M33" | "Cortex-M23" => return a(ARCH_V8, profile_CortexM),
        _ => {}
    }
    let profile = |c: Option<u8>| match c {
        Some(b'A') => Some(profile_CortexA),
        Some(b'R') => Some(profile_CortexR),
        Some(b'M') => Some(profile_CortexM),
        _ => None,
    };
    // ARMv<major>[.<minor>]-<profile>
    if let Some(rest) = name.strip_prefix("ARMv") {
        let b = rest.as_bytes();
        let major = b.first().filter(|c| c.is_ascii_digit())? - b'0';
        let (minor, tail) = match b.get(1) {
            Some(b'.') => (b.get(2).filter(|c| c.is_ascii_digit())? - b'0', b.get(3..)?),
            _ => (0, b.get(1..)?),
        };
        if tail.first() != Some(&b'-') {
            return None;
        }
        let arch = match (major, minor) {
            (7, _) => ARCH_V7,
            (8, 0..=2) => ARCH_V8,
            (8, 3) => ARCH_V8r3,
            (8.., _) => ARCH_AA64,
            _ => return None,
        };
        return a(arch, profile(tail.get(1).copied())?);
    }
    // ARM-AA64[-<profile>]
    let rest = name
        .strip_prefix("ARM-AA64")
        .or_else(|| name.strip_prefix("ARM-aa64"))?;
    let p = match rest.as_bytes() {
        [b'-', b'R', ..] => profile_CortexR,
        [b'-', b'M', ..] => profile_CortexM,
        _ => profile_CortexA,
    };
    a(ARCH_AA64, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_names_as_opencsd_reads_them() {
        use opencsd_sys::*;
        let arch = |n| core_arch(n).map(|c| (c.arch, c.profile));
        assert_eq!(arch("Cortex-A57"), Some((ARCH_V8, profile_CortexA)));
        assert_eq!(arch("Cortex-A55"), Some((ARCH_V8r3, profile_CortexA)));
        assert_eq!(arch("ARMv8-A"), Some((ARCH_V8, profile_CortexA)));
        assert_eq!(arch("ARMv8.3-A"), Some((ARCH_V8r3, profile_CortexA)));
        assert_eq!(arch("ARMv9-A"), Some((ARCH_AA64, profile_CortexA)));
        assert_eq!(arch("ARMv7-R"), Some((ARCH_V7, profile_CortexR)));
        assert_eq!(arch("ARM-AA64"), Some((ARCH_AA64, profile_CortexA)));
        assert_eq!(arch("ARM-aa64-R"), Some((ARCH_AA64, profile_CortexR)));
        assert_eq!(arch("ARMv8-Q"), None);
        assert_eq!(arch("ARMv8.10-A"), None);
        assert_eq!(arch("Pentium"), None);
    }
}

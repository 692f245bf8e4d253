//! Rust symbol names (the v0 mangling, `_R...`, which the kernel's Rust code uses) made
//! readable with `rustc-demangle`, without crate disambiguators (its alternate form):
//! `<coresight_tmc::Tmc>::probe`, `core::ptr::drop_in_place::<kernel::error::Error>`.
//!
//! A name that does not demangle (another mangling, or one the crate refuses) is left as it is.

/// Demangles a v0 Rust symbol name; `None` when `name` is not one.
pub fn rust(name: &str) -> Option<String> {
    if !name.starts_with("_R") {
        return None;
    }
    rustc_demangle::try_demangle(name)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// `name` demangled when it is a Rust v0 name, else as it is.
pub fn readable(name: &str) -> String {
    rust(name).unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v0_names_read_as_llvm_cxxfilt_prints_them() {
        for (m, want) in [
            ("_RNvCs1234_7mycrate3foo", "mycrate::foo"),
            ("_RNvNtCs1234_7mycrate3bar3foo", "mycrate::bar::foo"),
            (
                "_RNvMNtCs1234_13coresight_tmc3tmcNtB2_3Tmc5probe",
                "<coresight_tmc::tmc::Tmc>::probe",
            ),
            (
                "_RINvNtCs1_4core3ptr13drop_in_placeNtCs2_6kernel5ErrorEB4_",
                "core::ptr::drop_in_place::<kernel::Error>",
            ),
            (
                "_RNvXs_NtCs1_3foo3barNtB4_1SNtNtCs2_4core3fmt5Debug3fmt",
                "<foo::bar::S as core::fmt::Debug>::fmt",
            ),
            ("_RNCNvCs1_3foo4main0", "foo::main::{closure#0}"),
            (
                "_RINvCs1_3foo1fRShTjbEQDNtB2_5TraitEL_E",
                "foo::f::<&[u8], (usize, bool), &mut dyn foo::Trait>",
            ),
            ("_RINvCs1_3foo1fKj10_E", "foo::f::<16>"),
        ] {
            assert_eq!(rust(m).as_deref(), Some(want), "{m}");
        }
        for bad in ["_ZN3foo3barE", "_R", "_RNvC3foo", "_RB_", "f_1"] {
            assert_eq!(rust(bad), None, "{bad}");
        }
        assert_eq!(readable("tmc_probe"), "tmc_probe");
    }
}

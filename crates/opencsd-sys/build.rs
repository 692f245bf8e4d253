//! Links libopencsd's C API and checks, with the C compiler and the installed headers, that the
//! layouts and constants `src/lib.rs` declares are the library's.

fn main() {
    println!("cargo:rerun-if-changed=csrc/layout.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=OPENCSD_INCLUDE_DIR");
    let include = std::env::var("OPENCSD_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let header = std::path::Path::new(&include).join("opencsd/c_api/opencsd_c_api.h");
    if !header.exists() {
        panic!(
            "{} not found: install libopencsd-dev (scripts/setup.sh does), or set \
             OPENCSD_INCLUDE_DIR to the directory that holds opencsd/",
            header.display()
        );
    }
    println!("cargo:rerun-if-changed={}", header.display());
    // The layout check is compile-time only (_Static_assert); the object it leaves is empty.
    cc::Build::new()
        .file("csrc/layout.c")
        .include(&include)
        .warnings(true)
        .compile("opencsd_sys_layout");
    println!("cargo:rustc-link-lib=dylib=opencsd_c_api");
    println!("cargo:rustc-link-lib=dylib=opencsd");
}

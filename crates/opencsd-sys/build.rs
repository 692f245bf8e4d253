//! Links OpenCSD's libraries (static, built from Debian's libopencsd source package by
//! scripts/setup.sh) and checks, with the C compiler and the library's own headers, that the
//! layouts and constants `src/lib.rs` declares are the library's.
//!
//! `OPENCSD_DIR` names the directory with `include/opencsd/` and `lib/libopencsd*.a`; the
//! default is `$CSPD_CACHE/opencsd/lib` (`CSPD_CACHE` defaults to /var/tmp/coresight-panic-dump).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/layout.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=OPENCSD_DIR");
    println!("cargo:rerun-if-env-changed=CSPD_CACHE");
    let dir = std::env::var_os("OPENCSD_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CSPD_CACHE")
                .filter(|d| !d.is_empty())
                .map_or_else(
                    || PathBuf::from("/var/tmp/coresight-panic-dump"),
                    PathBuf::from,
                )
                .join("opencsd/lib")
        });
    let include = dir.join("include");
    let lib = dir.join("lib");
    let header = include.join("opencsd/c_api/opencsd_c_api.h");
    for need in [
        header.clone(),
        lib.join("libopencsd_c_api.a"),
        lib.join("libopencsd.a"),
    ] {
        if !need.is_file() {
            panic!(
                "{} not found: run scripts/setup.sh (it builds OpenCSD from Debian's libopencsd \
                 source package into the cache), or set OPENCSD_DIR to a directory with \
                 include/opencsd/ and lib/libopencsd*.a",
                need.display()
            );
        }
        println!("cargo:rerun-if-changed={}", need.display());
    }
    // The layout check is compile-time only (_Static_assert); the object also holds the helper
    // the bit-field test calls.
    cc::Build::new()
        .file("csrc/layout.c")
        .include(&include)
        .warnings(true)
        .compile("opencsd_sys_layout");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=static=opencsd_c_api");
    println!("cargo:rustc-link-lib=static=opencsd");
    println!("cargo:rustc-link-lib=dylib=stdc++");
}

//! Links libkdumpfile, found through pkg-config as Debian's libkdumpfile-dev installs it.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let out = Command::new("pkg-config")
        .args(["--libs", "--modversion", "libkdumpfile"])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!(
            "libkdumpfile not found by pkg-config ({}): install libkdumpfile-dev \
             (scripts/setup.sh does)",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("cannot run pkg-config ({e}): install pkg-config and libkdumpfile-dev"),
    };
    let mut lines = out.lines();
    let version = lines.next().unwrap_or("").trim().to_string();
    // The API bound here is libkdumpfile 0.5's (Debian bookworm ships 0.5.1).
    if !version.starts_with("0.5.") {
        println!("cargo:warning=libkdumpfile {version}: these bindings follow the 0.5 API");
    }
    for word in lines.flat_map(str::split_whitespace) {
        if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = word.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
    println!("cargo:rustc-link-lib=kdumpfile");
}

//! Where the host tests find the data and tools they need, and what happens when one is
//! missing: under `CI=true` the test fails; elsewhere it says loudly that it did not run (on
//! stderr, `SKIPPED:`), never silently.
//!
//! The OpenCSD test snapshots (real ETMv4 captures from Juno and Cortex-A55 boards) come from
//! Debian's `libopencsd` source package: `scripts/setup.sh` downloads it into the cache and
//! extracts `decoder/tests/snapshots/` to `$CSPD_CACHE/opencsd/snapshots`. The tests read them
//! from `$CSPD_OPENCSD_TESTDATA` (the Makefile sets it), else from that default.

use std::path::PathBuf;
use std::process::Command;

/// Environment variable naming the directory of the OpenCSD snapshots.
pub const TESTDATA_ENV: &str = "CSPD_OPENCSD_TESTDATA";
/// Default cache directory (`CSPD_CACHE`), as the scripts use it.
pub const DEFAULT_CACHE: &str = "/var/tmp/coresight-panic-dump";

/// The directory that holds the OpenCSD snapshots (`juno-ret-stck/`, …).
pub fn opencsd_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(TESTDATA_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("CSPD_CACHE")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CACHE), PathBuf::from);
    cache.join("opencsd/snapshots")
}

/// The `trc_pkt_lister` of the OpenCSD library csdump links (built by `scripts/setup.sh` from
/// the same source package, in `$OPENCSD_DIR/bin`, default `$CSPD_CACHE/opencsd/lib/bin`), or
/// `None` after [`missing`].
pub fn library_trc_pkt_lister() -> Option<PathBuf> {
    let dir = std::env::var_os("OPENCSD_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CSPD_CACHE")
                .filter(|d| !d.is_empty())
                .map_or_else(|| PathBuf::from(DEFAULT_CACHE), PathBuf::from)
                .join("opencsd/lib")
        });
    let p = dir.join("bin/trc_pkt_lister");
    if p.is_file() {
        Some(p)
    } else {
        missing(&format!(
            "{} (the linked OpenCSD's own tool) is not there",
            p.display()
        ));
        None
    }
}

/// Whether the tests run under CI (`CI=true`), where nothing may be missing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Reports that `what` is missing: panics under CI, else prints `SKIPPED:` with the reason.
pub fn missing(what: &str) {
    let msg = format!(
        "{what}; run scripts/setup.sh (it installs the tools and fetches the OpenCSD snapshots \
         into the cache) or set {TESTDATA_ENV}"
    );
    assert!(!in_ci(), "CI=true and {msg}");
    eprintln!("SKIPPED: {msg}");
}

/// The OpenCSD snapshot `name` (a directory with `snapshot.ini`), or `None` after
/// [`missing`] when it is not there.
pub fn snapshot(name: &str) -> Option<PathBuf> {
    let d = opencsd_dir().join(name);
    if d.join("snapshot.ini").is_file() {
        Some(d)
    } else {
        missing(&format!(
            "OpenCSD test snapshot {} is not there",
            d.display()
        ));
        None
    }
}

/// Whether `program` runs (`program --version` or `program -h` starts), else [`missing`].
pub fn tool(program: &str) -> bool {
    let ok = Command::new(program).arg("--version").output().is_ok();
    if !ok {
        missing(&format!("{program} is not installed"));
    }
    ok
}

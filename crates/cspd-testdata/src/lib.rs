//! Where the host tests find the data and tools they need, and what happens when one is
//! missing: the test fails, naming what is missing and how to get it. A user who cannot have
//! the data opts out explicitly with `CSPD_TESTS_MAY_SKIP=1` (not under `CI=true`): the test
//! then says on stderr that it did not run (`SKIPPED:`) and, when `CSPD_SKIP_LOG` names a file,
//! appends the reason there, for `make host-test` to count in its summary.
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

/// Environment variable a user sets to `1` to let tests whose data or tool is missing pass
/// without running (never under `CI=true`).
pub const MAY_SKIP_ENV: &str = "CSPD_TESTS_MAY_SKIP";
/// Environment variable naming a file each opted-out test appends its reason to.
pub const SKIP_LOG_ENV: &str = "CSPD_SKIP_LOG";

/// Whether the tests run under CI (`CI=true`), where nothing may be missing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether the user opted out of tests whose data is missing (`CSPD_TESTS_MAY_SKIP=1`).
pub fn may_skip() -> bool {
    std::env::var(MAY_SKIP_ENV).is_ok_and(|v| v == "1")
}

/// What a test whose data or tool is missing does: `Err` (fail, with the message) unless the
/// user opted out and this is not CI; `Ok` with the line to print when it may skip.
pub fn verdict(what: &str, may_skip: bool, ci: bool) -> Result<String, String> {
    let msg = format!(
        "{what}; run scripts/setup.sh (it installs the tools and fetches the OpenCSD snapshots \
         into the cache) or set {TESTDATA_ENV}"
    );
    match (may_skip, ci) {
        (true, false) => Ok(format!("SKIPPED ({MAY_SKIP_ENV}=1): {msg}")),
        (true, true) => Err(format!(
            "CI=true and {msg} ({MAY_SKIP_ENV} does not apply in CI)"
        )),
        (false, _) => Err(format!(
            "{msg}; to let such tests pass without running, set {MAY_SKIP_ENV}=1"
        )),
    }
}

/// Reports that `what` is missing: panics (the test fails) unless the user opted out
/// ([`may_skip`]), else prints `SKIPPED` with the reason and logs it to `CSPD_SKIP_LOG`.
pub fn missing(what: &str) {
    match verdict(what, may_skip(), in_ci()) {
        Err(msg) => panic!("{msg}"),
        Ok(line) => {
            eprintln!("{line}");
            if let Some(log) = std::env::var_os(SKIP_LOG_ENV).filter(|l| !l.is_empty()) {
                use std::io::Write as _;
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .and_then(|mut f| writeln!(f, "{what}"));
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_data_fails_unless_the_user_opts_out_and_never_in_ci() {
        let e = verdict("x is not there", false, false).unwrap_err();
        assert!(
            e.contains("x is not there") && e.contains("CSPD_TESTS_MAY_SKIP=1"),
            "{e}"
        );
        assert!(verdict("x", false, true).is_err());
        let e = verdict("x", true, true).unwrap_err();
        assert!(e.starts_with("CI=true"), "{e}");
        let ok = verdict("x is not there", true, false).unwrap();
        assert!(
            ok.starts_with("SKIPPED (CSPD_TESTS_MAY_SKIP=1): x is not there"),
            "{ok}"
        );
    }
}

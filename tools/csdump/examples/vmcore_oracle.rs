//! Compares csdump's vmcore reader with libkdumpfile, its test oracle, on vmcore files: every
//! page either reader says is memory or stored must read the same bytes and be classed the same
//! way (stored, no data, not memory), and VMCOREINFO and the page size must agree. A flattened
//! or gzip'ed file is compared through the file csdump rearranged it into (libkdumpfile 0.5 does
//! not read those). csdump itself does not link libkdumpfile; this example does (a
//! dev-dependency).
//!
//!     cargo run --release -p csdump --example vmcore_oracle -- VMCORE...
//!
//! Prints one line per file; exits 1 when a file cannot be read or the readers disagree.

#[path = "../tests/common/oracle.rs"]
mod oracle;

use std::process::ExitCode;

fn main() -> ExitCode {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: vmcore_oracle VMCORE...");
        return ExitCode::from(2);
    }
    let mut ok = true;
    for f in files {
        let t = std::time::Instant::now();
        let r = csdump::vmcore::Vmcore::open(std::path::Path::new(&f))
            .map_err(|e| e.to_string())
            .and_then(|core| {
                let lib = core.dump_file().try_clone().map_err(|e| e.to_string())?;
                oracle::compare(&core, lib, u64::MAX).map(|a| (core.format.to_string(), a))
            });
        match r {
            Ok((format, a)) => println!(
                "{f}: {format}: csdump and libkdumpfile agree on every page: {} stored, {} without data ({:.1} s)",
                a.stored,
                a.no_data,
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("{f}: csdump and libkdumpfile DISAGREE:\n{e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! Fuzzes every reader of csdump: regions and vmcores of every format (ELF, kdump-compressed,
//! flattened, gzip'ed), OpenCSD snapshot directories, a dump with a vmlinux, the report (trace
//! decoded with OpenCSD in this process, not in csdump's confined child: the library's crashes
//! end the run here, with its sanitizer when built with one) and the GDB stub, through the reading path of `info`,
//! `perf` and `report` (`csdump::fuzz_entry`). Any input must be handled without a panic. Run
//! with `scripts/fuzz.sh` (`make fuzz`), or `cargo fuzz run -s none parse` from tools/csdump on
//! the stable toolchain. At exit it prints how many inputs of each kind ran.
#![no_main]

use libfuzzer_sys::fuzz_target;

extern "C" fn print_counts() {
    let counts: Vec<String> = csdump::fuzz_counts()
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    eprintln!("csdump fuzz: executions by input kind: {}", counts.join(", "));
}

fuzz_target!(|data: &[u8]| {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `print_counts` is an `extern "C" fn()` that only reads atomics and prints.
        unsafe { libc::atexit(print_counts) };
        csdump::decode::decode_in_process(true);
    });
    csdump::fuzz_entry(data);
});

//! Fuzzes every reader of csdump: regions and ELF vmcores, OpenCSD snapshot directories, a dump
//! with a vmlinux, and the report (trace decoded in process with OpenCSD). Any input must be
//! handled without a panic. See `csdump::fuzz_entry` for the input's layout; run with
//! `scripts/fuzz.sh` (`make fuzz`), or `cargo fuzz run -s none parse` from tools/csdump on the
//! stable toolchain.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    csdump::fuzz_entry(data);
});

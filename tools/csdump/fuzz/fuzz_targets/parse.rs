//! Fuzzes the region parser and the ELF vmcore reader: any input must be handled without a
//! panic. Run with `cargo +nightly fuzz run parse` from tools/csdump.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    csdump::fuzz_entry(data);
});

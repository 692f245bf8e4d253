//! csdump: finds a coresight-panic-dump region in a kdump vmcore, a QEMU memory dump or a raw
//! region file, checks it with the format parser shared with the kernel, and writes it out.
//!
//! The library does no I/O below [`extract`]: [`region::locate`] and [`info::analyze`] take
//! bytes, so tests and fuzzers feed them directly.

pub mod capture;
pub mod decode;
pub mod elf;
pub mod extract;
pub mod info;
pub mod ini;
pub mod kmem;
pub mod output;
pub mod perf;
pub mod region;
pub mod report;
pub mod snapshot;
pub mod vmcore;

pub use cspd_format as format;

/// Entry point for fuzzers and robustness tests: runs every reader over `data`.
///
/// Locates a region (ELF or raw), analyzes it, renders the text and JSON summaries, and also
/// runs the raw region parser over `data` itself. Must never panic, whatever `data` is.
pub fn fuzz_entry(data: &[u8]) {
    if let Ok(located) = region::locate(data) {
        if let Ok(report) = info::analyze("fuzz", &located) {
            let _ = info::render_text(&report);
            let _ = serde_json::to_string(&report);
        }
        if let Ok(c) = capture::Capture::from_dump(&located) {
            let _ = perf::metadata_bytes(&c);
            let _ = perf::write_perf_data(&c, &mut std::io::sink());
            let _ = c.cpus();
        }
    }
    if let Ok(elf) = vmcore::ElfCore::parse(data) {
        let _ = elf.vmcoreinfo();
        for s in elf.segments.iter().take(16) {
            let _ = elf.read_phys(s.paddr, s.memsz.min(1 << 16));
            let _ = elf.phys_to_offset(s.paddr);
        }
    }
    let _ = cspd_format::validate(data);
    let _ = elf::Vmlinux::parse(data);
}

//! csdump: finds a coresight-panic-dump region in a kdump vmcore, a QEMU memory dump or a raw
//! region file, checks it with the format parser shared with the kernel, and writes it out.
//!
//! [`region::locate_path`] opens an input file; [`region::locate`] takes bytes (a vmcore among
//! them is read through an anonymous memory file, by the same reader), and [`info::analyze`]
//! takes what was located, so tests and fuzzers feed them directly.

pub mod capture;
pub mod cores;
pub mod decode;
pub mod deformat;
pub mod demangle;
pub mod elf;
pub mod extract;
pub mod filter;
pub mod gdb;
pub mod info;
pub mod ini;
pub mod kmem;
pub mod modules;
pub mod output;
pub mod perf;
pub mod progress;
pub mod region;
pub mod report;
pub mod snapshot;
pub mod vmcore;

pub use cspd_format as format;

/// Entry point for fuzzers and robustness tests: runs every reader over `data`. Must never
/// panic, whatever `data` is.
///
/// The first byte chooses what the rest is (the seeds of `fuzz/` start with it):
///
/// - `0` (and any byte not below): a dump (a vmcore in any format csdump reads, with the capture
///   kernel's device dumps it holds, or a raw region image): located,
///   analyzed, rendered as text and JSON, its capture turned into perf's files (into a sink)
///   and into the report (decoded as csdump decodes: in a confined child process, unless the
///   caller chose [`decode::decode_in_process`], as the fuzz target does), the ELF reader and the region parser run on it
///   directly too;
/// - `1`: an OpenCSD snapshot directory, as files ([`snapshot_files`]): read, reported;
/// - `2`: a dump and a vmlinux: a little-endian `u32` length, that many bytes of dump, then the
///   vmlinux: parsed, its build ID checked, the report built with it.
/// - `3`: what GDB sends to the stub: served to a small target by the GDB stub
///   ([`gdb::session::fuzz_session`]).
pub fn fuzz_entry(data: &[u8]) {
    let (sel, rest) = data.split_first().map_or((0, data), |(s, r)| (*s, r));
    let kind = match sel {
        1 => FuzzKind::Snapshot,
        2 => FuzzKind::DumpWithVmlinux,
        3 => FuzzKind::GdbSession,
        _ => match vmcore::sniff(rest) {
            vmcore::Sniff::Elf => FuzzKind::Elf,
            vmcore::Sniff::Kdump => FuzzKind::Kdump,
            vmcore::Sniff::Flattened => FuzzKind::Flattened,
            vmcore::Sniff::Gzip => FuzzKind::Gzip,
            vmcore::Sniff::OtherCompression(_) | vmcore::Sniff::Other => FuzzKind::Region,
        },
    };
    FUZZ_COUNTS[kind as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match sel {
        1 => fuzz_snapshot(rest),
        2 => {
            let n = rest
                .get(..4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            let body = rest.get(4..).unwrap_or(&[]);
            let (dump, vmlinux) = body.split_at(n.min(body.len()));
            fuzz_dump(dump, Some(vmlinux));
        }
        3 => gdb::session::fuzz_session(rest),
        _ => fuzz_dump(rest, None),
    }
}

/// What kind of input [`fuzz_entry`] ran, for the per-format counts of `make fuzz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuzzKind {
    /// A raw region or memory image (or anything that is no vmcore).
    Region = 0,
    /// An ELF vmcore.
    Elf,
    /// A kdump-compressed (or diskdump) vmcore.
    Kdump,
    /// makedumpfile's flattened format.
    Flattened,
    /// A gzip'ed file.
    Gzip,
    /// An OpenCSD snapshot directory.
    Snapshot,
    /// A dump with a vmlinux.
    DumpWithVmlinux,
    /// A GDB remote session.
    GdbSession,
}

/// Names of the [`FuzzKind`]s, in their order.
pub const FUZZ_KINDS: [&str; 8] = [
    "region/raw",
    "ELF vmcore",
    "kdump-compressed",
    "flattened",
    "gzip",
    "snapshot",
    "dump+vmlinux",
    "gdb",
];

static FUZZ_COUNTS: [std::sync::atomic::AtomicU64; 8] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 8];

/// How many inputs [`fuzz_entry`] ran, per kind ([`FUZZ_KINDS`]), in this process.
pub fn fuzz_counts() -> Vec<(&'static str, u64)> {
    FUZZ_KINDS
        .iter()
        .zip(&FUZZ_COUNTS)
        .map(|(k, n)| (*k, n.load(std::sync::atomic::Ordering::Relaxed)))
        .collect()
}

fn fuzz_report(c: &capture::Capture<'_>, vmlinux: Option<&snapshot::VmlinuxImage<'_>>) {
    let r = report::build(
        c,
        vmlinux,
        &report::Options {
            last: 16,
            text_from: None,
        },
    );
    let _ = report::render_text(&r);
    let _ = report::render_html(&r);
    let _ = serde_json::to_string(&r);
}

fn fuzz_dump(data: &[u8], vmlinux: Option<&[u8]>) {
    // The ELF reader wants its file aligned as a mapping is (the command maps vmlinux): a
    // slice of the fuzz input at any offset is not, a new allocation is.
    let vmlinux = vmlinux.map(<[u8]>::to_vec);
    let vmlinux = vmlinux.as_deref();
    let image = vmlinux.and_then(|v| {
        let elf = elf::Vmlinux::parse(v).ok()?;
        Some(snapshot::VmlinuxImage { bytes: v, elf })
    });
    if let Ok(located) = region::locate(data) {
        if let Ok(report) = info::analyze("fuzz", &located) {
            let _ = info::render_text(&report);
            let _ = serde_json::to_string(&report);
        }
        if let Ok(c) = capture::Capture::from_dump(&located) {
            let _ = perf::metadata_bytes(&c);
            let _ = perf::write_perf_data(&c, &mut std::io::sink());
            let _ = c.cpus();
            if let Some(v) = &image {
                let _ =
                    elf::check_build_id(&v.elf, &c.kernel.build_id, c.kernel.release.as_deref());
            }
            fuzz_report(&c, image.as_ref());
        }
    }
    if vmlinux.is_some() {
        return;
    }
    if let Ok(core) = vmcore::Vmcore::from_bytes(data) {
        let _ = core.vmcoreinfo();
        let _ = core.device_dumps();
        // The first 64 KiB of each run of memory (ELF segments, kdump bitmap runs): the page
        // reader and decompressors on every kind of page; the scan over every stored page.
        let page = core.page_size();
        for (a, b) in core.memory_runs(16) {
            let paddr = a.saturating_mul(page);
            let _ = core.read_phys_lenient(paddr, (b - a).saturating_mul(page).min(1 << 16));
            let _ = core.phys_to_offset(paddr);
        }
        let _ = core.scan_page_starts(b"CSPD", 4);
    }
    let _ = cspd_format::validate(data);
    let _ = elf::Vmlinux::parse(data);
}

/// Splits `data` into the files of a snapshot directory: each file is a line `@@ name` followed
/// by its bytes, up to the newline before the next such line (names are kept to `[A-Za-z0-9_.-]`, so that every
/// file stays in the directory).
pub fn snapshot_files(data: &[u8]) -> Vec<(String, &[u8])> {
    let mut files = Vec::new();
    let mut rest = data;
    while let Some(at) = find(rest, b"@@ ") {
        let after = &rest[at + 3..];
        let end = after
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(after.len());
        let name: String = String::from_utf8_lossy(&after[..end])
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            .collect();
        let body = after.get(end + 1..).unwrap_or(&[]);
        // A file ends at the newline before the next `@@ ` line.
        let len = find(body, b"\n@@ ").unwrap_or(body.len());
        if !name.is_empty() && !name.starts_with('.') && files.len() < 64 {
            files.push((name, body.get(..len).unwrap_or(body)));
        }
        rest = body.get(len + 1..).unwrap_or(&[]);
    }
    files
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn fuzz_snapshot(data: &[u8]) {
    let Ok(dir) = tempfile_dir() else {
        return;
    };
    for (name, body) in snapshot_files(data) {
        let _ = std::fs::write(dir.0.join(name), body);
    }
    if let Ok(c) = capture::Capture::from_snapshot_dir(&dir.0) {
        let _ = perf::write_perf_data(&c, &mut std::io::sink());
        fuzz_report(&c, None);
    }
}

/// A scratch directory for one fuzz input, removed when dropped.
struct ScratchDir(std::path::PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> std::io::Result<ScratchDir> {
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering;
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "csdump-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d)?;
    Ok(ScratchDir(d))
}

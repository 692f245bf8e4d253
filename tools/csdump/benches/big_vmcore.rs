//! `csdump info` on a sparse 16 GiB ELF vmcore without vmcoreinfo (the scan has to walk it all),
//! under `ulimit -v 1000000` (about 1 GB of address space): it must succeed, and this prints the
//! time, the scan's rate and csdump's peak resident memory. The same for a 16 GiB raw memory
//! image.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::*;

const RAM: u64 = 0x4000_0000;
const SEGMENT: u64 = 4 << 30;
const SEGMENTS: u64 = 4;
const REGION_SIZE: usize = 1 << 20;
/// Near the top of RAM: the scan walks almost everything first.
const REGION_PADDR: u64 = RAM + SEGMENT * SEGMENTS - (4 << 20);
/// `ulimit -v` in KiB.
const ULIMIT_V: u64 = 1_000_000;

fn children_maxrss_kib() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN is valid and `ru` is writable.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    ru.ru_maxrss
}

fn run(bin: &str, path: &Path, what: &str, size: u64) {
    run_expect(bin, path, what, size, "found by:  scan");
}

fn run_expect(bin: &str, path: &Path, what: &str, size: u64, found: &str) {
    let t = Instant::now();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {ULIMIT_V} && exec \"$0\" info \"$1\""))
        .arg(bin)
        .arg(path)
        .output()
        .unwrap();
    let dt = t.elapsed();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains(found), "{out}");
    println!(
        "{what}: `csdump info` under ulimit -v {ULIMIT_V}: ok in {:.2} s ({:.0} MB/s over {} GiB), peak RSS so far {} MiB",
        dt.as_secs_f64(),
        size as f64 / 1e6 / dt.as_secs_f64(),
        size >> 30,
        children_maxrss_kib() / 1024
    );
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_csdump");
    let tmp = tempfile::tempdir().unwrap();
    let region = build_region(REGION_SIZE, 256 << 10).bytes;
    let mut loads = Vec::new();
    for i in 0..SEGMENTS {
        let paddr = RAM + i * SEGMENT;
        let mut chunks = vec![(0x10_0000, vec![0x5au8; 4096])];
        if (paddr..paddr + SEGMENT).contains(&REGION_PADDR) {
            chunks.push((REGION_PADDR - paddr, region.clone()));
        }
        loads.push(LoadSpec {
            paddr,
            size: SEGMENT,
            chunks,
        });
    }
    // First (the peak is over all runs): a small vmcore whose vmcoreinfo claims a 1 GiB region.
    let small = tmp.path().join("vmcore-small.elf");
    let size = write_sparse_elf(
        &small,
        &[vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, 1 << 30))],
        &[LoadSpec {
            paddr: REGION_PADDR - (1 << 20),
            size: 4 << 20,
            chunks: vec![(1 << 20, region.clone())],
        }],
    );
    run_expect(
        bin,
        &small,
        "4 MiB vmcore, vmcoreinfo claiming a 1 GiB region",
        size,
        "found by:  vmcoreinfo",
    );

    let elf = tmp.path().join("vmcore-16g.elf");
    let size = write_sparse_elf(&elf, &[core_note(), core_note()], &loads);
    run(bin, &elf, "16 GiB ELF vmcore, no vmcoreinfo", size);

    let raw = tmp.path().join("memory-16g.img");
    {
        use std::io::Seek;
        use std::io::Write;
        let mut f = std::fs::File::create(&raw).unwrap();
        f.seek(std::io::SeekFrom::Start(REGION_PADDR - RAM))
            .unwrap();
        f.write_all(&region).unwrap();
        f.set_len(SEGMENT * SEGMENTS).unwrap();
    }
    run(bin, &raw, "16 GiB raw memory image", SEGMENT * SEGMENTS);
}

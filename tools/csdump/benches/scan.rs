//! Times finding and checking a dump in a sparse ~2 GiB synthetic vmcore, through vmcoreinfo and
//! through the page-start scan, and prints MB/s over the vmcore's size.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use common::*;

const RAM: u64 = 0x4000_0000;
const SEGMENT: u64 = 512 << 20;
const SEGMENTS: u64 = 4;
const REGION_SIZE: usize = 1 << 20;
/// Near the top of RAM: the scan has to walk almost everything first.
const REGION_PADDR: u64 = RAM + SEGMENT * SEGMENTS - (4 << 20);

fn write_vmcore(path: &Path, with_vmcoreinfo: bool, region: &[u8]) -> u64 {
    let mut loads = Vec::new();
    for i in 0..SEGMENTS {
        let paddr = RAM + i * SEGMENT;
        let mut chunks = vec![(0x10_0000, vec![0x5au8; 4096])];
        if (paddr..paddr + SEGMENT).contains(&REGION_PADDR) {
            chunks.push((REGION_PADDR - paddr, region.to_vec()));
        }
        loads.push(LoadSpec {
            paddr,
            size: SEGMENT,
            chunks,
        });
    }
    let mut notes = vec![core_note(), core_note()];
    if with_vmcoreinfo {
        notes.push(vmcoreinfo_note(&vmcoreinfo_text(
            REGION_PADDR,
            REGION_SIZE as u64,
        )));
    }
    write_sparse_elf(path, &notes, &loads)
}

fn best_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn library_pass(path: &Path) -> usize {
    let located = csdump::region::locate_path(path).unwrap();
    let report = csdump::info::analyze("bench", &located).unwrap();
    assert!(report.clean);
    report.records.len()
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let region = build_region(REGION_SIZE, 512 << 10).bytes;
    let bin = env!("CARGO_BIN_EXE_csdump");
    println!(
        "sparse vmcore: {} PT_LOADs of {} MiB, region of {} KiB at physical {REGION_PADDR:#x}",
        SEGMENTS,
        SEGMENT >> 20,
        REGION_SIZE >> 10
    );
    for (label, with_info) in [("vmcoreinfo", true), ("scan", false)] {
        let path = tmp.path().join(format!("vmcore-{label}"));
        let size = write_vmcore(&path, with_info, &region);
        // Warm the page cache once (the file is sparse: holes cost no disk reads).
        library_pass(&path);
        let lib = best_of(5, || {
            library_pass(&path);
        });
        let cli = best_of(3, || {
            let o = Command::new(bin).arg("info").arg(&path).output().unwrap();
            assert_eq!(o.status.code(), Some(0));
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains(if with_info {
                "found by:  vmcoreinfo"
            } else {
                "found by:  scan"
            }));
        });
        println!(
            "{label:>10}: library locate+check {:>8.2} ms ({:>10.0} MB/s)   `csdump info` {:>8.2} ms ({:>10.0} MB/s)   file {} MiB",
            lib.as_secs_f64() * 1e3,
            mbps(size, lib),
            cli.as_secs_f64() * 1e3,
            mbps(size, cli),
            size >> 20
        );
    }
}

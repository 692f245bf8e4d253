//! `csdump info` on a sparse 16 GiB ELF vmcore without vmcoreinfo (the scan has to walk it all),
//! on a kdump-compressed (lzo) vmcore of 16 GiB of memory without vmcoreinfo (4 Mi page
//! descriptors, one page in 256 holding data, the scan decompresses each), and on a 16 GiB raw
//! memory image, under `ulimit -v 1000000` (about 1 GB of address space): each must succeed, and
//! this prints the time, the scan's rate and csdump's peak resident memory. With
//! `CSDUMP_BASELINE=/path/to/an/older/csdump` the same inputs also go to that binary, in the same
//! run, one after the other (the Rust vmcore reader against the libkdumpfile one).

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::dumps;
use common::*;

const RAM: u64 = 0x4000_0000;
const SEGMENT: u64 = 4 << 30;
const SEGMENTS: u64 = 4;
const REGION_SIZE: usize = 1 << 20;
/// Near the top of RAM: the scan walks almost everything first.
const REGION_PADDR: u64 = RAM + SEGMENT * SEGMENTS - (4 << 20);
/// `ulimit -v` in KiB.
const ULIMIT_V: u64 = 1_000_000;

/// Runs `bin info path` under the address-space limit: exit status, stdout, stderr, peak RSS
/// (KiB) of that process alone.
// Waited for by wait4, which gives the child's own rusage as Child::wait cannot.
#[allow(clippy::zombie_processes)]
fn info(bin: &str, path: &Path) -> (Option<i32>, String, String, i64) {
    use std::io::Read;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {ULIMIT_V} && exec \"$0\" info \"$1\""))
        .arg(bin)
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let mut status = 0;
    // SAFETY: getrusage's struct is plain data; wait4 waits for our own child and fills both.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, out, err, ru.ru_maxrss)
}

fn run(bins: &[(&str, String)], path: &Path, what: &str, size: u64) {
    run_expect(bins, path, what, size, "found by:  scan");
}

fn run_expect(bins: &[(&str, String)], path: &Path, what: &str, size: u64, found: &str) {
    // Runs alternate between the binaries, so that a slower moment of the machine (page cache,
    // other load) does not fall on one of them only; the best run of each is printed.
    let reps: usize = std::env::var("BIG_VMCORE_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut best = vec![(f64::MAX, 0i64, Vec::new()); bins.len()];
    for _ in 0..reps {
        for ((name, bin), best) in bins.iter().zip(&mut best) {
            let t = Instant::now();
            let (code, out, err, rss) = info(bin, path);
            let dt = t.elapsed().as_secs_f64();
            assert_eq!(code, Some(0), "{name}: {what}: {err}");
            assert!(out.contains(found), "{name}: {out}");
            best.0 = best.0.min(dt);
            best.1 = best.1.max(rss);
            best.2.push(format!("{dt:.2}"));
        }
    }
    for ((name, _), (dt, rss, all)) in bins.iter().zip(best) {
        println!(
            "{what}: {name}: `csdump info` under ulimit -v {ULIMIT_V}: ok in {dt:.2} s ({:.0} MB/s over {} GiB; runs: {} s), peak RSS {} MiB",
            size as f64 / 1e6 / dt,
            size >> 30,
            all.join(", "),
            rss / 1024
        );
    }
}

/// A kdump-compressed vmcore (lzo pages, dump level 31, no vmcoreinfo) of `pages` pages of RAM
/// at [`RAM`], one page in 256 holding data, `region` at [`REGION_PADDR`].
fn write_kdump(path: &Path, pages: u64, region: &[u8]) {
    let mut mem = dumps::Memory {
        ram: vec![(RAM / 4096, pages)],
        pages: Default::default(),
    };
    for pfn in (RAM / 4096..RAM / 4096 + pages).step_by(256) {
        let mut p = vec![0u8; 4096];
        for (i, b) in p.iter_mut().enumerate().take(1024) {
            *b = (pfn as usize ^ i) as u8;
        }
        mem.pages.insert(pfn, p);
    }
    for (i, c) in region.chunks(4096).enumerate() {
        mem.pages.insert(REGION_PADDR / 4096 + i as u64, c.to_vec());
    }
    let bytes = dumps::kdump_of(&mem, &[core_note()], dumps::Compress::Lzo, 31, &[]);
    std::fs::write(path, &bytes).unwrap();
}

fn main() {
    if let Some(path) = std::env::var_os("BIG_VMCORE_WRITE_KDUMP") {
        let region = build_region(REGION_SIZE, 256 << 10).bytes;
        write_kdump(Path::new(&path), SEGMENT * SEGMENTS / 4096, &region);
        return;
    }
    let mut bins = vec![("this csdump", env!("CARGO_BIN_EXE_csdump").to_string())];
    if let Ok(b) = std::env::var("CSDUMP_BASELINE") {
        bins.push(("baseline", b));
    }
    let bin = &bins[..];
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

    // Written by a child process: a process started from this one would inherit the peak RSS
    // of building it (Linux keeps the high-water mark of the memory it execs from).
    let kdump = tmp.path().join("vmcore-16g.kdump");
    let st = Command::new(std::env::current_exe().unwrap())
        .env("BIG_VMCORE_WRITE_KDUMP", &kdump)
        .status()
        .unwrap();
    assert!(st.success());
    let file = std::fs::metadata(&kdump).unwrap().len();
    println!("(the kdump-compressed vmcore is {} MiB)", file >> 20);
    run(
        bin,
        &kdump,
        "kdump-compressed vmcore of 16 GiB, no vmcoreinfo",
        SEGMENT * SEGMENTS,
    );
    std::fs::remove_file(&kdump).unwrap();

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

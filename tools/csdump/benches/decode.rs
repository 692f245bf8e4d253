//! `csdump report` on a 16 MiB trace, and csdump's decode (in its confined child, and in
//! process) against `trc_pkt_lister` on the same input. Prints numbers; enforces nothing (run: `cargo bench -p csdump --bench decode`,
//! or `make bench-csdump`).
//!
//! The trace is real: the Juno ETB capture of OpenCSD's `juno-ret-stck` snapshot (six ETMv4
//! sources, a 7 MiB kernel image) laid end to end 256 times, as a wrapped buffer's worth of
//! captures; each copy starts mid-stream and the decoders resynchronise at its A-sync packets.
//! It is packed into a committed dump (identity with `_text` and a build ID, a TMC record, the
//! ETMs' saved registers) with a vmlinux holding the kernel image, and into a snapshot
//! directory for `trc_pkt_lister`.
//!
//! Printed: the decode throughput in MB of trace per second, csdump's (the library in its
//! confined child process, and in process: what the child costs; best of three each) and
//! trc_pkt_lister's (`-decode_only`, its log to a file; one run on the first 64 of the 256
//! copies, the same bytes per copy); `csdump report`'s wall time and
//! peak RSS (`/usr/bin/time`); and the files it left outside its output (none expected, TMPDIR
//! and the working directory are checked).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use csdump::capture::Capture;
use cspd_format::*;

#[path = "../tests/common/mod.rs"]
mod common;

use common::snapshots::write_elf;
use common::snapshots::BUILD_ID;
use common::tmc_payload;
use common::DumpWriter;

const COPIES: usize = 256;
/// The copies trc_pkt_lister decodes: a quarter of csdump's input. Every copy is the same
/// capture, so its throughput per MB is the same as on all of them, and its run takes about
/// 8 s instead of 33 s (its log of the whole input is 1.9 GB).
const TPL_COPIES: usize = 64;
const LOAD: u64 = 0xFFFF_0000_0808_0000;

/// The committed dump of `trace` and the capture's ETMs, written with the kernel's writer.
fn dump(cap: &Capture<'_>, trace: &[u8]) -> Vec<u8> {
    let mut id = Identity::default();
    id.set_release(b"4.9.0-juno").unwrap();
    id.set_build_id(&BUILD_ID).unwrap();
    id.text_addr = LOAD;
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: bench",
        truncated: false,
    };
    let mut w = DumpWriter::new(trace.len() + (1 << 20), [7; 16], &id, &panic);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(trace),
    );
    for e in &cap.etms {
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        e.state.encode(&mut b).unwrap();
        let name = format!("etm{}", e.state.cpu);
        w.add(
            RecordKind::Source,
            PayloadType::Etm4x,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
    }
    w.finish()
}

fn copy_snapshot(from: &Path, to: &Path, trace: &[u8]) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "cstrace.bin" {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    fs::write(to.join("cstrace.bin"), trace).unwrap();
}

fn entries(d: &Path) -> Vec<String> {
    fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn main() {
    let Some(src) = cspd_testdata::snapshot("juno-ret-stck") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let one = fs::read(src.join("cstrace.bin")).unwrap();
    let trace: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * COPIES)
        .collect();
    let mb = trace.len() as f64 / 1e6;
    let snap = tmp.path().join("snap16");
    copy_snapshot(&src, &snap, &trace);
    let tpl_trace = &trace[..one.len() * TPL_COPIES];
    let tpl_mb = tpl_trace.len() as f64 / 1e6;
    let tpl_snap = tmp.path().join("snap4");
    copy_snapshot(&src, &tpl_snap, tpl_trace);
    println!(
        "input: {:.1} MiB of real ETMv4 trace (juno-ret-stck's ETB capture x{COPIES}), 6 sources",
        trace.len() as f64 / (1 << 20) as f64
    );

    // The library through csdump's decode interface: in its confined child process (what csdump
    // runs), then in this process (what the fuzz target runs), best of three each.
    let cap = Capture::from_snapshot_dir(&snap).unwrap();
    let mut best = [f64::MAX; 2];
    let mut elements = [0u64; 2];
    for (i, in_process) in [false, true].into_iter().enumerate() {
        csdump::decode::decode_in_process(in_process);
        for _ in 0..3 {
            let mut mem = csdump::decode::CodeImages::new(&cap, None);
            let t = Instant::now();
            let mut n = 0u64;
            let s = csdump::decode::decode_each(&cap, &mut mem, |_, _| {
                n += 1;
                csdump::decode::Flow::Continue
            })
            .unwrap();
            best[i] = best[i].min(t.elapsed().as_secs_f64());
            assert_eq!(s.bytes as usize, trace.len());
            elements[i] = n;
        }
    }
    csdump::decode::decode_in_process(false);
    assert_eq!(
        elements[0], elements[1],
        "the child and the process decode differently"
    );
    let ours = mb / best[0];
    println!(
        "csdump decode (libopencsd in a confined child, best of 3): {:.3} s, {ours:.1} MB/s, {} elements",
        best[0], elements[0]
    );
    println!(
        "csdump decode (libopencsd in process, as the fuzz target runs it, best of 3): {:.3} s, {:.1} MB/s; \
         the child costs {:+.1}%",
        best[1],
        mb / best[1],
        (best[0] / best[1] - 1.0) * 100.0
    );

    // trc_pkt_lister on the same trace, its first TPL_COPIES copies: Debian's (bookworm,
    // OpenCSD 1.3.3), and the one built with the library csdump links (1.5.5).
    let debian = cspd_testdata::tool("trc_pkt_lister").then(|| "trc_pkt_lister".into());
    for (what, tool) in [
        ("Debian's trc_pkt_lister", debian),
        (
            "the linked library's trc_pkt_lister",
            cspd_testdata::library_trc_pkt_lister(),
        ),
    ] {
        let Some(tool) = tool else {
            continue;
        };
        let log = tmp.path().join("tpl.ppl");
        let _ = fs::remove_file(&log);
        // One run each: about 8 s for 4 MiB, seven times csdump's time per MB, so a second run
        // would not change the verdict.
        let t = Instant::now();
        let o = Command::new(&tool)
            .arg("-ss_dir")
            .arg(&tpl_snap)
            .args(["-decode_only", "-logfilename"])
            .arg(&log)
            .output()
            .unwrap();
        let best = t.elapsed().as_secs_f64();
        assert!(o.status.success());
        let text = fs::read_to_string(&log).unwrap();
        let size = text.len();
        let lines = text
            .lines()
            .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_"))
            .count();
        let _ = fs::remove_file(&log);
        let theirs = tpl_mb / best;
        println!(
            "{what} -decode_only (one run, {:.1} MiB: {TPL_COPIES} of the {COPIES} copies): {best:.3} s, \
             {theirs:.1} MB/s, {lines} element lines, log {} MB; csdump is {:.2}x faster per MB \
             (target >= 2x)",
            tpl_trace.len() as f64 / (1 << 20) as f64,
            size / 1_000_000,
            ours / theirs
        );
    }

    // csdump report on a dump of that trace, with vmlinux: wall time, peak RSS, stray files.
    let dump_path = tmp.path().join("d16.cspd");
    fs::write(&dump_path, dump(&cap, &trace)).unwrap();
    let image = fs::read(src.join("kernel_dump.bin")).unwrap();
    let vml = tmp.path().join("vmlinux");
    write_elf(&image, LOAD, &vml);
    let scratch = tmp.path().join("tmpdir");
    let cwd = tmp.path().join("cwd");
    fs::create_dir_all(&scratch).unwrap();
    fs::create_dir_all(&cwd).unwrap();
    let html = tmp.path().join("out.html");
    let t = Instant::now();
    let o = Command::new("/usr/bin/time")
        .args(["-f", "%M %e"])
        .arg(env!("CARGO_BIN_EXE_csdump"))
        .arg("report")
        .arg(&dump_path)
        .arg("--vmlinux")
        .arg(&vml)
        .arg("--html")
        .arg(&html)
        .current_dir(&cwd)
        .env("TMPDIR", &scratch)
        .output()
        .unwrap();
    let wall = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.lines().last().unwrap_or("");
    let rss_kb: u64 = last
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(o.status.success(), "csdump report failed: {err}");
    let stray: Vec<String> = entries(&scratch).into_iter().chain(entries(&cwd)).collect();
    println!(
        "csdump report (16 MiB trace, --vmlinux, --html): {wall:.2} s, peak RSS {:.1} MB (target < 256 MB), \
         files left in TMPDIR or the working directory: {} {:?}",
        rss_kb as f64 / 1024.0,
        stray.len(),
        stray
    );
}

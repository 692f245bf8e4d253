//! `csdump report` on a 16 MiB trace, and the in-process decode against `trc_pkt_lister` on the
//! same input. Prints numbers; enforces nothing (run: `cargo bench -p csdump --bench decode`,
//! or `make bench-csdump`).
//!
//! The trace is real: the Juno ETB capture of OpenCSD's `juno-ret-stck` snapshot (six ETMv4
//! sources, a 7 MiB kernel image) laid end to end 256 times, as a wrapped buffer's worth of
//! captures; each copy starts mid-stream and the decoders resynchronise at its A-sync packets.
//! It is packed into a committed dump (identity with `_text` and a build ID, a TMC record, the
//! ETMs' saved registers) with a vmlinux holding the kernel image, and into a snapshot
//! directory for `trc_pkt_lister`.
//!
//! Printed: the decode throughput in MB of trace per second, csdump's (the library in process)
//! and trc_pkt_lister's (`-decode_only`, its log to a file); `csdump report`'s wall time and
//! peak RSS (`/usr/bin/time`); and the files it left outside its output (none expected, TMPDIR
//! and the working directory are checked).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use csdump::capture::Capture;
use cspd_format::*;
use cspd_hw::tmc::TmcRecordHeader;
use cspd_hw::tmc::TMC_RECORD_HEADER_LEN;
use cspd_hw::tmc::TMC_RECORD_VERSION;

const COPIES: usize = 256;
const LOAD: u64 = 0xFFFF_0000_0808_0000;
const BUILD_ID: [u8; 20] = [0xB1; 20];

fn dump(cap: &Capture<'_>, trace: &[u8]) -> Vec<u8> {
    let size = trace.len() + (1 << 20);
    let mut r = vec![0u8; size];
    let ch = ContainerHeader::new(size as u64, [7; 16], 1);
    init_region(&mut r, &ch).unwrap();
    let add = |r: &mut Vec<u8>, kind, name: &[u8], cpu: u32, data: &[u8]| {
        let mut h = RecordHeader::new(kind, name, data.len().next_multiple_of(8) as u32, ch.stamp);
        h.cpu = cpu;
        let off = append_record(r, &h).unwrap();
        h.status = RecordStatus::Ok;
        write_record(&mut r[off..], &h, data).unwrap();
    };
    let mut id = Identity::default();
    id.set_release(b"4.9.0-juno").unwrap();
    id.set_build_id(&BUILD_ID).unwrap();
    id.text_addr = LOAD;
    let mut b = vec![0u8; IDENTITY_SIZE];
    id.encode(&mut b).unwrap();
    add(&mut r, RecordKind::Identity, b"identity", CPU_NONE, &b);
    let tmc = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        rsz: (trace.len() / 4) as u32,
        trace_len: trace.len() as u32,
        words_read: (trace.len() / 4) as u32,
        ..TmcRecordHeader::default()
    };
    let mut sink = vec![0u8; TMC_RECORD_HEADER_LEN];
    tmc.encode(&mut sink).unwrap();
    sink.extend_from_slice(trace);
    add(&mut r, RecordKind::Sink, b"tmc_etf0", CPU_NONE, &sink);
    for e in &cap.etms {
        let mut b = vec![0u8; cspd_hw::etm4x::SAVED_STATE_SIZE];
        e.state.encode(&mut b).unwrap();
        add(&mut r, RecordKind::Source, b"etm", e.state.cpu, &b);
    }
    write_commit(&mut r).unwrap();
    r
}

/// A minimal ELF64 vmlinux: `.text` at `addr`, `_text`, one function per 4 KiB, a build ID.
fn vmlinux(image: &[u8], addr: u64) -> Vec<u8> {
    let shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0";
    let mut strtab = b"\0_text\0".to_vec();
    let mut syms = vec![0u8; 24];
    let mut sym = |name: u32, info: u8, value: u64, size: u64| {
        syms.extend_from_slice(&name.to_le_bytes());
        syms.extend_from_slice(&[info, 0]);
        syms.extend_from_slice(&1u16.to_le_bytes());
        syms.extend_from_slice(&value.to_le_bytes());
        syms.extend_from_slice(&size.to_le_bytes());
    };
    sym(1, 0x10, addr, 0);
    for (i, a) in (0..image.len() as u64).step_by(0x1000).enumerate() {
        let n = strtab.len() as u32;
        strtab.extend_from_slice(format!("f_{i}\0").as_bytes());
        sym(n, 0x12, addr + a, 0x1000);
    }
    let pad = |b: &mut Vec<u8>| b.resize(b.len().next_multiple_of(8), 0);
    let mut body = vec![0u8; 0x1000];
    body.extend_from_slice(image);
    let str_off = body.len();
    body.extend_from_slice(&strtab);
    pad(&mut body);
    let sym_off = body.len();
    body.extend_from_slice(&syms);
    let shs_off = body.len();
    body.extend_from_slice(shstr);
    pad(&mut body);
    let note_off = body.len();
    for v in [4u32, 20, 3] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(b"GNU\0");
    body.extend_from_slice(&BUILD_ID);
    let note_len = body.len() - note_off;
    pad(&mut body);
    let sh_off = body.len();
    // name, type, flags, address, offset, size, link, info, entry size
    type Row = (u32, u32, u64, u64, usize, usize, u32, u32, u64);
    let rows: [Row; 6] = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0),
        (1, 1, 6, addr, 0x1000, image.len(), 0, 0, 0),
        (7, 2, 0, 0, sym_off, syms.len(), 3, 1, 24),
        (15, 3, 0, 0, str_off, strtab.len(), 0, 0, 0),
        (23, 3, 0, 0, shs_off, shstr.len(), 0, 0, 0),
        (33, 7, 2, 0, note_off, note_len, 0, 0, 0),
    ];
    for (name, ty, flags, a, off, size, link, info, ent) in rows {
        body.extend_from_slice(&name.to_le_bytes());
        body.extend_from_slice(&ty.to_le_bytes());
        body.extend_from_slice(&flags.to_le_bytes());
        body.extend_from_slice(&a.to_le_bytes());
        body.extend_from_slice(&(off as u64).to_le_bytes());
        body.extend_from_slice(&(size as u64).to_le_bytes());
        body.extend_from_slice(&link.to_le_bytes());
        body.extend_from_slice(&info.to_le_bytes());
        body.extend_from_slice(&8u64.to_le_bytes());
        body.extend_from_slice(&ent.to_le_bytes());
    }
    let mut eh = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    eh.resize(16, 0);
    eh.extend_from_slice(&2u16.to_le_bytes());
    eh.extend_from_slice(&183u16.to_le_bytes());
    eh.extend_from_slice(&1u32.to_le_bytes());
    eh.extend_from_slice(&addr.to_le_bytes());
    eh.extend_from_slice(&0u64.to_le_bytes());
    eh.extend_from_slice(&(sh_off as u64).to_le_bytes());
    eh.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 0, 64, 6, 4] {
        eh.extend_from_slice(&v.to_le_bytes());
    }
    body[..64].copy_from_slice(&eh);
    body
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
    println!(
        "input: {:.1} MiB of real ETMv4 trace (juno-ret-stck's ETB capture x{COPIES}), 6 sources",
        trace.len() as f64 / (1 << 20) as f64
    );

    // In process: the library through csdump's decode interface.
    let cap = Capture::from_snapshot_dir(&snap).unwrap();
    let mut best = f64::MAX;
    let mut elements = 0u64;
    for _ in 0..3 {
        let mut mem = csdump::decode::CodeImages::new(&cap, None);
        let t = Instant::now();
        let mut n = 0u64;
        let s = csdump::decode::decode_each(&cap, &mut mem, |_, _| {
            n += 1;
            csdump::decode::Flow::Continue
        })
        .unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(s.bytes as usize, trace.len());
        elements = n;
    }
    let ours = mb / best;
    println!(
        "csdump decode (libopencsd in process): {:.3} s, {ours:.1} MB/s, {elements} elements",
        best
    );

    // trc_pkt_lister on the same snapshot: Debian's (bookworm, OpenCSD 1.3.3), and the one built
    // with the library csdump links (1.5.5).
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
        let mut best = f64::MAX;
        let mut lines = 0;
        let mut size = 0;
        for _ in 0..2 {
            let _ = fs::remove_file(&log);
            let t = Instant::now();
            let o = Command::new(&tool)
                .arg("-ss_dir")
                .arg(&snap)
                .args(["-decode_only", "-logfilename"])
                .arg(&log)
                .output()
                .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            assert!(o.status.success());
            let text = fs::read_to_string(&log).unwrap();
            size = text.len();
            lines = text
                .lines()
                .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_"))
                .count();
        }
        let _ = fs::remove_file(&log);
        let theirs = mb / best;
        println!(
            "{what} -decode_only: {best:.3} s, {theirs:.1} MB/s, {lines} element lines, log {} MB; \
             csdump is {:.2}x faster (target >= 2x)",
            size / 1_000_000,
            ours / theirs
        );
    }

    // csdump report on a dump of that trace, with vmlinux: wall time, peak RSS, stray files.
    let dump_path = tmp.path().join("d16.cspd");
    fs::write(&dump_path, dump(&cap, &trace)).unwrap();
    let image = fs::read(src.join("kernel_dump.bin")).unwrap();
    let vml = tmp.path().join("vmlinux");
    fs::write(&vml, vmlinux(&image, LOAD)).unwrap();
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

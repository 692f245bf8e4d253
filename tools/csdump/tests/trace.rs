//! `csdump perf`, `snapshot` and `report` judged by the real decoders: Debian's `perf` (linked
//! with OpenCSD) and `trc_pkt_lister`, on real ETMv4 trace captured on a Juno board (the
//! OpenCSD test snapshots), given both as a snapshot directory and packed into a dump with the
//! format's and cspd-hw's encoders.
//!
//! A test that needs a missing tool or the shared test data prints why and returns.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

use csdump::capture::Capture;
use cspd_format::*;

mod common;
use common::tmc_payload;
use common::DumpWriter;
use cspd_format::cpu_debug::CpuSample;
use cspd_format::cpu_debug::Outcome;
use cspd_format::cpu_debug::PcCalibration;
use cspd_format::cpu_debug::PcKind;
use cspd_format::cpu_debug::FLAG_EDCIDSR_PRESENT;
use cspd_format::cpu_debug::FLAG_EDVIDSR_PRESENT;
use cspd_format::cpu_debug::FLAG_PC64;
use cspd_format::etm4x::SavedState;

const RET_STCK: &str = "juno-ret-stck";
const UNAME: &str = "juno-uname-001";
/// KASLR offset of the dumps built here: the kernel image of juno-ret-stck is linked this
/// much lower than where the trace says it ran.
const KASLR: u64 = 0x20_0000;

fn csdump() -> &'static str {
    env!("CARGO_BIN_EXE_csdump")
}

fn testdata(name: &str) -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/opencsd")
        .join(name);
    if d.join("snapshot.ini").exists() {
        Some(d)
    } else {
        eprintln!("skipped: test data {} not present", d.display());
        None
    }
}

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: {tool} not installed");
    }
    ok
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(csdump());
    for a in args {
        c.arg(a);
    }
    let out = c.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(101),
        "csdump panicked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs trc_pkt_lister on `dir`, returns its log (a fresh file: it appends).
fn trc_pkt_lister(dir: &Path, decode: bool, log: &Path) -> String {
    let _ = fs::remove_file(log);
    let mut c = Command::new("trc_pkt_lister");
    c.arg("-ss_dir").arg(dir);
    if decode {
        c.arg("-decode_only");
    }
    let out = c.arg("-logfilename").arg(log).output().unwrap();
    assert!(
        out.status.success(),
        "trc_pkt_lister failed on {}",
        dir.display()
    );
    fs::read_to_string(log).unwrap()
}

/// The generic element lines (`OCSD_GEN_TRC_ELEM_…`) of a decode.
fn elements(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.starts_with("Idx:") && l.contains("OCSD_GEN_TRC_ELEM_"))
        .map(str::to_string)
        .collect()
}

/// The packet lines `Idx:N; ID:X;\t<packet>` of a listing, without the end-of-trace marker.
fn packets(log: &str) -> Vec<String> {
    log.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("Idx:") && l.contains(";\tI_") && !l.contains("I_INCOMPLETE_EOT"))
        .map(str::to_string)
        .collect()
}

/// Instruction ranges `[start, end)` of a decode.
fn ranges(els: &[String]) -> Vec<(u64, u64)> {
    els.iter()
        .filter_map(|l| {
            let r = l.split("exec range=0x").nth(1)?;
            let (a, rest) = r.split_once(":[0x")?;
            let b = rest.split(']').next()?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Builds a committed dump from a snapshot: its trace as a TMC record, each ETM's registers as
/// a saved state, a CPU debug sample per CPU, identity (with `_text` and a KASLR offset) and
/// panic info.
fn dump_from_snapshot(snap: &Path, panic_cpu: u32) -> Vec<u8> {
    let cap = Capture::from_snapshot_dir(snap).unwrap();
    let trace = cap.sinks[0].trace.to_vec();
    let size = trace.len() + 64 * 1024;
    let mut id = Identity::default();
    id.set_release(b"4.9.0-juno").unwrap();
    id.text_addr = cap.text_addr();
    id.kaslr_offset = if cap.kernel.text.is_some() { KASLR } else { 0 };
    let panic = PanicInfo {
        cpu: panic_cpu,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(size, [7; 16], &id, &panic);
    let sink = tmc_payload(&trace);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &sink,
    );
    for e in &cap.etms {
        let mut b = vec![0u8; cspd_format::etm4x::SAVED_STATE_SIZE];
        e.state.encode(&mut b).unwrap();
        let name = format!("etm{}", e.state.cpu);
        w.add(
            RecordKind::Source,
            PayloadType::Etm4x,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
        let pc = cap.text_addr() + 0x40;
        let s = CpuSample {
            cpu: e.state.cpu,
            outcome: Outcome::Sampled,
            flags: FLAG_PC64 | FLAG_EDCIDSR_PRESENT | FLAG_EDVIDSR_PRESENT,
            pcsample: 3,
            pcsr_offset: 0,
            edprsr_first: 0x1,
            edprsr: 0x1,
            edprcr_saved: 0,
            power_polls: 1,
            edpcsr: (pc & 0xFFFF_FFFF) as u32,
            edpcsr_hi: (pc >> 32) as u32,
            edcidsr: 0,
            edvidsr: 0x9000_0000,
            pc: PcCalibration {
                pc,
                kind: PcKind::AArch64,
            },
        };
        let mut b = vec![0u8; cspd_format::cpu_debug::RECORD_LEN];
        s.encode(&mut b).unwrap();
        let name = format!("cpu_debug{}", e.state.cpu);
        w.add(
            RecordKind::CpuDebug,
            PayloadType::CpuDebug,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
    }
    w.finish()
}

/// Writes a minimal ELF64 (aarch64) vmlinux around `image` at `addr`: `.text`, and a symbol
/// table with `_text` and one function per 4 KiB (`f_<n>`).
fn write_elf(image: &[u8], addr: u64, path: &Path) {
    let text_off = 0x1000usize;
    let shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let mut strtab = b"\0_text\0".to_vec();
    let mut syms = vec![0u8; 24];
    let sym = |syms: &mut Vec<u8>, name: u32, info: u8, value: u64, size: u64| {
        syms.extend_from_slice(&name.to_le_bytes());
        syms.push(info);
        syms.push(0);
        syms.extend_from_slice(&1u16.to_le_bytes());
        syms.extend_from_slice(&value.to_le_bytes());
        syms.extend_from_slice(&size.to_le_bytes());
    };
    sym(&mut syms, 1, 0x10, addr, 0);
    for (i, a) in (0..image.len() as u64).step_by(0x1000).enumerate() {
        let n = strtab.len() as u32;
        strtab.extend_from_slice(format!("f_{i}\0").as_bytes());
        sym(&mut syms, n, 0x12, addr + a, 0x1000);
    }
    let mut body = vec![0u8; text_off];
    body.extend_from_slice(image);
    let str_off = body.len();
    body.extend_from_slice(&strtab);
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let sym_off = body.len();
    body.extend_from_slice(&syms);
    let shs_off = body.len();
    body.extend_from_slice(shstr);
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let sh_off = body.len();
    let sh = |body: &mut Vec<u8>,
              name: u32,
              ty: u32,
              flags: u64,
              a: u64,
              off: usize,
              size: usize,
              link: u32,
              info: u32,
              ent: u64| {
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
    };
    sh(&mut body, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sh(&mut body, 1, 1, 6, addr, text_off, image.len(), 0, 0, 0);
    sh(&mut body, 7, 2, 0, 0, sym_off, syms.len(), 3, 1, 24);
    sh(&mut body, 15, 3, 0, 0, str_off, strtab.len(), 0, 0, 0);
    sh(&mut body, 23, 3, 0, 0, shs_off, shstr.len(), 0, 0, 0);
    let mut eh = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    eh.resize(16, 0);
    eh.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    eh.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    eh.extend_from_slice(&1u32.to_le_bytes());
    eh.extend_from_slice(&addr.to_le_bytes());
    eh.extend_from_slice(&0u64.to_le_bytes());
    eh.extend_from_slice(&(sh_off as u64).to_le_bytes());
    eh.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 0, 64, 5, 4] {
        eh.extend_from_slice(&v.to_le_bytes());
    }
    body[..64].copy_from_slice(&eh);
    fs::write(path, body).unwrap();
}

/// The inputs of a data set: its snapshot directory and a dump built from it.
fn inputs(name: &str, tmp: &Path) -> Option<(PathBuf, PathBuf)> {
    let snap = testdata(name)?;
    let dump = tmp.join(format!("{name}.cspd"));
    fs::write(&dump, dump_from_snapshot(&snap, 0)).unwrap();
    Some((snap, dump))
}

#[test]
fn snapshot_decodes_like_the_original() {
    if !have("trc_pkt_lister") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for name in [RET_STCK, UNAME] {
        let Some((snap, dump)) = inputs(name, tmp.path()) else {
            return;
        };
        let original = elements(&trc_pkt_lister(&snap, true, &tmp.path().join("orig.ppl")));
        assert!(original.len() > 1000, "{name}: {} elements", original.len());
        for input in [&snap, &dump] {
            let out = tmp.path().join(format!("snap-{name}"));
            let _ = fs::remove_dir_all(&out);
            let o = if name == RET_STCK && input == &dump {
                // A dump holds no memory: the kernel text comes from vmlinux, linked KASLR
                // lower than where it ran.
                let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
                let elf = tmp.path().join("vmlinux");
                write_elf(&image, 0xFFFF_0000_0808_0000 - KASLR, &elf);
                run(&[&"snapshot", input, &"-o", &out, &"--vmlinux", &elf])
            } else {
                run(&[&"snapshot", input, &"-o", &out])
            };
            assert!(
                o.status.code() != Some(1),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            let got = elements(&trc_pkt_lister(&out, true, &tmp.path().join("new.ppl")));
            if name == RET_STCK {
                let (a, b) = (ranges(&original), ranges(&got));
                assert!(a.len() > 40_000, "{}", a.len());
                assert_eq!(
                    a,
                    b,
                    "{name} from {}: instruction ranges differ",
                    input.display()
                );
            } else {
                // No kernel image in this capture: compare every element.
                assert_eq!(original, got, "{name} from {}", input.display());
            }
        }
    }
}

/// perf knows the event and its PMU by name: the header lists the event description and the
/// `cs_etm` PMU mapping, and neither `perf script` nor `perf evlist` falls back to "unknown
/// attr type".
fn assert_perf_names_cs_etm(data: &Path) {
    let h = Command::new("perf")
        .args(["report", "--header-only", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&h.stdout);
    let mapping = format!("# pmu mappings: cs_etm = {}", csdump::perf::CS_ETM_PMU_TYPE);
    assert!(head.contains(&mapping), "{head}");
    assert!(head.contains("# event : name = cs_etm//,"), "{head}");
    assert!(
        !head.contains("PMU_MAPPINGS") && !head.contains("EVENT_DESC"),
        "{head}"
    );
    let s = Command::new("perf")
        .args(["script", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(s.status.success(), "perf script: {err}");
    assert!(!err.contains("unknown attr type"), "perf script: {err}");
    // Without a kernel image perf warns of the missing DSO, and of nothing else.
    for l in err.lines() {
        assert!(
            l.is_empty()
                || l == "Warning:"
                || l.starts_with("CS ETM Trace: ")
                || l.trim_start().starts_with("Enable CONFIG_PROC_KCORE"),
            "perf script: {err}"
        );
    }
    let e = Command::new("perf")
        .args(["evlist", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), "cs_etm//");
}

#[test]
fn perf_sees_the_same_packets_and_decodes_kernel_code() {
    if !have("perf") || !have("trc_pkt_lister") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for name in [RET_STCK, UNAME] {
        let Some((snap, dump)) = inputs(name, tmp.path()) else {
            return;
        };
        let want = packets(&trc_pkt_lister(&snap, false, &tmp.path().join("pk.ppl")));
        assert!(want.len() > 1000);
        for input in [&snap, &dump] {
            let out = tmp.path().join(format!("perf-{name}"));
            let _ = fs::remove_dir_all(&out);
            let o = run(&[&"perf", input, &"-o", &out]);
            assert!(
                o.status.code() != Some(1),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            for f in ["cstrace.bin", "metadata.bin", "perf.data"] {
                assert!(out.join(f).exists(), "{f} missing");
            }
            // cstrace.bin is the trace as drained.
            let cap = Capture::from_snapshot_dir(&snap).unwrap();
            assert_eq!(
                fs::read(out.join("cstrace.bin")).unwrap(),
                *cap.sinks[0].trace
            );
            let d = Command::new("perf")
                .args(["script", "-D", "-i"])
                .arg(out.join("perf.data"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&d.stdout);
            assert!(text.contains("PERF_RECORD_AUXTRACE_INFO type: 3"), "{name}");
            assert_perf_names_cs_etm(&out.join("perf.data"));
            assert_eq!(
                packets(&text),
                want,
                "{name} from {}: perf -D packets",
                input.display()
            );
        }
    }

    // Instruction addresses, through the kernel image wrapped as an ELF vmlinux.
    let Some((snap, dump)) = inputs(RET_STCK, tmp.path()) else {
        return;
    };
    let traced = ranges(&elements(&trc_pkt_lister(
        &snap,
        true,
        &tmp.path().join("d.ppl"),
    )));
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let load = 0xFFFF_0000_0808_0000u64;
    // The snapshot: no KASLR. The dump: vmlinux linked KASLR lower, the dump's `_text` says
    // where it ran, so perf must relocate by the dump's offset to read the code.
    let cases = [
        (snap.clone(), load, "snapshot"),
        (dump.clone(), load - KASLR, "dump"),
    ];
    for (input, link, what) in cases {
        let elf = tmp.path().join(format!("vmlinux-{what}"));
        write_elf(&image, link, &elf);
        let out = tmp.path().join(format!("perf-ip-{what}"));
        run(&[&"perf", &input, &"-o", &out]);
        let s = Command::new("perf")
            .args(["script", "--itrace=i1i", "-F", "ip", "--vmlinux"])
            .arg(&elf)
            .arg("-i")
            .arg(out.join("perf.data"))
            .output()
            .unwrap();
        // With the kernel image at hand perf has nothing to warn about.
        let err = String::from_utf8_lossy(&s.stderr);
        assert!(
            !err.to_lowercase().contains("warning") && !err.contains("unknown attr type"),
            "{what}: perf script: {err}"
        );
        let ips: Vec<u64> = String::from_utf8_lossy(&s.stdout)
            .lines()
            .filter_map(|l| u64::from_str_radix(l.trim(), 16).ok())
            .collect();
        assert!(
            ips.len() > 100_000,
            "{what}: {} instruction samples",
            ips.len()
        );
        let starts: BTreeSet<u64> = traced.iter().map(|r| r.0).collect();
        let inside = |ip: u64| traced.iter().any(|&(a, b)| (a..b).contains(&ip));
        let outside = ips.iter().filter(|&&ip| !inside(ip)).count();
        assert_eq!(
            outside, 0,
            "{what}: {outside} addresses outside the traced ranges"
        );
        // And perf walks the ranges the original decode found.
        let hit = ips
            .iter()
            .filter(|ip| starts.contains(ip))
            .collect::<BTreeSet<_>>();
        assert!(
            hit.len() * 10 > starts.len() * 9,
            "{what}: {} of {} ranges",
            hit.len(),
            starts.len()
        );
    }
}

#[test]
fn report_names_functions_per_cpu_panic_cpu_first() {
    if !have("trc_pkt_lister") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(snap) = testdata(RET_STCK) else {
        return;
    };
    let dump = tmp.path().join("d.cspd");
    fs::write(&dump, dump_from_snapshot(&snap, 4)).unwrap();
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let elf = tmp.path().join("vmlinux");
    write_elf(&image, 0xFFFF_0000_0808_0000 - KASLR, &elf);
    let html = tmp.path().join("r.html");
    let o = run(&[
        &"report",
        &dump,
        &"--vmlinux",
        &elf,
        &"--json",
        &"--html",
        &html,
        &"--last",
        &"8",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cpus = v["cpus"].as_array().unwrap();
    assert_eq!(cpus[0]["cpu"], 4);
    assert_eq!(cpus[0]["panic"], true);
    assert_eq!(cpus.len(), 6);
    // The sample's PC is symbolised through the KASLR offset: _text + 0x40 is in f_0.
    assert_eq!(cpus[0]["sample"]["pc"]["symbol"], "f_0+0x40");
    assert!(cpus[0]["sample"]["text"]
        .as_str()
        .unwrap()
        .contains("EDPCSR:"));
    // CPU 4's last branch goes where the original decode of trace ID 0x14 last went.
    let traced = elements(&trc_pkt_lister(&snap, true, &tmp.path().join("d.ppl")));
    let last14 = traced
        .iter()
        .rev()
        .filter_map(|l| csdump::decode::parse_line(l))
        .filter(|(id, _)| *id == 0x14)
        .filter_map(|(_, e)| e.addr())
        .next()
        .unwrap();
    let branches = cpus[0]["branches"].as_array().unwrap();
    assert!(!branches.is_empty());
    let last_to = branches.last().unwrap()["to"]["addr"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(last_to, format!("{last14:#x}"));
    // Kernel functions are named from the vmlinux symbols (user addresses stay addresses).
    let funcs = cpus[0]["functions"].as_array().unwrap();
    let kernel: Vec<&str> = funcs
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .filter(|n| !n.starts_with("0x"))
        .collect();
    assert!(kernel.iter().all(|n| n.starts_with("f_")), "{kernel:?}");
    let cpu1 = cpus.iter().find(|c| c["cpu"] == 1).unwrap();
    let f1 = cpu1["functions"].as_array().unwrap();
    assert!(!f1.is_empty());
    assert!(
        f1.iter()
            .all(|f| f["name"].as_str().unwrap().starts_with("f_")),
        "{f1:?}"
    );
    let page = fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("CPU 4 (panic)"));
    // Text form: panic CPU first, functions listed.
    let o = run(&[&"report", &dump, &"--vmlinux", &elf]);
    let text = String::from_utf8_lossy(&o.stdout);
    let first_cpu = text.lines().find(|l| l.starts_with("CPU ")).unwrap();
    assert!(first_cpu.starts_with("CPU 4 (panic CPU)"), "{first_cpu}");
    assert!(text.contains("last functions"));
}

/// A dump with the given sink trace and sources, no identity.
fn small_dump(trace: &[u8], sources: &[SavedState]) -> Vec<u8> {
    small_dump_with(trace, sources, PayloadType::Tmc)
}

/// A dump whose sink record says its data is `sink_payload`.
fn small_dump_with(trace: &[u8], sources: &[SavedState], sink_payload: PayloadType) -> Vec<u8> {
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(64 * 1024, [9; 16], &Identity::default(), &panic);
    let sink = tmc_payload(trace);
    w.add(RecordKind::Sink, sink_payload, b"tmc_etf0", CPU_NONE, &sink);
    for s in sources {
        let mut b = vec![0u8; cspd_format::etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        w.add(RecordKind::Source, PayloadType::Etm4x, b"etm", CPU_NONE, &b);
    }
    w.finish()
}

fn good_etm(cpu: u32) -> SavedState {
    let mut s = SavedState {
        cpu,
        flags: cspd_format::etm4x::SAVED_REGS_VALID,
        trcconfigr: 0x10C1,
        trctraceidr: 0x10 + 2 * cpu,
        authstatus: 0xCC,
        devarch: cspd_hw::etm4x::DEVARCH_ETMV4,
        ..SavedState::default()
    };
    s.idr[0] = 0x28000EA1;
    s.idr[1] = 0x4100F403;
    s.idr[2] = 0x488;
    s
}

#[test]
fn bad_inputs_give_clear_messages_and_what_can_be_written() {
    let tmp = tempfile::tempdir().unwrap();
    let trace: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    // 1. No ETM record: cstrace.bin only, exit 2, a clear warning.
    let d = tmp.path().join("noetm.cspd");
    fs::write(&d, small_dump(&trace, &[])).unwrap();
    let out = tmp.path().join("o1");
    let o = run(&[&"perf", &d, &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no usable ETMv4 source"), "{err}");
    assert_eq!(fs::read(out.join("cstrace.bin")).unwrap(), trace);
    assert!(!out.join("perf.data").exists() && !out.join("metadata.bin").exists());
    let s = tmp.path().join("s1");
    let o = run(&[&"snapshot", &d, &"-o", &s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(s.join("snapshot.ini").exists() && s.join("cstrace.bin").exists());
    let o = run(&[&"report", &d, &"--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["decoder"].as_str().unwrap().starts_with("not run"));

    // 2. Unknown ETM architecture next to a good one: the bad one is named and skipped.
    let mut bad = good_etm(1);
    bad.devarch = 0x4770_2A13;
    let d = tmp.path().join("arch.cspd");
    fs::write(&d, small_dump(&trace, &[good_etm(0), bad])).unwrap();
    let out = tmp.path().join("o2");
    let o = run(&[&"perf", &d, &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown ETM architecture (TRCDEVARCH 0x47702a13)"),
        "{err}"
    );
    let meta = fs::read(out.join("metadata.bin")).unwrap();
    assert_eq!(meta.len(), 8 * (3 + 11), "one ETMv4 block");
    assert!(out.join("perf.data").exists());

    // 3. A sink whose trace is not a whole number of 16-byte frames.
    let d = tmp.path().join("frames.cspd");
    fs::write(&d, small_dump(&trace[..4096 - 5], &[good_etm(0)])).unwrap();
    let out = tmp.path().join("o3");
    let o = run(&[&"perf", &d, &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("4091 trace bytes is not a whole number of 16-byte frames"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("cstrace.bin")).unwrap().len(), 4091);
    assert!(out.join("perf.data").exists());
    if have("perf") {
        let h = Command::new("perf")
            .args(["script", "-D", "-i"])
            .arg(out.join("perf.data"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&h.stdout);
        assert!(
            text.contains("PERF_RECORD_AUXTRACE size: 0xff0"),
            "frames cut to 4080 bytes"
        );
    }
    let s = tmp.path().join("s3");
    run(&[&"snapshot", &d, &"-o", &s]);
    assert_eq!(fs::read(s.join("cstrace.bin")).unwrap().len(), 4080);

    // 4. Not a dump at all, and a snapshot directory without trace: errors, no panic.
    let junk = tmp.path().join("junk");
    fs::write(&junk, b"not a dump").unwrap();
    for cmd in ["perf", "snapshot"] {
        let o = run(&[&cmd, &junk, &"-o", &tmp.path().join("o4")]);
        assert_eq!(o.status.code(), Some(1));
    }
    let empty = tmp.path().join("emptysnap");
    fs::create_dir_all(&empty).unwrap();
    let o = run(&[&"report", &empty]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("snapshot.ini"));
}

#[test]
fn a_sink_record_that_is_not_a_tmc_drain_is_not_read_as_one() {
    // A C driver's sink record (opaque payload) holding bytes that would parse as a TMC drain:
    // csdump names it and takes no trace from it.
    let tmp = tempfile::tempdir().unwrap();
    let trace: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let d = tmp.path().join("csink.cspd");
    fs::write(
        &d,
        small_dump_with(&trace, &[good_etm(0)], PayloadType::Opaque),
    )
    .unwrap();
    let out = tmp.path().join("o");
    let o = run(&[&"perf", &d, &"-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("sink tmc_etf0: opaque payload, not a TMC drain; no trace"),
        "{err}"
    );
    assert!(!out.join("cstrace.bin").exists());
    // The same bytes said to be a TMC drain are read as one.
    let d = tmp.path().join("tmc.cspd");
    fs::write(
        &d,
        small_dump_with(&trace, &[good_etm(0)], PayloadType::Tmc),
    )
    .unwrap();
    let out = tmp.path().join("o2");
    let o = run(&[&"perf", &d, &"-o", &out]);
    assert_eq!(
        fs::read(out.join("cstrace.bin")).unwrap(),
        trace,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

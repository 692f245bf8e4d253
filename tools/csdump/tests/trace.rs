//! `csdump perf`, `snapshot` and `report` judged by the real decoders: Debian's `perf` (linked
//! with OpenCSD) and `trc_pkt_lister`, on real ETMv4 trace captured on a Juno board (the
//! OpenCSD test snapshots), given both as a snapshot directory and packed into a dump with the
//! format's and cspd-hw's encoders.
//!
//! The snapshots come from Debian's libopencsd source package (scripts/setup.sh puts them in
//! the cache; `cspd_testdata` finds them). A test that needs a missing tool or snapshot fails,
//! unless the user opted out with `CSPD_TESTS_MAY_SKIP=1`: then it says `SKIPPED` and why.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use csdump::capture::Capture;
use cspd_format::etm4x::SavedState;
use cspd_format::*;

mod common;
use common::good_etm;
use common::run;
use common::snapshots::dump_from_snapshot;
use common::snapshots::dump_from_snapshot_at;
use common::snapshots::write_elf;
use common::snapshots::write_elf_id;
use common::snapshots::KASLR;
use common::tmc_payload;
use common::DumpWriter;

const RET_STCK: &str = "juno-ret-stck";
const UNAME: &str = "juno-uname-001";

fn csdump() -> &'static str {
    env!("CARGO_BIN_EXE_csdump")
}

fn testdata(name: &str) -> Option<PathBuf> {
    cspd_testdata::snapshot(name)
}

fn have(tool: &str) -> bool {
    cspd_testdata::tool(tool)
}

/// Runs trc_pkt_lister on `dir`, returns its log (a fresh file: it appends).
fn trc_pkt_lister(dir: &Path, decode: bool, log: &Path) -> String {
    trc_pkt_lister_of(Path::new("trc_pkt_lister"), dir, decode, log)
}

/// Runs the trc_pkt_lister `program` on `dir`, returns its log.
fn trc_pkt_lister_of(program: &Path, dir: &Path, decode: bool, log: &Path) -> String {
    let _ = fs::remove_file(log);
    let mut c = Command::new(program);
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

/// Per trace ID, the address of its last address packet when no packet that moves the trace
/// on (an atom, a Q, an exception, a trace-on, an overflow) followed it, from a packet listing.
fn trailing_addresses(listing: &str) -> std::collections::BTreeMap<u8, u64> {
    let mut tails = std::collections::BTreeMap::new();
    for l in packets(listing) {
        let Some((head, packet)) = l.split_once(";\tI_") else {
            continue;
        };
        let Some(id) = head
            .split("ID:")
            .nth(1)
            .and_then(|r| u8::from_str_radix(r.split(';').next()?.trim(), 16).ok())
        else {
            continue;
        };
        let kind = packet.split_whitespace().next().unwrap_or("");
        if kind.starts_with("ADDR") {
            let addr = packet
                .split("Addr=0x")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_hexdigit()).next())
                .and_then(|h| u64::from_str_radix(h, 16).ok());
            if let Some(a) = addr {
                tails.insert(id, Some(a));
            }
        } else if [
            "ATOM", "Q", "EXCEPT", "TRACE_ON", "OVERFLOW", "DISCARD", "NOT_SYNC", "SRC_ADDR",
        ]
        .iter()
        .any(|k| kind.starts_with(k))
        {
            tails.insert(id, None);
        }
    }
    tails
        .into_iter()
        .filter_map(|(id, a)| Some((id, a?)))
        .collect()
}

/// One element of `trc_pkt_lister`'s output, in the terms csdump's decode gives it: the trace
/// ID and what the element says (the judge's reading of the text OpenCSD's tools print).
fn judge_line(line: &str) -> Option<(u8, Judged)> {
    fn hex_after(s: &str, key: &str) -> Option<u64> {
        let rest = s.get(s.find(key)? + key.len()..)?.trim_start();
        let rest = rest.strip_prefix("0x").unwrap_or(rest);
        let end = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        u64::from_str_radix(&rest[..end], 16).ok()
    }
    fn num_in(s: &str, key: &str) -> Option<u32> {
        let rest = s.get(s.find(key)? + key.len()..)?;
        rest.get(..rest.find(')')?)?.parse().ok()
    }
    // The tool prints a logged error and the next element on one line: the element starts at
    // its `Idx:`.
    let rest = line.get(line.find("Idx:")? + 4..)?;
    let (_, rest) = rest.split_once("; ID:")?;
    let (id, rest) = rest.split_once(';')?;
    let id = u8::from_str_radix(id.trim(), 16).ok()?;
    let body = rest.trim_start().strip_prefix("OCSD_GEN_TRC_ELEM_")?;
    let el = if let Some(b) = body.strip_prefix("INSTR_RANGE(") {
        let tail = &b[b.find("(ISA=")?..];
        let tail = tail[tail.find(')')? + 1..].trim();
        Judged::Range {
            start: hex_after(b, "exec range=")?,
            end: hex_after(b, ":[")?,
            count: num_in(b, "num_i(")?,
            last_size: num_in(b, "last_sz(")?,
            taken: tail.starts_with('E'),
            indirect: tail.contains("iBR"),
        }
    } else if let Some(b) = body.strip_prefix("ADDR_NACC(") {
        Judged::NoAccess(hex_after(b, "")?)
    } else if let Some(b) = body.strip_prefix("EXCEPTION(") {
        Judged::Exception(hex_after(b, "ret addr:"))
    } else if body.starts_with("EXCEPTION_RET") {
        Judged::ExceptionReturn
    } else if body.starts_with("NO_SYNC") {
        Judged::NoSync
    } else if body.starts_with("TRACE_ON") {
        Judged::TraceOn
    } else {
        return None;
    };
    Some((id, el))
}

/// An element as the judge reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Judged {
    Range {
        start: u64,
        end: u64,
        count: u32,
        last_size: u32,
        taken: bool,
        indirect: bool,
    },
    NoAccess(u64),
    Exception(Option<u64>),
    ExceptionReturn,
    NoSync,
    TraceOn,
    BranchTarget(u64),
}

impl From<&csdump::decode::Element> for Judged {
    fn from(e: &csdump::decode::Element) -> Self {
        use csdump::decode::Element as E;
        match *e {
            E::Range {
                start,
                end,
                count,
                last_size,
                taken,
                branch,
                ..
            } => Self::Range {
                start,
                end,
                count,
                last_size,
                taken,
                indirect: branch.is_indirect(),
            },
            E::NoAccess { addr } => Self::NoAccess(addr),
            E::Exception { ret, .. } => Self::Exception(ret),
            E::ExceptionReturn => Self::ExceptionReturn,
            E::NoSync => Self::NoSync,
            E::TraceOn => Self::TraceOn,
            E::BranchTarget { addr } => Self::BranchTarget(addr),
        }
    }
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

/// csdump's in-process decode (OpenCSD's library through the `opencsd` crate: the binding, the
/// memory callback, the element conversion) gives, per trace ID, the same elements in the same
/// order as that library's own `trc_pkt_lister` (its snapshot reader and file accessors) on the
/// same snapshot: real ETMv4 captures of a Juno (ETB frames, a kernel image; user code with no
/// image) and a Cortex-A55 (a TPIU capture, `dstream_coresight`).
#[test]
fn the_decode_equals_trc_pkt_lister() {
    let Some(tool) = cspd_testdata::library_trc_pkt_lister() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in [RET_STCK, UNAME, "a55-test-tpiu"] {
        let Some(snap) = testdata(name) else {
            return;
        };
        let log = trc_pkt_lister_of(&tool, &snap, true, &tmp.path().join(format!("{name}.ppl")));
        assert!(
            log.contains("Library Version : 1.5"),
            "{}",
            &log[..log.len().min(400)]
        );
        let mut want: std::collections::BTreeMap<u8, Vec<Judged>> = Default::default();
        for (id, e) in log.lines().filter_map(judge_line) {
            want.entry(id).or_default().push(e);
        }
        // The trace's last indirect branch or exception goes where the address packet after it
        // says, when no atom, exception or trace-on followed that packet (the packet listing).
        let listing =
            trc_pkt_lister_of(&tool, &snap, false, &tmp.path().join(format!("{name}.pkt")));
        for (id, addr) in trailing_addresses(&listing) {
            if let Some(w) = want.get_mut(&id) {
                if matches!(
                    w.last(),
                    Some(
                        Judged::Range {
                            taken: true,
                            indirect: true,
                            ..
                        } | Judged::Exception(_)
                    )
                ) {
                    w.push(Judged::BranchTarget(addr));
                }
            }
        }
        let cap = Capture::from_snapshot_dir(&snap).unwrap();
        let mut mem = csdump::decode::CodeImages::new(&cap, None);
        let mut got: std::collections::BTreeMap<u8, Vec<Judged>> = Default::default();
        let summary = csdump::decode::decode_each(&cap, &mut mem, |id, e| {
            got.entry(id).or_default().push(Judged::from(e));
            csdump::decode::Flow::Continue
        })
        .unwrap();
        // Where trc_pkt_lister stops on an error the library cannot go on from, the decode stops
        // at the same byte.
        match log.lines().find_map(|l| {
            l.split_once("Trace buffer done, processed ")?
                .1
                .split(' ')
                .next()
        }) {
            Some(n) if log.contains("Data Path fatal error") => {
                assert!(summary.fatal.is_some(), "{name}");
                assert_eq!(summary.bytes.to_string(), n, "{name}");
            }
            _ => {
                assert!(summary.fatal.is_none(), "{name}: {:?}", summary.fatal);
                assert_eq!(summary.bytes, cap.sinks[0].frames().len() as u64, "{name}");
            }
        }
        let total: usize = want.values().map(Vec::len).sum();
        assert!(total > 0, "{name}: no elements");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{name}"
        );
        for (id, w) in &want {
            let g = &got[id];
            let first = w.iter().zip(g).position(|(a, b)| a != b);
            assert!(
                first.is_none() && w.len() == g.len(),
                "{name} ID {id:#x}: {} elements from trc_pkt_lister, {} from csdump's decode; first \
                 difference at {first:?}: {:?} vs {:?}",
                w.len(),
                g.len(),
                first.and_then(|i| w.get(i)),
                first.and_then(|i| g.get(i)),
            );
        }
        checked += total;
    }
    assert!(checked > 40_000, "{checked}");
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
                || l.starts_with("No kallsyms or vmlinux with build-id ")
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
        // The traced ranges merged into disjoint ones, found by binary search: a linear scan per
        // sample cost most of this test's time.
        let mut merged: Vec<(u64, u64)> = Vec::new();
        let mut sorted = traced.clone();
        sorted.sort_unstable();
        for (a, b) in sorted {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let inside = |ip: u64| {
            let i = merged.partition_point(|&(a, _)| a <= ip);
            i > 0 && ip < merged[i - 1].1
        };
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
        .filter_map(|l| judge_line(l))
        .filter(|(id, _)| *id == 0x14)
        .filter_map(|(_, e)| match e {
            Judged::Range { start, .. } | Judged::NoAccess(start) => Some(start),
            Judged::Exception(ret) => ret,
            _ => None,
        })
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
    let size = trace.len().next_multiple_of(4096) + 64 * 1024;
    let mut w = DumpWriter::new(size, [9; 16], &Identity::default(), &panic);
    w.add(
        RecordKind::Sink,
        sink_payload,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(trace),
    );
    for s in sources {
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        w.add(RecordKind::Source, PayloadType::Etm4x, b"etm", CPU_NONE, &b);
    }
    w.finish()
}

#[test]
fn report_shows_phase_times_the_hardware_stop_and_the_cpu_debug_budget() {
    use cspd_format::cpu_debug::{
        ArchData,
        CpuSample,
        Outcome, //
    };
    let tmp = tempfile::tempdir().unwrap();
    let trace: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(64 * 1024, [3; 16], &Identity::default(), &panic);
    w.phases(&common::sample_phases());
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(&trace),
    );
    // CPU 0 reached a stop point (SSSTATUS 0); CPU 1 had them armed and did not.
    for (cpu, victlr) in [(0u32, 0x1u32), (1, 0x201)] {
        let mut s = good_etm(cpu);
        s.flags |= etm4x::SAVED_VIEWINST_VALID;
        s.trcvictlr = victlr;
        s.trcvissctlr = 0b111 << 16;
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        w.add(RecordKind::Source, PayloadType::Etm4x, b"etm", cpu, &b);
    }
    // CPU 0's core never powered up within its share of the budget; CPU 1 was not reached.
    let arch = ArchData::from_ids(3, 0, true).unwrap();
    let mut cut = CpuSample::for_arch(0, &arch);
    cut.outcome = Outcome::PoweredDown;
    cut.flags |= cpu_debug::FLAG_BUDGET_CUT;
    for s in [cut, CpuSample::not_reached(1, &arch)] {
        let mut b = vec![0u8; cpu_debug::RECORD_LEN];
        s.encode(&mut b).unwrap();
        w.add(
            RecordKind::CpuDebug,
            PayloadType::CpuDebug,
            b"debug",
            s.cpu,
            &b,
        );
    }
    let d = tmp.path().join("budget.cspd");
    fs::write(&d, w.finish()).unwrap();

    let o = run(&[&"report", &d, &"--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ph = &v["phases"]["phases"];
    assert_eq!(ph[0]["phase"], "stop-sources");
    assert_eq!(ph[1]["duration_us"], 20.0);
    assert_eq!(v["phases"]["total_us"], 152.0);
    let cpu = |n: u64| {
        v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"] == n)
            .unwrap()
    };
    assert_eq!(cpu(0)["hw_stop"]["reached"], true);
    assert_eq!(cpu(0)["hw_stop"]["stop_points"], 3);
    assert_eq!(cpu(1)["hw_stop"]["reached"], false);
    assert_eq!(
        cpu(1)["sample"]["outcome"],
        "not reached (the CPU debug phase's time budget was spent)"
    );
    assert!(cpu(0)["sample"]["text"]
        .as_str()
        .unwrap()
        .ends_with("; the wait was cut short by the CPU debug time budget"));

    let o = run(&[&"report", &d]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("panic path: 152.0 us in all"), "{text}");
    assert!(
        text.contains("  sample-cpus        20.0 us  (1 callback)"),
        "{text}"
    );
    assert!(
        text.contains("hardware stop: reached (3 crash-path stop points armed)"),
        "{text}"
    );
    assert!(
        text.contains("hardware stop: not reached (3 stop points armed)"),
        "{text}"
    );
    assert!(text.contains("not sampled: not reached"), "{text}");
    let o = run(&[&"info", &d]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("  drain-sinks        30.0 us"), "{text}");
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
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("no usable ETMv4 source"), "{err}");
    assert_eq!(fs::read(out.join("cstrace.bin")).unwrap(), trace);
    assert!(!out.join("perf.data").exists() && !out.join("metadata.bin").exists());
    let s = tmp.path().join("s1");
    let o = run(&[&"snapshot", &d, &"-o", &s]);
    assert_eq!(o.status.code(), Some(3));
    assert!(s.join("snapshot.ini").exists() && s.join("cstrace.bin").exists());
    let o = run(&[&"report", &d, &"--json"]);
    assert_eq!(o.status.code(), Some(3));
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
    assert_eq!(o.status.code(), Some(3), "{err}");
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
    assert_eq!(o.status.code(), Some(3), "{err}");
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

/// vmlinux must be the kernel that wrote the dump: another build ID is refused, naming both IDs
/// and the dump's release (exit 1, nothing printed), unless --force; the e_shoff of a lying ELF
/// header is an error, not an overflow.
#[test]
fn vmlinux_of_another_build_is_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(snap) = testdata(RET_STCK) else {
        return;
    };
    let dump = tmp.path().join("d.cspd");
    fs::write(&dump, dump_from_snapshot(&snap, 0)).unwrap();
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let other = tmp.path().join("vmlinux-other");
    write_elf_id(&image, 0xFFFF_0000_0808_0000 - KASLR, &other, &[0xC2; 20]);
    for cmd in ["report", "snapshot"] {
        let out = tmp.path().join(format!("o-{cmd}"));
        let o = run(&[&cmd, &dump, &"--vmlinux", &other, &"-o", &out]);
        let o = if cmd == "report" {
            run(&[&cmd, &dump, &"--vmlinux", &other])
        } else {
            o
        };
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        assert!(o.stdout.is_empty(), "{cmd}");
        assert!(
            err.contains(&format!(
                "build ID {} is not the dump's {}",
                "c2".repeat(20),
                "b1".repeat(20)
            )) && err.contains("Linux 4.9.0-juno")
                && err.contains("--force"),
            "{cmd}: {err}"
        );
        assert!(!out.exists(), "{cmd}: wrote output");
        let forced = if cmd == "report" {
            run(&[&cmd, &dump, &"--vmlinux", &other, &"--force"])
        } else {
            run(&[&cmd, &dump, &"--vmlinux", &other, &"--force", &"-o", &out])
        };
        let err = String::from_utf8_lossy(&forced.stderr);
        assert_eq!(forced.status.code(), Some(0), "{cmd} --force: {err}");
        assert!(err.contains("used anyway: --force"), "{err}");
    }
    // The right one gives no note about it.
    let right = tmp.path().join("vmlinux");
    write_elf(&image, 0xFFFF_0000_0808_0000 - KASLR, &right);
    let o = run(&[&"report", &dump, &"--vmlinux", &right]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("build ID"));
    // A section header offset near u64::MAX: an error, no overflow (debug builds panicked).
    let mut bad = fs::read(&right).unwrap();
    bad[0x28..0x30].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    assert!(csdump::elf::Vmlinux::parse(&bad).is_err());
    let badf = tmp.path().join("vmlinux-bad");
    fs::write(&badf, &bad).unwrap();
    let o = run(&[&"report", &dump, &"--vmlinux", &badf]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("vmlinux-bad: "), "{err}");
}

/// After a warm reboot the dump is a region file without kernel text: `--text-from` reads the
/// text from a vmcore of another boot of the same kernel at the same place, and refuses one of
/// another KASLR offset, `kimage_voffset` or build.
#[test]
fn text_from_reads_another_boots_text_and_refuses_another_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(snap) = testdata(RET_STCK) else {
        return;
    };
    // The kernel image runs at 0xFFFF_0000_0808_0000 (KASLR applied), loaded at 0x4008_0000.
    const RUNTIME: u64 = 0xFFFF_0000_0808_0000;
    const PADDR: u64 = 0x4008_0000;
    let voff = RUNTIME - PADDR;
    let dump = tmp.path().join("last_dump");
    fs::write(&dump, dump_from_snapshot_at(&snap, 0, voff)).unwrap();
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let right = tmp.path().join("vmlinux");
    write_elf(&image, RUNTIME - KASLR, &right);
    // vmlinux "as built" differs from what ran, as patched code does: every RET a NOP there.
    let built: Vec<u8> = image
        .chunks(4)
        .flat_map(|w| {
            let w = u32::from_le_bytes(w.try_into().unwrap_or([0; 4]));
            if w == 0xD65F_03C0 { 0xD503_201F } else { w }.to_le_bytes()
        })
        .collect();
    let as_built = tmp.path().join("vmlinux-as-built");
    write_elf(&built, RUNTIME - KASLR, &as_built);
    let text_vmcore = |name: &str, info: &str| {
        let p = tmp.path().join(name);
        let core = common::elf_core(
            &[common::vmcoreinfo_note(info)],
            &[common::LoadSpec {
                paddr: PADDR,
                size: image.len() as u64,
                chunks: vec![(0, image.clone())],
            }],
        );
        fs::write(&p, core).unwrap();
        p
    };
    let id = "b1".repeat(20);
    // As arm64's kernel writes them: KERNELOFFSET with "%lx", kimage_voffset with "0x%llx".
    let info = |kaslr: u64, v: u64, id: &str| {
        format!("BUILD-ID={id}\nKERNELOFFSET={kaslr:x}\nNUMBER(kimage_voffset)={v:#x}\n")
    };
    let good = text_vmcore("next-boot.vmcore", &info(KASLR, voff, &id));
    let branches = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let o = run(args);
        assert!(
            matches!(o.status.code(), Some(0 | 3)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            v["cpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["branches"].clone())
                .collect::<Vec<_>>(),
            v["notes"].to_string(),
        )
    };
    let (want, _) = branches(&[&"report", &dump, &"--vmlinux", &right, &"--json"]);
    let (as_built_only, notes) = branches(&[&"report", &dump, &"--vmlinux", &as_built, &"--json"]);
    assert_ne!(
        as_built_only, want,
        "the text as built must decode otherwise"
    );
    assert!(notes.contains("as built"), "{notes}");
    let (got, notes) = branches(&[
        &"report",
        &dump,
        &"--vmlinux",
        &as_built,
        &"--text-from",
        &good,
        &"--json",
    ]);
    assert_eq!(
        got, want,
        "the text of the next boot decodes as the kernel ran"
    );
    assert!(notes.contains("kernel text read from"), "{notes}");
    assert!(!notes.contains("as built"), "{notes}");
    // Another KASLR offset, kimage_voffset or build: refused, naming it.
    for (name, info, what) in [
        (
            "kaslr",
            info(KASLR + 0x20_0000, voff, &id),
            "KASLR offset 0x400000",
        ),
        ("voff", info(KASLR, voff + 0x1000, &id), "kimage_voffset"),
        ("build", info(KASLR, voff, &"c2".repeat(20)), "kernel build"),
    ] {
        let p = text_vmcore(&format!("{name}.vmcore"), &info);
        let o = run(&[
            &"report",
            &dump,
            &"--vmlinux",
            &as_built,
            &"--text-from",
            &p,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(what) && err.contains("--text-from"),
            "{name}: {err}"
        );
    }
}

/// With `--text-from`, code mapped outside vmlinux's addresses is read where that boot's page
/// tables map it into the kernel image (the entry trampoline's fixmap alias, through which every
/// exception from user space enters), never from that boot's other memory (its modules), and
/// never past the end of the aliased page.
#[test]
fn text_from_serves_the_kernel_image_at_its_aliases_only() {
    use csdump::decode::Memory;
    let Some(snap) = testdata(RET_STCK) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    const RUNTIME: u64 = 0xFFFF_0000_0808_0000;
    const PADDR: u64 = 0x4008_0000;
    let voff = RUNTIME - PADDR;
    let dump = dump_from_snapshot_at(&snap, 0, voff);
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let vmlinux = tmp.path().join("vmlinux");
    write_elf(&image, RUNTIME - KASLR, &vmlinux);
    let vmlinux = fs::read(&vmlinux).unwrap();
    let elf = csdump::elf::Vmlinux::parse(&vmlinux).unwrap();

    // That boot's page tables (48-bit, 4 KiB pages): the alias maps the image's fourth page; a
    // module page maps memory outside the image, which the vmcore holds too.
    const TABLES: u64 = 0x5000_0000;
    const ALIAS: u64 = 0xFFFF_FFFF_FF5F_A000;
    const MODULE: u64 = 0xFFFF_8000_0100_0000;
    const MODULE_PA: u64 = 0x6000_0000;
    let mut tables = common::PageTables::new(TABLES);
    tables.map(ALIAS, PADDR + 0x3000);
    tables.map(MODULE, MODULE_PA);
    let info = format!(
        "PAGESIZE=4096\nNUMBER(VA_BITS)=48\nSYMBOL(swapper_pg_dir)={:x}\n\
         NUMBER(kimage_voffset)={voff:#x}\nKERNELOFFSET={KASLR:x}\n",
        TABLES + voff
    );
    let load = |paddr: u64, bytes: Vec<u8>| common::LoadSpec {
        paddr,
        size: bytes.len() as u64,
        chunks: vec![(0, bytes)],
    };
    let core = common::elf_core(
        &[common::vmcoreinfo_note(&info)],
        &[
            load(PADDR, image.clone()),
            load(TABLES, tables.bytes().to_vec()),
            load(MODULE_PA, vec![0xAA; 4096]),
        ],
    );
    let text = csdump::vmcore::Vmcore::from_bytes(&core).unwrap();

    let located = csdump::region::locate(&dump).unwrap();
    let cap = Capture::from_dump(&located).unwrap();
    let mut mem = csdump::decode::CodeImages::new(&cap, Some((&vmlinux, &elf)));
    let mut buf = [0u8; 64];
    // Without another boot's tables the alias is nothing (a region file has no memory).
    assert_eq!(mem.read(ALIAS + 0x10, &mut buf), 0);
    assert!(mem.text_from(&text, voff, "next boot") > 0);
    assert_eq!(mem.read(ALIAS + 0x10, &mut buf), 64);
    assert_eq!(buf[..], image[0x3010..0x3050]);
    // Not past the aliased page: the next virtual page need not be the next physical one.
    assert_eq!(mem.read(ALIAS + 4096 - 16, &mut buf), 16);
    assert_eq!(buf[..16], image[0x4000 - 16..0x4000]);
    // That boot's module page is mapped and in its vmcore, but not the crashed kernel's code.
    assert_eq!(mem.read(MODULE, &mut buf), 0);
    // The image itself reads as before.
    assert_eq!(mem.read(RUNTIME + 0x3010, &mut buf), 64);
    assert_eq!(buf[..], image[0x3010..0x3050]);
}

/// One exit status contract for every command: 0 complete and clean, 1 fatal (nothing useful
/// written), 2 usage error, 3 output written but the dump damaged or partial; --help says so.
#[test]
fn one_exit_status_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let trace: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let clean = tmp.path().join("clean.cspd");
    let bytes = small_dump(&trace, &[good_etm(0)]);
    fs::write(&clean, &bytes).unwrap();
    // 0: clean; a report without --vmlinux is complete (a note says what it lacks).
    for args in [vec!["info"], vec!["report"], vec!["report", "--json"]] {
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> = args.iter().map(|s| s as _).collect();
        a.push(&clean);
        let o = run(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
    let o = run(&[&"report", &clean]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("note: no kernel image (--vmlinux)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for cmd in ["extract", "perf", "snapshot"] {
        let out = tmp.path().join(format!("clean-{cmd}"));
        let o = run(&[&cmd, &clean, &"-o", &out]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // 3: a record that fails its CRC; what can be written is.
    let mut damaged = bytes.clone();
    let at = damaged.windows(16).position(|w| w == &trace[..16]).unwrap();
    damaged[at + 100] ^= 0xFF;
    let d = tmp.path().join("damaged.cspd");
    fs::write(&d, &damaged).unwrap();
    let out = tmp.path().join("damaged-extract");
    let o = run(&[&"extract", &d, &"-o", &out]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.join("summary.json").exists());
    for cmd in ["info", "report"] {
        let o = run(&[&cmd, &d]);
        assert_eq!(o.status.code(), Some(3), "{cmd}");
    }
    // 2: usage errors, nothing read.
    for args in [
        vec!["report", "--no-such-flag", "x"],
        vec!["extract", "x"],
        vec!["frobnicate"],
        vec!["report", "x", "--force"],
    ] {
        let mut c = Command::new(csdump());
        let o = c.args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    // 1: fatal: not a dump; an HTML page that cannot be written (and then nothing printed).
    let junk = tmp.path().join("junk");
    fs::write(&junk, b"not a dump").unwrap();
    assert_eq!(run(&[&"info", &junk]).status.code(), Some(1));
    let o = run(&[&"report", &clean, &"--html", &"/nonexistent/dir/r.html"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        o.stdout.is_empty(),
        "the report was printed before the failure"
    );
    assert_eq!(err.matches("/nonexistent/dir/r.html").count(), 1, "{err}");
    // --help documents the four.
    let h = Command::new(csdump()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&h.stdout);
    assert_eq!(h.status.code(), Some(0));
    for line in [
        "  0  complete and clean",
        "  1  fatal",
        "  2  usage error",
        "  3  output written",
    ] {
        assert!(help.contains(line), "{help}");
    }
}

/// SIGTERM in the middle of writing leaves nothing behind: no temporary output file, nothing in
/// TMPDIR, exit status 128 + 15.
#[test]
fn sigterm_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let trace: Vec<u8> = (0..(256u32 << 20))
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let d = tmp.path().join("big.cspd");
    fs::write(&d, small_dump(&trace, &[good_etm(0)])).unwrap();
    drop(trace);
    let scratch = tmp.path().join("tmpdir");
    fs::create_dir(&scratch).unwrap();
    let out = tmp.path().join("out");
    let mut child = Command::new(csdump())
        .args(["perf"])
        .arg(&d)
        .arg("-o")
        .arg(&out)
        .env("TMPDIR", &scratch)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let temp_files = |dir: &Path| -> Vec<String> {
        fs::read_dir(dir)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains(".csdump-"))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Wait until it writes, then stop it.
    let start = std::time::Instant::now();
    while temp_files(&out).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "csdump finished before it could be stopped"
        );
        assert!(
            start.elapsed().as_secs() < 120,
            "csdump never started writing"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: `kill` takes no pointer; `pid` is our own child, not yet reaped, so it names it.
    let k = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(k, 0, "kill: {}", std::io::Error::last_os_error());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
    assert!(temp_files(&out).is_empty(), "{:?}", temp_files(&out));
    assert_eq!(fs::read_dir(&scratch).unwrap().count(), 0);
}

/// A real trace whose end is overwritten (here by text), decoded against a snapshot whose core
/// lacks one of its memory images: bookworm's OpenCSD 1.3.3 dereferenced a dangling P0 stack
/// element on it (`mispredictAtom`) and took csdump down with a segfault; the library csdump
/// links (1.5, from Debian's source package) logs the error and the report is written.
/// Found by the fuzz target.
#[test]
fn a_corrupt_trace_that_crashed_opencsd_1_3_is_decoded() {
    let Some(src) = testdata(UNAME) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let snap = tmp.path().join("s");
    fs::create_dir_all(&snap).unwrap();
    for e in fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), snap.join(e.file_name())).unwrap();
    }
    // No libc image: drop the core's [dump2].
    let cpu = fs::read_to_string(src.join("cpu_0.ini")).unwrap();
    let (head, rest) = cpu.split_once("[dump2]").unwrap();
    let tail = &rest[rest.find("[dump3]").unwrap()..];
    fs::write(snap.join("cpu_0.ini"), format!("{head}{tail}")).unwrap();
    let mut trace = fs::read(src.join("uname_trace.bin")).unwrap();
    trace.truncate(2707);
    trace.extend_from_slice(
        b"000\nTRCIDR11(0x063)=0x00000000\nTRCIDR12(0x064)=0x00000000\nTRCIDR13(0x065)=0x0",
    );
    assert_eq!(trace.len(), 2784);
    fs::write(snap.join("uname_trace.bin"), &trace).unwrap();
    let o = run(&[&"report", &snap, &"--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), None, "killed by a signal: {err}");
    // The snapshot names images it does not hold (libc, ld): partial input, exit 3.
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("ld-2.21.so.bin: memory image missing"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["decoder_error_count"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["decoder_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().contains("corrupt trace")),
        "{v}"
    );
    // What came before the corrupt end is decoded (42 elements, as the library's own
    // trc_pkt_lister gives them).
    assert_eq!(v["cpus"][0]["elements"].as_u64(), Some(42));
}

/// Copies the snapshot `name` into `to`.
fn copy_snap(name: &str, to: &Path) -> bool {
    let Some(src) = testdata(name) else {
        return false;
    };
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    true
}

/// Snapshots as OpenCSD's snapshot reader takes them: an STM source beside the ETM is a note
/// (exit 0); a source of a protocol csdump does not decode (ETM3) is named and skipped (exit
/// 3); a buffer or ini file that is not a regular file (`/dev/zero`) or is too big is refused
/// by name, never read.
#[test]
fn snapshots_as_opencsd_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("stm");
    if !copy_snap(UNAME, &s) {
        return;
    }
    // An STM (software trace) source on the same buffer, in a device file of its own.
    fs::write(
        s.join("device_stm.ini"),
        "[device]\nname=STM_0\nclass=trace_source\ntype=STM\n\n[regs]\nSTMTCSR(0x3C0)=0x00020003\n",
    )
    .unwrap();
    let snap = fs::read_to_string(s.join("snapshot.ini")).unwrap();
    fs::write(
        s.join("snapshot.ini"),
        snap.replace(
            "[device_list]\n",
            "[device_list]\ndevice9=device_stm.ini ; software trace\n",
        ),
    )
    .unwrap();
    let trace = fs::read_to_string(s.join("trace.ini")).unwrap();
    fs::write(
        s.join("trace.ini"),
        trace.replace("[source_buffers]\n", "[source_buffers]\nSTM_0=ETB_0\n"),
    )
    .unwrap();
    let o = run(&[&"report", &s]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: ") && err.contains("source STM_0: STM (software trace, no CPU)"),
        "{err}"
    );
    assert!(
        !err.contains("warning: ") || err.contains("memory image missing"),
        "{err}"
    );

    // An ETM3 source: named, skipped, exit 3.
    let e3 = tmp.path().join("etm3");
    copy_snap(UNAME, &e3);
    let dev = fs::read_to_string(e3.join("device_6.ini")).unwrap();
    fs::write(
        e3.join("device_6.ini"),
        dev.replace("type=ETM4", "type=ETM3.5"),
    )
    .unwrap();
    let o = run(&[&"report", &e3]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("ETM3.5 trace (32-bit cores) is not supported"),
        "{err}"
    );

    // A TPIU capture (dstream_coresight) and a versioned type (ETM4.2) are read.
    if let Some(a55) = testdata("a55-test-tpiu") {
        let cap = Capture::from_snapshot_dir(&a55).unwrap();
        assert_eq!(cap.sinks[0].format, csdump::capture::SinkFormat::Tpiu);
        assert_eq!(cap.etms.len(), 1);
        assert_eq!(cap.etms[0].trace_id(), 1);
    }

    // /dev/zero as the trace buffer: refused without reading it.
    let z = tmp.path().join("zero");
    copy_snap(UNAME, &z);
    let t = fs::read_to_string(z.join("trace.ini")).unwrap();
    fs::write(
        z.join("trace.ini"),
        t.replace("file=uname_trace.bin", "file=/dev/zero"),
    )
    .unwrap();
    let start = std::time::Instant::now();
    let o = run(&[&"report", &z]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("/dev/zero: not a regular file"), "{err}");
    assert!(start.elapsed().as_secs() < 10);
    // A device file bigger than the cap: named and skipped.
    let big = tmp.path().join("big");
    copy_snap(UNAME, &big);
    let f = fs::File::create(big.join("device_6.ini")).unwrap();
    f.set_len(csdump::capture::MAX_INI_BYTES + 1).unwrap();
    let o = run(&[&"report", &big]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("more than the 1048576 csdump reads"), "{err}");
    assert_ne!(o.status.code(), Some(0), "{err}");
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

//! `csdump gdb` driven by Debian's `gdb-multiarch` in batch mode on real ETMv4 trace (the
//! OpenCSD test snapshots: no vmcore, memory from the snapshots' images), judged by OpenCSD's
//! own `trc_pkt_lister` decode of the same snapshot: the threads GDB lists are the CPUs with
//! decoded instructions, `record instruction-history` lists the last instructions the decoder
//! found, and `reverse-stepi` walks back through them.
//!
//! The snapshots and tools are found as `cspd-testdata` says (scripts/setup.sh fetches the
//! snapshots into the cache): a missing snapshot or tool fails the test, unless the user opted
//! out with `CSPD_TESTS_MAY_SKIP=1` (then it says `SKIPPED` on stderr).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use csdump::capture::Capture;
use csdump::gdb::rsp;
use cspd_testdata::snapshot;
use cspd_testdata::tool;

mod common;
use common::snapshots;

fn csdump() -> &'static str {
    env!("CARGO_BIN_EXE_csdump")
}

/// Runs gdb-multiarch in batch mode with `cmds`; returns its stdout.
fn gdb(cmds: &[String]) -> String {
    let mut c = Command::new("gdb-multiarch");
    c.args([
        "-batch",
        "-nx",
        "-ex",
        "set pagination off",
        "-ex",
        "set width 0",
    ]);
    for x in cmds {
        c.arg("-ex").arg(x);
    }
    let out = c.output().expect("run gdb-multiarch");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "csdump panicked under GDB: {stderr}"
    );
    assert!(
        !stderr.contains("Remote connection closed") && !stderr.contains("internal-error"),
        "GDB lost the stub: {stderr}\n{stdout}"
    );
    stdout
}

/// Each trace ID's instruction ranges `[start, end)`, in order, as `trc_pkt_lister
/// -decode_only` decodes `snap` (its own text, read here independently of csdump's decoder).
fn opencsd_decode(snap: &Path, tmp: &Path) -> BTreeMap<u8, Vec<(u64, u64)>> {
    let log = tmp.join("judge.ppl");
    let out = Command::new("trc_pkt_lister")
        .arg("-ss_dir")
        .arg(snap)
        .arg("-decode_only")
        .arg("-logfilename")
        .arg(&log)
        .output()
        .expect("run trc_pkt_lister");
    assert!(
        out.status.success(),
        "trc_pkt_lister failed on {}",
        snap.display()
    );
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let mut by_id: BTreeMap<u8, Vec<(u64, u64)>> = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        // Idx:N; ID:XX; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xSTART:[0xEND] ...
        let Some((_, rest)) = line.split_once("; ID:") else {
            continue;
        };
        let Some((id, rest)) = rest.split_once(';') else {
            continue;
        };
        let Some(r) = rest
            .split("OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x")
            .nth(1)
        else {
            continue;
        };
        let Some((a, rest)) = r.split_once(":[0x") else {
            continue;
        };
        let (Some(id), Some(a), Some(b)) = (
            u8::from_str_radix(id.trim(), 16).ok(),
            hex(a),
            rest.split(']').next().and_then(hex),
        ) else {
            continue;
        };
        by_id.entry(id).or_default().push((a, b));
    }
    by_id
}

/// The address of each instruction of the ranges, in order.
fn instructions(ranges: &[(u64, u64)]) -> Vec<u64> {
    ranges
        .iter()
        .flat_map(|&(a, b)| (a..b).step_by(4))
        .collect()
}

/// The addresses of `record instruction-history` lines (`N\t   0xADDR <sym>:\tinsn`).
fn history(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| {
            let (n, rest) = l.split_once('\t')?;
            n.trim().parse::<u64>().ok()?;
            let a = rest.trim_start().trim_start_matches("=> ");
            let a = a.strip_prefix("0x")?;
            let end = a.find(|c: char| !c.is_ascii_hexdigit())?;
            u64::from_str_radix(&a[..end], 16).ok()
        })
        .collect()
}

/// The values `p/x $pc` printed (`$N = 0x...`).
fn printed(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| {
            let v = l.strip_prefix('$')?.split_once(" = 0x")?.1;
            u64::from_str_radix(v.trim(), 16).ok()
        })
        .collect()
}

/// Splits GDB's output at the marker lines `echo ==NAME==\n` put in.
fn sections(out: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut cur = String::from("start");
    for l in out.lines() {
        if let Some(n) = l.strip_prefix("==").and_then(|r| r.strip_suffix("==")) {
            cur = n.to_string();
            continue;
        }
        let s: &mut String = m.entry(cur.clone()).or_default();
        s.push_str(l);
        s.push('\n');
    }
    m
}

fn mark(name: &str) -> String {
    format!("echo =={name}==\\n")
}

#[test]
fn gdb_replays_a_juno_snapshot_as_opencsd_decodes_it() {
    let (Some(snap), true, true) = (
        snapshot("juno-ret-stck"),
        tool("gdb-multiarch"),
        tool("trc_pkt_lister"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let judge = opencsd_decode(&snap, tmp.path());
    let capture = Capture::from_snapshot_dir(&snap).unwrap();
    // CPU -> instructions OpenCSD decoded for it.
    let mut traced: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for e in &capture.etms {
        let insns = instructions(judge.get(&e.trace_id()).map_or(&[][..], |v| &v[..]));
        if !insns.is_empty() {
            traced.insert(e.state.cpu, insns);
        }
    }
    assert!(traced.len() >= 2, "the judge decoded {} CPUs", traced.len());
    const N: usize = 24;
    let first = *traced.keys().next().unwrap();
    let second = *traced.keys().nth(1).unwrap();
    let out = gdb(&[
        format!(
            "target remote | {} gdb --last 0 {}",
            csdump(),
            snap.display()
        ),
        mark("threads"),
        "info threads".into(),
        "record btrace bts".into(),
        mark("record"),
        "info record".into(),
        format!("set record instruction-history-size {N}"),
        mark("history"),
        "record instruction-history".into(),
        mark("pc"),
        "p/x $pc".into(),
        "reverse-stepi".into(),
        "p/x $pc".into(),
        "reverse-stepi".into(),
        "p/x $pc".into(),
        "reverse-stepi".into(),
        "p/x $pc".into(),
        mark("history2"),
        format!("thread {}", 2),
        "record instruction-history".into(),
        mark("pc2"),
        "p/x $pc".into(),
        mark("end"),
        "detach".into(),
    ]);
    let s = sections(&out);
    let get = |k: &str| s.get(k).cloned().unwrap_or_default();

    // info threads: one thread per CPU with decoded instructions, CPU n as thread n + 1.
    let threads = get("threads");
    let listed: Vec<&str> = threads
        .lines()
        .filter(|l| l.contains("Thread ") && l.contains("(CPU "))
        .collect();
    assert_eq!(listed.len(), traced.len(), "{threads}");
    for (cpu, insns) in &traced {
        let want = format!("Thread {} (CPU {cpu}", cpu + 1);
        let line = listed
            .iter()
            .find(|l| l.contains(&want))
            .unwrap_or_else(|| panic!("no {want} in\n{threads}"));
        assert!(
            line.contains(&format!(", {} instructions traced", insns.len()))
                || line.contains(&format!(", {} instructions traced", insns.len() - 1)),
            "{line}: OpenCSD decoded {} instructions",
            insns.len()
        );
    }
    assert!(
        listed[0].starts_with('*'),
        "the first CPU is selected (no panic CPU in a snapshot): {threads}"
    );

    let record = get("record");
    assert!(
        record.contains("Recording format: Branch Trace Store."),
        "{record}"
    );
    let rec_line = record
        .lines()
        .find(|l| l.starts_with("Recorded "))
        .unwrap_or_else(|| panic!("{record}"));
    assert!(rec_line.ends_with("for thread 1 (Thread 1)."), "{rec_line}");

    // The history ends with the last instructions OpenCSD decoded for that CPU; the current
    // instruction is the one after them, or (an indirect last branch) the last of them.
    let judge_first = &traced[&first];
    let h = history(&get("history"));
    assert_eq!(h.len(), N, "{}", get("history"));
    let pcs = printed(&get("pc"));
    assert_eq!(pcs.len(), 4, "{}", get("pc"));
    let tail = &judge_first[judge_first.len() - N..];
    let tail_but_last = &judge_first[judge_first.len() - N - 1..judge_first.len() - 1];
    if h == tail {
        assert_ne!(pcs[0], h[N - 1]);
    } else {
        assert_eq!(h, tail_but_last, "history differs from OpenCSD's decode");
        assert_eq!(pcs[0], judge_first[judge_first.len() - 1]);
    }
    // reverse-stepi goes back one traced instruction at a time.
    assert_eq!(&pcs[1..], [h[N - 1], h[N - 2], h[N - 3]]);

    // Thread 2 is the second CPU with trace.
    let h2 = history(&get("history2"));
    let judge_second = &traced[&second];
    assert_eq!(h2.len(), N);
    let pc2 = printed(&get("pc2"));
    assert_eq!(pc2.len(), 1);
    let ok = h2 == judge_second[judge_second.len() - N..]
        || (h2 == judge_second[judge_second.len() - N - 1..judge_second.len() - 1]
            && pc2[0] == judge_second[judge_second.len() - 1]);
    assert!(ok, "CPU {second}: history {h2:x?}, pc {pc2:x?}");

    // --last: only the newest blocks holding that many instructions (decoded from the end of
    // the buffer only), the same history.
    let out = gdb(&[
        format!(
            "target remote | {} gdb --last 2000 {}",
            csdump(),
            snap.display()
        ),
        mark("threads"),
        "info threads".into(),
        "record btrace bts".into(),
        format!("set record instruction-history-size {N}"),
        mark("history"),
        "record instruction-history".into(),
        mark("end"),
    ]);
    let s = sections(&out);
    let threads = s.get("threads").cloned().unwrap_or_default();
    for l in threads.lines().filter(|l| l.contains("(CPU ")) {
        let n: u64 = l
            .split(" instructions traced")
            .next()
            .and_then(|x| x.rsplit(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{l}"));
        assert!((2000..2400).contains(&n), "--last 2000 served {n}: {l}");
    }
    assert_eq!(history(s.get("history").map_or("", |x| x)), h);
}

#[test]
fn gdb_replays_a_dump_at_vmlinux_addresses_with_its_symbols() {
    // juno-ret-stck's trace packed into a dump (a region file: no vmcore, code from vmlinux),
    // CPU 4 panicked, the kernel running KASLR bytes above where the vmlinux links it; the
    // vmlinux names each 4 KiB of its text f_<n>.
    let (Some(snap), true, true) = (
        snapshot("juno-ret-stck"),
        tool("gdb-multiarch"),
        tool("trc_pkt_lister"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("juno.cspd");
    std::fs::write(&dump, snapshots::dump_from_snapshot(&snap, 4)).unwrap();
    let image = std::fs::read(snap.join("kernel_dump.bin")).unwrap();
    const RUN_TEXT: u64 = 0xFFFF_0000_0808_0000;
    let link_text = RUN_TEXT - snapshots::KASLR;
    let vmlinux = tmp.path().join("vmlinux");
    snapshots::write_elf(&image, link_text, &vmlinux);
    let in_image = |rt: u64| (RUN_TEXT..RUN_TEXT + image.len() as u64).contains(&rt);
    let link = |rt: u64| {
        if in_image(rt) {
            rt - snapshots::KASLR
        } else {
            rt
        }
    };

    let judge = opencsd_decode(&snap, tmp.path());
    let cpu4 = instructions(&judge[&0x14]);
    const N: usize = 16;
    let out = gdb(&[
        format!("file {}", vmlinux.display()),
        format!(
            "target remote | {} gdb {} --vmlinux {}",
            csdump(),
            dump.display(),
            vmlinux.display()
        ),
        mark("threads"),
        "info threads".into(),
        "record btrace bts".into(),
        format!("set record instruction-history-size {N}"),
        mark("history"),
        "record instruction-history".into(),
        mark("pc"),
        "p/x $pc".into(),
        "reverse-stepi".into(),
        "p/x $pc".into(),
        "set record function-call-history-size 8".into(),
        mark("calls"),
        "record function-call-history".into(),
        mark("end"),
    ]);
    let s = sections(&out);
    let get = |k: &str| s.get(k).cloned().unwrap_or_default();
    let threads = get("threads");
    let selected = threads
        .lines()
        .find(|l| l.starts_with('*'))
        .unwrap_or_else(|| panic!("{threads}"));
    assert!(
        selected.contains("Thread 5 (CPU 4, panicked,"),
        "the panicking CPU 4 is selected: {threads}"
    );
    // The history: OpenCSD's last instructions of CPU 4, kernel ones moved down by KASLR and
    // named by vmlinux's symbols; the trace ends in user space, which is not moved.
    let hist_text = get("history");
    let lines: Vec<&str> = hist_text
        .lines()
        .filter(|l| l.contains("\t   0x"))
        .map(str::trim)
        .collect();
    let h = history(&get("history"));
    assert_eq!(h.len(), N, "{}", get("history"));
    let pcs = printed(&get("pc"));
    let want: Vec<u64> = cpu4[cpu4.len() - N..].iter().map(|&a| link(a)).collect();
    assert_eq!(h, want, "{}", get("history"));
    for (l, &a) in lines.iter().zip(&h) {
        if a >= link_text && a < link_text + image.len() as u64 {
            let f = (a - link_text) / 0x1000;
            let off = (a - link_text) % 0x1000;
            let name = if off == 0 {
                format!("<f_{f}>")
            } else {
                format!("<f_{f}+{off}>")
            };
            assert!(l.contains(&name), "{l}: not {name}");
        }
    }
    assert!(
        h.iter().any(|&a| a < RUN_TEXT && a >= link_text),
        "some kernel addresses moved"
    );
    assert_eq!(pcs.len(), 2, "{}", get("pc"));
    assert!(!in_image(pcs[0]) && !(link_text..RUN_TEXT).contains(&pcs[0]));
    assert_eq!(
        pcs[1],
        h[N - 1],
        "reverse-stepi goes to the last traced instruction"
    );
    let calls = get("calls");
    assert!(
        calls.lines().filter(|l| l.contains("\tf_")).count() >= 4,
        "record function-call-history names vmlinux's functions: {calls}"
    );
}

#[test]
fn a_snapshot_with_no_decodable_instruction_is_a_clear_error() {
    // juno-uname-001 as Debian ships it lacks the libc images its trace runs in: OpenCSD decodes
    // no instruction from it.
    let Some(snap) = snapshot("juno-uname-001") else {
        return;
    };
    let out = Command::new(csdump())
        .arg("gdb")
        .arg(&snap)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "no CPU has decoded trace to replay: CPU 0: no instruction decoded for trace ID 0x10"
        ),
        "{err}"
    );
    // No packet was written: at most the notifications GDB ignores, sent while decoding.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .replace("%csdump:decoding#", "")
            .chars()
            .all(|c| c.is_ascii_hexdigit()),
        "{stdout}"
    );
}

fn packet(p: &str) -> Vec<u8> {
    let mut v = Vec::new();
    rsp::write_packet(&mut v, p.as_bytes()).unwrap();
    v
}

/// Reads one packet's payload (after any acks) from `r`.
fn read_packet(r: &mut impl BufRead) -> String {
    let mut reader = rsp::Reader::new(r);
    loop {
        match reader.next_event().unwrap() {
            rsp::Event::Packet(p) => return String::from_utf8(p).unwrap(),
            rsp::Event::Ack => {}
            e => panic!("{e:?}"),
        }
    }
}

#[test]
fn tcp_listens_on_loopback_only_and_ends_on_detach() {
    let Some(snap) = snapshot("juno-ret-stck") else {
        return;
    };
    if !tool("trc_pkt_lister") {
        return;
    }
    let out = Command::new(csdump())
        .args(["gdb", "--listen", "0.0.0.0:0"])
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));

    let mut child = Command::new(csdump())
        .args(["gdb", "--listen", "127.0.0.1:0"])
        .arg(&snap)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.split("listening on ").nth(1) {
            addr = rest.split_whitespace().next().map(str::to_string);
            break;
        }
        line.clear();
    }
    let addr = addr.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("csdump gdb did not say where it listens: {line}")
    });
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    s.write_all(&packet("qSupported:multiprocess+")).unwrap();
    assert!(read_packet(&mut r).contains("qXfer:btrace:read+"));
    s.write_all(b"+").unwrap();
    s.write_all(&packet("?")).unwrap();
    assert!(read_packet(&mut r).starts_with("T05thread:1;"));
    s.write_all(b"+").unwrap();
    s.write_all(&packet("D")).unwrap();
    assert_eq!(read_packet(&mut r), "OK");
    let status = child.wait().unwrap();
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(status.success(), "{rest}");
    assert!(rest.contains("GDB detached"), "{rest}");
}

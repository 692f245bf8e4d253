//! Plain kdump (`crash_kexec_post_notifiers` off): the crashed kernel's panic path never runs,
//! its region holds the ETMs' registers recorded at enable and a commit made while it ran, and
//! the trace comes from the kdump capture kernel, which drains the sink and hands its record
//! over as a vmcore device dump `coresight_capture:<sink>`. csdump joins the two, says which
//! path wrote each record, and says so plainly when the trace was not collected.

mod common;

use std::fs;
use std::path::Path;

use common::snapshots;
use common::*;
use cspd_format::etm4x::SavedState;
use cspd_format::*;
use serde_json::Value;

const PADDR: u64 = 0x4800_0000;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// An ETM whose registers decode (as tests/trace.rs's), recorded at enable when `runtime`.
fn etm_state(cpu: u32, runtime: bool) -> SavedState {
    let mut s = common::good_etm(cpu);
    if runtime {
        s.flags |= etm4x::SAVED_PROGRAMMED;
    }
    s
}

fn etm_bytes(s: &SavedState) -> Vec<u8> {
    let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
    s.encode(&mut b).unwrap();
    b
}

/// A synthetic trace of `n` bytes.
fn trace(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// A region committed while the kernel ran: identity, ETM 0 recorded at enable, the sink
/// `tmc_etf0` and CPU 0's debug record not run, no panic info.
fn runtime_region() -> Vec<u8> {
    let mut w = DumpWriter::at_runtime(64 * 1024, [5; 16], &identity());
    w.register(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        8192,
    );
    w.add_flagged(
        RecordKind::Source,
        PayloadType::Etm4x,
        b"etm0",
        0,
        &etm_bytes(&etm_state(0, true)),
        RECORD_FLAG_RUNTIME,
    );
    w.register(
        RecordKind::CpuDebug,
        PayloadType::CpuDebug,
        b"cpu_debug0",
        0,
        cpu_debug::RECORD_LEN,
    );
    w.finish_flagged(RECORD_FLAG_RUNTIME)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

/// (a) The same records, once written by the panic path and once split between the region
/// (ETMs at enable, commit at run time) and the capture kernel's device dump (the sink): the
/// same cstrace.bin, metadata.bin and decode; info and report name who wrote what.
#[test]
fn a_runtime_region_with_a_capture_device_dump_decodes_like_the_panic_path() {
    let Some(snap) = cspd_testdata::snapshot("juno-ret-stck") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let recs = snapshots::snapshot_records(&snap);
    let panic_core = write(
        tmp.path(),
        "panic.vmcore",
        &vmcore_with(&snapshots::panic_path_dump(&recs), PADDR, vec![]),
    );
    let container = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&recs.trace));
    let kdump_core = write(
        tmp.path(),
        "kdump.vmcore",
        &vmcore_with(
            &snapshots::runtime_dump(&recs),
            PADDR,
            vec![
                vmcoredd_note("other_device", &[0xab; 100]),
                capture_note("tmc_etf0", &container),
            ],
        ),
    );

    // perf: the same files, byte for byte, and both clean.
    let mut outs = Vec::new();
    for (name, core) in [("panic", &panic_core), ("kdump", &kdump_core)] {
        let out = tmp.path().join(format!("perf-{name}"));
        let o = run(&[&"perf", core, &"-o", &out]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        outs.push((out, stderr(&o)));
    }
    for f in ["cstrace.bin", "metadata.bin", "perf.data"] {
        let a = fs::read(outs[0].0.join(f)).unwrap();
        let b = fs::read(outs[1].0.join(f)).unwrap();
        assert!(a == b, "{f} differs");
    }
    assert_eq!(fs::read(outs[1].0.join("cstrace.bin")).unwrap(), recs.trace);
    assert!(
        outs[1]
            .1
            .contains("sink tmc_etf0: trace from the capture kernel (device dump \"coresight_capture:tmc_etf0\")"),
        "{}",
        outs[1].1
    );
    assert!(!outs[1].1.contains("warning"), "{}", outs[1].1);

    // report: the same decode per CPU; the origins said.
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let elf = tmp.path().join("vmlinux");
    snapshots::write_elf(&image, 0xFFFF_0000_0808_0000 - snapshots::KASLR, &elf);
    let report = |core: &Path| {
        let o = run(&[&"report", &core, &"--vmlinux", &elf, &"--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)
    };
    let (p, k) = (report(&panic_core), report(&kdump_core));
    let by_cpu = |v: &Value| {
        let mut cpus: Vec<(u64, Value)> = v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let keep = serde_json::json!({
                    "trace_id": c["trace_id"],
                    "elements": c["elements"],
                    "functions": c["functions"],
                    "branches": c["branches"],
                    "no_trace": c["no_trace"],
                });
                (c["cpu"].as_u64().unwrap(), keep)
            })
            .collect();
        cpus.sort_by_key(|c| c.0);
        cpus
    };
    assert_eq!(by_cpu(&p), by_cpu(&k));
    assert!(by_cpu(&k)
        .iter()
        .any(|(_, c)| c["elements"].as_u64() > Some(0)));
    assert_eq!(p["path"], "panic-path");
    assert_eq!(k["path"], "runtime");
    assert_eq!(p["sinks"][0]["origin"]["by"], "panic-path");
    assert_eq!(k["sinks"][0]["origin"]["by"], "capture-kernel");
    assert_eq!(
        k["sinks"][0]["origin"]["device_dump"],
        "coresight_capture:tmc_etf0"
    );
    assert_eq!(k["sinks"][0]["bytes"], recs.trace.len());
    let first = &k["cpus"][0];
    assert_eq!(first["source"]["origin"]["by"], "runtime");
    assert_eq!(p["cpus"][0]["source"]["origin"]["by"], "panic-path");
    // Registers recorded at enable: whether a stop point was reached is not known.
    let o = run(&[&"report", &kdump_core, &"--vmlinux", &elf]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("path:    committed while the kernel ran: no panic-time step ran (plain kdump without crash_kexec_post_notifiers, or no panic)"),
        "{text}"
    );
    assert!(
        text.contains("trace:   sink tmc_etf0, ")
            && text.contains("origin: capture kernel (device dump \"coresight_capture:tmc_etf0\")"),
        "{text}"
    );
    assert!(
        text.contains("origin: recorded at enable, while the kernel ran"),
        "{text}"
    );
    let html = tmp.path().join("r.html");
    run(&[&"report", &kdump_core, &"--html", &html]);
    let page = fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Dump path: committed while the kernel ran")
            && page.contains("capture kernel (device dump &quot;coresight_capture:tmc_etf0&quot;)"),
        "{page}"
    );

    // info: the region's records and the capture kernel's, each with its origin.
    let o = run(&[&"info", &kdump_core, &"--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["path"], "runtime");
    let records = v["records"].as_array().unwrap();
    let etm = records.iter().find(|r| r["kind"] == "source").unwrap();
    assert_eq!(etm["origin"]["by"], "runtime");
    let sink = records.iter().find(|r| r["kind"] == "sink").unwrap();
    assert_eq!(sink["status"], "not-run");
    assert!(sink.get("origin").is_none(), "{sink}");
    let cap = &v["captures"][0];
    assert_eq!(cap["name"], "coresight_capture:tmc_etf0");
    assert_eq!(cap["problem"], Value::Null);
    assert_eq!(cap["records"][0]["name"], "tmc_etf0");
    assert_eq!(cap["records"][0]["problem"], Value::Null);
    assert_eq!(cap["records"][0]["origin"]["by"], "capture-kernel");
    assert_eq!(v["no_trace"], Value::Null);
    assert_eq!(
        v["captures"].as_array().unwrap().len(),
        1,
        "other_device is no capture"
    );
    let o = run(&[&"info", &kdump_core]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("path:      committed while the kernel ran"),
        "{text}"
    );
    let n = recs.trace.len() + tmc::TMC_RECORD_HEADER_LEN;
    assert!(
        text.contains("  coresight_capture:tmc_etf0 (")
            && text.contains(&format!(
                "    sink tmc_etf0: ok, {n}/{n} bytes; used (origin: capture kernel (device dump \"coresight_capture:tmc_etf0\"))"
            )),
        "{text}"
    );
    let o = run(&[&"info", &panic_core, &"--json"]);
    let v = json(&o);
    assert_eq!(v["path"], "panic-path");
    assert_eq!(
        v["records"][4]["origin"]["by"], "panic-path",
        "{}",
        v["records"]
    );
}

/// (b) A capture kernel's device dump that fails its checks (a bad data CRC, cut short, no
/// container at all) is named in a warning and not used; nothing panics.
#[test]
fn a_damaged_capture_device_dump_is_warned_about_and_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let region = runtime_region();
    let good = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&trace(4096, 1)));
    let mut bad_crc = good.clone();
    bad_crc[CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE + 100] ^= 0x40;
    let mut short = capture_note("tmc_etf0", &good);
    short.desc.truncate(44 + good.len() / 2);
    let cases = [
        (capture_note("tmc_etf0", &bad_crc), "data CRC"),
        (short, "truncated"),
        (
            capture_note("tmc_etf0", b"not a container at all, just bytes"),
            "not a coresight-panic-dump container",
        ),
    ];
    for (i, (note, why)) in cases.into_iter().enumerate() {
        let core = write(
            tmp.path(),
            &format!("bad{i}.vmcore"),
            &vmcore_with(&region, PADDR, vec![note]),
        );
        let o = run(&[&"info", &core, &"--json"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(
            err.contains(
                "the capture kernel's device dump \"coresight_capture:tmc_etf0\" is not used:"
            ) && err.contains(why),
            "{why}: {err}"
        );
        let v = json(&o);
        assert!(v["captures"][0]["problem"].as_str().unwrap().contains(why));
        assert_eq!(v["captures"][0]["records"], serde_json::json!([]));
        assert!(v["no_trace"]
            .as_str()
            .unwrap()
            .starts_with("the trace was not collected"));
        let out = tmp.path().join(format!("o{i}"));
        let o = run(&[&"perf", &core, &"-o", &out]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(
            !out.join("cstrace.bin").exists(),
            "the damaged trace is not used"
        );
        assert!(err.contains("the trace was not collected"), "{err}");

        // In process too, as the fuzzer runs it.
        let bytes = fs::read(&core).unwrap();
        let located = csdump::region::locate(&bytes).unwrap();
        assert!(located.input_damaged);
        assert_eq!(located.captures.len(), 1);
        let c = csdump::capture::Capture::from_dump(&located).unwrap();
        assert!(c.sinks.is_empty());
        assert!(c.trace_not_collected());
    }
    // Every truncation and every single-byte flip of the device dump: never a panic, and a
    // container that is used is a sound one.
    let mut rng = Rng(0xCA97);
    for n in 0..200 {
        let mut c = good.clone();
        if n % 2 == 0 {
            c.truncate(rng.below(good.len()));
        } else {
            let at = rng.below(c.len());
            c[at] ^= 1 << rng.below(8);
        }
        let bytes = vmcore_with(&region, PADDR, vec![capture_note("tmc_etf0", &c)]);
        let located = csdump::region::locate(&bytes).unwrap();
        let cap = csdump::capture::Capture::from_dump(&located).unwrap();
        if let Some(s) = cap.sinks.first() {
            assert_eq!(s.trace.as_ref(), &trace(4096, 1)[..], "flip {n}");
        }
        let report = csdump::info::analyze("fuzz", &located).unwrap();
        let _ = csdump::info::render_text(&report);
        csdump::fuzz_entry(&[[0u8].as_slice(), &bytes].concat());
    }
}

/// (c) A region committed while the kernel ran and no capture kernel's device dump: the outputs
/// that need trace say it was not collected and why; info still lists the ETM records.
#[test]
fn without_a_capture_device_dump_the_trace_was_not_collected() {
    let tmp = tempfile::tempdir().unwrap();
    let core = write(
        tmp.path(),
        "plain.vmcore",
        &vmcore_with(&runtime_region(), PADDR, vec![]),
    );
    let why = "the trace was not collected: the dump was committed while the kernel ran (no \
               panic-time step drained a sink) and the capture kernel handed over no sink record \
               (no vmcore device dump coresight_capture:<sink>: its TMC driver was not loaded or \
               built in, or the sink was not capturing)";

    let out = tmp.path().join("perf");
    let o = run(&[&"perf", &core, &"-o", &out]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "warning: {}: no sink has trace: {why}",
            core.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("not written: perf.data: no trace: {why}")),
        "{err}"
    );
    assert!(
        err.contains("sink tmc_etf0: not drained (no panic-time step ran) and no capture kernel's device dump coresight_capture:tmc_etf0; no trace"),
        "{err}"
    );
    assert!(!err.contains("status not-run"), "{err}");
    // The CPU debug record the panic path never reached is a fact, not damage.
    assert!(
        err.contains("note: ")
            && err.contains("cpu debug cpu_debug0: not sampled (no panic-time step ran)"),
        "{err}"
    );
    // The metadata is there: the ETM's registers, recorded at enable.
    assert_eq!(
        fs::read(out.join("metadata.bin")).unwrap().len(),
        8 * (3 + 11),
        "one ETMv4 block"
    );
    assert!(!out.join("perf.data").exists() && !out.join("cstrace.bin").exists());

    let o = run(&[&"report", &core, &"--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["decoder"], format!("not run: {why}"));
    assert_eq!(v["cpus"][0]["no_trace"], format!("not run: {why}"));
    assert_eq!(v["sinks"], serde_json::json!([]));
    let o = run(&[&"report", &core]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("decoder: not run: {why}")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // info: the region is sound (exit 0); it lists the ETM record and says the trace is missing.
    let o = run(&[&"info", &core, &"--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["no_trace"], why);
    let etm = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "etm0")
        .unwrap()
        .clone();
    assert_eq!(etm["status"], "ok");
    assert_eq!(etm["origin"]["by"], "runtime");
    let o = run(&[&"info", &core]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("trace:     {why}")), "{text}");
    assert!(
        text.contains("       origin: recorded at enable, while the kernel ran"),
        "{text}"
    );
}

/// (d) The panic path drained the sink and the capture kernel handed a copy over too: the
/// region's record is used, a note says the copy was ignored.
#[test]
fn the_sink_the_panic_path_drained_wins_over_the_capture_kernels_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let drained = trace(4096, 3);
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(64 * 1024, [6; 16], &identity(), &panic);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(&drained),
    );
    w.add(
        RecordKind::Source,
        PayloadType::Etm4x,
        b"etm0",
        0,
        &etm_bytes(&etm_state(0, false)),
    );
    let copy = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&trace(2048, 9)));
    let core = write(
        tmp.path(),
        "both.vmcore",
        &vmcore_with(&w.finish(), PADDR, vec![capture_note("tmc_etf0", &copy)]),
    );
    let out = tmp.path().join("perf");
    let o = run(&[&"perf", &core, &"-o", &out]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(fs::read(out.join("cstrace.bin")).unwrap(), drained);
    assert!(
        err.contains("note: ") && err.contains(
            "sink tmc_etf0: drained by the panic path, whose record is used; the capture kernel's copy (device dump \"coresight_capture:tmc_etf0\") was ignored"
        ),
        "{err}"
    );
    let o = run(&[&"report", &core, &"--json"]);
    let v = json(&o);
    assert_eq!(v["sinks"].as_array().unwrap().len(), 1);
    assert_eq!(v["sinks"][0]["origin"]["by"], "panic-path");
    assert_eq!(v["path"], "panic-path");
    let o = run(&[&"info", &core, &"--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert!(v["captures"][0]["records"][0]["problem"]
        .as_str()
        .unwrap()
        .starts_with("ignored: the panic path drained sink tmc_etf0"));

    // A second copy of one sink from the capture kernel: the first is used.
    let first = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&trace(1024, 4)));
    let mut second = capture_note("tmc_etf0", &copy);
    second.desc[..44].fill(0);
    second.desc[..27].copy_from_slice(b"coresight_capture:tmc_etf0b");
    let core = write(
        tmp.path(),
        "twice.vmcore",
        &vmcore_with(
            &runtime_region(),
            PADDR,
            vec![capture_note("tmc_etf0", &first), second],
        ),
    );
    let out = tmp.path().join("perf2");
    let o = run(&[&"perf", &core, &"-o", &out]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(fs::read(out.join("cstrace.bin")).unwrap(), trace(1024, 4));
    assert!(
        err.contains("the copy in device dump \"coresight_capture:tmc_etf0b\" was ignored"),
        "{err}"
    );
}

/// A CPU debug record as a driver writes it: `cpu`'s sample, or its record at bind time when
/// `pc` is `None`, with `mpidr`.
fn cpu_sample(cpu: u32, mpidr: u64, pc: Option<u64>, as_found: bool) -> Vec<u8> {
    let arch = cpu_debug::ArchData::from_ids(3, 2, true).unwrap();
    let mut s = match pc {
        None => cpu_debug::CpuSample::recorded(cpu, &arch, Some(mpidr)),
        Some(pc) => {
            let mut s = cpu_debug::CpuSample::for_arch(cpu, &arch);
            s.outcome = cpu_debug::Outcome::Sampled;
            s.edprsr = 1;
            s.edprsr_first = 1;
            // CAST: the low and high halves.
            s.edpcsr = pc as u32;
            s.edpcsr_hi = (pc >> 32) as u32;
            s.edvidsr = 0x9000_0000;
            s.pc = cpu_debug::calibrate_pc(&arch, s.edpcsr, s.edpcsr_hi, Some(s.edvidsr));
            s
        }
    };
    s.set_mpidr(Some(mpidr));
    if as_found {
        s.flags |= cpu_debug::FLAG_AS_FOUND;
    }
    let mut b = vec![0u8; cpu_debug::RECORD_LEN];
    s.encode(&mut b).unwrap();
    b
}

/// A region committed while the kernel ran whose CPU debug records (recorded when the devices
/// were bound) name CPU 0 MPIDR 0x100 and CPU 1 MPIDR 0x0.
fn region_with_debug_records() -> Vec<u8> {
    let mut w = DumpWriter::at_runtime(64 * 1024, [6; 16], &identity());
    for (cpu, mpidr) in [(0u32, 0x100u64), (1, 0x0)] {
        w.add_flagged(
            RecordKind::CpuDebug,
            PayloadType::CpuDebug,
            format!("cpu_debug{cpu}").as_bytes(),
            cpu,
            &cpu_sample(cpu, mpidr, None, false),
            RECORD_FLAG_RUNTIME,
        );
    }
    w.finish_flagged(RECORD_FLAG_RUNTIME)
}

/// The capture kernel's sample of a CPU not online there names it by MPIDR only: csdump gives it
/// to the crashed kernel's CPU with that MPIDR (not to the capture kernel's CPU number, which is
/// in the record as none), says where it came from, and leaves the other CPU's record as
/// recorded at bind time. A sample whose MPIDR no CPU had is warned about and not used.
#[test]
fn a_capture_kernel_sample_goes_to_the_cpu_with_its_mpidr() {
    let tmp = tempfile::tempdir().unwrap();
    let pc = 0xFFFF_8000_0812_3450u64;
    let sample = capture_container_of(
        RecordKind::CpuDebug,
        b"cpu_debug0",
        PayloadType::CpuDebug,
        &cpu_sample(CPU_NONE, 0x100, Some(pc), true),
    );
    let stranger = capture_container_of(
        RecordKind::CpuDebug,
        b"cpu_debug7",
        PayloadType::CpuDebug,
        &cpu_sample(CPU_NONE, 0x700, Some(pc), true),
    );
    let core = write(
        tmp.path(),
        "kdump.vmcore",
        &vmcore_with(
            &region_with_debug_records(),
            PADDR,
            vec![
                capture_note("cpu_debug0", &sample),
                capture_note("cpu_debug7", &stranger),
            ],
        ),
    );
    let o = run(&[&"report", &core, &"--json"]);
    let err = stderr(&o);
    let v = json(&o);
    let cpu = |n: u64| {
        v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"].as_u64() == Some(n))
            .unwrap_or_else(|| panic!("no CPU {n}: {v}"))
            .clone()
    };
    let c0 = cpu(0)["sample"].clone();
    assert_eq!(c0["pc"]["addr"], format!("{pc:#x}"), "{c0}");
    assert_eq!(c0["origin"]["by"], "capture-kernel");
    assert_eq!(c0["origin"]["device_dump"], "coresight_capture:cpu_debug0");
    assert_eq!(c0["mpidr"], "0x100");
    assert_eq!(c0["as_found"], true);
    let c1 = cpu(1)["sample"].clone();
    assert_eq!(c1["origin"]["by"], "runtime", "{c1}");
    assert_eq!(c1["mpidr"], "0x0");
    assert_eq!(
        c1["outcome"],
        "recorded when the device was bound; no panic-time step ran"
    );
    assert!(
        v["cpus"].as_array().unwrap().len() == 2,
        "the stranger made a CPU: {v}"
    );
    // No record names the panicking CPU and no trace tells: the capture kernel ran on CPU 1,
    // the one CPU it did not sample.
    assert_eq!(v["panic_cpu"], 1, "{v}");
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("the panicking CPU is CPU 1, inferred: ")
            && n.as_str().unwrap().contains("the capture kernel ran on it")),
        "{v}"
    );
    assert!(
        err.contains("cpu debug cpu_debug7 (device dump \"coresight_capture:cpu_debug7\"): MPIDR 0x700 is no CPU the crashed kernel recorded; not used"),
        "{err}"
    );
    let o = run(&[&"report", &core]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("CPU debug sample (origin: capture kernel (device dump \"coresight_capture:cpu_debug0\"), taken as found; MPIDR 0x100):"),
        "{text}"
    );
    assert!(text.contains(&format!("EDPCSR:  {pc:#x}")), "{text}");

    // info: the sample is used as CPU 0's, the stranger is not used, and why.
    let o = run(&[&"info", &core, &"--json"]);
    let v = json(&o);
    let rec = |dd: &str| {
        v["captures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == dd)
            .unwrap_or_else(|| panic!("no {dd}: {v}"))["records"][0]
            .clone()
    };
    let used = rec("coresight_capture:cpu_debug0");
    assert_eq!(used["cpu"], 0, "{used}");
    assert_eq!(used["problem"], Value::Null);
    assert_eq!(used["origin"]["by"], "capture-kernel");
    let stranger = rec("coresight_capture:cpu_debug7");
    assert_eq!(
        stranger["problem"],
        "MPIDR 0x700 is no CPU the crashed kernel recorded; not used"
    );
    let o = run(&[&"info", &core]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("cpu-debug cpu_debug0: ok, 64/64 bytes; used as CPU 0's sample (origin: capture kernel (device dump \"coresight_capture:cpu_debug0\"))")
            && text.contains("origin: recorded when the device was bound, while the kernel ran"),
        "{text}"
    );

    // A powered-off CPU, as the capture kernel found it, is named so.
    let arch = cpu_debug::ArchData::from_ids(3, 2, true).unwrap();
    let mut off = cpu_debug::CpuSample::for_arch(CPU_NONE, &arch);
    off.flags |= cpu_debug::FLAG_AS_FOUND;
    off.set_mpidr(Some(0x0));
    let mut b = vec![0u8; cpu_debug::RECORD_LEN];
    off.encode(&mut b).unwrap();
    let core = write(
        tmp.path(),
        "off.vmcore",
        &vmcore_with(
            &region_with_debug_records(),
            PADDR,
            vec![capture_note(
                "cpu_debug1",
                &capture_container_of(
                    RecordKind::CpuDebug,
                    b"cpu_debug1",
                    PayloadType::CpuDebug,
                    &b,
                ),
            )],
        ),
    );
    let o = run(&[&"report", &core, &"--json"]);
    let v = json(&o);
    let c1 = &v["cpus"][1]["sample"];
    assert_eq!(c1["outcome"], cpu_debug::POWERED_OFF_REASON, "{v}");
    assert_eq!(c1["origin"]["by"], "capture-kernel");
}

/// A formatter frame of one source: its ID, then 14 data bytes (byte 1, six pairs, byte 14).
fn frame_of(id: u8, seed: u8) -> [u8; 16] {
    let mut f = [0u8; 16];
    f[0] = (id << 1) | 1;
    for (i, b) in f.iter_mut().enumerate().take(15).skip(1) {
        // Even data bytes carry their low bit in the aux byte (0 here): keep them even.
        *b = if i % 2 == 0 {
            seed.wrapping_add(i as u8) & 0xFE
        } else {
            seed.wrapping_add(i as u8)
        };
    }
    f
}

/// Plain kdump with a CPU that ignored the crash stop: the sink holds the panicking CPU 1's
/// last bytes, then CPU 0's. The report gives each CPU's share of the sink and how much of CPU 0's
/// came after CPU 1's last byte (the panicking CPU inferred from where the capture kernel ran),
/// and says it in a note; with CPU 1's trace overwritten it says none of it is left.
#[test]
fn the_report_says_how_much_of_the_sink_a_cpu_took_after_the_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let region = || {
        let mut w = DumpWriter::at_runtime(64 * 1024, [7; 16], &identity());
        w.register(
            RecordKind::Sink,
            PayloadType::Tmc,
            b"tmc_etf0",
            CPU_NONE,
            8192,
        );
        for (cpu, mpidr) in [(0u32, 0x0u64), (1, 0x1)] {
            w.add_flagged(
                RecordKind::Source,
                PayloadType::Etm4x,
                format!("etm{cpu}").as_bytes(),
                cpu,
                &etm_bytes(&etm_state(cpu, true)),
                RECORD_FLAG_RUNTIME,
            );
            w.add_flagged(
                RecordKind::CpuDebug,
                PayloadType::CpuDebug,
                format!("cpu_debug{cpu}").as_bytes(),
                cpu,
                &cpu_sample(cpu, mpidr, None, false),
                RECORD_FLAG_RUNTIME,
            );
        }
        w.finish_flagged(RECORD_FLAG_RUNTIME)
    };
    // CPU 0 (trace ID 0x10) before and after CPU 1's (0x12) last frame.
    let report = |frames: &[[u8; 16]], name: &str| {
        let trace: Vec<u8> = frames.iter().flatten().copied().collect();
        let sink = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&trace));
        let sample = capture_container_of(
            RecordKind::CpuDebug,
            b"cpu_debug0",
            PayloadType::CpuDebug,
            &cpu_sample(CPU_NONE, 0x0, Some(0xFFFF_8000_0812_3450), true),
        );
        let core = write(
            tmp.path(),
            name,
            &vmcore_with(
                &region(),
                PADDR,
                vec![
                    capture_note("tmc_etf0", &sink),
                    capture_note("cpu_debug0", &sample),
                ],
            ),
        );
        let o = run(&[&"report", &core, &"--json"]);
        json(&o)
    };
    let v = report(
        &[
            frame_of(0x10, 1),
            frame_of(0x12, 2),
            frame_of(0x10, 3),
            frame_of(0x10, 4),
        ],
        "took.vmcore",
    );
    assert_eq!(v["panic_cpu"], 1, "{v}");
    let share = |n: usize| v["cpus"][n]["sink_share"].clone();
    let (c0, c1) = if v["cpus"][0]["cpu"] == 0 {
        (share(0), share(1))
    } else {
        (share(1), share(0))
    };
    assert_eq!(c0["bytes"], 42, "{v}");
    assert_eq!(c0["after_crash"], 28, "{v}");
    assert_eq!(c1["bytes"], 14);
    assert_eq!(c1["after_crash"], 0);
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with(
            "CPU 0's trace took 28 bytes of the sink (64 bytes) after the panicking CPU 1's trace \
             ended: it went on running after the crash"
        )),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with(
            "CPU 0 did not stop at the crash: the capture kernel found it running at 0xffff800008123450"
        )),
        "{notes:?}"
    );

    // CPU 1's trace overwritten: none of it is left, CPU 0's fills the sink.
    let v = report(
        &[frame_of(0x10, 5), frame_of(0x10, 6)],
        "overwritten.vmcore",
    );
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.contains(
            &"none of the panicking CPU 1's trace is left in the sink: trace written after the \
              crash overwrote it; CPU 0's trace fills 28 of its 32 bytes (a CPU the crash stop \
              did not stop)"
        ),
        "{notes:?}"
    );
}

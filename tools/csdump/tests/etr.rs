//! csdump on TMC-ETR records: a buffer copied at panic, or left in reserved memory and found in
//! an attachment of the previous dump (/dev/coresight_panic_dump), a vmcore device dump or the
//! vmcore's memory; unwrapped oldest first, with the barrier packet where the stream restarts.

mod common;

use std::fs;

use std::process::Command;
use std::process::Output;

use common::*;
use csdump::capture::Capture;
use csdump::region::locate;
use csdump::region::locate_path;
use cspd_format::etr::*;
use cspd_format::*;
use serde_json::Value;

const BARRIER: [u8; 16] = [
    0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F,
];
/// Where the reserved buffer is (physical, and as the ETR's DBA), and its size.
const BUF_PADDR: u64 = 0x7e00_0000;
const BUF_SIZE: usize = 0x4000;
const REGION_SIZE: usize = 0x8000;

fn csdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csdump"))
        .args(args)
        .output()
        .expect("run csdump")
}

fn code(o: &Output) -> i32 {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "csdump panicked: {stderr}");
    o.status.code().expect("exit code")
}

/// A buffer whose every 16-byte frame says where it is.
fn buffer() -> Vec<u8> {
    (0..BUF_SIZE / 4)
        .flat_map(|i| (((i as u32) * 4) | 0x1000_0000).to_le_bytes())
        .collect()
}

fn header(flags: u16, sts: u32, rwp_off: u64) -> EtrRecordHeader {
    EtrRecordHeader {
        version: ETR_RECORD_VERSION,
        outcome_code: EtrOutcome::Complete.code(),
        flags,
        rsz: (BUF_SIZE / 4) as u32,
        sts: sts | 0x4,
        ctl: 1,
        ffcr: 0x1133,
        ffsr: 0x2,
        devid: 0x0151_0340,
        authstatus: 0x33,
        axictl: 0xf3e,
        rrp: BUF_PADDR + rwp_off,
        rwp: BUF_PADDR + rwp_off,
        dba: BUF_PADDR,
        buf_paddr: BUF_PADDR,
        buf_size: BUF_SIZE as u64,
        ..EtrRecordHeader::default()
    }
}

/// A committed region with one ETR record of header `h` and `copied` bytes behind it.
fn region_with(h: &EtrRecordHeader, copied: &[u8]) -> Vec<u8> {
    let mut h = *h;
    h.trace_len = copied.len() as u32;
    let mut payload = vec![0u8; ETR_RECORD_HEADER_LEN];
    h.encode(&mut payload).unwrap();
    payload.extend_from_slice(copied);
    let panic = PanicInfo {
        cpu: 0,
        message: PANIC_MSG,
        truncated: false,
    };
    let mut w = DumpWriter::new(REGION_SIZE, BOOT_ID, &identity(), &panic);
    w.add(
        RecordKind::Sink,
        PayloadType::Etr,
        b"tmc_etr0",
        CPU_NONE,
        &payload,
    );
    w.finish()
}

/// What the decoders must get from a wrapped buffer with its oldest byte at `start`.
fn unwrapped(buf: &[u8], start: usize) -> Vec<u8> {
    let mut v = buf[start..].to_vec();
    v.extend_from_slice(&buf[..start]);
    v[..16].copy_from_slice(&BARRIER);
    v
}

/// A trace buffer attachment, as the next boot appends it behind the region.
fn attachment(paddr: u64, data: &[u8]) -> Vec<u8> {
    let mut v = TracedataAttachment::header(paddr, data).to_vec();
    v.extend_from_slice(data);
    while v.len() % 8 != 0 {
        v.push(0);
    }
    v
}

/// An ELF vmcore whose memory holds `region` at 0x4800_0000 (and `extra`, a buffer at its
/// address), with `notes`.
fn vmcore(region: &[u8], extra: Option<(u64, &[u8])>, mut notes: Vec<NoteSpec>) -> Vec<u8> {
    notes.push(vmcoreinfo_note(&format!(
        "CSPD_REGION_PADDR=0x48000000\nCSPD_REGION_SIZE={:#x}\n",
        region.len()
    )));
    let mut loads = vec![LoadSpec {
        paddr: 0x4800_0000,
        size: region.len() as u64,
        chunks: vec![(0, region.to_vec())],
    }];
    if let Some((paddr, data)) = extra {
        loads.push(LoadSpec {
            paddr,
            size: data.len() as u64,
            chunks: vec![(0, data.to_vec())],
        });
    }
    elf_core(&notes, &loads)
}

fn sink_of(bytes: &[u8]) -> (Vec<u8>, Vec<String>, Vec<String>) {
    let located = locate(bytes).unwrap();
    let c = Capture::from_dump(&located).unwrap();
    assert!(c.sinks.len() <= 1, "{:?}", c.sinks.len());
    let trace = c
        .sinks
        .first()
        .map(|s| s.trace.to_vec())
        .unwrap_or_default();
    if let Some(s) = c.sinks.first() {
        assert!(s.etr.is_some() && s.tmc.is_none());
    }
    (trace, c.notes.clone(), c.warnings.clone())
}

#[test]
fn a_copied_wrapped_buffer_gets_the_barrier() {
    let buf = buffer();
    // Copied at panic, oldest first: the record holds the unwrapped bytes.
    let copy = unwrapped(&buffer(), 0x1230)[16..].to_vec();
    let mut full = buf[0x1230..].to_vec();
    full.extend_from_slice(&buf[..0x1230]);
    let mut h = header(ETR_REC_WRAPPED, ETR_STS_FULL, 0x1230);
    h.data_len = BUF_SIZE as u64;
    h.data_start = 0x1230;
    let r = region_with(&h, &full);
    let (trace, notes, warnings) = sink_of(&r);
    let mut want = BARRIER.to_vec();
    want.extend_from_slice(&copy);
    assert_eq!(trace, want);
    assert!(
        notes.iter().any(|n| n.contains("a copy of the buffer")),
        "{notes:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("tmc_etr0")),
        "{warnings:?}"
    );
}

#[test]
fn a_copied_buffer_that_did_not_wrap_is_taken_as_it_is() {
    let buf = buffer();
    let mut h = header(0, 0, 0x800);
    h.data_len = 0x800;
    let (trace, _, _) = sink_of(&region_with(&h, &buf[..0x800]));
    assert_eq!(trace, &buf[..0x800]);
}

#[test]
fn a_truncated_copy_is_named_and_starts_with_the_barrier() {
    let buf = buffer();
    let mut h = header(ETR_REC_TRUNCATED, 0, 0x2000);
    h.outcome_code = EtrOutcome::Truncated.code();
    h.data_len = 0x2000;
    h.data_start = 0x1000;
    let (trace, _, warnings) = sink_of(&region_with(&h, &buf[0x1000..0x2000]));
    let mut want = buf[0x1000..0x2000].to_vec();
    want[..16].copy_from_slice(&BARRIER);
    assert_eq!(trace, want);
    assert!(
        warnings.iter().any(|w| w.contains("ended truncated")),
        "{warnings:?}"
    );
}

#[test]
fn an_in_place_buffer_is_read_from_the_attachment_of_last_dump() {
    let buf = buffer();
    let h = header(ETR_REC_IN_PLACE | ETR_REC_WRAPPED, ETR_STS_FULL, 0x1230);
    let mut file = region_with(&h, &[]);
    file.extend(attachment(BUF_PADDR, &buf));
    let (trace, notes, _) = sink_of(&file);
    assert_eq!(trace, unwrapped(&buf, 0x1230));
    assert!(
        notes
            .iter()
            .any(|n| n.contains("attached behind the region")),
        "{notes:?}"
    );

    // The same through a file, and `extract` writes the trace as the decoders take it.
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("last_dump");
    fs::write(&input, &file).unwrap();
    let located = locate_path(&input).unwrap();
    assert_eq!(located.attachments.len(), 1);
    assert_eq!(located.attachments[0].paddr, BUF_PADDR);
    let out = tmp.path().join("out");
    let o = csdump(&[
        "extract",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let rec = s["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["payload"] == "etr")
        .unwrap();
    let t = &rec["trace"];
    assert_eq!(t["bytes"], BUF_SIZE);
    assert_eq!(t["barrier"], true);
    let file = t["file"].as_str().unwrap();
    assert!(file.ends_with(".trace.bin"), "{file}");
    assert_eq!(fs::read(out.join(file)).unwrap(), unwrapped(&buf, 0x1230));
    // `perf` writes the same bytes as cstrace.bin.
    let perf = tmp.path().join("perf");
    let o = csdump(&[
        "perf",
        input.to_str().unwrap(),
        "-o",
        perf.to_str().unwrap(),
    ]);
    assert!(
        matches!(code(&o), 0 | 3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        fs::read(perf.join("cstrace.bin")).unwrap(),
        unwrapped(&buf, 0x1230)
    );
}

#[test]
fn an_in_place_buffer_that_did_not_wrap_runs_from_dba_to_rwp() {
    let buf = buffer();
    let h = header(ETR_REC_IN_PLACE, 0, 0x900);
    let mut file = region_with(&h, &[]);
    file.extend(attachment(BUF_PADDR, &buf));
    let (trace, _, _) = sink_of(&file);
    assert_eq!(trace, &buf[..0x900]);
}

#[test]
fn an_in_place_buffer_is_read_from_the_capture_kernels_device_dump() {
    let buf = buffer();
    let h = header(ETR_REC_IN_PLACE | ETR_REC_WRAPPED, ETR_STS_FULL, 0x40);
    let r = region_with(&h, &[]);
    // The region's device dump is bigger than the buffer the ETR used: the record bounds it.
    let mut region_bytes = buf.clone();
    region_bytes.extend(vec![0xEE; 0x1000]);
    let core = vmcore(
        &r,
        None,
        vec![vmcoredd_note("coresight_tracedata@7e000000", &region_bytes)],
    );
    let (trace, notes, _) = sink_of(&core);
    assert_eq!(trace, unwrapped(&buf, 0x40));
    assert!(
        notes
            .iter()
            .any(|n| n.contains("device dump \"coresight_tracedata@7e000000\"")),
        "{notes:?}"
    );
    // Another buffer's device dump is not taken for this one.
    let core = vmcore(
        &r,
        None,
        vec![vmcoredd_note("coresight_tracedata@7f000000", &buf)],
    );
    let (trace, _, warnings) = sink_of(&core);
    assert!(trace.is_empty());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("coresight_tracedata@7e000000")
                && w.contains("CONFIG_PROC_VMCORE_DEVICE_DUMP")),
        "{warnings:?}"
    );
}

#[test]
fn an_in_place_buffer_is_read_from_the_vmcores_memory() {
    let buf = buffer();
    let h = header(ETR_REC_IN_PLACE | ETR_REC_WRAPPED, ETR_STS_FULL, 0x3ff0);
    let core = vmcore(&region_with(&h, &[]), Some((BUF_PADDR, &buf)), vec![]);
    let (trace, notes, _) = sink_of(&core);
    assert_eq!(trace, unwrapped(&buf, 0x3ff0));
    assert!(
        notes.iter().any(|n| n.contains("vmcore's memory")),
        "{notes:?}"
    );
}

#[test]
fn a_missing_buffer_is_a_problem_that_names_where_to_find_it() {
    let h = header(ETR_REC_IN_PLACE | ETR_REC_WRAPPED, ETR_STS_FULL, 0x40);
    let tmp = tempfile::tempdir().unwrap();
    // A region file without the attachment (a copy of the region alone).
    let input = tmp.path().join("region");
    fs::write(&input, region_with(&h, &[])).unwrap();
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = s["problems"].to_string();
    assert!(
        p.contains("etr-trace-missing") && p.contains("/dev/coresight_panic_dump"),
        "{p}"
    );
    // A damaged attachment is named, and not used.
    let mut file = region_with(&h, &[]);
    let mut a = attachment(BUF_PADDR, &buffer());
    a[100] ^= 1;
    file.extend(a);
    fs::write(&input, &file).unwrap();
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        s["input_warnings"].to_string().contains("fails its CRC"),
        "{}",
        s["input_warnings"]
    );
}

#[test]
fn records_without_trace_say_so() {
    // Capture was off: no trace, no damage.
    let mut h = header(0, 0, 0);
    h.outcome_code = EtrOutcome::NotEnabled.code();
    let (trace, _, warnings) = sink_of(&region_with(&h, &[]));
    assert!(trace.is_empty());
    assert!(
        !warnings.iter().any(|w| w.contains("tmc_etr0")),
        "{warnings:?}"
    );
    // The ETR could not write its buffer.
    let mut h = header(ETR_REC_MEMERR, ETR_STS_MEMERR, 0);
    h.outcome_code = EtrOutcome::MemErr.code();
    let (trace, _, warnings) = sink_of(&region_with(&h, &[]));
    assert!(trace.is_empty());
    assert!(
        warnings.iter().any(|w| w.contains("memory_error")),
        "{warnings:?}"
    );
    // Registers that do not locate the trace.
    let mut h = header(ETR_REC_IN_PLACE, 0, 0);
    h.rwp = BUF_PADDR + 2 * BUF_SIZE as u64;
    let (trace, _, warnings) = sink_of(&region_with(&h, &[]));
    assert!(trace.is_empty());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("do not locate the trace")),
        "{warnings:?}"
    );
}

#[test]
fn damaged_etr_inputs_never_crash() {
    let buf = buffer();
    let h = header(ETR_REC_IN_PLACE | ETR_REC_WRAPPED, ETR_STS_FULL, 0x1230);
    let mut file = region_with(&h, &[]);
    file.extend(attachment(BUF_PADDR, &buf));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("f");
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..200 {
        let mut f = file.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % f.len();
            f[at] ^= (x >> 40) as u8 | 1;
        }
        let _ = sink_of_lenient(&f);
        if x % 16 == 0 {
            fs::write(&input, &f).unwrap();
            let o = csdump(&["info", input.to_str().unwrap()]);
            assert!(matches!(code(&o), 0 | 1 | 3));
        }
    }
    // Cut anywhere.
    for n in (0..file.len()).step_by(997) {
        let _ = sink_of_lenient(&file[..n]);
    }
}

fn sink_of_lenient(bytes: &[u8]) -> Option<usize> {
    let located = locate(bytes).ok()?;
    let c = Capture::from_dump(&located).ok()?;
    Some(c.sinks.len())
}

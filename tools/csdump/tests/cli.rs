//! End-to-end tests of the `csdump` binary on synthetic regions and vmcores.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::process::Output;

use common::*;
use cspd_format::Phases;
use serde_json::Value;

const RAM: u64 = 0x4000_0000;
const REGION_PADDR: u64 = 0x4800_0000;
const REGION_SIZE: usize = 0x4000;

fn csdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csdump"))
        .args(args)
        .output()
        .expect("run csdump")
}

/// Runs `csdump extract INPUT -o OUT`.
fn extract(input: &Path, out: &Path) -> Output {
    csdump(&[
        "extract",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn code(o: &Output) -> i32 {
    let stderr = text(&o.stderr);
    assert!(!stderr.contains("panicked"), "csdump panicked: {stderr}");
    o.status.code().expect("exit code")
}

fn summary(dir: &Path) -> Value {
    serde_json::from_slice(&fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// Checks the files written for the region built by [`build_region`].
fn assert_extracted(dir: &Path, b: &Built) {
    assert_eq!(
        fs::read(dir.join("00-identity-identity.bin")).unwrap(),
        b.identity
    );
    let panic_bin = fs::read(dir.join("01-panic-info-panic.bin")).unwrap();
    assert_eq!(&panic_bin[16..], PANIC_MSG);
    let phases_bin = fs::read(dir.join("02-phases-phases.bin")).unwrap();
    assert_eq!(Phases::decode(&phases_bin), Ok(b.phases));
    assert_eq!(fs::read(dir.join("04-sink-tmc_etf0.bin")).unwrap(), b.sink);
    assert_eq!(fs::read(dir.join("05-source-etm1.bin")).unwrap(), b.etm);
    assert_eq!(
        fs::read(dir.join("06-cpu-debug-cpu_debug_0.bin")).unwrap(),
        b""
    );
    assert_eq!(
        fs::read_to_string(dir.join("panic.txt")).unwrap(),
        format!("{}\n", text(PANIC_MSG))
    );
    let s = summary(dir);
    let recs = s["records"].as_array().unwrap();
    assert_eq!(recs.len(), 7);
    assert_eq!(recs[2]["kind"], "phases");
    assert_eq!(recs[2]["offset"], b.phases_off);
    assert_eq!(recs[3]["kind"], "modules");
    assert_eq!(recs[4]["kind"], "sink");
    assert_eq!(recs[4]["name"], "tmc_etf0");
    assert_eq!(recs[4]["length"], b.sink.len());
    assert_eq!(recs[4]["offset"], b.offsets[2]);
    assert_eq!(recs[4]["crc_ok"], true);
    assert_eq!(recs[4]["file"], "04-sink-tmc_etf0.bin");
    assert_eq!(recs[5]["cpu"], 1);
    assert_eq!(recs[4]["cpu"], Value::Null);
    assert_eq!(recs[6]["status"], "callback-error");
    assert_eq!(recs[6]["error"], -110);
    // The phase times, in microseconds: 10 us per phase number, 2 us before the first.
    let ph = &s["phases"];
    assert_eq!(ph["frequency_hz"], 62_500_000);
    assert_eq!(ph["total_us"], 152.0);
    let names: Vec<&str> = ph["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "stop-sources",
            "sample-cpus",
            "drain-sinks",
            "other",
            "commit"
        ]
    );
    assert_eq!(ph["phases"][1]["duration_us"], 20.0);
    assert_eq!(ph["phases"][1]["start_us"], 12.0);
    assert_eq!(ph["phases"][4]["callbacks"], 0);
    assert_eq!(s["identity"]["release"], "7.3.0-cspd-test");
    assert_eq!(s["identity"]["build_id"], "5a01020304050607");
    assert_eq!(s["identity"]["kaslr_offset"], "0x3b0000");
    assert_eq!(s["panic"]["cpu"], 2);
    assert_eq!(s["panic"]["message"], text(PANIC_MSG));
    assert_eq!(s["commit"]["state"], "ok");
    assert_eq!(s["commit"]["records"], 8); // free slot included
    assert_eq!(s["container"]["sequence"], 3);
    assert_eq!(
        s["container"]["boot_id"],
        "1032547698badcfe0123456789abcdef"
    );
    assert_eq!(s["clean"], true);
}

/// RAM around the region: a load below it, the region's load, and one above.
fn ram_loads(region: &[u8], split_at: Option<usize>) -> Vec<LoadSpec> {
    let mut loads = vec![LoadSpec {
        paddr: RAM,
        size: 0x10_0000,
        chunks: vec![(0x1000, b"some kernel text".to_vec())],
    }];
    match split_at {
        None => loads.push(LoadSpec {
            paddr: REGION_PADDR - 0x2000,
            size: 0x2000 + region.len() as u64 + 0x3000,
            chunks: vec![(0x2000, region.to_vec())],
        }),
        Some(cut) => {
            // Two adjacent PT_LOADs, the second one listed (and stored) first.
            loads.push(LoadSpec {
                paddr: REGION_PADDR + cut as u64,
                size: (region.len() - cut) as u64 + 0x1000,
                chunks: vec![(0, region[cut..].to_vec())],
            });
            loads.push(LoadSpec {
                paddr: REGION_PADDR - 0x1000,
                size: 0x1000 + cut as u64,
                chunks: vec![(0x1000, region[..cut].to_vec())],
            });
        }
    }
    loads.push(LoadSpec {
        paddr: 0x6000_0000,
        size: 0x8000,
        chunks: vec![],
    });
    loads
}

#[test]
fn extract_raw_region_file() {
    let b = build_region(REGION_SIZE, 1000);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("region.bin");
    fs::write(&input, &b.bytes).unwrap();
    let out = tmp.path().join("out");
    let o = extract(&input, &out);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_extracted(&out, &b);
    let stdout = text(&o.stdout);
    assert!(stdout.contains("raw region file"), "{stdout}");
    assert!(
        stdout.contains("CPU 2: Kernel panic - not syncing"),
        "{stdout}"
    );
    assert!(stdout.contains("commit:    ok"), "{stdout}");
    assert_eq!(summary(&out)["found_by"]["method"], "raw-file");
    assert!(!out.join("vmcoreinfo.txt").exists());
}

#[test]
fn extract_vmcore_via_vmcoreinfo() {
    let b = build_region(REGION_SIZE, 2048);
    let notes = [
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, REGION_SIZE as u64)),
    ];
    let elf = elf_core(&notes, &ram_loads(&b.bytes, None));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &elf).unwrap();
    let out = tmp.path().join("out");
    let o = extract(&input, &out);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_extracted(&out, &b);
    let s = summary(&out);
    assert_eq!(s["found_by"]["method"], "vmcoreinfo");
    assert_eq!(s["found_by"]["paddr"], REGION_PADDR);
    assert_eq!(s["input_kind"], "elf-vmcore");
    assert_eq!(s["kerneloffset"], "0x3b0000");
    assert_eq!(s["region_paddr"], "0x48000000");
    // The region's file offset: the second load starts at a page boundary of the file.
    let fo = s["region_file_offset"].as_u64().unwrap() as usize;
    assert_eq!(&elf[fo..fo + 8], b"CSPDUMP\0");
    assert_eq!(
        fs::read_to_string(out.join("vmcoreinfo.txt")).unwrap(),
        vmcoreinfo_text(REGION_PADDR, REGION_SIZE as u64)
    );
    let stdout = text(&o.stdout);
    assert!(stdout.contains("found by:  vmcoreinfo"), "{stdout}");
    assert!(stdout.contains("KERNELOFFSET: 0x3b0000"), "{stdout}");
}

#[test]
fn region_split_across_two_pt_loads() {
    let b = build_region(REGION_SIZE, 3000);
    // Cut in the middle of the sink's data.
    let cut = b.offsets[2] + 80 + 1234;
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(
        REGION_PADDR,
        REGION_SIZE as u64,
    ))];
    let elf = elf_core(&notes, &ram_loads(&b.bytes, Some(cut)));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &elf).unwrap();
    let out = tmp.path().join("out");
    let o = extract(&input, &out);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_extracted(&out, &b);
    assert_eq!(summary(&out)["region_file_offset"], Value::Null);

    // The scan finds it too, and reads across the split.
    let elf = elf_core(&[], &ram_loads(&b.bytes, Some(cut)));
    fs::write(&input, &elf).unwrap();
    let out2 = tmp.path().join("out2");
    let o = extract(&input, &out2);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_extracted(&out2, &b);
}

#[test]
fn vmcore_without_vmcoreinfo_is_scanned() {
    let b = build_region(REGION_SIZE, 512);
    let mut loads = ram_loads(&b.bytes, None);
    // A decoy: the magic at a page start with no valid header after it.
    loads[0].chunks.push((0x5000, b"CSPDUMP\0garbage".to_vec()));
    // A QEMU dump-guest-memory file: CORE notes, no VMCOREINFO.
    let elf = elf_core(&[core_note(), core_note()], &loads);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("qemu.elf");
    fs::write(&input, &elf).unwrap();
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["found_by"]["method"], "scan-vmcore");
    assert_eq!(s["found_by"]["paddr"], REGION_PADDR);
    assert_eq!(s["kerneloffset"], Value::Null);
    assert_eq!(s["records"][4]["length"], 512);
    assert!(text(&o.stderr).contains("no VMCOREINFO note"));

    let o = csdump(&["info", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(
            "scan of the vmcore's page starts (container at physical address 0x48000000)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("tmc_etf0"), "{stdout}");
}

#[test]
fn raw_memory_image_is_scanned() {
    let b = build_region(REGION_SIZE, 100);
    let mut image = vec![0u8; 0x3000];
    image.extend(&b.bytes);
    image.extend(vec![0u8; 0x1000]);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("mem.img");
    fs::write(&input, &image).unwrap();
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["found_by"]["method"], "scan-raw");
    assert_eq!(s["found_by"]["offset"], 0x3000);
}

#[test]
fn corrupt_record_is_reported_and_others_extracted() {
    let mut b = build_region(REGION_SIZE, 1000);
    let sink_data = b.offsets[2] + 80;
    b.bytes[sink_data + 17] ^= 0xff;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("region.bin");
    fs::write(&input, &b.bytes).unwrap();
    let out = tmp.path().join("out");
    let o = csdump(&[
        "extract",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--salvage",
    ]);
    assert_eq!(code(&o), 3, "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(&format!(
            "region.bin: offset {:#x}: record data CRC mismatch",
            b.offsets[2]
        )),
        "{stderr}"
    );
    // The others are intact.
    assert_eq!(
        fs::read(out.join("00-identity-identity.bin")).unwrap(),
        b.identity
    );
    assert_eq!(fs::read(out.join("05-source-etm1.bin")).unwrap(), b.etm);
    assert!(!out.join("04-sink-tmc_etf0.bin").exists());
    // Salvaged: the damaged bytes as they are.
    let salvaged = fs::read(out.join("04-sink-tmc_etf0.corrupt.bin")).unwrap();
    assert_eq!(salvaged, b.bytes[sink_data..sink_data + 1000]);
    let s = summary(&out);
    assert_eq!(s["records"][4]["crc_ok"], false);
    assert_eq!(s["records"][4]["file"], "04-sink-tmc_etf0.corrupt.bin");
    assert!(s["records"][4]["problem"]
        .as_str()
        .unwrap()
        .contains("data CRC"));
    assert_eq!(s["problems"][0]["code"], "data-crc");
    assert_eq!(s["problems"][0]["offset"], b.offsets[2]);
    assert_eq!(s["commit"]["state"], "ok");
    assert_eq!(s["clean"], false);
    assert!(text(&o.stdout).contains("BAD"));
}

#[test]
fn missing_commit_is_a_torn_dump() {
    let mut b = build_region(REGION_SIZE, 64);
    let c = b.offsets[5];
    b.bytes[c..c + 120].fill(0);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("region.bin");
    fs::write(&input, &b.bytes).unwrap();
    let out = tmp.path().join("out");
    let o = extract(&input, &out);
    assert_eq!(code(&o), 3);
    assert!(text(&o.stderr).contains(&format!(
        "offset {c:#x}: record chain ends without a commit"
    )));
    let s = summary(&out);
    assert_eq!(s["commit"]["state"], "missing");
    assert_eq!(s["commit"]["offset"], c);
    assert_eq!(fs::read(out.join("04-sink-tmc_etf0.bin")).unwrap(), b.sink);
    assert!(text(&o.stdout).contains("MISSING"));
}

#[test]
fn corrupt_record_in_vmcore_names_file_offset() {
    let mut b = build_region(REGION_SIZE, 200);
    let hdr = b.offsets[3];
    b.bytes[hdr + 44] ^= 1; // ETM name byte: header CRC fails
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(
        REGION_PADDR,
        REGION_SIZE as u64,
    ))];
    let elf = elf_core(&notes, &ram_loads(&b.bytes, None));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &elf).unwrap();
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let fo = s["region_file_offset"].as_u64().unwrap();
    assert_eq!(s["problems"][0]["code"], "record-header-crc");
    assert_eq!(s["problems"][0]["file_offset"], fo + hdr as u64);
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(&format!("(file offset {:#x})", fo + hdr as u64)),
        "{stderr}"
    );
}

#[test]
fn truncated_vmcore_is_a_clear_error() {
    let b = build_region(REGION_SIZE, 2000);
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(
        REGION_PADDR,
        REGION_SIZE as u64,
    ))];
    let elf = elf_core(&notes, &ram_loads(&b.bytes, None));
    let fo = elf
        .windows(8)
        .position(|w| w == b"CSPDUMP\0")
        .expect("region in file");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &elf[..fo + 0x800]).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    // The header is there, the records after the cut are not: damage, named.
    let stderr = text(&o.stderr);
    assert_eq!(code(&o), 3, "{stderr}");
    assert!(stderr.contains("vmcore"), "{stderr}");
    assert!(stderr.contains("past the end of the file"), "{stderr}");
    assert!(stderr.contains("truncated"), "{stderr}");

    // Without vmcoreinfo, the scan finds the header and the parser names the truncation.
    let elf = elf_core(&[], &ram_loads(&b.bytes, None));
    fs::write(&input, &elf[..fo + 0x800]).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    let stderr = text(&o.stderr);
    assert!(stderr.contains("truncated"), "{stderr}");
}

#[test]
fn garbage_and_empty_files_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("garbage");
    let mut rng = Rng(7);
    let junk: Vec<u8> = (0..20000).map(|_| rng.next() as u8).collect();
    fs::write(&input, &junk).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let stderr = text(&o.stderr);
    assert!(stderr.contains("garbage"), "{stderr}");
    assert!(stderr.contains("bad container magic"), "{stderr}");

    fs::write(&input, b"").unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(text(&o.stderr).contains("truncated"));

    let o = csdump(&["info", tmp.path().join("nope").to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(text(&o.stderr).contains("cannot open"));
}

fn patch_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn lying_program_headers_are_errors() {
    let b = build_region(REGION_SIZE, 100);
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(
        REGION_PADDR,
        REGION_SIZE as u64,
    ))];
    let good = elf_core(&notes, &ram_loads(&b.bytes, None));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("liar");
    let run = |bytes: &[u8]| {
        fs::write(&input, bytes).unwrap();
        let o = csdump(&["info", input.to_str().unwrap()]);
        (code(&o), text(&o.stderr))
    };

    // Program header table past the end of the file.
    let mut e = good.clone();
    patch_u64(&mut e, 32, 1 << 40);
    let (c, err) = run(&e);
    assert_eq!(c, 1);
    assert!(err.contains("program header table"), "{err}");

    // The region's PT_LOAD (header 2: note, ram, region) points past EOF with a huge size.
    let ph = 64 + 56 * 2;
    let mut e = good.clone();
    patch_u64(&mut e, ph + 8, 1 << 50);
    patch_u64(&mut e, ph + 32, u64::MAX / 2);
    let (c, err) = run(&e);
    assert_eq!(c, 1);
    assert!(
        err.contains("program header 2: PT_LOAD at file offset 0x4000000000000 declares p_filesz 0x7fffffffffffffff, more than its p_memsz"),
        "{err}"
    );

    // A PT_LOAD whose physical range wraps.
    let mut e = good.clone();
    patch_u64(&mut e, ph + 24, u64::MAX - 10);
    let (c, err) = run(&e);
    assert_eq!(c, 1);
    assert!(err.contains("wraps"), "{err}");

    // Note sizes that lie: the vmcoreinfo note is lost, the scan still finds the region, and
    // the damaged file makes the run not clean.
    let mut e = good.clone();
    let notes_off = 64 + 56 * 4;
    e[notes_off..notes_off + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (c, err) = run(&e);
    assert_eq!(c, 3, "{err}");
    assert!(err.contains("note"), "{err}");

    // vmcoreinfo that names memory not in the file.
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(0x9000_0000, 0x4000))];
    let e = elf_core(&notes, &ram_loads(&b.bytes, None));
    // vmcoreinfo is not trusted over the container: it is reported, and the scan finds the
    // region.
    let (c, err) = run(&e);
    assert_eq!(c, 0, "{err}");
    assert!(
        err.contains("CSPD_REGION_PADDR=0x90000000") && err.contains("scanning memory"),
        "{err}"
    );

    // vmcoreinfo with an absurd size: the container's size is used, the disagreement said.
    let notes = [vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, 1 << 60))];
    let e = elf_core(&notes, &ram_loads(&b.bytes, None));
    let (c, err) = run(&e);
    assert_eq!(c, 0, "{err}");
    assert!(
        err.contains("vmcoreinfo says the region is 0x1000000000000000 bytes, its container header says 0x4000"),
        "{err}"
    );

    // 32-bit and big-endian ELF.
    let mut e = good.clone();
    e[4] = 1;
    let (c, err) = run(&e);
    assert_eq!(c, 1);
    assert!(err.contains("32-bit"), "{err}");
    let mut e = good;
    e[5] = 2;
    let (c, err) = run(&e);
    assert_eq!(c, 1);
    assert!(err.contains("big-endian"), "{err}");

    // Just the ELF magic.
    let (c, err) = run(b"\x7fELF\x02\x01");
    assert_eq!(c, 1);
    assert!(err.contains("ELF header"), "{err}");
}

#[test]
fn info_json_matches_extract_summary() {
    let b = build_region(REGION_SIZE, 333);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("region.bin");
    fs::write(&input, &b.bytes).unwrap();
    let out = tmp.path().join("out");
    let o = extract(&input, &out);
    assert_eq!(code(&o), 0);
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    let info: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info, summary(&out));
}

//! csdump on every vmcore format a kdump set-up saves, and on the vmcore device dump.
//!
//! The kdump-compressed, flattened and device-dump files are written by tests/common/dumps.rs
//! from the formats' own definitions (makedumpfile's diskdump_mod.h and makedumpfile.h, the
//! kernel's include/uapi/linux/vmcore.h and fs/proc/vmcore.c), independently of csdump's reader;
//! tests/oracle.rs checks that reader against libkdumpfile. The e2e scenarios add makedumpfile's
//! own output of real panics.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::process::Output;

use common::dumps::*;
use common::*;
use serde_json::Value;

fn csdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csdump"))
        .args(args)
        .output()
        .expect("run csdump")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn code(o: &Output) -> i32 {
    let stderr = text(&o.stderr);
    assert!(!stderr.contains("panicked"), "csdump panicked: {stderr}");
    o.status.code().expect("exit code")
}

fn info_json(input: &Path) -> (i32, Value, String) {
    let o = csdump(&["info", "--json", input.to_str().unwrap()]);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (code(&o), v, text(&o.stderr))
}

fn vmcoreinfo_notes(paddr: u64, size: u64) -> Vec<NoteSpec> {
    vec![core_note(), vmcoreinfo_note(&vmcoreinfo_text(paddr, size))]
}

/// The files `csdump extract` writes, by name, summary.json's input-dependent fields removed.
fn extracted(
    input: &Path,
    out: &Path,
) -> (i32, std::collections::BTreeMap<String, Vec<u8>>, String) {
    let o = csdump(&[
        "extract",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let c = code(&o);
    let mut files = std::collections::BTreeMap::new();
    for e in fs::read_dir(out).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let mut bytes = fs::read(e.path()).unwrap();
        if name == "summary.json" {
            let mut v: Value = serde_json::from_slice(&bytes).unwrap();
            for k in [
                "input",
                "input_kind",
                "input_format",
                "input_notes",
                "input_warnings",
                "region_file_offset",
            ] {
                v.as_object_mut().unwrap().remove(k);
            }
            for r in v["records"].as_array_mut().into_iter().flatten() {
                r.as_object_mut().unwrap().remove("file_offset");
            }
            bytes = serde_json::to_vec_pretty(&v).unwrap();
        }
        files.insert(name, bytes);
    }
    (c, files, text(&o.stderr))
}

#[test]
fn every_format_gives_the_same_extract() {
    let b = build_region(REGION_SIZE, 3000);
    let mem = memory(&b.bytes);
    let notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    let elf = elf_of(&mem, &notes);
    let kdump = kdump_of(&mem, &notes, Compress::Zlib, 31, &[]);
    let raw_kdump = kdump_of(&mem, &notes, Compress::None, 0, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let inputs = [
        ("vmcore.elf", elf.clone()),
        ("vmcore.kdump", kdump.clone()),
        ("vmcore.kdump-uncompressed", raw_kdump),
        ("dump.flat", flatten(&kdump)),
        ("dump.flat.gz", gzip(&flatten(&kdump))),
        ("vmcore.elf.flat", flatten(&elf)),
        ("vmcore.kdump.gz", gzip(&kdump)),
    ];
    let mut reference = None;
    for (name, bytes) in &inputs {
        let input = tmp.path().join(name);
        fs::write(&input, bytes).unwrap();
        let (c, files, stderr) = extracted(&input, &tmp.path().join(format!("out-{name}")));
        assert_eq!(c, 0, "{name}: {stderr}");
        assert_eq!(files.len(), 10, "{name}: {:?}", files.keys());
        assert!(stderr.contains("read as"), "{name}: {stderr}");
        match &reference {
            None => reference = Some(files),
            Some(r) => assert!(r == &files, "{name}: extract differs from the ELF vmcore's"),
        }
    }
    // The format is said; the region's zero pages, stored once, read as zeros.
    let input = tmp.path().join("dump.flat.gz");
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["input_kind"], "kdump-compressed");
    assert_eq!(
        s["input_format"],
        "kdump-compressed vmcore, zlib pages, dump level 31, flattened (makedumpfile -F), gzip'ed"
    );
    assert_eq!(s["found_by"]["method"], "vmcoreinfo");
    assert!(
        s["input_warnings"].as_array().unwrap().is_empty(),
        "{}",
        s["input_warnings"]
    );
    assert_eq!(s["clean"], true);
    // An ELF vmcore says so, and keeps its file offsets.
    let (_, s, _) = info_json(&tmp.path().join("vmcore.elf"));
    assert_eq!(s["input_format"], "ELF vmcore");
    assert!(s["region_file_offset"].is_u64());
}

#[test]
fn the_scan_reads_compressed_dumps_too() {
    let b = build_region(REGION_SIZE, 700);
    let mem = memory(&b.bytes);
    let kdump = kdump_of(&mem, &[core_note()], Compress::Zlib, 31, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &kdump).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "scan-vmcore");
    assert_eq!(s["found_by"]["paddr"], REGION_PADDR);
    assert_eq!(s["records"][4]["length"], 700);
}

#[test]
fn damaged_compressed_dumps_name_the_page() {
    let b = build_region(REGION_SIZE, 3000);
    let mem = memory(&b.bytes);
    let notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    let kdump = kdump_of(&mem, &notes, Compress::Zlib, 31, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    // Truncated inside the page bitmaps: fatal, with the offsets.
    fs::write(&input, &kdump[..kdump.len() / 2]).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    let stderr = text(&o.stderr);
    assert_eq!(code(&o), 1, "{stderr}");
    assert!(
        stderr.contains("the file ends inside its page bitmaps"),
        "{stderr}"
    );

    // Truncated: the last stored pages (the region's) are cut off.
    for cut in [kdump.len() - 100, kdump.len() - 600] {
        fs::write(&input, &kdump[..cut]).unwrap();
        let o = csdump(&[
            "extract",
            input.to_str().unwrap(),
            "-o",
            tmp.path().join("o").to_str().unwrap(),
        ]);
        let c = code(&o);
        let stderr = text(&o.stderr);
        assert!(c == 1 || c == 3, "cut at {cut}: exit {c}: {stderr}");
        assert!(stderr.contains("page 0x"), "cut at {cut}: {stderr}");
        assert!(
            stderr.contains("truncated") || stderr.contains("past the end"),
            "cut at {cut}: {stderr}"
        );
    }

    // Corrupted compressed data of the last stored pages (the region's): named, no panic.
    let mut bad = kdump.clone();
    let n = bad.len();
    for i in (n - 400..n).step_by(7) {
        bad[i] ^= 0x5a;
    }
    fs::write(&input, &bad).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    let c = code(&o);
    let stderr = text(&o.stderr);
    assert!(c == 1 || c == 3, "exit {c}: {stderr}");
    assert!(stderr.contains("page 0x48"), "{stderr}");
    assert!(stderr.contains("does not decompress"), "{stderr}");

    // A flattened stream cut short, and one with a lying record header.
    let flat = flatten(&kdump);
    fs::write(&input, &flat[..flat.len() - 5000]).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    let stderr = text(&o.stderr);
    assert_ne!(code(&o), 0, "{stderr}");
    assert!(stderr.contains("flattened stream ends at byte"), "{stderr}");
    // Cut where nothing but the end marker is lost, so that the whole region survives: the
    // file is still named as cut, and the run is not clean (exit 3), whatever survived.
    for lost in [16, 8] {
        fs::write(&input, &flat[..flat.len() - lost]).unwrap();
        let (c, s, stderr) = info_json(&input);
        assert_eq!(c, 3, "{lost} bytes cut: {stderr}");
        assert!(
            stderr.contains("flattened stream ends at byte")
                && stderr.contains("without its end marker (truncated?)"),
            "{stderr}"
        );
        assert_eq!(s["commit"]["state"], "ok", "the region survived whole: {s}");
        assert!(!s["records"].as_array().unwrap().is_empty(), "{s}");
    }
    let mut liar = flat.clone();
    liar[4096 + 8..4096 + 16].copy_from_slice(&(1i64 << 40).to_be_bytes());
    fs::write(&input, &liar).unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    let stderr = text(&o.stderr);
    assert_eq!(code(&o), 1, "{stderr}");
    assert!(
        stderr.contains("file offset 0x1000: flattened record"),
        "{stderr}"
    );

    // Compressed by a tool csdump does not undo: named.
    fs::write(&input, b"\xfd7zXZ\0rest of an xz file").unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(
        text(&o.stderr).contains("xz-compressed file"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn device_dump_is_found_and_preferred() {
    let b = build_region(REGION_SIZE, 3000);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    // A no-map region: vmcoreinfo names it, the crash headers leave it out; the capture kernel
    // added it as a device dump, before the other notes (fs/proc/vmcore.c puts them first).
    let no_map = 0x7f00_0000;
    let mut notes = vec![
        vmcoredd_note("other_device", &[0xab; 5000]),
        vmcoredd_note("coresight_panic_dump", &b.bytes),
    ];
    notes.extend(vmcoreinfo_notes(no_map, REGION_SIZE as u64));
    let mem = memory(&[]);
    for bytes in [
        elf_of(&mem, &notes),
        kdump_of(&mem, &notes, Compress::Zlib, 31, &[]),
    ] {
        fs::write(&input, &bytes).unwrap();
        let (c, s, stderr) = info_json(&input);
        assert_eq!(c, 0, "{stderr}");
        assert_eq!(s["found_by"]["method"], "device-dump");
        assert_eq!(s["found_by"]["name"], "coresight_panic_dump");
        assert_eq!(
            s["found_by"]["size"],
            (64 + REGION_SIZE).next_multiple_of(4096) - 64
        );
        assert_eq!(s["records"][4]["length"], 3000);
        assert!(
            s["input_notes"]
                .to_string()
                .contains("not in the vmcore's memory"),
            "{}",
            s["input_notes"]
        );
        let out = tmp.path().join("out");
        let _ = fs::remove_dir_all(&out);
        let o = csdump(&[
            "extract",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0);
        assert_eq!(fs::read(out.join("04-sink-tmc_etf0.bin")).unwrap(), b.sink);
    }

    // Both: the region in memory (an older dump, say) and the device dump: the device dump wins.
    let old = build_region(REGION_SIZE, 100);
    let mem = memory(&old.bytes);
    let mut notes = vec![vmcoredd_note("coresight_panic_dump", &b.bytes)];
    notes.extend(vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64));
    fs::write(&input, elf_of(&mem, &notes)).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "device-dump");
    assert_eq!(s["records"][4]["length"], 3000);
    assert!(s["input_notes"]
        .to_string()
        .contains("also in the vmcore's memory"));

    // A device dump with a damaged header: said, and the region in memory is used.
    let mut broken = b.bytes.clone();
    broken[20] ^= 1;
    let mut notes = vec![vmcoredd_note("coresight_panic_dump", &broken)];
    notes.extend(vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64));
    fs::write(&input, elf_of(&mem, &notes)).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "vmcoreinfo");
    assert_eq!(s["records"][4]["length"], 100);
    assert!(stderr.contains("has no valid container header"), "{stderr}");

    // A device dump cut shorter than its container says: the parser names the truncation.
    let mut notes = vec![vmcoredd_note("coresight_panic_dump", &b.bytes[..0x2000])];
    notes.extend(vmcoreinfo_notes(no_map, REGION_SIZE as u64));
    let mut short = notes.remove(0);
    short.desc.truncate(44 + 0x2000);
    notes.insert(0, short);
    fs::write(&input, elf_of(&memory(&[]), &notes)).unwrap();
    let (c, _, stderr) = info_json(&input);
    assert_eq!(c, 1, "{stderr}");
    assert!(
        stderr.contains("holds 0x2000 bytes, its container says the region is 0x8000"),
        "{stderr}"
    );
}

#[test]
fn vmcoreinfo_is_not_trusted_over_the_container() {
    let b = build_region(REGION_SIZE, 3000);
    let mem = memory(&b.bytes);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");

    // A page off: no container there, the scan finds it.
    fs::write(
        &input,
        elf_of(
            &mem,
            &vmcoreinfo_notes(REGION_PADDR + PAGE, REGION_SIZE as u64),
        ),
    )
    .unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "scan-vmcore");
    assert_eq!(s["found_by"]["paddr"], REGION_PADDR);
    assert!(
        stderr.contains("CSPD_REGION_PADDR=0x48001000") && stderr.contains("scanning memory"),
        "{stderr}"
    );

    // A small vmcore whose vmcoreinfo claims a 1 GiB region: the container's size is used and
    // the disagreement said (benches/big_vmcore.rs prints csdump's peak memory on big inputs).
    fs::write(
        &input,
        elf_of(&mem, &vmcoreinfo_notes(REGION_PADDR, 1 << 30)),
    )
    .unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["container"]["region_size"], REGION_SIZE);
    assert!(
        stderr.contains(
            "vmcoreinfo says the region is 0x40000000 bytes, its container header says 0x8000"
        ),
        "{stderr}"
    );
}

/// A no-map device-tree region is outside the crash ELF headers: when the capture kernel did not
/// hand it over as a device dump, csdump fails and says what the capture kernel needs.
#[test]
fn a_region_outside_the_dump_without_a_device_dump_says_what_is_needed() {
    let b = build_region(REGION_SIZE, 3000);
    let mut mem = memory(&b.bytes);
    // The region's pages are not System RAM: not in any PT_LOAD, as for a no-map region.
    mem.ram.truncate(1);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(
        &input,
        elf_of(&mem, &vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64)),
    )
    .unwrap();
    let o = csdump(&["info", input.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(code(&o), 1, "{err}");
    assert!(
        err.contains("no coresight-panic-dump region found")
            && err.contains("is not in the dump")
            && err.contains("CONFIG_PROC_VMCORE_DEVICE_DUMP")
            && err.contains("device-tree node"),
        "{err}"
    );

    // With the device dump the capture kernel adds, the same vmcore gives the dump.
    let mut notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    notes.push(vmcoredd_note("coresight_panic_dump", &b.bytes));
    fs::write(&input, elf_of(&mem, &notes)).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "device-dump", "{s}");
}

#[test]
fn filtered_pages_read_as_zeros_and_are_listed() {
    // Pages the dump level drops from the second bitmap (cache, user, free pages): one in the
    // region (a region never has such pages, but the reader must not care why) and one outside.
    let b = build_region(REGION_SIZE, 700);
    let mem = memory(&b.bytes);
    let notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    let dropped = [REGION_PADDR / PAGE + 5, RAM / PAGE + 1];
    let kdump = kdump_of(&mem, &notes, Compress::Zlib, 31, &dropped);
    let core = csdump::vmcore::Vmcore::from_bytes(&kdump).unwrap();
    let r = core.read_phys_detailed(RAM + PAGE, 2 * PAGE).unwrap();
    assert_eq!(r.excluded, vec![RAM / PAGE + 1]);
    assert!(r.bytes[..PAGE as usize].iter().all(|&x| x == 0));
    // Not RAM at all: an error naming the page, not zeros.
    let e = core
        .read_phys_detailed(0x9000_0000, 8)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("page 0x90000 is not memory this dump holds"),
        "{e}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &kdump).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    let notes = s["input_notes"].to_string();
    assert!(
        notes.contains("1 of the region's 8 pages are not stored in the dump: makedumpfile's filter (dump level 31) excluded them"),
        "{notes}"
    );
    assert!(notes.contains("region offsets 0x5000"), "{notes}");
}

#[test]
fn mutated_compressed_and_flattened_dumps_never_crash() {
    // Every page compression, every part of the file: no panic, whatever lies.
    let b = build_region(REGION_SIZE, 900);
    let mem = memory(&b.bytes);
    let notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    let kdump = kdump_of(&mem, &notes, Compress::Zlib, 31, &[]);
    let mut dd_notes = vec![vmcoredd_note("coresight_panic_dump", &b.bytes)];
    dd_notes.extend(vmcoreinfo_notes(0x7f00_0000, REGION_SIZE as u64));
    let seeds = [
        kdump.clone(),
        kdump_of(&memory(&[]), &dd_notes, Compress::None, 0, &[]),
        flatten(&kdump),
        kdump_of(&mem, &notes, Compress::Lzo, 31, &[]),
        kdump_of(&mem, &notes, Compress::Snappy, 31, &[]),
        kdump_of(&mem, &notes, Compress::Zstd, 31, &[]),
    ];
    let mut rng = Rng(0x5eed_0018);
    for i in 0..3000 {
        let seed = &seeds[i % seeds.len()];
        let mut data = seed.clone();
        for _ in 0..1 + rng.below(8) {
            // Headers, sub-header and notes, bitmaps and descriptors, data: everywhere.
            let at = match rng.below(3) {
                0 => rng.below(data.len().min(4096)),
                1 => 4096 + rng.below(data.len().saturating_sub(4096).max(1)),
                _ => data.len() - 1 - rng.below(data.len().min(3000)),
            };
            data[at] = match rng.below(3) {
                0 => rng.next() as u8,
                1 => data[at] ^ (1 << rng.below(8)),
                _ => [0u8, 0xff, 0x7f, 0x80][rng.below(4)],
            };
        }
        if rng.below(6) == 0 {
            let keep = rng.below(data.len());
            data.truncate(keep);
        }
        // Selector 0: a dump (see `fuzz_entry`).
        csdump::fuzz_entry(&[&[0u8][..], &data].concat());
    }
}

#[test]
fn overlapping_pt_loads_as_kdump_writes_them() {
    // arm64 kdump's vmcore: a PT_LOAD for the kernel image inside the one for all of RAM.
    let b = build_region(REGION_SIZE, 1200);
    let ram = REGION_PADDR - RAM + 0x10_0000;
    let loads = vec![
        LoadSpec {
            paddr: RAM + 0x20_0000,
            size: 0x10_0000,
            chunks: vec![],
        },
        LoadSpec {
            paddr: RAM,
            size: ram,
            chunks: vec![(REGION_PADDR - RAM, b.bytes.clone())],
        },
    ];
    let elf = elf_core(&vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64), &loads);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    fs::write(&input, &elf).unwrap();
    let (c, s, stderr) = info_json(&input);
    assert_eq!(c, 0, "{stderr}");
    assert_eq!(s["found_by"]["method"], "vmcoreinfo");
    assert_eq!(s["records"][4]["length"], 1200);
    assert!(
        s["input_warnings"].as_array().unwrap().is_empty(),
        "{stderr}"
    );
}

/// Damage in the pages of every compression makedumpfile writes, and lying page descriptors,
/// are named by page: the data that does not decompress to exactly one page, the descriptor
/// whose size is larger than a block or whose data is past the end of the file.
#[test]
fn every_page_compression_names_its_damage() {
    let b = build_region(REGION_SIZE, 3000);
    let mem = memory(&b.bytes);
    let notes = vmcoreinfo_notes(REGION_PADDR, REGION_SIZE as u64);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("vmcore");
    for c in [
        Compress::Zlib,
        Compress::Lzo,
        Compress::Snappy,
        Compress::Zstd,
    ] {
        let kdump = kdump_of(&mem, &notes, c, 31, &[]);
        let core = csdump::vmcore::Vmcore::from_bytes(&kdump).unwrap();
        let want: Vec<u8> = (0..REGION_SIZE as u64 / PAGE)
            .flat_map(|i| mem.page(REGION_PADDR / PAGE + i))
            .collect();
        assert!(
            core.read_phys(REGION_PADDR, REGION_SIZE as u64).unwrap() == want,
            "{c:?}: the region does not read back"
        );
        // The last stored pages are the region's second to eighth (compressed).
        let mut bad = kdump.clone();
        let n = bad.len();
        for i in (n - 300..n).step_by(5) {
            bad[i] ^= 0xa5;
        }
        fs::write(&input, &bad).unwrap();
        let o = csdump(&["info", input.to_str().unwrap()]);
        let stderr = text(&o.stderr);
        let c_ = code(&o);
        assert!(c_ == 1 || c_ == 3, "{c:?}: exit {c_}: {stderr}");
        assert!(
            stderr.contains("page 0x4800")
                && stderr.contains("does not decompress to a 0x1000-byte page"),
            "{c:?}: {stderr}"
        );
    }
    // The page descriptors (header, sub-header and notes blocks, two bitmaps, then the table):
    // find the region's first page's descriptor by its data offset, and make it lie.
    // The region's first page as noise that does not compress: stored as is, one block.
    let mut noisy = memory(&b.bytes);
    let mut rng = Rng(0x5eed_0291);
    let noise: Vec<u8> = (0..PAGE).map(|_| rng.next() as u8).collect();
    noisy.pages.insert(REGION_PADDR / PAGE, noise);
    let kdump = kdump_of(&noisy, &notes, Compress::Lzo, 31, &[]);
    let core = csdump::vmcore::Vmcore::from_bytes(&kdump).unwrap();
    let region_page = core.read_phys(REGION_PADDR, PAGE).unwrap();
    let at = kdump
        .windows(region_page.len())
        .position(|w| w == region_page)
        .unwrap() as u64;
    let pd = kdump.chunks(8).position(|w| w == at.to_le_bytes()).unwrap() * 8;
    for (what, patch, want) in [
        (
            "size above a block",
            (pd + 8, 0x1001u32.to_le_bytes().to_vec()),
            "is corrupt: 0x1001 bytes, flags 0x0",
        ),
        (
            "compressed and uncompressed",
            (pd + 12, 0x3u32.to_le_bytes().to_vec()),
            "is corrupt: 0x1000 bytes, flags 0x3",
        ),
        (
            "data past the end",
            (pd, (kdump.len() as u64 - 10).to_le_bytes().to_vec()),
            "is past the end of the file",
        ),
    ] {
        let mut bad = kdump.clone();
        bad[patch.0..patch.0 + patch.1.len()].copy_from_slice(&patch.1);
        let core = csdump::vmcore::Vmcore::from_bytes(&bad).unwrap();
        let e = core.read_phys(REGION_PADDR, 64).unwrap_err().to_string();
        assert!(
            e.contains("page 0x48000 (physical 0x48000000) is damaged") && e.contains(want),
            "{what}: {e}"
        );
    }
}

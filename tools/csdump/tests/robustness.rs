//! The fuzz entry point over many pseudo-random and mutated inputs: it must never panic.

mod common;

use common::dumps;
use common::snapshots;
use common::*;
use cspd_format::PayloadType;
use cspd_format::RecordKind;
use cspd_format::CPU_NONE;
use cspd_format::RECORD_FLAG_RUNTIME;

const REGION_PADDR: u64 = 0x4800_0000;

fn seeds() -> Vec<Vec<u8>> {
    let b = build_region(0x2000, 700);
    let notes = [
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, 0x2000)),
    ];
    let loads = |cut: usize| {
        vec![
            LoadSpec {
                paddr: REGION_PADDR,
                size: cut as u64,
                chunks: vec![(0, b.bytes[..cut].to_vec())],
            },
            LoadSpec {
                paddr: REGION_PADDR + cut as u64,
                size: (b.bytes.len() - cut) as u64,
                chunks: vec![(0, b.bytes[cut..].to_vec())],
            },
        ]
    };
    let dump = |d: Vec<u8>| [vec![0u8], d].concat();
    let vmcore = elf_core(&notes, &loads(0x1000));
    let mut with_vmlinux = vec![2u8];
    with_vmlinux.extend_from_slice(&(b.bytes.len() as u32).to_le_bytes());
    with_vmlinux.extend_from_slice(&b.bytes);
    with_vmlinux.extend_from_slice(&elf_core(&[core_note()], &loads(0x900)));
    // What GDB sends to the GDB stub, from the handshake to reading the branch trace.
    let mut gdb = vec![3u8, b'+'];
    for p in [
        &b"qSupported:multiprocess+;swbreak+;xmlRegisters=i386"[..],
        b"QStartNoAckMode",
        b"qXfer:features:read:target.xml:0,ffb",
        b"?",
        b"qfThreadInfo",
        b"Hg4",
        b"g",
        b"Qbtrace:bts",
        b"qXfer:btrace:read:delta:0,ffb",
        b"qXfer:btrace:read:new:0,40",
        b"m2000,40",
        b"vCont;c",
        b"D",
    ] {
        csdump::gdb::rsp::write_packet(&mut gdb, p).unwrap();
    }
    let mut v = vec![
        dump(b.bytes.clone()),
        dump(vmcore.clone()),
        dump(elf_core(&[core_note()], &loads(0x900))),
        with_vmlinux,
        gdb,
    ];
    // Every vmcore format csdump reads: kdump-compressed with each page compression, flattened,
    // gzip'ed (a flattened one, as Debian's kdump-tools writes it through gzip, and an ELF one).
    let mem = dumps::memory(&b.bytes);
    let kdump_notes = [
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(dumps::REGION_PADDR, 0x2000)),
    ];
    for c in [
        dumps::Compress::Zlib,
        dumps::Compress::Lzo,
        dumps::Compress::Snappy,
        dumps::Compress::Zstd,
    ] {
        v.push(dump(dumps::kdump_of(&mem, &kdump_notes, c, 31, &[])));
    }
    let zlib = dumps::kdump_of(&mem, &kdump_notes, dumps::Compress::Zlib, 31, &[]);
    v.push(dump(dumps::flatten(&zlib)));
    v.push(dump(dumps::gzip(&dumps::flatten(&zlib))));
    v.push(dump(dumps::gzip(&vmcore)));
    v.push(dump(plain_kdump_vmcore()));
    // A real vmlinux (an ELF executable with the kernel text of an OpenCSD snapshot, its
    // symbols and the build ID of the dump built from the same snapshot, whose real trace the
    // report decodes against it): the first 96 KiB of its text, to stay under -max_len.
    if let Some(snap) = cspd_testdata::snapshot("juno-ret-stck") {
        let region = snapshots::dump_from_snapshot(&snap, 0);
        let image = std::fs::read(snap.join("kernel_dump.bin")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("vmlinux");
        snapshots::write_elf(
            &image[..96 << 10],
            0xFFFF_0000_0808_0000 - snapshots::KASLR,
            &path,
        );
        let mut real = vec![2u8];
        real.extend_from_slice(&(region.len() as u32).to_le_bytes());
        real.extend_from_slice(&region);
        real.extend_from_slice(&std::fs::read(&path).unwrap());
        v.push(real);
    }
    // A real snapshot (Juno, user space), packed as files for the snapshot reader.
    if let Some(dir) = cspd_testdata::snapshot("juno-uname-001") {
        let mut packed = vec![1u8];
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names {
            packed.extend_from_slice(format!("@@ {n}\n").as_bytes());
            packed.extend_from_slice(&std::fs::read(dir.join(&n)).unwrap());
            packed.push(b'\n');
        }
        // The last file ends at the end of the input.
        if packed.last() == Some(&b'\n') {
            packed.pop();
        }
        v.push(packed);
    }
    v
}

/// Plain kdump: a region committed while the kernel ran (an ETM's registers recorded at
/// enable, the sink not run) and the capture kernel's device dump with the sink's record, for
/// the reading of capture containers.
fn plain_kdump_vmcore() -> Vec<u8> {
    let mut w = DumpWriter::at_runtime(0x4000, BOOT_ID, &identity());
    w.register(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        1024,
    );
    let mut etm = cspd_format::etm4x::SavedState {
        cpu: 0,
        flags: cspd_format::etm4x::SAVED_REGS_VALID | cspd_format::etm4x::SAVED_PROGRAMMED,
        trcconfigr: 0x10C1,
        trctraceidr: 0x10,
        devarch: cspd_hw::etm4x::DEVARCH_ETMV4,
        ..Default::default()
    };
    etm.idr[0] = 0x28000EA1;
    etm.idr[1] = 0x4100F403;
    etm.idr[2] = 0x488;
    let mut b = vec![0u8; cspd_format::etm4x::SAVED_STATE_SIZE];
    etm.encode(&mut b).unwrap();
    w.add_flagged(
        RecordKind::Source,
        PayloadType::Etm4x,
        b"etm0",
        0,
        &b,
        RECORD_FLAG_RUNTIME,
    );
    let region = w.finish_flagged(RECORD_FLAG_RUNTIME);
    let trace: Vec<u8> = (0..512u32).map(|i| (i * 11) as u8).collect();
    let container = capture_container(b"tmc_etf0", PayloadType::Tmc, &tmc_payload(&trace));
    vmcore_with(
        &region,
        REGION_PADDR,
        vec![capture_note("tmc_etf0", &container)],
    )
}

/// The seeds of the fuzz target (written to `$CSPD_FUZZ_SEEDS` when set, for `make fuzz`):
/// every kind of input decodes far enough to reach its deepest reader.
#[test]
fn fuzz_seeds_reach_the_readers() {
    let seeds = seeds();
    assert_eq!(seeds.len(), 15, "a seed that needs test data is missing");
    // The plain kdump seed reaches the capture kernel's device dump, and its sink is read.
    let plain = seeds
        .iter()
        .filter(|s| s[0] == 0)
        .filter_map(|s| csdump::region::locate(&s[1..]).ok())
        .find(|l| !l.captures.is_empty())
        .expect("a seed with a capture kernel's device dump");
    assert_eq!(plain.captures[0].problem, None);
    let c = csdump::capture::Capture::from_dump(&plain).unwrap();
    assert_eq!(c.sinks.len(), 1);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // Every vmcore format is seeded, and each seed reads as that format.
    let formats: Vec<String> = seeds
        .iter()
        .filter(|s| s[0] == 0)
        .filter_map(|s| csdump::vmcore::Vmcore::from_bytes(&s[1..]).ok())
        .map(|c| c.format.to_string())
        .collect();
    for f in [
        "ELF vmcore",
        "kdump-compressed vmcore, zlib pages, dump level 31",
        "kdump-compressed vmcore, lzo pages, dump level 31",
        "kdump-compressed vmcore, snappy pages, dump level 31",
        "kdump-compressed vmcore, zstd pages, dump level 31",
        "kdump-compressed vmcore, zlib pages, dump level 31, flattened (makedumpfile -F)",
        "kdump-compressed vmcore, zlib pages, dump level 31, flattened (makedumpfile -F), gzip'ed",
        "ELF vmcore, gzip'ed",
    ] {
        assert!(
            formats.iter().any(|x| x == f),
            "no seed of {f}: {formats:?}"
        );
    }
    // The real vmlinux seed is an executable with the dump's build ID.
    let real = &seeds[seeds.len() - 2];
    assert_eq!(real[0], 2);
    let n = u32::from_le_bytes(real[1..5].try_into().unwrap()) as usize;
    let aligned = real[5 + n..].to_vec();
    let vmlinux = csdump::elf::Vmlinux::parse(&aligned).unwrap();
    let located = csdump::region::locate(&real[5..5 + n]).unwrap();
    let c = csdump::capture::Capture::from_dump(&located).unwrap();
    csdump::elf::check_build_id(&vmlinux, &c.kernel.build_id, c.kernel.release.as_deref()).unwrap();
    // The packed snapshot reads back as its files.
    let snap = seeds.last().unwrap();
    let files = csdump::snapshot_files(&snap[1..]);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"snapshot.ini") && names.contains(&"uname_trace.bin"),
        "{names:?}"
    );
    let trace = files
        .iter()
        .find(|(n, _)| n == "uname_trace.bin")
        .unwrap()
        .1;
    assert_eq!(trace.len(), 65536);
    if let Some(dir) = std::env::var_os("CSPD_FUZZ_SEEDS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
    for s in &seeds {
        csdump::fuzz_entry(s);
    }
}

#[test]
fn random_inputs_never_panic() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..3000 {
        let len = rng.below(2048);
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Give some of them a plausible start so the deeper parsers run.
        match rng.below(5) {
            0 if data.len() >= 9 => data[..9].copy_from_slice(b"\0CSPDUMP\0"),
            1 if data.len() >= 7 => data[..7].copy_from_slice(b"\0\x7fELF\x02\x01"),
            2 if data.len() >= 19 => data[..19].copy_from_slice(b"\x01@@ snapshot.ini\n[d"),
            3 if data.len() >= 2 => data[..2].copy_from_slice(b"\x03$"),
            _ => {}
        }
        csdump::fuzz_entry(&data);
    }
}

#[test]
fn mutated_inputs_never_panic() {
    let mut rng = Rng(0x5eed_0002);
    let seeds = seeds();
    for seed in seeds.iter().filter(|s| s[0] == 0) {
        // The seeds themselves are valid.
        let located = csdump::region::locate(&seed[1..]).unwrap();
        let report = csdump::info::analyze("seed", &located).unwrap();
        assert!(report.clean, "{:?}", report.problems);
    }
    for i in 0..4000 {
        let mut data = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(6) {
            let at = if rng.below(2) == 0 {
                // Headers are where lies hurt: hit the first 512 bytes often.
                rng.below(data.len().min(512))
            } else {
                rng.below(data.len())
            };
            match rng.below(3) {
                0 => data[at] = rng.next() as u8,
                1 => data[at] ^= 1 << rng.below(8),
                _ => {
                    let v = [0u8, 0xff, 0x7f, 0x80][rng.below(4)];
                    data[at] = v;
                }
            }
        }
        if rng.below(8) == 0 {
            let keep = rng.below(data.len());
            data.truncate(keep);
        }
        csdump::fuzz_entry(&data);
    }
}

/// An ELF vmcore the fuzzer found (`make fuzz`): two PT_NOTE headers over the same notes and a
/// load segment past them. Any reader must answer with an error, never a panic.
#[test]
fn fuzz_found_elf_vmcore_is_handled() {
    let data: &[u8] = &[
        0, 127, 69, 76, 70, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 183, 0, 1, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 56, 0,
        0, 0, 0, 0, 0, 64, 0, 56, 0, 3, 0, 64, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 232, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 156, 1, 0, 0, 0, 0, 0, 0, 156,
        1, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 99, 0, 0, 255, 255, 0, 0, 0, 72, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 9, 0,
        0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0,
        9, 0, 8, 0, 0, 255, 255, 0, 9, 0, 72, 0, 0, 0, 0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0,
        0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 5, 0, 62, 62, 62, 62, 62, 62, 62, 62, 3, 0, 64, 0, 0, 0,
        0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 232, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 156, 1, 0, 0, 0, 0, 0, 0, 156, 1, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1,
        0, 0, 0, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 255, 255, 0, 0, 0, 72, 0,
        0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 1, 0, 0,
        0, 7, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 9, 0, 8, 0, 0, 255, 255, 0, 9, 0, 72, 0, 0, 0,
        0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 5, 0, 62, 62,
        62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0,
    ];
    csdump::fuzz_entry(data);
    assert!(csdump::vmcore::Vmcore::from_bytes(&data[1..]).is_err());
}

/// Another input the fuzzer found: program headers of types no vmcore has, with garbage sizes.
#[test]
fn fuzz_found_elf_with_foreign_segments_is_refused() {
    let data = foreign_segments_input();
    csdump::fuzz_entry(data);
    assert!(csdump::vmcore::Vmcore::from_bytes(&data[1..]).is_err());
}

/// The input of [`fuzz_found_elf_with_foreign_segments_is_refused`] (selector byte first).
fn foreign_segments_input() -> &'static [u8] {
    &[
        0, 127, 69, 76, 70, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 183, 0, 1, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 3, 251, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 56, 0,
        16, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 173, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 16, 0, 8, 0, 0,
        255, 255, 0, 16, 0, 72, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0,
        16, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 136, 1, 0, 0, 1, 0, 0, 0, 67, 79, 82, 69, 0, 0, 0, 0,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 223, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204,
        204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 204, 11, 0, 0, 0, 113, 0,
        0, 0, 0, 0, 0, 0, 86, 77, 67, 79, 82, 69, 73, 78, 70, 79, 0, 0, 79, 83, 82, 69, 76, 69, 65,
        83, 69, 61, 54, 46, 51, 46, 48, 45, 99, 115, 112, 100, 45, 116, 101, 115, 116, 10, 80, 65,
        71, 69, 83, 73, 90, 69, 61, 52, 48, 57, 54, 10, 75, 69, 82, 78, 69, 76, 78, 85, 77, 66, 69,
        82, 255, 15, 0, 0, 0, 0, 0, 0, 41, 61, 80, 68, 95, 82, 69, 71, 73, 79, 78, 95, 80, 65, 68,
        68, 82, 61, 48, 120, 52, 56, 48, 48, 48, 48, 48, 48, 10, 67, 83, 80, 68, 95, 82, 69, 71,
        73, 79, 78, 95, 83, 73, 90, 69, 61, 48, 120, 50, 48, 48, 48, 10, 0, 0, 252, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]
}

/// An ELF the fuzzer found whose PT_NOTE declares 0xf2000228 bytes in a 637-byte file:
/// libkdumpfile allocated what the header declared (4 GiB, 15 s) before it failed. A note segment
/// cut by the end of the file is refused first, with its numbers.
#[test]
fn fuzz_found_elf_with_cut_notes_is_refused() {
    let data: &[u8] = &[
        0, 127, 69, 76, 70, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 183, 0, 1, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 157, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 56, 0,
        3, 0, 64, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 232, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 2, 0, 242, 0, 0, 0, 0, 40, 2, 0, 0, 0, 0, 0, 0, 4, 0,
        0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 255,
        255, 0, 0, 0, 72, 0, 0, 255, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 246, 0, 0, 0, 0, 0, 0, 0, 16,
        0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 16, 0, 8, 0, 0, 255,
        255, 0, 16, 0, 72, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0,
        0, 0, 0, 0, 0, 5, 0, 0, 0, 136, 1, 0, 0, 1, 0, 0, 0, 67, 79, 82, 69, 0, 0, 0, 0, 97, 97,
        97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97,
        97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97,
        97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97,
        97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 204, 204, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223,
        223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223, 223,
        223, 223, 0, 0, 0, 0, 144, 0, 0, 0, 144, 0, 0, 0, 104, 86, 243, 104, 0, 0, 0, 0, 16, 50,
        84, 118, 152, 186, 220, 254, 112, 104, 97, 115, 101, 115, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 160, 206, 14, 0, 0, 0, 0, 1, 0, 144, 0, 5,
        0, 0, 0, 160, 172, 185, 3, 0, 0, 0, 0, 64, 66, 15, 0, 0, 0, 0, 0, 189, 66, 15, 0, 0, 0, 0,
        0, 46, 69, 15, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 46, 69, 15, 0, 0, 0, 0, 0, 16, 74,
        15, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 16, 74, 15, 0, 0, 0, 0, 0, 99, 81, 15, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    csdump::fuzz_entry(data);
    let e = csdump::vmcore::Vmcore::from_bytes(&data[1..])
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("PT_NOTE at file offset 0xe8 declares 0xf2000228 bytes"),
        "{e}"
    );
}

/// Runs `csdump info` on `bytes` written to a file named `name`: the exit status (a signal, a
/// crash or a panic fails the test) and stderr.
fn info_on(name: &str, bytes: &[u8]) -> (i32, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_csdump"))
        .arg("info")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let code = o.status.code().unwrap_or_else(|| {
        panic!(
            "csdump info {name} was killed by a signal ({:?}): {stderr}",
            o.status
        )
    });
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack smashing"),
        "{name}: {stderr}"
    );
    (code, stderr, path.display().to_string())
}

/// A valid ELF vmcore with the region in its second PT_LOAD: the bytes, and the file offset of
/// that PT_LOAD's program header.
fn vmcore_with_region() -> (Vec<u8>, usize, usize) {
    let b = build_region(0x2000, 700);
    let notes = [
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, 0x2000)),
    ];
    let loads = [
        LoadSpec {
            paddr: REGION_PADDR - 0x10_0000,
            size: 0x4000,
            chunks: vec![(0, vec![0x5a; 0x4000])],
        },
        LoadSpec {
            paddr: REGION_PADDR,
            size: 0x2000,
            chunks: vec![(0, b.bytes.clone())],
        },
    ];
    let elf = elf_core(&notes, &loads);
    // The program headers (ELF64: e_phoff at 32, 56-byte entries); the second PT_LOAD.
    let phoff = u64::from_le_bytes(elf[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(elf[56..58].try_into().unwrap()) as usize;
    let loads: Vec<usize> = (0..phnum)
        .filter(|i| elf[phoff + 56 * i..][..4] == 1u32.to_le_bytes())
        .collect();
    assert_eq!(loads.len(), 2);
    let (index, _) = (loads[1], ());
    (elf, index, phoff + 56 * index)
}

/// The input that overflowed libkdumpfile 0.5.1's stack: a PT_LOAD whose p_filesz is 0xffffffffffffffff, in a file cut short.
/// libkdumpfile 0.5.1 overflowed its stack on it ("stack smashing detected" in the debug build,
/// SIGSEGV in the release one). csdump refuses it as unreadable (exit 1), naming the file, the
/// program header and what is wrong. `cargo test --release` runs the same on the release build.
#[test]
fn issue_29_pt_load_with_huge_filesz_in_a_cut_file_is_refused() {
    let (elf, index, ph) = vmcore_with_region();
    let (code, stderr, _) = info_on("vmcore", &elf);
    assert_eq!(code, 0, "the vmcore before the damage: {stderr}");
    let mut bad = elf.clone();
    bad[ph + 32..ph + 40].copy_from_slice(&u64::MAX.to_le_bytes());
    let offset = u64::from_le_bytes(bad[ph + 8..ph + 16].try_into().unwrap());
    bad.truncate(offset as usize + 0x800);
    let (code, stderr, path) = info_on("crasher.vmcore", &bad);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "csdump: error: {path}: file offset {ph:#x}: program header {index}: PT_LOAD at file offset {offset:#x} declares p_filesz 0xffffffffffffffff, more than its p_memsz 0x2000 (corrupt program header)"
        )),
        "{stderr}"
    );
    // The file-size check is not what catches it: the same header in a whole file.
    let mut whole = elf.clone();
    whole[ph + 32..ph + 40].copy_from_slice(&u64::MAX.to_le_bytes());
    let (code, stderr, _) = info_on("crasher-whole.vmcore", &whole);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("p_filesz 0xffffffffffffffff"), "{stderr}");
    // p_memsz as large too: the file range then runs past any file offset.
    let mut both = bad.clone();
    both[ph + 40..ph + 48].copy_from_slice(&u64::MAX.to_le_bytes());
    let (code, stderr, path) = info_on("crasher-memsz.vmcore", &both);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: file offset {ph:#x}: program header {index}: PT_LOAD"
        )) && (stderr.contains("past any file offset")
            || stderr.contains("wraps the address space")),
        "{stderr}"
    );
}

/// A PT_LOAD whose file image is larger than the file (a dump cut short), its size lying but
/// consistent: the region, in the intact part, survives; the run says the file is damaged and
/// which program header is cut (exit 3).
#[test]
fn a_cut_pt_load_with_the_region_intact_is_partly_readable() {
    let (elf, index, ph) = vmcore_with_region();
    let mut bad = elf.clone();
    let offset = u64::from_le_bytes(bad[ph + 8..ph + 16].try_into().unwrap());
    let huge = 1u64 << 40;
    bad[ph + 32..ph + 40].copy_from_slice(&huge.to_le_bytes());
    bad[ph + 40..ph + 48].copy_from_slice(&huge.to_le_bytes());
    let (code, stderr, path) = info_on("cut.vmcore", &bad);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "csdump: warning: {path}: program header {index}: PT_LOAD at file offset {offset:#x} declares 0x10000000000 bytes, the file has 0x2000 (truncated vmcore?)"
        )),
        "{stderr}"
    );
}

/// The last round's two inputs that crashed libkdumpfile, through the command: the documented
/// exit status for an unreadable input (1) and a message naming the file, the header and what is
/// wrong.
#[test]
fn the_last_rounds_libkdumpfile_crashers_are_refused_by_the_command() {
    // fuzz_found_elf_vmcore_is_handled's input: no program headers.
    let mut no_phdrs = elf_core(&[core_note()], &[]);
    no_phdrs[56..58].copy_from_slice(&0u16.to_le_bytes());
    let (code, stderr, path) = info_on("no-phdrs.vmcore", &no_phdrs);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: file offset 0x36: ELF header: 0 program headers of 56 bytes (e_phnum, e_phentsize)"
        )),
        "{stderr}"
    );
    // A section header table that is not whole in the file.
    let mut cut_sh = elf_core(&[core_note()], &[]);
    cut_sh[40..48].copy_from_slice(&0x10_0000u64.to_le_bytes());
    cut_sh[58..60].copy_from_slice(&64u16.to_le_bytes());
    cut_sh[60..62].copy_from_slice(&3u16.to_le_bytes());
    let (code, stderr, path) = info_on("cut-sections.vmcore", &cut_sh);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: file offset 0x28: ELF header: 3 section headers of 64 bytes at file offset 0x100000 are not a whole table in the file"
        )),
        "{stderr}"
    );
    // fuzz_found_elf_with_foreign_segments_is_refused's input, as the fuzzer left it.
    let data = foreign_segments_input();
    let (code, stderr, path) = info_on("foreign.vmcore", &data[1..]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: file offset 0x40: program header 0: type 0x7000000, not PT_LOAD or PT_NOTE (not a vmcore)"
        )),
        "{stderr}"
    );
}

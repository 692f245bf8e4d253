//! csdump's vmcore reader against libkdumpfile, its oracle: every page of a vmcore of every
//! format (ELF; kdump-compressed with zlib, lzo, snappy, zstd or no compression, at dump levels
//! 0 and 31, with pages filtered out; flattened; gzip'ed) reads the same in both, and is classed
//! the same (stored, filtered out, not memory). The e2e vmcores of real panics are compared by
//! `examples/vmcore_oracle.rs` (scripts/check_vmcores.py).

mod common;

use common::dumps::*;
use common::oracle;
use common::*;
use csdump::vmcore::Vmcore;

fn notes() -> Vec<NoteSpec> {
    vec![
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, REGION_SIZE as u64)),
    ]
}

/// Memory pages of [`memory`]'s machine.
fn ram_pages(mem: &Memory) -> u64 {
    mem.ram.iter().map(|&(_, n)| n).sum()
}

fn agree(name: &str, bytes: &[u8]) -> oracle::Agreed {
    let core = Vmcore::from_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let lib = core.dump_file().try_clone().unwrap();
    oracle::compare(&core, lib, 1 << 20).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_format_reads_as_libkdumpfile_reads() {
    let b = build_region(REGION_SIZE, 3000);
    let mut mem = memory(&b.bytes);
    // Pages of every kind: text, random bytes (that do not compress: stored as is), zeros.
    let mut rng = Rng(0x5eed_0029);
    let noise: Vec<u8> = (0..PAGE).map(|_| rng.next() as u8).collect();
    mem.pages.insert(RAM / PAGE + 7, noise);
    let mut half = vec![0u8; PAGE as usize];
    half[..2048].fill(0xa5);
    mem.pages.insert(RAM / PAGE + 8, half);
    let pages = ram_pages(&mem);
    let dropped = [REGION_PADDR / PAGE + 5, RAM / PAGE + 1, RAM / PAGE + 9];

    let elf = elf_of(&mem, &notes());
    assert_eq!(
        agree("ELF", &elf),
        oracle::Agreed {
            stored: pages,
            no_data: 0
        }
    );
    assert_eq!(agree("ELF, flattened", &flatten(&elf)).stored, pages);
    assert_eq!(agree("ELF, gzip'ed", &gzip(&elf)).stored, pages);

    for c in Compress::ALL {
        for (level, drop) in [(0, &[][..]), (31, &dropped[..])] {
            let kdump = kdump_of(&mem, &notes(), c, level, drop);
            let want = oracle::Agreed {
                stored: pages - drop.len() as u64,
                no_data: drop.len() as u64,
            };
            let name = format!("{c:?} pages, dump level {level}");
            assert_eq!(agree(&name, &kdump), want, "{name}");
            assert_eq!(agree(&format!("{name}, flattened"), &flatten(&kdump)), want);
            assert_eq!(
                agree(
                    &format!("{name}, flattened, gzip'ed"),
                    &gzip(&flatten(&kdump))
                ),
                want
            );
        }
    }
}

/// The oracle's checks can fail: a reader that gives other bytes, another VMCOREINFO or
/// another page class is caught.
#[test]
fn the_oracle_sees_a_difference() {
    let b = build_region(REGION_SIZE, 3000);
    let mem = memory(&b.bytes);
    let core = Vmcore::from_bytes(&kdump_of(&mem, &notes(), Compress::Zlib, 31, &[])).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let other = |bytes: &[u8]| {
        let p = tmp.path().join("other");
        std::fs::write(&p, bytes).unwrap();
        std::fs::File::open(&p).unwrap()
    };
    // Other bytes in one page of the region.
    let mut changed = b.bytes.clone();
    changed[0x1000 + 17] ^= 1;
    let e = oracle::compare(
        &core,
        other(&kdump_of(
            &memory(&changed),
            &notes(),
            Compress::Zlib,
            31,
            &[],
        )),
        1 << 20,
    )
    .unwrap_err();
    assert!(e.starts_with("page 0x48001: csdump stored"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    // A page filtered out in one, stored in the other.
    let e = oracle::compare(
        &core,
        other(&kdump_of(
            &mem,
            &notes(),
            Compress::Zlib,
            31,
            &[RAM / PAGE + 3],
        )),
        1 << 20,
    )
    .unwrap_err();
    assert!(
        e.contains("page 0x40003: csdump stored") && e.contains("libkdumpfile NoData"),
        "{e}"
    );
    // Another VMCOREINFO.
    let notes2 = vec![
        core_note(),
        vmcoreinfo_note(&vmcoreinfo_text(REGION_PADDR, 2 * REGION_SIZE as u64)),
    ];
    let e = oracle::compare(
        &core,
        other(&kdump_of(&mem, &notes2, Compress::Zlib, 31, &[])),
        1 << 20,
    )
    .unwrap_err();
    assert!(e.starts_with("VMCOREINFO: csdump"), "{e}");
    // A page that is memory in one and a hole in the other.
    let mut less = memory(&b.bytes);
    less.ram[0].1 -= 1;
    let e = oracle::compare(
        &core,
        other(&kdump_of(&less, &notes(), Compress::Zlib, 31, &[])),
        1 << 20,
    )
    .unwrap_err();
    assert!(e.contains("page 0x400ff: csdump"), "{e}");
}

//! The fuzz entry point over many pseudo-random and mutated inputs: it must never panic.

mod common;

use common::*;

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
    vec![
        b.bytes.clone(),
        elf_core(&notes, &loads(0x1000)),
        elf_core(&[core_note()], &loads(0x900)),
    ]
}

#[test]
fn random_inputs_never_panic() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..3000 {
        let len = rng.below(2048);
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Give some of them a plausible start so the deeper parsers run.
        match rng.below(4) {
            0 if data.len() >= 8 => data[..8].copy_from_slice(b"CSPDUMP\0"),
            1 if data.len() >= 6 => data[..6].copy_from_slice(b"\x7fELF\x02\x01"),
            _ => {}
        }
        csdump::fuzz_entry(&data);
    }
}

#[test]
fn mutated_inputs_never_panic() {
    let mut rng = Rng(0x5eed_0002);
    let seeds = seeds();
    for seed in &seeds {
        // The seeds themselves are valid.
        let located = csdump::region::locate(seed).unwrap();
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

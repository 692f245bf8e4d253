//! ETMv4 costs: the panic-time save against the model, and the trace generator's speed.

use std::hint::black_box;
use std::time::Instant;

use cspd_hw::etm4x::Etm4x;
use cspd_hw::etm4x::Interface;
use cspd_hw::etm4x::Timeout;
use cspd_hw::etm4x::TraceConfig;
use cspd_model::etm4x::Etm4xModel;
use cspd_model::etm4x_gen::generate_with;
use cspd_model::etm4x_gen::BranchKind;
use cspd_model::etm4x_gen::CodeImage;
use cspd_model::etm4x_gen::Decision;
use cspd_model::etm4x_gen::GenConfig;

fn tracing_model() -> Etm4xModel {
    let mut m = Etm4xModel::cortex_a53();
    let mut etm = Etm4x::new(&mut m, Interface::Mmio, Timeout::DEFAULT);
    let ids = etm.read_ids().unwrap();
    let cfg = TraceConfig::default_for(&ids, 0x10, true).unwrap();
    etm.enable(&cfg).unwrap();
    m
}

fn main() {
    // Panic-time save: accesses and host time per call.
    let iters = 20_000;
    let mut accesses = 0;
    let mut elapsed = 0.0;
    for _ in 0..iters {
        let mut m = tracing_model();
        m.set_os_locked(true);
        let before = m.stats();
        let t = Instant::now();
        let s = Etm4x::new(&mut m, Interface::Mmio, Timeout::DEFAULT).panic_save(0);
        elapsed += t.elapsed().as_secs_f64();
        black_box(s);
        let after = m.stats();
        accesses = (after.reads + after.writes) - (before.reads + before.writes);
    }
    println!(
        "etm4x panic_save: {accesses} register accesses, {:.0} ns per save (model)",
        elapsed / f64::from(iters) * 1e9
    );

    // Generator: a tight loop of a conditional branch, a call and a return.
    let base = 0xFFFF_8000_1000_0000u64;
    let words: [u32; 8] = [
        0x9100_0400, // add x0, x0, #1
        0x9400_0004, // bl +16
        0xB5FF_FFC2, // cbnz x2, -8
        0x17FF_FFFD, // b -12
        0xD503_201F, // nop
        0xD503_201F, // nop
        0xD65F_03C0, // ret
        0xD503_201F,
    ];
    let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let image = CodeImage { base, bytes: &code };
    let mut out = vec![0u8; 64 << 20];
    let mut n = 0u64;
    let mut left = 2_000_000u32;
    let t = Instant::now();
    let sum = generate_with(
        &image,
        base,
        |site| {
            left = left.checked_sub(1)?;
            Some(match site.kind {
                BranchKind::Conditional if left.checked_rem(3) == Some(0) => Decision::NotTaken,
                _ => Decision::Taken,
            })
        },
        &GenConfig {
            max_insns: u64::MAX,
            ..GenConfig::kernel()
        },
        &mut out,
        |_| n += 1,
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "etm4x_gen: {} ranges, {} instructions, {} bytes in {:.3} s: {:.1} M ranges/s, {:.1} MB/s, {:.2} bytes per branch",
        n,
        sum.insns,
        sum.bytes,
        secs,
        n as f64 / secs / 1e6,
        sum.bytes as f64 / secs / 1e6,
        sum.bytes as f64 / n as f64
    );
}

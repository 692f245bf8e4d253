//! Benchmark of the TMC panic drain (`cspd_hw::tmc::panic_drain`) and of perf's drain into the
//! AUX buffer (`cspd_hw::tmc::perf_drain`) against the register model.
//!
//! Prints, for several RAM sizes, the register accesses of each sequence (RRD reads and all
//! other accesses) and the drain throughput of the logic over the model.

use cspd_hw::tmc::panic_drain;
use cspd_hw::tmc::perf_drain;
use cspd_hw::tmc::TmcRecord;
use cspd_model::tmc::TmcModel;
use cspd_model::tmc::TmcModelConfig;
use cspd_model::tmc::RRD as TMC_RRD;
use std::time::Instant;

fn main() {
    panic();
    println!();
    perf();
}

/// perf's drain: one `update_buffer` of the ETF, the RAM half full, wrapped, or wrapped with an
/// AUX room of 16 KiB (the newest trace that fits).
fn perf() {
    println!(
        "perf drain into the AUX buffer\n{:>8} {:>8} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "rsz", "fill", "bytes", "rrd_reads", "others", "time_us", "MiB/s"
    );
    for rsz in [1024usize, 16 * 1024, 64 * 1024] {
        for case in ["half", "wrapped", "room16k"] {
            let fill = if case == "half" {
                rsz / 2
            } else {
                rsz * 2 + rsz / 3
            };
            let room = if case == "room16k" {
                16 * 1024
            } else {
                1 << 30
            };
            let words: Vec<u32> = (0..fill as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) >> 1)
                .collect();
            let iters = (4 * 1024 * 1024 / rsz).clamp(3, 200);
            let mut best = f64::MAX;
            let mut last = None;
            let mut aux = vec![0u32; rsz];
            for _ in 0..iters {
                let mut ram = vec![0u32; rsz];
                let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
                m.set_latencies(2, 3);
                cspd_hw::tmc::enable_circular(&mut m, 0).unwrap();
                m.push_raw_words(&words);
                m.reset_counts();
                let mut at = 0;
                let t = Instant::now();
                let d = perf_drain(&mut m, room, |w| {
                    aux[at % rsz] = w;
                    at += 1;
                });
                let dt = t.elapsed().as_secs_f64();
                std::hint::black_box(&aux);
                best = best.min(dt);
                let c = m.counts();
                last = Some((d.bytes, c.reads(TMC_RRD), c.total_except_rrd()));
            }
            let (bytes, rrd, others) = last.unwrap();
            println!(
                "{:>8} {:>8} {:>10} {:>10} {:>8} {:>12.1} {:>10.1}",
                rsz,
                case,
                bytes,
                rrd,
                others,
                best * 1e6,
                bytes as f64 / best / (1024.0 * 1024.0)
            );
        }
    }
}

/// The panic drain into a dump slot.
fn panic() {
    println!("panic drain into the dump slot");
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>8} {:>7} {:>12} {:>10}",
        "rsz", "fill", "words", "rrd_reads", "others", "delays", "time_us", "MiB/s"
    );
    for rsz in [1024usize, 4096, 16 * 1024, 64 * 1024, 256 * 1024] {
        for case in ["half", "wrapped", "trunc"] {
            let wrapped = case != "half";
            let fill = if wrapped { rsz * 2 + rsz / 3 } else { rsz / 2 };
            let words: Vec<u32> = (0..fill as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) >> 1)
                .collect();
            // "trunc": a slot for half the RAM, the newest half is kept (ring + rotate).
            let slot_words = if case == "trunc" { rsz / 2 } else { rsz };
            let mut slot = vec![0u8; TmcRecord::slot_len_for(slot_words as u32).unwrap()];
            let iters = (4 * 1024 * 1024 / rsz).clamp(3, 200);
            let mut best = f64::MAX;
            let mut last = None;
            for _ in 0..iters {
                let mut ram = vec![0u32; rsz];
                let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
                m.set_latencies(2, 3);
                cspd_hw::tmc::enable_circular(&mut m, 0).unwrap();
                m.push_raw_words(&words);
                m.reset_counts();
                let t = Instant::now();
                let s = panic_drain(&mut m, &mut slot).unwrap();
                let dt = t.elapsed().as_secs_f64();
                std::hint::black_box(&slot);
                best = best.min(dt);
                let c = m.counts();
                last = Some((
                    s.trace_len / 4,
                    c.reads(TMC_RRD),
                    c.total_except_rrd(),
                    c.delays,
                ));
            }
            let (w, rrd, others, delays) = last.unwrap();
            let mib_s = (w * 4) as f64 / best / (1024.0 * 1024.0);
            println!(
                "{:>8} {:>8} {:>10} {:>10} {:>8} {:>7} {:>12.1} {:>10.1}",
                rsz,
                case,
                w,
                rrd,
                others,
                delays,
                best * 1e6,
                mib_s
            );
        }
    }
}

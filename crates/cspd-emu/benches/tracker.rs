//! The tracker's cost per executed block, which the plugin pays on every block a traced vCPU
//! runs: with the drivers' default programming (everything traced), with three ViewInst stop
//! points spread around the code (the hardware stop at the crash path, never reached), and with
//! an include range whose bounds cut blocks. Prints nanoseconds per block.

use std::time::Instant;

use cspd_emu::etm::{AddrComparator, AddrRange, StartStop, TraceProgram, ViewEvent};
use cspd_emu::tracker::{self, TbInfo, Tracker, VectorBases};

const BASE: u64 = 0xFFFF_8000_1000_0000;
const BLOCKS: u64 = 64;
const ITERS: u64 = 20_000_000;

fn offset(from: u64, to: u64) -> u32 {
    (to.wrapping_sub(from) as i64 / 4) as u32
}

/// 64 blocks of five `NOP`s and a branch (`B` or `B.cond`) to the next, 0x40 apart.
fn blocks() -> Vec<&'static TbInfo> {
    (0..BLOCKS)
        .map(|i| {
            let start = BASE + i * 0x40;
            let next = BASE + ((i + 1) % BLOCKS) * 0x40;
            let last = start + 20;
            let mut words = vec![0xD503_201F; 5];
            words.push(if i % 2 == 0 {
                0x1400_0000 | (offset(last, next) & 0x03FF_FFFF)
            } else {
                0x5400_0000 | ((offset(last, next) & 0x7_FFFF) << 5)
            });
            let tb: &'static TbInfo = Box::leak(Box::new(TbInfo::new(start, &words).unwrap()));
            tb
        })
        .collect()
}

fn program() -> TraceProgram {
    TraceProgram {
        trace_id: 0x10,
        configr: 1,
        victlr: 0x201,
        exclude_el_ns: 0,
        exclude_el_s: 0,
        event: ViewEvent::True,
        started: true,
        start_stop: None,
        include: vec![],
        exclude: vec![],
        sync_period_bytes: 4096,
    }
}

fn run(name: &str, prog: TraceProgram, blocks: &[&'static TbInfo]) {
    let mut t = Tracker::new();
    t.start(prog, 4096, 0, Default::default());
    let vectors = VectorBases::default();
    let mut prev: Option<&'static TbInfo> = None;
    let mut bytes = 0;
    let t0 = Instant::now();
    for k in 0..ITERS {
        let tb = blocks[(k % BLOCKS) as usize];
        if let Some(p) = prev {
            tracker::learn(p, tb.start, &vectors);
        }
        t.exec(prev, tb, &vectors);
        if t.pending_bytes() >= 64 {
            bytes += t.take_bytes().len();
        }
        prev = Some(tb);
    }
    let ns = t0.elapsed().as_nanos() as f64 / ITERS as f64;
    println!("tracker, {name}: {ns:.1} ns per block ({bytes} trace bytes)");
}

fn main() {
    let blocks = blocks();
    let stop = |index: u8, addr: u64| AddrComparator {
        index,
        addr,
        exclude_el_ns: 0x4,
        exclude_el_s: 0xB,
    };
    for _ in 0..2 {
        run("everything traced", program(), &blocks);
        run(
            "three stop points around the code, never reached",
            TraceProgram {
                start_stop: Some(StartStop {
                    start: vec![],
                    stop: vec![
                        stop(0, BASE - 0x1000),
                        stop(1, BASE + 0x38),
                        stop(2, BASE + 0x10_0000),
                    ],
                }),
                ..program()
            },
            &blocks,
        );
        run(
            "an include range cutting two blocks",
            TraceProgram {
                include: vec![AddrRange {
                    pair: 0,
                    lo: BASE + 0x48,
                    hi: BASE + 0x3F0,
                    exclude_el_ns: 0,
                }],
                ..program()
            },
            &blocks,
        );
    }
}

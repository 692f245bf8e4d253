//! Times `csdump perf` and `csdump snapshot` output over a large synthetic dump (one 256 MiB
//! TMC sink, four ETMv4 sources) and prints MB/s of trace written. The dump is mapped from a
//! file, as csdump maps a vmcore; the trace is streamed from the mapping to the output files.

use std::fs;
use std::time::Instant;

use csdump::capture::Capture;
use cspd_format::etm4x::SavedState;
use cspd_format::*;

#[path = "../tests/common/mod.rs"]
mod common;
use common::tmc_payload;
use common::DumpWriter;

const TRACE: usize = 256 << 20;

fn build() -> Vec<u8> {
    let size = TRACE + (1 << 20);
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: bench",
        truncated: false,
    };
    let mut w = DumpWriter::new(size, [3; 16], &Identity::default(), &panic);
    let trace: Vec<u8> = (0..TRACE)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[3])
        .collect();
    let sink = tmc_payload(&trace);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &sink,
    );
    for cpu in 0..4u32 {
        let s = SavedState {
            cpu,
            flags: cspd_format::etm4x::SAVED_REGS_VALID,
            trcconfigr: 0x10C1,
            trctraceidr: 0x10 + 2 * cpu,
            devarch: cspd_hw::etm4x::DEVARCH_ETMV4,
            ..SavedState::default()
        };
        let mut b = vec![0u8; cspd_format::etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        w.add(RecordKind::Source, PayloadType::Etm4x, b"etm", cpu, &b);
    }
    w.finish()
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("dump.cspd");
    fs::write(&path, build()).unwrap();
    let file = fs::File::open(&path).unwrap();
    // SAFETY: the file is private to this benchmark and not written while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let mb = TRACE as f64 / 1e6;
    for round in 0..3 {
        let t = Instant::now();
        let located = csdump::region::locate(&map).unwrap();
        let cap = Capture::from_dump(&located).unwrap();
        let read = t.elapsed();
        let out = tmp.path().join(format!("perf{round}"));
        let t = Instant::now();
        let p = csdump::perf::write_perf(&cap, &out).unwrap();
        let perf = t.elapsed();
        assert_eq!(p.trace_bytes as usize, TRACE);
        let out = tmp.path().join(format!("snap{round}"));
        let t = Instant::now();
        csdump::snapshot::write_snapshot(&cap, &out, None).unwrap();
        let snap = t.elapsed();
        println!(
            "round {round}: read+check {:>7.1} ms ({:>7.0} MB/s); perf (cstrace.bin + perf.data, {} MB each) {:>7.1} ms ({:>6.0} MB/s); snapshot {:>7.1} ms ({:>6.0} MB/s)",
            read.as_secs_f64() * 1e3,
            mb / read.as_secs_f64(),
            TRACE >> 20,
            perf.as_secs_f64() * 1e3,
            2.0 * mb / perf.as_secs_f64(),
            snap.as_secs_f64() * 1e3,
            mb / snap.as_secs_f64()
        );
        let _ = fs::remove_dir_all(tmp.path().join(format!("perf{round}")));
        let _ = fs::remove_dir_all(tmp.path().join(format!("snap{round}")));
    }
}

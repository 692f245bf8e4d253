//! Times `csdump perf` and `csdump snapshot` output over a large synthetic dump (one 256 MiB
//! TMC sink, four ETMv4 sources) and prints MB/s of trace written. The dump is mapped from a
//! file, as csdump maps a vmcore; the trace is streamed from the mapping to the output files.

use std::fs;
use std::time::Instant;

use csdump::capture::Capture;
use cspd_format::*;
use cspd_hw::etm4x::SavedState;
use cspd_hw::tmc::TmcRecordHeader;
use cspd_hw::tmc::TMC_RECORD_HEADER_LEN;
use cspd_hw::tmc::TMC_RECORD_VERSION;

const TRACE: usize = 256 << 20;

fn build() -> Vec<u8> {
    let size = TRACE + (1 << 20);
    let mut r = vec![0u8; size];
    let ch = ContainerHeader::new(size as u64, [3; 16], 1);
    init_region(&mut r, &ch).unwrap();
    let add = |r: &mut Vec<u8>, kind, name: &[u8], data: &[u8]| {
        let mut h = RecordHeader::new(kind, name, data.len().next_multiple_of(8) as u32, ch.stamp);
        let off = append_record(r, &h).unwrap();
        h.status = RecordStatus::Ok;
        write_record(&mut r[off..], &h, data).unwrap();
    };
    let tmc = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        trace_len: TRACE as u32,
        ..TmcRecordHeader::default()
    };
    let mut sink = vec![0u8; TMC_RECORD_HEADER_LEN + TRACE];
    tmc.encode(&mut sink).unwrap();
    for (i, b) in sink[TMC_RECORD_HEADER_LEN..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2654435761).to_le_bytes()[3];
    }
    add(&mut r, RecordKind::Sink, b"tmc_etf0", &sink);
    for cpu in 0..4u32 {
        let s = SavedState {
            cpu,
            flags: cspd_hw::etm4x::SAVED_REGS_VALID,
            trcconfigr: 0x10C1,
            trctraceidr: 0x10 + 2 * cpu,
            devarch: cspd_hw::etm4x::DEVARCH_ETMV4,
            ..SavedState::default()
        };
        let mut b = vec![0u8; cspd_hw::etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        add(&mut r, RecordKind::Source, b"etm", &b);
    }
    write_commit(&mut r).unwrap();
    r
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

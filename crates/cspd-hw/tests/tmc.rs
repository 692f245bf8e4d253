//! The TMC hardware logic (`cspd_hw::tmc`) driven against the register-level model.

use cspd_hw::access::lock;
use cspd_hw::access::unlock;
use cspd_hw::access::RawFrame;
use cspd_hw::tmc::regs::TmcConfigType;
use cspd_hw::tmc::regs::DEVID;
use cspd_hw::tmc::*;

/// The registers and bits the tests look at in the model, from the TMC TRM (DDI 0461), written
/// independently of the driver's `register!` declarations.
mod arch {
    pub use cspd_model::tmc::{
        CTL as TMC_CTL, DEVID as CS_DEVID, FFCR as TMC_FFCR, MODE as TMC_MODE, RRD as TMC_RRD,
        RRP as TMC_RRP, STS as TMC_STS, TRG as TMC_TRG,
    };
    pub const TMC_STS_FULL: u32 = 1 << 0;
    pub const TMC_STS_TMCREADY: u32 = 1 << 2;
    pub const TMC_CTL_CAPTEN: u32 = 1 << 0;
    pub const TMC_MODE_CIRCULAR_BUFFER: u32 = 0;
    pub const TMC_MODE_HARDWARE_FIFO: u32 = 2;
    pub const TMC_FFSR_FTSTOPPED: u32 = 1 << 1;
    pub const TMC_FFCR_ENFT: u32 = 1 << 0;
    pub const TMC_FFCR_ENTI: u32 = 1 << 1;
    /// `EnFt | EnTI | FOnFlIn | FOnTrigEvt | TrigOnTrigIn`, what the C driver programs for a sink.
    pub const TMC_FFCR_SINK: u32 = 0x133;
}
use arch::*;
use cspd_model::tmc::RamStuck;
use cspd_model::tmc::TmcModel;
use cspd_model::tmc::TmcModelConfig;

const BARRIER: [u8; 16] = [
    0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F,
];

/// Bound on the non-`RRD` accesses of a drain whose device behaves (no poll runs long).
const OTHER_ACCESSES_BOUND: u64 = 32;

fn words_to_bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn pattern(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)) & 0x7FFF_FFFE)
        .collect()
}

fn with_barrier(mut b: Vec<u8>) -> Vec<u8> {
    if b.len() >= 16 {
        b[..16].copy_from_slice(&BARRIER);
    }
    b
}

/// A file of the OpenCSD test snapshots (see `cspd_testdata`); `None` after saying so (a
/// failure under CI) when it is not there.
fn testdata(rel: &str) -> Option<Vec<u8>> {
    let path = cspd_testdata::opencsd_dir().join(rel);
    match std::fs::read(&path) {
        Ok(d) => Some(d),
        Err(e) => {
            cspd_testdata::missing(&format!("{} not readable: {e}", path.display()));
            None
        }
    }
}

/// Drains into a slot of `slot_len` bytes and parses the record back.
fn drain_into(m: &mut TmcModel<'_>, slot_len: usize) -> (DrainSummary, TmcRecordHeader, Vec<u8>) {
    let mut slot = vec![0xA5u8; slot_len];
    let s = panic_drain(m, &mut slot).expect("slot holds a header");
    let (h, trace) = TmcRecord::parse(&slot[..s.record_len]).expect("record parses");
    assert_eq!(h.outcome(), Some(s.outcome));
    assert_eq!(h.flags, s.flags);
    assert_eq!(trace.len(), s.trace_len);
    (s, h, trace.to_vec())
}

fn full_slot(rsz: usize) -> usize {
    TmcRecord::slot_len_for(rsz as u32).unwrap()
}

#[test]
fn enable_programs_a_circular_buffer_sink_and_locks() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0x40).unwrap();
    assert!(m.is_locked(), "locked again");
    assert!(m.is_capturing());
    assert_eq!(m.read32(TMC_MODE), TMC_MODE_CIRCULAR_BUFFER);
    assert_eq!(m.read32(TMC_FFCR), TMC_FFCR_SINK);
    assert_eq!(m.read32(TMC_TRG), 0x40);
    assert_eq!(m.read32(TMC_CTL), TMC_CTL_CAPTEN);
    let devid = DEVID::from_raw(m.read32(CS_DEVID));
    assert_eq!(devid.configtype(), TmcConfigType::Etf);
    assert_eq!(devid.memwidth_words(), 1);

    disable(&mut m).unwrap();
    assert!(m.is_locked());
    assert_eq!(m.read32(TMC_CTL), 0);
}

#[test]
fn enable_fails_bounded_when_never_ready() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.set_fault_never_ready(true);
    // Stop: the TMC is no longer ready, and a new enable must give up within the bound.
    unlock(&mut m);
    assert_eq!(flush_and_stop(&mut m).result(), Err(TmcError::NotReady));
    lock(&mut m);
    m.reset_counts();
    assert_eq!(wait_ready(&mut m), Err(TmcError::NotReady));
    assert_eq!(m.counts().delays, TMC_POLL_TRIES);
    assert_eq!(m.counts().reads(TMC_STS), TMC_POLL_TRIES + 1);
}

#[test]
fn hw_fifo_link_enable() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_hw_fifo(&mut m).unwrap();
    assert_eq!(m.read32(TMC_MODE), TMC_MODE_HARDWARE_FIFO);
    assert_eq!(m.read32(TMC_FFCR), TMC_FFCR_ENFT | TMC_FFCR_ENTI);
    // A FIFO link holds no trace to dump.
    let (s, h, trace) = drain_into(&mut m, 4096);
    assert_eq!(s.outcome, TmcOutcome::NotCircularBuffer);
    assert_eq!(h.mode, TMC_MODE_HARDWARE_FIFO);
    assert!(trace.is_empty());
    assert_eq!(m.counts().reads(TMC_RRD), 0);
    assert!(m.is_locked());
}

#[test]
fn drain_empty_buffer() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, full_slot(1024));
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert!(trace.is_empty());
    assert_eq!(h.words_read, 0);
    assert_eq!(h.rsz, 1024);
    assert_eq!(h.ctl, TMC_CTL_CAPTEN);
    assert_eq!(h.ffcr, TMC_FFCR_SINK);
    assert_ne!(h.ffsr & TMC_FFSR_FTSTOPPED, 0);
    assert_ne!(h.sts & TMC_STS_TMCREADY, 0);
    assert_eq!(
        m.counts().reads(TMC_RRD),
        1,
        "only the read that finds it empty"
    );
    assert!(m.is_locked(), "locked when done");
    assert_eq!(m.read32(TMC_CTL), 0, "capture disabled when done");
}

#[test]
fn drain_partly_filled_buffer() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(300, 1);
    m.push_raw_words(&words);
    let (s, h, trace) = drain_into(&mut m, full_slot(1024));
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert_eq!(
        s.flags & (TMC_REC_WRAPPED | TMC_REC_BARRIER | TMC_REC_TRUNCATED),
        0
    );
    assert_eq!(trace, words_to_bytes(&words));
    assert_eq!(h.rrp, 0);
    assert_eq!(h.rwp, 300 * 4);
    assert_eq!(h.words_read, 300);
    assert_eq!(h.trace_len, 1200);
}

#[test]
fn drain_formatter_output_with_padding() {
    let mut ram = vec![0u32; 256];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_trace(0x10, &[0x11; 20]);
    m.push_trace(0x12, &[0x22; 7]);
    // The flush pads the last frame; before it, RAM holds only the complete frames.
    let held_before = m.words_held();
    let (s, _h, trace) = drain_into(&mut m, full_slot(256));
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert_eq!(held_before, 4, "one complete frame before the flush");
    assert_eq!(
        trace.len(),
        32,
        "two frames after the flush padded the second"
    );
    assert_eq!(&trace[..16], &words_to_bytes(&m.ram()[..4])[..]);
}

#[test]
fn drain_wrapped_buffer_starts_at_rwp_with_barrier() {
    let rsz = 1024;
    let mut ram = vec![0u32; rsz];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(rsz * 2 + 100, 7);
    m.push_raw_words(&words);
    let (s, h, trace) = drain_into(&mut m, full_slot(rsz));
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert!(h.has(TMC_REC_WRAPPED | TMC_REC_BARRIER));
    assert!(!h.has(TMC_REC_TRUNCATED));
    assert_ne!(h.sts & TMC_STS_FULL, 0);
    assert_eq!(h.rwp, 100 * 4);
    assert_eq!(h.rrp, h.rwp, "oldest word at RWP");
    let newest = &words[words.len() - rsz..];
    assert_eq!(trace, with_barrier(words_to_bytes(newest)));
}

#[test]
fn real_trace_juno() {
    for rel in [
        "juno-ret-stck/cstrace.bin",
        "juno-uname-001/uname_trace.bin",
    ] {
        let Some(data) = testdata(rel) else { continue };
        let file_words = data.len() / 4;
        for rsz in [file_words * 2, file_words, 1024] {
            let mut ram = vec![0u32; rsz];
            let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
            enable_circular(&mut m, 0).unwrap();
            assert_eq!(m.load_formatted(&data), data.len());
            m.reset_counts();
            let (s, h, trace) = drain_into(&mut m, full_slot(rsz));
            assert_eq!(s.outcome, TmcOutcome::Complete, "{rel} rsz {rsz}");
            if rsz > file_words {
                assert_eq!(trace, data, "{rel}: the whole file, byte-exact");
                assert!(!h.has(TMC_REC_WRAPPED));
            } else {
                // The part that fits: the newest RSZ words, oldest first, barrier in front.
                let tail = data[data.len() - rsz * 4..].to_vec();
                assert_eq!(trace, with_barrier(tail), "{rel} rsz {rsz}");
                assert!(h.has(TMC_REC_WRAPPED | TMC_REC_BARRIER));
            }
            let words = trace.len() as u32 / 4;
            assert_eq!(m.counts().reads(TMC_RRD), words + 1);
            assert!(m.counts().total_except_rrd() <= OTHER_ACCESSES_BOUND);
        }
    }
}

#[test]
fn access_counts_independent_of_rsz() {
    let mut others = Vec::new();
    for rsz in [1024usize, 16 * 1024, 64 * 1024] {
        for fill in [rsz / 3, rsz + rsz / 2] {
            let mut ram = vec![0u32; rsz];
            let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
            m.set_latencies(3, 4);
            enable_circular(&mut m, 0).unwrap();
            m.push_raw_words(&pattern(fill, 3));
            m.reset_counts();
            let (s, h, trace) = drain_into(&mut m, full_slot(rsz));
            assert_eq!(s.outcome, TmcOutcome::Complete);
            let words = fill.min(rsz) as u32;
            assert_eq!(h.words_read, words);
            assert_eq!(trace.len(), words as usize * 4);
            assert_eq!(
                m.counts().reads(TMC_RRD),
                words + 1,
                "one RRD read per word + end"
            );
            assert_eq!(m.counts().writes(TMC_RRD), 0);
            assert_eq!(m.counts().writes(TMC_RRP), 0, "RRP is never written");
            assert_eq!(m.counts().delays, 3 + 4);
            assert_eq!((h.flush_delays, h.ready_delays), (3, 4));
            others.push(m.counts().total_except_rrd());
        }
    }
    assert!(others.iter().all(|&n| n == others[0]), "{others:?}");
    assert!(others[0] <= OTHER_ACCESSES_BOUND, "{others:?}");
}

#[test]
fn fault_never_ready() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(100, 5));
    m.set_fault_never_ready(true);
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, full_slot(1024));
    assert_eq!(s.outcome, TmcOutcome::ReadyTimeout);
    assert_eq!(s.outcome.to_string(), "ready_timeout");
    assert!(h.has(TMC_REC_READY_TIMEOUT));
    assert!(!h.has(TMC_REC_FLUSH_TIMEOUT));
    assert_eq!(h.ready_delays, TMC_POLL_TRIES);
    assert_eq!(m.counts().delays, TMC_POLL_TRIES);
    assert_eq!(h.sts & TMC_STS_TMCREADY, 0);
    // Not in Stopped state: RRD reads as empty at once, nothing drained.
    assert_eq!(m.counts().reads(TMC_RRD), 1);
    assert!(trace.is_empty());
    assert!(m.counts().total_except_rrd() <= u64::from(TMC_POLL_TRIES) + OTHER_ACCESSES_BOUND);
    assert!(m.is_locked());
}

#[test]
fn fault_flush_never_completes() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(100, 5));
    m.set_fault_flush_stuck(true);
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, full_slot(1024));
    assert_eq!(s.outcome, TmcOutcome::FlushTimeout);
    assert!(h.has(TMC_REC_FLUSH_TIMEOUT | TMC_REC_READY_TIMEOUT));
    assert_eq!(
        (h.flush_delays, h.ready_delays),
        (TMC_POLL_TRIES, TMC_POLL_TRIES)
    );
    assert_eq!(m.counts().delays, 2 * TMC_POLL_TRIES);
    // Entry, the read-modify-write, then the bounded poll.
    assert_eq!(m.counts().reads(TMC_FFCR), 2 + TMC_POLL_TRIES + 1);
    assert!(trace.is_empty());
    assert!(m.counts().total_except_rrd() <= 2 * u64::from(TMC_POLL_TRIES) + OTHER_ACCESSES_BOUND);
}

#[test]
fn fault_ram_read_stuck() {
    for kind in [RamStuck::SameWord, RamStuck::NeverEmpty] {
        let rsz = 1024;
        let mut ram = vec![0u32; rsz];
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
        enable_circular(&mut m, 0).unwrap();
        let words = pattern(100, 9);
        m.push_raw_words(&words);
        m.set_fault_ram_stuck(Some(kind));
        m.reset_counts();
        let (s, h, trace) = drain_into(&mut m, full_slot(rsz));
        assert_eq!(s.outcome, TmcOutcome::RamReadStuck, "{kind:?}");
        assert!(h.has(TMC_REC_RAM_STUCK));
        assert_eq!(m.counts().reads(TMC_RRD), rsz as u32 + 1, "bounded by RSZ");
        assert_eq!(h.words_read, rsz as u32, "how far it got");
        assert_eq!(trace.len(), rsz * 4);
        assert_eq!(&trace[..4], &words[0].to_le_bytes(), "{kind:?}");
        assert!(m.counts().total_except_rrd() <= OTHER_ACCESSES_BOUND);
        assert!(m.is_locked());
    }
}

#[test]
fn fault_lock_stuck() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(8, 1));
    m.set_fault_lock_stuck(true);
    let (s, h, trace) = drain_into(&mut m, 4096);
    assert_eq!(s.outcome, TmcOutcome::Locked);
    assert_eq!(h.ctl, TMC_CTL_CAPTEN, "registers still recorded");
    assert!(trace.is_empty());
    assert_eq!(m.counts().reads(TMC_RRD), 0);
}

#[test]
fn not_enabled_reads_nothing() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    let (s, h, trace) = drain_into(&mut m, 4096);
    assert_eq!(s.outcome, TmcOutcome::NotEnabled);
    assert_eq!(h.rsz, 64);
    assert!(trace.is_empty());
    assert_eq!(
        m.counts().reads(TMC_RRD),
        0,
        "Disabled RRD never ends: not read"
    );
}

#[test]
fn already_stopped_formatter_is_not_flushed() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(12, 2);
    m.push_raw_words(&words);
    unlock(&mut m);
    flush_and_stop(&mut m).result().unwrap();
    lock(&mut m);
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, 4096);
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert!(h.has(TMC_REC_FLUSH_SKIPPED));
    assert_eq!(m.counts().writes(TMC_FFCR), 0);
    assert_eq!(trace, words_to_bytes(&words));
}

#[test]
fn slot_smaller_than_ram_keeps_the_newest_words() {
    let rsz = 4096;
    for fill in [rsz / 2, rsz * 3 / 2] {
        let mut ram = vec![0u32; rsz];
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
        enable_circular(&mut m, 0).unwrap();
        let words = pattern(fill, 11);
        m.push_raw_words(&words);
        m.reset_counts();
        // Room for 1000 words and 2 bytes: whole frames only, 1000 words.
        let (s, h, trace) = drain_into(&mut m, TMC_RECORD_HEADER_LEN + 4002);
        assert_eq!(s.outcome, TmcOutcome::Truncated, "fill {fill}");
        assert!(h.has(TMC_REC_TRUNCATED | TMC_REC_BARRIER | TMC_REC_RSZ_CLAMPED));
        let held = fill.min(rsz);
        assert_eq!(h.words_read as usize, held, "fill {fill}");
        assert_eq!(
            m.counts().reads(TMC_RRD) as usize,
            held + 1,
            "every word the RAM held, then the empty marker"
        );
        assert_eq!(h.words_dropped as usize, held - 1000, "the oldest, dropped");
        // The newest words the slot holds, the last ones written before the stop, oldest first
        // (after a wrap too: the ring in the slot is rotated back).
        let newest = &words[fill - 1000..fill];
        assert_eq!(trace, with_barrier(words_to_bytes(newest)), "fill {fill}");
    }
}

#[test]
fn slot_that_holds_all_the_trace_is_complete_without_reading_on() {
    // RSZ 4096, 1000 words of room, 600 held: all read, the marker seen, complete.
    let mut ram = vec![0u32; 4096];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(600, 2);
    m.push_raw_words(&words);
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, TMC_RECORD_HEADER_LEN + 4000);
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert!(h.has(TMC_REC_RSZ_CLAMPED) && !h.has(TMC_REC_TRUNCATED));
    assert_eq!(m.counts().reads(TMC_RRD), 601);
    assert_eq!(trace, words_to_bytes(&words));
    // Exactly as many held as the slot takes: read, and nothing read after them.
    let mut ram = vec![0u32; 4096];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(1000, 3);
    m.push_raw_words(&words);
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, TMC_RECORD_HEADER_LEN + 4000);
    assert_eq!(s.outcome, TmcOutcome::Complete);
    assert_eq!((h.words_read, h.words_dropped), (1000, 0));
    assert_eq!(
        m.counts().reads(TMC_RRD),
        1001,
        "the words, then the empty marker"
    );
    assert_eq!(trace, words_to_bytes(&words));
}

#[test]
fn stuck_ram_read_with_a_small_slot_stops_at_rsz() {
    let rsz = 1024;
    let mut ram = vec![0u32; rsz];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(100, 9));
    m.set_fault_ram_stuck(Some(RamStuck::NeverEmpty));
    m.reset_counts();
    let (s, h, _) = drain_into(&mut m, TMC_RECORD_HEADER_LEN + 256 * 4);
    assert_eq!(
        m.counts().reads(TMC_RRD) as usize,
        rsz + 1,
        "bounded by RSZ"
    );
    assert_eq!(h.words_read as usize, rsz);
    // RSZ words and still no empty marker: the read is stuck.
    assert_eq!(s.outcome, TmcOutcome::RamReadStuck);
    assert!(h.has(TMC_REC_RAM_STUCK) && !h.has(TMC_REC_TRUNCATED));
}

#[test]
fn slot_without_room_for_the_header() {
    let mut ram = vec![0u32; 64];
    let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.reset_counts();
    let mut slot = [0u8; TMC_RECORD_HEADER_LEN - 1];
    assert_eq!(
        panic_drain(&mut m, &mut slot),
        Err(TmcRecordError::TooShort)
    );
    assert_eq!(m.counts().total_reads() + m.counts().total_writes(), 0);
    // Room for the header only: everything truncated, registers recorded.
    let (s, h, trace) = drain_into(&mut m, TMC_RECORD_HEADER_LEN);
    assert_eq!(
        s.outcome,
        TmcOutcome::Complete,
        "empty buffer loses nothing"
    );
    assert!(trace.is_empty());
    assert_eq!(h.rsz, 64);
}

#[test]
fn wide_memory_keeps_whole_memory_words() {
    let rsz = 1024;
    let mut ram = vec![0u32; rsz];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    m.set_memwidth_code(5); // 256-bit: 8 words
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(rsz, 4);
    m.push_raw_words(&words);
    // 1004 words of room: kept in multiples of 8 words, the newest.
    m.reset_counts();
    let (s, h, trace) = drain_into(&mut m, TMC_RECORD_HEADER_LEN + 1004 * 4);
    assert_eq!(s.outcome, TmcOutcome::Truncated);
    assert_eq!(trace, with_barrier(words_to_bytes(&words[24..])));
    assert_eq!(m.counts().reads(TMC_RRD) as usize, rsz + 1);
    assert_eq!(h.words_dropped, 24);
}

#[test]
fn record_round_trip_and_parse_errors() {
    let h = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        outcome_code: TmcOutcome::RamReadStuck.code(),
        flags: TMC_REC_WRAPPED | TMC_REC_RAM_STUCK,
        rsz: 0x4000,
        sts: 0x1D,
        ctl: 1,
        mode: 0,
        ffcr: 0x1133,
        ffsr: 2,
        rrp: 0x100,
        rwp: 0x100,
        devid: 0x280,
        authstatus: 0x33,
        trace_len: 8,
        words_read: 2,
        words_dropped: 0,
        flush_delays: 3,
        ready_delays: 4,
    };
    let mut buf = vec![0u8; TMC_RECORD_HEADER_LEN + 8];
    h.encode(&mut buf).unwrap();
    buf[TMC_RECORD_HEADER_LEN..].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let (g, trace) = TmcRecord::parse(&buf).unwrap();
    assert_eq!(g, h);
    assert_eq!(trace, &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&buf[..4], b"TMCD");
    assert_eq!(
        u16::from_le_bytes([buf[6], buf[7]]) as usize,
        TMC_RECORD_HEADER_LEN
    );
    assert_eq!(g.outcome().unwrap().name(), "ram_read_stuck");

    assert_eq!(TmcRecord::parse(&buf[..10]), Err(TmcRecordError::TooShort));
    assert!(matches!(
        TmcRecord::parse(&buf[..TMC_RECORD_HEADER_LEN + 7]),
        Err(TmcRecordError::TraceLenOutOfBounds {
            trace_len: 8,
            available: 7
        })
    ));
    let mut bad = buf.clone();
    bad[0] ^= 1;
    assert_eq!(TmcRecord::parse(&bad), Err(TmcRecordError::BadMagic));
    let mut bad = buf.clone();
    bad[4] = 9;
    assert_eq!(TmcRecord::parse(&bad), Err(TmcRecordError::BadVersion(9)));
    // Version 1 (the oldest words kept) has the same layout and is read; 0 is not a version.
    let mut v1 = buf.clone();
    v1[4] = 1;
    assert_eq!(TmcRecord::parse(&v1).map(|(h, _)| h.version), Ok(1));
    let mut bad = buf.clone();
    bad[4] = 0;
    assert_eq!(TmcRecord::parse(&bad), Err(TmcRecordError::BadVersion(0)));
    let mut bad = buf.clone();
    bad[6] = 8;
    assert_eq!(TmcRecord::parse(&bad), Err(TmcRecordError::BadHeaderLen(8)));
    let mut huge = buf.clone();
    huge[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(TmcRecord::parse(&huge).is_err());
    // Unknown outcome codes parse, and are reported as unknown.
    let mut newer = buf.clone();
    newer[8] = 200;
    assert_eq!(TmcRecord::parse(&newer).unwrap().0.outcome(), None);
    assert!(h.encode(&mut [0u8; 10]).is_none());
}

#[test]
fn outcome_codes_are_stable_and_named() {
    let all = [
        (TmcOutcome::Complete, 0, "complete"),
        (TmcOutcome::NotEnabled, 1, "not_enabled"),
        (TmcOutcome::NotCircularBuffer, 2, "not_circular_buffer"),
        (TmcOutcome::Locked, 3, "locked"),
        (TmcOutcome::FlushTimeout, 4, "flush_timeout"),
        (TmcOutcome::ReadyTimeout, 5, "ready_timeout"),
        (TmcOutcome::RamReadStuck, 6, "ram_read_stuck"),
        (TmcOutcome::Truncated, 7, "truncated"),
    ];
    for (o, code, name) in all {
        assert_eq!(o.code(), code);
        assert_eq!(TmcOutcome::from_code(code), Some(o));
        assert_eq!(format!("{o}"), name);
    }
    assert_eq!(TmcOutcome::from_code(8), None);
}

/// Runs [`perf_drain`] for an AUX buffer with `room` bytes free and returns what it handed over.
fn perf_into(m: &mut TmcModel<'_>, room: usize) -> (PerfDrain, Vec<u8>) {
    let mut out = Vec::new();
    let d = perf_drain(m, room, |w| out.extend_from_slice(&w.to_le_bytes()));
    assert_eq!(
        d.bytes,
        out.len(),
        "the bytes said are the bytes handed over"
    );
    (d, out)
}

#[test]
fn perf_drain_hands_over_a_partly_filled_ram_in_order() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(300, 11);
    m.push_raw_words(&words);
    m.reset_counts();
    let (d, out) = perf_into(&mut m, 64 * 1024);
    assert!(!d.lost);
    assert_eq!(d.stop.result(), Ok(()));
    assert_eq!(out, words_to_bytes(&words));
    assert_eq!(
        m.counts().reads(TMC_RRD),
        300,
        "one RRD read per word, no more"
    );
    assert_eq!(m.counts().writes(TMC_RRP), 0, "RRP is left where it is");
    assert!(m.is_locked(), "locked when done");
    assert_eq!(
        m.read32(TMC_CTL),
        TMC_CTL_CAPTEN,
        "CTL is the sink disable's to clear"
    );
    assert!(m.counts().total_except_rrd() <= OTHER_ACCESSES_BOUND);
}

#[test]
fn perf_drain_of_a_wrapped_ram_starts_with_the_barrier() {
    let rsz = 1024;
    let mut ram = vec![0u32; rsz];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(rsz * 2 + 100, 5);
    m.push_raw_words(&words);
    let (d, out) = perf_into(&mut m, 64 * 1024);
    assert!(d.lost, "a wrapped RAM lost its oldest trace");
    assert_eq!(
        out,
        with_barrier(words_to_bytes(&words[words.len() - rsz..]))
    );
}

#[test]
fn perf_drain_keeps_the_newest_trace_that_fits_the_aux_room() {
    let rsz = 1024;
    let mut ram = vec![0u32; rsz];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let words = pattern(700, 9);
    m.push_raw_words(&words);
    m.reset_counts();
    // 1000 bytes of room: 992 are taken, whole 16-byte frames.
    let (d, out) = perf_into(&mut m, 1000);
    assert!(d.lost);
    assert_eq!(d.bytes, 992);
    assert_eq!(
        out,
        with_barrier(words_to_bytes(&words[words.len() - 248..]))
    );
    assert_eq!(
        m.counts().writes(TMC_RRP),
        1,
        "RRP moved to the newest frames"
    );
    assert_eq!(m.counts().reads(TMC_RRD), 248);
}

#[test]
fn perf_drain_with_no_room_reads_no_trace() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(100, 2));
    m.reset_counts();
    let (d, out) = perf_into(&mut m, 15);
    assert!(d.lost, "the trace that did not fit is lost, and said so");
    assert!(out.is_empty());
    assert_eq!(m.counts().reads(TMC_RRD), 0);
}

#[test]
fn perf_drain_then_enable_again_captures_only_new_trace() {
    let mut ram = vec![0u32; 1024];
    let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).unwrap();
    enable_circular(&mut m, 0).unwrap();
    m.push_raw_words(&pattern(100, 2));
    let (d, _) = perf_into(&mut m, 4096);
    assert_eq!(d.bytes, 400);
    disable(&mut m).unwrap();
    enable_circular(&mut m, 0).unwrap();
    let second = pattern(50, 77);
    m.push_raw_words(&second);
    let (d, out) = perf_into(&mut m, 4096);
    assert!(!d.lost);
    assert_eq!(out, words_to_bytes(&second), "a new session starts empty");
}

//! The TMC-ETR sequences (`cspd_hw::tmc::etr`) driven against the register-level model in its
//! ETR configuration.

use std::cell::Cell;

use cspd_hw::access::RawFrame;
use cspd_hw::tmc::etr::*;
use cspd_hw::tmc::TMC_POLL_TRIES;
use cspd_model::tmc::TmcModel;
use cspd_model::tmc::TmcModelConfig;
use kernel::coresight::panic_dump::format::etr::*;

/// The registers and bits the tests look at, from the TMC TRM (DDI 0461), written independently
/// of the driver's `register!` declarations.
mod arch {
    pub use cspd_model::tmc::{
        AXICTL, CTL, DBAHI, DBALO, FFCR, FFSR, LSR, MODE, RRP, RRPHI, RSZ, RWP, RWPHI, STS,
    };
    pub const STS_FULL: u32 = 1 << 0;
    pub const STS_TMCREADY: u32 = 1 << 2;
    pub const STS_MEMERR: u32 = 1 << 5;
    pub const FFCR_FLUSHMAN: u32 = 1 << 6;
    pub const FFCR_STOPONFL: u32 = 1 << 12;
    /// `EnFt | EnTI | FOnFlIn | FOnTrigEvt | TrigOnTrigIn`.
    pub const FFCR_SINK: u32 = 0x133;
    /// `ProtCtrlBit1`, `CacheCtrlBit` 0xF, `WrBurstLen` 0xF: what the C driver writes.
    pub const AXICTL_C_DRIVER: u32 = 0xF3E;
}
use arch::*;

/// Where the model's memory is on the bus, and the buffer the tests give the ETR in it.
const MEM_BASE: u64 = 0x1_2340_0000;
const MEM_WORDS: usize = 8192;
const BUF_OFF: u64 = 0x1000;
const BUF_BYTES: u64 = 4096;

fn model(mem: &mut [u32]) -> TmcModel<'_> {
    let mut m = TmcModel::new(TmcModelConfig::Etr, mem).unwrap();
    m.set_etr_memory_base(MEM_BASE);
    m.set_memwidth_code(3);
    m
}

fn setup(stop_on_flush: bool) -> EtrSetup {
    EtrSetup {
        dba: MEM_BASE + BUF_OFF,
        size: BUF_BYTES,
        stop_on_flush,
        save_restore: false,
        trigger: 0,
    }
}

fn pattern(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)) & 0x7FFF_FFFE)
        .collect()
}

fn bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The model's memory as the panic callback reads it, counting what it reads.
struct Mem<'a> {
    words: &'a [u32],
    /// Bytes read, and the highest byte offset read (exclusive).
    read: Cell<(usize, usize)>,
}

impl<'a> Mem<'a> {
    /// The buffer the tests give the ETR, inside the model's memory.
    fn buffer(words: &'a [u32]) -> Self {
        let first = (BUF_OFF / 4) as usize;
        Self {
            words: &words[first..first + (BUF_BYTES / 4) as usize],
            read: Cell::new((0, 0)),
        }
    }
}

impl EtrMemory for Mem<'_> {
    fn size(&self) -> usize {
        self.words.len() * 4
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(out.len()).filter(|&e| e <= self.size()) else {
            return false;
        };
        let b = bytes(self.words);
        out.copy_from_slice(&b[offset..end]);
        let (n, hi) = self.read.get();
        self.read.set((n + out.len(), hi.max(end)));
        true
    }
}

fn copied<'a>(mem: &'a Mem<'a>) -> PanicBuffer<'a> {
    PanicBuffer {
        dba: MEM_BASE + BUF_OFF,
        paddr: 0,
        size: BUF_BYTES,
        copy_from: Some(mem),
    }
}

fn reserved() -> PanicBuffer<'static> {
    PanicBuffer {
        dba: MEM_BASE + BUF_OFF,
        paddr: 0x7e00_0000,
        size: BUF_BYTES,
        copy_from: None,
    }
}

/// Records the stopped ETR into a slot of `cap` trace bytes and parses the record back.
fn record(
    stop: &EtrStop,
    buf: Option<&PanicBuffer<'_>>,
    cap: usize,
) -> (EtrSummary, EtrRecordHeader, Vec<u8>) {
    let mut slot = vec![0xA5u8; ETR_RECORD_HEADER_LEN + cap];
    let s = panic_record(stop, buf, &mut slot).unwrap();
    assert!(slot[s.record_len..].iter().all(|&b| b == 0xA5));
    let (h, trace) = EtrRecord::parse(&slot[..s.record_len]).unwrap();
    assert_eq!(h.outcome(), Some(s.outcome));
    assert_eq!(trace.len(), s.trace_len);
    (s, h, trace.to_vec())
}

#[test]
fn enable_programs_the_buffer_as_the_c_driver_does() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    assert_eq!(m.read32(LSR) & 2, 2, "locked again");
    let unlock = |m: &mut TmcModel<'_>| m.write32(0xFB0, 0xC5AC_CE55);
    unlock(&mut m);
    assert_eq!(m.read32(RSZ), (BUF_BYTES / 4) as u32);
    assert_eq!(m.read32(DBALO), 0x2340_1000);
    assert_eq!(m.read32(DBAHI), 1);
    assert_eq!(m.read32(AXICTL), AXICTL_C_DRIVER);
    assert_eq!(m.read32(FFCR), FFCR_SINK);
    assert_eq!(m.read32(MODE), 0);
    assert_eq!(m.read32(CTL), 1);
    // Capture starts with both pointers at DBA.
    assert_eq!((m.read32(RWP), m.read32(RWPHI)), (0x2340_1000, 1));
    assert_eq!((m.read32(RRP), m.read32(RRPHI)), (0x2340_1000, 1));
    // Trace goes into memory at DBA.
    let w = pattern(64, 3);
    assert_eq!(m.push_raw_words(&w), 64);
    assert_eq!(&mem[0x400..0x440], &w[..]);
    assert!(mem[..0x400].iter().all(|&x| x == 0));

    // stop_on_flush sets FFCR.StopOnFl for the session.
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(true)).unwrap();
    unlock(&mut m);
    assert_eq!(m.read32(FFCR), FFCR_SINK | FFCR_STOPONFL);
}

#[test]
fn enable_sets_the_pointers_of_a_part_that_keeps_them() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    let mut s = setup(false);
    s.save_restore = true;
    m.reset_counts();
    enable(&mut m, &s).unwrap();
    // RRP, RWP and their high halves, and STS, are written before capture starts.
    for reg in [RRP, RRPHI, RWP, RWPHI, STS] {
        assert_eq!(m.counts().writes(reg), 1, "{reg:#x}");
    }
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    m.reset_counts();
    enable(&mut m, &setup(false)).unwrap();
    for reg in [RRP, RRPHI, RWP, RWPHI, STS] {
        assert_eq!(m.counts().writes(reg), 0, "{reg:#x}");
    }
}

#[test]
fn a_reserved_buffer_stays_in_place_and_the_record_says_where() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    let w = pattern(300, 9);
    m.push_raw_words(&w);
    let stop = panic_stop(&mut m);
    assert!(stop.was_running());
    assert_eq!(m.read32(CTL), 0, "left disabled");
    assert_eq!(m.read32(LSR) & 2, 2, "left locked");
    let (s, h, trace) = record(&stop, Some(&reserved()), 64);
    assert_eq!(s.outcome, EtrOutcome::Complete);
    assert!(h.has(ETR_REC_IN_PLACE));
    assert!(!h.has(ETR_REC_WRAPPED));
    assert!(trace.is_empty());
    assert_eq!(s.record_len, ETR_RECORD_HEADER_LEN);
    assert_eq!((h.buf_paddr, h.buf_size), (0x7e00_0000, BUF_BYTES));
    assert_eq!(h.dba, MEM_BASE + BUF_OFF);
    assert_eq!(h.rwp, MEM_BASE + BUF_OFF + 300 * 4);
    assert_eq!(h.rsz, 1024);
    assert_eq!(h.ctl, 1);
    assert_eq!(h.sts & STS_TMCREADY, STS_TMCREADY);
    assert_eq!(h.axictl, AXICTL_C_DRIVER);
    assert_eq!(h.data_len, 300 * 4);
    // The layout the record gives finds exactly the words written, in the memory.
    let l = h.layout().unwrap();
    let buf = bytes(&mem[0x400..0x800]);
    assert_eq!(&buf[..l.len as usize], &bytes(&w)[..]);
}

#[test]
fn a_dma_buffer_is_copied_oldest_first() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    let w = pattern(200, 1);
    m.push_raw_words(&w);
    let stop = panic_stop(&mut m);
    let buf = Mem::buffer(&mem);
    let (s, h, trace) = record(&stop, Some(&copied(&buf)), BUF_BYTES as usize);
    assert_eq!(s.outcome, EtrOutcome::Complete);
    assert_eq!(
        h.flags & (ETR_REC_IN_PLACE | ETR_REC_TRUNCATED | ETR_REC_WRAPPED),
        0
    );
    assert_eq!(trace, bytes(&w));
    assert_eq!(h.data_start, 0);
    assert_eq!(buf.read.get(), (800, 800));
}

#[test]
fn a_wrapped_buffer_is_copied_from_rwp_on() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    let w = pattern(1024 * 2 + 100, 5);
    m.push_raw_words(&w);
    let stop = panic_stop(&mut m);
    let buf = Mem::buffer(&mem);
    let (s, h, trace) = record(&stop, Some(&copied(&buf)), BUF_BYTES as usize);
    assert_eq!(s.outcome, EtrOutcome::Complete);
    assert!(h.has(ETR_REC_WRAPPED));
    assert_eq!(h.sts & STS_FULL, STS_FULL);
    // The oldest word is at RWP; the whole buffer, newest RSZ words oldest first.
    assert_eq!(h.rwp, MEM_BASE + BUF_OFF + 100 * 4);
    assert_eq!(h.data_start, 400);
    assert_eq!(trace, bytes(&w[w.len() - 1024..]));
}

#[test]
fn a_buffer_larger_than_the_slot_is_never_copied_past_it() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    let w = pattern(1024 + 300, 11);
    m.push_raw_words(&w);
    let stop = panic_stop(&mut m);
    let buf = Mem::buffer(&mem);
    // Room for 1000 bytes: 62 whole frames (992 bytes) are kept, the newest.
    let (s, h, trace) = record(&stop, Some(&copied(&buf)), 1000);
    assert_eq!(s.outcome, EtrOutcome::Truncated);
    assert!(h.has(ETR_REC_TRUNCATED | ETR_REC_WRAPPED));
    assert_eq!(trace.len(), 992);
    assert_eq!(trace, bytes(&w[w.len() - 248..]));
    assert_eq!(h.data_len, BUF_BYTES);
    assert_eq!(h.data_start % 16, 0);
    // Only what was kept was read from the buffer.
    assert_eq!(buf.read.get().0, 992);
    // A slot with room for the header only: nothing copied.
    let (s, _, trace) = record(&stop, Some(&copied(&buf)), 0);
    assert_eq!(s.outcome, EtrOutcome::Truncated);
    assert!(trace.is_empty());
}

#[test]
fn an_etr_that_never_becomes_ready_is_given_up_within_the_bound() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    let w = pattern(128, 2);
    m.push_raw_words(&w);
    m.set_fault_never_ready(true);
    m.reset_counts();
    let stop = panic_stop(&mut m);
    assert_eq!(m.counts().delays, TMC_POLL_TRIES);
    // The non-polling accesses are few, whatever the buffer.
    assert!(
        m.counts().total_reads() + m.counts().total_writes()
            <= 2 * (u64::from(TMC_POLL_TRIES) + 1) + 26
    );
    assert_eq!(m.read32(LSR) & 2, 2);
    let buf = Mem::buffer(&mem);
    let (s, h, trace) = record(&stop, Some(&copied(&buf)), BUF_BYTES as usize);
    assert_eq!(s.outcome, EtrOutcome::ReadyTimeout);
    assert!(h.has(ETR_REC_READY_TIMEOUT));
    assert_eq!(h.ready_delays, TMC_POLL_TRIES);
    // What the ETR wrote is still recorded.
    assert_eq!(trace, bytes(&w));
}

#[test]
fn a_formatter_stopped_by_a_flush_is_not_flushed_again() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(true)).unwrap();
    m.push_trace(0x10, &[1, 2, 3, 4, 5]);
    // A flush with StopOnFl (as from FLUSHIN): the formatter stops on its own.
    m.write32(0xFB0, 0xC5AC_CE55);
    m.write32(FFCR, FFCR_SINK | FFCR_STOPONFL | FFCR_FLUSHMAN);
    for _ in 0..10 {
        m.delay_us(1);
    }
    assert_eq!(m.read32(FFSR) & 2, 2);
    m.reset_counts();
    let stop = panic_stop(&mut m);
    assert_eq!(m.counts().writes(FFCR), 0, "no second flush");
    let (s, h, _) = record(&stop, Some(&reserved()), 0);
    assert_eq!(s.outcome, EtrOutcome::Complete);
    assert!(h.has(ETR_REC_FLUSH_SKIPPED | ETR_REC_IN_PLACE));
    assert_eq!(h.data_len, 16);
}

#[test]
fn a_memory_error_copies_nothing() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    // DBA outside the model's memory: the first write fails.
    let s = EtrSetup {
        dba: MEM_BASE + 4 * MEM_WORDS as u64,
        ..setup(false)
    };
    enable(&mut m, &s).unwrap();
    m.push_raw_words(&pattern(8, 1));
    let stop = panic_stop(&mut m);
    assert_eq!(stop.header().sts & STS_MEMERR, STS_MEMERR);
    let buf = Mem::buffer(&mem);
    let b = PanicBuffer {
        dba: s.dba,
        ..copied(&buf)
    };
    let (s, h, trace) = record(&stop, Some(&b), 256);
    assert_eq!(s.outcome, EtrOutcome::MemErr);
    assert!(h.has(ETR_REC_MEMERR));
    assert!(trace.is_empty());
    assert_eq!(buf.read.get().0, 0);
}

#[test]
fn pointers_of_another_buffer_are_not_followed() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    enable(&mut m, &setup(false)).unwrap();
    m.push_raw_words(&pattern(64, 1));
    let stop = panic_stop(&mut m);
    let buf = Mem::buffer(&mem);
    // The driver's buffer is elsewhere, or smaller than RSZ says.
    for b in [
        PanicBuffer {
            dba: MEM_BASE,
            ..copied(&buf)
        },
        PanicBuffer {
            size: BUF_BYTES / 2,
            ..copied(&buf)
        },
    ] {
        let (s, _, trace) = record(&stop, Some(&b), 4096);
        assert_eq!(s.outcome, EtrOutcome::BadPointers);
        assert!(trace.is_empty());
    }
    assert_eq!(buf.read.get().0, 0);
    // No buffer known at all.
    let (s, _, _) = record(&stop, None, 64);
    assert_eq!(s.outcome, EtrOutcome::NoBuffer);
}

#[test]
fn an_etr_not_capturing_is_left_alone() {
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    m.reset_counts();
    let stop = panic_stop(&mut m);
    assert!(!stop.was_running());
    assert_eq!(m.counts().writes(CTL), 0);
    assert_eq!(m.counts().writes(FFCR), 0);
    let (s, h, _) = record(&stop, Some(&reserved()), 0);
    assert_eq!(s.outcome, EtrOutcome::NotEnabled);
    assert_eq!(h.flags & ETR_REC_IN_PLACE, 0);
    // A slot too small for the header.
    assert_eq!(
        panic_record(&stop, None, &mut [0u8; 16]).unwrap_err(),
        EtrRecordError::TooShort
    );
}

#[test]
fn scatter_gather_is_refused_by_the_model() {
    // The sequence never asks for it; the model has none (DEVID.NOSCAT).
    let mut mem = vec![0u32; MEM_WORDS];
    let mut m = model(&mut mem);
    assert_eq!(m.read32(0xFC8) >> 24 & 1, 1);
    enable(&mut m, &setup(false)).unwrap();
    m.write32(0xFB0, 0xC5AC_CE55);
    assert_eq!(m.read32(AXICTL) & (1 << 7), 0);
}

/// The model behind a `RefCell`: the registers for `perf_drain`'s `io` and, at the same time, its
/// memory for the buffer it copies from (the ETR writes the buffer, the driver reads it).
struct SharedIo<'r, 'a>(&'r std::cell::RefCell<TmcModel<'a>>);

impl RawFrame for SharedIo<'_, '_> {
    fn read32(&mut self, offset: u32) -> u32 {
        self.0.borrow_mut().read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) {
        self.0.borrow_mut().write32(offset, value)
    }
    fn delay_us(&mut self, us: u32) {
        self.0.borrow_mut().delay_us(us)
    }
}

/// The tests' buffer inside the shared model's memory, counting the bytes read.
struct SharedMem<'r, 'a>(&'r std::cell::RefCell<TmcModel<'a>>, Cell<usize>);

impl EtrMemory for SharedMem<'_, '_> {
    fn size(&self) -> usize {
        BUF_BYTES as usize
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(out.len()).filter(|&e| e <= self.size()) else {
            return false;
        };
        let m = self.0.borrow();
        let first = (BUF_OFF / 4) as usize;
        let b = bytes(&m.ram()[first..first + (BUF_BYTES / 4) as usize]);
        out.copy_from_slice(&b[offset..end]);
        self.1.set(self.1.get() + out.len());
        true
    }
}

/// Pushes `words` into an enabled ETR and drains it for perf with `room` bytes of room; returns
/// what `perf_drain` said, the bytes handed over (in calls of at most a chunk) and the bytes read
/// from the buffer.
fn perf_drain_of(words: &[u32], room: usize, dba: u64) -> (EtrPerfDrain, Vec<u8>, usize) {
    let mut mem = vec![0u32; MEM_WORDS];
    let m = std::cell::RefCell::new(model(&mut mem));
    enable(&mut *m.borrow_mut(), &setup(false)).unwrap();
    m.borrow_mut().push_raw_words(words);
    let view = SharedMem(&m, Cell::new(0));
    let mut got = Vec::new();
    let d = perf_drain(&mut SharedIo(&m), &view, dba, room, |s: &[u8]| {
        assert!(!s.is_empty() && s.len() <= 256 && s.len().is_multiple_of(4));
        got.extend_from_slice(s)
    });
    assert!(!m.borrow().is_capturing(), "the ETR is stopped");
    assert!(m.borrow().is_locked());
    (d, got, view.1.get())
}

const BARRIER: [u8; 16] = [
    0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F,
];

#[test]
fn perf_drain_hands_over_the_trace_oldest_first() {
    let w = pattern(200, 3);
    let (d, got, read) = perf_drain_of(&w, 1 << 20, MEM_BASE + BUF_OFF);
    assert_eq!(d.failure, None);
    assert!(!d.lost);
    assert_eq!(d.bytes, 800);
    assert_eq!(got, bytes(&w));
    assert_eq!(read, 800);
}

#[test]
fn perf_drain_of_a_wrapped_buffer_starts_with_the_barrier() {
    let w = pattern(1024 * 2 + 100, 9);
    let (d, got, _) = perf_drain_of(&w, 1 << 20, MEM_BASE + BUF_OFF);
    assert_eq!(d.failure, None);
    assert!(d.lost);
    assert_eq!(d.bytes, BUF_BYTES as usize);
    let newest = bytes(&w[w.len() - 1024..]);
    assert_eq!(got[..16], BARRIER);
    assert_eq!(got[16..], newest[16..]);
}

#[test]
fn perf_drain_keeps_the_newest_frames_that_fit_the_room() {
    let w = pattern(600, 21);
    // 1000 bytes of room: 62 frames, the newest, behind the barrier.
    let (d, got, read) = perf_drain_of(&w, 1000, MEM_BASE + BUF_OFF);
    assert_eq!(d.failure, None);
    assert!(d.lost);
    assert_eq!(d.bytes, 992);
    let all = bytes(&w);
    assert_eq!(got[..16], BARRIER);
    assert_eq!(got[16..], all[all.len() - 992 + 16..]);
    assert_eq!(read, 992, "only what was kept is read");
    // Less room than a frame: nothing, and the loss said.
    let (d, got, _) = perf_drain_of(&w, 15, MEM_BASE + BUF_OFF);
    assert_eq!((d.bytes, d.lost), (0, true));
    assert!(got.is_empty());
}

#[test]
fn perf_drain_reads_nothing_from_another_buffer_or_an_idle_etr() {
    let w = pattern(64, 1);
    let (d, got, read) = perf_drain_of(&w, 4096, MEM_BASE);
    assert_eq!(d.failure, Some(EtrOutcome::BadPointers));
    assert_eq!((d.bytes, got.len(), read), (0, 0, 0));

    let mut mem = vec![0u32; MEM_WORDS];
    let m = std::cell::RefCell::new(model(&mut mem));
    let view = SharedMem(&m, Cell::new(0));
    let d = perf_drain(
        &mut SharedIo(&m),
        &view,
        MEM_BASE + BUF_OFF,
        4096,
        |_: &[u8]| panic!("nothing to hand over"),
    );
    assert_eq!(d.failure, Some(EtrOutcome::NotEnabled));
    assert_eq!(view.1.get(), 0);
}

#[test]
fn a_drained_etr_is_disabled_without_a_flush_and_a_capturing_one_with_one() {
    let mut mem = vec![0u32; MEM_WORDS];
    let m = std::cell::RefCell::new(model(&mut mem));
    enable(&mut *m.borrow_mut(), &setup(false)).unwrap();
    m.borrow_mut().push_raw_words(&pattern(32, 1));
    let view = SharedMem(&m, Cell::new(0));
    perf_drain(
        &mut SharedIo(&m),
        &view,
        MEM_BASE + BUF_OFF,
        4096,
        |_: &[u8]| {},
    );
    let mut m = m.into_inner();
    m.reset_counts();
    cspd_hw::tmc::disable_if_capturing(&mut m).unwrap();
    assert_eq!(
        m.counts().total_writes(),
        0,
        "nothing written to a stopped ETR"
    );
    assert!(!m.is_capturing());

    enable(&mut m, &setup(false)).unwrap();
    assert!(m.is_capturing());
    m.reset_counts();
    cspd_hw::tmc::disable_if_capturing(&mut m).unwrap();
    assert!(m.counts().writes(FFCR) >= 1, "a capturing ETR is flushed");
    assert!(!m.is_capturing());
}

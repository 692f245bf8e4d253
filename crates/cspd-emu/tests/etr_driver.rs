//! The coresight_tmc driver's ETR sequences (`cspd_hw::tmc::etr`, the files the kernel compiles)
//! against the plugin's emulated ETR (`cspd_emu::etr::Etr`), the component the end-to-end
//! scenarios run on: what the panic path records is what the emulated ETR wrote, in the order
//! the plugin's `tmc_dump` gives it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cspd_emu::bus::Component;
use cspd_emu::etr::Etr;
use cspd_emu::tmc::TmcFaults;
use cspd_emu::GuestMem;
use cspd_hw::access::RawFrame;
use cspd_hw::tmc::etr::*;
use kernel::coresight::panic_dump::format::etr::*;

const RAM: std::ops::Range<u64> = 0x4000_0000..0x8000_0000;
const WINDOW: std::ops::Range<u64> = 0x7FF0_0000..0x7FF3_0000;
const DBA: u64 = 0x7e00_0000;
const SIZE: u64 = 0x4000;

#[derive(Default)]
struct Ram(Mutex<HashMap<u64, u32>>);

impl GuestMem for Ram {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        RAM.contains(&paddr)
            .then(|| *self.0.lock().unwrap().get(&(paddr & !3)).unwrap_or(&0))
    }
    fn write_u32(&self, paddr: u64, value: u32) {
        self.0.lock().unwrap().insert(paddr & !3, value);
    }
    fn read_u64(&self, paddr: u64) -> Option<u64> {
        Some(u64::from(self.read_u32(paddr)?) | (u64::from(self.read_u32(paddr + 4)?) << 32))
    }
    fn writable(&self, paddr: u64, len: u64) -> bool {
        paddr >= RAM.start && paddr + len <= RAM.end
    }
}

/// The emulated ETR as the guest's MMIO reaches it: reads return the staged frame, then the
/// read's side effects run and the frame is restaged (as the plugin does).
struct Mmio {
    etr: Etr,
    frame: Box<[u32; 1024]>,
}

impl Mmio {
    fn restage(&mut self) {
        for &off in self.etr.staged() {
            self.frame[(off / 4) as usize] = self.etr.peek(off);
        }
    }
}

impl RawFrame for Mmio {
    fn read32(&mut self, off: u32) -> u32 {
        let v = self.frame[(off / 4) as usize];
        self.etr.read(off);
        self.restage();
        v
    }
    fn write32(&mut self, off: u32, v: u32) {
        self.frame[(off / 4) as usize] = v;
        self.etr.write(off, v);
        self.restage();
    }
    fn delay_us(&mut self, _us: u32) {
        // Time passes with every access of the emulated ETR.
        let _ = self.read32(0xFB4);
    }
}

/// The guest memory the DMA buffer would be, as the panic callback reads it.
struct Buffer(Arc<Ram>);

impl EtrMemory for Buffer {
    fn size(&self) -> usize {
        SIZE as usize
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        if offset + out.len() > self.size()
            || !offset.is_multiple_of(4)
            || !out.len().is_multiple_of(4)
        {
            return false;
        }
        for (i, c) in out.chunks_exact_mut(4).enumerate() {
            let w = self.0.read_u32(DBA + offset as u64 + 4 * i as u64).unwrap();
            c.copy_from_slice(&w.to_le_bytes());
        }
        true
    }
}

fn setup(faults: TmcFaults) -> (Mmio, Arc<Ram>) {
    let ram = Arc::new(Ram::default());
    let etr = Etr::new(ram.clone(), WINDOW, faults).unwrap();
    let mut m = Mmio {
        etr,
        frame: Box::new([0; 1024]),
    };
    m.restage();
    enable(
        &mut m,
        &EtrSetup {
            dba: DBA,
            size: SIZE,
            stop_on_flush: false,
            save_restore: false,
            trigger: 0,
        },
    )
    .unwrap();
    (m, ram)
}

/// Trace of two sources, enough to wrap the buffer `times` over.
fn trace(m: &mut Mmio, bytes: usize) {
    let mut n = 0usize;
    let mut i = 0u32;
    while n < bytes {
        let chunk: Vec<u8> = (0..97u32).map(|k| (i.wrapping_mul(31) + k) as u8).collect();
        n += m
            .etr
            .push_trace(if i.is_multiple_of(2) { 0x10 } else { 0x12 }, &chunk);
        i += 1;
    }
    m.restage();
}

#[test]
fn the_record_of_a_wrapped_etr_is_the_buffer_the_plugin_dumps() {
    let (mut m, ram) = setup(TmcFaults::default());
    trace(&mut m, 3 * SIZE as usize + 1000);
    let stop = panic_stop(&mut m);
    // What the plugin writes to tmc_dump= when capture stops: the buffer, oldest word first.
    let (held, full) = m.etr.held();
    assert!(full);
    assert_eq!(held.len(), SIZE as usize);

    // A DMA buffer: copied, oldest first, equal to the plugin's dump.
    let buf = Buffer(ram.clone());
    let mut slot = vec![0u8; ETR_RECORD_HEADER_LEN + SIZE as usize];
    let b = PanicBuffer {
        dba: DBA,
        paddr: 0,
        size: SIZE,
        copy_from: Some(&buf),
    };
    let s = panic_record(&stop, Some(&b), &mut slot).unwrap();
    assert_eq!(s.outcome, EtrOutcome::Complete);
    let (h, copied) = EtrRecord::parse(&slot[..s.record_len]).unwrap();
    assert!(h.has(ETR_REC_WRAPPED));
    assert_eq!(copied, &held[..]);

    // Reserved memory: left in place; the record's layout finds the same bytes in memory.
    let mut slot = vec![0u8; ETR_RECORD_HEADER_LEN];
    let b = PanicBuffer {
        dba: DBA,
        paddr: DBA,
        size: SIZE,
        copy_from: None,
    };
    let s = panic_record(&stop, Some(&b), &mut slot).unwrap();
    let (h, _) = EtrRecord::parse(&slot[..s.record_len]).unwrap();
    assert!(h.has(ETR_REC_IN_PLACE));
    let l = h.layout().unwrap();
    let mut unwrapped = Vec::new();
    for (off, len) in l.ranges() {
        let mut part = vec![0u8; len as usize];
        assert!(buf.read(off as usize, &mut part));
        unwrapped.extend(part);
    }
    assert_eq!(unwrapped, held);
    // The ETR is left disabled: nothing more reaches the buffer.
    let before = ram.0.lock().unwrap().clone();
    m.etr.push_trace(0x10, &[1; 512]);
    assert_eq!(*ram.0.lock().unwrap(), before);
}

#[test]
fn a_partly_filled_etr_is_recorded_from_dba_to_rwp() {
    let (mut m, ram) = setup(TmcFaults::default());
    trace(&mut m, 3000);
    let stop = panic_stop(&mut m);
    let (held, full) = m.etr.held();
    assert!(!full);
    let buf = Buffer(ram);
    let mut slot = vec![0u8; ETR_RECORD_HEADER_LEN + SIZE as usize];
    let b = PanicBuffer {
        dba: DBA,
        paddr: 0,
        size: SIZE,
        copy_from: Some(&buf),
    };
    let s = panic_record(&stop, Some(&b), &mut slot).unwrap();
    let (h, copied) = EtrRecord::parse(&slot[..s.record_len]).unwrap();
    assert_eq!(s.outcome, EtrOutcome::Complete);
    assert_eq!(copied, &held[..]);
    assert_eq!(h.data_len, held.len() as u64);
    assert_eq!(h.rwp, DBA + held.len() as u64);
}

#[test]
fn an_emulated_etr_that_never_becomes_ready_is_given_up() {
    let (mut m, _) = setup(TmcFaults {
        never_ready: true,
        ..TmcFaults::default()
    });
    trace(&mut m, 2000);
    let stop = panic_stop(&mut m);
    assert!(stop.was_running());
    let mut slot = vec![0u8; ETR_RECORD_HEADER_LEN];
    let s = panic_record(&stop, None, &mut slot).unwrap();
    let (h, _) = EtrRecord::parse(&slot[..s.record_len]).unwrap();
    assert!(h.has(ETR_REC_READY_TIMEOUT));
    assert_eq!(h.ready_delays, cspd_hw::tmc::TMC_POLL_TRIES);
}

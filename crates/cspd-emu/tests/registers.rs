//! Register-level tests of the emulated components, driven through [`Component`] the way the
//! plugin drives them: a guest read returns the staged value, then `read` applies its side
//! effects and every register is restaged; a guest write lands in the frame, then `write`
//! applies it and every register is restaged.
//!
//! The sequences are those of the Arm documents and of the `linux` drivers: TMC (DDI 0461),
//! funnel (DDI 0480), ETMv4 (IHI 0064), external debug (DDI 0487 part H), identification and
//! claim tags (IHI 0029).

use cspd_emu::bus::{Component, PrimeCellId};
use cspd_emu::cpu_debug::{CpuDebug, CpuDebugFaults};
use cspd_emu::etm::{AddrComparator, AddrRange, Etm, EtmFaults, StartStop, ViewEvent};
use cspd_emu::etr::Etr;
use cspd_emu::funnel::Funnel;
use cspd_emu::tmc::{Tmc, TmcFaults, TmcKind};
use cspd_emu::GuestMem;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const UNLOCK: u32 = 0xC5AC_CE55;
const CLAIMSET: u32 = 0xFA0;
const CLAIMCLR: u32 = 0xFA4;
const LAR: u32 = 0xFB0;
const LSR: u32 = 0xFB4;
const AUTHSTATUS: u32 = 0xFB8;
const DEVARCH: u32 = 0xFBC;
const DEVID: u32 = 0xFC8;
const DEVTYPE: u32 = 0xFCC;

/// A component behind a staged 4 KiB frame, accessed as the guest does.
struct Window<C: Component> {
    c: C,
    frame: [u32; 1024],
}

impl<C: Component> Window<C> {
    fn new(c: C) -> Self {
        let mut w = Window {
            c,
            frame: [0xDEAD_BEEF; 1024],
        };
        w.restage();
        w
    }

    fn restage(&mut self) {
        for &off in self.c.staged() {
            self.frame[(off / 4) as usize] = self.c.peek(off);
        }
    }

    fn read(&mut self, off: u32) -> u32 {
        let v = self.frame[(off / 4) as usize];
        self.c.read(off);
        self.restage();
        v
    }

    fn write(&mut self, off: u32, v: u32) {
        self.frame[(off / 4) as usize] = v;
        self.c.write(off, v);
        self.restage();
    }

    /// Reads `off` until `(value & mask) == want`, at most `max` times; returns the number of
    /// reads it took, or `None`.
    fn poll(&mut self, off: u32, mask: u32, want: u32, max: usize) -> Option<usize> {
        (1..=max).find(|_| self.read(off) & mask == want)
    }

    /// The peripheral ID as `linux`'s AMBA bus assembles it from `PIDR0..3`.
    fn amba_pid(&mut self) -> u32 {
        (0..4).fold(0, |acc, i| {
            acc | (self.read(0xFE0 + 4 * i) & 0xFF) << (8 * i)
        })
    }

    /// The component ID from `CIDR0..3`.
    fn cid(&mut self) -> u32 {
        (0..4).fold(0, |acc, i| {
            acc | (self.read(0xFF0 + 4 * i) & 0xFF) << (8 * i)
        })
    }

    /// The CoreSight claim protocol of `linux`'s `coresight_claim_device_unlocked`.
    fn claim_self_hosted(&mut self) -> bool {
        if self.read(CLAIMCLR) & 3 != 0 {
            return false;
        }
        self.write(CLAIMSET, 2);
        self.read(CLAIMCLR) & 3 == 2
    }
}

fn check_identification<C: Component>(w: &mut Window<C>, amba_id: u32) {
    assert_eq!(w.amba_pid() & 0x000F_FFFF, amba_id, "AMBA peripheral ID");
    assert_eq!(w.read(0xFE8) & 0x8, 0x8, "PIDR2.JEDEC");
    assert_eq!(w.read(0xFD0), 0x04, "PIDR4: JEP106 continuation 4, 4 KiB");
    assert_eq!(
        w.cid(),
        PrimeCellId::CORESIGHT_CID,
        "CIDR: CoreSight class 0x9"
    );
    assert_eq!((w.read(0xFF4) >> 4) & 0xF, 0x9, "CIDR1.CLASS");
}

// ---------------------------------------------------------------------------------------------
// TMC

const RSZ: u32 = 0x004;
const STS: u32 = 0x00C;
const RRD: u32 = 0x010;
const RRP: u32 = 0x014;
const RWP: u32 = 0x018;
const CTL: u32 = 0x020;
const MODE: u32 = 0x028;
const FFSR: u32 = 0x300;
const FFCR: u32 = 0x304;

const STS_FULL: u32 = 1 << 0;
const STS_TMCREADY: u32 = 1 << 2;
const STS_EMPTY: u32 = 1 << 4;
const FFCR_FLUSHMAN: u32 = 1 << 6;
const FFCR_STOPONFL: u32 = 1 << 12;
/// `EnFmt | EnTI | FOnFlIn | FOnTrigEvt | TrigOnTrigIn`, what `linux` programs for an ETB/ETF.
const FFCR_LINUX: u32 = 0x1 | 0x2 | 0x10 | 0x20 | 0x100;

fn tmc(kind: TmcKind, bytes: usize, faults: TmcFaults) -> Window<Tmc> {
    Window::new(Tmc::new(kind, bytes, faults).expect("valid TMC"))
}

/// Unlock, claim, Circular Buffer mode, formatter on, capture on (`__tmc_etb_enable_hw`).
fn tmc_enable(w: &mut Window<Tmc>) {
    w.write(LAR, UNLOCK);
    assert!(w.claim_self_hosted());
    assert_ne!(w.read(STS) & STS_TMCREADY, 0, "ready before enable");
    w.write(MODE, 0);
    w.write(FFCR, FFCR_LINUX);
    w.write(CTL, 1);
    assert!(w.c.accepting());
}

/// `tmc_flush_and_stop`: StopOnFl, then FlushMan; returns the polls FlushMan and TMCReady took.
fn tmc_flush_and_stop(w: &mut Window<Tmc>, max: usize) -> (Option<usize>, Option<usize>) {
    let ffcr = w.read(FFCR) | FFCR_STOPONFL;
    w.write(FFCR, ffcr);
    w.write(FFCR, ffcr | FFCR_FLUSHMAN);
    let flush = w.poll(FFCR, FFCR_FLUSHMAN, 0, max);
    let ready = w.poll(STS, STS_TMCREADY, STS_TMCREADY, max);
    (flush, ready)
}

/// `tmc_etb_dump_hw`: reads `RRD` until `0xFFFFFFFF` (at most `max` words).
fn tmc_drain(w: &mut Window<Tmc>, max: usize) -> Vec<u32> {
    let mut out = Vec::new();
    while out.len() < max {
        let v = w.read(RRD);
        if v == 0xFFFF_FFFF {
            break;
        }
        out.push(v);
    }
    out
}

/// Decodes formatter frames (IHI 0029, "Trace formatter") into `(id, byte)` pairs, dropping the
/// null ID 0.
fn deformat(words: &[u32]) -> Vec<(u8, u8)> {
    deformat_from(words, None)
}

/// [`deformat`] of a stream whose first data belongs to `initial`.
fn deformat_from(words: &[u32], initial: Option<u8>) -> Vec<(u8, u8)> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(bytes.len() % 16, 0, "whole frames");
    let mut out = Vec::new();
    let mut cur: Option<u8> = initial;
    let emit = |id: Option<u8>, b: u8, out: &mut Vec<(u8, u8)>| {
        let id = id.expect("data before any ID");
        if id != 0 {
            out.push((id, b));
        }
    };
    for f in bytes.chunks_exact(16) {
        let aux = f[15];
        let mut next_frame_id = None;
        for i in 0..8 {
            let b = f[2 * i];
            let auxbit = (aux >> i) & 1;
            if i == 7 {
                if b & 1 != 0 {
                    next_frame_id = Some(b >> 1);
                } else {
                    emit(cur, b | auxbit, &mut out);
                }
                break;
            }
            let odd = f[2 * i + 1];
            if b & 1 != 0 {
                let new = b >> 1;
                if auxbit == 1 {
                    emit(cur, odd, &mut out);
                    cur = Some(new);
                } else {
                    cur = Some(new);
                    emit(cur, odd, &mut out);
                }
            } else {
                emit(cur, b | auxbit, &mut out);
                emit(cur, odd, &mut out);
            }
        }
        if next_frame_id.is_some() {
            cur = next_frame_id;
        }
    }
    out
}

fn tagged(id: u8, bytes: &[u8]) -> Vec<(u8, u8)> {
    bytes.iter().map(|&b| (id, b)).collect()
}

#[test]
fn tmc_rejects_bad_ram_sizes() {
    for bad in [0, 16, 48, 100, 65, (64 << 20) + 16, usize::MAX & !15] {
        let err = Tmc::new(TmcKind::Etf, bad, TmcFaults::default())
            .err()
            .unwrap_or_else(|| panic!("{bad} bytes accepted"));
        assert!(
            err.contains(&bad.to_string()),
            "error names the size: {err}"
        );
    }
    for good in [64, 80, 4096] {
        let t = Tmc::new(TmcKind::Etb, good, TmcFaults::default()).expect("valid size");
        assert_eq!(t.rsz_words(), good / 4);
        assert_eq!(t.ram().len(), good / 4);
    }
}

#[test]
fn tmc_reset_and_identification() {
    let mut w = tmc(TmcKind::Etf, 4096, TmcFaults::default());
    check_identification(&mut w, 0x000B_B961);
    assert_eq!(w.read(0xFE8), 0x1B, "PIDR2");
    assert_eq!(w.read(0xFE4), 0xB9, "PIDR1");
    assert_eq!(w.read(DEVTYPE), 0x21, "DEVTYPE: sink, buffer");
    // CONFIGTYPE 2 (ETF) in bits 7:6, MEMWIDTH 2 (32-bit) in bits 10:8.
    assert_eq!(w.read(DEVID), (2 << 8) | (2 << 6));
    assert_eq!(w.read(AUTHSTATUS), 0x33);
    assert_eq!(w.read(RSZ), 1024);
    assert_eq!(w.read(CTL), 0);
    assert_eq!(w.read(STS) & STS_TMCREADY, STS_TMCREADY);
    assert_eq!(w.read(LSR), 0x3, "locked at reset");
    assert_eq!(w.read(CLAIMSET), 0xF, "four claim tags implemented");
    assert_eq!(w.read(CLAIMCLR), 0);

    let mut etb = tmc(TmcKind::Etb, 64, TmcFaults::default());
    assert_eq!(etb.read(DEVID), 2 << 8, "ETB: CONFIGTYPE 0");
    assert_eq!(etb.read(RSZ), 16);
}

#[test]
fn tmc_software_lock_and_claim() {
    let mut w = tmc(TmcKind::Etf, 256, TmcFaults::default());
    w.write(CTL, 1);
    w.write(CLAIMSET, 2);
    assert_eq!(w.read(CTL), 0, "CTL ignored while locked");
    assert_eq!(w.read(CLAIMCLR), 0, "CLAIMSET ignored while locked");
    assert!(!w.c.accepting());
    w.write(LAR, UNLOCK);
    assert_eq!(w.read(LSR), 0x1);
    assert!(w.claim_self_hosted());
    assert_eq!(
        w.read(CLAIMSET),
        0xF,
        "CLAIMSET still reads the implemented tags"
    );
    w.write(CLAIMCLR, 2);
    assert_eq!(w.read(CLAIMCLR), 0);
    w.write(LAR, 0);
    assert_eq!(w.read(LSR), 0x3);
}

#[test]
fn tmc_capture_flush_stop_drain() {
    let mut w = tmc(TmcKind::Etf, 4096, TmcFaults::default());
    assert_eq!(
        w.c.push_trace(0x10, &[1, 2, 3]),
        0,
        "no trace while disabled"
    );
    tmc_enable(&mut w);
    let a: Vec<u8> = (0..30u8).map(|i| i.wrapping_mul(37) ^ 0x55).collect();
    let b: Vec<u8> = (0..7u8).map(|i| 0xF0 | i).collect();
    assert_eq!(w.c.push_trace(0x10, &a), a.len());
    assert_eq!(w.c.push_trace(0x22, &b), b.len());
    assert_eq!(w.read(RRD), 0xFFFF_FFFF, "RRD empty while running");

    let (flush, ready) = tmc_flush_and_stop(&mut w, 100);
    let flush = flush.expect("flush completes");
    let ready = ready.expect("TMCReady rises");
    assert!(flush > 1, "FlushMan stays set for a while ({flush} polls)");
    assert!(ready > 1, "TMCReady takes time ({ready} polls)");
    assert!(!w.c.accepting(), "stopped");
    assert_eq!(w.read(FFSR) & 0x2, 0x2, "FtStopped");
    assert_eq!(w.read(STS) & (STS_FULL | STS_EMPTY), 0);

    // 37 bytes and two IDs: three or four frames, depending on how often the formatter
    // repeats the ID.
    let rwp = w.read(RWP);
    assert_eq!(rwp % 16, 0, "whole frames");
    assert!((48..=64).contains(&rwp), "RWP {rwp}");
    assert_eq!(w.read(RRP), 0);
    let words = tmc_drain(&mut w, 10_000);
    let n = (rwp / 4) as usize;
    assert_eq!(words.len(), n);
    assert_eq!(&words[..], &w.c.ram()[..n], "the RAM, oldest first");
    let mut want = tagged(0x10, &a);
    want.extend(tagged(0x22, &b));
    assert_eq!(deformat(&words), want);
    assert_ne!(w.read(STS) & STS_EMPTY, 0, "Empty after the drain");
    assert_eq!(w.read(RRD), 0xFFFF_FFFF, "still empty");

    // Disable: the driver's tmc_disable_hw.
    w.write(CTL, 0);
    assert_eq!(w.read(CTL), 0);
}

#[test]
fn tmc_wrapped_buffer_starts_at_oldest() {
    let mut w = tmc(TmcKind::Etb, 64, TmcFaults::default());
    tmc_enable(&mut w);
    // 15 data bytes per frame after the first ID: 100 bytes make 7 frames, 4 fit.
    let data: Vec<u8> = (0..100u8).collect();
    assert_eq!(w.c.push_trace(0x05, &data), 100);
    let (flush, ready) = tmc_flush_and_stop(&mut w, 100);
    assert!(flush.is_some() && ready.is_some());
    assert_ne!(w.read(STS) & STS_FULL, 0, "Full after a wrap");
    let rwp = w.read(RWP);
    assert_eq!(rwp % 16, 0, "RWP at a frame boundary");
    assert_eq!(w.read(RRP), rwp, "RRP at the oldest word");
    let ram = w.c.ram().to_vec();
    let start = (rwp / 4) as usize;
    let mut oldest_first = ram[start..].to_vec();
    oldest_first.extend_from_slice(&ram[..start]);
    let words = tmc_drain(&mut w, 1000);
    assert_eq!(words.len(), 16, "exactly RSZ words");
    assert_eq!(words, oldest_first);
    // The oldest frames were overwritten: what remains is the end of the data, in order (the
    // flush padding of the last frame carries the null ID and is dropped).
    let got = deformat_from(&words, Some(0x05));
    assert!(
        got.len() >= 3 * 14,
        "at least three frames of data ({})",
        got.len()
    );
    assert_eq!(got, tagged(0x05, &data[data.len() - got.len()..]));
}

#[test]
fn tmc_rrd_read_racing_the_stop_loses_no_word() {
    // A driver that skips the TMCReady poll and reads RRD right after the flush: the reads that
    // return the empty marker (still stopping) must not consume words.
    let mut w = tmc(TmcKind::Etf, 1024, TmcFaults::default());
    tmc_enable(&mut w);
    let data: Vec<u8> = (0..90u8).map(|i| i ^ 0xA5).collect();
    w.c.push_trace(0x11, &data);
    let ffcr = w.read(FFCR) | FFCR_STOPONFL;
    w.write(FFCR, ffcr);
    w.write(FFCR, ffcr | FFCR_FLUSHMAN);
    let mut words = Vec::new();
    let mut empties_before = 0;
    for _ in 0..1000 {
        let v = w.read(RRD);
        if v != 0xFFFF_FFFF {
            words.push(v);
        } else if words.is_empty() {
            empties_before += 1;
        } else {
            break;
        }
    }
    assert!(empties_before > 0, "RRD empty while stopping");
    let n = (w.read(RWP) / 4) as usize;
    assert_eq!(words, &w.c.ram()[..n]);
    assert_eq!(deformat(&words), tagged(0x11, &data));
}

#[test]
fn tmc_fault_never_ready() {
    let faults = TmcFaults {
        never_ready: true,
        ..TmcFaults::default()
    };
    let mut w = tmc(TmcKind::Etf, 256, faults);
    tmc_enable(&mut w);
    w.c.push_trace(0x10, &[1; 40]);
    let (flush, ready) = tmc_flush_and_stop(&mut w, 1000);
    assert!(flush.is_some(), "the flush itself completes");
    assert_eq!(ready, None, "TMCReady never rises");
    assert_eq!(w.read(RRD), 0xFFFF_FFFF, "nothing to read before Stopped");
}

#[test]
fn tmc_fault_flush_stuck() {
    let faults = TmcFaults {
        flush_stuck: true,
        ..TmcFaults::default()
    };
    let mut w = tmc(TmcKind::Etf, 256, faults);
    tmc_enable(&mut w);
    w.c.push_trace(0x10, &[1; 40]);
    let (flush, ready) = tmc_flush_and_stop(&mut w, 1000);
    assert_eq!(flush, None, "FlushMan stays set");
    assert_eq!(ready, None);
    assert_eq!(w.read(FFSR) & 0x3, 0x1, "FlInProg, formatter not stopped");
    assert!(w.c.accepting(), "still capturing");
}

#[test]
fn tmc_fault_rrd_stuck() {
    let faults = TmcFaults {
        rrd_stuck: true,
        ..TmcFaults::default()
    };
    let mut w = tmc(TmcKind::Etf, 256, faults);
    tmc_enable(&mut w);
    w.c.push_trace(0x10, &[0xAB; 40]);
    let (flush, ready) = tmc_flush_and_stop(&mut w, 100);
    assert!(flush.is_some() && ready.is_some());
    let first = w.c.ram()[0];
    let words = tmc_drain(&mut w, 1000);
    assert_eq!(words.len(), 1000, "never the empty marker");
    assert!(words.iter().all(|&v| v == first), "the same word");
    assert_eq!(w.read(RRP), 0, "RRP never moves");
}

#[test]
fn tmc_fault_rrd_never_empty() {
    let faults = TmcFaults {
        rrd_never_empty: true,
        ..TmcFaults::default()
    };
    let mut w = tmc(TmcKind::Etf, 256, faults);
    tmc_enable(&mut w);
    w.c.push_trace(0x10, &[0xAB; 40]);
    let (flush, ready) = tmc_flush_and_stop(&mut w, 100);
    assert!(flush.is_some() && ready.is_some());
    let held = (w.read(RWP) / 4) as usize;
    let ram: Vec<u32> = w.c.ram().to_vec();
    let words = tmc_drain(&mut w, 300);
    assert_eq!(words.len(), 300, "never the empty marker");
    // The RAM's words in order from RRP, wrapping round the whole RAM.
    let n = ram.len();
    assert!(held > 0 && held < n);
    for (i, &v) in words.iter().enumerate() {
        assert_eq!(v, ram[i % n], "word {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// TMC in ETR configuration

const RRPHI: u32 = 0x038;
const RWPHI: u32 = 0x03C;
const CBUFLEVEL: u32 = 0x030;
const AXICTL: u32 = 0x110;
const DBALO: u32 = 0x118;
const DBAHI: u32 = 0x11C;
const TRG: u32 = 0x01C;
const STS_MEMERR: u32 = 1 << 5;
/// Guest RAM of the ETR tests: 0x4000_0000 .. 0x8000_0000, the window at its top.
const RAM: std::ops::Range<u64> = 0x4000_0000..0x8000_0000;
const WINDOW: std::ops::Range<u64> = 0x7FF0_0000..0x7FF3_0000;

/// Guest memory: words that were written, zero elsewhere.
#[derive(Default)]
struct Ram(Mutex<HashMap<u64, u32>>);

impl GuestMem for Ram {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        RAM.contains(&paddr)
            .then(|| *self.0.lock().unwrap().get(&(paddr & !3)).unwrap_or(&0))
    }
    fn write_u32(&self, paddr: u64, value: u32) {
        assert!(RAM.contains(&paddr), "write outside RAM at {paddr:#x}");
        self.0.lock().unwrap().insert(paddr & !3, value);
    }
    fn read_u64(&self, paddr: u64) -> Option<u64> {
        Some(u64::from(self.read_u32(paddr)?) | (u64::from(self.read_u32(paddr + 4)?) << 32))
    }
    fn writable(&self, paddr: u64, len: u64) -> bool {
        paddr >= RAM.start && paddr + len <= RAM.end
    }
}

impl Ram {
    fn words(&self, at: u64, n: usize) -> Vec<u32> {
        (0..n as u64)
            .map(|i| self.read_u32(at + 4 * i).unwrap())
            .collect()
    }
    fn written(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn etr(faults: TmcFaults) -> (Window<Etr>, Arc<Ram>) {
    let ram = Arc::new(Ram::default());
    let e = Etr::new(ram.clone(), WINDOW, faults).expect("ETR");
    (Window::new(e), ram)
}

/// `__tmc_etr_enable_hw` of `linux` for a flat buffer of `rsz` words at `dba`: RSZ, MODE,
/// AXICTL (read-modify-write), DBA, FFCR, TRG, CTL.
fn etr_enable(w: &mut Window<Etr>, dba: u64, rsz: u32, axictl_extra: u32) {
    w.write(LAR, UNLOCK);
    assert!(w.claim_self_hosted());
    assert_ne!(w.read(STS) & STS_TMCREADY, 0, "ready before enable");
    w.write(RSZ, rsz);
    w.write(MODE, 0);
    let mut axictl = w.read(AXICTL);
    axictl &= !0xFBF;
    axictl |= 1 << 1; // ProtCtrlBit1: non-secure
    axictl |= 0xF << 8; // WrBurstLen 16
    axictl |= 0xF << 2; // AXCACHE: write-back, read and write allocate
    w.write(AXICTL, axictl | axictl_extra);
    w.write(DBALO, dba as u32);
    w.write(DBAHI, (dba >> 32) as u32);
    w.write(FFCR, FFCR_LINUX);
    w.write(TRG, 0);
    w.write(CTL, 1);
}

fn etr_flush_and_stop(w: &mut Window<Etr>, max: usize) -> (Option<usize>, Option<usize>) {
    let ffcr = w.read(FFCR) | FFCR_STOPONFL;
    w.write(FFCR, ffcr);
    w.write(FFCR, ffcr | FFCR_FLUSHMAN);
    let flush = w.poll(FFCR, FFCR_FLUSHMAN, 0, max);
    let ready = w.poll(STS, STS_TMCREADY, STS_TMCREADY, max);
    (flush, ready)
}

/// Trace from a source, then the window restaged as the plugin does at the next access.
fn etr_push(w: &mut Window<Etr>, id: u8, bytes: &[u8]) -> usize {
    let n = w.c.push_trace(id, bytes);
    w.restage();
    n
}

fn pair(w: &mut Window<Etr>, lo: u32, hi: u32) -> u64 {
    u64::from(w.read(lo)) | (u64::from(w.read(hi)) << 32)
}

#[test]
fn etr_reset_identification_and_devid() {
    let (mut w, _) = etr(TmcFaults::default());
    check_identification(&mut w, 0x000B_B961);
    let devid = w.read(DEVID);
    assert_eq!(devid, 0x0151_0340);
    assert_eq!((devid >> 6) & 3, 1, "CONFIGTYPE: ETR");
    assert_eq!((devid >> 8) & 7, 3, "MEMWIDTH: 64-bit");
    assert_ne!(devid & (1 << 16), 0, "AXIAW_VALID");
    assert_eq!((devid >> 17) & 0x7F, 40, "AXIAW: 40-bit addresses");
    assert_ne!(devid & (1 << 24), 0, "NOSCAT: no scatter-gather");
    assert_eq!(w.read(DEVTYPE), 0x21);
    assert_eq!(
        w.read(AUTHSTATUS) & 3,
        3,
        "NSID: linux's ETR probe needs non-secure access"
    );
    for r in [
        RSZ, RRP, RRPHI, RWP, RWPHI, DBALO, DBAHI, AXICTL, CTL, CBUFLEVEL,
    ] {
        assert_eq!(w.read(r), 0, "register {r:#x} resets to zero");
    }
    assert_eq!(w.read(STS), STS_TMCREADY | (1 << 3), "TMCReady, FtEmpty");
    assert_eq!(w.read(LSR), 0x3, "locked at reset");
    w.write(RSZ, 0x100);
    assert_eq!(w.read(RSZ), 0, "ignored while locked");
}

#[test]
fn etr_registers_read_back_as_linux_programs_them() {
    let (mut w, _) = etr(TmcFaults::default());
    w.write(LAR, UNLOCK);
    w.write(RSZ, 0xFFFF_FFFF);
    assert_eq!(w.read(RSZ), 0x7FFF_FFFF, "RSZ bits 30:0");
    w.write(AXICTL, 0xFFFF_FFFF);
    assert_eq!(
        w.read(AXICTL),
        0xFBF,
        "SoC-400 AXICTL: bit 6 and 31:12 RES0"
    );
    w.write(DBALO, 0xFFFF_FFFF);
    w.write(DBAHI, 0xFFFF_FFFF);
    assert_eq!(
        w.read(DBALO),
        0xFFFF_FFF8,
        "aligned to the 64-bit memory width"
    );
    assert_eq!(w.read(DBAHI), 0xFF, "40-bit addresses");
    w.write(RWP, 0x1234_5678);
    w.write(RWPHI, 0x1);
    assert_eq!(pair(&mut w, RWP, RWPHI), 0x1_1234_5678);
    w.write(RRP, 0x8765_4320);
    assert_eq!(w.read(RRP), 0x8765_4320);
    w.write(STS, 0);
    assert_eq!(w.read(STS) & STS_TMCREADY, STS_TMCREADY, "STS is read-only");

    etr_enable(&mut w, 0x5000_0000, 0x400, 0);
    assert!(w.c.accepting());
    assert_eq!(w.read(RSZ), 0x400);
    assert_eq!(pair(&mut w, DBALO, DBAHI), 0x5000_0000);
    assert_eq!(w.read(AXICTL), 0xF3E);
    assert_eq!(w.read(FFCR), FFCR_LINUX);
    // Capture starts at the buffer's start: no save/restore on this part.
    assert_eq!(pair(&mut w, RWP, RWPHI), 0x5000_0000);
    assert_eq!(pair(&mut w, RRP, RRPHI), 0x5000_0000);
    assert_eq!(w.read(STS) & (STS_FULL | STS_MEMERR | STS_TMCREADY), 0);
    // Not Disabled: the buffer registers ignore writes.
    for r in [RSZ, DBALO, RWP, RRP, AXICTL] {
        let before = w.read(r);
        w.write(r, 0x40);
        assert_eq!(
            w.read(r),
            before,
            "register {r:#x} ignores writes while capturing"
        );
    }
}

#[test]
fn etr_writes_frames_to_memory_and_stops_like_the_crash_data_path() {
    let (mut w, ram) = etr(TmcFaults::default());
    let dba = 0x5000_0000;
    etr_enable(&mut w, dba, 0x400, 0);
    let a: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(29) ^ 0x3C).collect();
    assert_eq!(etr_push(&mut w, 0x10, &a), a.len());
    let rwp = pair(&mut w, RWP, RWPHI);
    assert!(
        rwp > dba && (rwp - dba).is_multiple_of(16),
        "whole frames at DBA ({rwp:#x})"
    );
    assert_eq!(u64::from(w.read(CBUFLEVEL)), (rwp - dba) / 4);

    // tmc_panic_sync_etr: CTL set and FtStopped clear, so flush and stop, wait TMCReady.
    assert_eq!(w.read(CTL), 1);
    assert_eq!(w.read(FFSR) & 2, 0);
    let (flush, ready) = etr_flush_and_stop(&mut w, 100);
    assert!(flush.expect("flush completes") > 1 && ready.expect("ready") > 1);
    assert_eq!(w.read(FFSR) & 2, 2, "FtStopped");
    assert!(!w.c.accepting());
    let rwp = pair(&mut w, RWP, RWPHI);
    let rrp = pair(&mut w, RRP, RRPHI);
    assert_eq!(rrp, dba, "not wrapped: the data starts at DBA");
    assert_eq!(w.read(STS) & (STS_FULL | STS_MEMERR), 0);
    let n = ((rwp - rrp) / 4) as usize;
    let words = ram.words(dba, n);
    assert_eq!(
        deformat(&words),
        tagged(0x10, &a),
        "the frames in memory carry the trace"
    );
    assert_eq!(
        w.c.held(),
        (words.iter().flat_map(|w| w.to_le_bytes()).collect(), false)
    );
    // RRD reads the same words, then the empty marker.
    let mut drained = Vec::new();
    loop {
        let v = w.read(RRD);
        if v == 0xFFFF_FFFF {
            break;
        }
        drained.push(v);
    }
    assert_eq!(drained, words);
    assert_ne!(w.read(STS) & STS_EMPTY, 0);
    w.write(CTL, 0);
    assert_eq!(w.read(CTL), 0);
}

#[test]
fn etr_wraps_in_circular_mode_and_rrp_points_at_the_oldest_data() {
    let (mut w, ram) = etr(TmcFaults::default());
    let dba = 0x6000_0000;
    // 64 words: 16 frames.
    etr_enable(&mut w, dba, 64, 0);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    assert_eq!(etr_push(&mut w, 0x07, &data), data.len());
    assert_ne!(w.read(STS) & STS_FULL, 0, "Full after a wrap");
    assert_eq!(w.read(CBUFLEVEL), 64);
    let (flush, ready) = etr_flush_and_stop(&mut w, 100);
    assert!(flush.is_some() && ready.is_some());
    let rwp = pair(&mut w, RWP, RWPHI);
    let rrp = pair(&mut w, RRP, RRPHI);
    assert!(
        rwp >= dba && rwp < dba + 256 && (rwp - dba).is_multiple_of(16),
        "{rwp:#x}"
    );
    assert_eq!(rrp, rwp, "RRP at the oldest data");
    assert!(ram.written() <= 64, "nothing written outside the buffer");
    let off = (rwp - dba) as usize / 4;
    let all = ram.words(dba, 64);
    let mut oldest_first = all[off..].to_vec();
    oldest_first.extend_from_slice(&all[..off]);
    let (held, full) = w.c.held();
    assert!(full);
    let held_words: Vec<u32> = held
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(held_words, oldest_first);
    let got = deformat_from(&oldest_first, Some(0x07));
    assert!(got.len() >= 14 * 14, "{}", got.len());
    assert_eq!(got, tagged(0x07, &data[data.len() - got.len()..]));
}

#[test]
fn etr_refuses_scatter_gather_with_a_memory_error() {
    let (mut w, ram) = etr(TmcFaults::default());
    etr_enable(&mut w, 0x5000_0000, 0x400, 1 << 7);
    assert_eq!(w.read(AXICTL) & (1 << 7), 1 << 7);
    let events = w.c.take_events();
    assert!(
        events
            .iter()
            .any(|e| e.contains("scatter-gather") && e.contains("refused")),
        "{events:?}"
    );
    etr_push(&mut w, 0x10, &[0x55; 200]);
    assert_ne!(w.read(STS) & STS_MEMERR, 0, "MemErr");
    assert_eq!(ram.written(), 0, "no table walked, nothing written");
    assert!(w.c.take_events().iter().any(|e| e.contains("STS.MemErr")));
    // The next session, flat, works again.
    etr_flush_and_stop(&mut w, 100);
    w.write(CTL, 0);
    let axictl = w.read(AXICTL);
    w.write(AXICTL, axictl & !(1 << 7));
    w.write(CTL, 1);
    assert_eq!(w.read(STS) & STS_MEMERR, 0, "cleared when capture starts");
    etr_push(&mut w, 0x10, &[0x55; 200]);
    assert!(ram.written() > 0);
}

#[test]
fn etr_memory_error_outside_guest_ram_or_in_the_window() {
    for dba in [0x9000_0000u64, WINDOW.start] {
        let (mut w, ram) = etr(TmcFaults::default());
        etr_enable(&mut w, dba, 0x100, 0);
        etr_push(&mut w, 0x10, &[1; 64]);
        assert_ne!(w.read(STS) & STS_MEMERR, 0, "MemErr at {dba:#x}");
        assert_eq!(ram.written(), 0);
    }
}

#[test]
fn etr_faults_never_ready_and_flush_stuck() {
    let (mut w, _) = etr(TmcFaults {
        never_ready: true,
        ..TmcFaults::default()
    });
    etr_enable(&mut w, 0x5000_0000, 0x100, 0);
    etr_push(&mut w, 0x10, &[1; 40]);
    let (flush, ready) = etr_flush_and_stop(&mut w, 1000);
    assert!(flush.is_some());
    assert_eq!(ready, None, "TMCReady never rises");

    let (mut w, _) = etr(TmcFaults {
        flush_stuck: true,
        ..TmcFaults::default()
    });
    etr_enable(&mut w, 0x5000_0000, 0x100, 0);
    let (flush, ready) = etr_flush_and_stop(&mut w, 1000);
    assert_eq!((flush, ready), (None, None));
    assert!(w.c.accepting(), "still capturing");

    let (mut w, ram) = etr(TmcFaults {
        rrd_stuck: true,
        ..TmcFaults::default()
    });
    etr_enable(&mut w, 0x5000_0000, 0x100, 0);
    etr_push(&mut w, 0x10, &[0xAB; 40]);
    etr_flush_and_stop(&mut w, 100);
    let first = ram.words(0x5000_0000, 1)[0];
    let words: Vec<u32> = (0..500).map(|_| w.read(RRD)).collect();
    assert!(words.iter().all(|&v| v == first), "RRD stuck on one word");
}

// ---------------------------------------------------------------------------------------------
// Funnel

const FUNCTL: u32 = 0x000;
const PRICTL: u32 = 0x004;

#[test]
fn funnel_reset_and_identification() {
    let mut w = Window::new(Funnel::new(8));
    check_identification(&mut w, 0x000B_B908);
    assert_eq!(w.read(FUNCTL), 0x300);
    assert_eq!(w.read(PRICTL), 0x00FA_C688);
    assert_eq!(w.read(DEVID) & 0xF, 8);
    assert_eq!(w.read(DEVTYPE), 0x12);
    assert_eq!(w.read(LSR), 0x3);
    assert_eq!(w.read(CLAIMSET), 0xF);
    assert!((0..8).all(|p| !w.c.port_enabled(p)));

    let mut small = Window::new(Funnel::new(2));
    assert_eq!(small.read(DEVID) & 0xF, 2);
    assert_eq!(small.read(PRICTL), 0x08, "two ports: priorities 0 and 1");
}

#[test]
fn funnel_port_enables_as_linux_programs_them() {
    let mut w = Window::new(Funnel::new(4));
    // Locked: ignored.
    w.write(FUNCTL, 0x301);
    assert_eq!(w.read(FUNCTL), 0x300);
    assert!(!w.c.port_enabled(0));

    // dynamic_funnel_enable_hw for port 2.
    w.write(LAR, UNLOCK);
    let functl = w.read(FUNCTL);
    assert_eq!(functl & 0xFF, 0);
    assert!(w.claim_self_hosted());
    let functl = (functl & !(0xF << 8)) | (0x7 << 8) | (1 << 2);
    w.write(FUNCTL, functl);
    w.write(PRICTL, 0);
    w.write(LAR, 0);
    assert_eq!(w.read(FUNCTL), 0x704);
    assert_eq!(w.read(PRICTL), 0);
    assert!(w.c.port_enabled(2));
    assert!(!w.c.port_enabled(0) && !w.c.port_enabled(3));

    // Ports beyond the fourth do not exist.
    w.write(LAR, UNLOCK);
    w.write(FUNCTL, 0x7FF);
    assert_eq!(w.read(FUNCTL), 0x70F);
    assert!(!w.c.port_enabled(4));
    // dynamic_funnel_disable_hw: clear the port, release the claim when none is left.
    w.write(FUNCTL, 0x700);
    w.write(CLAIMCLR, 2);
    assert_eq!(w.read(CLAIMCLR), 0);
    assert!((0..4).all(|p| !w.c.port_enabled(p)));
}

// ---------------------------------------------------------------------------------------------
// ETM

const TRCPRGCTLR: u32 = 0x004;
const TRCSTATR: u32 = 0x00C;
const TRCCONFIGR: u32 = 0x010;
const TRCEVENTCTL0R: u32 = 0x020;
const TRCEVENTCTL1R: u32 = 0x024;
const TRCSTALLCTLR: u32 = 0x02C;
const TRCTSCTLR: u32 = 0x030;
const TRCSYNCPR: u32 = 0x034;
const TRCCCCTLR: u32 = 0x038;
const TRCBBCTLR: u32 = 0x03C;
const TRCTRACEIDR: u32 = 0x040;
const TRCVICTLR: u32 = 0x080;
const TRCVIIECTLR: u32 = 0x084;
const TRCVISSCTLR: u32 = 0x088;
const TRCIDR0: u32 = 0x1E0;
const TRCOSLAR: u32 = 0x300;
const TRCOSLSR: u32 = 0x304;
const TRCPDCR: u32 = 0x310;
const TRCPDSR: u32 = 0x314;
const TRCCIDCCTLR0: u32 = 0x680;

const IDLE: u32 = 1 << 0;
const PMSTABLE: u32 = 1 << 1;

fn trcidr(n: u32) -> u32 {
    if n < 8 {
        TRCIDR0 + 4 * n
    } else {
        0x180 + 4 * (n - 8)
    }
}

fn acvr(n: u32) -> u64 {
    0xFFFF_8000_0010_0000 + u64::from(n) * 0x1_0000_1000
}

/// What `linux`'s probe does: CoreSight check, DEVTYPE, DEVARCH, OS lock model, OS unlock, unlock.
fn etm_probe(w: &mut Window<Etm>) {
    assert_eq!(w.cid(), PrimeCellId::CORESIGHT_CID);
    assert_eq!(w.read(DEVTYPE), 0x13, "PE trace");
    let devarch = w.read(DEVARCH);
    assert_eq!(devarch & 0xFFF0_FFFF, 0x4770_4A13, "ETMv4 DEVARCH");
    assert_eq!(w.read(TRCOSLSR) & 0x9, 0x8, "OSLM = 0b10: OS lock present");
    w.write(TRCOSLAR, 0);
    w.write(LAR, UNLOCK);
}

/// `etm4_enable_hw` with the given values, then `etm4_enable_trace_unit`.
fn etm_program(w: &mut Window<Etm>, regs: &[(u32, u32)]) {
    w.write(LAR, UNLOCK);
    w.write(TRCOSLAR, 0);
    assert!(w.claim_self_hosted());
    w.write(TRCPRGCTLR, 0);
    assert!(w.poll(TRCSTATR, IDLE, IDLE, 100).is_some(), "idle");
    for &(off, v) in regs {
        w.write(off, v);
    }
    let pdcr = w.read(TRCPDCR);
    w.write(TRCPDCR, pdcr | (1 << 3));
    w.write(TRCPRGCTLR, 1);
    let polls = w.poll(TRCSTATR, IDLE, 0, 100).expect("leaves idle");
    assert!(polls > 1, "IDLE takes a few accesses to clear ({polls})");
    w.write(LAR, 0);
}

fn etm_disable(w: &mut Window<Etm>) -> (Option<usize>, Option<usize>) {
    w.write(LAR, UNLOCK);
    w.write(TRCPRGCTLR, 0);
    let pm = w.poll(TRCSTATR, PMSTABLE, PMSTABLE, 100);
    let idle = w.poll(TRCSTATR, IDLE, IDLE, 100);
    w.write(CLAIMCLR, 2);
    w.write(LAR, 0);
    (pm, idle)
}

#[test]
fn etm_reset_identification_and_os_lock() {
    let mut w = Window::new(Etm::new(1, EtmFaults::default()));
    assert_eq!(w.c.cpu(), 1);
    check_identification(&mut w, 0x000B_B95E);
    assert_eq!(w.read(DEVTYPE), 0x13);
    assert_eq!(w.read(DEVARCH), 0x4770_4A13);
    assert_eq!(w.read(AUTHSTATUS), 0xCC);
    assert_eq!(w.read(LSR), 0x3);
    assert_eq!(w.read(TRCOSLSR), 0xA, "OSLM implemented, OSLK set at reset");
    assert_eq!(w.read(TRCPDSR), 0x23, "POWER, STICKYPD, OSLK");
    assert_eq!(
        w.read(TRCIDR0),
        0,
        "trace registers read zero while the OS lock is set"
    );
    assert_eq!(w.read(CLAIMSET), 0xF);

    etm_probe(&mut w);
    assert_eq!(w.read(TRCOSLSR), 0x8, "OS lock clear");
    assert_eq!(
        w.read(TRCPDSR),
        0x1,
        "STICKYPD cleared by the previous read"
    );

    let idr: Vec<u32> = (0..14).map(|n| w.read(trcidr(n))).collect();
    assert_eq!(
        idr,
        [
            0x2000_0C01,
            0x4100_F402,
            0x0000_0008,
            0x0D7B_0000,
            0x0017_0004,
            0x28C7_0004,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0
        ]
    );
    // The fields linux's etm4_init_arch_data decodes.
    let (i0, i2, i3, i4) = (idr[0], idr[2], idr[3], idr[4]);
    assert_eq!((i0 >> 24) & 0x1F, 0, "TSSIZE: no timestamps");
    assert_eq!(i0 & (1 << 7), 0, "TRCCCI: no cycle counting");
    assert_eq!(i0 & (1 << 9), 0, "RETSTACK");
    assert_eq!(i0 & (1 << 5), 0, "TRCBB");
    assert_eq!(i0 & (1 << 6), 0, "TRCCOND");
    assert_eq!((i0 >> 10) & 3, 3, "NUMEVENT");
    assert_ne!(i0 & (1 << 29), 0, "COMMOPT");
    assert_eq!(i2 & 0x1F, 8, "IASIZE 64-bit");
    assert_eq!((i2 >> 5) & 0x1F, 0, "CIDSIZE");
    assert_eq!((i2 >> 10) & 0x1F, 0, "VMIDSIZE");
    assert_eq!((i3 >> 16) & 0xF, 0xB, "EXLEVEL_S");
    assert_eq!((i3 >> 20) & 0xF, 0x7, "EXLEVEL_NS");
    assert_eq!(i4 & 0xF, 4, "NUMACPAIRS");
    assert_eq!((i4 >> 24) & 0xF, 0, "NUMCIDC");
    assert_eq!((i4 >> 28) & 0xF, 0, "NUMVMIDC");

    // The OS lock set again makes the trace registers inaccessible.
    w.write(TRCOSLAR, 1);
    assert_eq!(w.read(TRCOSLSR), 0xA);
    assert_eq!(w.read(TRCIDR0), 0);
}

#[test]
fn etm_software_lock_and_claim() {
    let mut w = Window::new(Etm::new(0, EtmFaults::default()));
    // linux's probe clears the OS lock before it unlocks the software lock.
    w.write(TRCOSLAR, 0);
    assert_eq!(
        w.read(TRCOSLSR) & 0x2,
        0,
        "OSLAR is not gated by the software lock"
    );
    w.write(TRCCONFIGR, 0x33);
    assert_eq!(w.read(TRCCONFIGR), 0, "trace registers are");
    w.write(CLAIMSET, 2);
    assert_eq!(w.read(CLAIMCLR), 0, "CLAIMSET ignored while locked");
    w.write(LAR, UNLOCK);
    assert_eq!(w.read(LSR), 0x1);
    w.write(TRCCONFIGR, 0x11);
    w.write(LAR, 0);
    w.write(TRCCONFIGR, 0x22);
    assert_eq!(w.read(TRCCONFIGR), 0x11, "write ignored while locked");
    w.write(LAR, UNLOCK);
    assert!(w.claim_self_hosted());
    assert!(!w.claim_self_hosted(), "already claimed");
    w.write(CLAIMCLR, 2);
    assert_eq!(w.read(CLAIMCLR), 0);
    w.write(TRCCIDCCTLR0, 0xFFFF_FFFF);
    assert_eq!(w.read(TRCCIDCCTLR0), 0, "no context ID comparators: RAZ/WI");
}

#[test]
fn etm_program_read_back_and_decode() {
    let mut w = Window::new(Etm::new(0, EtmFaults::default()));
    etm_probe(&mut w);
    assert!(!w.c.enabled());
    assert_eq!(w.c.program(), None);

    // Start at comparator 0, stop at comparator 5, include range 1 (comparators 2-3), exclude
    // range 2 (comparators 4-5); EVENT = resource 1 (TRUE), SSSTATUS, exclude NS EL0 and S EL3.
    let victlr = 0x01 | (1 << 9) | (0x1 << 20) | (0x8 << 16);
    let mut regs = vec![
        (TRCCONFIGR, 0x0000_0008),
        (TRCEVENTCTL0R, 0x0000_0101),
        (TRCEVENTCTL1R, 0x0000_0800),
        (TRCSTALLCTLR, 0x0000_0002),
        (TRCTSCTLR, 0),
        (TRCSYNCPR, 0xC),
        (TRCCCCTLR, 0x0000_0100),
        (TRCBBCTLR, 0),
        (TRCTRACEIDR, 0x12),
        (TRCVICTLR, victlr),
        (TRCVIIECTLR, (1 << 1) | (1 << 18)),
        (TRCVISSCTLR, 1 | (1 << 21)),
    ];
    // Comparator n: EXLEVEL_S = S EL3 (bit 11), EXLEVEL_NS = NS EL0 for odd n (bit 12).
    let acatr = |n: u32| 0x800 | if n % 2 == 1 { 0x1000 } else { 0 };
    for n in 0..8 {
        let a = acvr(n);
        regs.push((0x400 + 8 * n, a as u32));
        regs.push((0x404 + 8 * n, (a >> 32) as u32));
        regs.push((0x480 + 8 * n, acatr(n)));
        regs.push((0x484 + 8 * n, 0));
    }
    etm_program(&mut w, &regs);
    assert!(w.c.enabled());
    w.write(LAR, UNLOCK);
    for &(off, v) in &regs {
        assert_eq!(w.read(off), v, "register {off:#x} reads back");
    }
    assert_eq!(w.read(TRCPRGCTLR), 1);
    assert_eq!(w.read(TRCPDCR), 1 << 3);

    // Not idle: writes to the trace registers are ignored.
    w.write(TRCCONFIGR, 0xFFFF);
    assert_eq!(w.read(TRCCONFIGR), 0x8);
    w.write(TRCVISSCTLR, 0);
    w.write(0x400, 0x1234);
    assert_eq!(
        w.read(TRCVISSCTLR),
        1 | (1 << 21),
        "TRCVISSCTLR ignores writes while enabled"
    );
    assert_eq!(
        w.read(0x400),
        acvr(0) as u32,
        "TRCACVR0 ignores writes while enabled"
    );

    let p = w.c.program().expect("enabled");
    assert_eq!(p.trace_id, 0x12);
    assert_eq!(p.configr, 0x8);
    assert_eq!(p.victlr, victlr);
    assert_eq!(p.exclude_el_ns, 0x1);
    assert_eq!(p.exclude_el_s, 0x8);
    assert_eq!(p.event, ViewEvent::True);
    assert!(p.started);
    let cmp = |n: u32| AddrComparator {
        index: n as u8,
        addr: acvr(n),
        exclude_el_ns: (n % 2) as u8,
        exclude_el_s: 0x8,
    };
    assert_eq!(
        p.start_stop,
        Some(StartStop {
            start: vec![cmp(0)],
            stop: vec![cmp(5)],
        })
    );
    assert_eq!(
        p.include,
        vec![AddrRange {
            pair: 1,
            lo: acvr(2),
            hi: acvr(3),
            exclude_el_ns: 0
        }]
    );
    assert_eq!(
        p.exclude,
        vec![AddrRange {
            pair: 2,
            lo: acvr(4),
            hi: acvr(5),
            exclude_el_ns: 0
        }]
    );
    assert_eq!(p.sync_period_bytes, 4096);

    let (pm, idle) = etm_disable(&mut w);
    assert!(pm.is_some() && idle.is_some());
    assert!(!w.c.enabled());
    assert_eq!(w.c.program(), None);

    // Reprogram: EVENT selects resource 0 (FALSE), no filters, no periodic sync.
    etm_program(
        &mut w,
        &[
            (TRCVICTLR, 0),
            (TRCVIIECTLR, 0),
            (TRCVISSCTLR, 0),
            (TRCSYNCPR, 0),
        ],
    );
    let p = w.c.program().expect("enabled");
    assert!(p.event_always_false());
    assert_eq!(p.event, ViewEvent::False);
    assert!(!p.started);
    assert_eq!(p.start_stop, None);
    assert!(p.include.is_empty() && p.exclude.is_empty());
    assert_eq!(p.sync_period_bytes, 0);
    assert_eq!((p.exclude_el_ns, p.exclude_el_s), (0, 0));
    assert_eq!(p.trace_id, 0x12, "kept from the first programming");
}

/// The ViewInst, comparator and resource registers the kernel's driver programs for the
/// hardware stop: reset values, the implemented bits (IHI 0064: RES0 fields read as zero),
/// the comparators `TRCIDR4.NUMACPAIRS` advertises and no more, and the write gating.
#[test]
fn etm_viewinst_registers_reset_fields_and_gating() {
    const TRCRSCTLR: u32 = 0x200;
    const TRCSSCCR0: u32 = 0x280;
    const TRCSSCSR0: u32 = 0x2A0;
    let mut w = Window::new(Etm::new(0, EtmFaults::default()));

    // While the OS lock is set (reset) the trace registers read as zero and ignore writes.
    w.write(LAR, UNLOCK);
    w.write(TRCVICTLR, 0x201);
    w.write(TRCOSLAR, 0);
    assert_eq!(w.read(TRCVICTLR), 0, "write ignored under the OS lock");

    // The ID fields that size these registers.
    let i3 = w.read(trcidr(3));
    let i4 = w.read(trcidr(4));
    assert_eq!(i4 & 0xF, 4, "NUMACPAIRS: 4 pairs, 8 single comparators");
    assert_eq!((i4 >> 12) & 0xF, 0, "NUMPC: no PE comparator inputs");
    assert_eq!(
        (i4 >> 16) & 0xF,
        7,
        "NUMRSPAIR: 8 resource pairs, 16 resources"
    );
    assert_eq!(
        (i4 >> 20) & 0xF,
        1,
        "NUMSSCC: one single-shot comparator control"
    );
    assert_ne!(i3 & (1 << 24), 0, "TRCERR implemented");

    // Reset values (zero), then all ones written: the implemented bits read back.
    let all: Vec<(u32, u32)> = [TRCVICTLR, TRCVIIECTLR, TRCVISSCTLR, TRCSSCCR0]
        .into_iter()
        .chain((0..16).map(|n| TRCRSCTLR + 4 * n))
        .chain((0x400..0x500).step_by(4))
        .map(|o| (o, 0xFFFF_FFFF))
        .collect();
    for &(o, _) in &all {
        assert_eq!(w.read(o), 0, "register {o:#x} resets to zero");
    }
    assert_eq!(
        w.read(TRCSSCSR0),
        0x1,
        "TRCSSCSR0.INST: instruction address comparisons"
    );
    for &(o, v) in &all {
        w.write(o, v);
    }
    // EVENT.TYPE, EVENT.SEL[3:0] (16 resources), SSSTATUS, TRCRESET, TRCERR, EXLEVEL_S of S
    // EL0/EL1/EL3 (no Secure EL2), EXLEVEL_NS of NS EL0-EL2.
    assert_eq!(w.read(TRCVICTLR), 0x007B_0E8F);
    assert_eq!(
        w.read(TRCVIIECTLR),
        0x000F_000F,
        "INCLUDE/EXCLUDE of 4 pairs"
    );
    assert_eq!(
        w.read(TRCVISSCTLR),
        0x00FF_00FF,
        "START/STOP of 8 comparators"
    );
    assert_eq!(w.read(TRCSSCCR0), 0x010F_00FF);
    for n in 0..8 {
        assert_eq!(w.read(0x400 + 8 * n), 0xFFFF_FFFF, "TRCACVR{n} low");
        assert_eq!(
            w.read(0x404 + 8 * n),
            0xFFFF_FFFF,
            "TRCACVR{n} high: 64-bit IA"
        );
        assert_eq!(
            w.read(0x480 + 8 * n),
            0x7B00,
            "TRCACATR{n}: EXLEVEL_S/NS only"
        );
        assert_eq!(w.read(0x484 + 8 * n), 0, "TRCACATR{n} high: RES0");
    }
    for n in 8..16 {
        assert_eq!(
            w.read(0x400 + 8 * n),
            0,
            "comparator {n} is not implemented"
        );
        assert_eq!(
            w.read(0x480 + 8 * n),
            0,
            "comparator {n} is not implemented"
        );
    }
    assert_eq!(w.read(TRCRSCTLR), 0, "resource 0 has no selector");
    assert_eq!(w.read(TRCRSCTLR + 4), 0, "resource 1 has no selector");
    for n in 2..16 {
        let want = if n % 2 == 0 { 0x003F_FFFF } else { 0x001F_FFFF };
        assert_eq!(
            w.read(TRCRSCTLR + 4 * n),
            want,
            "TRCRSCTLR{n}: PAIRINV only when even"
        );
    }
    w.write(TRCSSCSR0, 0);
    assert_eq!(
        w.read(TRCSSCSR0),
        0x1,
        "STATUS written clear, INST read-only"
    );

    // What the kernel's driver writes for the hardware stop reads back exactly.
    let stop = 0xFFFF_8000_1234_5678u64 & !3;
    let writes = [
        (TRCVICTLR, 0x01 | (1 << 9) | (0xB << 16)),
        (TRCVIIECTLR, 0),
        (TRCVISSCTLR, 0b111 << 16),
        (0x400, stop as u32),
        (0x404, (stop >> 32) as u32),
        (0x480, 0xB << 8 | 0x4 << 12),
    ];
    for &(o, v) in &writes {
        w.write(o, v);
        assert_eq!(w.read(o), v, "register {o:#x}");
    }

    // The software lock ignores writes.
    w.write(LAR, 0);
    w.write(TRCVISSCTLR, 0);
    w.write(0x400, 0);
    assert_eq!(
        w.read(TRCVISSCTLR),
        0b111 << 16,
        "ignored under the software lock"
    );
    assert_eq!(w.read(0x400), stop as u32);
    w.write(LAR, UNLOCK);
    // The OS lock makes them read as zero, and keeps them.
    w.write(TRCOSLAR, 1);
    assert_eq!(w.read(TRCVISSCTLR), 0);
    w.write(TRCVISSCTLR, 1);
    w.write(TRCOSLAR, 0);
    assert_eq!(w.read(TRCVISSCTLR), 0b111 << 16, "kept across the OS lock");
}

/// The resource `TRCVICTLR.EVENT` selects: 0 is FALSE, 1 is TRUE, a selector that selects
/// nothing is FALSE (or TRUE inverted); what the emulation does not evaluate is named.
#[test]
fn etm_viewinst_event_resources() {
    const TRCRSCTLR: u32 = 0x200;
    let mut w = Window::new(Etm::new(0, EtmFaults::default()));
    etm_probe(&mut w);
    let cases: [(&[(u32, u32)], ViewEvent); 6] = [
        (&[(TRCVICTLR, 0x00)], ViewEvent::False),
        (&[(TRCVICTLR, 0x01)], ViewEvent::True),
        (&[(TRCVICTLR, 0x02), (TRCRSCTLR + 8, 0)], ViewEvent::False),
        (
            &[(TRCVICTLR, 0x03), (TRCRSCTLR + 12, 1 << 20)],
            ViewEvent::True,
        ),
        (
            &[(TRCVICTLR, 0x05), (TRCRSCTLR + 20, (4 << 16) | 1)],
            ViewEvent::NotEmulated(0x05),
        ),
        (&[(TRCVICTLR, 0x80)], ViewEvent::NotEmulated(0x80)),
    ];
    for (regs, want) in cases {
        etm_program(&mut w, regs);
        assert_eq!(w.c.program().expect("enabled").event, want, "{regs:x?}");
        etm_disable(&mut w);
    }
}

#[test]
fn etm_fault_os_lock_stuck() {
    let faults = EtmFaults {
        os_lock_stuck: true,
        ..EtmFaults::default()
    };
    let mut w = Window::new(Etm::new(0, faults));
    w.write(LAR, UNLOCK);
    w.write(TRCOSLAR, 0);
    assert_eq!(w.read(TRCOSLSR) & 0x2, 0x2, "OSLK stays set");
    assert_ne!(w.read(TRCPDSR) & (1 << 5), 0);
    assert_eq!(w.read(trcidr(1)), 0);
    w.write(TRCTRACEIDR, 0x10);
    w.write(TRCPRGCTLR, 1);
    assert!(!w.c.enabled(), "trace registers ignore writes");
    assert_eq!(w.c.program(), None);
}

#[test]
fn etm_fault_never_idle() {
    let faults = EtmFaults {
        never_idle: true,
        ..EtmFaults::default()
    };
    let mut w = Window::new(Etm::new(0, faults));
    etm_probe(&mut w);
    etm_program(&mut w, &[(TRCTRACEIDR, 0x10), (TRCVICTLR, 1)]);
    let (pm, idle) = etm_disable(&mut w);
    assert_eq!(idle, None, "IDLE never rises");
    assert_eq!(pm, None);
    assert!(!w.c.enabled(), "EN is clear all the same");
}

// ---------------------------------------------------------------------------------------------
// CPU debug

const EDPCSR: u32 = 0x0A0;
const EDCIDSR: u32 = 0x0A4;
const EDVIDSR: u32 = 0x0A8;
const EDPCSR_HI: u32 = 0x0AC;
const EDOSLAR: u32 = 0x300;
const EDPRCR: u32 = 0x310;
const EDPRSR: u32 = 0x314;
const EDDEVID1: u32 = 0xFC4;

const PU: u32 = 1 << 0;
const OSLK: u32 = 1 << 5;
const DLK: u32 = 1 << 6;
const COREPURQ: u32 = 1 << 3;
const CORENPDRQ: u32 = 1 << 0;

/// `debug_read_regs` of `linux`'s `coresight-cpu-debug`: returns (EDPRSR, PCSR lo, hi, CIDSR,
/// VIDSR), or the EDPRSR alone when access is not permitted.
fn debug_read_regs(w: &mut Window<CpuDebug>) -> (u32, Option<(u32, u32, u32, u32)>) {
    w.write(LAR, UNLOCK);
    w.write(EDOSLAR, 0);
    let saved = w.read(EDPRCR);
    // debug_force_cpu_powered_up, bounded.
    let edprcr = w.read(EDPRCR) | COREPURQ;
    w.write(EDPRCR, edprcr);
    let mut edprsr = 0;
    for _ in 0..50 {
        edprsr = w.read(EDPRSR);
        if edprsr & PU != 0 {
            break;
        }
    }
    if edprsr & PU != 0 {
        let edprcr = w.read(EDPRCR) | COREPURQ | CORENPDRQ;
        w.write(EDPRCR, edprcr);
        edprsr = w.read(EDPRSR);
    }
    let mut sample = None;
    if edprsr & PU != 0 && edprsr & DLK == 0 {
        let lo = w.read(EDPCSR);
        let hi = w.read(EDPCSR_HI);
        let cid = w.read(EDCIDSR);
        let vid = w.read(EDVIDSR);
        sample = Some((lo, hi, cid, vid));
    }
    w.write(EDPRCR, saved);
    w.write(LAR, 0);
    (edprsr, sample)
}

#[test]
fn cpu_debug_reset_and_identification() {
    let mut w = Window::new(CpuDebug::new(3, CpuDebugFaults::default()));
    assert_eq!(w.c.cpu(), 3);
    check_identification(&mut w, 0x000B_BD07);
    assert_eq!(w.read(DEVARCH), 0x4770_6A15);
    assert_eq!(w.read(DEVTYPE), 0x15);
    assert_eq!(w.read(DEVID) & 0xF, 3, "PCSample: EDPCSR, EDCIDSR, EDVIDSR");
    assert_eq!(w.read(EDDEVID1) & 0xF, 2, "PCSROffset: no offset");
    assert_eq!(w.read(AUTHSTATUS), 0xFF);
    assert_eq!(w.read(LSR), 0x3);
    assert_eq!(w.read(CLAIMSET), 0xFF);
    assert_eq!(w.read(EDPRCR), 0);
    let edprsr = w.read(EDPRSR);
    assert_eq!(edprsr & (PU | OSLK | DLK), PU, "running core, locks clear");
}

#[test]
fn cpu_debug_power_up_and_sample() {
    let mut w = Window::new(CpuDebug::new(0, CpuDebugFaults::default()));
    let pc = 0xFFFF_8000_1234_5678;
    w.c.set_sample(pc, 1, true);
    w.restage();
    let (edprsr, sample) = debug_read_regs(&mut w);
    assert_eq!(edprsr & (PU | DLK), PU);
    let (lo, hi, cid, vid) = sample.expect("access permitted");
    assert_eq!(u64::from(hi) << 32 | u64::from(lo), pc);
    assert_eq!(cid, 0);
    assert_eq!(vid, (1 << 31) | (1 << 28), "NS, AArch64, EL1");
    assert_eq!(w.read(EDPRCR), 0, "EDPRCR restored");

    // The power-up request reads back; EL2 samples flag E2.
    w.write(LAR, UNLOCK);
    w.write(EDPRCR, COREPURQ | CORENPDRQ);
    assert_eq!(w.read(EDPRCR), COREPURQ | CORENPDRQ);
    w.c.set_sample(0x8000_0000, 2, true);
    w.restage();
    assert_eq!(w.read(EDPCSR), 0x8000_0000);
    assert_eq!(w.read(EDPCSR_HI), 0);
    assert_eq!(w.read(EDVIDSR), (1 << 31) | (1 << 30) | (1 << 28));
}

#[test]
fn cpu_debug_sample_halves_never_tear() {
    let mut w = Window::new(CpuDebug::new(0, CpuDebugFaults::default()));
    w.write(LAR, UNLOCK);
    let a: u64 = 0xFFFF_8000_0000_1000;
    let b: u64 = 0x0000_0000_4000_2000;

    // peek returns the low half of the last set_sample.
    w.c.set_sample(a, 1, true);
    assert_eq!(w.c.peek(EDPCSR), a as u32);
    w.c.set_sample(b, 1, true);
    assert_eq!(w.c.peek(EDPCSR), b as u32);

    // The guest reads A's staged low half while the CPU moved on to B: the latched high half
    // and VIDSR are A's.
    w.c.set_sample(a, 3, false);
    w.restage();
    w.c.set_sample(b, 1, true);
    assert_eq!(w.read(EDPCSR), a as u32);
    assert_eq!(w.read(EDPCSR_HI), (a >> 32) as u32);
    assert_eq!(w.read(EDVIDSR), (1 << 29) | (1 << 28), "Secure EL3 of A");
    // The restage after the read shows B now.
    assert_eq!(w.read(EDPCSR), b as u32);
    assert_eq!(w.read(EDPCSR_HI), (b >> 32) as u32);
    assert_eq!(w.read(EDVIDSR), (1 << 31) | (1 << 28));
}

#[test]
fn cpu_debug_locks_and_claim() {
    let mut w = Window::new(CpuDebug::new(0, CpuDebugFaults::default()));
    w.c.set_sample(0x1234, 1, true);
    w.restage();
    // Locked: writes ignored.
    w.write(EDOSLAR, 1);
    w.write(CLAIMSET, 2);
    assert_eq!(w.read(EDPRSR) & OSLK, 0);
    assert_eq!(w.read(CLAIMCLR), 0);
    w.write(LAR, UNLOCK);
    assert_eq!(w.read(LSR), 0x1);
    assert!(w.claim_self_hosted());
    w.write(CLAIMCLR, 2);
    assert_eq!(w.read(CLAIMCLR), 0);
    // The OS lock makes the sample registers fault (read zero).
    w.write(EDOSLAR, 1);
    assert_ne!(w.read(EDPRSR) & OSLK, 0);
    assert_eq!(w.read(EDPCSR), 0);
    w.write(EDOSLAR, 0);
    assert_eq!(w.read(EDPRSR) & OSLK, 0);
    assert_eq!(w.read(EDPCSR), 0x1234);
}

#[test]
fn cpu_debug_fault_power_stays_off() {
    let faults = CpuDebugFaults {
        power_stays_off: true,
        ..CpuDebugFaults::default()
    };
    let mut w = Window::new(CpuDebug::new(0, faults));
    w.c.set_sample(0x1234, 1, true);
    w.restage();
    let (edprsr, sample) = debug_read_regs(&mut w);
    assert_eq!(edprsr & PU, 0);
    assert_eq!(sample, None);
    assert!(!w.c.powered());
    w.write(LAR, UNLOCK);
    w.write(EDPRCR, COREPURQ);
    assert_eq!(w.read(EDPRCR), COREPURQ, "the request is held");
    assert_eq!(w.poll(EDPRSR, PU, PU, 200), None, "never powers up");
    assert_eq!(w.read(EDPCSR), 0);
}

#[test]
fn cpu_debug_fault_ignores_corepurq() {
    let faults = CpuDebugFaults {
        ignores_corepurq: true,
        ..CpuDebugFaults::default()
    };
    let mut w = Window::new(CpuDebug::new(0, faults));
    let (edprsr, sample) = debug_read_regs(&mut w);
    assert_eq!(edprsr & PU, 0);
    assert_eq!(sample, None);
    w.write(LAR, UNLOCK);
    w.write(EDPRCR, COREPURQ | CORENPDRQ);
    assert_eq!(w.read(EDPRCR), CORENPDRQ, "COREPURQ is RAZ/WI");
    assert_eq!(w.poll(EDPRSR, PU, PU, 200), None);
}

#[test]
fn cpu_debug_fault_double_lock() {
    let faults = CpuDebugFaults {
        double_lock: true,
        ..CpuDebugFaults::default()
    };
    let mut w = Window::new(CpuDebug::new(0, faults));
    w.c.set_sample(0x1234, 1, true);
    w.restage();
    let (edprsr, sample) = debug_read_regs(&mut w);
    assert_eq!(edprsr & (PU | DLK), PU | DLK);
    assert_eq!(
        sample, None,
        "the driver does not sample under the double lock"
    );
    w.write(LAR, UNLOCK);
    assert_eq!(w.read(EDPCSR), 0, "sample registers do not answer");
    assert_eq!(w.read(EDPCSR_HI), 0);
}

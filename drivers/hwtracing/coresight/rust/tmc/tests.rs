// SPDX-License-Identifier: GPL-2.0

//! The TMC panic paths (`tmc/hw.rs`, `tmc/etr.rs`) in the kernel, against a scripted TMC.
//!
//! The register-level models of the host crates (`crates/cspd-model`) run every hardware
//! sequence in the host tests; here a [`ScriptedTmc`] answers with what the test sets, so that
//! the sequences, the record they write and the dump container are checked as the kernel
//! compiles them.

use kernel::{
    coresight::access::{
        offset_of,
        RawFrame,
        CS_UNLOCK_KEY,
        LAR,
        LSR, //
    },
    io::register::Register,
    prelude::*,
};

use crate::regs::{
    FFCR,
    RRD,
    STS, //
};

/// A TMC whose registers read back what the test wrote or set, except for: `RRD`, which returns
/// the scripted trace words one by one, then the empty marker; `LSR`, which shows the software
/// lock as the last `LAR` write left it; and `FFCR`, where a manual flush completes at once.
/// Counts `RRD` reads and delays.
struct ScriptedTmc {
    /// The frame's registers, by offset / 4.
    regs: KVec<u32>,
    /// What `RRD` returns, in order.
    trace: KVec<u32>,
    /// The next word of `trace`.
    next: usize,
    /// `RRD` reads so far.
    rrd_reads: u32,
    /// Delays so far.
    delays: u32,
    /// The software lock is set.
    locked: bool,
}

impl ScriptedTmc {
    /// A locked TMC whose registers read zero, `STS.TMCReady` set.
    fn new() -> Result<Self> {
        let mut t = Self {
            regs: KVec::from_elem(0u32, 1024, GFP_KERNEL)?,
            trace: KVec::new(),
            next: 0,
            rrd_reads: 0,
            delays: 0,
            locked: true,
        };
        t.set::<STS>(STS::from_raw(0).with_tmcready(true).into_raw());
        Ok(t)
    }

    /// Sets register `R` to `v`.
    fn set<R: Register>(&mut self, v: u32) {
        if let Some(r) = self.regs.get_mut(R::OFFSET / 4) {
            *r = v;
        }
    }

    /// Returns the value of register `R`.
    fn get<R: Register>(&self) -> u32 {
        self.regs.get(R::OFFSET / 4).copied().unwrap_or(0)
    }

    /// Makes `RRD` return `words`, then the empty marker.
    fn script(&mut self, words: &[u32]) -> Result {
        self.trace.clear();
        self.trace.extend_from_slice(words, GFP_KERNEL)?;
        self.next = 0;
        Ok(())
    }
}

impl RawFrame for ScriptedTmc {
    fn read32(&mut self, offset: u32) -> u32 {
        if offset == offset_of::<RRD>() {
            self.rrd_reads += 1;
            let w = self.trace.get(self.next).copied();
            self.next += 1;
            return w.unwrap_or(u32::MAX);
        }
        if offset == offset_of::<LSR>() {
            return LSR::from_raw(0)
                .with_sli(true)
                .with_slk(self.locked)
                .into_raw();
        }
        // CAST: an offset in the frame.
        self.regs.get(offset as usize / 4).copied().unwrap_or(0)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        if offset == offset_of::<LAR>() {
            self.locked = value != CS_UNLOCK_KEY;
            return;
        }
        let value = if offset == offset_of::<FFCR>() {
            FFCR::from_raw(value).with_flushman(false).into_raw()
        } else {
            value
        };
        // CAST: an offset in the frame.
        if let Some(r) = self.regs.get_mut(offset as usize / 4) {
            *r = value;
        }
    }

    fn delay_us(&mut self, _us: u32) {
        self.delays += 1;
    }
}

#[kunit_tests(coresight_tmc_hw)]
mod kunit {
    use super::ScriptedTmc;
    use crate::hw::{
        enable_circular,
        panic_drain,
        DrainSummary,
        TMC_POLL_TRIES, //
    };
    use crate::regs::{
        ffcr_sink,
        CTL,
        FFCR,
        MODE,
        RRP,
        RSZ as RSZ_REG,
        RWP,
        STS, //
    };
    use kernel::coresight::panic_dump::format::tmc::{
        TmcOutcome,
        TmcRecord,
        TmcRecordHeader,
        CS_BARRIER_LEN,
        CS_BARRIER_WORD,
        TMC_REC_BARRIER,
        TMC_REC_READY_TIMEOUT,
        TMC_REC_TRUNCATED,
        TMC_REC_WRAPPED, //
    };
    use kernel::coresight::panic_dump::format::{
        self,
        ContainerHeader,
        RecordHeader,
        RecordKind,
        RecordStatus,
        RECORD_ALIGN,
        RECORD_HEADER_SIZE, //
    };

    use kernel::prelude::*;

    /// Words of trace RAM of the scripted ETB.
    const RSZ: usize = 1024;

    /// A test pattern of `n` words that never looks like a barrier or an empty read.
    fn pattern(n: usize, seed: u32) -> Result<KVec<u32>> {
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n as u32 {
            v.push(
                seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)) & 0x7FFF_FFFE,
                GFP_KERNEL,
            )?;
        }
        Ok(v)
    }

    /// Whether `bytes` are `words` in little-endian order, the first `barrier` bytes replaced
    /// by the CoreSight barrier.
    fn same_trace(bytes: &[u8], words: &[u32], barrier: bool) -> bool {
        if bytes.len() != words.len() * 4 {
            return false;
        }
        bytes
            .chunks_exact(4)
            .zip(words)
            .enumerate()
            .all(|(i, (b, w))| {
                let want = if barrier && i * 4 < CS_BARRIER_LEN {
                    CS_BARRIER_WORD
                } else {
                    *w
                };
                b == want.to_le_bytes()
            })
    }

    /// An ETB of [`RSZ`] words enabled by the driver's sequence, stopped with `RRP` and `RWP`
    /// (byte addresses) and `full`, whose RAM gives `words` through `RRD`.
    fn stopped_etb(rrp: u32, rwp: u32, full: bool, words: &[u32]) -> Result<ScriptedTmc> {
        let mut t = ScriptedTmc::new()?;
        assert!(enable_circular(&mut t, 0).is_ok());
        // What the driver's enable programmed, and the software lock set again.
        assert_eq!(
            t.get::<CTL>(),
            CTL::from_raw(0).with_tracecapten(true).into_raw()
        );
        assert_eq!(t.get::<MODE>(), 0);
        assert_eq!(t.get::<FFCR>(), ffcr_sink().into_raw());
        assert!(t.locked);
        t.set::<RSZ_REG>(RSZ as u32);
        t.set::<RRP>(rrp);
        t.set::<RWP>(rwp);
        t.set::<STS>(
            STS::from_raw(0)
                .with_tmcready(true)
                .with_full(full)
                .into_raw(),
        );
        t.script(words)?;
        Ok(t)
    }

    /// Drains `t` into a slot with room for its whole RAM and parses the record back.
    fn drain(t: &mut ScriptedTmc, slot: &mut KVec<u8>) -> Option<(DrainSummary, TmcRecordHeader)> {
        let len = TmcRecord::slot_len_for(RSZ as u32)?;
        slot.clear();
        slot.extend_with(len, 0xA5, GFP_KERNEL).ok()?;
        let s = panic_drain(t, slot).ok()?;
        let (h, trace) = TmcRecord::parse(slot.get(..s.record_len)?).ok()?;
        (trace.len() == s.trace_len && h.outcome() == Some(s.outcome)).then_some((s, h))
    }

    /// The trace part of a record drained by [`drain`].
    fn trace_of(slot: &[u8]) -> &[u8] {
        TmcRecord::parse(slot).map_or(&[], |(_, t)| t)
    }

    #[test]
    fn drain_partly_filled_buffer_gives_the_ram_words() -> Result {
        let words = pattern(300, 1)?;
        let mut t = stopped_etb(0, 300 * 4, false, &words)?;
        let mut slot = KVec::new();
        let (s, h) = drain(&mut t, &mut slot).ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::Complete);
        assert_eq!(
            s.flags & (TMC_REC_WRAPPED | TMC_REC_BARRIER | TMC_REC_TRUNCATED),
            0
        );
        assert_eq!((h.rrp, h.rwp, h.words_read), (0, 300 * 4, 300));
        assert!(same_trace(trace_of(&slot), &words, false));
        // One RRD read per word, and the one that finds the RAM empty.
        assert_eq!(t.rrd_reads, 301);
        // Flushed with the formatter stopping on it, left disabled and locked.
        assert!(FFCR::from_raw(t.get::<FFCR>()).stoponfl());
        assert_eq!(t.get::<CTL>(), 0);
        assert!(t.locked);
        Ok(())
    }

    #[test]
    fn drain_wrapped_buffer_starts_with_a_barrier() -> Result {
        let words = pattern(RSZ, 7)?;
        // Wrapped: the oldest word is at RWP, where RRP points after the stop.
        let mut t = stopped_etb(100 * 4, 100 * 4, true, &words)?;
        let mut slot = KVec::new();
        let (s, h) = drain(&mut t, &mut slot).ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::Complete);
        assert!(h.has(TMC_REC_WRAPPED | TMC_REC_BARRIER));
        assert!(!h.has(TMC_REC_TRUNCATED));
        assert!(same_trace(trace_of(&slot), &words, true));
        Ok(())
    }

    #[test]
    fn drain_into_a_small_slot_keeps_the_newest_words() -> Result {
        let words = pattern(RSZ, 3)?;
        let mut t = stopped_etb(0, 0, true, &words)?;
        // A slot for 256 words, a quarter of RSZ: the whole RAM read, the newest 256 words kept
        // (the last ones written before the stop), the older ones dropped and counted.
        let mut slot =
            KVec::from_elem(0u8, TmcRecord::slot_len_for(256).ok_or(EINVAL)?, GFP_KERNEL)?;
        let s = panic_drain(&mut t, &mut slot).map_err(|_| EINVAL)?;
        assert!(s.outcome == TmcOutcome::Truncated);
        assert_eq!(t.rrd_reads, RSZ as u32 + 1);
        let (h, trace) =
            TmcRecord::parse(slot.get(..s.record_len).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
        assert_eq!(
            (h.words_read, h.words_dropped),
            (RSZ as u32, RSZ as u32 - 256)
        );
        assert!(h.has(TMC_REC_TRUNCATED | TMC_REC_BARRIER));
        assert!(same_trace(
            trace,
            words.get(RSZ - 256..).ok_or(EINVAL)?,
            true
        ));
        Ok(())
    }

    #[test]
    fn never_ready_tmc_is_given_up_within_the_bound() -> Result {
        // Still running: TMCReady never rises, RRD reads the empty marker.
        let mut t = stopped_etb(0, 100 * 4, false, &[])?;
        t.set::<STS>(0);
        t.delays = 0;
        let mut slot = KVec::new();
        let (s, h) = drain(&mut t, &mut slot).ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::ReadyTimeout);
        assert!(h.has(TMC_REC_READY_TIMEOUT));
        assert_eq!(h.ready_delays, TMC_POLL_TRIES);
        assert_eq!(t.delays, TMC_POLL_TRIES);
        assert_eq!(s.trace_len, 0);
        assert!(t.locked);
        Ok(())
    }

    #[test]
    fn drained_record_survives_the_dump_container() -> Result {
        // The core gives the TMC a slot in the region; at panic the drain fills its data area
        // and the core seals it and commits.
        let words = pattern(RSZ, 3)?;
        let mut t = stopped_etb(512 * 4, 512 * 4, true, &words)?;

        let capacity = TmcRecord::slot_len_for(RSZ as u32).ok_or(EINVAL)?;
        let capacity = capacity.next_multiple_of(RECORD_ALIGN);
        let size = 2 * (RECORD_HEADER_SIZE + capacity);
        let mut region = KVec::from_elem(0u8, size, GFP_KERNEL)?;
        let header = ContainerHeader::new(size as u64, [7; 16], 1);
        assert!(format::init_region(&mut region, &header).is_ok());
        let mut h = RecordHeader::new(RecordKind::Sink, b"tmc_etf0", capacity as u32, header.stamp);
        let at = format::append_record(&mut region, &h);
        assert!(at.is_ok());
        let at = at.map_err(|_| EINVAL)?;

        let data = region
            .get_mut(at + RECORD_HEADER_SIZE..at + RECORD_HEADER_SIZE + capacity)
            .ok_or(EINVAL)?;
        let s = panic_drain(&mut t, data).map_err(|_| EINVAL)?;
        assert!(s.outcome == TmcOutcome::Complete);
        h.status = RecordStatus::Ok;
        h.length = s.record_len as u32;
        assert!(format::seal_record(region.get_mut(at..).ok_or(EINVAL)?, &h).is_ok());
        assert!(format::write_commit(&mut region).is_ok());

        assert!(format::validate(&region).is_ok_and(|v| v.is_clean() && v.records == 1));
        let r = format::parse_region(&region).map_err(|_| EINVAL)?;
        let rec = r.records().next();
        assert!(rec.is_some_and(|x| x.is_ok()));
        if let Some(Ok(rec)) = rec {
            assert!(rec.header.kind == RecordKind::Sink);
            assert!(rec.header.name_bytes() == b"tmc_etf0");
            assert!(same_trace(trace_of(rec.data), &words, true));
        }
        Ok(())
    }
}

/// The TMC-ETR panic path (`tmc/etr.rs`) against a scripted ETR and a buffer the test fills as
/// the ETR would have.
#[kunit_tests(coresight_tmc_etr)]
mod etr_kunit {
    use super::ScriptedTmc;
    use crate::etr::{
        enable,
        panic_record,
        panic_stop,
        EtrMemory,
        EtrSetup,
        PanicBuffer, //
    };
    use crate::hw::TMC_POLL_TRIES;
    use crate::regs::{
        DBAHI,
        DBALO,
        RSZ,
        RWP,
        RWPHI,
        STS, //
    };
    use kernel::coresight::panic_dump::format::etr::{
        EtrOutcome,
        EtrRecord,
        EtrRecordHeader,
        ETR_RECORD_HEADER_LEN,
        ETR_REC_IN_PLACE,
        ETR_REC_READY_TIMEOUT,
        ETR_REC_TRUNCATED,
        ETR_REC_WRAPPED, //
    };

    use kernel::prelude::*;

    /// The bus address of the buffer and its size in words.
    const DBA: u64 = 0x1_8000_0800;
    const BUF_WORDS: usize = 1024;

    fn pattern(n: usize, seed: u32) -> Result<KVec<u32>> {
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n as u32 {
            v.push(
                seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)) & 0x7FFF_FFFE,
                GFP_KERNEL,
            )?;
        }
        Ok(v)
    }

    fn setup() -> EtrSetup {
        EtrSetup {
            dba: DBA,
            size: (BUF_WORDS as u64) * 4,
            stop_on_flush: false,
            save_restore: false,
            trigger: 0,
        }
    }

    /// The buffer, as the panic callback reads it.
    struct Words<'a>(&'a [u32]);

    impl EtrMemory for Words<'_> {
        fn size(&self) -> usize {
            self.0.len() * 4
        }

        fn read(&self, offset: usize, out: &mut [u8]) -> bool {
            if !offset.is_multiple_of(4)
                || !out.len().is_multiple_of(4)
                || offset + out.len() > self.size()
            {
                return false;
            }
            for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
                let w = self.0.get(offset / 4 + i).copied().unwrap_or(0);
                chunk.copy_from_slice(&w.to_le_bytes());
            }
            true
        }
    }

    /// Whether `bytes` are `words` in little-endian order.
    fn same(bytes: &[u8], words: &[u32]) -> bool {
        bytes.len() == words.len() * 4
            && bytes
                .chunks_exact(4)
                .zip(words)
                .all(|(b, w)| b == w.to_le_bytes())
    }

    /// Enables a scripted ETR with the driver's sequence, writes `words` into `buf` as the ETR
    /// would (a ring of [`BUF_WORDS`]), sets `RWP` and `STS` as they read after that, stops it,
    /// records it with the buffer copied (or in place) into a slot of `cap` trace bytes, and
    /// parses the record back: outcome, header, trace.
    fn run(
        buf: &mut [u32],
        words: &[u32],
        copy: bool,
        cap: usize,
        never_ready: bool,
    ) -> Result<(EtrOutcome, EtrRecordHeader, KVec<u8>)> {
        let mut t = ScriptedTmc::new()?;
        enable(&mut t, &setup()).map_err(|_| EIO)?;
        // CAST: the halves of the bus address.
        assert_eq!(
            (t.get::<DBALO>(), t.get::<DBAHI>()),
            (DBA as u32, (DBA >> 32) as u32)
        );
        assert_eq!(t.get::<RSZ>(), BUF_WORDS as u32);
        for (i, w) in words.iter().enumerate() {
            if let Some(b) = buf.get_mut(i % BUF_WORDS) {
                *b = *w;
            }
        }
        let rwp = DBA + (words.len() % BUF_WORDS) as u64 * 4;
        // CAST: the halves of the bus address.
        t.set::<RWP>(rwp as u32);
        t.set::<RWPHI>((rwp >> 32) as u32);
        t.set::<STS>(
            STS::from_raw(0)
                .with_tmcready(!never_ready)
                .with_full(words.len() >= BUF_WORDS)
                .into_raw(),
        );
        let stop = panic_stop(&mut t);
        assert!(t.locked);
        let mem = Words(buf);
        let b = PanicBuffer {
            dba: DBA,
            paddr: 0x7e00_0000,
            size: setup().size,
            copy_from: if copy { Some(&mem) } else { None },
        };
        let mut slot = KVec::from_elem(0u8, ETR_RECORD_HEADER_LEN + cap, GFP_KERNEL)?;
        let s = panic_record(&stop, Some(&b), &mut slot).map_err(|_| EINVAL)?;
        let (h, trace) =
            EtrRecord::parse(slot.get(..s.record_len).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
        let mut t = KVec::new();
        t.extend_from_slice(trace, GFP_KERNEL)?;
        Ok((s.outcome, h, t))
    }

    #[test]
    fn reserved_buffer_is_left_in_place() -> Result {
        let mut buf = KVec::from_elem(0u32, BUF_WORDS, GFP_KERNEL)?;
        let words = pattern(300, 1)?;
        let (o, h, t) = run(&mut buf, &words, false, 0, false)?;
        assert!(o == EtrOutcome::Complete);
        assert!(h.has(ETR_REC_IN_PLACE));
        assert!(t.is_empty());
        assert_eq!(h.buf_paddr, 0x7e00_0000);
        assert_eq!(h.data_len, 300 * 4);
        // The record says where the words are in the buffer.
        let l = h.layout().map_err(|_| EINVAL)?;
        assert_eq!((l.start, l.len), (0, 1200));
        Ok(())
    }

    #[test]
    fn wrapped_dma_buffer_is_copied_oldest_first() -> Result {
        let mut buf = KVec::from_elem(0u32, BUF_WORDS, GFP_KERNEL)?;
        let words = pattern(BUF_WORDS * 2 + 100, 3)?;
        let (o, h, t) = run(&mut buf, &words, true, BUF_WORDS * 4, false)?;
        assert!(o == EtrOutcome::Complete);
        assert!(h.has(ETR_REC_WRAPPED));
        let newest = words.get(words.len() - BUF_WORDS..).ok_or(EINVAL)?;
        assert!(same(&t, newest));
        Ok(())
    }

    #[test]
    fn buffer_larger_than_the_slot_keeps_the_newest_trace() -> Result {
        let mut buf = KVec::from_elem(0u32, BUF_WORDS, GFP_KERNEL)?;
        let words = pattern(BUF_WORDS + 40, 5)?;
        let (o, h, t) = run(&mut buf, &words, true, 256, false)?;
        assert!(o == EtrOutcome::Truncated);
        assert!(h.has(ETR_REC_TRUNCATED));
        let newest = words.get(words.len() - 64..).ok_or(EINVAL)?;
        assert!(same(&t, newest));
        Ok(())
    }

    #[test]
    fn never_ready_etr_is_given_up_within_the_bound() -> Result {
        let mut buf = KVec::from_elem(0u32, BUF_WORDS, GFP_KERNEL)?;
        let words = pattern(100, 7)?;
        let (o, h, _) = run(&mut buf, &words, true, BUF_WORDS * 4, true)?;
        assert!(o == EtrOutcome::ReadyTimeout);
        assert!(h.has(ETR_REC_READY_TIMEOUT));
        assert_eq!(h.ready_delays, TMC_POLL_TRIES);
        Ok(())
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The TMC panic drain (`tmc/hw.rs`) against the register-level model of an ETB.

use kernel::prelude::*;

#[kunit_tests(coresight_tmc_hw)]
mod kunit {
    use crate::hw::{
        enable_circular,
        panic_drain,
        DrainSummary,
        TMC_POLL_TRIES, //
    };
    use crate::model::{
        TmcModel,
        TmcModelConfig, //
        RRD as TMC_RRD,
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

    /// Words of trace RAM of the modelled ETB.
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

    /// Drains `m` into a slot with room for its whole RAM and parses the record back.
    fn drain(m: &mut TmcModel<'_>, slot: &mut KVec<u8>) -> Option<(DrainSummary, TmcRecordHeader)> {
        let len = TmcRecord::slot_len_for(RSZ as u32)?;
        slot.clear();
        slot.extend_with(len, 0xA5, GFP_KERNEL).ok()?;
        let s = panic_drain(m, slot).ok()?;
        let (h, trace) = TmcRecord::parse(slot.get(..s.record_len)?).ok()?;
        (trace.len() == s.trace_len && h.outcome() == Some(s.outcome)).then_some((s, h))
    }

    /// The trace part of a record drained by [`drain`].
    fn trace_of(slot: &[u8]) -> &[u8] {
        TmcRecord::parse(slot).map_or(&[], |(_, t)| t)
    }

    #[test]
    fn drain_partly_filled_buffer_gives_the_model_bytes() -> Result {
        let mut ram = KVec::from_elem(0u32, RSZ, GFP_KERNEL)?;
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut m, 0).is_ok());
        let words = pattern(300, 1)?;
        assert_eq!(m.push_raw_words(&words), 300);
        let mut slot = KVec::new();
        let r = drain(&mut m, &mut slot);
        assert!(r.is_some());
        let (s, h) = r.ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::Complete);
        assert_eq!(
            s.flags & (TMC_REC_WRAPPED | TMC_REC_BARRIER | TMC_REC_TRUNCATED),
            0
        );
        assert_eq!((h.rrp, h.rwp, h.words_read), (0, 300 * 4, 300));
        assert!(same_trace(trace_of(&slot), &words, false));
        // One RRD read per word, and the one that finds the RAM empty.
        assert_eq!(m.counts().reads(TMC_RRD), 301);
        assert!(m.is_locked());
        Ok(())
    }

    #[test]
    fn drain_wrapped_buffer_starts_with_a_barrier() -> Result {
        let mut ram = KVec::from_elem(0u32, RSZ, GFP_KERNEL)?;
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut m, 0).is_ok());
        let words = pattern(RSZ * 2 + 100, 7)?;
        m.push_raw_words(&words);
        let mut slot = KVec::new();
        let (s, h) = drain(&mut m, &mut slot).ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::Complete);
        assert!(h.has(TMC_REC_WRAPPED | TMC_REC_BARRIER));
        assert!(!h.has(TMC_REC_TRUNCATED));
        // The oldest word is at RWP; the newest RSZ words come out oldest first.
        assert_eq!((h.rwp, h.rrp), (100 * 4, 100 * 4));
        let newest = words.get(words.len() - RSZ..).ok_or(EINVAL)?;
        assert!(same_trace(trace_of(&slot), newest, true));
        Ok(())
    }

    #[test]
    fn drain_into_a_small_slot_keeps_the_newest_words() -> Result {
        let mut ram = KVec::from_elem(0u32, RSZ, GFP_KERNEL)?;
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut m, 0).is_ok());
        let words = pattern(RSZ, 3)?;
        m.push_raw_words(&words);
        // A slot for 256 words, a quarter of RSZ: the whole RAM read, the newest 256 words kept
        // (the last ones written before the stop), the older ones dropped and counted.
        let mut slot =
            KVec::from_elem(0u8, TmcRecord::slot_len_for(256).ok_or(EINVAL)?, GFP_KERNEL)?;
        let s = panic_drain(&mut m, &mut slot).map_err(|_| EINVAL)?;
        assert!(s.outcome == TmcOutcome::Truncated);
        assert_eq!(m.counts().reads(TMC_RRD), RSZ as u32 + 1);
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
        let mut ram = KVec::from_elem(0u32, RSZ, GFP_KERNEL)?;
        let mut m = TmcModel::new(TmcModelConfig::Etb, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut m, 0).is_ok());
        m.push_raw_words(&pattern(100, 5)?);
        m.set_fault_never_ready(true);
        m.reset_counts();
        let mut slot = KVec::new();
        let (s, h) = drain(&mut m, &mut slot).ok_or(EINVAL)?;
        assert!(s.outcome == TmcOutcome::ReadyTimeout);
        assert!(h.has(TMC_REC_READY_TIMEOUT));
        assert_eq!(h.ready_delays, TMC_POLL_TRIES);
        assert_eq!(m.counts().delays, TMC_POLL_TRIES);
        assert_eq!(s.trace_len, 0);
        assert!(m.is_locked());
        Ok(())
    }

    #[test]
    fn drained_record_survives_the_dump_container() -> Result {
        // The core gives the TMC a slot in the region; at panic the drain fills its data area
        // and the core seals it and commits.
        let mut ram = KVec::from_elem(0u32, RSZ, GFP_KERNEL)?;
        let mut m = TmcModel::new(TmcModelConfig::Etf, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut m, 0).is_ok());
        let words = pattern(RSZ + RSZ / 2, 3)?;
        m.push_raw_words(&words);

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
        let s = panic_drain(&mut m, data).map_err(|_| EINVAL)?;
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
            let newest = words.get(words.len() - RSZ..).ok_or(EINVAL)?;
            assert!(same_trace(trace_of(rec.data), newest, true));
        }
        Ok(())
    }
}

/// The TMC-ETR panic path (`tmc/etr.rs`) against the model of an ETR writing into memory.
#[kunit_tests(coresight_tmc_etr)]
mod etr_kunit {
    use crate::etr::{
        enable,
        panic_record,
        panic_stop,
        EtrMemory,
        EtrSetup,
        PanicBuffer, //
    };
    use crate::hw::TMC_POLL_TRIES;
    use crate::model::{
        TmcModel,
        TmcModelConfig, //
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

    /// Words of the model's memory, and the bus address of its first word.
    const MEM_WORDS: usize = 2048;
    const MEM_BASE: u64 = 0x8000_0000;
    /// The buffer given to the ETR: 1024 words from word 512 on.
    const BUF_WORD: usize = 512;
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
            dba: MEM_BASE + (BUF_WORD as u64) * 4,
            size: (BUF_WORDS as u64) * 4,
            stop_on_flush: false,
            save_restore: false,
        }
    }

    /// The buffer, in the model's memory, as the panic callback reads it.
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

    /// Stops the model, records it with the buffer copied (or in place) into a slot of `cap`
    /// trace bytes, and parses the record back: outcome, header, trace.
    fn run(
        mem: &mut [u32],
        words: &[u32],
        copy: bool,
        cap: usize,
        never_ready: bool,
    ) -> Result<(EtrOutcome, EtrRecordHeader, KVec<u8>)> {
        let mut m = TmcModel::new(TmcModelConfig::Etr, mem).ok_or(EINVAL)?;
        m.set_etr_memory_base(MEM_BASE);
        enable(&mut m, &setup()).map_err(|_| EIO)?;
        m.push_raw_words(words);
        m.set_fault_never_ready(never_ready);
        let stop = panic_stop(&mut m);
        let buf = Words(mem.get(BUF_WORD..BUF_WORD + BUF_WORDS).ok_or(EINVAL)?);
        let b = PanicBuffer {
            dba: setup().dba,
            paddr: 0x7e00_0000,
            size: setup().size,
            copy_from: if copy { Some(&buf) } else { None },
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
        let mut mem = KVec::from_elem(0u32, MEM_WORDS, GFP_KERNEL)?;
        let words = pattern(300, 1)?;
        let (o, h, t) = run(&mut mem, &words, false, 0, false)?;
        assert!(o == EtrOutcome::Complete);
        assert!(h.has(ETR_REC_IN_PLACE));
        assert!(t.is_empty());
        assert_eq!(h.buf_paddr, 0x7e00_0000);
        assert_eq!(h.data_len, 300 * 4);
        // The memory at DBA holds the words, as the record's layout says.
        let l = h.layout().map_err(|_| EINVAL)?;
        assert_eq!((l.start, l.len), (0, 1200));
        assert!(mem.get(BUF_WORD..BUF_WORD + 300) == Some(&words[..]));
        Ok(())
    }

    #[test]
    fn wrapped_dma_buffer_is_copied_oldest_first() -> Result {
        let mut mem = KVec::from_elem(0u32, MEM_WORDS, GFP_KERNEL)?;
        let words = pattern(BUF_WORDS * 2 + 100, 3)?;
        let (o, h, t) = run(&mut mem, &words, true, BUF_WORDS * 4, false)?;
        assert!(o == EtrOutcome::Complete);
        assert!(h.has(ETR_REC_WRAPPED));
        let newest = words.get(words.len() - BUF_WORDS..).ok_or(EINVAL)?;
        assert!(same(&t, newest));
        Ok(())
    }

    #[test]
    fn buffer_larger_than_the_slot_keeps_the_newest_trace() -> Result {
        let mut mem = KVec::from_elem(0u32, MEM_WORDS, GFP_KERNEL)?;
        let words = pattern(BUF_WORDS + 40, 5)?;
        let (o, h, t) = run(&mut mem, &words, true, 256, false)?;
        assert!(o == EtrOutcome::Truncated);
        assert!(h.has(ETR_REC_TRUNCATED));
        let newest = words.get(words.len() - 64..).ok_or(EINVAL)?;
        assert!(same(&t, newest));
        Ok(())
    }

    #[test]
    fn never_ready_etr_is_given_up_within_the_bound() -> Result {
        let mut mem = KVec::from_elem(0u32, MEM_WORDS, GFP_KERNEL)?;
        let words = pattern(100, 7)?;
        let (o, h, _) = run(&mut mem, &words, true, BUF_WORDS * 4, true)?;
        assert!(o == EtrOutcome::ReadyTimeout);
        assert!(h.has(ETR_REC_READY_TIMEOUT));
        assert_eq!(h.ready_delays, TMC_POLL_TRIES);
        Ok(())
    }
}

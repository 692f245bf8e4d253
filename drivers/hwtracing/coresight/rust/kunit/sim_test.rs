// SPDX-License-Identifier: GPL-2.0

//! The simulated trace bus (`kernel::coresight::sim`) between model-backed trace units and
//! sinks.
//!
//! The bus is global: these tests expect that no model-backed trace unit traces while they run
//! (the KUnit kernel has none), and check that the bus is idle first.

use kernel::prelude::*;

#[kunit_tests(coresight_sim_bus)]
mod tests {
    use crate::etm4x_gen::{
        generate_with,
        BranchKind,
        Decision,
        GenConfig, //
    };
    use crate::etm4x_hw::{
        Etm4x,
        Interface,
        SaveOutcome,
        Timeout,
        TraceConfig,
        TRCCONFIGR,
        TRCCONFIGR_CID,
        TRCCONFIGR_TS,
        TRCTRACEIDR, //
    };
    use crate::etm4x_test::new_model;
    use crate::model_etm4x::{
        ModelIds,
        ModelInterface, //
    };
    use crate::model_tmc::{
        TmcModel,
        TmcModelConfig, //
    };
    use crate::tmc_hw::{
        enable_circular,
        panic_drain,
        TmcOutcome,
        TmcRecord, //
    };
    use kernel::coresight::sim::{
        self,
        PathStart,
        CHANNELS,
        CHANNEL_BYTES, //
    };
    use kernel::prelude::*;

    const T: Timeout = Timeout {
        tries: 50,
        delay_us: 1,
    };

    #[test]
    fn bus_hands_each_stream_over_whole_and_once() -> Result {
        assert_eq!(sim::pending(), 0);
        let mut data = KVec::from_elem(0u8, CHANNEL_BYTES + 10, GFP_KERNEL)?;
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // Every channel takes one stream, cut to the channel's size; then the bus is full.
        for ch in 0..CHANNELS {
            let len = if ch == 0 { data.len() } else { 100 + ch };
            let taken = sim::emit(0x10 + ch as u8, data.get(..len).unwrap_or(&[]));
            assert_eq!(taken, len.min(CHANNEL_BYTES));
        }
        assert_eq!(sim::pending(), CHANNELS);
        assert_eq!(sim::emit(0x7F, &[1, 2, 3]), 0);

        // Taken in channel order, each whole, with its trace ID.
        let mut n = 0usize;
        let mut in_order = true;
        sim::take(|id, bytes| {
            let len = if n == 0 { CHANNEL_BYTES } else { 100 + n };
            in_order &= usize::from(id) == 0x10 + n && data.get(..len) == Some(bytes);
            n += 1;
        });
        assert_eq!(n, CHANNELS);
        assert!(in_order);
        assert_eq!(sim::pending(), 0);
        // Nothing is handed over twice.
        let mut again = 0usize;
        sim::take(|_, _| again += 1);
        assert_eq!(again, 0);
        Ok(())
    }

    #[test]
    fn etm_trace_reaches_the_tmc_over_the_bus() -> Result {
        assert_eq!(sim::pending(), 0);
        // A trace unit programmed by the driver's sequence, tracing with trace ID 0x10.
        let mut etm = new_model(ModelIds::CORTEX_A57, ModelInterface::Mmio)?;
        let mut hw = Etm4x::new(&mut *etm, Interface::Mmio, T);
        let ids = hw.read_ids().map_err(|_| EIO)?;
        let cfg = TraceConfig::default_for(&ids, 0x10, true).map_err(|_| EINVAL)?;
        assert!(hw.enable(&cfg).is_ok());
        let traceid = (etm.peek(TRCTRACEIDR) & 0x7F) as u8;
        let configr = etm.peek(TRCCONFIGR);
        assert_eq!(traceid, 0x10);

        // Its stream: a path from `schedule()` through the kernel text, shaped by TRCCONFIGR.
        let image = crate::etm4x_gen_test::KernelText;
        let gen = GenConfig {
            context_id: (configr & TRCCONFIGR_CID != 0).then_some(0),
            timestamp: (configr & TRCCONFIGR_TS != 0).then_some(1),
            timestamp_step: 1,
            max_insns: 2000,
            ..GenConfig::kernel()
        };
        let mut stream = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
        let decide = |site: crate::etm4x_gen::BranchSite| match site.kind {
            BranchKind::Return => site.return_to.map(|_| Decision::Taken),
            k if k.is_indirect() => None,
            _ => Some(Decision::NotTaken),
        };
        let start = sim::path_start(PathStart::Schedule);
        let s = generate_with(&image, start, decide, &gen, &mut stream, |_| {});
        assert!(s.is_ok());
        let len = s.map_or(0, |s| s.bytes);
        let stream = stream.get(..len).ok_or(EINVAL)?;
        assert!(len > 12);

        // The unit stops at panic and puts its stream on the bus; the sink takes it.
        let saved = Etm4x::new(&mut *etm, Interface::Mmio, T).panic_save(0);
        assert!(saved.outcome == SaveOutcome::Ok);
        assert_eq!(saved.trctraceidr, 0x10);
        assert_eq!(sim::emit(traceid, stream), len);

        let mut ram = KVec::from_elem(0u32, 1024, GFP_KERNEL)?;
        let mut tmc = TmcModel::new(TmcModelConfig::Etb, &mut ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut tmc, 0).is_ok());
        let mut accepted = 0usize;
        sim::take(|id, bytes| accepted += tmc.push_trace(id, bytes));
        assert_eq!(accepted, len);
        assert_eq!(sim::pending(), 0);

        // A sink fed the stream directly holds the same trace.
        let mut ref_ram = KVec::from_elem(0u32, 1024, GFP_KERNEL)?;
        let mut direct = TmcModel::new(TmcModelConfig::Etb, &mut ref_ram).ok_or(EINVAL)?;
        assert!(enable_circular(&mut direct, 0).is_ok());
        assert_eq!(direct.push_trace(0x10, stream), len);

        let slot_len = TmcRecord::slot_len_for(1024).ok_or(EINVAL)?;
        let mut slot = KVec::from_elem(0u8, slot_len, GFP_KERNEL)?;
        let mut ref_slot = KVec::from_elem(0u8, slot_len, GFP_KERNEL)?;
        let d = panic_drain(&mut tmc, &mut slot).map_err(|_| EIO)?;
        let r = panic_drain(&mut direct, &mut ref_slot).map_err(|_| EIO)?;
        assert!(d.outcome == TmcOutcome::Complete);
        assert!(d.trace_len > 0 && d.trace_len == r.trace_len);
        let (_, trace) =
            TmcRecord::parse(slot.get(..d.record_len).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
        let (_, ref_trace) =
            TmcRecord::parse(ref_slot.get(..r.record_len).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
        assert!(trace == ref_trace);
        // The formatter's first frame opens with the unit's trace ID.
        assert_eq!(trace.first().copied(), Some((0x10 << 1) | 1));
        Ok(())
    }
}

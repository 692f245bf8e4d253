// SPDX-License-Identifier: GPL-2.0

//! Model-backed ETMv4 trace units for machines without CoreSight hardware.
//!
//! The driver programs and stops the model exactly as it would a real unit. The model adds
//! trace: when `TRCPRGCTLR.EN` is set, the unit walks a path through the kernel text, starting at
//! `panic()` on CPU 0, `default_idle_call()` on CPU 1 and `schedule()` on the others. Conditional
//! branches are not taken, except every fourth time the same one is met (so that loops end);
//! returns go back to their callers; the walk ends at the first indirect branch it cannot follow,
//! at an instruction the generator does not model, or after [`MAX_INSNS`] instructions. The ETMv4 stream of
//! that path is generated with the unit's trace ID and `TRCCONFIGR`, and put on the simulated
//! trace bus when `EN` is cleared, at `disable_source` or at panic. The functions of the path are
//! logged, so that a test can compare them with what a decoder recovers.

use core::cell::UnsafeCell;

use kernel::{
    alloc::flags,
    c_str,
    coresight::sim::{
        self as atb,
        PathStart, //
    },
    device::{
        Core,
        Device, //
    },
    kallsyms::Symbol,
    of,
    platform,
    prelude::*,
    str::CString, //
};

use super::{
    access::CsAccess,
    etm4x_gen::{
        self,
        Code,
        GenConfig,
        LoopBreaker, //
    },
    hw,
    kernel_io::Backend,
    model,
    probe_etm,
    EtmDevice, //
};

/// Longest path, in instructions.
const MAX_INSNS: u64 = 3000;

/// Bytes of trace one unit can hold.
const STREAM_BYTES: usize = 8192;

/// How many of the last functions of a path are logged.
const MAX_LOGGED: usize = 48;

/// The model, its generated stream, and whether it is tracing.
struct State {
    model: KBox<model::Etm4xModel>,
    cpu: u32,
    stream: KBox<[u8; STREAM_BYTES]>,
    len: usize,
    tracing: bool,
}

/// A model-backed trace unit.
pub(super) struct SimEtm(UnsafeCell<State>);

// SAFETY: The state is only reached through `with_io`, whose callers never overlap.
unsafe impl Send for SimEtm {}
// SAFETY: As above.
unsafe impl Sync for SimEtm {}

impl SimEtm {
    fn new(cpu: u32) -> Result<Self> {
        // Built in place: the model's register file is too big for a probe's stack.
        let mut m = KBox::<model::Etm4xModel>::new_uninit(GFP_KERNEL)?;
        model::Etm4xModel::new_in(
            &mut m,
            model::ModelIds::CORTEX_A57,
            model::ModelInterface::Mmio,
        );
        // SAFETY: `new_in` initialised the model.
        let mut m = unsafe { m.assume_init() };
        m.set_latency(3);
        let stream = KBox::<[u8; STREAM_BYTES]>::new_uninit(GFP_KERNEL | flags::__GFP_ZERO)?;
        // SAFETY: The allocation was zeroed, and zero bytes are valid `u8`s.
        let stream = unsafe { stream.assume_init() };
        Ok(Self(UnsafeCell::new(State {
            model: m,
            cpu,
            stream,
            len: 0,
            tracing: false,
        })))
    }
}

impl State {
    /// Generates the stream of this unit's path with the programmed trace ID and configuration,
    /// and logs the path's functions.
    fn generate(&mut self) {
        let traceid = self.model.peek(hw::TRCTRACEIDR) & 0x7f;
        let configr = self.model.peek(hw::TRCCONFIGR);
        let start = atb::path_start(match self.cpu {
            0 => PathStart::Panic,
            1 => PathStart::Idle,
            _ => PathStart::Schedule,
        });
        let image = KernelText;
        let cfg = GenConfig {
            context_id: (configr & hw::TRCCONFIGR_CID != 0).then_some(0),
            timestamp: (configr & hw::TRCCONFIGR_TS != 0).then_some(1),
            timestamp_step: 1,
            max_insns: MAX_INSNS,
            ..GenConfig::kernel()
        };
        // The last functions of the path, with the index of the first one kept.
        let mut funcs: KVec<u64> = KVec::new();
        let mut first = 0usize;
        let mut last_name: Option<CString> = None;
        // Recently met conditional branches and how often: the fourth visit is taken, so that a
        // loop whose exit is a not-taken branch ends.
        let mut policy = LoopBreaker::new();
        let decide = |site| policy.decide(site);
        let mut last_insn = 0u64;
        let on_range = |r: etm4x_gen::ExecRange| {
            last_insn = r.end.wrapping_sub(4);
            let Ok(name) = CString::try_from_fmt(fmt!("{}", Symbol(r.start))) else {
                return;
            };
            let func = function_of(&name);
            if last_name.as_deref().map(function_of) != Some(func) {
                if funcs.len() >= MAX_LOGGED {
                    let _ = funcs.remove(0);
                    first += 1;
                }
                let _ = funcs.push(r.start, GFP_KERNEL);
                last_name = Some(name);
            }
        };
        match etm4x_gen::generate_with(&image, start, decide, &cfg, &mut self.stream[..], on_range)
        {
            Ok(s) => {
                self.len = s.bytes;
                // The CPU "is" where its path ended: a simulated CPU debug interface samples it.
                atb::set_last_pc(self.cpu, last_insn);
                pr_info!(
                    "sim etm{}: trace ID {:#x}: path of {} instructions in {} ranges, {} bytes, ended by {:?}\n",
                    self.cpu,
                    traceid,
                    s.insns,
                    s.ranges,
                    s.bytes,
                    s.stop
                );
            }
            Err(e) => {
                self.len = 0;
                pr_warn!("sim etm{}: no trace generated: {:?}\n", self.cpu, e);
            }
        }
        for (i, a) in funcs.iter().enumerate() {
            pr_info!(
                "sim etm{}: path function {}: {}\n",
                self.cpu,
                first + i,
                Symbol(*a)
            );
        }
    }
}

/// The running kernel's text, as the generator reads it.
struct KernelText;

impl Code for KernelText {
    fn word(&self, addr: u64) -> Option<u32> {
        atb::text_word(addr)
    }
}

/// Returns the function part of a `function+0xoff/0xsize [module]` symbol.
fn function_of(s: &CStr) -> &[u8] {
    let b = s.to_bytes();
    let end = b.iter().position(|&c| c == b'+').unwrap_or(b.len());
    &b[..end]
}

/// The model's registers, with the trace bus behind them.
struct SimIo<'s>(&'s mut State);

impl CsAccess for SimIo<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        self.0.model.read32(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        let st = &mut *self.0;
        st.model.write32(offset, value);
        if offset != hw::TRCPRGCTLR {
            return;
        }
        match (st.tracing, st.model.enabled()) {
            (false, true) => {
                st.tracing = true;
                st.generate();
            }
            (true, false) => {
                st.tracing = false;
                let id = u8::try_from(st.model.peek(hw::TRCTRACEIDR) & 0x7f).unwrap_or(0);
                let sent = atb::emit(id, &st.stream[..st.len.min(STREAM_BYTES)]);
                if sent < st.len {
                    pr_warn!(
                        "sim etm{}: trace bus took {} of {} bytes\n",
                        st.cpu,
                        sent,
                        st.len
                    );
                }
            }
            _ => {}
        }
    }

    fn delay_us(&mut self, us: u32) {
        self.0.model.delay_us(us)
    }
}

impl Backend for SimEtm {
    unsafe fn with_io<R>(&self, f: impl FnOnce(&mut dyn CsAccess) -> R) -> R {
        // SAFETY: By the safety requirements this is the only access to the state.
        f(&mut SimIo(unsafe { &mut *self.0.get() }))
    }
}

/// Platform driver for the simulated trace units of the device tree.
pub(super) struct Etm4xSim;

kernel::of_device_table!(
    OF_TABLE,
    <Etm4xSim as platform::Driver>::IdInfo,
    [(of::DeviceId::new(c_str!("linux,coresight-etm4x-sim")), ())]
);

impl platform::Driver for Etm4xSim {
    type IdInfo = ();
    type Data<'bound> = Pin<KBox<EtmDevice<SimEtm>>>;
    const OF_ID_TABLE: Option<of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = pdev.as_ref();
        let cpu = kernel::coresight::get_cpu(dev)?;
        KBox::pin_init(
            probe_etm(dev, SimEtm::new(cpu)?, hw::Interface::Mmio)?,
            GFP_KERNEL,
        )
    }
}

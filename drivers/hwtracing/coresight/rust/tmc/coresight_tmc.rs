// SPDX-License-Identifier: GPL-2.0

//! Arm CoreSight Trace Memory Controller driver, ETB and ETF configurations.
//!
//! The TMC's trace RAM holds the last few kilobytes of trace. This driver registers each TMC with
//! the CoreSight core as a sink, so that `echo 1 > /sys/bus/coresight/devices/<name>/enable_sink`
//! selects it and enabling a source starts capture in Circular Buffer mode. At panic, in the panic
//! dump's "drain sinks" phase, it flushes and stops the TMC and copies the whole RAM into its dump
//! slot ([`hw::panic_drain`]): no allocation, no sleeping, every poll bounded, and a TMC that
//! stops answering leaves a record that says where it stopped.
//!
//! Perf mode is not supported (there is no AUX buffer support); the C driver's `/dev` reader is
//! not provided either: the trace is read from the dump.
//!
//! With `CONFIG_CORESIGHT_TMC_RUST_SIM`, device-tree nodes compatible with
//! `linux,coresight-tmc-sim` are backed by the register-level model of
//! `samples/rust/coresight_sim/model_tmc.rs`, fed by the simulated trace bus
//! ([`kernel::coresight::sim`]), and go through the same code as real devices.

use kernel::{
    amba, c_str,
    coresight::{
        self,
        panic_dump::{
            DumpCallback,
            DumpType, //
        },
        CsDevice,
        Kind,
        LinkKind,
        Mode,
        Path,
        SinkKind, //
    },
    device::{
        Bound,
        Core,
        Device, //
    },
    driver,
    io::mem::IoMem,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

#[path = "../common/access.rs"]
pub mod access;
pub mod hw;
#[path = "../common/kernel_io.rs"]
pub mod kernel_io;
#[cfg(CONFIG_CORESIGHT_TMC_RUST_SIM)]
#[path = "../../../../../samples/rust/coresight_sim/model_tmc.rs"]
pub mod model;

use hw::TmcConfigType;
use kernel_io::{
    Backend,
    Component,
    ComponentInfo,
    InUse,
    FRAME, //
};

module! {
    type: TmcModule,
    name: "coresight_tmc",
    authors: ["coresight-panic-dump developers"],
    description: "Arm CoreSight TMC-ETB/ETF driver with panic dump",
    license: "GPL",
}

/// Name the C driver has.
const DRIVER_NAME: &CStr = c_str!("coresight-tmc");

/// One TMC, shared by its CoreSight operations and its panic callback.
struct Tmc<B: Backend> {
    backend: B,
    /// Taken around every register sequence.
    in_use: InUse,
    /// Sources writing into this sink in sysfs mode.
    users: Atomic<u32>,
    name: CString,
}

impl<B: Backend> Tmc<B> {
    /// Drops one user and returns how many are left (never below zero).
    fn drop_user(&self) -> u32 {
        let mut n = self.users.load(Relaxed);
        while n > 0 {
            match self.users.cmpxchg(n, n - 1, Relaxed) {
                Ok(_) => return n - 1,
                Err(now) => n = now,
            }
        }
        0
    }

    /// Runs `f` with the registers, unless another caller has them ([`EBUSY`]).
    fn io<R>(&self, f: impl FnOnce(&mut dyn access::CsAccess) -> R) -> Result<R> {
        let _claim = self.in_use.try_claim().ok_or(EBUSY)?;
        // SAFETY: Callers of `with_io` never overlap: each holds the claim.
        Ok(unsafe { self.backend.with_io(f) })
    }
}

/// The TMC as a CoreSight sink (and, for an ETF, a link).
struct SinkOps<B: Backend>(Arc<Tmc<B>>);

#[vtable]
impl<B: Backend> coresight::Operations for SinkOps<B> {
    fn sink_enable(&self, csdev: &CsDevice, mode: Mode, _path: &Path) -> Result {
        let tmc = &*self.0;
        if mode != Mode::Sysfs {
            return Err(EINVAL);
        }
        if csdev.mode() == Mode::Sysfs {
            tmc.users.fetch_add(1, Relaxed);
            return Ok(());
        }
        if !csdev.take_mode(Mode::Sysfs) {
            return Err(EBUSY);
        }
        match tmc.io(|io| hw::enable_circular(io, 0)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                csdev.set_mode(Mode::Disabled);
                dev_err!(csdev.as_device(), "TMC did not become ready: {:?}\n", e);
                return Err(ETIMEDOUT);
            }
            Err(e) => {
                csdev.set_mode(Mode::Disabled);
                return Err(e);
            }
        }
        tmc.users.store(1, Relaxed);
        dev_dbg!(csdev.as_device(), "TMC-ETB/ETF enabled\n");
        Ok(())
    }

    fn sink_disable(&self, csdev: &CsDevice) -> Result {
        let tmc = &*self.0;
        if tmc.drop_user() > 0 {
            return Err(EBUSY);
        }
        if csdev.mode() == Mode::Disabled {
            return Ok(());
        }
        let r = tmc.io(|io| hw::disable(io));
        csdev.set_mode(Mode::Disabled);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => dev_warn!(csdev.as_device(), "TMC stop: {:?}\n", e),
            Err(e) => dev_warn!(csdev.as_device(), "TMC stop: {:?}\n", e),
        }
        dev_dbg!(csdev.as_device(), "TMC-ETB/ETF disabled\n");
        Ok(())
    }

    fn link_enable(
        &self,
        csdev: &CsDevice,
        _in: &coresight::Connection,
        _out: &coresight::Connection,
    ) -> Result {
        let tmc = &*self.0;
        if csdev.mode() == Mode::Sysfs {
            tmc.users.fetch_add(1, Relaxed);
            return Ok(());
        }
        if !csdev.take_mode(Mode::Sysfs) {
            return Err(EBUSY);
        }
        if !matches!(tmc.io(|io| hw::enable_hw_fifo(io)), Ok(Ok(()))) {
            csdev.set_mode(Mode::Disabled);
            return Err(ETIMEDOUT);
        }
        tmc.users.store(1, Relaxed);
        Ok(())
    }

    fn link_disable(
        &self,
        csdev: &CsDevice,
        _in: &coresight::Connection,
        _out: &coresight::Connection,
    ) {
        let tmc = &*self.0;
        if tmc.drop_user() == 0 && csdev.mode() != Mode::Disabled {
            let _ = tmc.io(|io| hw::disable(io));
            csdev.set_mode(Mode::Disabled);
        }
    }
}

/// The TMC's panic callback.
struct Drain<B: Backend>(Arc<Tmc<B>>);

impl<B: Backend> DumpCallback for Drain<B> {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let tmc = &*self.0;
        let Ok(summary) = tmc.io(|io| hw::panic_drain(io, buf)) else {
            // A CPU stopped by the panic was in the middle of a register sequence.
            pr_emerg!(
                "{}: registers in use by a stopped CPU; not drained\n",
                &*tmc.name
            );
            return Err(EBUSY);
        };
        let summary = summary.map_err(|_| ENOSPC)?;
        *written = summary.record_len;
        let err = match summary.outcome {
            hw::TmcOutcome::Complete
            | hw::TmcOutcome::NotEnabled
            | hw::TmcOutcome::NotCircularBuffer => return Ok(()),
            hw::TmcOutcome::Locked => EACCES,
            hw::TmcOutcome::Truncated => ENOSPC,
            hw::TmcOutcome::FlushTimeout
            | hw::TmcOutcome::ReadyTimeout
            | hw::TmcOutcome::RamReadStuck => ETIMEDOUT,
        };
        pr_emerg!(
            "{}: trace drain: {}, {} trace bytes kept\n",
            &*tmc.name,
            summary.outcome.name(),
            summary.trace_len
        );
        Err(err)
    }
}

/// A bound TMC.
type TmcDevice<B> = Component<SinkOps<B>, Drain<B>>;

/// Probes a TMC whose registers `backend` reaches.
fn probe_tmc<'a, B: Backend + 'a>(
    dev: &'a Device<Core<'_>>,
    backend: B,
) -> Result<impl PinInit<TmcDevice<B>, Error> + 'a> {
    // SAFETY: Probe is the only user of the registers until the registrations below exist.
    let (devid, rsz) =
        unsafe { backend.with_io(|io| (io.read32(access::CS_DEVID), io.read32(hw::TMC_RSZ))) };
    let config = TmcConfigType::from_devid(devid);
    let (prefix, kind) = match config {
        TmcConfigType::Etb => (c_str!("tmc_etb"), Kind::Sink(SinkKind::Buffer)),
        TmcConfigType::Etf => (
            c_str!("tmc_etf"),
            Kind::LinkSink(LinkKind::Fifo, SinkKind::Buffer),
        ),
        _ => {
            dev_err!(dev, "TMC configuration {:#x} is not an ETB or ETF\n", devid);
            return Err(ENODEV);
        }
    };
    if rsz == 0 || rsz > hw::TMC_MAX_RAM_WORDS {
        dev_err!(dev, "TMC RAM size {:#x} words is out of range\n", rsz);
        return Err(ENODEV);
    }
    let slot = hw::TmcRecord::slot_len_for(rsz).ok_or(EINVAL)?;
    let bound: &Device<Bound> = dev;
    let name = coresight::alloc_device_name(prefix, bound)?;
    let tmc = Arc::new(
        Tmc {
            backend,
            in_use: InUse::new(),
            users: Atomic::new(0),
            name,
        },
        GFP_KERNEL,
    )?;
    dev_info!(
        dev,
        "{}: {} KiB trace RAM, dump slot {} bytes\n",
        &*tmc.name,
        rsz / 256,
        slot
    );
    let for_dump = tmc.clone();
    Ok(Component::new(
        bound,
        ComponentInfo {
            name: CString::try_from_fmt(fmt!("{}", &*tmc.name))?,
            kind,
            cpu: None,
            dump: DumpType::Sink,
            max_bytes: slot,
        },
        SinkOps(tmc.clone()),
        Drain(for_dump),
    ))
}

/// The AMBA driver for real TMCs.
struct TmcAmba;

kernel::amba_device_table!(
    AMBA_TABLE,
    [
        // Coresight SoC-400 TMC, SoC-600 TMC-ETB and TMC-ETF.
        amba::DeviceId::new(0x000b_b961, 0x000f_ffff),
        amba::DeviceId::new(0x000b_b9e8, 0x000f_ffff),
        amba::DeviceId::new(0x000b_b9e9, 0x000f_ffff),
    ]
);

impl amba::Driver for TmcAmba {
    type Data<'bound> = Pin<KBox<TmcDevice<IoMem<'bound, FRAME>>>>;
    const ID_TABLE: amba::IdTable = &AMBA_TABLE;

    fn probe<'bound>(
        adev: &'bound amba::Device<Core<'_>>,
        _id: &'bound amba::DeviceId,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = adev.as_ref();
        let iomem = adev.io_request().iomap_sized::<FRAME>()?;
        KBox::pin_init(probe_tmc(dev, iomem)?, GFP_KERNEL)
    }
}

#[cfg(CONFIG_CORESIGHT_TMC_RUST_SIM)]
mod sim {
    //! Model-backed TMCs for machines without CoreSight hardware.

    use super::*;
    use access::CsAccess;
    use core::{
        cell::UnsafeCell,
        mem::ManuallyDrop, //
    };
    use kernel::{
        alloc::flags,
        coresight::sim as atb,
        of,
        platform, //
    };

    /// Trace RAM of a simulated TMC, in 32-bit words (16 KiB).
    pub(super) const SIM_RSZ_WORDS: usize = 4096;

    /// The model and what the sim observed of it.
    struct State {
        model: model::TmcModel<'static>,
        /// Whether the RAM's content was logged since the last stop.
        logged: bool,
    }

    /// A TMC model with its trace RAM.
    pub(super) struct SimTmc {
        state: ManuallyDrop<UnsafeCell<State>>,
        ram: *mut [u32; SIM_RSZ_WORDS],
        index: u32,
    }

    // SAFETY: The model is only reached through `with_io`, whose callers never overlap; `ram` is
    // owned by the model while it exists.
    unsafe impl Send for SimTmc {}
    // SAFETY: As above.
    unsafe impl Sync for SimTmc {}

    /// A fault the device tree asks the model to have (`linux,sim-fault`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Fault {
        /// `never-ready`: `STS.TMCReady` never rises.
        NeverReady,
        /// `flush-stuck`: a manual flush never completes.
        FlushStuck,
        /// `ram-stuck`: `RRD` never returns the empty marker.
        RamStuck,
        /// `lock-stuck`: the software lock cannot be cleared.
        LockStuck,
    }

    impl Fault {
        /// Reads the optional `linux,sim-fault` property of `dev`.
        pub(super) fn of(dev: &Device) -> Result<Option<Self>> {
            let Some(node) = dev.fwnode() else {
                return Ok(None);
            };
            let name = c_str!("linux,sim-fault");
            if !node.property_present(name) {
                return Ok(None);
            }
            for (value, fault) in [
                (c_str!("never-ready"), Self::NeverReady),
                (c_str!("flush-stuck"), Self::FlushStuck),
                (c_str!("ram-stuck"), Self::RamStuck),
                (c_str!("lock-stuck"), Self::LockStuck),
            ] {
                if node.property_match_string(name, value).is_ok() {
                    return Ok(Some(fault));
                }
            }
            dev_err!(
                dev,
                "linux,sim-fault must be never-ready, flush-stuck, ram-stuck or lock-stuck\n"
            );
            Err(EINVAL)
        }
    }

    impl SimTmc {
        /// Creates a reset model with zeroed RAM.
        pub(super) fn new(index: u32, fault: Option<Fault>) -> Result<Self> {
            let ram = KBox::<[u32; SIM_RSZ_WORDS]>::new_uninit(GFP_KERNEL | flags::__GFP_ZERO)?;
            // SAFETY: The allocation was zeroed, and zero is a valid `u32`.
            let ram = unsafe { ram.assume_init() };
            let ram: *mut [u32; SIM_RSZ_WORDS] = KBox::into_raw(ram);
            // SAFETY: `ram` was just allocated; only the model uses it, and it is freed in
            // `drop` after the model.
            let slice: &'static mut [u32] = unsafe { &mut *ram };
            let Some(mut m) = model::TmcModel::new(model::TmcModelConfig::Etb, slice) else {
                // SAFETY: `ram` came from `KBox::into_raw` and the model was not created.
                drop(unsafe { KBox::from_raw(ram) });
                return Err(EINVAL);
            };
            // A flush takes a few microseconds of the model's clock, TMCReady a few more.
            m.set_latencies(3, 2);
            match fault {
                None => {}
                Some(Fault::NeverReady) => m.set_fault_never_ready(true),
                Some(Fault::FlushStuck) => m.set_fault_flush_stuck(true),
                Some(Fault::RamStuck) => m.set_fault_ram_stuck(Some(model::RamStuck::NeverEmpty)),
                Some(Fault::LockStuck) => m.set_fault_lock_stuck(true),
            }
            Ok(Self {
                state: ManuallyDrop::new(UnsafeCell::new(State {
                    model: m,
                    logged: false,
                })),
                ram,
                index,
            })
        }
    }

    impl Drop for SimTmc {
        fn drop(&mut self) {
            // SAFETY: The model, which borrows the RAM, is dropped first and never used again;
            // then the RAM, which came from `KBox::into_raw`, is freed.
            unsafe {
                ManuallyDrop::drop(&mut self.state);
                drop(KBox::from_raw(self.ram));
            }
        }
    }

    /// The model's registers, with the trace bus feeding its formatter before each flush.
    struct SimIo<'m> {
        st: &'m mut State,
        index: u32,
    }

    impl SimIo<'_> {
        /// Logs what the stopped model holds, oldest word first, as a drain reads it: its length
        /// and a checksum of everything after the first frame (which a wrapped drain replaces
        /// with a barrier packet).
        fn log_held(&mut self) {
            let m = &mut self.st.model;
            let rsz = m.rsz();
            let full = m.read32(hw::TMC_STS) & hw::TMC_STS_FULL != 0;
            let rwp = usize::try_from(m.read32(hw::TMC_RWP) / 4).unwrap_or(0) % rsz.max(1);
            let rrp = usize::try_from(m.read32(hw::TMC_RRP) / 4).unwrap_or(0) % rsz.max(1);
            let words = m.words_held();
            let start = if full { rwp } else { rrp };
            let ram = m.ram();
            let bytes = (0..words)
                .map(|i| ram.get((start + i) % rsz).copied().unwrap_or(0))
                .flat_map(u32::to_le_bytes);
            let sum = kernel_io::fnv1a64(bytes.skip(hw::CS_FRAME_LEN));
            pr_info!(
                "sim tmc{}: model holds {} bytes, full {}, fnv64 after first frame {:016x}\n",
                self.index,
                words * 4,
                u8::from(full),
                sum
            );
        }
    }

    impl access::CsAccess for SimIo<'_> {
        fn read32(&mut self, offset: u32) -> u32 {
            if offset == hw::TMC_RRD && !self.st.logged && self.st.model.is_stopped() {
                self.st.logged = true;
                self.log_held();
            }
            self.st.model.read32(offset)
        }

        fn write32(&mut self, offset: u32, value: u32) {
            if offset == hw::TMC_FFCR && value & hw::TMC_FFCR_FLUSHMAN != 0 {
                let m = &mut self.st.model;
                atb::take(|id, bytes| {
                    m.push_trace(id, bytes);
                });
                self.st.logged = false;
            }
            self.st.model.write32(offset, value)
        }

        fn delay_us(&mut self, us: u32) {
            self.st.model.delay_us(us)
        }
    }

    impl Backend for SimTmc {
        unsafe fn with_io<R>(&self, f: impl FnOnce(&mut dyn access::CsAccess) -> R) -> R {
            // SAFETY: By the safety requirements this is the only access to the model.
            let st = unsafe { &mut *self.state.get() };
            f(&mut SimIo {
                st,
                index: self.index,
            })
        }
    }

    /// Platform driver for the simulated TMCs of the device tree.
    pub(super) struct TmcSim;

    static SIM_COUNT: Atomic<u32> = Atomic::new(0);

    kernel::of_device_table!(
        OF_TABLE,
        <TmcSim as platform::Driver>::IdInfo,
        [(of::DeviceId::new(c_str!("linux,coresight-tmc-sim")), ())]
    );

    impl platform::Driver for TmcSim {
        type IdInfo = ();
        type Data<'bound> = Pin<KBox<TmcDevice<SimTmc>>>;
        const OF_ID_TABLE: Option<of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);

        fn probe<'bound>(
            pdev: &'bound platform::Device<Core<'_>>,
            _info: Option<&'bound Self::IdInfo>,
        ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
            let dev: &Device<Core<'_>> = pdev.as_ref();
            let fault = Fault::of(dev)?;
            if let Some(f) = fault {
                dev_info!(dev, "model fault: {:?}\n", f);
            }
            let sim = SimTmc::new(SIM_COUNT.fetch_add(1, Relaxed), fault)?;
            KBox::pin_init(probe_tmc(dev, sim)?, GFP_KERNEL)
        }
    }
}

struct TmcModule {
    _amba: Pin<KBox<driver::Registration<amba::Adapter<TmcAmba>>>>,
    #[cfg(CONFIG_CORESIGHT_TMC_RUST_SIM)]
    _sim: Pin<KBox<driver::Registration<kernel::platform::Adapter<sim::TmcSim>>>>,
}

impl kernel::Module for TmcModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        Ok(Self {
            _amba: KBox::pin_init(driver::Registration::new(DRIVER_NAME, module), GFP_KERNEL)?,
            #[cfg(CONFIG_CORESIGHT_TMC_RUST_SIM)]
            _sim: KBox::pin_init(
                driver::Registration::new(c_str!("coresight-tmc-sim"), module),
                GFP_KERNEL,
            )?,
        })
    }
}

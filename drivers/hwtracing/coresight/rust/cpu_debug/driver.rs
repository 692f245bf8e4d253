// SPDX-License-Identifier: GPL-2.0

//! The CPU debug driver: the AMBA driver, the `enable` knob, and the panic callback that samples
//! one CPU ([`hw::sample_cpu`]) within its share of the phase's time budget and prints the sample
//! the way the C driver does. In a kdump capture kernel, a CPU that is not online there is
//! sampled as found at probe ([`hw::sample_cpu_as_found`]) and the sample handed over as a
//! vmcore device dump, named by the CPU's MPIDR, which every record carries.

use kernel::{
    amba, c_str,
    coresight::{
        self,
        access::FRAME,
        component::{
            Backend,
            Regs, //
        },
        panic_dump::{
            format::cpu_debug::{
                CpuSample,
                Edcidsr,
                Edprsr,
                Edvidsr,
                Outcome,
                PcKind,
                BUDGET_CUT_NOTE,
                RECORD_LEN, //
            },
            format::CPU_NONE,
            hand_over_capture,
            metadata_changed,
            DumpCallback,
            DumpInfo,
            DumpPayload,
            DumpType,
            Registration, //
        },
    },
    crash_dump, debugfs,
    device::{
        Core,
        Device, //
    },
    driver, fmt,
    io::mem::IoMem,
    kallsyms::Symbol,
    panic_notifier::Counter,
    prelude::*,
    str::CString,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
    },
    uaccess::UserSliceReader,
};

use crate::{
    hw::{
        self,
        read_arch,
        POWER_UP_DELAY_US, //
    },
    module_parameters,
};

/// Name the C driver has; the report's lines carry it.
const DRIVER_NAME: &CStr = c_str!("coresight-cpu-debug");

/// Bytes reserved in the dump for one CPU's record.
const RECORD_BYTES: usize = RECORD_LEN;

/// Whether sampling at panic is on.
static ENABLED: Atomic<bool> = Atomic::new(false);

/// Whether this panic's report header was printed (by the first CPU's sampler).
static HEADER_PRINTED: Atomic<bool> = Atomic::new(false);

/// The phase's time budget in microseconds (`budget_ms`, checked and set at load). Its default,
/// 50 ms, is long enough for a core that takes its time to power up (the C driver allows 32 ms),
/// short enough that a machine whose cores all stay down is not held for seconds.
static BUDGET_US: Atomic<u64> = Atomic::new(0);

/// Accepted values of `budget_ms`.
const BUDGET_MS_RANGE: core::ops::RangeInclusive<u32> = 1..=10_000;

/// The samplers registered: the budget left is shared between the CPUs not sampled yet.
static REGISTERED: Atomic<u32> = Atomic::new(0);

/// The samplers that ran in this panic.
static DONE: Atomic<u32> = Atomic::new(0);

/// Counter ticks the samplers of this panic have spent sampling (register accesses and waits
/// for power-up), what the budget bounds. The report lines each sampler prints are not counted:
/// on a slow serial console they take milliseconds per line, would spend the budget of a machine
/// whose CPUs are all powered, and are bounded by the number of lines anyway.
static SPENT: Atomic<u64> = Atomic::new(0);

/// Counts a registered sampler in [`REGISTERED`] while it lives.
struct Counted;

impl Counted {
    fn new() -> Self {
        REGISTERED.fetch_add(1, Relaxed);
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        REGISTERED.fetch_sub(1, Relaxed);
    }
}

/// What a sampler may spend: `None` when the budget is spent (the CPU is not reached), else the
/// delays of its share of what is left.
fn budget_share() -> Option<u32> {
    // Without a known frequency the time spent cannot be told: the whole budget is shared.
    let spent_us = Counter::us_in_ticks(SPENT.load(Relaxed), Counter::frequency());
    let left_us = BUDGET_US
        .load(Relaxed)
        .checked_sub(spent_us)
        .filter(|&l| l > 0)?;
    let cpus = REGISTERED
        .load(Relaxed)
        .saturating_sub(DONE.load(Relaxed))
        .max(1);
    let share_us = left_us / u64::from(cpus);
    Some(u32::try_from(share_us / u64::from(POWER_UP_DELAY_US)).unwrap_or(u32::MAX))
}

/// Samples one CPU at panic.
#[pin_data]
struct Sampler<B: Backend> {
    cpu: u32,
    /// The CPU's MPIDR affinity from the device tree, which every record carries: how a capture
    /// kernel's sample is matched to this kernel's CPU number.
    mpidr: Option<u64>,
    arch: kernel::coresight::panic_dump::format::cpu_debug::ArchData,
    /// The CPU's debug frame, claimed by the panic callback.
    #[pin]
    regs: Regs<B>,
    /// The bound device; the report's lines are prefixed with its name, as the C driver's are.
    dev: ARef<Device>,
    _counted: Counted,
}

/// Prints one line of the report with `dev_emerg!` on `$s.dev`.
macro_rules! report_line {
    ($s:expr, $($arg:tt)*) => {
        dev_emerg!($s.dev, "{}\n", fmt!($($arg)*))
    };
}

impl<B: Backend> Sampler<B> {
    /// Prints the sample as the C driver does, with the PC symbolised.
    fn report(&self, s: &CpuSample) {
        report_line!(self, "CPU[{}]:", s.cpu);
        if matches!(
            s.outcome,
            Outcome::NotImplemented | Outcome::NotReached | Outcome::Recorded
        ) {
            report_line!(self, " not sampled: {}", s.reason());
            return;
        }
        report_line!(self, " {}", Edprsr(s.edprsr));
        match s.outcome {
            Outcome::Sampled => {}
            Outcome::PoweredDown | Outcome::DoubleLocked => {
                report_line!(self, "No permission to access debug registers!");
                if s.budget_cut() {
                    report_line!(self, " not sampled: {}; {}", s.reason(), BUDGET_CUT_NOTE);
                } else {
                    report_line!(self, " not sampled: {}", s.reason());
                }
                return;
            }
            _ => {
                report_line!(self, "CPU is in Debug state or profiling is prohibited!");
                report_line!(self, " not sampled: {}", s.reason());
                return;
            }
        }
        match s.pc.kind {
            PcKind::ImplementationDefined => {
                report_line!(self, "Instruction offset is implementation defined");
            }
            PcKind::AArch32NoState => {
                report_line!(self, "AArch32 instruction set state not sampled");
            }
            _ => {}
        }
        report_line!(self, " EDPCSR:  {}", Symbol(s.pc.pc));
        if s.cidsr().is_some() {
            report_line!(self, " {}", Edcidsr(s.edcidsr));
        }
        if s.vidsr().is_some() {
            report_line!(self, " {}", Edvidsr(s.edvidsr));
        }
    }
}

impl<B: Backend> DumpCallback for Sampler<B> {
    const HAS_METADATA: bool = true;

    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        if !ENABLED.load(Relaxed) {
            // Off: nothing read, and the record says so.
            return Err(EPERM);
        }
        if !HEADER_PRINTED.xchg(true, Relaxed) {
            pr_emerg!("ARM external debug module:\n");
        }
        let mut sample = match budget_share() {
            None => CpuSample::not_reached(self.cpu, &self.arch),
            Some(max_delays) => {
                let start = Counter::read();
                // Only probe used the frame before, and it has returned: the claim is free.
                let mut claim = self.regs.try_claim().ok_or(EBUSY)?;
                let s = claim.with_io(|io| hw::sample_cpu(io, self.cpu, &self.arch, max_delays))?;
                SPENT.fetch_add(Counter::read().wrapping_sub(start), Relaxed);
                s
            }
        };
        DONE.fetch_add(1, Relaxed);
        sample.set_mpidr(self.mpidr);
        self.report(&sample);
        *written = sample.encode(buf).map_err(|_| ENOSPC)?;
        Ok(())
    }

    /// The CPU's number and MPIDR, recorded when the device is bound: a capture kernel's sample
    /// of this CPU names it by MPIDR only.
    fn metadata(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let s = CpuSample::recorded(self.cpu, &self.arch, self.mpidr);
        *written = s.encode(buf).map_err(|_| ENOSPC)?;
        Ok(())
    }
}

/// A sampler's registration with the panic dump.
type SamplerReg<B> = Pin<KBox<Registration<Sampler<B>>>>;

/// Registers the dump of one CPU's sampler.
fn register<B: Backend>(
    sampler: impl PinInit<Sampler<B>>,
    cpu: u32,
    name: &CStr,
) -> Result<SamplerReg<B>> {
    KBox::pin_init(
        Registration::new(
            DumpInfo {
                name,
                kind: DumpType::CpuDebug,
                cpu: Some(cpu),
                max_bytes: RECORD_BYTES,
                payload: DumpPayload::CpuDebug,
            },
            sampler,
        ),
        GFP_KERNEL,
    )
}

/// The AMBA driver for the real debug interfaces.
struct CpuDebug;

/// `DEVARCH`/`DEVTYPE` of an ARMv8 external debug interface, for UCI matching.
static UCI_DEBUG: amba::CsUci = amba::CsUci::new(0x4770_6a15, 0xfff0_ffff, 0x0000_0015);

kernel::amba_device_table!(
    AMBA_TABLE,
    [
        // Cortex-A53, A57, A72, A73.
        amba::DeviceId::new(0x000b_bd03, 0x000f_ffff),
        amba::DeviceId::new(0x000b_bd07, 0x000f_ffff),
        amba::DeviceId::new(0x000b_bd08, 0x000f_ffff),
        amba::DeviceId::new(0x000b_bd09, 0x000f_ffff),
        // Qualcomm Kryo, matched by UCI.
        amba::DeviceId::with_uci(0x000f_0205, 0x000f_ffff, &UCI_DEBUG),
        amba::DeviceId::with_uci(0x000f_0211, 0x000f_ffff, &UCI_DEBUG),
    ]
);

/// What a bound debug interface holds.
struct Binding<B: Backend> {
    /// The sampler of an online CPU, registered with the panic dump while the device is bound;
    /// `None` in a capture kernel for a CPU not online there, which was sampled at probe and
    /// handed over.
    _sampler: Option<SamplerReg<B>>,
}

/// In a kdump capture kernel, samples a CPU that is not online there as it was found (still
/// where it hung, parked, or powered off) and hands the sample over as the vmcore device dump
/// `coresight_capture:NAME`, where the host tool matches it to the crashed kernel's CPU by its
/// MPIDR. Nothing is sampled while sampling is off (`debug=1`): reading a powered-down core's
/// debug registers faults the bus on some SoCs, which is why the knob exists.
fn capture<B: Backend>(
    dev: &Device<Core<'_>>,
    iomem: &mut B,
    arch: &kernel::coresight::panic_dump::format::cpu_debug::ArchData,
    name: &CStr,
    mpidr: Option<u64>,
) {
    let Some(hwid) = mpidr else {
        dev_err!(
            dev,
            "capture kernel: no MPIDR for this debug interface; not sampled\n"
        );
        return;
    };
    if !ENABLED.load(Relaxed) {
        dev_info!(
            dev,
            "capture kernel: CPU with MPIDR {:#x} is not online here; not sampled (PC sampling is \
             off: debug=1)\n",
            hwid
        );
        return;
    }
    let mut sample = match iomem.with_io(|io| hw::sample_cpu_as_found(io, CPU_NONE, arch)) {
        Ok(s) => s,
        Err(e) => {
            dev_err!(
                dev,
                "capture kernel: frame not accessible ({})\n",
                e.to_errno()
            );
            return;
        }
    };
    sample.set_mpidr(Some(hwid));
    let info = DumpInfo {
        name,
        kind: DumpType::CpuDebug,
        cpu: None,
        max_bytes: RECORD_BYTES,
        payload: DumpPayload::CpuDebug,
    };
    let done = hand_over_capture(info, |buf, written| {
        *written = sample.encode(buf).map_err(|_| ENOSPC)?;
        Ok(())
    });
    match (done, sample.outcome) {
        (Ok(()), Outcome::Sampled) => dev_info!(
            dev,
            "capture kernel: CPU with MPIDR {:#x} (not online here): EDPCSR {:#x} (the crashed \
             kernel's address); handed over as a vmcore device dump\n",
            hwid,
            sample.pc.pc
        ),
        (Ok(()), _) => dev_info!(
            dev,
            "capture kernel: CPU with MPIDR {:#x} (not online here): not sampled: {}; handed \
             over as a vmcore device dump\n",
            hwid,
            sample.reason()
        ),
        (Err(e), _) => dev_err!(
            dev,
            "capture kernel: the sample of CPU with MPIDR {:#x} not handed over ({})\n",
            hwid,
            e.to_errno()
        ),
    }
}

impl amba::Driver for CpuDebug {
    type Data<'bound> = Binding<IoMem<'bound, FRAME>>;
    const ID_TABLE: amba::IdTable = &AMBA_TABLE;

    fn probe<'bound>(
        adev: &'bound amba::Device<Core<'_>>,
        _id: &'bound amba::DeviceId,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = adev.as_ref();
        let mpidr = coresight::get_cpu_hwid(dev).ok();
        let cpu = coresight::get_cpu(dev);
        // In a capture kernel, a CPU that is not online there (not even possible, with
        // `nr_cpus=1`) is still as the crashed kernel left it.
        let elsewhere = crash_dump::is_kdump_kernel()
            && cpu.as_ref().map_or(true, |&c| !coresight::cpu_online(c));
        let cpu = match cpu {
            Ok(c) => c,
            Err(_) if elsewhere => CPU_NONE,
            Err(e) => {
                dev_err!(dev, "no CPU for this debug interface\n");
                return Err(e);
            }
        };
        let mut iomem = adev.io_request().iomap_sized::<FRAME>()?;
        // Probe owns the frame until it is put behind its lock below.
        let arch = iomem
            .with_io(|io| read_arch(io, cfg!(CONFIG_64BIT)))?
            .map_err(|e| {
                dev_err!(dev, "CPU{}: {}\n", cpu, e);
                ENODEV
            })?;
        let name = CString::try_from_fmt(fmt!("{}", dev.name()))?;
        if elsewhere {
            capture(dev, &mut iomem, &arch, &name, mpidr);
            return Ok(Binding { _sampler: None });
        }
        let plain: &Device = dev;
        let sampler = pin_init!(Sampler {
            cpu,
            mpidr,
            arch,
            regs <- Regs::new(iomem),
            dev: ARef::from(plain),
            _counted: Counted::new(),
        });
        let reg = register(sampler, cpu, &name)?;
        // The CPU's MPIDR in the region now: a capture kernel names it by that alone.
        match metadata_changed() {
            // No region: nothing to record in.
            Ok(()) | Err(ENODEV) => {}
            Err(e) => dev_warn!(dev, "CPU{}: MPIDR not recorded ({})\n", cpu, e.to_errno()),
        }
        dev_info!(dev, "Coresight debug-CPU{} initialized\n", cpu);
        Ok(Binding {
            _sampler: Some(reg),
        })
    }
}

/// The `enable` debugfs file: reads `1` or `0`.
fn show_enable(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", u8::from(ENABLED.load(Relaxed)))
}

/// The `enable` debugfs file: takes `1` or `0`; anything else is rejected and changes nothing.
fn store_enable(_: &(), reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 8];
    let n = reader.len().min(buf.len());
    reader.read_slice(&mut buf[..n])?;
    let on = match buf[..n].trim_ascii() {
        b"1" => true,
        b"0" => false,
        _ => return Err(EINVAL),
    };
    ENABLED.store(on, Relaxed);
    pr_info!(
        "PC sampling at panic {}\n",
        if on { "enabled" } else { "disabled" }
    );
    Ok(())
}

pub(crate) struct CpuDebugModule {
    _driver: Pin<KBox<driver::Registration<amba::Adapter<CpuDebug>>>>,
    _knob: Pin<KBox<debugfs::File<()>>>,
    _dir: debugfs::Dir,
}

impl kernel::Module for CpuDebugModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let budget_ms = module_parameters::budget_ms.value();
        if !BUDGET_MS_RANGE.contains(&budget_ms) {
            pr_err!(
                "budget_ms={} is outside {}..={}\n",
                budget_ms,
                BUDGET_MS_RANGE.start(),
                BUDGET_MS_RANGE.end()
            );
            return Err(EINVAL);
        }
        BUDGET_US.store(u64::from(budget_ms) * 1000, Relaxed);
        let on = module_parameters::debug.value()
            || module_parameters::enable.value()
            || cfg!(CONFIG_CORESIGHT_CPU_DEBUG_DEFAULT_ON);
        ENABLED.store(on, Relaxed);

        let dir = debugfs::Dir::new(c_str!("coresight_cpu_debug"));
        let knob = KBox::pin_init(
            dir.read_write_callback_file(c_str!("enable"), (), &show_enable, &store_enable),
            GFP_KERNEL,
        )?;
        let driver = KBox::pin_init(driver::Registration::new(DRIVER_NAME, module), GFP_KERNEL)?;
        pr_info!(
            "PC sampling at panic {}, within {} ms for all CPUs\n",
            if on { "enabled" } else { "disabled" },
            budget_ms
        );
        Ok(Self {
            _driver: driver,
            _knob: knob,
            _dir: dir,
        })
    }
}

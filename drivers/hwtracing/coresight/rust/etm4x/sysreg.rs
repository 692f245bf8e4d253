// SPDX-License-Identifier: GPL-2.0

//! ETMv4 trace units reached through system registers (`arm,coresight-etm4x-sysreg`).
//!
//! Such a unit has no memory-mapped frame: its registers are `MRS`/`MSR` operands on its own CPU,
//! encoded as [`hw::sysreg_of_offset`] says. [`SysRegIo`] maps the register offsets the driver
//! uses to those instructions; an offset without a system register reads as all ones (like an
//! absent register) and ignores writes, which is what the software lock and power registers of
//! the memory-mapped interface look like here. Writes are followed by an `ISB`, so that a write
//! to `TRCPRGCTLR` or `TRCOSLAR` has taken effect before the next status read. The 64-bit address
//! comparator values (`TRCACVRn`, the hardware stop's) are written whole through
//! [`CsAccess::write64`], one `MSR`; polls are `read_poll_timeout_atomic()`'s, as over MMIO. The
//! table below is checked on the host (crates/cspd-hw/tests/etm4x.rs):
//! each operand is the encoding [`hw::sysreg_of_offset`] gives its offset, and LLVM's assembler
//! encodes the register's name, in the comment, alike (reading what the table reads, writing
//! what it only writes). The accessors have never run: they need a CPU with the trace system
//! registers, which no machine here has.

use core::arch::asm;

use kernel::{
    acpi,
    c_str,
    device::{
        Core,
        Device, //
    },
    of,
    platform,
    prelude::*, //
};

use kernel::{
    coresight::{
        access::{
            from_io,
            to_io,
            CsAccess,
            Frame,
            Polled, //
        },
        component::{
            poll_atomic,
            Backend, //
        },
    },
    io::IoLoc,
};

use crate::{
    driver::{
        probe_etm,
        EtmDevice, //
    },
    hw, //
};

/// Defines `read(offset)` and `write(offset, value)` over a table of trace registers: offset,
/// system register, and access (`ro`, `wo` or `rw`).
macro_rules! sysregs {
    (@read ro) => { true };
    (@read rw) => { true };
    (@read wo) => { false };
    (@write ro) => { false };
    (@write rw) => { true };
    (@write wo) => { true };
    ($($off:literal => $name:literal, $acc:ident;)*) => {
        /// Reads the trace register at `offset`, if it has a readable system register.
        ///
        /// # Safety
        ///
        /// The calling CPU is the unit's and implements the trace system registers.
        unsafe fn read(offset: u32) -> Option<u64> {
            $(
                if sysregs!(@read $acc) && offset == $off {
                    let v: u64;
                    // SAFETY: Reading a trace system register has no side effect; by the
                    // safety requirements this CPU implements them.
                    unsafe {
                        asm!(concat!("mrs {0}, ", $name), out(reg) v, options(nomem, nostack))
                    };
                    return Some(v);
                }
            )*
            None
        }

        /// Writes the trace register at `offset`, if it has a writable system register.
        ///
        /// # Safety
        ///
        /// The calling CPU is the unit's and implements the trace system registers.
        unsafe fn write(offset: u32, v: u64) -> bool {
            $(
                if sysregs!(@write $acc) && offset == $off {
                    // SAFETY: By the safety requirements this CPU implements the trace system
                    // registers; they only affect the trace unit.
                    unsafe {
                        asm!(concat!("msr ", $name, ", {0}"), in(reg) v, options(nostack));
                        asm!("isb", options(nostack));
                    }
                    return true;
                }
            )*
            false
        }
    };
}

// The registers the hardware logic uses, encoded as `hw::sysreg_of_offset()` says.
sysregs! {
    0x004 => "S2_1_C0_C1_0", rw; // TRCPRGCTLR
    0x00C => "S2_1_C0_C3_0", ro; // TRCSTATR
    0x010 => "S2_1_C0_C4_0", rw; // TRCCONFIGR
    0x018 => "S2_1_C0_C6_0", rw; // TRCAUXCTLR
    0x020 => "S2_1_C0_C8_0", rw; // TRCEVENTCTL0R
    0x024 => "S2_1_C0_C9_0", rw; // TRCEVENTCTL1R
    0x02C => "S2_1_C0_C11_0", rw; // TRCSTALLCTLR
    0x030 => "S2_1_C0_C12_0", rw; // TRCTSCTLR
    0x034 => "S2_1_C0_C13_0", rw; // TRCSYNCPR
    0x038 => "S2_1_C0_C14_0", rw; // TRCCCCTLR
    0x03C => "S2_1_C0_C15_0", rw; // TRCBBCTLR
    0x040 => "S2_1_C0_C0_1", rw; // TRCTRACEIDR
    0x080 => "S2_1_C0_C0_2", rw; // TRCVICTLR
    0x084 => "S2_1_C0_C1_2", rw; // TRCVIIECTLR
    0x088 => "S2_1_C0_C2_2", rw; // TRCVISSCTLR
    0x180 => "S2_1_C0_C0_6", ro; // TRCIDR8
    0x184 => "S2_1_C0_C1_6", ro; // TRCIDR9
    0x188 => "S2_1_C0_C2_6", ro; // TRCIDR10
    0x18C => "S2_1_C0_C3_6", ro; // TRCIDR11
    0x190 => "S2_1_C0_C4_6", ro; // TRCIDR12
    0x194 => "S2_1_C0_C5_6", ro; // TRCIDR13
    0x1E0 => "S2_1_C0_C8_7", ro; // TRCIDR0
    0x1E4 => "S2_1_C0_C9_7", ro; // TRCIDR1
    0x1E8 => "S2_1_C0_C10_7", ro; // TRCIDR2
    0x1EC => "S2_1_C0_C11_7", ro; // TRCIDR3
    0x1F0 => "S2_1_C0_C12_7", ro; // TRCIDR4
    0x1F4 => "S2_1_C0_C13_7", ro; // TRCIDR5
    0x1F8 => "S2_1_C0_C14_7", ro; // TRCIDR6
    0x1FC => "S2_1_C0_C15_7", ro; // TRCIDR7
    0x400 => "S2_1_C2_C0_0", rw; // TRCACVR0
    0x408 => "S2_1_C2_C2_0", rw; // TRCACVR1
    0x410 => "S2_1_C2_C4_0", rw; // TRCACVR2
    0x418 => "S2_1_C2_C6_0", rw; // TRCACVR3
    0x420 => "S2_1_C2_C8_0", rw; // TRCACVR4
    0x428 => "S2_1_C2_C10_0", rw; // TRCACVR5
    0x430 => "S2_1_C2_C12_0", rw; // TRCACVR6
    0x438 => "S2_1_C2_C14_0", rw; // TRCACVR7
    0x440 => "S2_1_C2_C0_1", rw; // TRCACVR8
    0x448 => "S2_1_C2_C2_1", rw; // TRCACVR9
    0x450 => "S2_1_C2_C4_1", rw; // TRCACVR10
    0x458 => "S2_1_C2_C6_1", rw; // TRCACVR11
    0x460 => "S2_1_C2_C8_1", rw; // TRCACVR12
    0x468 => "S2_1_C2_C10_1", rw; // TRCACVR13
    0x470 => "S2_1_C2_C12_1", rw; // TRCACVR14
    0x478 => "S2_1_C2_C14_1", rw; // TRCACVR15
    0x480 => "S2_1_C2_C0_2", rw; // TRCACATR0
    0x488 => "S2_1_C2_C2_2", rw; // TRCACATR1
    0x490 => "S2_1_C2_C4_2", rw; // TRCACATR2
    0x498 => "S2_1_C2_C6_2", rw; // TRCACATR3
    0x4A0 => "S2_1_C2_C8_2", rw; // TRCACATR4
    0x4A8 => "S2_1_C2_C10_2", rw; // TRCACATR5
    0x4B0 => "S2_1_C2_C12_2", rw; // TRCACATR6
    0x4B8 => "S2_1_C2_C14_2", rw; // TRCACATR7
    0x4C0 => "S2_1_C2_C0_3", rw; // TRCACATR8
    0x4C8 => "S2_1_C2_C2_3", rw; // TRCACATR9
    0x4D0 => "S2_1_C2_C4_3", rw; // TRCACATR10
    0x4D8 => "S2_1_C2_C6_3", rw; // TRCACATR11
    0x4E0 => "S2_1_C2_C8_3", rw; // TRCACATR12
    0x4E8 => "S2_1_C2_C10_3", rw; // TRCACATR13
    0x4F0 => "S2_1_C2_C12_3", rw; // TRCACATR14
    0x4F8 => "S2_1_C2_C14_3", rw; // TRCACATR15
    0x300 => "S2_1_C1_C0_4", wo; // TRCOSLAR
    0x304 => "S2_1_C1_C1_4", ro; // TRCOSLSR
    0xFB8 => "S2_1_C7_C14_6", ro; // TRCAUTHSTATUS
    0xFBC => "S2_1_C7_C15_6", ro; // TRCDEVARCH
}

/// Returns whether this CPU implements the trace unit system registers
/// (`ID_AA64DFR0_EL1.TraceVer`).
fn trace_sysregs_implemented() -> bool {
    let dfr0: u64;
    // SAFETY: `ID_AA64DFR0_EL1` is readable at EL1 on every ARMv8-A CPU and has no side effect.
    unsafe { asm!("mrs {0}, ID_AA64DFR0_EL1", out(reg) dfr0, options(nomem, nostack)) };
    (dfr0 >> 4) & 0xf != 0
}

/// Register access through system instructions, on the unit's CPU.
///
/// # Invariants
///
/// Only used on the unit's CPU, which implements the trace system registers.
pub(crate) struct SysRegIo(());

impl SysRegIo {
    /// Returns access to this CPU's trace unit.
    ///
    /// # Safety
    ///
    /// The caller runs on the unit's CPU, which implements the trace system registers, and the
    /// returned value is not used on another CPU.
    unsafe fn new() -> Self {
        Self(())
    }
}

impl SysRegIo {
    /// Reads the trace register at a location's offset; one without a system register reads
    /// as all ones.
    fn read_at(&mut self, offset: usize) -> u64 {
        let Ok(offset) = u32::try_from(offset) else {
            return u64::MAX;
        };
        // SAFETY: By the type invariant this runs on the unit's CPU.
        unsafe { read(offset) }.unwrap_or(u64::MAX)
    }

    /// Writes the trace register at a location's offset; one without a system register ignores
    /// the write.
    fn write_at(&mut self, offset: usize, value: u64) {
        if let Ok(offset) = u32::try_from(offset) {
            // SAFETY: By the type invariant this runs on the unit's CPU.
            unsafe { write(offset, value) };
        }
    }
}

impl CsAccess for SysRegIo {
    fn read<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        // CAST: the 32-bit registers' system registers hold their value in the low word.
        let raw = self.read_at(loc.offset()) as u32;
        from_io::<T, L>(raw)
    }

    fn write<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        let offset = loc.offset();
        self.write_at(offset, u64::from(to_io::<T, L>(value)));
    }

    fn update<T, L, F>(&mut self, loc: L, f: F)
    where
        L: IoLoc<Frame, T, IoType = u32>,
        F: FnOnce(T) -> T,
    {
        let offset = loc.offset();
        // CAST: as in `read`.
        let value = f(from_io::<T, L>(self.read_at(offset) as u32));
        self.write_at(offset, u64::from(to_io::<T, L>(value)));
    }

    // The 64-bit registers (the address comparators) are one system register each: one `MSR`.
    fn write64<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        let offset = loc.offset();
        self.write_at(offset, to_io::<T, L>(value));
    }

    fn read64<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        from_io::<T, L>(self.read_at(loc.offset()))
    }

    fn poll<T: Copy>(
        &mut self,
        retry: u32,
        delay_us: u32,
        op: impl FnMut(&mut Self) -> T,
        cond: impl FnMut(&T) -> bool,
    ) -> Result<Polled<T>, Polled<T>> {
        poll_atomic(self, retry, delay_us, op, cond)
    }
}

/// A system-register trace unit, reached from its CPU.
pub(crate) struct SysRegEtm {
    cpu: u32,
}

impl Backend for SysRegEtm {
    type Io = SysRegIo;

    fn with_io<R>(&mut self, f: impl FnOnce(&mut Self::Io) -> R) -> Result<R> {
        // The driver runs every sequence on the unit's CPU, with interrupts off (from
        // `smp::call_on_cpu`, or at panic after checking the CPU): a call from another CPU would
        // reach that CPU's trace unit instead, and is refused.
        if kernel::cpu::CpuId::current().as_u32() != self.cpu {
            return Err(EXDEV);
        }
        // SAFETY: This is the unit's CPU (checked above, and interrupts are off, so it stays
        // so), and probe checked that it implements the trace system registers.
        Ok(f(&mut unsafe { SysRegIo::new() }))
    }

    fn cpu(&self) -> Option<u32> {
        Some(self.cpu)
    }

    fn reachable_from_any_cpu(&self) -> bool {
        false
    }
}

/// Platform driver for the system-register trace units of the device tree and ACPI.
pub(crate) struct Etm4xSysReg;

kernel::of_device_table!(
    OF_TABLE,
    <Etm4xSysReg as platform::Driver>::IdInfo,
    [(of::DeviceId::new(c_str!("arm,coresight-etm4x-sysreg")), ())]
);

kernel::acpi_device_table!(
    ACPI_TABLE,
    <Etm4xSysReg as platform::Driver>::IdInfo,
    [(acpi::DeviceId::new(c_str!("ARMHC500")), ())]
);

impl platform::Driver for Etm4xSysReg {
    type IdInfo = ();
    type Data<'bound> = Pin<KBox<EtmDevice<SysRegEtm>>>;
    const OF_ID_TABLE: Option<of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);
    const ACPI_ID_TABLE: Option<acpi::IdTable<Self::IdInfo>> = Some(&ACPI_TABLE);

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = pdev.as_ref();
        let cpu = kernel::coresight::get_cpu(dev)?;
        let id = kernel::cpu::CpuId::from_u32(cpu).ok_or(ENODEV)?;
        if !kernel::smp::call_on_cpu(id, trace_sysregs_implemented)? {
            dev_err!(dev, "CPU{} has no trace unit system registers\n", cpu);
            return Err(ENODEV);
        }
        KBox::pin_init(
            probe_etm(dev, SysRegEtm { cpu }, hw::Interface::SysReg)?,
            GFP_KERNEL,
        )
    }
}

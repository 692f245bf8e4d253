// SPDX-License-Identifier: GPL-2.0

//! What the CoreSight drivers with a panic dump share: register access through a mapped frame
//! ([`Mmio`], the [`Backend`] trait behind which a driver keeps a memory-mapped frame or, for an
//! ETMv4, the CPU's system registers), [`Component`], the pair of registrations a trace component
//! has, and [`Regs`], the lock that every register sequence on a component claims.

use crate::{
    coresight::{
        self,
        access::{
            CsAccess,
            FRAME, //
        },
        panic_dump::{
            self,
            DumpCallback,
            DumpInfo,
            DumpPayload,
            DumpType, //
        },
        Desc,
        Kind,
        Operations, //
    },
    device::{
        Bound,
        Device, //
    },
    io::{
        mem::IoMem,
        Io, //
    },
    prelude::*,
    str::CString,
    sync::{
        new_spinlock_irq,
        SpinLockIrq,
        SpinLockIrqGuard, //
    },
    time::{
        delay::udelay,
        Delta, //
    },
};

/// Register access through a mapped frame.
pub struct Mmio<'a, 'b>(pub &'b IoMem<'a, FRAME>);

impl CsAccess for Mmio<'_, '_> {
    fn read32(&mut self, offset: u32) -> u32 {
        // An offset outside the frame reads as all ones, like an absent register.
        usize::try_from(offset)
            .ok()
            .and_then(|o| self.0.try_read32(o).ok())
            .unwrap_or(u32::MAX)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        if let Ok(o) = usize::try_from(offset) {
            let _ = self.0.try_write32(value, o);
        }
    }

    fn delay_us(&mut self, us: u32) {
        udelay(Delta::from_micros(i64::from(us)));
    }
}

/// How a driver reaches a component's registers.
///
/// A backend is used by one register sequence at a time: the driver keeps it in [`Regs`], whose
/// claim gives the `&mut` access [`Backend::with_io`] needs (a backend is a handle, `Unpin`).
pub trait Backend: Send + Unpin {
    /// Runs `f` with register access.
    fn with_io<R>(&mut self, f: impl FnOnce(&mut dyn CsAccess) -> R) -> R;

    /// Returns the CPU that run-time operations run on: the one whose trace unit this is (its
    /// power domain, or its system registers); `None` when any CPU will do.
    fn cpu(&self) -> Option<u32> {
        None
    }

    /// Returns whether another CPU can reach the registers at panic time, when [`Backend::cpu`]
    /// may be stopped (true for memory-mapped frames, false for system registers).
    fn reachable_from_any_cpu(&self) -> bool {
        true
    }
}

impl Backend for IoMem<'_, FRAME> {
    fn with_io<R>(&mut self, f: impl FnOnce(&mut dyn CsAccess) -> R) -> R {
        f(&mut Mmio(self))
    }
}

/// How a trace component is registered with the CoreSight core and with the panic dump.
pub struct ComponentInfo {
    /// Name on the CoreSight bus and of the dump record.
    pub name: CString,
    /// Type and subtype for the CoreSight core.
    pub kind: Kind,
    /// The CPU the component belongs to, if any.
    pub cpu: Option<u32>,
    /// The panic-dump phase of its callback.
    pub dump: DumpType,
    /// Bytes to reserve for its record.
    pub max_bytes: usize,
    /// What layout its record's data has.
    pub payload: DumpPayload,
}

/// A bound trace component: registered with the CoreSight core (sysfs, paths, operations `O`)
/// and with the panic dump (callback `D` and its slot). Dropping it removes the dump
/// registration first, then the component.
#[pin_data]
pub struct Component<O: Operations, D: DumpCallback> {
    #[pin]
    dump: panic_dump::Registration<D>,
    #[pin]
    cs: coresight::Registration<O>,
}

impl<O: Operations, D: DumpCallback> Component<O, D> {
    /// Registers `info` for `dev`, with the operations `ops` and the panic callback `callback`.
    pub fn new<'a>(
        dev: &'a Device<Bound>,
        info: ComponentInfo,
        ops: O,
        callback: D,
    ) -> impl PinInit<Self, Error> + 'a
    where
        O: 'a,
        D: 'a,
    {
        try_pin_init!(Self {
            dump <- panic_dump::Registration::new(
                DumpInfo {
                    name: &info.name,
                    kind: info.dump,
                    cpu: info.cpu,
                    max_bytes: info.max_bytes,
                    payload: info.payload,
                },
                Ok::<_, Error>(callback),
            ),
            cs <- coresight::Registration::new(
                dev,
                Desc {
                    name: &info.name,
                    kind: info.kind,
                    cpu: info.cpu,
                },
                ops,
            ),
        })
    }
}

/// A component's registers behind the lock that every register sequence claims.
///
/// The CoreSight core serialises sysfs operations with its mutex, but perf calls link operations
/// without it, an ETMv4's sequences run on its own CPU from an inter-processor interrupt, and the
/// panic path must not interleave with a sequence that a CPU stopped by the panic left half done.
/// Each of them claims the registers with [`Regs::try_claim`] and gives up (`EBUSY`, or a record
/// that says "busy" at panic) when another holds them: none waits, so none can deadlock against
/// a stopped CPU. The lock is a [`SpinLockIrq`], so lockdep sees every claim (all taken with
/// interrupts off, in process or interrupt context alike) and the claim is the only way to the
/// backend.
#[pin_data]
pub struct Regs<B: Backend> {
    #[pin]
    lock: SpinLockIrq<B>,
    cpu: Option<u32>,
    reachable_from_any_cpu: bool,
}

/// A claim on a component's registers ([`Regs::try_claim`]), released on drop.
pub struct Claim<'a, B: Backend>(SpinLockIrqGuard<'a, B>);

impl<B: Backend> Regs<B> {
    /// Puts `backend` behind the lock.
    pub fn new(backend: B) -> impl PinInit<Self> {
        let cpu = backend.cpu();
        let reachable_from_any_cpu = backend.reachable_from_any_cpu();
        pin_init!(Self {
            lock <- new_spinlock_irq!(backend, "coresight_regs"),
            cpu,
            reachable_from_any_cpu,
        })
    }

    /// Claims the registers; `None` when another sequence holds them.
    pub fn try_claim(&self) -> Option<Claim<'_, B>> {
        self.lock.try_lock().map(Claim)
    }

    /// The backend's [`Backend::cpu`].
    pub fn cpu(&self) -> Option<u32> {
        self.cpu
    }

    /// The backend's [`Backend::reachable_from_any_cpu`].
    pub fn reachable_from_any_cpu(&self) -> bool {
        self.reachable_from_any_cpu
    }
}

impl<B: Backend> Claim<'_, B> {
    /// Runs `f` with register access.
    pub fn with_io<R>(&mut self, f: impl FnOnce(&mut dyn CsAccess) -> R) -> R {
        self.0.with_io(f)
    }
}

// SPDX-License-Identifier: GPL-2.0

//! What the CoreSight drivers with a panic dump share: register access through a mapped frame
//! ([`CsAccess`] on [`IoMem`]; the [`Backend`] trait behind which a driver keeps a memory-mapped
//! frame or, for an ETMv4, the CPU's system registers), [`Component`], the pair of registrations
//! a trace component has, and [`Regs`], the lock that every register sequence on a component
//! claims.

use crate::{
    coresight::{
        self,
        access::{
            from_io,
            to_io,
            CsAccess,
            Frame,
            Polled,
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
        poll::read_poll_timeout_atomic,
        Io,
        IoLoc, //
    },
    prelude::*,
    str::CString,
    sync::{
        new_spinlock_irq,
        SpinLockIrq,
        SpinLockIrqGuard, //
    },
    time::Delta,
};

/// Register access through a mapped frame, with [`Io`]: every offset a register location has is
/// checked at build time against the frame's size, so no access can fail. The accessors are
/// always inlined, as [`Io`]'s are, so that the check sees an array index bounded by `try_at()`.
impl CsAccess for IoMem<'_, FRAME> {
    #[inline(always)]
    fn read<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        Io::read(&*self, loc)
    }

    #[inline(always)]
    fn write<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        Io::write(&*self, loc, value)
    }

    #[inline(always)]
    fn update<T, L, F>(&mut self, loc: L, f: F)
    where
        L: IoLoc<Frame, T, IoType = u32>,
        F: FnOnce(T) -> T,
    {
        Io::update(&*self, loc, f)
    }

    #[inline(always)]
    fn write64<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        let offset = loc.offset();
        let value = to_io::<T, L>(value);
        // CAST: the low and high words of `value`.
        Io::write(&*self, offset, value as u32);
        Io::write(&*self, offset + 4, (value >> 32) as u32);
    }

    #[inline(always)]
    fn read64<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        let offset = loc.offset();
        let lo: u32 = Io::read(&*self, offset);
        let hi: u32 = Io::read(&*self, offset + 4);
        from_io::<T, L>(u64::from(lo) | (u64::from(hi) << 32))
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

/// [`CsAccess::poll`] for registers the CPU reaches (a mapped frame, system registers):
/// `read_poll_timeout_atomic()`, with the reads counted so that the result says how many waits
/// came between reads, as every implementation of `poll` does.
///
/// `read_poll_timeout_atomic()` reads at most `retry` times (its argument) and waits after each
/// read that missed, the last one included: given `retry + 1`, it reads as often as the contract
/// of [`CsAccess::poll`] allows, and waits once more before it gives up.
pub fn poll_atomic<A: CsAccess, T: Copy>(
    io: &mut A,
    retry: u32,
    delay_us: u32,
    mut op: impl FnMut(&mut A) -> T,
    mut cond: impl FnMut(&T) -> bool,
) -> Result<Polled<T>, Polled<T>> {
    let mut reads = 0u32;
    let mut last = None;
    let met = read_poll_timeout_atomic(
        || {
            let value = op(io);
            reads += 1;
            last = Some(value);
            Ok(value)
        },
        |value: &T| cond(value),
        Delta::from_micros(i64::from(delay_us)),
        usize::try_from(retry).map_or(usize::MAX, |r| r.saturating_add(1)),
    );
    let delays = reads.saturating_sub(1);
    match (met, last) {
        (Ok(value), _) => Ok(Polled { value, delays }),
        (Err(_), Some(value)) => Err(Polled { value, delays }),
        // Not reached: `retry + 1` is at least one read. Read once to have a value to report.
        (Err(_), None) => Err(Polled {
            value: op(io),
            delays,
        }),
    }
}

/// How a driver reaches a component's registers.
///
/// A backend is used by one register sequence at a time: the driver keeps it in [`Regs`], whose
/// claim gives the `&mut` access [`Backend::with_io`] needs (a backend is a handle, `Unpin`).
pub trait Backend: Send + Unpin {
    /// The register access a sequence gets.
    type Io: CsAccess;

    /// Runs `f` with register access; fails, without running `f`, when the registers cannot be
    /// reached from the calling CPU ([`Backend::reachable_from_any_cpu`]).
    fn with_io<R>(&mut self, f: impl FnOnce(&mut Self::Io) -> R) -> Result<R>;

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
    type Io = Self;

    fn with_io<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> Result<R> {
        Ok(f(self))
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
    /// A source that loses its context when its CPU powers down ([`Desc::pm_save`]).
    pub pm_save: bool,
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
                    pm_save: info.pm_save,
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
    /// Runs `f` with register access ([`Backend::with_io`]).
    pub fn with_io<R>(&mut self, f: impl FnOnce(&mut B::Io) -> R) -> Result<R> {
        self.0.with_io(f)
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Register access to one CoreSight component, the way the C core's `csdev_access` does it.
//!
//! The hardware sequences of the CoreSight drivers (TMC drain, ETMv4 save, CPU debug sampling)
//! are written once, generic over [`CsAccess`], and take the typed registers that
//! [`register!`](crate::io::register!) defines: `io.read(STS)`, `io.write_reg(CTL::...)`,
//! `io.update(FFCR, |r| ...)`. A driver implements [`CsAccess`] over MMIO
//! ([`kernel::io::mem::IoMem`]) or, for an ETMv4 without a memory-mapped interface, over the
//! CPU's system registers; the KUnit tests and the host crates implement it with register-level
//! models of the components.
//!
//! [`kernel::io::Io`] cannot be that trait: its backends are views of MMIO or system memory,
//! while a model is code. Neither can [`kernel::io::poll`] poll through it: it waits with
//! `udelay()` itself, so a model (whose status bits change after some time of its own clock)
//! would never see time pass; [`poll`] waits through [`CsAccess::delay_us`] instead, with the
//! same contract as `read_poll_timeout_atomic()`.
//!
//! This file is shared with the host (`crates/kernel-host`): it uses only `core` and
//! `kernel::io::{register, IoLoc, Region}`.
//!
//! [`kernel::io::mem::IoMem`]: https://rust.docs.kernel.org/kernel/io/mem/struct.IoMem.html
//! [`kernel::io::Io`]: https://rust.docs.kernel.org/kernel/io/trait.Io.html
//! [`kernel::io::poll`]: https://rust.docs.kernel.org/kernel/io/poll/index.html

use kernel::io::{
    register,
    register::LocatedRegister,
    IoLoc,
    Region, //
};

/// Size of a CoreSight component's register frame.
pub const FRAME: usize = 0x1000;

/// The I/O region register locations of a CoreSight frame are valid in.
pub type Frame = Region<FRAME>;

/// The key that unlocks the CoreSight software lock when written to [`LAR`](struct@LAR).
pub const CS_UNLOCK_KEY: u32 = 0xC5AC_CE55;

register! {
    /// Lock Access Register: the key in it unlocks the software lock, anything else locks it.
    pub LAR(u32) @ 0xFB0 {
        /// The key written.
        31:0 key;
    }

    /// Lock Status Register of the software lock.
    pub LSR(u32) @ 0xFB4 {
        /// The software lock is set: writes other than to `LAR` are ignored.
        1:1 slk => bool;
        /// The software lock is implemented.
        0:0 sli => bool;
    }

    /// Authentication Status register.
    pub AUTHSTATUS(u32) @ 0xFB8 {
        /// The authentication status bits.
        31:0 value;
    }

    /// Device Architecture register.
    pub DEVARCH(u32) @ 0xFBC {
        /// The architecture, revision and presence fields.
        31:0 value;
    }

    /// Device Type Identifier register.
    pub DEVTYPE(u32) @ 0xFCC {
        /// The major and sub type.
        31:0 value;
    }
}

impl LSR {
    /// Returns whether the software lock is implemented and set.
    pub fn locked(self) -> bool {
        self.sli() && self.slk()
    }
}

/// Access to the 4 KiB register frame of one CoreSight component.
///
/// Offsets are byte offsets into the frame, as in the Arm documents. Implementations must not
/// sleep, allocate or take a lock that can be waited on: the panic path calls them.
pub trait CsAccess {
    /// Reads the 32-bit register at `offset`.
    fn read32(&mut self, offset: u32) -> u32;

    /// Writes `value` to the 32-bit register at `offset`.
    fn write32(&mut self, offset: u32, value: u32);

    /// Writes `value` to the 64-bit register at `offset`.
    ///
    /// The default writes the low word at `offset`, then the high word at `offset + 4`, as the
    /// memory-mapped interface of a CoreSight component allows; a backend whose 64-bit registers
    /// are one access (system registers) overrides it.
    fn write64(&mut self, offset: u32, value: u64) {
        // CAST: the low and high words of `value`.
        self.write32(offset, value as u32);
        self.write32(offset.wrapping_add(4), (value >> 32) as u32);
    }

    /// Reads the 64-bit register at `offset`; the default reads the low word, then the high one.
    fn read64(&mut self, offset: u32) -> u64 {
        let lo = self.read32(offset);
        let hi = self.read32(offset.wrapping_add(4));
        u64::from(hi) << 32 | u64::from(lo)
    }

    /// Waits about `us` microseconds between two polls of a status bit.
    ///
    /// The kernel busy-waits (`udelay`); models advance their own clock.
    fn delay_us(&mut self, us: u32);
}

/// Typed register access over any [`CsAccess`], with the registers that
/// [`register!`](crate::io::register!) defines: what the hardware sequences call.
///
/// It is implemented for every [`CsAccess`] (including `dyn CsAccess`), the way
/// [`kernel::io::Io`] is for every I/O view.
///
/// [`kernel::io::Io`]: https://rust.docs.kernel.org/kernel/io/trait.Io.html
pub trait TypedAccess: CsAccess {
    /// Reads the register at `loc`, as its type.
    fn read<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T>,
        L::IoType: From<u32> + Into<u32>,
    {
        let raw = L::IoType::from(self.read32(offset_of(loc.offset())));
        Into::<T>::into(raw)
    }

    /// Writes `value` to the register at `loc`.
    fn write<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T>,
        L::IoType: From<u32> + Into<u32>,
    {
        let off = offset_of(loc.offset());
        let raw: L::IoType = value.into();
        self.write32(off, Into::<u32>::into(raw));
    }

    /// Writes a register value to the register it belongs to.
    fn write_reg<T, L, V>(&mut self, value: V)
    where
        L: IoLoc<Frame, T>,
        L::IoType: From<u32> + Into<u32>,
        V: LocatedRegister<Frame, Location = L, Value = T>,
    {
        let (loc, value) = value.into_io_op();
        self.write(loc, value);
    }

    /// Reads the register at `loc`, changes it with `f` and writes it back.
    fn update<T, L, F>(&mut self, loc: L, f: F)
    where
        L: IoLoc<Frame, T>,
        L::IoType: From<u32> + Into<u32>,
        F: FnOnce(T) -> T,
    {
        let off = offset_of(loc.offset());
        let raw = L::IoType::from(self.read32(off));
        let raw: L::IoType = f(Into::<T>::into(raw)).into();
        self.write32(off, Into::<u32>::into(raw));
    }
}

impl<A: CsAccess + ?Sized> TypedAccess for A {}

/// Converts a location's offset into a frame offset; past the 32-bit range reads as absent.
fn offset_of(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// Unlocks the software lock of the frame (writes the key to [`LAR`](struct@LAR)).
pub fn unlock<A: TypedAccess + ?Sized>(io: &mut A) {
    io.write_reg(LAR::from_raw(CS_UNLOCK_KEY));
}

/// Sets the software lock of the frame again (writes anything but the key to [`LAR`](struct@LAR)).
pub fn lock<A: TypedAccess + ?Sized>(io: &mut A) {
    io.write_reg(LAR::from_raw(0));
}

/// What [`poll`] saw: the last value read and the delays spent waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polled<T> {
    /// The last value `op` returned.
    pub value: T,
    /// How many times [`poll`] waited.
    pub delays: u32,
}

/// Polls a register until a condition holds, a bounded number of times; the panic path's poll.
///
/// The contract of the kernel's `read_poll_timeout_atomic()`: calls `op` and returns as soon as
/// `cond` holds for its value, else busy-waits `delay_us` and tries again. It waits at most
/// `retry` times (so reads at most `retry + 1` times) and does not wait after the last read. The
/// wait goes through [`CsAccess::delay_us`], so that a model's clock advances.
///
/// Returns `Ok` with the value that met the condition, or, when the bound was reached, `Err` with
/// the last value read (what a panic record keeps of how far the device got). Both say how many
/// delays were spent.
pub fn poll<A, T>(
    io: &mut A,
    retry: u32,
    delay_us: u32,
    mut op: impl FnMut(&mut A) -> T,
    mut cond: impl FnMut(&T) -> bool,
) -> Result<Polled<T>, Polled<T>>
where
    A: CsAccess + ?Sized,
{
    let mut delays = 0;
    loop {
        let value = op(io);
        if cond(&value) {
            return Ok(Polled { value, delays });
        }
        if delays >= retry {
            return Err(Polled { value, delays });
        }
        io.delay_us(delay_us);
        delays += 1;
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Register access to one CoreSight component, the way the C core's `csdev_access` does it.
//!
//! The hardware sequences of the CoreSight drivers (TMC drain, ETMv4 save, CPU debug sampling)
//! are written once, generic over [`CsAccess`], and take the typed registers that
//! [`register!`](crate::io::register!) defines: `io.read(STS)`, `io.write_reg(CTL::...)`,
//! `io.update(FFCR, |r| ...)`, `io.poll(...)`. The kernel implements [`CsAccess`] over a mapped
//! frame (`IoMem`, in `kernel::coresight::component`: through [`kernel::io::Io`] with build-time
//! checked offsets, polling with `read_poll_timeout_atomic()`) and, for an ETMv4 without a
//! memory-mapped interface, over the CPU's system registers. The KUnit tests' scripted devices
//! and the host's register-level models are [`RawFrame`]s: registers by offset and a clock of
//! their own, which the blanket [`CsAccess`] implementation polls through (the kernel's
//! `read_poll_timeout_atomic()` waits with `udelay()` itself, so a model whose status bits change
//! after some time of its own clock would never see time pass).
//!
//! This file is shared with the host (`crates/kernel-host`): it uses only `core` and
//! `kernel::io::{register, IoLoc, Region}`.
//!
//! [`kernel::io::Io`]: https://rust.docs.kernel.org/kernel/io/trait.Io.html

use kernel::io::{
    register,
    register::{
        LocatedRegister,
        Register, //
    },
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

/// Access to the 4 KiB register frame of one CoreSight component: what the hardware sequences
/// are generic over, statically dispatched.
///
/// The registers are the typed locations that [`register!`](crate::io::register!) defines, whose
/// offsets are constants: the kernel's implementation over a mapped frame
/// ([`kernel::io::mem::IoMem`] of [`FRAME`] bytes) checks them at build time, so an access can
/// neither fail nor read a made-up value. Implementations must not sleep, allocate or take a lock
/// that can be waited on: the panic path calls them.
///
/// [`kernel::io::mem::IoMem`]: https://rust.docs.kernel.org/kernel/io/mem/struct.IoMem.html
pub trait CsAccess {
    /// Reads the 32-bit register at `loc`, as its type.
    fn read<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u32>;

    /// Writes `value` to the 32-bit register at `loc`.
    fn write<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u32>;

    /// Reads the 32-bit register at `loc`, changes it with `f` and writes it back.
    fn update<T, L, F>(&mut self, loc: L, f: F)
    where
        L: IoLoc<Frame, T, IoType = u32>,
        F: FnOnce(T) -> T;

    /// Writes `value` to the 64-bit register at `loc` (an address comparator) whole: over a
    /// memory-mapped frame as two 32-bit accesses, the low word first (the frame's `Region`
    /// promises no 8-byte alignment, and CoreSight frames take 64-bit registers as two words);
    /// through system registers as one.
    fn write64<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u64>;

    /// Reads the 64-bit register at `loc` (an address comparator) whole: over a memory-mapped
    /// frame as two 32-bit accesses, the low word first (as [`Self::write64`]); through system
    /// registers as one.
    fn read64<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u64>;

    /// Polls a register until a condition holds, a bounded number of times; the panic path's
    /// poll.
    ///
    /// Calls `op` and returns as soon as `cond` holds for its value, else waits about `delay_us`
    /// microseconds and tries again: at most `retry` waits, so at most `retry + 1` reads. The
    /// kernel's implementation is `read_poll_timeout_atomic()`; a model's advances its own clock
    /// (the kernel helper waits with `udelay()` itself, so a model would never see time pass).
    ///
    /// Returns `Ok` with the value that met the condition, or, when the bound was reached, `Err`
    /// with the last value read (what a panic record keeps of how far the device got). Both say
    /// how many times a read was followed by another.
    fn poll<T: Copy>(
        &mut self,
        retry: u32,
        delay_us: u32,
        op: impl FnMut(&mut Self) -> T,
        cond: impl FnMut(&T) -> bool,
    ) -> Result<Polled<T>, Polled<T>>;

    /// Writes a register value to the register it belongs to.
    fn write_reg<T, L, V>(&mut self, value: V)
    where
        L: IoLoc<Frame, T, IoType = u32>,
        V: LocatedRegister<Frame, Location = L, Value = T>,
    {
        let (loc, value) = value.into_io_op();
        self.write(loc, value);
    }
}

/// A register frame that code stands behind (a register-level model, a scripted test device):
/// registers by byte offset, and a clock that waits advance. Every [`RawFrame`] is a
/// [`CsAccess`].
///
/// The kernel's drivers do not use it: their frames are [`kernel::io::mem::IoMem`], whose
/// offsets are checked at build time.
///
/// [`kernel::io::mem::IoMem`]: https://rust.docs.kernel.org/kernel/io/mem/struct.IoMem.html
pub trait RawFrame {
    /// Reads the 32-bit register at `offset`.
    fn read32(&mut self, offset: u32) -> u32;

    /// Writes `value` to the 32-bit register at `offset`.
    fn write32(&mut self, offset: u32, value: u32);

    /// Lets about `us` microseconds of the frame's clock pass, between two polls.
    fn delay_us(&mut self, us: u32);
}

/// The frame offset of register `R`, for a [`RawFrame`] that tells its registers apart by offset.
pub const fn offset_of<R: Register>() -> u32 {
    // CAST: `register!` declares the frame's registers inside its 4 KiB.
    R::OFFSET as u32
}

/// The frame offset of a register location: below [`FRAME`], as `register!` declares them.
fn frame_offset(offset: usize) -> u32 {
    debug_assert!(offset < FRAME);
    // CAST: register locations are inside the 4 KiB frame.
    offset as u32
}

/// A location's value type from the raw bits of its access (for implementations of [`CsAccess`],
/// where the bits' type is known to be `u32` or `u64`).
pub fn from_io<T, L: IoLoc<Frame, T>>(raw: L::IoType) -> T {
    raw.into()
}

/// The raw bits of the access to a location, from its value type (see [`from_io`]).
pub fn to_io<T, L: IoLoc<Frame, T>>(value: T) -> L::IoType {
    L::IoType::from(value)
}

impl<R: RawFrame> CsAccess for R {
    fn read<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        from_io::<T, L>(self.read32(frame_offset(loc.offset())))
    }

    fn write<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u32>,
    {
        let off = frame_offset(loc.offset());
        self.write32(off, to_io::<T, L>(value));
    }

    fn update<T, L, F>(&mut self, loc: L, f: F)
    where
        L: IoLoc<Frame, T, IoType = u32>,
        F: FnOnce(T) -> T,
    {
        let off = frame_offset(loc.offset());
        let value = f(from_io::<T, L>(self.read32(off)));
        self.write32(off, to_io::<T, L>(value));
    }

    fn write64<T, L>(&mut self, loc: L, value: T)
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        // A frame takes a 64-bit register as two words: the low one, then the high one.
        let off = frame_offset(loc.offset());
        let value = to_io::<T, L>(value);
        // CAST: the low and high words of `value`.
        self.write32(off, value as u32);
        self.write32(off.wrapping_add(4), (value >> 32) as u32);
    }

    fn read64<T, L>(&mut self, loc: L) -> T
    where
        L: IoLoc<Frame, T, IoType = u64>,
    {
        let off = frame_offset(loc.offset());
        let lo = u64::from(self.read32(off));
        let hi = u64::from(self.read32(off.wrapping_add(4)));
        from_io::<T, L>(lo | (hi << 32))
    }

    fn poll<T: Copy>(
        &mut self,
        retry: u32,
        delay_us: u32,
        mut op: impl FnMut(&mut Self) -> T,
        mut cond: impl FnMut(&T) -> bool,
    ) -> Result<Polled<T>, Polled<T>> {
        let mut delays = 0;
        loop {
            let value = op(self);
            if cond(&value) {
                return Ok(Polled { value, delays });
            }
            if delays >= retry {
                return Err(Polled { value, delays });
            }
            self.delay_us(delay_us);
            delays += 1;
        }
    }
}

/// Unlocks the software lock of the frame (writes the key to [`LAR`](struct@LAR)).
pub fn unlock<A: CsAccess>(io: &mut A) {
    io.write_reg(LAR::from_raw(CS_UNLOCK_KEY));
}

/// Sets the software lock of the frame again (writes anything but the key to [`LAR`](struct@LAR)).
pub fn lock<A: CsAccess>(io: &mut A) {
    io.write_reg(LAR::from_raw(0));
}

/// What [`CsAccess::poll`] saw: the last value read and the waits between reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polled<T> {
    /// The last value `op` returned.
    pub value: T,
    /// How many reads were followed by another (waits between reads).
    pub delays: u32,
}

// SPDX-License-Identifier: GPL-2.0

//! Register access to one CoreSight component, the way the C core's `csdev_access` does it.
//!
//! The hardware sequences (TMC drain, ETMv4 save, CPU debug sampling) are written once, generic
//! over [`CsAccess`]. In the kernel it is implemented over MMIO (`kernel::io`) or system
//! registers; on the host and in the KUnit tests it is implemented by the register-level models.
//!
//! This file is plain `core` Rust: it is compiled into the kernel drivers and into the host
//! crates.

/// Access to the 4 KiB register frame of one CoreSight component.
///
/// Offsets are byte offsets into the frame, as in the Arm documents. Implementations must not
/// sleep, allocate or take a lock that can be waited on: the panic path calls them.
pub trait CsAccess {
    /// Reads the 32-bit register at `offset`.
    fn read32(&mut self, offset: u32) -> u32;

    /// Writes `value` to the 32-bit register at `offset`.
    fn write32(&mut self, offset: u32, value: u32);

    /// Waits about `us` microseconds between two polls of a status bit.
    ///
    /// The kernel busy-waits (`udelay`); models advance their own clock.
    fn delay_us(&mut self, us: u32);
}

/// The key that unlocks the CoreSight software lock when written to `LAR`.
pub const CS_UNLOCK_KEY: u32 = 0xC5AC_CE55;

/// Offset of the Lock Access Register common to CoreSight components.
pub const CS_LAR: u32 = 0xFB0;

/// Offset of the Lock Status Register common to CoreSight components.
pub const CS_LSR: u32 = 0xFB4;

/// Offset of the Authentication Status register common to CoreSight components.
pub const CS_AUTHSTATUS: u32 = 0xFB8;

/// Offset of the Device Architecture register.
pub const CS_DEVARCH: u32 = 0xFBC;

/// Offset of the Device Configuration register.
pub const CS_DEVID: u32 = 0xFC8;

/// Offset of the Device Type Identifier register.
pub const CS_DEVTYPE: u32 = 0xFCC;

/// Polls `offset` until `(value & mask) == want`, at most `tries` times with `delay_us` between
/// reads.
///
/// Returns the last value read on success, or `Err(last value)` when the bound was reached, so
/// that callers can record how far the device got.
pub fn poll32<A: CsAccess + ?Sized>(
    io: &mut A,
    offset: u32,
    mask: u32,
    want: u32,
    tries: u32,
    delay_us: u32,
) -> Result<u32, u32> {
    let mut value = io.read32(offset);
    let mut left = tries;
    while value & mask != want {
        if left == 0 {
            return Err(value);
        }
        left -= 1;
        io.delay_us(delay_us);
        value = io.read32(offset);
    }
    Ok(value)
}

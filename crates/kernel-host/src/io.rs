//! Register locations and the `register!` macro, as the kernel's `kernel::io` has them.

pub mod register;

pub use crate::register;

/// An I/O region of `SIZE` bytes, the base that register locations are valid in.
pub struct Region<const SIZE: usize>([u8; SIZE]);

/// A location in an I/O region: its offset, and the type read from and written to it.
pub trait IoLoc<Base: ?Sized, T> {
    /// The integer type of the access.
    type IoType: Into<T> + From<T>;

    /// Returns the offset of the location.
    fn offset(self) -> usize;
}

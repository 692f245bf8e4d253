//! Register types: what [`register!`](crate::register!) defines, and their locations.

use core::marker::PhantomData;

use super::{
    IoLoc,
    Region, //
};

/// A register type.
pub trait Register: Sized {
    /// The integer the register is stored in.
    type Storage: Into<Self> + From<Self>;

    /// Offset of the register (of the first one, for an array).
    const OFFSET: usize;
}

/// A register at a fixed offset.
pub trait FixedRegister: Register {}

/// The location of a fixed register `T`; `register!` defines one named like the register.
pub struct FixedRegisterLoc<T: FixedRegister>(PhantomData<T>);

impl<T: FixedRegister> FixedRegisterLoc<T> {
    /// Returns the location of `T`.
    #[expect(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<const SIZE: usize, T: FixedRegister> IoLoc<Region<SIZE>, T> for FixedRegisterLoc<T> {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        T::OFFSET
    }
}

impl<const SIZE: usize, T: FixedRegister> IoLoc<Region<SIZE>, T> for T {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        T::OFFSET
    }
}

/// A register value that knows where it is written.
pub trait LocatedRegister<Base: ?Sized> {
    /// The register type.
    type Value: Register;
    /// Its location.
    type Location: IoLoc<Base, Self::Value>;

    /// Returns the location and the value to write there.
    fn into_io_op(self) -> (Self::Location, Self::Value);
}

impl<const SIZE: usize, T: FixedRegister> LocatedRegister<Region<SIZE>> for T {
    type Value = T;
    type Location = FixedRegisterLoc<T>;

    fn into_io_op(self) -> (FixedRegisterLoc<T>, T) {
        (FixedRegisterLoc::new(), self)
    }
}

/// An array of registers of the same layout.
pub trait RegisterArray: Register {
    /// Number of registers.
    const SIZE: usize;
    /// Bytes from one register to the next.
    const STRIDE: usize;
}

/// The location of one register of an array.
pub struct RegisterArrayLoc<T: RegisterArray>(usize, PhantomData<T>);

impl<T: RegisterArray> RegisterArrayLoc<T> {
    /// Returns the location of register `idx`, or `None` past the end of the array.
    pub fn try_new(idx: usize) -> Option<Self> {
        (idx < T::SIZE).then_some(Self(idx, PhantomData))
    }
}

impl<const SIZE: usize, T: RegisterArray> IoLoc<Region<SIZE>, T> for RegisterArrayLoc<T> {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        T::OFFSET + self.0 * T::STRIDE
    }
}

/// Locations of the registers of an array.
pub trait Array {
    /// Returns the location of register `idx`, or `None` past the end of the array.
    fn try_at(idx: usize) -> Option<RegisterArrayLoc<Self>>
    where
        Self: RegisterArray,
    {
        RegisterArrayLoc::try_new(idx)
    }
}

/// Defines register types with typed fields and their locations (see the kernel's
/// `kernel::io::register!`).
///
/// The host supports the forms the shared files use: a register at a fixed offset,
/// `NAME(u32) @ 0x10 { ... }`, and an array of registers, `NAME(u32)[8] @ 0x1e0 { ... }` or
/// `NAME(u32)[8, stride = 8] @ 0x1e0 { ... }`.
#[macro_export]
macro_rules! register {
    (
        $(
            $(#[$attr:meta])* $vis:vis $name:ident ($storage:ty)
                $([ $size:expr $(, stride = $stride:expr)? ])? @ $offset:literal
            { $($fields:tt)* }
        )*
    ) => {
        $(
            $crate::register!(@one $(#[$attr])* $vis $name ($storage)
                $([ $size $(, stride = $stride)? ])? @ $offset { $($fields)* });
        )*
    };

    (@one $(#[$attr:meta])* $vis:vis $name:ident ($storage:ty) @ $offset:literal
        { $($fields:tt)* }) => {
        $crate::bitfield!($(#[$attr])* $vis struct $name($storage) { $($fields)* });

        impl $crate::io::register::Register for $name {
            type Storage = $storage;
            const OFFSET: usize = $offset;
        }

        impl $crate::io::register::FixedRegister for $name {}

        $(#[$attr])*
        $vis const $name: $crate::io::register::FixedRegisterLoc<$name> =
            $crate::io::register::FixedRegisterLoc::new();
    };

    (@one $(#[$attr:meta])* $vis:vis $name:ident ($storage:ty) [ $size:expr ] @ $offset:literal
        { $($fields:tt)* }) => {
        $crate::register!(@one $(#[$attr])* $vis $name ($storage)
            [ $size, stride = ::core::mem::size_of::<$storage>() ] @ $offset { $($fields)* });
    };

    (@one $(#[$attr:meta])* $vis:vis $name:ident ($storage:ty)
        [ $size:expr, stride = $stride:expr ] @ $offset:literal { $($fields:tt)* }) => {
        $crate::bitfield!($(#[$attr])* $vis struct $name($storage) { $($fields)* });

        impl $crate::io::register::Register for $name {
            type Storage = $storage;
            const OFFSET: usize = $offset;
        }

        impl $crate::io::register::RegisterArray for $name {
            const SIZE: usize = $size;
            const STRIDE: usize = $stride;
        }

        impl $crate::io::register::Array for $name {}
    };
}

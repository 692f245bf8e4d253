//! Integers known to fit in a number of bits, as the kernel's `kernel::num` has them.

use core::fmt;
use core::ops::Deref;

/// An integer of type `T` that fits in its low `N` bits.
///
/// The field getters of [`register!`](crate::register!) return it; `.get()` gives the value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bounded<T, const N: u32>(T);

macro_rules! impl_bounded {
    ($($t:ty),*) => {$(
        impl<const N: u32> Bounded<$t, N> {
            /// The largest value that fits.
            const MAX_VALUE: $t = <$t>::MAX >> (<$t>::BITS - N);

            /// Returns `VALUE`, checked at build time to fit.
            pub const fn new<const VALUE: $t>() -> Self {
                const { assert!(N >= 1 && N <= <$t>::BITS) };
                const { assert!(VALUE <= Self::MAX_VALUE, "value does not fit in the field") };
                Self(VALUE)
            }

            /// Returns `value` if it fits, `None` otherwise.
            pub fn try_new(value: $t) -> Option<Self> {
                (value <= Self::MAX_VALUE).then_some(Self(value))
            }

            /// Returns the low `N` bits of `value` (what a register field holds).
            #[doc(hidden)]
            pub const fn from_masked(value: $t) -> Self {
                Self(value & Self::MAX_VALUE)
            }

            /// Returns the value.
            pub const fn get(self) -> $t {
                self.0
            }
        }

        impl<const N: u32> Deref for Bounded<$t, N> {
            type Target = $t;

            fn deref(&self) -> &$t {
                &self.0
            }
        }

        impl<const N: u32> PartialEq<$t> for Bounded<$t, N> {
            fn eq(&self, other: &$t) -> bool {
                self.0 == *other
            }
        }

        impl<const N: u32> From<bool> for Bounded<$t, N> {
            fn from(b: bool) -> Self {
                Self(<$t>::from(b))
            }
        }

        impl From<Bounded<$t, 1>> for bool {
            fn from(b: Bounded<$t, 1>) -> bool {
                b.0 != 0
            }
        }

        impl Bounded<$t, 1> {
            /// Returns the one-bit value as a `bool`.
            pub fn into_bool(self) -> bool {
                self.0 != 0
            }
        }

        impl<const N: u32> fmt::Debug for Bounded<$t, N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    )*};
}

impl_bounded!(u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::Bounded;

    #[test]
    fn bounds() {
        assert_eq!(Bounded::<u32, 4>::try_new(15).map(|b| b.get()), Some(15));
        assert!(Bounded::<u32, 4>::try_new(16).is_none());
        assert_eq!(Bounded::<u32, 3>::from_masked(0xF).get(), 7);
        assert_eq!(Bounded::<u32, 32>::new::<0xFFFF_FFFF>().get(), u32::MAX);
        assert!(bool::from(Bounded::<u32, 1>::from(true)));
        assert_eq!(Bounded::<u32, 2>::new::<2>().get(), 2);
    }
}

//! The `bitfield!` macro that `register!` expands to: an integer type split into typed fields.
//!
//! Written for the host from the kernel's documentation of `kernel::bitfield!`; the same syntax
//! (`hi:lo name`, `hi:lo name => Type`, `hi:lo name ?=> Type`, a doc comment on each) gives the
//! same methods: `name()`, `with_name()`, `with_const_name::<V>()` (untyped fields), and the
//! `NAME_MASK`, `NAME_SHIFT` and `NAME_RANGE` constants.

/// Defines an integer type with typed bit fields (see the module documentation).
#[macro_export]
macro_rules! bitfield {
    (
        $(#[$attr:meta])* $vis:vis struct $name:ident($storage:ty) { $($fields:tt)* }
    ) => {
        $(#[$attr])*
        #[allow(non_camel_case_types)]
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq)]
        $vis struct $name {
            inner: $storage,
        }

        #[allow(dead_code)]
        impl $name {
            /// Creates a value from its raw bits.
            $vis const fn from_raw(value: $storage) -> Self {
                Self { inner: value }
            }

            /// Returns the raw bits.
            $vis const fn into_raw(self) -> $storage {
                self.inner
            }
        }

        impl ::core::convert::From<$name> for $storage {
            fn from(v: $name) -> $storage {
                v.inner
            }
        }

        impl ::core::convert::From<$storage> for $name {
            fn from(v: $storage) -> $name {
                $name { inner: v }
            }
        }

        $crate::bitfield!(@fields $vis $name $storage { $($fields)* });
    };

    (@fields $vis:vis $name:ident $storage:ty {
        $(
            $(#[doc = $doc:expr])* $hi:literal:$lo:literal $field:ident
                $(?=> $try_ty:ty)? $(=> $into_ty:ty)? ;
        )*
    }) => {
        #[allow(dead_code)]
        impl $name {
            $(
                $crate::bitfield!(@field $(#[doc = $doc])* $vis $name $storage : $hi:$lo $field
                    $(?=> $try_ty)? $(=> $into_ty)?);
            )*
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("<raw>", &::core::format_args!("{:#x}", self.inner))
                    $(.field(stringify!($field), &self.$field()))*
                    .finish()
            }
        }
    };

    // The raw accessors and constants of one field.
    (@raw $vis:vis $storage:ty : $hi:literal:$lo:literal $field:ident) => {
        $crate::macros::paste! {
            #[doc = concat!("Mask of the `", stringify!($field), "` field.")]
            $vis const [<$field:upper _MASK>]: $storage =
                (<$storage>::MAX >> (<$storage>::BITS - ($hi + 1 - $lo))) << $lo;
            #[doc = concat!("Position of the `", stringify!($field), "` field.")]
            $vis const [<$field:upper _SHIFT>]: u32 = $lo;
            #[doc = concat!("Bits of the `", stringify!($field), "` field.")]
            $vis const [<$field:upper _RANGE>]: ::core::ops::RangeInclusive<u8> = $lo..=$hi;

            fn [<__ $field>](self) -> $crate::num::Bounded<$storage, { $hi + 1 - $lo }> {
                $crate::num::Bounded::<$storage, { $hi + 1 - $lo }>::from_masked(self.inner >> $lo)
            }

            const fn [<__with_ $field>](
                mut self,
                value: $crate::num::Bounded<$storage, { $hi + 1 - $lo }>,
            ) -> Self {
                let mask = Self::[<$field:upper _MASK>];
                self.inner = (self.inner & !mask) | ((value.get() << $lo) & mask);
                self
            }
        }
    };

    (@field $(#[doc = $doc:expr])* $vis:vis $name:ident $storage:ty :
        $hi:literal:$lo:literal $field:ident ?=> $try_ty:ty) => {
        $crate::bitfield!(@raw $vis $storage : $hi:$lo $field);
        $crate::macros::paste! {
            $(#[doc = $doc])*
            $vis fn $field(self) -> ::core::result::Result<
                $try_ty,
                <$try_ty as ::core::convert::TryFrom<
                    $crate::num::Bounded<$storage, { $hi + 1 - $lo }>,
                >>::Error,
            > {
                ::core::convert::TryFrom::try_from(self.[<__ $field>]())
            }

            $(#[doc = $doc])*
            $vis fn [<with_ $field>](self, value: $try_ty) -> Self {
                self.[<__with_ $field>](value.into())
            }
        }
    };

    (@field $(#[doc = $doc:expr])* $vis:vis $name:ident $storage:ty :
        $hi:literal:$lo:literal $field:ident => $into_ty:ty) => {
        $crate::bitfield!(@raw $vis $storage : $hi:$lo $field);
        $crate::macros::paste! {
            $(#[doc = $doc])*
            $vis fn $field(self) -> $into_ty {
                self.[<__ $field>]().into()
            }

            $(#[doc = $doc])*
            $vis fn [<with_ $field>](self, value: $into_ty) -> Self {
                self.[<__with_ $field>](value.into())
            }
        }
    };

    (@field $(#[doc = $doc:expr])* $vis:vis $name:ident $storage:ty :
        $hi:literal:$lo:literal $field:ident) => {
        $crate::bitfield!(@raw $vis $storage : $hi:$lo $field);
        $crate::macros::paste! {
            $(#[doc = $doc])*
            $vis fn $field(self) -> $crate::num::Bounded<$storage, { $hi + 1 - $lo }> {
                self.[<__ $field>]()
            }

            $(#[doc = $doc])*
            $vis const fn [<with_const_ $field>]<const VALUE: $storage>(self) -> Self {
                self.[<__with_ $field>]($crate::num::Bounded::<$storage, { $hi + 1 - $lo }>::new::<VALUE>())
            }

            $(#[doc = $doc])*
            $vis fn [<with_ $field>]<T>(self, value: T) -> Self
            where
                T: ::core::convert::Into<$crate::num::Bounded<$storage, { $hi + 1 - $lo }>>,
            {
                self.[<__with_ $field>](value.into())
            }
        }
    };
}

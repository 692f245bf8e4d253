// SPDX-License-Identifier: GPL-2.0

//! Abstractions for the AMBA bus.
//!
//! AMBA (PrimeCell) devices are matched by their peripheral ID, read from the device itself. For
//! CoreSight components (component class 0x9) the bus also compares the Unique Component
//! Identifier (`DEVARCH` and `DEVTYPE`) with the one an id table entry points to: that is what the
//! `data` field of a C `struct amba_id` holds for them, so this abstraction never stores driver
//! data there.
//!
//! C header: [`include/linux/amba/bus.h`](srctree/include/linux/amba/bus.h)

use crate::{
    bindings,
    container_of,
    device,
    device_id::RawDeviceId,
    driver,
    error::{
        from_result,
        to_result, //
    },
    io::Resource,
    prelude::*,
    types::Opaque,
    ThisModule, //
};

#[cfg(CONFIG_HAS_IOMEM)]
use crate::io::mem::IoRequest;

use core::{
    marker::PhantomData,
    mem::offset_of,
    ptr::{
        addr_of_mut,
        NonNull, //
    },
};

/// An adapter for the registration of AMBA drivers.
pub struct Adapter<T: Driver>(T);

// SAFETY:
// - `bindings::amba_driver` is a C type declared as `repr(C)`.
// - `T::Data` is the type of the driver's device private data.
// - `struct amba_driver` embeds a `struct device_driver` as `drv`.
// - `DEVICE_DRIVER_OFFSET` is the correct byte offset to the embedded `struct device_driver`.
unsafe impl<T: Driver> driver::DriverLayout for Adapter<T> {
    type DriverType = bindings::amba_driver;
    type DriverData<'bound> = T::Data<'bound>;
    const DEVICE_DRIVER_OFFSET: usize = core::mem::offset_of!(Self::DriverType, drv);
}

// SAFETY: A call to `unregister` for a given instance of `DriverType` is guaranteed to be valid if
// a preceding call to `register` has been successful.
unsafe impl<T: Driver> driver::RegistrationOps for Adapter<T> {
    unsafe fn register(
        adrv: &Opaque<Self::DriverType>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        // SAFETY: It's safe to set the fields of `struct amba_driver` on initialization.
        unsafe {
            (*adrv.get()).drv.name = name.as_char_ptr();
            (*adrv.get()).probe = Some(Self::probe_callback);
            (*adrv.get()).remove = Some(Self::remove_callback);
            (*adrv.get()).id_table = T::ID_TABLE.as_ptr();
        }

        // SAFETY: `adrv` is guaranteed to be a valid `DriverType`.
        to_result(unsafe { bindings::__amba_driver_register(adrv.get(), module.as_ptr()) })
    }

    unsafe fn unregister(adrv: &Opaque<Self::DriverType>) {
        // SAFETY: `adrv` is guaranteed to be a valid `DriverType`.
        unsafe { bindings::amba_driver_unregister(adrv.get()) };
    }
}

impl<T: Driver> Adapter<T> {
    extern "C" fn probe_callback(
        adev: *mut bindings::amba_device,
        id: *const bindings::amba_id,
    ) -> c_int {
        // SAFETY: The AMBA bus only ever calls the probe callback with a valid pointer to a
        // `struct amba_device`.
        //
        // INVARIANT: `adev` is valid for the duration of `probe_callback()`.
        let adev = unsafe { &*adev.cast::<Device<device::CoreInternal<'_>>>() };

        // SAFETY: `id` is the matching entry of `T::ID_TABLE`, a static table of `DeviceId`, a
        // `#[repr(transparent)]` wrapper of `struct amba_id`.
        let id = unsafe { &*id.cast::<DeviceId>() };

        from_result(|| {
            let data = T::probe(adev, id);

            adev.as_ref().set_drvdata(data)?;
            Ok(0)
        })
    }

    extern "C" fn remove_callback(adev: *mut bindings::amba_device) {
        // SAFETY: The AMBA bus only ever calls the remove callback with a valid pointer to a
        // `struct amba_device`.
        //
        // INVARIANT: `adev` is valid for the duration of `remove_callback()`.
        let adev = unsafe { &*adev.cast::<Device<device::CoreInternal<'_>>>() };

        // SAFETY: `remove_callback` is only ever called after a successful call to
        // `probe_callback`, hence it's guaranteed that `Device::set_drvdata()` has been called
        // and stored a `Pin<KBox<T::Data<'_>>>`.
        let data = unsafe { adev.as_ref().drvdata_borrow::<T::Data<'_>>() };

        T::unbind(adev, data);
    }
}

/// Declares a kernel module that exposes a single AMBA driver.
///
/// # Examples
///
/// ```ignore
/// kernel::module_amba_driver! {
///     type: MyDriver,
///     name: "Module name",
///     authors: ["Author name"],
///     description: "Description",
///     license: "GPL v2",
/// }
/// ```
#[macro_export]
macro_rules! module_amba_driver {
    ($($f:tt)*) => {
        $crate::module_driver!(<T>, $crate::amba::Adapter<T>, { $($f)* });
    };
}

/// A CoreSight Unique Component Identifier to match, for an id table entry (`amba_cs_uci_id`).
#[repr(transparent)]
pub struct CsUci(bindings::amba_cs_uci_id);

// SAFETY: The UCI is immutable plain data; its `data` pointer is always null here.
unsafe impl Sync for CsUci {}

impl CsUci {
    /// Matches a CoreSight component whose `DEVTYPE` is `devtype` and whose `DEVARCH`, masked
    /// with `devarch_mask`, is `devarch`.
    pub const fn new(devarch: u32, devarch_mask: u32, devtype: u32) -> Self {
        Self(bindings::amba_cs_uci_id {
            devarch,
            devarch_mask,
            devtype,
            data: core::ptr::null_mut(),
        })
    }
}

/// An AMBA device id table entry (`struct amba_id`).
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct DeviceId(bindings::amba_id);

impl DeviceId {
    /// Matches devices whose peripheral ID, masked with `mask`, is `id`.
    pub const fn new(id: u32, mask: u32) -> Self {
        Self(bindings::amba_id {
            id,
            mask,
            data: core::ptr::null_mut(),
        })
    }

    /// Matches like [`DeviceId::new`] and, for CoreSight components, also by `uci`.
    pub const fn with_uci(id: u32, mask: u32, uci: &'static CsUci) -> Self {
        Self(bindings::amba_id {
            id,
            mask,
            data: core::ptr::from_ref(uci).cast_mut().cast(),
        })
    }

    /// The peripheral ID bits this entry matches.
    pub const fn id(&self) -> u32 {
        self.0.id
    }

    /// The mask applied to the peripheral ID.
    pub const fn mask(&self) -> u32 {
        self.0.mask
    }
}

// SAFETY: `DeviceId` is a `#[repr(transparent)]` wrapper of `amba_id` and does not add
// additional invariants, so it's safe to transmute to `RawType`.
unsafe impl RawDeviceId for DeviceId {
    type RawType = bindings::amba_id;
}

/// IdTable type for AMBA drivers.
///
/// AMBA tables carry no per-entry driver data (the C `data` field belongs to the bus for CoreSight
/// matching): [`Driver::probe`] gets the matching entry instead.
pub type IdTable = &'static dyn kernel::device_id::IdTable<DeviceId, ()>;

/// Creates an AMBA `IdTable` with its alias for modpost.
///
/// # Examples
///
/// ```ignore
/// kernel::amba_device_table!(TABLE, [amba::DeviceId::new(0x000b_b906, 0x000f_ffff)]);
/// ```
#[macro_export]
macro_rules! amba_device_table {
    ($table_name:ident, [$($id:expr),* $(,)?]) => {
        $crate::module_device_table!(
            "amba",
            $crate::amba::DeviceId,
            $table_name,
            @none,
            [$($id),*]
        );
    };
}

/// The AMBA driver trait.
///
/// Drivers must implement this trait in order to get an AMBA driver registered.
pub trait Driver {
    /// The type of the driver's bus device private data.
    type Data<'bound>: Send + 'bound;

    /// The table of device ids supported by the driver.
    const ID_TABLE: IdTable;

    /// AMBA driver probe.
    ///
    /// Called when a device whose peripheral ID matches `id` is added or discovered. Implementers
    /// should attempt to initialize the device here.
    fn probe<'bound>(
        dev: &'bound Device<device::Core<'_>>,
        id: &'bound DeviceId,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound;

    /// AMBA driver unbind.
    ///
    /// Called when a [`Device`] is unbound from its bound [`Driver`]. Implementing this callback
    /// is optional; release operations for driver resources should be performed in `Drop`.
    fn unbind<'bound>(dev: &'bound Device<device::Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        let _ = (dev, this);
    }
}

/// The AMBA device representation.
///
/// This structure represents the Rust abstraction for a C `struct amba_device`.
///
/// # Invariants
///
/// A [`Device`] instance represents a valid `struct amba_device` created by the C portion of the
/// kernel.
#[repr(transparent)]
pub struct Device<Ctx: device::DeviceContext = device::Normal>(
    Opaque<bindings::amba_device>,
    PhantomData<Ctx>,
);

impl<Ctx: device::DeviceContext> Device<Ctx> {
    fn as_raw(&self) -> *mut bindings::amba_device {
        self.0.get()
    }

    /// Returns the peripheral ID the bus read from the device.
    pub fn periphid(&self) -> u32 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid `struct amba_device`; the bus
        // sets `periphid` before it matches drivers and does not change it afterwards.
        unsafe { (*self.as_raw()).periphid }
    }

    /// Returns the component ID (CIDR0-3) the bus read from the device.
    pub fn cid(&self) -> u32 {
        // SAFETY: As for `periphid`.
        unsafe { (*self.as_raw()).cid }
    }

    /// Returns the device's register resource.
    pub fn resource(&self) -> &Resource {
        // SAFETY: By the type invariant `self.as_raw()` is valid; `res` is embedded in it and
        // lives as long as the device.
        unsafe { Resource::from_raw(addr_of_mut!((*self.as_raw()).res)) }
    }
}

#[cfg(CONFIG_HAS_IOMEM)]
impl Device<device::Bound> {
    /// Returns an `IoRequest` for the device's registers.
    pub fn io_request(&self) -> IoRequest<'_> {
        // SAFETY: `res` is the device's own resource, valid for `&self`'s lifetime.
        unsafe { IoRequest::new(self.as_ref(), self.resource()) }
    }
}

// SAFETY: `amba::Device` is a transparent wrapper of `struct amba_device`.
// The offset is guaranteed to point to a valid device field inside `amba::Device`.
unsafe impl<Ctx: device::DeviceContext> device::AsBusDevice<Ctx> for Device<Ctx> {
    const OFFSET: usize = offset_of!(bindings::amba_device, dev);
}

// SAFETY: `Device` is a transparent wrapper of a type that doesn't depend on `Device`'s generic
// argument.
kernel::impl_device_context_deref!(unsafe { Device });
kernel::impl_device_context_into_aref!(Device);

// AMBA primecells that master the bus (a CoreSight TMC-ETR's AXI port) use the DMA API like any
// platform device.
impl<'a> crate::dma::Device<'a> for Device<device::Core<'a>> {}

// SAFETY: Instances of `Device` are always reference-counted.
unsafe impl crate::sync::aref::AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: The existence of a shared reference guarantees that the refcount is non-zero.
        unsafe { bindings::get_device(self.as_ref().as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The safety requirements guarantee that the refcount is non-zero.
        unsafe { bindings::amba_device_put(obj.cast().as_ptr()) }
    }
}

impl<Ctx: device::DeviceContext> AsRef<device::Device<Ctx>> for Device<Ctx> {
    fn as_ref(&self) -> &device::Device<Ctx> {
        // SAFETY: By the type invariant of `Self`, `self.as_raw()` is a pointer to a valid
        // `struct amba_device`.
        let dev = unsafe { addr_of_mut!((*self.as_raw()).dev) };

        // SAFETY: `dev` points to a valid `struct device`.
        unsafe { device::Device::from_raw(dev) }
    }
}

impl<Ctx: device::DeviceContext> TryFrom<&device::Device<Ctx>> for &Device<Ctx> {
    type Error = kernel::error::Error;

    fn try_from(dev: &device::Device<Ctx>) -> Result<Self, Self::Error> {
        // SAFETY: By the type invariant of `Device`, `dev.as_raw()` is a valid pointer to a
        // `struct device`.
        if !unsafe { bindings::dev_is_amba(dev.as_raw()) } {
            return Err(EINVAL);
        }

        // SAFETY: We've just verified that the bus type of `dev` is the AMBA bus, hence `dev`
        // must be embedded in a valid `struct amba_device` as guaranteed by the C code.
        let adev = unsafe { container_of!(dev.as_raw(), bindings::amba_device, dev) };

        // SAFETY: `adev` is a valid pointer to a `struct amba_device`.
        Ok(unsafe { &*adev.cast() })
    }
}

// SAFETY: A `Device` is always reference-counted and can be released from any thread.
unsafe impl Send for Device {}

// SAFETY: `Device` can be shared among threads because all methods of `Device`
// (i.e. `Device<Normal>) are thread safe.
unsafe impl Sync for Device {}

// SAFETY: Same as `Device<Normal>` -- the underlying `struct amba_device` is the same;
// `Bound` is a zero-sized type-state marker that does not affect thread safety.
unsafe impl Sync for Device<device::Bound> {}

// SPDX-License-Identifier: GPL-2.0

//! A component's device file (`/dev/<name>`): a misc device whose name is the component's and
//! whose operations reach the driver's data.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h).
//!
//! [`crate::miscdevice`] names its devices with a `&'static CStr` and hands only `open` the
//! registration; a CoreSight component's name is made at probe (`tmc_etf0`), and every operation
//! on its file needs the component (a reader's release restarts capture). A
//! [`DevFileRegistration`] owns the name and the driver's data next to the `struct miscdevice`
//! and hands each operation the data. Dropping it (the device unbound) removes the file, then
//! waits until every open of it is released, so that no operation outlives the data.

use crate::{
    bindings,
    error::{
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    iov::{
        IovIterDest,
        IovIterSource, //
    },
    module::this_module,
    new_condvar, new_spinlock,
    prelude::*,
    str::CString,
    sync::{
        CondVar,
        SpinLock, //
    },
    types::Opaque,
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// What a component's device file does.
#[vtable]
pub trait DevFile: Sized {
    /// The driver's data, which every operation is given.
    type Data: Send + Sync;

    /// The state of one open file.
    type State: Send + Sync;

    /// Opens the file; returns the open file's state.
    fn open(data: &Self::Data) -> Result<Self::State>;

    /// Reads from the open file at `*pos` into `out`, moving `*pos` on; returns the bytes read
    /// (zero at the end).
    fn read(
        data: &Self::Data,
        state: &Self::State,
        pos: &mut i64,
        out: &mut IovIterDest<'_>,
    ) -> Result<usize>;

    /// Writes what `input` holds to the open file at `*pos`; returns the bytes taken. A file
    /// whose [`DevFile`] has no `write` cannot be written.
    fn write(
        _data: &Self::Data,
        _state: &Self::State,
        _pos: &mut i64,
        _input: &mut IovIterSource<'_>,
    ) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases the open file.
    fn release(data: &Self::Data, state: Self::State);
}

/// A registered device file of [`DevFile`] `T`, with its name and data.
///
/// # Invariants
///
/// - `misc` is registered with `misc_register()` from [`DevFileRegistration::register`] until
///   its drop deregisters it, exactly once; its `name` points into `name`, its `fops` to
///   `DevFileVTable::<T>::VTABLE`.
/// - `opens` counts the files opened and not yet released; the registration is not freed
///   before it is zero.
#[pin_data(PinnedDrop)]
pub struct DevFileRegistration<T: DevFile> {
    name: CString,
    data: T::Data,
    #[pin]
    opens: SpinLock<usize>,
    #[pin]
    released: CondVar,
    #[pin]
    misc: Opaque<bindings::miscdevice>,
    _t: PhantomData<T>,
}

// SAFETY: Dropping the registration (`misc_deregister()` and the wait) may happen on any
// thread; the data is `Send`.
unsafe impl<T: DevFile> Send for DevFileRegistration<T> {}
// SAFETY: `&self` gives out only `&T::Data`, which is `Sync`; the count is behind a lock.
unsafe impl<T: DevFile> Sync for DevFileRegistration<T> {}

/// An open file: its registration and its state (the file's private data).
struct OpenFile<T: DevFile> {
    /// The registration, valid while the file is open (its drop waits for the release).
    reg: NonNull<DevFileRegistration<T>>,
    state: T::State,
}

impl<T: DevFile> DevFileRegistration<T> {
    /// Registers `/dev/<name>`, a misc device with a dynamic minor whose operations get `data`.
    pub fn register(name: CString, data: T::Data) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            name,
            data,
            opens <- new_spinlock!(0, "coresight_devfile_opens"),
            released <- new_condvar!("coresight_devfile_released"),
            misc <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                // SAFETY: Fields are initialised in the order written, so `name` is; the string
                // lives in its own allocation, which is freed after `PinnedDrop::drop`
                // deregisters the device.
                let name = unsafe { (*this.as_ptr()).name.as_char_ptr() };
                let mut raw: bindings::miscdevice = pin_init::zeroed();
                // CAST: `MISC_DYNAMIC_MINOR` (255) fits the `int` minor.
                raw.minor = bindings::MISC_DYNAMIC_MINOR as c_int;
                raw.name = name;
                raw.fops = DevFileVTable::<T>::build();
                // SAFETY: The initializer may write to `slot`.
                unsafe { slot.write(raw) };
                // SAFETY: `slot` holds a `struct miscdevice` whose name and file operations
                // live as long as the registration; it is pinned, and deregistered before it
                // is freed.
                // INVARIANT: on success `misc` is registered.
                to_result(unsafe { bindings::misc_register(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// Returns the driver's data.
    pub fn data(&self) -> &T::Data {
        &self.data
    }
}

#[pinned_drop]
impl<T: DevFile> PinnedDrop for DevFileRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariants `misc` is registered. Once it returns, no open can
        // start.
        unsafe { bindings::misc_deregister(self.misc.get()) };
        // The files still open use the registration until they are released.
        let mut opens = self.opens.lock();
        while *opens > 0 {
            self.released.wait(&mut opens);
        }
    }
}

/// The file operations of a [`DevFile`].
struct DevFileVTable<T: DevFile>(PhantomData<T>);

impl<T: DevFile> DevFileVTable<T> {
    /// # Safety
    ///
    /// `raw_file` is a file of a [`DevFileRegistration<T>`] being opened, whose private data
    /// `misc_open()` set to the registration's `struct miscdevice`.
    unsafe extern "C" fn open(inode: *mut bindings::inode, raw_file: *mut bindings::file) -> c_int {
        // SAFETY: The pointers are valid and for a file being opened.
        let ret = unsafe { bindings::generic_file_open(inode, raw_file) };
        if ret != 0 {
            return ret;
        }
        // SAFETY: The open call of a file can access the private data.
        let misc = unsafe { (*raw_file).private_data }.cast::<bindings::miscdevice>();
        // SAFETY: `misc` is the `misc` field of a `DevFileRegistration<T>` (the caller's
        // contract; `Opaque<T>` has `T`'s layout), and `misc_open()` holds the misc device
        // lock, so the registration is not deregistered, let alone freed, during this call.
        let reg = unsafe {
            crate::container_of!(
                Opaque::cast_from(misc).cast_mut(),
                DevFileRegistration<T>,
                misc
            )
        };
        // SAFETY: As above, `reg` is valid for this call.
        let r = unsafe { &*reg };
        // The open file's memory first: an open that succeeded is not undone.
        let Ok(slot) = KBox::<OpenFile<T>>::new_uninit(GFP_KERNEL) else {
            return ENOMEM.to_errno();
        };
        let state = match T::open(&r.data) {
            Ok(state) => state,
            Err(e) => return e.to_errno(),
        };
        let file = slot.write(OpenFile {
            reg: NonNull::from(r),
            state,
        });
        // Counted before the open succeeds: the registration's drop waits for its release.
        *r.opens.lock() += 1;
        // The file's private data becomes the open file; the other operations read it so.
        // SAFETY: The open call of a file can access the private data.
        unsafe { (*raw_file).private_data = KBox::into_raw(file).cast() };
        0
    }

    /// # Safety
    ///
    /// `file` is a file of a [`DevFileRegistration<T>`] that [`Self::open`] opened, being
    /// released.
    unsafe extern "C" fn release(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: The release call of a file owns its private data, which `open` made from
        // `KBox::into_raw`.
        let open = unsafe { KBox::from_raw((*file).private_data.cast::<OpenFile<T>>()) };
        let OpenFile { reg, state } = KBox::into_inner(open);
        // SAFETY: The registration waits in its drop until this release counts down, so it is
        // valid here.
        let r = unsafe { reg.as_ref() };
        T::release(&r.data, state);
        let mut opens = r.opens.lock();
        *opens -= 1;
        r.released.notify_all();
        // Nothing touches the registration after the unlock (a single release store): the
        // drop that waits may free it from then on.
        drop(opens);
        0
    }

    /// The driver's data, the open file's state and its position, for a read or a write.
    ///
    /// # Safety
    ///
    /// `kiocb` is a valid `struct kiocb` of a file that [`Self::open`] opened and that is not
    /// released while the returned references are used; nothing else moves its position
    /// meanwhile.
    unsafe fn io_of<'a>(kiocb: *mut bindings::kiocb) -> (&'a T::Data, &'a T::State, &'a mut i64)
    where
        T: 'a,
    {
        // SAFETY: The caller gives a valid `struct kiocb` of an open file.
        let raw_file = unsafe { (*kiocb).ki_filp };
        // SAFETY: The file is open, so its private data is the `OpenFile` that `open` made, and
        // `release` does not run during a read or a write.
        let open = unsafe { &*(*raw_file).private_data.cast::<OpenFile<T>>() };
        // SAFETY: The registration outlives the open file (its drop waits for the release).
        let r = unsafe { open.reg.as_ref() };
        // SAFETY: `kiocb` is valid for the call, and nothing else moves its position.
        let pos = unsafe { &mut (*kiocb).ki_pos };
        (&r.data, &open.state, pos)
    }

    /// # Safety
    ///
    /// `kiocb` is of a file that [`Self::open`] opened and has not released; `iter` is a
    /// valid `struct iov_iter` to write to.
    unsafe extern "C" fn read_iter(
        kiocb: *mut bindings::kiocb,
        iter: *mut bindings::iov_iter,
    ) -> isize {
        // SAFETY: As this function's own contract says.
        let (data, state, pos) = unsafe { Self::io_of(kiocb) };
        // SAFETY: `iter` is a valid `struct iov_iter` for writing.
        let out = unsafe { IovIterDest::from_raw(iter) };
        match T::read(data, state, pos, out) {
            // CAST: a read returns at most the bytes `out` has room for, which fit `isize`.
            Ok(n) => n as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// `kiocb` is of a file that [`Self::open`] opened and has not released; `iter` is a
    /// valid `struct iov_iter` to read from.
    unsafe extern "C" fn write_iter(
        kiocb: *mut bindings::kiocb,
        iter: *mut bindings::iov_iter,
    ) -> isize {
        // SAFETY: As this function's own contract says.
        let (data, state, pos) = unsafe { Self::io_of(kiocb) };
        // SAFETY: `iter` is a valid `struct iov_iter` for reading.
        let input = unsafe { IovIterSource::from_raw(iter) };
        match T::write(data, state, pos, input) {
            // CAST: a write takes at most the bytes `input` holds, which fit `isize`.
            Ok(n) => n as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    const VTABLE: bindings::file_operations = bindings::file_operations {
        open: Some(Self::open),
        release: Some(Self::release),
        read_iter: Some(Self::read_iter),
        write_iter: if T::HAS_WRITE {
            Some(Self::write_iter)
        } else {
            None
        },
        owner: this_module::<T::OwnerModule>().as_ptr(),
        ..pin_init::zeroed()
    };

    const fn build() -> &'static bindings::file_operations {
        &Self::VTABLE
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Panic notifiers.
//!
//! A [`Registration`] adds a handler to the kernel's panic notifier chain, which `panic()` calls
//! after it has stopped the other CPUs (and, with `crash_kexec_post_notifiers`, before it starts
//! the crash kernel).
//!
//! C header: [`include/linux/panic_notifier.h`](srctree/include/linux/panic_notifier.h)

use core::marker::PhantomPinned;

use crate::{
    error::to_result,
    prelude::*,
    str::CStrExt,
    types::Opaque, //
};

/// A handler called on the panicking CPU when the kernel panics.
///
/// The handler runs with interrupts disabled, after the other CPUs have been stopped: it must not
/// sleep, allocate or take a lock that another CPU could be holding.
pub trait PanicHandler: Sync {
    /// Called with the panic message.
    fn on_panic(&self, message: &CStr);
}

/// The registration of a [`PanicHandler`] on the panic notifier chain.
///
/// The handler is removed from the chain when the registration is dropped.
///
/// # Examples
///
/// ```
/// use kernel::{
///     panic_notifier::{
///         PanicHandler,
///         Registration,
///     },
///     prelude::*, //
/// };
///
/// struct Reporter;
///
/// impl PanicHandler for Reporter {
///     fn on_panic(&self, message: &CStr) {
///         pr_emerg!("reporter saw the panic: {}\n", message);
///     }
/// }
///
/// let registration = KBox::pin_init(
///     Registration::<Reporter>::new(0, Ok::<_, Error>(Reporter)),
///     GFP_KERNEL,
/// )?;
/// # drop(registration);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `nb` is registered on `panic_notifier_list` for the whole life of the registration, and its
/// `notifier_call` is `Self::callback`.
#[pin_data(PinnedDrop)]
pub struct Registration<T: PanicHandler> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,

    #[pin]
    handler: T,

    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The notifier block is only touched by the notifier chain, which serialises its users;
// the handler is `Sync`.
unsafe impl<T: PanicHandler> Sync for Registration<T> {}

// SAFETY: The registration can be dropped from any thread: unregistering does not depend on the
// thread that registered.
unsafe impl<T: PanicHandler + Send> Send for Registration<T> {}

impl<T: PanicHandler> Registration<T> {
    /// Registers `handler` on the panic notifier chain with the given `priority`.
    ///
    /// Handlers with a higher priority run first.
    pub fn new<E>(priority: i32, handler: impl PinInit<T, E>) -> impl PinInit<Self, Error>
    where
        Error: From<E>,
    {
        try_pin_init!(&this in Self {
            handler <- handler,
            nb <- Opaque::ffi_init(move |slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes of a `notifier_block`.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::callback),
                        next: core::ptr::null_mut(),
                        priority,
                    })
                };
            }),
            _pin: PhantomPinned,
            _: {
                // SAFETY: `this` points to the registration being initialised; `nb` was
                // initialised above.
                let nb = Opaque::cast_into(unsafe { &raw const (*this.as_ptr()).nb });
                // INVARIANT: `nb` stays registered until `PinnedDrop::drop` removes it; the pinned
                // registration does not move in between.
                // SAFETY: `panic_notifier_list` is a valid, statically allocated notifier head, and
                // `nb` is a fully initialised notifier block that outlives its registration.
                to_result(unsafe {
                    bindings::atomic_notifier_chain_register(
                        &raw mut bindings::panic_notifier_list,
                        nb,
                    )
                })?;
            },
        }? Error)
    }

    /// Returns the registered handler.
    pub fn handler(&self) -> &T {
        &self.handler
    }

    /// The notifier call: recovers the registration and passes the message to the handler.
    ///
    /// # Safety
    ///
    /// `nb` must be the notifier block of a live [`Registration<T>`], and `data` the panic
    /// message (a NUL-terminated string) or null, as `panic()` passes it.
    unsafe extern "C" fn callback(
        nb: *mut bindings::notifier_block,
        _action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        let nb = Opaque::cast_from(nb.cast_const());
        // SAFETY: By the safety requirements `nb` is the `nb` field of a live `Registration<T>`.
        let this = unsafe { &*crate::container_of!(nb, Self, nb) };
        let message = if data.is_null() {
            c""
        } else {
            // SAFETY: `panic()` passes its message buffer, a NUL-terminated string that lives for
            // the rest of the panic.
            unsafe { CStr::from_char_ptr(data.cast_const().cast()) }
        };
        this.handler.on_panic(message);
        bindings::NOTIFY_DONE as c_int
    }
}

/// Whether `panic()` runs the panic notifiers before it starts a kdump capture kernel: the
/// `crash_kexec_post_notifiers` switch, which the user sets (command line, or
/// `/sys/module/kernel/parameters/crash_kexec_post_notifiers`).
pub fn crash_kexec_post_notifiers() -> bool {
    // SAFETY: Reads a global flag (`READ_ONCE`); no requirement.
    unsafe { bindings::cspd_crash_kexec_post_notifiers() }
}

/// Whether a kdump capture kernel is loaded (`kexec -p`): `panic()` starts it.
pub fn crash_kernel_loaded() -> bool {
    #[cfg(CONFIG_CRASH_DUMP)]
    {
        // SAFETY: Reads whether the crash image is set; no requirement.
        unsafe { bindings::kexec_crash_loaded() != 0 }
    }
    #[cfg(not(CONFIG_CRASH_DUMP))]
    {
        false
    }
}

/// Whether a panic now would start a kdump capture kernel before running any panic notifier
/// (a capture kernel is loaded and [`crash_kexec_post_notifiers`] is off).
pub fn kdump_runs_before_notifiers() -> bool {
    crash_kernel_loaded() && !crash_kexec_post_notifiers()
}

/// A free-running counter a panic handler can read to time what it does: one register read, no
/// lock, valid with interrupts off and the other CPUs stopped (on arm64, the architected timer's
/// virtual count `CNTVCT_EL0`; elsewhere the NMI-safe monotonic clock in nanoseconds).
pub struct Counter;

impl Counter {
    /// Returns the current count.
    pub fn read() -> u64 {
        // SAFETY: Reading the counter has no requirement.
        unsafe { bindings::cspd_counter_read() }
    }

    /// Returns the counter's frequency in Hz, 0 when unknown.
    pub fn frequency() -> u64 {
        // SAFETY: Reading the frequency has no requirement.
        unsafe { bindings::cspd_counter_frequency() }
    }

    /// Returns the counts in `us` microseconds at `frequency` Hz (saturating).
    pub fn ticks_in_us(us: u64, frequency: u64) -> u64 {
        // 64-bit arithmetic only (modules have no 128-bit division): exact unless `us * frequency`
        // overflows, hours at any real frequency, then rounded to whole seconds.
        match us.checked_mul(frequency) {
            Some(v) => v / 1_000_000,
            None => (us / 1_000_000).saturating_mul(frequency),
        }
    }

    /// Returns the microseconds `ticks` counts last at `frequency` Hz (saturating; 0 when the
    /// frequency is unknown).
    pub fn us_in_ticks(ticks: u64, frequency: u64) -> u64 {
        if frequency == 0 {
            return 0;
        }
        match ticks.checked_mul(1_000_000) {
            Some(v) => v / frequency,
            None => (ticks / frequency).saturating_mul(1_000_000),
        }
    }
}

#[pinned_drop]
impl<T: PanicHandler> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered on `panic_notifier_list`. Unregistering
        // waits (`synchronize_rcu`) until no CPU runs the callback any more.
        unsafe {
            bindings::atomic_notifier_chain_unregister(
                &raw mut bindings::panic_notifier_list,
                self.nb.get(),
            )
        };
    }
}

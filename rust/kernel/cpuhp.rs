// SPDX-License-Identifier: GPL-2.0

//! CPU hotplug states.
//!
//! C header: [`include/linux/cpuhotplug.h`](srctree/include/linux/cpuhotplug.h)

use crate::{
    error::{
        from_result,
        to_result, //
    },
    prelude::*,
    str::CStr, //
};
use core::marker::PhantomData;

/// What runs when a CPU comes online.
pub trait Online {
    /// CPU `cpu` came online. Runs on that CPU in its hotplug thread, in process context (it may
    /// sleep), while CPU hotplug is held: no CPU hotplug operation and no `cpus_read_lock()`
    /// from here. An error fails the CPU's bring-up.
    fn online(cpu: u32) -> Result;
}

/// A dynamic CPU hotplug state in the online section (`CPUHP_AP_ONLINE_DYN`) whose startup
/// callback is [`Online::online`] of `T`, set up without calling it for the CPUs that are online
/// already (`cpuhp_setup_state_nocalls()`); removed on drop.
///
/// # Invariants
///
/// `state` is the state `__cpuhp_setup_state()` returned, set up with `Self::startup`.
pub struct Registration<T: Online> {
    state: bindings::cpuhp_state,
    _t: PhantomData<T>,
}

impl<T: Online> Registration<T> {
    /// Sets the state up under `name` (shown in `/sys/devices/system/cpu/hotplug/states`).
    pub fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` lives for ever and `Self::startup` is a valid startup callback until the
        // state is removed in `drop`, before the code of `T` can go (a module drops its
        // registrations before it is unloaded). No instance: not multi-instance.
        let ret = unsafe {
            bindings::__cpuhp_setup_state(
                bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
                name.as_char_ptr(),
                false,
                Some(Self::startup),
                None,
                false,
            )
        };
        to_result(ret)?;
        // A dynamic state is returned as a positive number.
        let state = bindings::cpuhp_state::try_from(ret).map_err(|_| EINVAL)?;
        Ok(Self {
            state,
            _t: PhantomData,
        })
    }

    /// The startup callback.
    ///
    /// # Safety
    ///
    /// Called by the CPU hotplug core for the state set up in [`Self::new`].
    unsafe extern "C" fn startup(cpu: c_uint) -> c_int {
        from_result(|| {
            T::online(cpu)?;
            Ok(0)
        })
    }
}

impl<T: Online> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `state` was set up by `new` and is removed once, here;
        // no teardown callback to call.
        unsafe { bindings::__cpuhp_remove_state(self.state, false) };
    }
}

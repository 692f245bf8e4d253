// SPDX-License-Identifier: GPL-2.0

//! Running a function on a given CPU.
//!
//! C header: [`include/linux/smp.h`](srctree/include/linux/smp.h)

use crate::{
    cpu::CpuId,
    error::to_result,
    prelude::*, //
};

/// Runs `f` on `cpu` and returns its result, waiting for it (`smp_call_function_single()`).
///
/// On another CPU, `f` runs from an inter-processor interrupt; when `cpu` is the calling CPU,
/// it runs here. Either way interrupts are disabled: `f` must not sleep, take a sleeping lock or
/// allocate with `GFP_KERNEL`. This must not be called with interrupts disabled (it would
/// deadlock waiting for the other CPU) or at panic time, when the other CPUs are stopped.
///
/// Returns [`ENXIO`] when `cpu` is offline.
pub fn call_on_cpu<F, R>(cpu: CpuId, f: F) -> Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    /// The function and its result, on the caller's stack while the call runs.
    struct Call<F, R> {
        f: Option<F>,
        r: Option<R>,
    }

    /// Runs the function of the `Call` that `info` points to.
    ///
    /// # Safety
    ///
    /// `info` points to a live `Call<F, R>` that nothing else uses during the call.
    unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(info: *mut c_void) {
        // SAFETY: `info` points to the `Call` on the stack of `call_on_cpu`, which waits for this
        // function to return and does not touch `call` meanwhile.
        let call = unsafe { &mut *info.cast::<Call<F, R>>() };
        if let Some(f) = call.f.take() {
            call.r = Some(f());
        }
    }

    let mut call = Call::<F, R> {
        f: Some(f),
        r: None,
    };
    let id = i32::try_from(cpu.as_u32()).map_err(|_| EINVAL)?;
    // SAFETY: `trampoline::<F, R>` matches `smp_call_func_t`; `call` outlives the call because
    // `wait` is true; `F` and `R` are `Send`, so running `f` and producing `R` on `cpu` is sound.
    to_result(unsafe {
        bindings::smp_call_function_single(
            id,
            Some(trampoline::<F, R>),
            (&raw mut call).cast(),
            true,
        )
    })?;
    call.r.ok_or(ENXIO)
}

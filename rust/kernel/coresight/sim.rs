// SPDX-License-Identifier: GPL-2.0

//! Wiring for model-backed CoreSight components on machines without CoreSight hardware.
//!
//! The Rust TMC and ETMv4 drivers can each back a device with a register-level model instead of
//! MMIO (`CONFIG_CORESIGHT_TMC_RUST_SIM`, `CONFIG_CORESIGHT_ETM4X_RUST_SIM`). The two models live
//! in different modules, so the trace bus between them (AMBA ATB) is modelled here, in the kernel
//! crate both link against: a simulated source [`emit`]s the bytes of its trace stream under its
//! trace ID, and a simulated sink [`take`]s them into its formatter when it flushes.
//!
//! Nothing here sleeps or allocates; [`emit`] and [`take`] only try to claim a channel, so they
//! are safe to call at panic time while another CPU was stopped in the middle of one.
//!
//! [`text_word`] and [`path_start`] give simulated trace units real code to trace, and
//! [`set_last_pc`] / [`last_pc`] tell a simulated CPU debug interface where a CPU's simulated
//! execution ended, so that its program counter sample agrees with the trace.

use crate::sync::atomic::{
    Acquire,
    Atomic,
    Relaxed,
    Release, //
};
use core::cell::UnsafeCell;

/// Number of sources that can have trace in flight at the same time.
pub const CHANNELS: usize = 8;

/// Bytes one source can have in flight.
pub const CHANNEL_BYTES: usize = 16 * 1024;

/// Channel states.
const FREE: u32 = 0;
const BUSY: u32 = 1;
const FULL: u32 = 2;

/// One source's trace in flight.
struct Channel {
    state: Atomic<u32>,
    id: UnsafeCell<u8>,
    len: UnsafeCell<usize>,
    buf: UnsafeCell<[u8; CHANNEL_BYTES]>,
}

// SAFETY: `id`, `len` and `buf` are only accessed by the holder of the `BUSY` state, taken with
// an atomic compare-and-exchange; `FULL` publishes them with release/acquire ordering.
unsafe impl Sync for Channel {}

#[expect(clippy::declare_interior_mutable_const)]
const EMPTY: Channel = Channel {
    state: Atomic::new(FREE),
    id: UnsafeCell::new(0),
    len: UnsafeCell::new(0),
    buf: UnsafeCell::new([0; CHANNEL_BYTES]),
};

static BUS: [Channel; CHANNELS] = [EMPTY; CHANNELS];

/// Puts `bytes` of the trace stream of source `id` on the bus; returns how many were taken (0
/// when every channel is in use).
pub fn emit(id: u8, bytes: &[u8]) -> usize {
    for ch in &BUS {
        if ch.state.cmpxchg(FREE, BUSY, Acquire).is_err() {
            continue;
        }
        let n = bytes.len().min(CHANNEL_BYTES);
        // SAFETY: This thread holds the channel in the `BUSY` state.
        unsafe {
            let buf = &mut *ch.buf.get();
            buf[..n].copy_from_slice(&bytes[..n]);
            *ch.id.get() = id;
            *ch.len.get() = n;
        }
        ch.state.store(FULL, Release);
        return n;
    }
    0
}

/// Hands every stream in flight to `sink` (trace ID, bytes) and frees its channel. Streams come
/// in the order of the channels, each whole.
pub fn take(mut sink: impl FnMut(u8, &[u8])) {
    for ch in &BUS {
        if ch.state.cmpxchg(FULL, BUSY, Acquire).is_err() {
            continue;
        }
        // SAFETY: This thread holds the channel in the `BUSY` state; `FULL` published the data.
        let (id, data) = unsafe {
            let len = (*ch.len.get()).min(CHANNEL_BYTES);
            (*ch.id.get(), &(&*ch.buf.get())[..len])
        };
        sink(id, data);
        ch.state.store(FREE, Release);
    }
}

/// Returns the number of streams in flight.
pub fn pending() -> usize {
    BUS.iter().filter(|c| c.state.load(Relaxed) == FULL).count()
}

/// CPUs whose last simulated program counter is kept.
pub const PC_CPUS: usize = 64;

static LAST_PC: [Atomic<u64>; PC_CPUS] = [const { Atomic::new(0) }; PC_CPUS];

/// Records that the simulated execution of `cpu` ended at `pc`.
pub fn set_last_pc(cpu: u32, pc: u64) {
    if let Some(slot) = usize::try_from(cpu).ok().and_then(|c| LAST_PC.get(c)) {
        slot.store(pc, Release);
    }
}

/// Returns where the simulated execution of `cpu` ended, if a simulated trace unit said so.
pub fn last_pc(cpu: u32) -> Option<u64> {
    let pc = LAST_PC.get(usize::try_from(cpu).ok()?)?.load(Acquire);
    (pc != 0).then_some(pc)
}

/// Returns the bounds of the kernel's text section, `_stext` to `_etext`.
pub fn kernel_text() -> (u64, u64) {
    // SAFETY: The helpers only return the linker symbols' addresses.
    let (start, end) = unsafe {
        (
            bindings::cspd_kernel_text_start(),
            bindings::cspd_kernel_text_end(),
        )
    };
    (start as u64, end as u64)
}

/// Reads the instruction word at `addr` of the kernel text; `None` outside it or if unaligned.
///
/// The text is read through a raw pointer, never a reference: jump labels, ftrace and kprobes
/// patch it at run time, one aligned instruction word at a time.
pub fn text_word(addr: u64) -> Option<u32> {
    let (start, end) = kernel_text();
    if addr & 3 != 0 || addr < start || addr.checked_add(4)? > end {
        return None;
    }
    // SAFETY: `addr` is an aligned word inside the kernel text, which is mapped and readable
    // for the kernel's whole life; a volatile read of a raw pointer creates no reference.
    Some(u32::from_le(unsafe {
        core::ptr::read_volatile(addr as usize as *const u32)
    }))
}

/// Functions of the kernel text that simulated trace units start their paths at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathStart {
    /// `panic()`.
    Panic,
    /// `default_idle_call()`, where an idle CPU waits.
    Idle,
    /// `schedule()`.
    Schedule,
}

/// Returns the address of `start` in the kernel text.
pub fn path_start(start: PathStart) -> u64 {
    let which = match start {
        PathStart::Panic => 0,
        PathStart::Idle => 1,
        PathStart::Schedule => 2,
    };
    // SAFETY: The helper only returns a function's address.
    (unsafe { bindings::cspd_sim_path_start(which) }) as u64
}

// SPDX-License-Identifier: GPL-2.0

//! Rust panic dump client sample.
//!
//! Registers three dumps with the CoreSight panic dump core through
//! `kernel::coresight::panic_dump::Registration`:
//!
//! - `rust-sample` (other, 4096 bytes): at panic writes byte `i` = `(i * 7 + 3) % 256`;
//! - `rust-failing` (other, 64 bytes): writes `b"half"` and reports `EIO`, to show that a
//!   failing callback costs only its own record;
//! - `rust-deleted` (other, 256 bytes): dropped again at init, so its slot is released and the
//!   dump has no record of it;
//! - with `hang=1`, `rust-hang` (other, 64 bytes): its callback never returns, to show that the
//!   dump committed before it still names it (a watchdog or a reset then recovers the region);
//! - with `panic_in_dump=1`, `rust-panics` (other, 64 bytes): its callback panics, to show that
//!   the nested panic neither runs the dump again nor corrupts it.

use kernel::{
    c_str,
    coresight::panic_dump::{
        DumpCallback,
        DumpInfo,
        DumpPayload,
        DumpType,
        Registration, //
    },
    prelude::*,
};

module! {
    type: RustDumpClient,
    name: "rust_dump_client",
    authors: ["coresight-panic-dump developers"],
    description: "Rust panic dump client sample",
    license: "GPL",
    params: {
        hang: bool {
            default: false,
            description: "Also register a callback that never returns",
        },
        panic_in_dump: bool {
            default: false,
            description: "Also register a callback that panics",
        },
    },
}

/// Size of the `rust-sample` record.
const SAMPLE_LEN: usize = 4096;

/// Writes the known pattern.
struct Pattern;

impl DumpCallback for Pattern {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let n = buf.len().min(SAMPLE_LEN);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            // CAST: the value is reduced modulo 256 first.
            *b = ((i * 7 + 3) % 256) as u8;
        }
        *written = n;
        Ok(())
    }
}

/// Writes part of its data, then fails.
struct Failing;

impl DumpCallback for Failing {
    fn dump(&self, buf: &mut [u8], written: &mut usize) -> Result {
        let part = b"half";
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        *written = n;
        Err(EIO)
    }
}

/// Never returns: stands for a device that hangs the bus.
struct Hang;

impl DumpCallback for Hang {
    fn dump(&self, _buf: &mut [u8], _written: &mut usize) -> Result {
        pr_emerg!("rust-hang: spinning forever\n");
        loop {
            core::hint::spin_loop();
        }
    }
}

/// Panics inside the panic dump: a second panic while the first one's dump runs.
struct Panics;

impl DumpCallback for Panics {
    fn dump(&self, _buf: &mut [u8], _written: &mut usize) -> Result {
        panic!("rust-panics: a panic inside a dump callback");
    }
}

struct RustDumpClient {
    _sample: Pin<KBox<Registration<Pattern>>>,
    _failing: Pin<KBox<Registration<Failing>>>,
    _hang: Option<Pin<KBox<Registration<Hang>>>>,
    _panics: Option<Pin<KBox<Registration<Panics>>>>,
}

impl kernel::Module for RustDumpClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let deleted = KBox::pin_init(
            Registration::<Pattern>::new(
                DumpInfo {
                    name: c_str!("rust-deleted"),
                    kind: DumpType::Other,
                    cpu: None,
                    max_bytes: 256,
                    payload: DumpPayload::Opaque,
                },
                Ok::<_, Error>(Pattern),
            ),
            GFP_KERNEL,
        )?;
        let sample = KBox::pin_init(
            Registration::new(
                DumpInfo {
                    name: c_str!("rust-sample"),
                    kind: DumpType::Other,
                    cpu: None,
                    max_bytes: SAMPLE_LEN,
                    payload: DumpPayload::Opaque,
                },
                Ok::<_, Error>(Pattern),
            ),
            GFP_KERNEL,
        )?;
        let failing = KBox::pin_init(
            Registration::new(
                DumpInfo {
                    name: c_str!("rust-failing"),
                    kind: DumpType::Other,
                    cpu: None,
                    max_bytes: 64,
                    payload: DumpPayload::Opaque,
                },
                Ok::<_, Error>(Failing),
            ),
            GFP_KERNEL,
        )?;
        let hang = if module_parameters::hang.value() {
            Some(KBox::pin_init(
                Registration::new(
                    DumpInfo {
                        name: c_str!("rust-hang"),
                        kind: DumpType::Other,
                        cpu: None,
                        max_bytes: 64,
                        payload: DumpPayload::Opaque,
                    },
                    Ok::<_, Error>(Hang),
                ),
                GFP_KERNEL,
            )?)
        } else {
            None
        };
        let panics = if module_parameters::panic_in_dump.value() {
            Some(KBox::pin_init(
                Registration::new(
                    DumpInfo {
                        name: c_str!("rust-panics"),
                        kind: DumpType::Other,
                        cpu: None,
                        max_bytes: 64,
                        payload: DumpPayload::Opaque,
                    },
                    Ok::<_, Error>(Panics),
                ),
                GFP_KERNEL,
            )?)
        } else {
            None
        };
        drop(deleted);
        pr_info!("registered rust-sample and rust-failing; rust-deleted added and removed\n");
        Ok(Self {
            _sample: sample,
            _failing: failing,
            _hang: hang,
            _panics: panics,
        })
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Rust panic record sample.
//!
//! Registers a panic notifier and, when the kernel panics, writes a record with the panic message
//! into a page whose physical address it prints at init. Crash tools find the record again by that
//! address in a vmcore.
//!
//! Record layout (little-endian): the 16-byte magic `RECORD_MAGIC`, the message length as a `u32`,
//! the number of panics seen as a `u32`, then the message bytes (at most `MESSAGE_MAX`).

use kernel::{
    page::{
        Page,
        PAGE_SIZE, //
    },
    panic_notifier::{
        PanicHandler,
        Registration, //
    },
    phys,
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

module! {
    type: RustPanicRecord,
    name: "rust_panic_record",
    authors: ["coresight-panic-dump developers"],
    description: "Rust panic record sample",
    license: "GPL",
}

/// Marks the start of the record.
const RECORD_MAGIC: &[u8; 16] = b"CSPD-PANIC-REC1\0";

/// Bytes before the message: magic, message length, panic count.
const HEADER_LEN: usize = RECORD_MAGIC.len() + 4 + 4;

/// The longest message the page holds.
const MESSAGE_MAX: usize = PAGE_SIZE - HEADER_LEN;

/// Writes the record into its page when the kernel panics.
struct Recorder {
    page: Page,
    panics: Atomic<u32>,
}

impl PanicHandler for Recorder {
    fn on_panic(&self, message: &CStr) {
        let count = self.panics.fetch_add(1, Relaxed).wrapping_add(1);
        let bytes = message.to_bytes();
        let len = bytes.len().min(MESSAGE_MAX);
        let mut header = [0u8; HEADER_LEN];
        header[..16].copy_from_slice(RECORD_MAGIC);
        // CAST: `len <= MESSAGE_MAX < PAGE_SIZE` fits in a `u32`.
        header[16..20].copy_from_slice(&(len as u32).to_le_bytes());
        header[20..24].copy_from_slice(&count.to_le_bytes());

        // Write the message first and the header last, so a record with a valid magic is whole.
        // SAFETY: `bytes[..len]` is valid for reading `len` bytes. Only this handler writes the
        // page, and panic handlers run on one CPU, after the others have stopped.
        let message_written = unsafe { self.page.write_raw(bytes.as_ptr(), HEADER_LEN, len) };
        // SAFETY: As above, for the local `header`.
        let header_written = unsafe { self.page.write_raw(header.as_ptr(), 0, HEADER_LEN) };
        if message_written.is_err() || header_written.is_err() {
            pr_emerg!("could not write the record\n");
        }
    }
}

struct RustPanicRecord {
    _registration: Pin<KBox<Registration<Recorder>>>,
}

impl kernel::Module for RustPanicRecord {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
        let paddr = phys::page_to_phys(&page);
        let recorder = Recorder {
            page,
            panics: Atomic::new(0),
        };
        let registration =
            KBox::pin_init(Registration::new(0, Ok::<_, Error>(recorder)), GFP_KERNEL)?;
        pr_info!(
            "record at physical address {:#x}, {} bytes (built-in: {})\n",
            paddr,
            PAGE_SIZE,
            !cfg!(MODULE)
        );
        Ok(Self {
            _registration: registration,
        })
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Module notifiers.
//!
//! A [`Registration`] adds a handler to the module loader's notifier chain, which the loader
//! calls in process context as a loadable module comes (loaded and relocated, before its init
//! function runs), goes live (its init function returned) and goes (it is being unloaded, or its
//! init function failed).
//!
//! C header: [`include/linux/module.h`](srctree/include/linux/module.h)

use core::{
    marker::{
        PhantomData,
        PhantomPinned, //
    },
    ptr::NonNull,
};

use crate::{
    error::to_result,
    prelude::*,
    types::Opaque, //
};

/// What happens to a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleEvent {
    /// Loaded and relocated; its init function has not run yet.
    Coming,
    /// Its init function returned; its init memory is about to be freed.
    Live,
    /// It is being unloaded, or its init function failed: its memory is about to be freed.
    Going,
}

/// A loadable module, as the module loader hands it to a [`ModuleHandler`].
///
/// # Invariants
///
/// `ptr` points to a `struct module` that the loader keeps alive, and does not move or free,
/// for `'a`: the duration of one notifier call.
pub struct LoadedModule<'a> {
    ptr: NonNull<bindings::module>,
    _life: PhantomData<&'a bindings::module>,
}

/// A memory range of a module: its address and size in bytes (both 0 when the range is gone).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleRange {
    /// Start address.
    pub addr: usize,
    /// Size in bytes.
    pub size: usize,
}

impl ModuleRange {
    /// Whether `addr` lies in the range.
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.addr && addr - self.addr < self.size
    }
}

/// An executable section of a module: its index in the module's ELF file and where it was
/// placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecSection {
    /// Index of the section in the module's ELF file.
    pub index: u32,
    /// Address the section was placed at.
    pub addr: usize,
}

// `STT_SECTION`, the type of the symbol an ELF relocatable object has for each section.
const STT_SECTION: u8 = 3;

// The fields read below (the name, the build ID, the memory ranges, the symbol table pointers)
// are set before the loader announces a module and not written during a notifier call; other
// fields of `struct module` (its reference count, its state) may be, so no reference to the whole
// structure is ever made: each field is read through the raw pointer.
impl LoadedModule<'_> {
    /// Returns the module's name.
    pub fn name(&self) -> &[u8] {
        let p = self.ptr.as_ptr();
        // SAFETY: By the type invariant `p` points to a live `struct module` for the lifetime of
        // `self`, whose name is not written during a notifier call (see above).
        let name = unsafe { &(*p).name };
        // SAFETY: `c_char` and `u8` have the same size and alignment; the array is initialised.
        let bytes: &[u8] =
            unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        &bytes[..n]
    }

    /// Returns the module's GNU build ID, when the kernel keeps it
    /// (`CONFIG_STACKTRACE_BUILD_ID`) and the module has one.
    pub fn build_id(&self) -> Option<&[u8]> {
        #[cfg(CONFIG_STACKTRACE_BUILD_ID)]
        {
            let p = self.ptr.as_ptr();
            // SAFETY: As in `name`: the build ID is set before the module is announced.
            let id = unsafe { &(*p).build_id };
            if id.iter().any(|&b| b != 0) {
                return Some(id);
            }
        }
        None
    }

    fn range(&self, ty: bindings::mod_mem_type) -> ModuleRange {
        let ty = ty as usize;
        if ty >= bindings::mod_mem_type_MOD_MEM_NUM_TYPES as usize {
            return ModuleRange::default();
        }
        let p = self.ptr.as_ptr();
        // SAFETY: As in `name`: the memory ranges are not written during a notifier call (the
        // init ones are cleared after the live notification returns); `ty` is in bounds.
        let (base, size) = unsafe { ((*p).mem[ty].base, (*p).mem[ty].size) };
        ModuleRange {
            addr: base as usize,
            size: size as usize,
        }
    }

    /// Returns the module's text.
    pub fn text(&self) -> ModuleRange {
        self.range(bindings::mod_mem_type_MOD_TEXT)
    }

    /// Returns the module's init text; empty once the module is live.
    pub fn init_text(&self) -> ModuleRange {
        self.range(bindings::mod_mem_type_MOD_INIT_TEXT)
    }

    /// Calls `f` with each executable section of the module that its symbol table places (the
    /// section symbols of the module's ELF file in its text or init text), in symbol order, until
    /// `f` returns `false`.
    ///
    /// The full symbol table, with the addresses the loader gave, is the module's only while it
    /// comes and goes live ([`ModuleEvent::Coming`], [`ModuleEvent::Live`]); afterwards, and for
    /// [`ModuleEvent::Going`], this finds nothing.
    ///
    /// Without `CONFIG_KALLSYMS` the kernel keeps no symbol table of a module: nothing is found.
    pub fn exec_sections(&self, event: ModuleEvent, f: impl FnMut(ExecSection) -> bool) {
        #[cfg(CONFIG_KALLSYMS)]
        self.kallsyms_sections(event, f);
        #[cfg(not(CONFIG_KALLSYMS))]
        let _ = (event, f);
    }

    #[cfg(CONFIG_KALLSYMS)]
    fn kallsyms_sections(&self, event: ModuleEvent, mut f: impl FnMut(ExecSection) -> bool) {
        if event == ModuleEvent::Going {
            return;
        }
        let p = self.ptr.as_ptr();
        let (text, init) = (self.text(), self.init_text());
        // Until the loader switches it to the core symbols after the live notification, the
        // module's `kallsyms` is the whole symbol table of its ELF file, each value relocated.
        // SAFETY: As in `name`: the pointer is not written during the coming and live
        // notifications.
        let kallsyms = unsafe { (*p).kallsyms };
        // SAFETY: Only the field's address is taken; `p` points to a live `struct module`.
        let core_syms = unsafe { &raw const (*p).core_kallsyms };
        if kallsyms.is_null() || kallsyms.cast_const() == core_syms {
            return;
        }
        // SAFETY: During the coming and live notifications the loader neither frees nor replaces
        // `kallsyms` (it does so after the live notification returns), and it points to the
        // module's initialised `mod_kallsyms`.
        let ks = unsafe { &*kallsyms };
        if ks.symtab.is_null() || ks.typetab.is_null() {
            return;
        }
        let n = ks.num_symtab as usize;
        // SAFETY: `symtab` and `typetab` hold `num_symtab` entries each, initialised by the
        // loader, and live as long as `kallsyms` (see above).
        let (syms, types) = unsafe {
            (
                core::slice::from_raw_parts(ks.symtab, n),
                core::slice::from_raw_parts(ks.typetab.cast::<u8>(), n),
            )
        };
        for (sym, &ty) in syms.iter().zip(types) {
            if sym.st_info & 0xf != STT_SECTION || !(ty == b't' || ty == b'T') {
                continue;
            }
            let addr = sym.st_value as usize;
            if !(text.contains(addr) || init.contains(addr)) {
                continue;
            }
            let section = ExecSection {
                index: u32::from(sym.st_shndx),
                addr,
            };
            if !f(section) {
                return;
            }
        }
    }
}

/// A handler of module events.
///
/// Called in process context, with the module loader's notifier chain held for reading: it may
/// sleep, but must not load or unload a module.
pub trait ModuleHandler: Sync {
    /// Called when `module` comes, goes live or goes.
    fn on_module(&self, event: ModuleEvent, module: &LoadedModule<'_>);
}

/// The registration of a [`ModuleHandler`] on the module notifier chain.
///
/// The handler is removed from the chain when the registration is dropped.
///
/// # Invariants
///
/// `nb` is registered on the module notifier chain for the whole life of the registration, and
/// its `notifier_call` is `Self::callback`.
#[pin_data(PinnedDrop)]
pub struct Registration<T: ModuleHandler> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,

    #[pin]
    handler: T,

    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The notifier block is only touched by the notifier chain, which serialises its users;
// the handler is `Sync`.
unsafe impl<T: ModuleHandler> Sync for Registration<T> {}

// SAFETY: The registration can be dropped from any thread: unregistering does not depend on the
// thread that registered.
unsafe impl<T: ModuleHandler + Send> Send for Registration<T> {}

impl<T: ModuleHandler> Registration<T> {
    /// Registers `handler` on the module notifier chain.
    ///
    /// Modules loaded before the registration are not reported.
    pub fn new<E>(handler: impl PinInit<T, E>) -> impl PinInit<Self, Error>
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
                        priority: 0,
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
                // SAFETY: `nb` is a fully initialised notifier block that outlives its
                // registration.
                to_result(unsafe { bindings::register_module_notifier(nb) })?;
            },
        }? Error)
    }

    /// Returns the registered handler.
    pub fn handler(&self) -> &T {
        &self.handler
    }

    /// The notifier call: recovers the registration and passes the event to the handler.
    ///
    /// # Safety
    ///
    /// `nb` must be the notifier block of a live [`Registration<T>`], `action` a
    /// `MODULE_STATE_*` value and `data` the `struct module` it is about, alive for the call, as
    /// the module loader passes them.
    unsafe extern "C" fn callback(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        let nb = Opaque::cast_from(nb.cast_const());
        // SAFETY: By the safety requirements `nb` is the `nb` field of a live `Registration<T>`.
        let this = unsafe { &*crate::container_of!(nb, Self, nb) };
        let event = match action as u32 {
            bindings::module_state_MODULE_STATE_COMING => ModuleEvent::Coming,
            bindings::module_state_MODULE_STATE_LIVE => ModuleEvent::Live,
            bindings::module_state_MODULE_STATE_GOING => ModuleEvent::Going,
            _ => return bindings::NOTIFY_DONE as c_int,
        };
        let Some(ptr) = NonNull::new(data.cast::<bindings::module>()) else {
            return bindings::NOTIFY_DONE as c_int;
        };
        // INVARIANT: By the safety requirements the module lives for the duration of the call.
        let module = LoadedModule {
            ptr,
            _life: PhantomData,
        };
        this.handler.on_module(event, &module);
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: ModuleHandler> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered on the module notifier chain;
        // unregistering waits for running calls to finish, after which the handler is not used.
        unsafe { bindings::unregister_module_notifier(self.nb.get()) };
    }
}

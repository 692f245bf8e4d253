// SPDX-License-Identifier: GPL-2.0

//! Kernel symbol names for addresses.
//!
//! C header: [`include/linux/kallsyms.h`](srctree/include/linux/kallsyms.h)

use crate::fmt;

/// Room for the longest `name+off/size [module]` `sprint_symbol` writes (`KSYM_SYMBOL_LEN` with
/// margin).
const SYMBOL_BUF: usize = 1024;

/// An address that formats as `symbol+offset/size [module]`, like `%pS` in C.
///
/// Formatting uses no allocation and no lock that can be waited on, so it works in the panic
/// path. Without `CONFIG_KALLSYMS`, or for an address outside every symbol, it prints the
/// address in hex.
#[derive(Clone, Copy, Debug)]
pub struct Symbol(pub u64);

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; SYMBOL_BUF];
        let addr = usize::try_from(self.0).map_err(|_| fmt::Error)?;
        // SAFETY: `buf` holds `SYMBOL_BUF` bytes, more than the `KSYM_SYMBOL_LEN` that
        // `sprint_symbol` writes at most, NUL included.
        let len = unsafe { bindings::sprint_symbol(buf.as_mut_ptr().cast(), addr) };
        let len = usize::try_from(len).unwrap_or(0).min(SYMBOL_BUF);
        match core::str::from_utf8(&buf[..len]) {
            Ok(s) if len > 0 => f.write_str(s),
            _ => write!(f, "{:#x}", self.0),
        }
    }
}

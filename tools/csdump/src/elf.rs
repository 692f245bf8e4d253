//! What csdump takes from a vmlinux file, read with the `object` crate: executable sections
//! (memory images for the decoder), function symbols (for symbolising addresses), `_text` and
//! the GNU build ID (to check that vmlinux is the kernel that wrote the dump).
//!
//! `object` checks every offset and size it reads against the file; a section or symbol table
//! it cannot read is an error that names what and where.

use object::Object;
use object::ObjectSection;
use object::ObjectSymbol;
use object::SectionFlags;
use object::SectionKind;
use object::SymbolKind;
use thiserror::Error;

/// Upper bound on symbols read.
pub const MAX_SYMBOLS: usize = 4_000_000;

/// Why a vmlinux file cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ElfError {
    /// Not a 64-bit ELF file.
    #[error("not a 64-bit ELF file")]
    NotElf64,
    /// The ELF structure is unreadable (a header or table out of the file, say).
    #[error("{0}")]
    Malformed(String),
}

/// An executable section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecSection {
    /// Link-time virtual address.
    pub addr: u64,
    /// File offset of its bytes.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A function (or text label) symbol.
///
/// Rust names (v0 mangling) are kept demangled ([`crate::demangle`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Link-time address.
    pub addr: u64,
    /// Size (0 when unknown).
    pub size: u64,
    /// Name.
    pub name: String,
}

/// What csdump takes from a vmlinux file.
#[derive(Debug, Clone, Default)]
pub struct Vmlinux {
    /// Executable, allocated sections, in file order.
    pub exec: Vec<ExecSection>,
    /// Symbols in executable sections, sorted by address.
    pub symbols: Vec<Symbol>,
    /// Link-time address of `_text`, if the symbol table has it.
    pub text: Option<u64>,
    /// The GNU build ID (`.note.gnu.build-id`), if it has one.
    pub build_id: Option<Vec<u8>>,
    /// Link-time address of `_end` (the end of the kernel image), if the symbol table has it.
    pub end: Option<u64>,
}

const SHF_EXECINSTR: u64 = 0x4;
const SHF_ALLOC: u64 = 0x2;

impl Vmlinux {
    /// Reads `data`, a whole vmlinux file.
    pub fn parse(data: &[u8]) -> Result<Self, ElfError> {
        if data.get(..5) != Some(&[0x7f, b'E', b'L', b'F', 2][..]) {
            return Err(ElfError::NotElf64);
        }
        let file = object::File::parse(data).map_err(|e| ElfError::Malformed(e.to_string()))?;
        let mut v = Vmlinux {
            build_id: file
                .build_id()
                .map_err(|e| ElfError::Malformed(format!("build ID note: {e}")))?
                .map(<[u8]>::to_vec),
            ..Vmlinux::default()
        };
        let mut exec_idx = Vec::new();
        for s in file.sections() {
            let flags = match s.flags() {
                SectionFlags::Elf { sh_flags } => sh_flags,
                _ => 0,
            };
            if s.kind() != SectionKind::Text
                || flags & (SHF_ALLOC | SHF_EXECINSTR) != SHF_ALLOC | SHF_EXECINSTR
            {
                continue;
            }
            let Some((offset, size)) = s.file_range() else {
                continue;
            };
            if size == 0
                || offset
                    .checked_add(size)
                    .is_none_or(|e| e > data.len() as u64)
            {
                continue;
            }
            v.exec.push(ExecSection {
                addr: s.address(),
                offset,
                size,
            });
            exec_idx.push(s.index());
        }
        for sym in file.symbols().take(MAX_SYMBOLS) {
            let Ok(name) = sym.name() else {
                continue;
            };
            if name == "_text" {
                v.text = Some(sym.address());
            } else if name == "_end" {
                v.end = Some(sym.address());
            }
            let in_exec = sym.section_index().is_some_and(|i| exec_idx.contains(&i));
            if name.is_empty()
                || name.starts_with('$')
                || !in_exec
                || !matches!(
                    sym.kind(),
                    SymbolKind::Text | SymbolKind::Unknown | SymbolKind::Label
                )
            {
                continue;
            }
            v.symbols.push(Symbol {
                addr: sym.address(),
                size: sym.size(),
                name: crate::demangle::readable(name),
            });
        }
        v.symbols
            .sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        v.symbols.dedup_by(|b, a| a.addr == b.addr);
        Ok(v)
    }

    /// Returns the symbol holding link-time address `addr` and the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&Symbol, u64)> {
        let i = self.symbols.partition_point(|s| s.addr <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        let off = addr - s.addr;
        if s.size != 0 && off >= s.size {
            // Past the end of a sized symbol: only accept it when the next one is far away.
            let next = self.symbols.get(i).map_or(u64::MAX, |n| n.addr);
            if addr >= next {
                return None;
            }
        }
        Some((s, off))
    }
}

/// Symbolises runtime addresses with a vmlinux and the KASLR offset of the dump.
#[derive(Debug, Clone)]
pub struct Symbolizer {
    /// The vmlinux.
    pub vmlinux: Vmlinux,
    /// Runtime address minus link-time address.
    pub offset: u64,
}

impl Symbolizer {
    /// Returns `name+0xoff` for runtime address `addr`, if a symbol holds it.
    pub fn name(&self, addr: u64) -> Option<String> {
        let (s, off) = self.vmlinux.lookup(addr.wrapping_sub(self.offset))?;
        Some(if off == 0 {
            s.name.clone()
        } else {
            format!("{}+{off:#x}", s.name)
        })
    }

    /// Returns the function name (no offset) for runtime address `addr`.
    pub fn function(&self, addr: u64) -> Option<&str> {
        self.vmlinux
            .lookup(addr.wrapping_sub(self.offset))
            .map(|(s, _)| s.name.as_str())
    }
}

/// Formats a build ID as hex.
pub fn hex_id(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// vmlinux is not the kernel that wrote the dump.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error(
    "build ID {have} is not the dump's {want}: the dump was written by {release}; give that \
     kernel's vmlinux (the one built with it, e.g. in its build tree), or --force to use this one"
)]
pub struct BuildIdMismatch {
    /// vmlinux's build ID, hex.
    pub have: String,
    /// The dump's, hex.
    pub want: String,
    /// The dump's kernel release (or "a kernel of unknown release").
    pub release: String,
}

/// Checks that `vmlinux` is the kernel whose build ID the dump recorded (`want`, maybe a
/// prefix; empty when the dump has none). Returns a note when it cannot tell.
pub fn check_build_id(
    vmlinux: &Vmlinux,
    want: &[u8],
    release: Option<&str>,
) -> Result<Option<String>, BuildIdMismatch> {
    match (&vmlinux.build_id, want.is_empty()) {
        (_, true) => Ok(Some(
            "the dump records no build ID: vmlinux is not checked against it".into(),
        )),
        (None, false) => Ok(Some(format!(
            "vmlinux has no build ID note: not checked against the dump's {}",
            hex_id(want)
        ))),
        (Some(have), false) if have.starts_with(want) => Ok(None),
        (Some(have), false) => Err(BuildIdMismatch {
            have: hex_id(have),
            want: hex_id(want),
            release: release.map_or_else(
                || "a kernel of unknown release".to_string(),
                |r| format!("Linux {r}"),
            ),
        }),
    }
}

//! A bounded reader for the parts of a vmlinux ELF64 file csdump needs: executable sections
//! (memory images for decoders) and function symbols (for symbolising addresses).
//!
//! Every offset and size read from the file is checked against the file before use.

use thiserror::Error;

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHF_ALLOC: u64 = 0x2;
const SHF_EXECINSTR: u64 = 0x4;
const STT_NOTYPE: u8 = 0;
const STT_FUNC: u8 = 2;
/// Upper bound on symbols read.
pub const MAX_SYMBOLS: usize = 4_000_000;

/// Why a vmlinux file cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ElfError {
    /// Not a little-endian ELF64 file.
    #[error("not a little-endian ELF64 file")]
    NotElf64,
    /// A structure runs past the end of the file.
    #[error("{0} runs past the end of the file")]
    Truncated(&'static str),
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
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

struct Shdr {
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

impl Vmlinux {
    /// Reads `data`, a whole vmlinux file.
    pub fn parse(data: &[u8]) -> Result<Self, ElfError> {
        if data.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
            return Err(ElfError::NotElf64);
        }
        let shoff = u64_at(data, 0x28).ok_or(ElfError::Truncated("ELF header"))?;
        let shentsize = u16_at(data, 0x3A).ok_or(ElfError::Truncated("ELF header"))?;
        let shnum = u16_at(data, 0x3C).ok_or(ElfError::Truncated("ELF header"))?;
        let mut shdrs = Vec::new();
        for i in 0..usize::from(shnum) {
            let o = usize::try_from(shoff)
                .ok()
                .and_then(|s| s.checked_add(i.checked_mul(usize::from(shentsize))?))
                .ok_or(ElfError::Truncated("section header"))?;
            let sh = (|| {
                Some(Shdr {
                    kind: u32_at(data, o + 4)?,
                    flags: u64_at(data, o + 8)?,
                    addr: u64_at(data, o + 0x10)?,
                    offset: u64_at(data, o + 0x18)?,
                    size: u64_at(data, o + 0x20)?,
                    link: u32_at(data, o + 0x28)?,
                    entsize: u64_at(data, o + 0x38)?,
                })
            })()
            .ok_or(ElfError::Truncated("section header"))?;
            shdrs.push(sh);
        }
        let mut v = Vmlinux::default();
        let mut exec_idx = Vec::new();
        for (i, s) in shdrs.iter().enumerate() {
            if s.kind == SHT_PROGBITS
                && s.flags & SHF_ALLOC != 0
                && s.flags & SHF_EXECINSTR != 0
                && s.size > 0
                && s.offset
                    .checked_add(s.size)
                    .is_some_and(|e| e <= data.len() as u64)
            {
                v.exec.push(ExecSection {
                    addr: s.addr,
                    offset: s.offset,
                    size: s.size,
                });
                exec_idx.push(i);
            }
        }
        for s in shdrs.iter().filter(|s| s.kind == SHT_SYMTAB) {
            let Some(strtab) = shdrs.get(s.link as usize) else {
                continue;
            };
            let strs = slice(data, strtab.offset, strtab.size).unwrap_or(&[]);
            let syms = slice(data, s.offset, s.size).ok_or(ElfError::Truncated("symbol table"))?;
            let ent = if s.entsize >= 24 {
                s.entsize as usize
            } else {
                24
            };
            for sym in syms.chunks_exact(ent).take(MAX_SYMBOLS) {
                let name_off = u32_at(sym, 0).unwrap_or(0) as usize;
                let info = sym.get(4).copied().unwrap_or(0);
                let shndx = u16_at(sym, 6).unwrap_or(0);
                let addr = u64_at(sym, 8).unwrap_or(0);
                let size = u64_at(sym, 16).unwrap_or(0);
                let name = strs
                    .get(name_off..)
                    .and_then(|r| r.split(|&b| b == 0).next())
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_default();
                if name == "_text" {
                    v.text = Some(addr);
                }
                let kind = info & 0xF;
                if name.is_empty()
                    || !(kind == STT_FUNC || kind == STT_NOTYPE)
                    || !exec_idx.contains(&usize::from(shndx))
                    || name.starts_with('$')
                {
                    continue;
                }
                v.symbols.push(Symbol { addr, size, name });
            }
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

fn slice(data: &[u8], off: u64, size: u64) -> Option<&[u8]> {
    let s = usize::try_from(off).ok()?;
    let e = s.checked_add(usize::try_from(size).ok()?)?;
    data.get(s..e)
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

//! Loadable modules: the dump's module list (which modules were loaded where when the kernel
//! panicked), and the names of the code in them.
//!
//! The kernel keeps a `modules` record current while it runs: per module its name, its GNU
//! build ID, its text and init text, and where each executable section of its `.ko` was placed.
//! An address in a module's text is named from that alone as `module+0xoffset` (init text:
//! `module.init+0xoffset`), or, with the module's `.ko` at hand (`--modules DIR`, checked by
//! build ID as vmlinux is), by the function that holds it: `function+0xoffset [module]`, as
//! crash names module code.
//!
//! A `.ko` is read with the `object` crate, which checks every offset and size against the
//! file; one that cannot be read, or that does not have the sections the record places, is
//! refused with a message and its module is named by offset.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;

use cspd_format::ModuleEntry;
use cspd_format::Modules;
use object::read::elf::SectionHeader as _;
use object::Object;
use object::ObjectSection;
use object::ObjectSymbol;
use object::SectionFlags;
use object::SymbolKind;
use serde::Serialize;

use crate::elf::hex_id;

/// Upper bound on symbols read from one `.ko`.
pub const MAX_KO_SYMBOLS: usize = 1_000_000;
/// Largest `.ko` file read (1 GiB).
pub const MAX_KO_BYTES: u64 = 1 << 30;
/// Most directory entries looked at under `--modules DIR`.
pub const MAX_DIR_ENTRIES: usize = 4_000_000;
/// Deepest directory looked into under `--modules DIR`.
pub const MAX_DIR_DEPTH: usize = 32;

const SHF_ALLOC: u64 = 0x2;
const SHF_EXECINSTR: u64 = 0x4;

/// The module list a dump recorded.
#[derive(Debug, Clone, Default)]
pub struct ModuleList {
    /// The modules, in the record's order.
    pub entries: Vec<ModuleEntry>,
    /// Entries the record has room for.
    pub capacity: u32,
    /// Modules that were loaded but did not fit in the record.
    pub dropped: u32,
    /// Changes made to the list since boot.
    pub generation: u32,
}

impl ModuleList {
    /// Decodes a `modules` record's data; an entry that does not decode makes the whole list
    /// unusable (the error names it).
    pub fn decode(data: &[u8]) -> Result<Self, String> {
        let m = Modules::decode(data).map_err(|e| e.to_string())?;
        let mut entries = Vec::new();
        for (i, e) in m.entries().enumerate() {
            entries.push(e.map_err(|e| format!("entry {i}: {e}"))?);
        }
        Ok(Self {
            entries,
            capacity: m.capacity,
            dropped: m.dropped,
            generation: m.generation,
        })
    }
}

/// What csdump says when the module list cannot be used.
pub fn damaged(why: &str) -> String {
    format!("the module list is damaged: {why}; code in loadable modules is shown by address only")
}

/// A module's name as text.
pub fn entry_name(e: &ModuleEntry) -> String {
    String::from_utf8_lossy(e.name()).into_owned()
}

/// An address range, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct RangeInfo {
    /// First address, hex.
    pub start: String,
    /// Size in bytes.
    pub size: u64,
}

/// One placed section of a module, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct SectionInfo {
    /// Index of the section in the module's `.ko`.
    pub index: u32,
    /// Where it was loaded, hex.
    pub addr: String,
}

/// One module, as `info` and `summary.json` list it.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleInfo {
    /// Module name.
    pub name: String,
    /// GNU build ID of its `.ko`, hex (empty: the kernel keeps none).
    pub build_id: String,
    /// `coming` (its init running) or `live`.
    pub state: &'static str,
    /// Its text.
    pub text: RangeInfo,
    /// Its init text, until it is freed.
    pub init: Option<RangeInfo>,
    /// Its executable sections and where they were loaded.
    pub sections: Vec<SectionInfo>,
}

impl From<&ModuleEntry> for ModuleInfo {
    fn from(e: &ModuleEntry) -> Self {
        Self {
            name: entry_name(e),
            build_id: hex_id(e.build_id()),
            state: e.state.name(),
            text: RangeInfo {
                start: format!("{:#x}", e.text_addr),
                size: e.text_size,
            },
            init: (e.init_size != 0).then(|| RangeInfo {
                start: format!("{:#x}", e.init_addr),
                size: e.init_size,
            }),
            sections: e
                .sections()
                .iter()
                .map(|s| SectionInfo {
                    index: s.index,
                    addr: format!("{:#x}", s.addr),
                })
                .collect(),
        }
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The module list, as `info` and `summary.json` show it.
#[derive(Debug, Clone, Serialize)]
pub struct ModulesReport {
    /// Entries the record has room for.
    pub capacity: u32,
    /// Modules loaded that did not fit (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: u32,
    /// Changes made to the list since boot.
    pub generation: u32,
    /// The modules loaded at the panic.
    pub modules: Vec<ModuleInfo>,
    /// Why the list cannot be used, when it cannot.
    pub problem: Option<String>,
}

impl From<&ModuleList> for ModulesReport {
    fn from(l: &ModuleList) -> Self {
        Self {
            capacity: l.capacity,
            dropped: l.dropped,
            generation: l.generation,
            modules: l.entries.iter().map(ModuleInfo::from).collect(),
            problem: None,
        }
    }
}

impl ModulesReport {
    /// The report of a list that cannot be used.
    pub fn damaged(why: &str) -> Self {
        Self {
            capacity: 0,
            dropped: 0,
            generation: 0,
            modules: Vec::new(),
            problem: Some(damaged(why)),
        }
    }
}

/// Renders the module list for `info`.
pub fn render_modules(r: &ModulesReport) -> String {
    let mut s = String::new();
    if let Some(p) = &r.problem {
        let _ = writeln!(s, "modules:   {p}");
        return s;
    }
    let _ = writeln!(
        s,
        "modules:   {} loaded (room for {}{}, {} changes since boot)",
        r.modules.len(),
        r.capacity,
        if r.dropped > 0 {
            format!(", {} more dropped: not named", r.dropped)
        } else {
            String::new()
        },
        r.generation
    );
    for m in &r.modules {
        let _ = writeln!(
            s,
            "  {:<24} {:<6} text {}+{:#x}{}  build id {}",
            m.name,
            m.state,
            m.text.start,
            m.text.size,
            m.init.as_ref().map_or(String::new(), |i| format!(
                ", init {}+{:#x}",
                i.start, i.size
            )),
            if m.build_id.is_empty() {
                "-"
            } else {
                &m.build_id
            }
        );
        if !m.sections.is_empty() {
            let list: Vec<String> = m
                .sections
                .iter()
                .map(|x| format!("[{}] {}", x.index, x.addr))
                .collect();
            let _ = writeln!(s, "  {:<24} sections {}", "", list.join(", "));
        }
    }
    s
}

/// A section of a `.ko` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KoSection {
    /// Index in the section header table.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// File offset of its bytes.
    pub offset: u64,
    /// `SHF_ALLOC`: the loader places it in memory.
    pub alloc: bool,
    /// `SHF_EXECINSTR`: code.
    pub exec: bool,
    /// A relocation section (`SHT_REL`, `SHT_RELA`), which BFD does not count as a section.
    pub reloc: bool,
}

/// A module's `.ko`, accepted for naming its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KoFile {
    /// Its path, absolute.
    pub path: PathBuf,
    /// Its GNU build ID, if it has one.
    pub build_id: Option<Vec<u8>>,
    /// Its sections, in file order (the null section left out).
    pub sections: Vec<KoSection>,
}

/// A function of a module at its runtime address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sym {
    addr: u64,
    end: u64,
    name: String,
}

/// A module of the list, with its `.ko` and symbols when they were found.
#[derive(Debug, Clone)]
pub struct Placed {
    /// Its name.
    pub name: String,
    /// Its entry in the dump.
    pub entry: ModuleEntry,
    /// Its `.ko`, when one was accepted.
    pub ko: Option<KoFile>,
    symbols: Vec<Sym>,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    module: usize,
    init: bool,
}

/// Names addresses in module code: `function+0xoff [module]` from the module's `.ko`, else
/// `module+0xoff` (`module.init+0xoff` in init text).
#[derive(Debug, Clone, Default)]
pub struct ModuleSymbols {
    modules: Vec<Placed>,
    spans: Vec<Span>,
    /// What loading the `.ko` files found (refused files, modules without one).
    pub notes: Vec<String>,
}

/// What an address in module code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<'a> {
    /// The module.
    pub module: &'a str,
    /// In its init text.
    pub init: bool,
    /// Offset from the start of its text (or init text).
    pub offset: u64,
    /// The function holding it and the offset into it, from the `.ko`.
    pub function: Option<(&'a str, u64)>,
}

impl ModuleSymbols {
    /// Names the modules of `list` by offset (no `.ko` yet).
    pub fn new(list: &ModuleList) -> Self {
        let modules: Vec<Placed> = list
            .entries
            .iter()
            .map(|e| Placed {
                name: entry_name(e),
                entry: *e,
                ko: None,
                symbols: Vec::new(),
            })
            .collect();
        let mut spans = Vec::new();
        for (i, m) in modules.iter().enumerate() {
            for (start, size, init) in [
                (m.entry.text_addr, m.entry.text_size, false),
                (m.entry.init_addr, m.entry.init_size, true),
            ] {
                if size == 0 {
                    continue;
                }
                spans.push(Span {
                    start,
                    end: start.saturating_add(size),
                    module: i,
                    init,
                });
            }
        }
        spans.sort_by_key(|s| (s.start, s.end));
        Self {
            modules,
            spans,
            notes: Vec::new(),
        }
    }

    /// The modules, in the record's order.
    pub fn modules(&self) -> &[Placed] {
        &self.modules
    }

    /// Whether no module is known.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// Finds each module's `.ko` under `dir` and reads its symbols; what was refused or not
    /// found is said in [`Self::notes`]. `force` uses a `.ko` of another build anyway, as
    /// `--force` does for vmlinux. Fails only when `dir` cannot be read at all.
    pub fn load_dir(&mut self, dir: &Path, force: bool) -> Result<(), String> {
        if self.modules.is_empty() {
            return Ok(());
        }
        let index = index_ko_files(dir)?;
        let mut named = Vec::new();
        let mut missing = Vec::new();
        for m in &mut self.modules {
            let key = normalize(&m.name);
            let Some(candidates) = index.get(&key) else {
                missing.push(m.name.clone());
                continue;
            };
            for path in candidates {
                match accept_ko(path, &m.entry, &m.name, force) {
                    Ok((ko, symbols, note)) => {
                        if let Some(n) = note {
                            self.notes.push(n);
                        }
                        m.ko = Some(ko);
                        m.symbols = symbols;
                        named.push(m.name.clone());
                        break;
                    }
                    Err(why) => self.notes.push(why),
                }
            }
            if m.ko.is_none() {
                self.notes.push(format!(
                    "{}: no usable .ko: its code is named {}+offset",
                    m.name, m.name
                ));
            }
        }
        if !missing.is_empty() {
            self.notes.push(format!(
                "no .ko under {} for {}: their code is named module+offset",
                dir.display(),
                missing.join(", ")
            ));
        }
        Ok(())
    }

    /// What `addr` is in module code, if it is in a module's text or init text.
    pub fn lookup(&self, addr: u64) -> Option<Hit<'_>> {
        let i = self
            .spans
            .partition_point(|s| s.start <= addr)
            .checked_sub(1)?;
        let span = self.spans.get(i)?;
        if addr >= span.end {
            return None;
        }
        let m = self.modules.get(span.module)?;
        let j = m.symbols.partition_point(|s| s.addr <= addr);
        let function = j
            .checked_sub(1)
            .and_then(|j| m.symbols.get(j))
            .filter(|s| addr < s.end)
            .map(|s| (s.name.as_str(), addr - s.addr));
        Some(Hit {
            module: &m.name,
            init: span.init,
            offset: addr - span.start,
            function,
        })
    }

    /// `function+0xoff [module]`, or `module+0xoff`, for an address in module code.
    pub fn name(&self, addr: u64) -> Option<String> {
        let h = self.lookup(addr)?;
        Some(match h.function {
            Some((f, 0)) => format!("{f} [{}]", h.module),
            Some((f, off)) => format!("{f}+{off:#x} [{}]", h.module),
            None => by_offset(&h),
        })
    }

    /// `function [module]`, or `module+0xoff` when the `.ko` does not name it, for an address
    /// in module code.
    pub fn function(&self, addr: u64) -> Option<String> {
        let h = self.lookup(addr)?;
        Some(match h.function {
            Some((f, _)) => format!("{f} [{}]", h.module),
            None => by_offset(&h),
        })
    }
}

fn by_offset(h: &Hit<'_>) -> String {
    format!(
        "{}{}+{:#x}",
        h.module,
        if h.init { ".init" } else { "" },
        h.offset
    )
}

/// Module names use `_`; file names may use `-`.
fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

/// Every `*.ko` under `dir` (recursively, symbolic links to directories not followed), by
/// module name (`-` read as `_`), each list sorted.
pub fn index_ko_files(dir: &Path) -> Result<HashMap<String, Vec<PathBuf>>, String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let root = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut index: HashMap<String, Vec<PathBuf>> = HashMap::new();
    let mut stack = vec![(root, 0usize)];
    let mut seen = 0usize;
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for ent in rd.flatten() {
            seen += 1;
            if seen > MAX_DIR_ENTRIES {
                return Ok(sorted(index));
            }
            let Ok(ft) = ent.file_type() else {
                continue;
            };
            let path = ent.path();
            if ft.is_dir() {
                if depth < MAX_DIR_DEPTH {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            let name = ent.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".ko")) else {
                continue;
            };
            if !stem.is_empty() {
                index.entry(normalize(stem)).or_default().push(path);
            }
        }
    }
    Ok(sorted(index))
}

fn sorted(mut index: HashMap<String, Vec<PathBuf>>) -> HashMap<String, Vec<PathBuf>> {
    for v in index.values_mut() {
        v.sort();
    }
    index
}

/// Reads the `.ko` at `path` for the module `entry` (named `name`): checks its build ID against
/// the one the module ran with and that it has the sections the record places; returns it, its
/// functions at their runtime addresses, and a note to show.
fn accept_ko(
    path: &Path,
    entry: &ModuleEntry,
    name: &str,
    force: bool,
) -> Result<(KoFile, Vec<Sym>, Option<String>), String> {
    let shown = path.display();
    let data = read_capped(path)?;
    let (ko, raw) = parse_ko(path, &data).map_err(|e| format!("{shown}: {e}"))?;
    let want = entry.build_id();
    let note = match (&ko.build_id, want.is_empty()) {
        (_, true) => Some(format!(
            "{shown}: used unchecked: the dump records no build ID for {name} (its kernel was \
             built without CONFIG_STACKTRACE_BUILD_ID)"
        )),
        (None, false) => Some(format!(
            "{shown} has no build ID note: not checked against {name}'s {}",
            hex_id(want)
        )),
        (Some(have), false) if have.starts_with(want) => None,
        (Some(have), false) => {
            let msg = format!(
                "{shown} is another build of {name}: build ID {}, the module that ran had {}",
                hex_id(have),
                hex_id(want)
            );
            if !force {
                return Err(msg);
            }
            Some(format!("{msg} (used anyway: --force)"))
        }
    };
    let symbols = place(&ko, entry, name, raw)?;
    Ok((ko, symbols, note))
}

fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > MAX_KO_BYTES {
        return Err(format!(
            "{shown}: {} bytes, more than the {MAX_KO_BYTES} csdump reads from a .ko",
            meta.len()
        ));
    }
    let mut v = Vec::new();
    f.take(MAX_KO_BYTES)
        .read_to_end(&mut v)
        .map_err(|e| format!("{shown}: {e}"))?;
    Ok(v)
}

/// A function symbol of a `.ko`: its section, value (offset in the section), size and name.
struct RawSym {
    section: u32,
    value: u64,
    size: u64,
    name: String,
}

/// Reads a `.ko`: its build ID, sections and function symbols.
fn parse_ko(path: &Path, data: &[u8]) -> Result<(KoFile, Vec<RawSym>), String> {
    if data.get(..5) != Some(&[0x7f, b'E', b'L', b'F', 2][..]) {
        return Err("not a 64-bit ELF file".into());
    }
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(data)
        .map_err(|e| e.to_string())?;
    let endian = file.endian();
    let build_id = file
        .build_id()
        .map_err(|e| format!("build ID note: {e}"))?
        .map(<[u8]>::to_vec);
    let mut sections = Vec::new();
    for s in file.sections() {
        let Ok(index) = u32::try_from(s.index().0) else {
            continue;
        };
        let flags = match s.flags() {
            SectionFlags::Elf { sh_flags } => sh_flags,
            _ => 0,
        };
        let sh_type = s.elf_section_header().sh_type(endian);
        sections.push(KoSection {
            index,
            reloc: matches!(sh_type, object::elf::SHT_REL | object::elf::SHT_RELA),
            name: s.name().unwrap_or("").to_string(),
            size: s.size(),
            offset: s.file_range().map_or(0, |(o, _)| o),
            alloc: flags & SHF_ALLOC != 0,
            exec: flags & (SHF_ALLOC | SHF_EXECINSTR) == SHF_ALLOC | SHF_EXECINSTR,
        });
    }
    let mut symbols = Vec::new();
    for sym in file.symbols().take(MAX_KO_SYMBOLS) {
        let Ok(name) = sym.name() else {
            continue;
        };
        let Some(section) = sym.section_index().and_then(|i| u32::try_from(i.0).ok()) else {
            continue;
        };
        if name.is_empty()
            || name.starts_with('$')
            || !matches!(
                sym.kind(),
                SymbolKind::Text | SymbolKind::Unknown | SymbolKind::Label
            )
        {
            continue;
        }
        symbols.push(RawSym {
            section,
            value: sym.address(),
            size: sym.size(),
            // Rust names read as for vmlinux's symbols.
            name: crate::demangle::readable(name),
        });
    }
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((
        KoFile {
            path,
            build_id,
            sections,
        },
        symbols,
    ))
}

/// Places the functions of `ko` where the record says its sections were loaded; fails when the
/// record places a section the file does not have as code.
fn place(
    ko: &KoFile,
    entry: &ModuleEntry,
    name: &str,
    raw: Vec<RawSym>,
) -> Result<Vec<Sym>, String> {
    // Section index -> (runtime address, size).
    let mut placed: Vec<(u32, u64, u64)> = Vec::new();
    for s in entry.sections() {
        let Some(k) = ko.sections.iter().find(|k| k.index == s.index && k.exec) else {
            return Err(format!(
                "{}: {name}'s record places section {} at {:#x}, which is not a code section of \
                 this file ({} sections): not the module that ran",
                ko.path.display(),
                s.index,
                s.addr,
                ko.sections.len() + 1
            ));
        };
        placed.push((s.index, s.addr, k.size));
    }
    let mut syms: Vec<(Sym, u64)> = Vec::new();
    for r in raw {
        let Some(&(_, base, size)) = placed.iter().find(|p| p.0 == r.section) else {
            continue;
        };
        if r.value >= size {
            continue;
        }
        let addr = base.wrapping_add(r.value);
        let section_end = base.wrapping_add(size);
        let end = if r.size == 0 {
            0
        } else {
            addr.saturating_add(r.size).min(section_end)
        };
        syms.push((
            Sym {
                addr,
                end,
                name: r.name,
            },
            section_end,
        ));
    }
    syms.sort_by(|a, b| a.0.addr.cmp(&b.0.addr).then(b.0.end.cmp(&a.0.end)));
    syms.dedup_by(|b, a| a.0.addr == b.0.addr);
    // A symbol without a size reaches the next one, within its section.
    let starts: Vec<u64> = syms.iter().map(|s| s.0.addr).collect();
    let mut out = Vec::with_capacity(syms.len());
    for (i, (mut s, section_end)) in syms.into_iter().enumerate() {
        if s.end == 0 {
            let next = starts.get(i + 1).copied().unwrap_or(u64::MAX);
            s.end = next.min(section_end);
        }
        out.push(s);
    }
    Ok(out)
}

/// Where GDB is told a module's sections whose address the dump does not record (its data)
/// are: non-canonical addresses, where no code runs and no trace goes, one 4 GiB slice per
/// module.
pub const UNPLACED_BASE: u64 = 0x4000_0000_0000_0000;

impl Placed {
    /// The address of each section of the `.ko` that the loader allocates (`SHF_ALLOC`, in file
    /// order, relocation sections left out: the sections GDB's BFD counts), as GDB's library
    /// list names them: where the record placed it, else in a slice of non-canonical addresses
    /// (`slot` chooses it) where nothing runs. Empty without a `.ko`.
    pub fn section_addresses(&self, slot: u64) -> Vec<u64> {
        let Some(ko) = &self.ko else {
            return Vec::new();
        };
        let mut next = UNPLACED_BASE.wrapping_add(slot.wrapping_mul(1 << 32));
        ko.sections
            .iter()
            .filter(|s| s.alloc && !s.reloc)
            .map(
                |s| match self.entry.sections().iter().find(|p| p.index == s.index) {
                    Some(p) => p.addr,
                    None => {
                        let at = next;
                        next = next
                            .wrapping_add(s.size.clamp(1, 1 << 28))
                            .wrapping_add(0xfff)
                            & !0xfff;
                        at
                    }
                },
            )
            .collect()
    }
}

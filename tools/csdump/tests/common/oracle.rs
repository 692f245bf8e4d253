//! libkdumpfile as the oracle of csdump's vmcore reader: both must read the same bytes from
//! every page, and class every page the same way (stored, left out by the dump level, not
//! memory of the dump, damaged). csdump no longer links libkdumpfile; the tests and
//! `examples/vmcore_oracle.rs` (which scripts/check_vmcores.py runs on the e2e vmcores) do.

use std::fs::File;

use csdump::vmcore::Container;
use csdump::vmcore::Vmcore;
use kdumpfile::Dump;
use kdumpfile::ErrorKind;

/// How one reader saw one page.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// Stored: its bytes.
    Stored(Vec<u8>),
    /// Memory the file does not store (filtered out, or past an ELF segment's file image).
    NoData,
    /// Not memory of this dump (a hole between segments or RAM ranges).
    NotMemory,
    /// A read error: the reader's message.
    Error(String),
}

/// What a comparison covered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Agreed {
    /// Pages both read with the same bytes.
    pub stored: u64,
    /// Pages both found memory without data.
    pub no_data: u64,
}

/// How csdump's reader sees page `pfn`.
pub fn csdump_page(core: &Vmcore, pfn: u64) -> Seen {
    let page = core.page_size();
    match core.read_phys_lenient(pfn * page, page) {
        Err(e) => Seen::Error(e.to_string()),
        Ok(r) if r.stopped.is_some() => Seen::NotMemory,
        Ok(r) if !r.damaged.is_empty() => Seen::Error(r.damaged[0].1.clone()),
        Ok(r) if !r.excluded.is_empty() => Seen::NoData,
        Ok(r) => Seen::Stored(r.bytes),
    }
}

/// How libkdumpfile sees page `pfn`.
pub fn libkdumpfile_page(dump: &Dump, pfn: u64) -> Seen {
    let page = dump.page_size();
    let mut buf = vec![0u8; page as usize];
    match dump.read_phys(pfn * page, &mut buf) {
        Ok(()) => Seen::Stored(buf),
        Err((_, e)) if e.kind == ErrorKind::NoData => Seen::NoData,
        Err((_, e)) => Seen::Error(e.message),
    }
}

/// Compares csdump's reading of `core` with libkdumpfile's reading of `lib_file` (the same
/// dump, normally: [`Vmcore::dump_file`]) over every page either reader says is memory or
/// stored, at most `max_pages` of them. Returns what agreed, or the first disagreements.
pub fn compare(core: &Vmcore, lib_file: File, max_pages: u64) -> Result<Agreed, String> {
    let dump = Dump::open(lib_file).map_err(|e| format!("libkdumpfile cannot open it: {e}"))?;
    let mut errors = Vec::new();
    if dump.page_size() != core.page_size() {
        errors.push(format!(
            "page size: csdump {:#x}, libkdumpfile {:#x}",
            core.page_size(),
            dump.page_size()
        ));
    }
    if dump.vmcoreinfo() != core.vmcoreinfo() {
        errors.push(format!(
            "VMCOREINFO: csdump {:?}, libkdumpfile {:?}",
            core.vmcoreinfo().map(String::from_utf8_lossy),
            dump.vmcoreinfo().map(String::from_utf8_lossy)
        ));
    }
    // Every page either reader knows: csdump's memory runs, libkdumpfile's stored runs.
    let mut runs = core.memory_runs(1 << 20);
    let mut pfn = 0;
    while let Some((a, b)) = dump.next_file_pages(pfn) {
        runs.push((a, b));
        if runs.len() > 2 << 20 || b == u64::MAX {
            break;
        }
        pfn = b;
    }
    runs.sort_unstable();
    let mut agreed = Agreed::default();
    let mut seen = 0u64;
    let mut done_to = 0u64;
    'runs: for (a, b) in runs {
        for pfn in a.max(done_to)..b {
            seen += 1;
            if seen > max_pages {
                errors.push(format!("more than {max_pages} pages: not all compared"));
                break 'runs;
            }
            let ours = csdump_page(core, pfn);
            let theirs = libkdumpfile_page(&dump, pfn);
            let same = match (&ours, &theirs) {
                (Seen::Stored(x), Seen::Stored(y)) => x == y,
                // libkdumpfile says "no data" for a hole as for a filtered page; its page map
                // says which (kdump-compressed files; for ELF files with overlapping PT_LOADs its
                // map goes wrong, see vmcore.rs).
                (Seen::NoData, Seen::NoData) => {
                    core.format.container == Container::Elf || dump.page_in_memory(pfn)
                }
                (Seen::NotMemory, Seen::NoData) => !dump.page_in_memory(pfn),
                (Seen::Error(_), Seen::Error(_)) => true,
                _ => false,
            };
            if !same {
                let show = |s: &Seen| match s {
                    Seen::Stored(b) => format!(
                        "stored ({} non-zero bytes, first {:02x?})",
                        b.iter().filter(|&&x| x != 0).count(),
                        &b[..16.min(b.len())]
                    ),
                    other => format!("{other:?}"),
                };
                errors.push(format!(
                    "page {pfn:#x}: csdump {}, libkdumpfile {}",
                    show(&ours),
                    show(&theirs)
                ));
                if errors.len() >= 8 {
                    break 'runs;
                }
            } else {
                match ours {
                    Seen::Stored(_) => agreed.stored += 1,
                    Seen::NoData => agreed.no_data += 1,
                    _ => {}
                }
            }
        }
        done_to = done_to.max(b);
    }
    if errors.is_empty() {
        Ok(agreed)
    } else {
        Err(errors.join("\n"))
    }
}

//! perf's files for CoreSight trace: `cstrace.bin`, `metadata.bin` and `perf.data`.
//!
//! `perf.data` is written from the file format of `tools/perf` (`util/header.c`,
//! `util/session.c`, `util/auxtrace.c`, `util/cs-etm.c`): a file header, one `cs_etm` event
//! attribute, a data section holding a kernel `PERF_RECORD_MMAP` (and one per loadable module
//! whose `.ko` was given, as `perf record` maps modules), `PERF_RECORD_AUXTRACE_INFO`
//! (the `cs_etm` global header and one ETMv4 block per traced CPU, from the saved registers),
//! then per sink a `PERF_RECORD_ITRACE_START`, the trace as `PERF_RECORD_AUXTRACE` and a
//! `PERF_RECORD_AUX`; and feature sections (OS release, version, architecture, CPU count,
//! CPU description, command line, build id (the kernel's and each mapped module's), event
//! description, PMU mappings, auxtrace index).
//!
//! perf's `cs_etm` decoder takes an address below the kernel map's start for user space (it
//! compares with the start of vmlinux's text): it decodes and names the code of a module loaded
//! above the kernel image, not of one below it, where arm64 usually loads them (csdump's
//! report names both).
//!
//! The attribute has no `PERF_SAMPLE_TIME`: perf then decodes "timeless", all of a buffer at
//! once, which is what a panic dump is (no timestamps are needed in the trace).

use std::io;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use crate::capture::Capture;

/// `PERFILE2`, the magic of a perf.data file (little-endian).
pub const PERF_MAGIC: u64 = u64::from_le_bytes(*b"PERFILE2");
/// Size of `struct perf_file_header`.
pub const FILE_HEADER_SIZE: u64 = 104;
/// Size of the `perf_event_attr` written (`PERF_ATTR_SIZE_VER7`).
pub const ATTR_SIZE: u64 = 128;
/// The PMU type the file declares for `cs_etm` (a dynamic PMU type, as the kernel assigns).
pub const CS_ETM_PMU_TYPE: u32 = 0x1c;
/// `PERF_AUXTRACE_CS_ETM`.
pub const PERF_AUXTRACE_CS_ETM: u32 = 3;
/// `cs_etm` auxtrace info header version written (`CS_HEADER_VERSION_1`: per-CPU blocks carry
/// their number of parameters).
pub const CS_HEADER_VERSION: u64 = 1;
/// Name of the `cs_etm` event, as `perf record -e cs_etm//` names it.
pub const CS_ETM_EVENT_NAME: &str = "cs_etm//";
/// Sample id of the `cs_etm` event.
pub const EVENT_ID: u64 = 1;

const PERF_RECORD_MMAP: u32 = 1;
const PERF_RECORD_AUX: u32 = 11;
const PERF_RECORD_ITRACE_START: u32 = 12;
const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
const PERF_RECORD_AUXTRACE: u32 = 71;
const PERF_RECORD_HEADER_BUILD_ID: u32 = 67;
const PERF_RECORD_MISC_KERNEL: u16 = 1;
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;

const PERF_SAMPLE_IP: u64 = 1 << 0;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_CPU: u64 = 1 << 7;
const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;

const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;
const ATTR_ENABLE_ON_EXEC: u64 = 1 << 12;
const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;

/// The `sample_id_all` trailer of non-sample records: `TID` (pid, tid), `CPU` (cpu, res), then
/// `IDENTIFIER` (the event id, which is how perf finds the event of a record). Task and CPU
/// are -1: the trace of a sink holds every CPU's.
const SAMPLE_ID_LEN: usize = 24;

// Feature bits (`enum perf_header_feature`).
const HEADER_BUILD_ID: usize = 2;
const HEADER_OSRELEASE: usize = 4;
const HEADER_VERSION: usize = 5;
const HEADER_ARCH: usize = 6;
const HEADER_NRCPUS: usize = 7;
const HEADER_CPUDESC: usize = 8;
const HEADER_CMDLINE: usize = 11;
const HEADER_EVENT_DESC: usize = 12;
const HEADER_PMU_MAPPINGS: usize = 16;
const HEADER_AUXTRACE: usize = 18;

/// Name of the kernel map in a kernel `PERF_RECORD_MMAP`; `_text` is the relocation symbol.
pub const KERNEL_MMAP_NAME: &str = "[kernel.kallsyms]_text";

/// The metadata file name.
pub const METADATA_FILE: &str = "metadata.bin";
/// The perf.data file name.
pub const PERF_DATA_FILE: &str = "perf.data";

/// The `cs_etm` auxtrace info payload: global header, then one ETMv4 block per source.
pub fn auxtrace_info_priv(capture: &Capture<'_>) -> Vec<u64> {
    let mut v = vec![
        CS_HEADER_VERSION,
        (u64::from(CS_ETM_PMU_TYPE) << 32) | capture.etms.len() as u64,
        0,
    ];
    for e in &capture.etms {
        v.extend_from_slice(&e.state.perf_metadata(-1));
    }
    v
}

/// The bytes of `metadata.bin`: the `cs_etm` auxtrace info payload (little-endian `u64`s).
pub fn metadata_bytes(capture: &Capture<'_>) -> Vec<u8> {
    auxtrace_info_priv(capture)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// What [`write_perf`] wrote.
#[derive(Debug, Default)]
pub struct PerfOutput {
    /// Files written, in order.
    pub files: Vec<PathBuf>,
    /// Trace bytes written into perf.data.
    pub trace_bytes: u64,
    /// What could not be written, and why.
    pub skipped: Vec<String>,
}

fn io_err(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Writes `cstrace.bin` (one per sink), `metadata.bin` and `perf.data` into `dir`.
///
/// Each file that can be written is: without an ETMv4 source there is no metadata and no
/// perf.data, but the raw trace is still written.
pub fn write_perf(capture: &Capture<'_>, dir: &Path) -> io::Result<PerfOutput> {
    crate::output::create_dir(dir)?;
    let mut out = PerfOutput::default();
    let n = capture.sinks.len();
    for (i, s) in capture.sinks.iter().enumerate() {
        let path = dir.join(crate::output::cstrace_name(i, n, &s.name));
        crate::output::write(&path, &s.trace)?;
        out.files.push(path);
    }
    if capture.etms.is_empty() {
        out.skipped
            .push("metadata.bin and perf.data: no usable ETMv4 source".into());
        return Ok(out);
    }
    let path = dir.join(METADATA_FILE);
    crate::output::write(&path, &metadata_bytes(capture))?;
    out.files.push(path);
    if let Some(why) = capture.no_trace() {
        out.skipped.push(if capture.trace_not_collected() {
            format!("perf.data: no trace: {why}")
        } else {
            "perf.data: no trace (every sink is empty)".into()
        });
        return Ok(out);
    }
    let path = dir.join(PERF_DATA_FILE);
    let mut w = crate::output::AtomicFile::create(&path)?;
    out.trace_bytes = write_perf_data(capture, &mut w).map_err(|e| io_err(&path, e))?;
    w.commit()?;
    out.files.push(path);
    Ok(out)
}

/// A byte sink that counts what it wrote.
struct Counter<'w, W: Write> {
    w: &'w mut W,
    pos: u64,
}

impl<W: Write> Counter<'_, W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn u16(&mut self, v: u16) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }
    fn u32(&mut self, v: u32) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }
    fn sample_id(&mut self) -> io::Result<()> {
        self.u32(u32::MAX)?;
        self.u32(u32::MAX)?;
        self.u32(u32::MAX)?;
        self.u32(0)?;
        self.u64(EVENT_ID)
    }
    fn header(&mut self, kind: u32, misc: u16, size: usize) -> io::Result<()> {
        self.u32(kind)?;
        self.u16(misc)?;
        // CAST: every record written here is far below 64 KiB.
        self.u16(size as u16)
    }
}

/// The `perf_event_attr` (`PERF_ATTR_SIZE_VER7`) of the `cs_etm` event.
fn event_attr() -> Vec<u8> {
    let mut a = Vec::with_capacity(ATTR_SIZE as usize);
    a.extend_from_slice(&CS_ETM_PMU_TYPE.to_le_bytes());
    // CAST: 128.
    a.extend_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    let words = [
        0, // config
        1, // sample_period
        PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD,
        0, // read_format
        ATTR_DISABLED | ATTR_EXCLUDE_HV | ATTR_ENABLE_ON_EXEC | ATTR_SAMPLE_ID_ALL,
    ];
    for w in words {
        a.extend_from_slice(&u64::to_le_bytes(w));
    }
    a.resize(ATTR_SIZE as usize, 0);
    a
}

/// Pads `s` with NULs to a multiple of `align` bytes, at least one NUL included.
fn padded_str(s: &str, align: usize) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    b.push(0);
    while b.len() % align != 0 {
        b.push(0);
    }
    b
}

/// Encodes a perf header string (`do_write_string`): `u32` length, then the string padded.
fn feat_string(s: &str) -> Vec<u8> {
    let p = padded_str(s, 64);
    let mut v = (p.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(&p);
    v
}

/// A `struct perf_record_header_build_id` of the kernel's (`pid` -1): build ID and file name.
fn build_id_entry(build_id: &[u8], name: &str) -> Vec<u8> {
    // Header, pid, build_id[24] (the ID, then its size in the 21st byte), file name.
    let name = padded_str(name, 64);
    let size = 8 + 4 + 24 + name.len();
    let mut b = Vec::with_capacity(size);
    b.extend_from_slice(&PERF_RECORD_HEADER_BUILD_ID.to_le_bytes());
    b.extend_from_slice(&(PERF_RECORD_MISC_KERNEL | PERF_RECORD_MISC_BUILD_ID_SIZE).to_le_bytes());
    // CAST: a path is far below 64 KiB (PATH_MAX).
    b.extend_from_slice(&(size as u16).to_le_bytes());
    b.extend_from_slice(&(-1i32).to_le_bytes());
    let mut id = [0u8; 24];
    let n = build_id.len().min(20);
    id[..n].copy_from_slice(&build_id[..n]);
    // CAST: at most 20.
    id[20] = n as u8;
    b.extend_from_slice(&id);
    b.extend_from_slice(&name);
    b
}

/// A loadable module perf.data maps: its text and the `.ko` that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleMap {
    /// Runtime address of its text.
    pub start: u64,
    /// Size of its text.
    pub len: u64,
    /// The `.ko`'s absolute path.
    pub path: String,
    /// The build ID the module ran with (empty: none recorded).
    pub build_id: Vec<u8>,
}

/// The modules with a `.ko` (`--modules`), as perf.data maps them: by text address.
pub fn module_maps(capture: &Capture<'_>) -> Vec<ModuleMap> {
    let mut v: Vec<ModuleMap> = capture
        .module_symbols
        .modules()
        .iter()
        .filter_map(|m| {
            let ko = m.ko.as_ref()?;
            let path = ko.path.to_str()?.to_string();
            // A name perf cannot store (a record is at most 64 KiB) is left out.
            (m.entry.text_size > 0 && path.len() < 4096).then(|| ModuleMap {
                start: m.entry.text_addr,
                len: m.entry.text_size,
                path,
                build_id: m.entry.build_id().to_vec(),
            })
        })
        .collect();
    v.sort_by_key(|m| m.start);
    v
}

fn features(capture: &Capture<'_>, modules: &[ModuleMap]) -> Vec<(usize, Vec<u8>)> {
    let mut f = Vec::new();
    let k = &capture.kernel;
    let mut ids = Vec::new();
    if !k.build_id.is_empty() {
        ids.extend(build_id_entry(&k.build_id, "[kernel.kallsyms]"));
    }
    for m in modules.iter().filter(|m| !m.build_id.is_empty()) {
        ids.extend(build_id_entry(&m.build_id, &m.path));
    }
    if !ids.is_empty() {
        f.push((HEADER_BUILD_ID, ids));
    }
    let release = k.release.clone().unwrap_or_else(|| "unknown".into());
    f.push((HEADER_OSRELEASE, feat_string(&release)));
    f.push((
        HEADER_VERSION,
        feat_string(concat!("csdump ", env!("CARGO_PKG_VERSION"))),
    ));
    f.push((HEADER_ARCH, feat_string("aarch64")));
    let cpus = capture
        .cpus()
        .iter()
        .max()
        .map_or(1, |&m| m.saturating_add(1));
    let mut nr = cpus.to_le_bytes().to_vec();
    nr.extend_from_slice(&cpus.to_le_bytes());
    f.push((HEADER_NRCPUS, nr));
    f.push((HEADER_CPUDESC, feat_string("ARMv8-A")));
    let mut cmd = 2u32.to_le_bytes().to_vec();
    cmd.extend_from_slice(&feat_string("csdump"));
    cmd.extend_from_slice(&feat_string("perf"));
    f.push((HEADER_CMDLINE, cmd));
    // HEADER_EVENT_DESC (`write_event_desc`): count, attr size, then per event its attr, number
    // of ids, name and ids. The name is what perf shows for the event; without it perf calls a
    // dynamic PMU type "unknown attr type".
    let mut desc = 1u32.to_le_bytes().to_vec();
    // CAST: 128.
    desc.extend_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    desc.extend_from_slice(&event_attr());
    desc.extend_from_slice(&1u32.to_le_bytes());
    desc.extend_from_slice(&feat_string(CS_ETM_EVENT_NAME));
    desc.extend_from_slice(&EVENT_ID.to_le_bytes());
    f.push((HEADER_EVENT_DESC, desc));
    // HEADER_PMU_MAPPINGS (`write_pmu_mappings`): count, then per PMU its type and name. The
    // file's only event is `cs_etm`, so that is the only PMU it names.
    let mut pmus = 1u32.to_le_bytes().to_vec();
    pmus.extend_from_slice(&CS_ETM_PMU_TYPE.to_le_bytes());
    pmus.extend_from_slice(&feat_string("cs_etm"));
    f.push((HEADER_PMU_MAPPINGS, pmus));
    f
}

/// Writes perf.data to `w`; returns the number of trace bytes in it.
pub fn write_perf_data<W: Write>(capture: &Capture<'_>, w: &mut W) -> io::Result<u64> {
    let mut c = Counter { w, pos: 0 };
    let attrs_off = FILE_HEADER_SIZE;
    let attr_entry = ATTR_SIZE + 16;
    let ids_off = attrs_off + attr_entry;
    let data_off = ids_off + 8;

    // Data section, sized up front so that the header can be written first.
    let text = capture.text_addr();
    let mmap_name = padded_str(KERNEL_MMAP_NAME, 8);
    let modules = module_maps(capture);
    // The kernel's map reaches up to the first module above it (modules below `_text` are
    // below it anyway), as perf ends a kernel map where the next one starts.
    let kernel_end = modules
        .iter()
        .map(|m| m.start)
        .find(|&s| s > text)
        .unwrap_or(u64::MAX);
    let module_names: Vec<Vec<u8>> = modules.iter().map(|m| padded_str(&m.path, 8)).collect();
    let mmap_size = 8 + 4 + 4 + 8 + 8 + 8 + mmap_name.len() + SAMPLE_ID_LEN;
    let module_mmaps_size: usize = module_names
        .iter()
        .map(|n| 8 + 4 + 4 + 8 + 8 + 8 + n.len() + SAMPLE_ID_LEN)
        .sum();
    let mmap_size_all = mmap_size + module_mmaps_size;
    let priv_words = auxtrace_info_priv(capture);
    let info_size = 8 + 8 + 8 * priv_words.len();
    let sinks: Vec<(usize, &[u8])> = capture
        .sinks
        .iter()
        .map(|s| s.frames())
        .enumerate()
        .filter(|(_, t)| !t.is_empty())
        .collect();
    let itrace_size = 8 + 8 + SAMPLE_ID_LEN;
    let auxtrace_size = 8 + 40;
    let aux_size = 8 + 24 + SAMPLE_ID_LEN;
    let mut data_size = (mmap_size_all + info_size) as u64;
    for (_, t) in &sinks {
        data_size += (itrace_size + auxtrace_size + aux_size) as u64 + t.len() as u64;
    }
    let mut feats = features(capture, &modules);
    // HEADER_AUXTRACE: the index of the PERF_RECORD_AUXTRACE events (file offset, size of the
    // record without its data), which lets perf find them with random access.
    {
        let mut at = data_off + (mmap_size_all + info_size) as u64;
        let mut index = (sinks.len() as u64).to_le_bytes().to_vec();
        for (_, t) in &sinks {
            let ev = at + itrace_size as u64;
            index.extend_from_slice(&ev.to_le_bytes());
            index.extend_from_slice(&(auxtrace_size as u64).to_le_bytes());
            at += (itrace_size + auxtrace_size + aux_size) as u64 + t.len() as u64;
        }
        feats.push((HEADER_AUXTRACE, index));
        feats.sort_by_key(|f| f.0);
    }
    let mut bitmap = [0u8; 32];
    for (bit, _) in &feats {
        bitmap[bit / 8] |= 1 << (bit % 8);
    }

    // struct perf_file_header.
    c.u64(PERF_MAGIC)?;
    c.u64(FILE_HEADER_SIZE)?;
    c.u64(attr_entry)?;
    c.u64(attrs_off)?;
    c.u64(attr_entry)?;
    c.u64(data_off)?;
    c.u64(data_size)?;
    c.u64(0)?; // event_types (ignored)
    c.u64(0)?;
    c.put(&bitmap)?;

    // struct perf_file_attr: perf_event_attr (VER7), then the ids section.
    c.put(&event_attr())?;
    c.u64(ids_off)?;
    c.u64(8)?;
    c.u64(EVENT_ID)?;

    // PERF_RECORD_MMAP for the kernel: pid -1 (the host kernel), from `_text` to the top.
    c.header(PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, mmap_size)?;
    c.u32(u32::MAX)?;
    c.u32(0)?;
    c.u64(text)?;
    c.u64(kernel_end - text)?;
    c.u64(text)?;
    c.put(&mmap_name)?;
    c.sample_id()?;

    // PERF_RECORD_MMAP for each module with a .ko, as `perf record` writes a kernel module's:
    // pid -1, its text, the .ko's path, pgoff 0 (perf places a module's sections itself, from
    // the .ko it loads for the map).
    for (m, name) in modules.iter().zip(&module_names) {
        c.header(
            PERF_RECORD_MMAP,
            PERF_RECORD_MISC_KERNEL,
            8 + 4 + 4 + 8 + 8 + 8 + name.len() + SAMPLE_ID_LEN,
        )?;
        c.u32(u32::MAX)?;
        c.u32(0)?;
        c.u64(m.start)?;
        c.u64(m.len)?;
        c.u64(0)?;
        c.put(name)?;
        c.sample_id()?;
    }

    // PERF_RECORD_AUXTRACE_INFO.
    c.header(PERF_RECORD_AUXTRACE_INFO, 0, info_size)?;
    c.u32(PERF_AUXTRACE_CS_ETM)?;
    c.u32(0)?;
    for wd in &priv_words {
        c.u64(*wd)?;
    }

    let mut offset = 0u64;
    let mut trace_bytes = 0u64;
    for (idx, t) in &sinks {
        // PERF_RECORD_ITRACE_START: pid, tid (-1: the kernel, no task).
        c.header(PERF_RECORD_ITRACE_START, 0, itrace_size)?;
        c.u32(u32::MAX)?;
        c.u32(u32::MAX)?;
        c.sample_id()?;
        // PERF_RECORD_AUXTRACE: size, offset, reference, idx, tid, cpu, reserved; then data.
        let len = t.len() as u64;
        c.header(PERF_RECORD_AUXTRACE, 0, auxtrace_size)?;
        c.u64(len)?;
        c.u64(offset)?;
        c.u64(0)?;
        // CAST: a handful of sinks.
        c.u32(*idx as u32)?;
        c.u32(u32::MAX)?;
        c.u32(u32::MAX)?;
        c.u32(0)?;
        c.put(t)?;
        // PERF_RECORD_AUX: aux_offset, aux_size, flags.
        c.header(PERF_RECORD_AUX, 0, aux_size)?;
        c.u64(offset)?;
        c.u64(len)?;
        c.u64(0)?;
        c.sample_id()?;
        offset += len;
        trace_bytes += len;
    }
    debug_assert_eq!(c.pos, data_off + data_size);

    // Feature sections: the table, then each feature's data.
    let mut at = c.pos + 16 * feats.len() as u64;
    for (_, d) in &feats {
        c.u64(at)?;
        c.u64(d.len() as u64)?;
        at += d.len() as u64;
    }
    for (_, d) in &feats {
        c.put(d)?;
    }
    Ok(trace_bytes)
}

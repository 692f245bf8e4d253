//! The trace a dump (or an OpenCSD snapshot directory) holds, in the form the `perf`,
//! `snapshot` and `report` commands use: sinks with their raw trace, ETMv4 sources with their
//! saved registers, CPU debug samples, and what is known of the kernel's address layout.
//!
//! Trace bytes are borrowed from the input (a mapped vmcore or region file): nothing is copied
//! until it is written out.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;

use crate::vmcore::Vmcore;
use cspd_format::cpu_debug::CpuSample;
use cspd_format::etm4x::SaveOutcome;
use cspd_format::etm4x::SavedState;
use cspd_format::etr::parse_tracedata_dump_name;
use cspd_format::etr::EtrOutcome;
use cspd_format::etr::EtrRecord;
use cspd_format::etr::EtrRecordHeader;
use cspd_format::etr::ETR_REC_IN_PLACE;
use cspd_format::tmc::TmcRecord;
use cspd_format::tmc::TmcRecordHeader;
use cspd_format::tmc::CS_BARRIER_LEN;
use cspd_format::tmc::CS_BARRIER_WORD;
use cspd_format::tmc::CS_FRAME_LEN;
use cspd_format::Identity;
use cspd_format::PanicInfo;
use cspd_format::PayloadType;
use cspd_format::Phases;
use cspd_format::RecordKind;
use cspd_format::RecordStatus;
use cspd_format::CPU_NONE;
use cspd_format::RECORD_FLAG_CAPTURE;
use cspd_format::RECORD_FLAG_RUNTIME;
use cspd_hw::etm4x;
use serde::Serialize;
use thiserror::Error;

use crate::elf::Vmlinux;
use crate::ini::parse_number;
use crate::ini::Ini;
use crate::modules::ModuleList;
use crate::modules::ModuleSymbols;
use crate::region::Located;

/// Why a capture could not be read at all.
#[derive(Debug, Error)]
pub enum CaptureError {
    /// The dump's container header is unreadable.
    #[error("region: {0}")]
    Format(cspd_format::FormatError),
    /// A snapshot file could not be read.
    #[error("{}: {err}", path.display())]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The I/O error.
        err: std::io::Error,
    },
    /// The snapshot directory lacks something it must have.
    #[error("{0}")]
    Snapshot(String),
}

impl From<cspd_format::FormatError> for CaptureError {
    fn from(e: cspd_format::FormatError) -> Self {
        Self::Format(e)
    }
}

/// Where a capture came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A coresight-panic-dump region (in a vmcore or a region file).
    Dump,
    /// An OpenCSD snapshot directory.
    Snapshot(PathBuf),
}

/// Which path wrote a record csdump uses: the crashed kernel's panic path, the kernel while it
/// ran, or a kdump capture kernel (the record header's `RECORD_FLAG_*` bits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "by")]
pub enum RecordOrigin {
    /// The panic path (the crashed kernel's panic notifier).
    PanicPath,
    /// The kernel while it ran ([`RECORD_FLAG_RUNTIME`]): a trace source's configuration,
    /// recorded when it was enabled.
    Runtime,
    /// A kdump capture kernel ([`RECORD_FLAG_CAPTURE`]), from what the hardware kept after the
    /// crash.
    CaptureKernel {
        /// The device dump it handed the record over in (`coresight_capture:<name>`).
        #[serde(skip_serializing_if = "Option::is_none")]
        device_dump: Option<String>,
    },
    /// A file of an OpenCSD snapshot directory.
    Snapshot,
}

impl RecordOrigin {
    /// The origin a record header's `flags` say, `device_dump` the capture kernel's device dump
    /// the record was read from (`None`: the region).
    pub fn of(flags: u32, device_dump: Option<&str>) -> Self {
        if device_dump.is_some() || flags & RECORD_FLAG_CAPTURE != 0 {
            Self::CaptureKernel {
                device_dump: device_dump.map(str::to_string),
            }
        } else if flags & RECORD_FLAG_RUNTIME != 0 {
            Self::Runtime
        } else {
            Self::PanicPath
        }
    }
}

impl std::fmt::Display for RecordOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PanicPath => write!(f, "panic path"),
            Self::Runtime => write!(f, "recorded at enable, while the kernel ran"),
            Self::CaptureKernel {
                device_dump: Some(d),
            } => write!(f, "capture kernel (device dump \"{d}\")"),
            Self::CaptureKernel { device_dump: None } => write!(f, "capture kernel"),
            Self::Snapshot => write!(f, "snapshot file"),
        }
    }
}

/// Which path committed the dump (the commit record's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DumpPath {
    /// The panic path: the crashed kernel's panic notifier ran and committed the region.
    PanicPath,
    /// Committed while the kernel ran ([`RECORD_FLAG_RUNTIME`] on the commit): no panic-time
    /// step ran.
    Runtime,
}

impl DumpPath {
    /// The path the commit record's header `flags` say.
    pub fn of_commit(flags: u32) -> Self {
        if flags & RECORD_FLAG_RUNTIME != 0 {
            Self::Runtime
        } else {
            Self::PanicPath
        }
    }
}

impl std::fmt::Display for DumpPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PanicPath => write!(
                f,
                "panic path: committed by the crashed kernel's panic notifier"
            ),
            Self::Runtime => write!(
                f,
                "committed while the kernel ran: no panic-time step ran (plain kdump without \
                 crash_kexec_post_notifiers, or no panic)"
            ),
        }
    }
}

/// Why the trace of a dump committed while the kernel ran was not collected, when the capture
/// kernel handed over no sink record.
pub const NOT_COLLECTED: &str = "the trace was not collected: the dump was committed while the \
kernel ran (no panic-time step drained a sink) and the capture kernel handed over no sink record \
(no vmcore device dump coresight_capture:<sink>: its TMC driver was not loaded or built in, or \
the sink was not capturing)";

/// How a sink's trace is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkFormat {
    /// 16-byte CoreSight frames aligned in memory (ETB, ETF, ETR; a snapshot's `coresight`).
    Frames,
    /// CoreSight frames with full syncs, as a TPIU emits them (a snapshot's
    /// `dstream_coresight`).
    Tpiu,
    /// One source's raw stream, no formatter (a snapshot's `source_data`).
    Single,
}

/// The trace protocol of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// ETMv4 instruction trace.
    Etmv4,
    /// The Embedded Trace Extension (Armv9), ETMv4's successor.
    Ete,
}

/// One trace sink's buffer.
#[derive(Debug, Clone)]
pub struct Sink<'a> {
    /// Device name (`tmc_etf0`, or the snapshot buffer name).
    pub name: String,
    /// The trace as drained (barrier included), borrowed from the input when possible.
    pub trace: Cow<'a, [u8]>,
    /// The TMC record header, for a dump's ETB or ETF.
    pub tmc: Option<TmcRecordHeader>,
    /// The ETR record header, for a dump's ETR.
    pub etr: Option<EtrRecordHeader>,
    /// How the trace is laid out.
    pub format: SinkFormat,
    /// Which path wrote its record.
    pub origin: RecordOrigin,
}

impl Sink<'_> {
    /// Returns the trace cut to a whole number of 16-byte frames, as decoders need it (all of
    /// it, for a single source's stream).
    pub fn frames(&self) -> &[u8] {
        if self.format == SinkFormat::Single {
            return &self.trace;
        }
        let n = self.trace.len() - self.trace.len() % CS_FRAME_LEN;
        self.trace.get(..n).unwrap_or(&[])
    }
}

/// One of the crashed kernel's CPU debug records, as a capture kernel's sample is matched to it.
#[derive(Debug, Clone, Copy)]
pub struct RegionSample {
    /// Its CPU number.
    pub cpu: u32,
    /// The CPU's MPIDR, when the record has it.
    pub mpidr: Option<u64>,
    /// Whether the panic path sampled the CPU (its record wins over a capture kernel's).
    pub panic_sampled: bool,
}

impl RegionSample {
    /// The region record `sample`, written by the path `origin`.
    pub fn of(sample: &CpuSample, origin: &RecordOrigin) -> Self {
        Self {
            cpu: sample.cpu,
            mpidr: sample.mpidr,
            panic_sampled: *origin == RecordOrigin::PanicPath
                && sample.outcome != cspd_format::cpu_debug::Outcome::Recorded,
        }
    }
}

/// Which of the crashed kernel's CPU debug records (`region`) a capture kernel's `sample` is of:
/// the one with its MPIDR, unless the panic path sampled that CPU. `Err` says why it is not used.
pub fn captured_sample_for(region: &[RegionSample], sample: &CpuSample) -> Result<u32, String> {
    let Some(mpidr) = sample.mpidr else {
        return Err("no MPIDR, so no CPU of the crashed kernel to give it to; not used".into());
    };
    let Some(r) = region.iter().find(|r| r.mpidr == Some(mpidr)) else {
        return Err(format!(
            "MPIDR {mpidr:#x} is no CPU the crashed kernel recorded; not used"
        ));
    };
    if r.panic_sampled {
        return Err(format!(
            "CPU {} (MPIDR {mpidr:#x}) was sampled by the panic path, whose record is used; not \
             used",
            r.cpu
        ));
    }
    Ok(r.cpu)
}

/// The stop points of a saved trace unit (runtime addresses): the address comparators its
/// `TRCVISSCTLR` selects as stops, of those the record saved.
pub fn stop_points(s: &SavedState) -> impl Iterator<Item = u64> + '_ {
    let stops = s.trcvissctlr >> 16;
    (0..16)
        .filter(move |n| stops & (1 << n) != 0 && s.cmp_saved & (1 << n) != 0)
        .filter_map(|n| s.acvr.get(n).copied())
}

/// One ETMv4 trace unit and its registers saved at panic (or read from a snapshot).
#[derive(Debug, Clone)]
pub struct Etm {
    /// Device name.
    pub name: String,
    /// The saved state; `cpu` is the CPU it traces.
    pub state: SavedState,
    /// Its trace protocol.
    pub protocol: Protocol,
    /// Which path wrote its record.
    pub origin: RecordOrigin,
}

/// One CPU's debug sample, and where it came from.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Record name.
    pub name: String,
    /// The sample.
    pub sample: CpuSample,
    /// Which path wrote its record.
    pub origin: RecordOrigin,
}

impl Etm {
    /// Returns the CoreSight trace ID (`TRCTRACEIDR.TRACEID`).
    pub fn trace_id(&self) -> u8 {
        // CAST: masked to the 7-bit field.
        (self.state.trctraceidr & 0x7F) as u8
    }
}

/// A memory image (kernel text) a decoder can read instructions from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemImage {
    /// Virtual address of the first byte.
    pub address: u64,
    /// File holding the bytes.
    pub path: PathBuf,
    /// Offset of the first byte in the file.
    pub offset: u64,
    /// Number of bytes.
    pub length: u64,
}

/// What is known of the kernel that wrote the trace.
#[derive(Debug, Clone, Default)]
pub struct KernelInfo {
    /// Kernel release.
    pub release: Option<String>,
    /// GNU build id of vmlinux (empty when unknown).
    pub build_id: Vec<u8>,
    /// KASLR offset (0 when unknown).
    pub kaslr_offset: u64,
    /// Runtime address of `_text`, when known.
    pub text: Option<u64>,
    /// `kimage_voffset` (kernel image virtual minus physical address), when known.
    pub kimage_voffset: Option<u64>,
}

/// Everything the trace commands need from one input.
#[derive(Debug, Clone)]
pub struct Capture<'a> {
    /// Where it came from.
    pub origin: Origin,
    /// Trace sinks, in record order.
    pub sinks: Vec<Sink<'a>>,
    /// Usable ETMv4 sources, in record order, one per trace ID.
    pub etms: Vec<Etm>,
    /// CPU debug samples.
    pub samples: Vec<Sample>,
    /// Kernel layout.
    pub kernel: KernelInfo,
    /// CPU that panicked.
    pub panic_cpu: Option<u32>,
    /// Panic message.
    pub panic_message: Option<String>,
    /// When each phase of the panic path ran (a dump of format version 3).
    pub phases: Option<Phases>,
    /// Which path committed the dump (`None`: a snapshot, or a dump without a sound commit).
    pub path: Option<DumpPath>,
    /// Memory images named by a snapshot.
    pub memory: Vec<MemImage>,
    /// Core device type names from a snapshot, by CPU.
    pub core_types: Vec<(u32, String)>,
    /// What could not be used, in words for the user.
    pub warnings: Vec<String>,
    /// What the reader should know that is not damage (a skipped STM source, say).
    pub notes: Vec<String>,
    /// The vmcore the dump was found in, for the memory the kernel ran (its patched text).
    pub core: Option<&'a Vmcore>,
    /// The vmcore's VMCOREINFO text.
    pub vmcoreinfo: Option<&'a str>,
    /// The loadable modules the dump recorded (empty when it records none, or the list is
    /// damaged: a note says so).
    pub modules: ModuleList,
    /// Names code in those modules ([`Capture::load_modules`] adds their `.ko` files).
    pub module_symbols: ModuleSymbols,
}

impl<'a> Capture<'a> {
    /// Returns the runtime-minus-link offset of the kernel: from `_text` when both the dump and
    /// `vmlinux` have it, else the dump's KASLR offset.
    pub fn kernel_relocation(&self, vmlinux: &Vmlinux) -> u64 {
        match (self.kernel.text, vmlinux.text) {
            (Some(rt), Some(lt)) => rt.wrapping_sub(lt),
            _ => self.kernel.kaslr_offset,
        }
    }

    /// Reads `len` bytes of kernel text at runtime address `addr` from the vmcore the capture
    /// came from, through the kernel image's linear mapping (`kimage_voffset`).
    pub(crate) fn runtime_text(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
        let core = self.core?;
        let paddr = addr.checked_sub(self.kernel.kimage_voffset?)?;
        core.read_phys(paddr, len).ok()
    }

    fn empty(origin: Origin) -> Self {
        Self {
            origin,
            sinks: Vec::new(),
            etms: Vec::new(),
            samples: Vec::new(),
            kernel: KernelInfo::default(),
            panic_cpu: None,
            panic_message: None,
            phases: None,
            path: None,
            memory: Vec::new(),
            core_types: Vec::new(),
            warnings: Vec::new(),
            notes: Vec::new(),
            core: None,
            vmcoreinfo: None,
            modules: ModuleList::default(),
            module_symbols: ModuleSymbols::default(),
        }
    }

    /// Reads the `.ko` of each recorded module found under `dir` (recursively), checked against
    /// the build ID the module ran with (`force`: a `.ko` of another build is used anyway), for
    /// naming the code in modules; what was refused or not found is in
    /// `module_symbols.notes`. Fails only when `dir` cannot be read.
    pub fn load_modules(&mut self, dir: &Path, force: bool) -> Result<(), String> {
        self.module_symbols.load_dir(dir, force)
    }

    /// Reads the trace records of a located dump region, and the sink records a kdump capture
    /// kernel handed over as device dumps (`located.captures`).
    ///
    /// Only records that pass every check are used; a damaged one is skipped (the region
    /// report names it). A record that cannot be used for trace gets a warning. A captured sink
    /// record is used as the region's would be, and the region's record of that sink, which the
    /// panic path did not drain, is then no cause for a warning; when the panic path did drain
    /// it, the region's is used and a note says the capture kernel's copy was ignored.
    pub fn from_dump(located: &'a Located<'a>) -> Result<Self, CaptureError> {
        let bytes: &'a [u8] = &located.bytes;
        let region = cspd_format::parse_region(bytes)?;
        let mut c = Capture::empty(Origin::Dump);
        c.core = located.core.as_ref();
        c.vmcoreinfo = located.vmcoreinfo.as_deref();
        let mut sources = Vec::new();
        let mut modules_seen = false;
        // The region's sinks the panic path drained (their callback ran), and those it did not,
        // with their status: said once the capture kernel's sinks are known.
        let mut drained: Vec<String> = Vec::new();
        let mut undrained: Vec<(String, RecordStatus)> = Vec::new();
        // The CPU debug records the panic path did not reach.
        let mut unsampled: Vec<(String, i32)> = Vec::new();
        for item in region.records() {
            let rec = match item {
                Ok(rec) => rec,
                Err(e) => {
                    // A damaged module list costs the naming of module code only.
                    let kind = e
                        .offset()
                        .and_then(|o| region.salvage(o))
                        .map(|r| r.header.kind);
                    if kind == Some(RecordKind::Modules) && !modules_seen {
                        modules_seen = true;
                        c.notes.push(crate::modules::damaged(&e.to_string()));
                    }
                    continue;
                }
            };
            let h = &rec.header;
            let name = String::from_utf8_lossy(h.name_bytes()).into_owned();
            let partial = matches!(h.status, RecordStatus::Truncated | RecordStatus::Partial);
            match h.kind {
                RecordKind::Commit => c.path = Some(DumpPath::of_commit(h.flags)),
                RecordKind::Identity if c.kernel.text.is_none() => {
                    if let Ok(id) = Identity::decode(rec.data) {
                        c.kernel = kernel_info(&id);
                    }
                }
                RecordKind::Phases if c.phases.is_none() && h.status == RecordStatus::Ok => {
                    match Phases::decode(rec.data) {
                        Ok(p) => c.phases = Some(p),
                        Err(e) => c.warnings.push(format!("{name}: {e}")),
                    }
                }
                RecordKind::Modules if !modules_seen => {
                    modules_seen = true;
                    match ModuleList::decode(rec.data) {
                        Ok(l) => {
                            c.module_symbols = ModuleSymbols::new(&l);
                            c.modules = l;
                        }
                        Err(e) => c.notes.push(crate::modules::damaged(&e)),
                    }
                }
                RecordKind::PanicInfo if c.panic_cpu.is_none() => {
                    if let Ok(p) = PanicInfo::decode(rec.data) {
                        c.panic_cpu = (p.cpu != CPU_NONE).then_some(p.cpu);
                        c.panic_message = Some(String::from_utf8_lossy(p.message).into_owned());
                    }
                }
                RecordKind::Sink => {
                    if h.status != RecordStatus::Ok && !partial {
                        undrained.push((name, h.status));
                        continue;
                    }
                    drained.push(name.clone());
                    let origin = RecordOrigin::of(h.flags, None);
                    c.read_sink(located, name, h, rec.data, origin);
                }
                RecordKind::Source => {
                    if h.status != RecordStatus::Ok && !partial {
                        c.warnings.push(format!(
                            "source {name}: status {}, no registers",
                            h.status.name()
                        ));
                        continue;
                    }
                    if h.payload != PayloadType::Etm4x {
                        c.warnings.push(format!(
                            "source {name}: {} payload, not an ETMv4 saved state; skipped",
                            h.payload.name()
                        ));
                        continue;
                    }
                    match SavedState::decode(rec.data) {
                        Ok(s) => sources.push(Etm {
                            name,
                            state: s,
                            protocol: Protocol::Etmv4,
                            origin: RecordOrigin::of(h.flags, None),
                        }),
                        Err(e) => c.warnings.push(format!(
                            "source {name}: not an ETMv4 saved state ({e:?}); skipped"
                        )),
                    }
                }
                RecordKind::CpuDebug if h.status == RecordStatus::NotRun && rec.data.is_empty() => {
                    unsampled.push((name, h.error));
                }
                RecordKind::CpuDebug if h.status != RecordStatus::Ok && rec.data.is_empty() => {
                    c.warnings.push(format!(
                        "cpu debug {name}: {}; no sample",
                        failure(h.status.name(), h.error)
                    ));
                }
                RecordKind::CpuDebug if h.payload != PayloadType::CpuDebug => {
                    c.warnings.push(format!(
                        "cpu debug {name}: {} payload, not a PC sample; no sample",
                        h.payload.name()
                    ));
                }
                RecordKind::CpuDebug => match CpuSample::decode(rec.data) {
                    Ok(s) => c.samples.push(Sample {
                        name,
                        sample: s,
                        origin: RecordOrigin::of(h.flags, None),
                    }),
                    Err(e) => c.warnings.push(format!("cpu debug {name}: {e}; no sample")),
                },
                _ => {}
            }
        }
        if c.path == Some(DumpPath::Runtime) && !unsampled.is_empty() {
            let names: Vec<&str> = unsampled.iter().map(|(n, _)| n.as_str()).collect();
            c.notes.push(format!(
                "cpu debug {}: not sampled (no panic-time step ran)",
                names.join(", ")
            ));
        } else {
            for (name, error) in unsampled {
                c.warnings.push(format!(
                    "cpu debug {name}: {}; no sample",
                    failure(RecordStatus::NotRun.name(), error)
                ));
            }
        }
        c.add_captures(located, &drained, &mut undrained);
        for (name, status) in undrained {
            let w = if status == RecordStatus::NotRun && c.path == Some(DumpPath::Runtime) {
                format!(
                    "sink {name}: not drained (no panic-time step ran) and no capture kernel's \
                     device dump {}; no trace",
                    capture_dump_name(&name)
                )
            } else {
                format!("sink {name}: status {}, no trace", status.name())
            };
            c.warnings.push(w);
        }
        for etm in sources {
            c.add_etm(etm);
        }
        c.finish();
        Ok(c)
    }

    /// Adds the sink records of the capture kernel's sound device dumps (a damaged one was
    /// warned about when it was located): each is read as a region's sink record is, unless the
    /// panic path drained the region's sink of that name (`drained`: a note says the captured
    /// copy was ignored). A region sink that a captured record stands in for is taken out of
    /// `undrained`.
    fn add_captures(
        &mut self,
        located: &'a Located<'a>,
        drained: &[String],
        undrained: &mut Vec<(String, RecordStatus)>,
    ) {
        let mut used: Vec<String> = Vec::new();
        for dump in located.captures.iter().filter(|d| d.problem.is_none()) {
            let dd = &dump.name;
            for rec in dump.records() {
                let h = &rec.header;
                let name = String::from_utf8_lossy(h.name_bytes()).into_owned();
                match h.kind {
                    RecordKind::Commit => continue,
                    RecordKind::Sink => {}
                    RecordKind::CpuDebug => {
                        self.add_captured_sample(name, h, rec.data, dd);
                        continue;
                    }
                    kind => {
                        self.notes.push(format!(
                            "device dump \"{dd}\": {} record {name} skipped (only sink and CPU \
                             debug records are read from a capture kernel's device dump)",
                            kind.name()
                        ));
                        continue;
                    }
                }
                if drained.contains(&name) {
                    self.notes.push(format!(
                        "sink {name}: drained by the panic path, whose record is used; the \
                         capture kernel's copy (device dump \"{dd}\") was ignored"
                    ));
                    continue;
                }
                if used.contains(&name) {
                    self.notes.push(format!(
                        "sink {name}: already read from another capture kernel's device dump; \
                         the copy in device dump \"{dd}\" was ignored"
                    ));
                    continue;
                }
                used.push(name.clone());
                let stood_for = undrained
                    .iter()
                    .position(|(n, _)| *n == name)
                    .map(|i| undrained.remove(i).1);
                match stood_for {
                    Some(status) if status != RecordStatus::NotRun => {
                        self.notes.push(format!(
                            "sink {name}: the panic path's record has status {}; the capture \
                             kernel's (device dump \"{dd}\") is used",
                            status.name()
                        ));
                    }
                    _ => self.notes.push(format!(
                        "sink {name}: trace from the capture kernel (device dump \"{dd}\")"
                    )),
                }
                let partial = matches!(h.status, RecordStatus::Truncated | RecordStatus::Partial);
                if h.status != RecordStatus::Ok && !partial {
                    self.warnings.push(format!(
                        "sink {name} (device dump \"{dd}\"): status {}, no trace",
                        h.status.name()
                    ));
                    continue;
                }
                let origin = RecordOrigin::of(h.flags, Some(dd));
                self.read_sink(located, name, h, rec.data, origin);
            }
        }
    }

    /// Adds a capture kernel's CPU debug sample (of a CPU not online there, taken as found): it
    /// names its CPU by MPIDR only, which is matched to the crashed kernel's records of the CPU
    /// (each carries the MPIDR, recorded when the device was bound), whose number it takes. It
    /// stands in for that CPU's record unless the panic path sampled the CPU.
    fn add_captured_sample(
        &mut self,
        name: String,
        h: &cspd_format::RecordHeader,
        data: &[u8],
        dd: &str,
    ) {
        if h.status != RecordStatus::Ok || h.payload != PayloadType::CpuDebug {
            self.warnings.push(format!(
                "cpu debug {name} (device dump \"{dd}\"): status {}, {} payload; no sample",
                h.status.name(),
                h.payload.name()
            ));
            return;
        }
        let mut sample = match CpuSample::decode(data) {
            Ok(s) => s,
            Err(e) => {
                self.warnings.push(format!(
                    "cpu debug {name} (device dump \"{dd}\"): {e}; no sample"
                ));
                return;
            }
        };
        let region: Vec<RegionSample> = self
            .samples
            .iter()
            .map(|s| RegionSample::of(&s.sample, &s.origin))
            .collect();
        let cpu = match captured_sample_for(&region, &sample) {
            Ok(cpu) => cpu,
            Err(why) => {
                let m = format!("cpu debug {name} (device dump \"{dd}\"): {why}");
                if region
                    .iter()
                    .any(|r| r.panic_sampled && r.mpidr == sample.mpidr)
                {
                    self.notes.push(m);
                } else {
                    self.warnings.push(m);
                }
                return;
            }
        };
        let Some(i) = self.samples.iter().position(|s| s.sample.cpu == cpu) else {
            return;
        };
        let region = &self.samples[i];
        let mpidr = sample.mpidr.unwrap_or_default();
        sample.cpu = cpu;
        self.notes.push(format!(
            "cpu debug {}: CPU {cpu} (MPIDR {mpidr:#x}) was not online in the capture kernel, \
             which sampled it as found (device dump \"{dd}\")",
            region.name
        ));
        self.samples[i] = Sample {
            name: region.name.clone(),
            sample,
            origin: RecordOrigin::of(h.flags, Some(dd)),
        };
    }

    /// Reads the trace of a sink record whose callback ran (status ok, truncated or partial).
    fn read_sink(
        &mut self,
        located: &Located<'_>,
        name: String,
        h: &cspd_format::RecordHeader,
        data: &'a [u8],
        origin: RecordOrigin,
    ) {
        if h.payload == PayloadType::Etr {
            self.add_etr_sink(located, name, h, data, origin);
            return;
        }
        if h.payload != PayloadType::Tmc {
            self.warnings.push(format!(
                "sink {name}: {} payload, not a TMC drain; no trace",
                h.payload.name()
            ));
            return;
        }
        match TmcRecord::parse(data) {
            Ok((tmc, trace)) => {
                if let Some(w) = drain_warning(&name, h, &tmc) {
                    self.warnings.push(w);
                }
                self.add_sink(Sink {
                    name,
                    trace: Cow::Borrowed(trace),
                    tmc: Some(tmc),
                    etr: None,
                    format: SinkFormat::Frames,
                    origin,
                });
            }
            Err(e) => self.warnings.push(format!("sink {name}: {e}; no trace")),
        }
    }

    /// In a dump committed while the kernel ran (plain kdump), the CPU a kdump capture kernel ran
    /// on: the one CPU with a CPU debug record of the crashed kernel's while the capture kernel
    /// sampled every other CPU (it samples the CPUs not online there, and `panic()` starts it on
    /// the panicking CPU). `None` otherwise.
    pub fn capture_kernel_cpu(&self) -> Option<u32> {
        if self.path != Some(DumpPath::Runtime) || self.samples.len() < 2 {
            return None;
        }
        let own: Vec<u32> = self
            .samples
            .iter()
            .filter(|s| !matches!(s.origin, RecordOrigin::CaptureKernel { .. }))
            .map(|s| s.sample.cpu)
            .collect();
        match own[..] {
            [cpu] => Some(cpu),
            _ => None,
        }
    }

    /// The trace unit stop points of CPU `cpu`'s ETM record ([`stop_points`]).
    pub fn stop_points(&self, cpu: u32) -> Vec<u64> {
        self.etms
            .iter()
            .find(|e| e.state.cpu == cpu)
            .map(|e| stop_points(&e.state).collect())
            .unwrap_or_default()
    }

    /// Whether the dump was committed while the kernel ran and no sink record has trace (the
    /// capture kernel handed over none): the trace was not collected.
    pub fn trace_not_collected(&self) -> bool {
        self.sinks.is_empty() && self.path == Some(DumpPath::Runtime)
    }

    /// Why no sink of the capture holds trace, for the outputs that need it, or `None` when one
    /// does: for a dump committed while the kernel ran without a sink record from the capture
    /// kernel, that the trace was not collected ([`NOT_COLLECTED`]).
    pub fn no_trace(&self) -> Option<String> {
        if self.sinks.iter().any(|s| !s.frames().is_empty()) {
            return None;
        }
        Some(if self.trace_not_collected() {
            NOT_COLLECTED.to_string()
        } else {
            "no trace in any sink".to_string()
        })
    }

    /// Reads an OpenCSD snapshot directory as OpenCSD's snapshot reader does: `snapshot.ini`
    /// names the device files and the trace metadata file; `trace.ini` names the buffers
    /// (`format` `coresight`, `dstream_coresight` or `source_data`; any other name is taken
    /// as frames, as OpenCSD does), binds sources to buffers (`[source_buffers]`) and cores to
    /// sources (`[core_trace_sources]`); a source's protocol is its device type before any
    /// `.` (`ETM4`, `ETM4.2`, `ETE`), its core's device type gives the architecture.
    ///
    /// Every file is read only if it is a regular file, and at most [`MAX_INI_BYTES`] (an ini
    /// file) or [`MAX_BUFFER_BYTES`] (a trace buffer). A source of another protocol
    /// (ETMv3, PTM) is skipped with a warning naming it; an STM source, which traces no CPU,
    /// is skipped with a note.
    pub fn from_snapshot_dir(dir: &Path) -> Result<Capture<'static>, CaptureError> {
        let ini = |name: &str| -> Result<Ini, CaptureError> {
            let path = dir.join(name);
            let bytes = read_capped(&path, MAX_INI_BYTES)?;
            Ok(Ini::parse(&String::from_utf8_lossy(&bytes)))
        };
        let snap = ini("snapshot.ini")?;
        let mut c = Capture::empty(Origin::Snapshot(dir.to_path_buf()));
        // Devices by name: (device type, registers, CPU dumps).
        let mut devices: Vec<(String, String, Option<crate::ini::Section>)> = Vec::new();
        let files: Vec<String> = snap
            .section("device_list")
            .map(|s| s.entries.iter().map(|(_, v)| v.clone()).collect())
            .unwrap_or_default();
        for file in &files {
            let dev = match ini(file) {
                Ok(d) => d,
                Err(e) => {
                    c.warnings.push(format!("{e}; device skipped"));
                    continue;
                }
            };
            let name = dev.get("device", "name").unwrap_or(file).to_string();
            let kind = dev.get("device", "type").unwrap_or("").to_string();
            for s in dev.sections.iter().filter(|s| s.name.starts_with("dump")) {
                let (Some(f), Some(address)) =
                    (s.get("file"), s.get("address").and_then(parse_number))
                else {
                    c.warnings.push(format!(
                        "{file}: [{}] needs a file and an address; skipped",
                        s.name
                    ));
                    continue;
                };
                let path = dir.join(f.trim_matches(|c| c == '"' || c == '\''));
                let Ok(meta) = fs::metadata(&path) else {
                    c.warnings
                        .push(format!("{}: memory image missing", path.display()));
                    continue;
                };
                let offset = s.get("offset").and_then(parse_number).unwrap_or(0);
                let length = s
                    .get("length")
                    .and_then(parse_number)
                    .unwrap_or(meta.len().saturating_sub(offset))
                    .min(meta.len().saturating_sub(offset));
                let m = MemImage {
                    address,
                    path,
                    offset,
                    length,
                };
                // Every core of a snapshot usually names the same images.
                if !c.memory.contains(&m) {
                    c.memory.push(m);
                }
            }
            if devices.iter().any(|(n, _, _)| *n == name) {
                c.warnings.push(format!(
                    "{file}: a second device named {name:?}; the last one is used"
                ));
                devices.retain(|(n, _, _)| *n != name);
            }
            devices.push((name, kind, dev.section("regs").cloned()));
        }
        let Some(meta) = snap.get("trace", "metadata") else {
            return Err(CaptureError::Snapshot(format!(
                "{}: snapshot.ini has no [trace] metadata= (the trace.ini file)",
                dir.display()
            )));
        };
        let trace = ini(meta)?;
        // source → buffer, core → source.
        let source_buffers: Vec<(String, String)> = trace
            .section("source_buffers")
            .map(|s| s.entries.clone())
            .unwrap_or_default();
        let core_of = |src: &str| -> Option<String> {
            trace
                .section("core_trace_sources")?
                .entries
                .iter()
                .rev()
                .find(|(_, s)| s == src)
                .map(|(core, _)| core.clone())
        };
        let buffers = trace.get("trace_buffers", "buffers").unwrap_or("");
        let mut seen_cpus = Vec::new();
        for b in buffers.split(',').map(str::trim).filter(|b| !b.is_empty()) {
            let Some(sec) = trace.section(b) else {
                c.warnings
                    .push(format!("{meta}: buffer section [{b}] missing"));
                continue;
            };
            let Some(name) = sec.get("name").map(str::to_string) else {
                c.warnings
                    .push(format!("{meta}: buffer [{b}] has no name; skipped"));
                continue;
            };
            let Some(file) = sec.get("file") else {
                c.warnings
                    .push(format!("{meta}: buffer {name} has no file; skipped"));
                continue;
            };
            let format = match sec.get("format").unwrap_or("") {
                "source_data" => SinkFormat::Single,
                "dstream_coresight" => SinkFormat::Tpiu,
                "coresight" => SinkFormat::Frames,
                other => {
                    c.notes.push(format!(
                        "buffer {name}: format {other:?} read as CoreSight frames, as OpenCSD does"
                    ));
                    SinkFormat::Frames
                }
            };
            let bytes = read_capped(&dir.join(file), MAX_BUFFER_BYTES)?;
            for (src, _) in source_buffers.iter().filter(|(_, buf)| *buf == name) {
                let Some((_, kind, regs)) = devices.iter().find(|(n, _, _)| n == src) else {
                    c.warnings
                        .push(format!("{meta}: source {src} has no device file; skipped"));
                    continue;
                };
                let proto = kind.split('.').next().unwrap_or("");
                let protocol = match proto {
                    "ETM4" => Protocol::Etmv4,
                    "ETE" => Protocol::Ete,
                    "STM" => {
                        c.notes.push(format!(
                            "source {src}: STM (software trace, no CPU) is not decoded; skipped"
                        ));
                        continue;
                    }
                    "ETM3" | "PTM" | "PFT" => {
                        c.warnings.push(format!(
                            "source {src}: {kind} trace (32-bit cores) is not supported by \
                             csdump; skipped"
                        ));
                        continue;
                    }
                    _ => {
                        c.warnings.push(format!(
                            "source {src}: device type {kind:?} is not a trace protocol OpenCSD \
                             knows; skipped"
                        ));
                        continue;
                    }
                };
                let Some(core) = core_of(src) else {
                    c.warnings.push(format!(
                        "source {src}: no core in [core_trace_sources]; skipped"
                    ));
                    continue;
                };
                let cpu = trailing_number(&core)
                    .filter(|n| !seen_cpus.contains(n))
                    .unwrap_or_else(|| (0..).find(|n| !seen_cpus.contains(n)).unwrap_or(0));
                seen_cpus.push(cpu);
                if let Some((_, core_type, _)) = devices.iter().find(|(n, _, _)| *n == core) {
                    if crate::cores::core_arch(core_type).is_none() {
                        c.notes.push(format!(
                            "core {core}: type {core_type:?} unknown to OpenCSD; decoded as ARMv8-A"
                        ));
                    }
                    c.core_types.push((cpu, core_type.clone()));
                }
                match source_state(regs.as_ref(), cpu, protocol) {
                    Ok(state) => c.add_etm(Etm {
                        name: src.clone(),
                        state,
                        protocol,
                        origin: RecordOrigin::Snapshot,
                    }),
                    Err(missing) => c
                        .warnings
                        .push(format!("source {src}: register {missing} missing; skipped")),
                }
                if format == SinkFormat::Single {
                    // One source per raw stream, as OpenCSD decodes it.
                    break;
                }
            }
            c.add_sink(Sink {
                name,
                trace: Cow::Owned(bytes),
                tmc: None,
                etr: None,
                format,
                origin: RecordOrigin::Snapshot,
            });
        }
        // The kernel text, if a memory image holds kernel addresses.
        c.kernel.text = c
            .memory
            .iter()
            .map(|m| m.address)
            .filter(|&a| a >= KERNEL_SPACE)
            .min();
        if c.sinks.is_empty() {
            return Err(CaptureError::Snapshot(format!(
                "{}: no trace buffer in {meta}",
                dir.display()
            )));
        }
        c.finish();
        Ok(c)
    }

    /// Adds the trace of an ETR record: copied in the record, or left in the buffer and found
    /// in the input ([`etr_trace`]).
    fn add_etr_sink(
        &mut self,
        located: &Located<'_>,
        name: String,
        h: &cspd_format::RecordHeader,
        data: &[u8],
        origin: RecordOrigin,
    ) {
        let (etr, copied) = match EtrRecord::parse(data) {
            Ok(x) => x,
            Err(e) => {
                self.warnings.push(format!("sink {name}: {e}; no trace"));
                return;
            }
        };
        if let Some(w) = etr_warning(&name, h, &etr) {
            self.warnings.push(w);
        }
        match etr_trace(located, &etr, copied) {
            Ok(Some(t)) => {
                self.notes.push(format!(
                    "sink {name}: {} bytes of ETR trace from {}{}",
                    t.bytes.len(),
                    t.from,
                    if t.barrier {
                        " (starts inside the stream: barrier packet over its first frame)"
                    } else {
                        ""
                    }
                ));
                self.add_sink(Sink {
                    name,
                    trace: Cow::Owned(t.bytes),
                    tmc: None,
                    etr: Some(etr),
                    format: SinkFormat::Frames,
                    origin,
                });
            }
            Ok(None) => {}
            Err(why) => self.warnings.push(format!("sink {name}: {why}; no trace")),
        }
    }

    fn add_sink(&mut self, sink: Sink<'a>) {
        let rem = sink.trace.len() % CS_FRAME_LEN;
        if rem != 0 {
            self.warnings.push(format!(
                "sink {}: {} trace bytes is not a whole number of {CS_FRAME_LEN}-byte frames; \
                 the last {rem} bytes are left out of perf.data and the snapshot",
                sink.name,
                sink.trace.len()
            ));
        }
        self.sinks.push(sink);
    }

    fn add_etm(&mut self, etm: Etm) {
        let s = &etm.state;
        let name = &etm.name;
        if s.outcome == SaveOutcome::NotEtmV4
            || s.devarch & etm4x::DEVARCH_ID_MASK != etm4x::DEVARCH_ETMV4
        {
            self.warnings.push(format!(
                "source {name} (CPU {}): unknown ETM architecture (TRCDEVARCH {:#010x}); skipped",
                s.cpu, s.devarch
            ));
            return;
        }
        if !s.regs_valid() {
            self.warnings.push(format!(
                "source {name} (CPU {}): registers not saved ({}); skipped",
                s.cpu,
                s.outcome.name()
            ));
            return;
        }
        let id = etm.trace_id();
        if !(etm4x::TRACE_ID_MIN..=etm4x::TRACE_ID_MAX).contains(&id) {
            self.warnings.push(format!(
                "source {name} (CPU {}): invalid trace ID {id:#x}; skipped",
                s.cpu
            ));
            return;
        }
        if let Some(other) = self.etms.iter().find(|e| e.state.cpu == s.cpu) {
            self.warnings.push(format!(
                "source {name}: CPU {} already has a trace unit ({}); skipped",
                s.cpu, other.name
            ));
            return;
        }
        if let Some(other) = self.etms.iter().find(|e| e.trace_id() == id) {
            self.warnings.push(format!(
                "source {name} (CPU {}): trace ID {id:#x} already used by {}; skipped",
                s.cpu, other.name
            ));
            return;
        }
        if s.outcome != SaveOutcome::Ok {
            self.warnings.push(format!(
                "source {name} (CPU {}): save outcome {}; registers used anyway",
                s.cpu,
                s.outcome.name()
            ));
        }
        self.etms.push(etm);
    }

    fn finish(&mut self) {
        if self.etms.is_empty() {
            self.warnings.push(
                "no usable ETMv4 source record: the trace cannot be decoded \
                 (no metadata.bin, perf.data or snapshot device files)"
                    .into(),
            );
        }
        if self.sinks.is_empty() {
            self.warnings.push(if self.trace_not_collected() {
                format!("no sink has trace: {NOT_COLLECTED}")
            } else {
                "no trace sink record".into()
            });
        }
    }

    /// Returns the CPUs that have an ETM, a sample, or panicked; the panic CPU first.
    pub fn cpus(&self) -> Vec<u32> {
        let mut set = BTreeSet::new();
        set.extend(self.etms.iter().map(|e| e.state.cpu));
        set.extend(self.samples.iter().map(|s| s.sample.cpu));
        set.extend(self.panic_cpu);
        let mut v: Vec<u32> = set.into_iter().collect();
        if let Some(p) = self.panic_cpu {
            v.retain(|&c| c != p);
            v.insert(0, p);
        }
        v
    }

    /// Returns the ETM that emits trace ID `id`.
    pub fn etm_for_id(&self, id: u8) -> Option<&Etm> {
        self.etms.iter().find(|e| e.trace_id() == id)
    }

    /// Returns the address perf and the report use for `_text` (runtime).
    pub fn text_addr(&self) -> u64 {
        self.kernel
            .text
            .unwrap_or(DEFAULT_TEXT.wrapping_add(self.kernel.kaslr_offset))
    }
}

/// Lowest address of the arm64 kernel half (any VA size).
pub const KERNEL_SPACE: u64 = 0xFFFF_0000_0000_0000;
/// `_text` of an arm64 kernel without KASLR (48-bit VA, `KIMAGE_VADDR`), used when the input
/// names none.
pub const DEFAULT_TEXT: u64 = 0xFFFF_8000_8000_0000;

fn kernel_info(id: &Identity) -> KernelInfo {
    KernelInfo {
        release: Some(String::from_utf8_lossy(id.release_bytes()).into_owned()),
        build_id: id.build_id_bytes().to_vec(),
        kaslr_offset: id.kaslr_offset,
        text: (id.text_addr != 0).then_some(id.text_addr),
        kimage_voffset: (id.kimage_voffset != 0).then_some(id.kimage_voffset),
    }
}

/// `TRCCONFIGR(0x004)` → `TRCCONFIGR`.
fn reg_name(k: &str) -> &str {
    k.split('(').next().unwrap_or(k).trim()
}

/// `cpu_12` → 12.
fn trailing_number(s: &str) -> Option<u32> {
    let digits: String = s
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Describes a record's failure: its status and the errno its callback returned.
fn failure(status: &str, error: i32) -> String {
    let errno = match -error {
        0 => return status.to_string(),
        1 => "EPERM: switched off",
        5 => "EIO",
        13 => "EACCES",
        28 => "ENOSPC",
        110 => "ETIMEDOUT",
        _ => return format!("{status} ({error})"),
    };
    format!("{status} ({errno})")
}

/// Returns a warning when a TMC drain did not end cleanly, with how far it got.
fn drain_warning(
    name: &str,
    h: &cspd_format::RecordHeader,
    tmc: &TmcRecordHeader,
) -> Option<String> {
    use cspd_format::tmc::TmcOutcome;
    let outcome = tmc.outcome();
    if h.status == RecordStatus::Ok
        && matches!(
            outcome,
            Some(TmcOutcome::Complete | TmcOutcome::NotEnabled | TmcOutcome::NotCircularBuffer)
        )
    {
        return None;
    }
    let what = outcome.map_or_else(
        || format!("unknown outcome {}", tmc.outcome_code),
        |o| o.name().to_string(),
    );
    Some(format!(
        "sink {name}: drain ended {what} ({}) after {} words read of RSZ {}; {} trace bytes kept",
        failure(h.status.name(), h.error),
        tmc.words_read,
        tmc.rsz,
        tmc.trace_len
    ))
}

/// Returns a warning when an ETR's panic callback did not end cleanly, with what it recorded.
fn etr_warning(name: &str, h: &cspd_format::RecordHeader, etr: &EtrRecordHeader) -> Option<String> {
    let outcome = etr.outcome();
    if h.status == RecordStatus::Ok
        && matches!(
            outcome,
            Some(EtrOutcome::Complete | EtrOutcome::NotEnabled | EtrOutcome::NotCircularBuffer)
        )
    {
        return None;
    }
    let what = outcome.map_or_else(
        || format!("unknown outcome {}", etr.outcome_code),
        |o| o.name().to_string(),
    );
    Some(format!(
        "sink {name}: ETR record ended {what} ({}): RSZ {:#x}, STS {:#x}, RWP {:#x}, DBA {:#x}; {} of {} trace bytes copied{}",
        failure(h.status.name(), h.error),
        etr.rsz,
        etr.sts,
        etr.rwp,
        etr.dba,
        etr.trace_len,
        etr.data_len,
        if etr.flags & ETR_REC_IN_PLACE != 0 {
            " (the rest left in place)"
        } else {
            ""
        }
    ))
}

/// An ETR's trace as the decoders take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtrTrace {
    /// The trace, oldest byte first, the barrier packet over its first frame when it starts
    /// inside the stream.
    pub bytes: Vec<u8>,
    /// Where it was read from, in words for the user.
    pub from: String,
    /// The barrier packet was put over the first frame (the buffer wrapped, or only its newest
    /// bytes were copied).
    pub barrier: bool,
}

/// Returns the trace of an ETR record (its header `h`, and `copied`, the bytes behind it).
///
/// A buffer copied at panic is in the record, oldest byte first. A buffer left in reserved
/// memory ([`ETR_REC_IN_PLACE`]) is looked for, `RSZ` words from its physical address, in the
/// trace buffers attached behind a region file (`/dev/coresight_panic_dump` after a warm reboot), in the vmcore's
/// device dumps (`coresight_tracedata@ADDRESS`, which a kdump capture kernel adds for a `no-map`
/// region), then in the vmcore's memory; it is unwrapped as the record's registers say
/// (`STS.Full`: the oldest byte at `RWP`, else from `DBA` to `RWP`). Either way, a trace that
/// starts inside the stream gets the barrier packet over its first 16 bytes, as the C driver
/// writes it, so that decoders synchronise on the frames after it.
///
/// `Ok(None)` when the record holds no trace to decode and that is no damage (capture was off);
/// `Err` says why the trace cannot be had.
pub fn etr_trace(
    located: &Located<'_>,
    h: &EtrRecordHeader,
    copied: &[u8],
) -> Result<Option<EtrTrace>, String> {
    match h.outcome() {
        Some(EtrOutcome::NotEnabled | EtrOutcome::NotCircularBuffer) => return Ok(None),
        Some(o) if !o.has_trace() => return Err(format!("ETR record outcome {o}")),
        Some(_) => {}
        None => return Err(format!("unknown ETR outcome {}", h.outcome_code)),
    }
    let layout = h
        .layout()
        .map_err(|e| format!("the recorded registers do not locate the trace: {e}"))?;
    let (mut bytes, from, mid_stream) = if h.flags & ETR_REC_IN_PLACE == 0 {
        (
            copied.to_vec(),
            "the record (a copy of the buffer)".to_string(),
            layout.wrapped || (copied.len() as u64) < layout.len,
        )
    } else {
        let (buffer, from) = find_buffer(located, h.buf_paddr, layout.size)?;
        let n = usize::try_from(layout.len).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| format!("cannot allocate {:#x} bytes of trace", layout.len))?;
        out.resize(n, 0);
        // The barrier too when it wrapped (put again below, the same words).
        layout.copy_oldest_first(&buffer, &mut out).ok_or_else(|| {
            format!(
                "the buffer at {:#x} holds {:#x} bytes, the ETR's is {:#x}",
                h.buf_paddr,
                buffer.len(),
                layout.size
            )
        })?;
        (out, from, layout.wrapped)
    };
    let barrier = mid_stream && bytes.len() >= CS_BARRIER_LEN;
    if barrier {
        for chunk in bytes[..CS_BARRIER_LEN].chunks_exact_mut(4) {
            chunk.copy_from_slice(&CS_BARRIER_WORD.to_le_bytes());
        }
    }
    Ok(Some(EtrTrace {
        bytes,
        from,
        barrier,
    }))
}

/// Finds `len` bytes of a reserved trace buffer at physical address `paddr` in the input.
fn find_buffer(located: &Located<'_>, paddr: u64, len: u64) -> Result<(Vec<u8>, String), String> {
    let n = usize::try_from(len).map_err(|_| format!("a buffer of {len:#x} bytes"))?;
    let inside = |base: u64, size: u64| {
        paddr
            .checked_sub(base)
            .filter(|off| off.checked_add(len).is_some_and(|end| end <= size))
    };
    for a in &located.attachments {
        if let Some(off) = inside(a.paddr, a.data.len() as u64) {
            let off = off as usize;
            return Ok((
                a.data[off..off + n].to_vec(),
                format!("the buffer at {paddr:#x} attached behind the region (read back after the reboot)"),
            ));
        }
    }
    let Some(core) = located.core.as_ref() else {
        return Err(format!(
            "the trace stayed in the reserved buffer at {paddr:#x} ({len:#x} bytes), which a region file does not hold: after a warm reboot, take /dev/coresight_panic_dump, which carries it"
        ));
    };
    for dd in core.device_dumps() {
        let Some(base) = parse_tracedata_dump_name(dd.name.as_bytes()) else {
            continue;
        };
        if let Some(off) = inside(base, dd.data_size) {
            let bytes = core
                .read_file(dd.data_offset + off, n, "trace buffer device dump")
                .map_err(|e| e.to_string())?;
            return Ok((bytes, format!("the vmcore device dump \"{}\"", dd.name)));
        }
    }
    match core.read_phys(paddr, len) {
        Ok(bytes) => Ok((
            bytes,
            format!("the vmcore's memory at physical address {paddr:#x}"),
        )),
        Err(e) => Err(format!(
            "the trace stayed in the reserved buffer at {paddr:#x} ({len:#x} bytes), which this vmcore does not hold ({e}): a no-map tracedata region reaches a kdump vmcore only as the device dump {} that the capture kernel adds (it needs CONFIG_CORESIGHT_PANIC_DUMP and CONFIG_PROC_VMCORE_DEVICE_DUMP and the region's device-tree node)",
            tracedata_name(paddr)
        )),
    }
}

/// The name of the device dump a capture kernel hands the record of sink `name` over in.
pub fn capture_dump_name(name: &str) -> String {
    let mut b = [0u8; cspd_format::capture::CAPTURE_DUMP_NAME_MAX];
    match cspd_format::capture::capture_dump_name(name.as_bytes(), &mut b) {
        Some(n) => String::from_utf8_lossy(&b[..n]).into_owned(),
        None => cspd_format::capture::CAPTURE_DUMP_PREFIX.to_string(),
    }
}

/// The device dump name of the reserved buffer at `paddr`.
fn tracedata_name(paddr: u64) -> String {
    let mut b = [0u8; cspd_format::etr::TRACEDATA_DUMP_NAME_MAX];
    let n = cspd_format::etr::tracedata_dump_name(paddr, &mut b).unwrap_or(0);
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// Largest ini file of a snapshot csdump reads (1 MiB).
pub const MAX_INI_BYTES: u64 = 1 << 20;
/// Largest trace buffer file of a snapshot csdump reads (1 GiB).
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// Reads `path` if it is a regular file of at most `cap` bytes.
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, CaptureError> {
    let io = |err| CaptureError::Io {
        path: path.to_path_buf(),
        err,
    };
    let f = fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(CaptureError::Snapshot(format!(
            "{}: not a regular file; not read",
            path.display()
        )));
    }
    if meta.len() > cap {
        return Err(CaptureError::Snapshot(format!(
            "{}: {} bytes, more than the {cap} csdump reads from a snapshot file",
            path.display(),
            meta.len()
        )));
    }
    let mut v = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may have grown since: read no more than the cap.
    f.take(cap).read_to_end(&mut v).map_err(io)?;
    Ok(v)
}

/// The registers of a snapshot source, as OpenCSD's snapshot reader takes them: TRCCONFIGR,
/// TRCTRACEIDR, TRCIDR0 and TRCIDR2 must be there; TRCIDR1 defaults to 0x4100F403, the
/// others to 0. Returns the name of a missing register.
fn source_state(
    regs: Option<&crate::ini::Section>,
    cpu: u32,
    protocol: Protocol,
) -> Result<SavedState, &'static str> {
    let reg = |n: &str| -> Option<u32> {
        regs?
            .entries
            .iter()
            .find(|(k, _)| reg_name(k).eq_ignore_ascii_case(n))
            .and_then(|(_, v)| parse_number(v.trim_matches(|c| c == '"' || c == '\'')))
            // CAST: registers are 32-bit; wider values are cut.
            .map(|v| v as u32)
    };
    let need = |n: &'static str| reg(n).ok_or(n);
    let mut s = SavedState {
        cpu,
        outcome: SaveOutcome::Ok,
        flags: cspd_format::etm4x::SAVED_REGS_VALID,
        trcconfigr: need("TRCCONFIGR")?,
        trctraceidr: need("TRCTRACEIDR")?,
        authstatus: reg("TRCAUTHSTATUS").unwrap_or(0),
        devarch: match protocol {
            Protocol::Etmv4 => etm4x::DEVARCH_ETMV4,
            Protocol::Ete => reg("TRCDEVARCH").unwrap_or(0x4770_5A13),
        },
        ..SavedState::default()
    };
    for n in 0..cspd_format::etm4x::NR_IDR {
        let v = match n {
            0 => need("TRCIDR0")?,
            2 => need("TRCIDR2")?,
            1 => reg("TRCIDR1").unwrap_or(0x4100_F403),
            _ => reg(&format!("TRCIDR{n}")).unwrap_or(0),
        };
        if let Some(slot) = s.idr.get_mut(n) {
            *slot = v;
        }
    }
    Ok(s)
}

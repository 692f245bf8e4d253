//! What a region holds, checked record by record: the data behind `info`, `extract` and
//! `summary.json`.

use std::fmt::Write as _;

use cspd_format::cpu_debug::CpuSample;
use cspd_format::etr::EtrRecord;
use cspd_format::Commit;
use cspd_format::FormatError;
use cspd_format::Identity;
use cspd_format::PanicInfo;
use cspd_format::PayloadType;
use cspd_format::Phase;
use cspd_format::Phases;
use cspd_format::Record;
use cspd_format::RecordKind;
use cspd_format::RecordStatus;
use cspd_format::CPU_NONE;
use cspd_format::RECORD_HEADER_SIZE;
use serde::Serialize;

use crate::capture::captured_sample_for;
use crate::capture::DumpPath;
use crate::capture::RecordOrigin;
use crate::capture::RegionSample;
use crate::capture::NOT_COLLECTED;
use crate::modules::render_modules;
use crate::modules::ModuleList;
use crate::modules::ModulesReport;
use crate::region::FoundBy;
use crate::region::InputKind;
use crate::region::Located;

/// Formats an address as `0x…` hex.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The container header, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerInfo {
    /// Format version.
    pub version: u16,
    /// Region size in bytes.
    pub region_size: u64,
    /// Boot id, hex.
    pub boot_id: String,
    /// Record stamp of that boot, hex.
    pub stamp: String,
    /// Dump sequence number.
    pub sequence: u64,
    /// Offset of the first record.
    pub first_record: u32,
}

/// One record (or a damaged one whose header could still be read).
#[derive(Debug, Clone, Serialize)]
pub struct RecordInfo {
    /// Position in the report's record list.
    pub index: usize,
    /// Region offset of the record header.
    pub offset: usize,
    /// File offset of the record header, when the region is contiguous in the file.
    pub file_offset: Option<u64>,
    /// Record kind (`sink`, `source`, …).
    pub kind: String,
    /// Callback status (`ok`, `not-run`, …).
    pub status: String,
    /// Layout of the data (`tmc`, `etr`, `etm4x`, `cpu-debug`, `opaque`).
    pub payload: String,
    /// Device name.
    pub name: String,
    /// CPU, if the record belongs to one.
    pub cpu: Option<u32>,
    /// Negative errno the callback returned, or 0.
    pub error: i32,
    /// Capacity of the data area.
    pub capacity: u32,
    /// Bytes written.
    pub length: u32,
    /// Whether the record passed every check (header CRC, data CRC, stamp).
    pub crc_ok: bool,
    /// File name `extract` writes the data to (`None` for a damaged record, unless salvaged).
    pub file: Option<String>,
    /// What is wrong with the record, if anything.
    pub problem: Option<String>,
    /// Region offset of the data.
    #[serde(skip)]
    pub data_offset: usize,
    /// Whether the data can be salvaged (the header is readable).
    #[serde(skip)]
    pub salvageable: bool,
    /// The record kind.
    #[serde(skip)]
    pub record_kind: RecordKind,
    /// Which path wrote the record, for a trace sink, trace source or CPU debug record that
    /// was written (absent for one that was not, and for the other kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<RecordOrigin>,
    /// An ETR sink's trace, as the decoders take it (copied in the record, or found where the
    /// ETR left it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceInfo>,
}

/// Where an ETR record's trace is, and the file `extract` writes it to.
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    /// The file `extract` writes (`<index>-sink-<name>.trace.bin`), when the trace was found.
    pub file: Option<String>,
    /// Bytes of trace.
    pub bytes: u64,
    /// Where it was read from.
    pub from: Option<String>,
    /// It starts inside the stream and carries the barrier packet over its first frame.
    pub barrier: bool,
    /// Why it could not be had.
    pub problem: Option<String>,
}

/// A kdump capture kernel's device dump (`coresight_capture:<name>`): the records it handed
/// over, and whether they are used.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureDumpInfo {
    /// The device dump's name.
    pub name: String,
    /// Bytes of data in the note.
    pub size: u64,
    /// File offset of its data, when contiguous in the input file.
    pub file_offset: Option<u64>,
    /// Why it is not used (a bad CRC, truncated, not a container), when it is damaged.
    pub problem: Option<String>,
    /// Its records but the commit (offsets within its container), each with its origin and,
    /// in `problem`, why it is not used when the region's record of that sink wins.
    pub records: Vec<RecordInfo>,
}

/// The identity record, decoded.
#[derive(Debug, Clone, Serialize)]
pub struct IdentityInfo {
    /// Kernel release.
    pub release: String,
    /// Build id, hex.
    pub build_id: String,
    /// KASLR offset, hex.
    pub kaslr_offset: String,
    /// Address of `_text`, hex.
    pub text: String,
    /// `PAGE_OFFSET`, hex.
    pub page_offset: String,
    /// `memstart_addr`, hex.
    pub memstart: String,
    /// `kimage_voffset`, hex.
    pub kimage_voffset: String,
    /// Region physical address, hex.
    pub region_paddr: String,
    /// Region size.
    pub region_size: u64,
}

impl From<&Identity> for IdentityInfo {
    fn from(id: &Identity) -> Self {
        Self {
            release: String::from_utf8_lossy(id.release_bytes()).into_owned(),
            build_id: hex_bytes(id.build_id_bytes()),
            kaslr_offset: hex(id.kaslr_offset),
            text: hex(id.text_addr),
            page_offset: hex(id.page_offset),
            memstart: hex(id.memstart),
            kimage_voffset: hex(id.kimage_voffset),
            region_paddr: hex(id.region_paddr),
            region_size: id.region_size,
        }
    }
}

/// The panic info record, decoded.
#[derive(Debug, Clone, Serialize)]
pub struct PanicReport {
    /// CPU that panicked.
    pub cpu: Option<u32>,
    /// The message (lossy UTF-8).
    pub message: String,
    /// Whether the kernel cut the message.
    pub truncated: bool,
}

/// One phase of the panic path, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseInfo {
    /// The phase (`stop-sources`, `sample-cpus`, `drain-sinks`, `other`, `commit`).
    pub phase: &'static str,
    /// Whether it ran.
    pub ran: bool,
    /// How long it took, in microseconds (absent when it did not run or the counter frequency
    /// is unknown).
    pub duration_us: Option<f64>,
    /// When it started, in microseconds after the panic notifier started.
    pub start_us: Option<f64>,
    /// Callbacks it ran.
    pub callbacks: u32,
    /// Callbacks that returned an error.
    pub errors: u32,
}

/// The phase times record: how long each phase of the panic path took.
#[derive(Debug, Clone, Serialize)]
pub struct PhasesReport {
    /// Frequency of the counter the kernel read, in Hz (0: unknown).
    pub frequency_hz: u64,
    /// From the panic notifier's start to the end of the last phase, in microseconds.
    pub total_us: Option<f64>,
    /// Each phase, in the order they ran.
    pub phases: Vec<PhaseInfo>,
}

fn us(ns: Option<u64>) -> Option<f64> {
    // CAST: durations in nanoseconds are far below 2^53.
    ns.map(|n| (n as f64 / 100.0).round() / 10.0)
}

impl From<&Phases> for PhasesReport {
    fn from(p: &Phases) -> Self {
        Self {
            frequency_hz: p.frequency,
            total_us: us(p.total_ns()),
            phases: Phase::ALL
                .iter()
                .map(|&phase| {
                    let t = p.get(phase);
                    let since_entry = (p.frequency != 0 && t.ran()).then(|| {
                        let ticks = u128::from(t.start.saturating_sub(p.entry));
                        u64::try_from(ticks * 1_000_000_000 / u128::from(p.frequency))
                            .unwrap_or(u64::MAX)
                    });
                    PhaseInfo {
                        phase: phase.name(),
                        ran: t.ran(),
                        duration_us: us(p.duration_ns(phase)),
                        start_us: us(since_entry),
                        callbacks: t.callbacks,
                        errors: t.errors,
                    }
                })
                .collect(),
        }
    }
}

/// Renders the phase times, one line per phase, for `info` and `report`.
pub fn render_phases(p: &PhasesReport) -> String {
    let mut s = String::new();
    let show = |v: Option<f64>| v.map_or("?".to_string(), |us| format!("{us:.1} us"));
    let _ = writeln!(
        s,
        "panic path: {} in all (counter at {} Hz)",
        show(p.total_us),
        p.frequency_hz
    );
    for ph in &p.phases {
        if !ph.ran {
            let _ = writeln!(s, "  {:<13} did not run", ph.phase);
            continue;
        }
        let _ = writeln!(
            s,
            "  {:<13} {:>12}  ({} callback{}{})",
            ph.phase,
            show(ph.duration_us),
            ph.callbacks,
            if ph.callbacks == 1 { "" } else { "s" },
            if ph.errors > 0 {
                format!(", {} failed", ph.errors)
            } else {
                String::new()
            }
        );
    }
    s
}

/// State of the commit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitState {
    /// Present and consistent with the records.
    Ok,
    /// Absent: the dump was torn or never written.
    Missing,
    /// Present but failing a check.
    Corrupt,
}

/// The commit record, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct CommitInfo {
    /// Its state.
    pub state: CommitState,
    /// Region offset of the commit record (or where the chain ended without one).
    pub offset: Option<usize>,
    /// Records the commit counts.
    pub records: Option<u32>,
    /// Region bytes in use, per the commit.
    pub used_bytes: Option<u64>,
    /// What is wrong, if anything.
    pub problem: Option<String>,
}

/// A problem found in the region.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// Short stable name (`data-crc`, `missing-commit`, …).
    pub code: &'static str,
    /// Region offset.
    pub offset: Option<usize>,
    /// File offset, when the region is contiguous in the file.
    pub file_offset: Option<u64>,
    /// Full description.
    pub message: String,
}

/// Everything csdump knows about one dump.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Version of csdump that wrote the report.
    pub csdump_version: &'static str,
    /// Input file name.
    pub input: String,
    /// Input kind.
    pub input_kind: InputKind,
    /// How the region was found.
    pub found_by: FoundBy,
    /// Physical address of the region, hex, for a vmcore.
    pub region_paddr: Option<String>,
    /// File offset of the region, when contiguous in the file.
    pub region_file_offset: Option<u64>,
    /// `KERNELOFFSET` from vmcoreinfo, hex.
    pub kerneloffset: Option<String>,
    /// The vmcore's format as read (container, page compression, dump level, flattened, gzip).
    pub input_format: Option<String>,
    /// Notes about the input (a truncated segment, no vmcoreinfo…).
    pub input_warnings: Vec<String>,
    /// Facts about the input that are not damage (pages the dump's filter excluded, read as
    /// zeros; the device dump preferred over memory).
    pub input_notes: Vec<String>,
    /// The container header.
    pub container: ContainerInfo,
    /// Every record but free slots and the commit, in region order.
    pub records: Vec<RecordInfo>,
    /// The identity record, decoded.
    pub identity: Option<IdentityInfo>,
    /// The panic info record, decoded.
    pub panic: Option<PanicReport>,
    /// The phase times record, decoded (format version 3; absent before, or when the panic
    /// path did not reach it).
    pub phases: Option<PhasesReport>,
    /// The loadable modules and where they were loaded (the `modules` record; absent in a dump
    /// without one).
    pub modules: Option<ModulesReport>,
    /// The commit record.
    pub commit: CommitInfo,
    /// Which path committed the dump (absent without a sound commit): the panic path, or the
    /// kernel while it ran (no panic-time step ran).
    pub path: Option<DumpPath>,
    /// The capture kernel's device dumps, in the input's order.
    pub captures: Vec<CaptureDumpInfo>,
    /// Why no sink has trace, when the dump was committed while the kernel ran and neither the
    /// region nor a capture kernel's device dump holds a drained sink record.
    pub no_trace: Option<String>,
    /// Every problem found, in region order.
    pub problems: Vec<Problem>,
    /// Whether the dump is complete and every check passed.
    pub clean: bool,
}

/// File name `extract` gives a record's data.
pub fn record_file_name(index: usize, kind: RecordKind, name: &[u8], corrupt: bool) -> String {
    let suffix = if corrupt { ".corrupt.bin" } else { ".bin" };
    format!(
        "{index:02}-{}-{}{suffix}",
        kind.name(),
        crate::output::sanitize(name)
    )
}

fn is_commit_error(e: &FormatError) -> bool {
    matches!(
        e,
        FormatError::MissingCommit { .. }
            | FormatError::CommitCrc { .. }
            | FormatError::CommitHeadersCrc { .. }
            | FormatError::CommitCount { .. }
            | FormatError::CommitMismatch { .. }
    )
}

/// Checks the region of `located` and builds the report.
///
/// An error in the container header is fatal and returned; an error in a record is reported
/// in the record and in `problems`, and the other records are still read.
pub fn analyze(input: &str, located: &Located<'_>) -> Result<Summary, FormatError> {
    let region = cspd_format::parse_region(&located.bytes)?;
    let h = region.header();
    let mut report = Summary {
        csdump_version: env!("CARGO_PKG_VERSION"),
        input: input.to_string(),
        input_kind: located.input_kind,
        found_by: located.found_by.clone(),
        region_paddr: located.paddr.map(hex),
        region_file_offset: located.file_offset,
        kerneloffset: located.kerneloffset.map(hex),
        input_format: located.format.clone(),
        input_warnings: located.warnings.clone(),
        input_notes: located.notes.clone(),
        container: ContainerInfo {
            version: h.version,
            region_size: h.region_size,
            boot_id: hex_bytes(&h.boot_id),
            stamp: hex(h.stamp),
            sequence: h.sequence,
            first_record: h.first_record,
        },
        records: Vec::new(),
        identity: None,
        panic: None,
        phases: None,
        modules: None,
        commit: CommitInfo {
            state: CommitState::Missing,
            offset: None,
            records: None,
            used_bytes: None,
            problem: None,
        },
        path: None,
        captures: Vec::new(),
        no_trace: None,
        problems: Vec::new(),
        clean: false,
    };
    let mut region_samples: Vec<RegionSample> = Vec::new();
    let record_info = |index: usize, r: &Record<'_>, problem: Option<&FormatError>| RecordInfo {
        index,
        offset: r.offset,
        file_offset: located.file_offset_of(r.offset),
        kind: r.header.kind.name().into(),
        status: r.header.status.name().into(),
        payload: r.header.payload.name().into(),
        name: String::from_utf8_lossy(r.header.name_bytes()).into_owned(),
        cpu: (r.header.cpu != CPU_NONE).then_some(r.header.cpu),
        error: r.header.error,
        capacity: r.header.capacity,
        length: r.header.length,
        crc_ok: problem.is_none(),
        file: problem
            .is_none()
            .then(|| record_file_name(index, r.header.kind, r.header.name_bytes(), false)),
        problem: problem.map(|e| e.to_string()),
        data_offset: r.offset + RECORD_HEADER_SIZE,
        salvageable: true,
        record_kind: r.header.kind,
        trace: None,
        origin: record_origin(r, None),
    };
    for item in region.records() {
        match item {
            Ok(r) if r.header.kind == RecordKind::Commit => {
                let c = Commit::decode(r.data).ok();
                report.commit = CommitInfo {
                    state: CommitState::Ok,
                    offset: Some(r.offset),
                    records: c.map(|c| c.records),
                    used_bytes: c.map(|c| c.used_bytes),
                    problem: None,
                };
                report.path = Some(DumpPath::of_commit(r.header.flags));
            }
            Ok(r) => {
                match r.header.kind {
                    RecordKind::Identity if report.identity.is_none() => {
                        match Identity::decode(r.data) {
                            Ok(id) => report.identity = Some(IdentityInfo::from(&id)),
                            Err(e) => report.problems.push(problem(
                                located,
                                Some(r.offset),
                                "bad-identity",
                                format!("offset {:#x}: identity payload: {e}", r.offset),
                            )),
                        }
                    }
                    RecordKind::Phases
                        if report.phases.is_none() && r.header.status == RecordStatus::Ok =>
                    {
                        match Phases::decode(r.data) {
                            Ok(p) => report.phases = Some(PhasesReport::from(&p)),
                            Err(e) => report.problems.push(problem(
                                located,
                                Some(r.offset),
                                "bad-phases",
                                format!("offset {:#x}: phase times payload: {e}", r.offset),
                            )),
                        }
                    }
                    RecordKind::Modules if report.modules.is_none() => {
                        report.modules = Some(match ModuleList::decode(r.data) {
                            Ok(l) => ModulesReport::from(&l),
                            Err(e) => {
                                report.problems.push(problem(
                                    located,
                                    Some(r.offset),
                                    "bad-modules",
                                    format!("offset {:#x}: module list payload: {e}", r.offset),
                                ));
                                ModulesReport::damaged(&e)
                            }
                        });
                    }
                    // Not run: the panic path did not run (a dump committed while the
                    // kernel ran), no message to decode.
                    RecordKind::PanicInfo
                        if report.panic.is_none() && r.header.status != RecordStatus::NotRun =>
                    {
                        match PanicInfo::decode(r.data) {
                            Ok(p) => {
                                report.panic = Some(PanicReport {
                                    cpu: (p.cpu != CPU_NONE).then_some(p.cpu),
                                    message: String::from_utf8_lossy(p.message).into_owned(),
                                    truncated: p.truncated,
                                })
                            }
                            Err(e) => report.problems.push(problem(
                                located,
                                Some(r.offset),
                                "bad-panic-info",
                                format!("offset {:#x}: panic info payload: {e}", r.offset),
                            )),
                        }
                    }
                    RecordKind::CpuDebug
                        if r.header.payload == PayloadType::CpuDebug
                            && r.header.status == RecordStatus::Ok =>
                    {
                        if let Ok(smp) = CpuSample::decode(r.data) {
                            let origin = RecordOrigin::of(r.header.flags, None);
                            region_samples.push(RegionSample::of(&smp, &origin));
                        }
                    }
                    _ => {}
                }
                let index = report.records.len();
                let mut info = record_info(index, &r, None);
                if r.header.kind == RecordKind::Sink && r.header.payload == PayloadType::Etr {
                    info.trace = etr_trace_info(located, &r, &info, &mut report.problems);
                }
                report.records.push(info);
            }
            Err(e) => {
                report
                    .problems
                    .push(problem(located, e.offset(), e.name(), e.to_string()));
                let salvaged = e.offset().and_then(|o| region.salvage(o));
                let commit_record = salvaged.is_some_and(|r| r.header.kind == RecordKind::Commit);
                if is_commit_error(&e) || commit_record {
                    report.commit = CommitInfo {
                        state: if matches!(e, FormatError::MissingCommit { .. }) {
                            CommitState::Missing
                        } else {
                            CommitState::Corrupt
                        },
                        offset: e.offset(),
                        records: None,
                        used_bytes: None,
                        problem: Some(e.to_string()),
                    };
                } else if let Some(r) = salvaged {
                    if r.header.kind == RecordKind::Modules && report.modules.is_none() {
                        report.modules = Some(ModulesReport::damaged(&e.to_string()));
                    }
                    let index = report.records.len();
                    report.records.push(record_info(index, &r, Some(&e)));
                }
            }
        }
    }
    report.captures = capture_infos(
        located,
        &report.records,
        &region_samples,
        &mut report.problems,
    );
    let drained = |rec: &RecordInfo| rec.problem.is_none() && drained_sink(rec);
    if report.path == Some(DumpPath::Runtime)
        && !report.records.iter().any(drained)
        && !report
            .captures
            .iter()
            .flat_map(|c| &c.records)
            .any(|r| r.problem.is_none() && drained(r))
    {
        report.no_trace = Some(NOT_COLLECTED.to_string());
    }
    report.clean = report.problems.is_empty()
        && report.commit.state == CommitState::Ok
        && !located.input_damaged;
    Ok(report)
}

/// Whether `rec` is a sound sink record whose drain ran (status ok, truncated or partial).
fn drained_sink(rec: &RecordInfo) -> bool {
    rec.record_kind == RecordKind::Sink
        && rec.crc_ok
        && [
            RecordStatus::Ok,
            RecordStatus::Truncated,
            RecordStatus::Partial,
        ]
        .iter()
        .any(|s| s.name() == rec.status)
}

/// Which path wrote a record of `kind`, in words: a CPU debug record written while the kernel ran
/// was written when its device was bound (its CPU's MPIDR), not at an enable.
fn origin_text(kind: RecordKind, o: &RecordOrigin) -> String {
    match (kind, o) {
        (RecordKind::CpuDebug, RecordOrigin::Runtime) => {
            "recorded when the device was bound, while the kernel ran".to_string()
        }
        _ => o.to_string(),
    }
}

/// Which path wrote record `r` (read from the region, or from the capture kernel's device dump
/// `device_dump`), for a trace sink, trace source or CPU debug record that was written.
fn record_origin(r: &Record<'_>, device_dump: Option<&str>) -> Option<RecordOrigin> {
    let h = &r.header;
    (matches!(
        h.kind,
        RecordKind::Sink | RecordKind::Source | RecordKind::CpuDebug
    ) && h.status != RecordStatus::NotRun)
        .then(|| RecordOrigin::of(h.flags, device_dump))
}

/// The capture kernel's device dumps of `located`, their records checked against the region's
/// `region_records`: a captured sink the panic path also drained is not used (the region's
/// wins), nor is a second copy of one sink; a captured CPU debug sample is given the number of
/// the crashed kernel's CPU with its MPIDR (`region_samples`), or not used.
fn capture_infos(
    located: &Located<'_>,
    region_records: &[RecordInfo],
    region_samples: &[RegionSample],
    problems: &mut Vec<Problem>,
) -> Vec<CaptureDumpInfo> {
    let mut used: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (n, dump) in located.captures.iter().enumerate() {
        let mut records = Vec::new();
        for r in dump.records() {
            let h = &r.header;
            if h.kind == RecordKind::Commit {
                continue;
            }
            let name = String::from_utf8_lossy(h.name_bytes()).into_owned();
            let mut cpu = (h.cpu != CPU_NONE).then_some(h.cpu);
            let problem = if h.kind == RecordKind::CpuDebug {
                match CpuSample::decode(r.data)
                    .map_err(|e| e.to_string())
                    .and_then(|smp| captured_sample_for(region_samples, &smp))
                {
                    Ok(c) => {
                        cpu = Some(c);
                        None
                    }
                    Err(why) => Some(why),
                }
            } else if h.kind != RecordKind::Sink {
                Some(
                    "only sink and CPU debug records are read from a capture kernel's device dump"
                        .to_string(),
                )
            } else if region_records
                .iter()
                .any(|x| x.name == name && drained_sink(x))
            {
                Some(format!(
                    "ignored: the panic path drained sink {name}, whose record in the region is used"
                ))
            } else if used.contains(&name) {
                Some(format!(
                    "ignored: sink {name} was read from an earlier capture kernel's device dump"
                ))
            } else {
                used.push(name.clone());
                None
            };
            let file = problem
                .is_none()
                .then(|| capture_file_name(n, records.len(), h.kind, h.name_bytes()));
            let mut info = RecordInfo {
                index: records.len(),
                offset: r.offset,
                file_offset: dump
                    .file_offset
                    .and_then(|o| o.checked_add(r.offset as u64)),
                kind: h.kind.name().into(),
                status: h.status.name().into(),
                payload: h.payload.name().into(),
                name,
                cpu,
                error: h.error,
                capacity: h.capacity,
                length: h.length,
                crc_ok: true,
                file,
                problem,
                data_offset: r.offset + RECORD_HEADER_SIZE,
                salvageable: false,
                record_kind: h.kind,
                trace: None,
                origin: record_origin(&r, Some(&dump.name)),
            };
            if info.problem.is_none() && h.payload == PayloadType::Etr {
                info.trace = etr_trace_info(located, &r, &info, problems);
            }
            records.push(info);
        }
        out.push(CaptureDumpInfo {
            name: dump.name.clone(),
            size: dump.size,
            file_offset: dump.file_offset,
            problem: dump.problem.clone(),
            records,
        });
    }
    out
}

/// File name `extract` gives the data of record `index` of the capture kernel's device dump
/// `dump` (their order in the input).
pub fn capture_file_name(dump: usize, index: usize, kind: RecordKind, name: &[u8]) -> String {
    format!(
        "capture{dump}-{index:02}-{}-{}.bin",
        kind.name(),
        crate::output::sanitize(name)
    )
}

/// The name of the file `extract` writes an ETR record's trace to.
pub fn trace_file_name(record_file: &str) -> String {
    let stem = record_file.strip_suffix(".bin").unwrap_or(record_file);
    format!("{stem}.trace.bin")
}

/// Where an ETR record's trace is; a trace that cannot be had is a problem.
fn etr_trace_info(
    located: &Located<'_>,
    r: &Record<'_>,
    info: &RecordInfo,
    problems: &mut Vec<Problem>,
) -> Option<TraceInfo> {
    let (h, copied) = EtrRecord::parse(r.data).ok()?;
    match crate::capture::etr_trace(located, &h, copied) {
        Ok(Some(t)) => Some(TraceInfo {
            file: info.file.as_deref().map(trace_file_name),
            bytes: t.bytes.len() as u64,
            from: Some(t.from),
            barrier: t.barrier,
            problem: None,
        }),
        Ok(None) => None,
        Err(why) => {
            problems.push(problem(
                located,
                Some(r.offset),
                "etr-trace-missing",
                format!("offset {:#x}: sink {}: {why}", r.offset, info.name),
            ));
            Some(TraceInfo {
                file: None,
                bytes: 0,
                from: None,
                barrier: false,
                problem: Some(why),
            })
        }
    }
}

fn problem(
    located: &Located<'_>,
    offset: Option<usize>,
    code: &'static str,
    message: String,
) -> Problem {
    Problem {
        code,
        offset,
        file_offset: offset.and_then(|o| located.file_offset_of(o)),
        message,
    }
}

/// Renders the human summary printed on stdout.
pub fn render_text(r: &Summary) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "input:     {} ({})",
        r.input,
        match (&r.input_format, r.input_kind) {
            (Some(f), _) => f.as_str(),
            (None, InputKind::ElfVmcore) => "ELF vmcore",
            (None, InputKind::KdumpCompressed) => "kdump-compressed vmcore",
            (None, InputKind::Raw) => "raw image",
        }
    );
    let _ = writeln!(s, "found by:  {}", r.found_by);
    if let Some(off) = r.region_file_offset {
        let _ = writeln!(
            s,
            "region:    file offset {off:#x}, {:#x} bytes",
            r.container.region_size
        );
    } else {
        let _ = writeln!(
            s,
            "region:    {:#x} bytes (not contiguous in the input file)",
            r.container.region_size
        );
    }
    if let Some(k) = &r.kerneloffset {
        let _ = writeln!(s, "KERNELOFFSET: {k}");
    }
    let c = &r.container;
    let _ = writeln!(
        s,
        "container: version {}, sequence {}, boot id {}",
        c.version, c.sequence, c.boot_id
    );
    if let Some(id) = &r.identity {
        let _ = writeln!(
            s,
            "kernel:    {} (build id {}), KASLR offset {}, _text {}",
            id.release,
            if id.build_id.is_empty() {
                "-"
            } else {
                &id.build_id
            },
            id.kaslr_offset,
            id.text
        );
    }
    if let Some(p) = &r.panic {
        let cpu = p.cpu.map_or("?".to_string(), |c| c.to_string());
        let _ = writeln!(
            s,
            "panic:     CPU {cpu}: {}{}",
            p.message.trim_end(),
            if p.truncated { " [truncated]" } else { "" }
        );
    }
    if let Some(p) = &r.phases {
        s.push_str(&render_phases(p));
    } else if r.container.version >= 3 {
        let _ = writeln!(
            s,
            "panic path: no phase times (the panic path did not write them)"
        );
    }
    if let Some(m) = &r.modules {
        s.push_str(&render_modules(m));
    }
    let _ = writeln!(s, "records:   {}", r.records.len());
    let _ = writeln!(
        s,
        "  {:>3}  {:>8}  {:<10} {:<22} {:>4}  {:<20} {:>17}  {:<5} file",
        "#", "offset", "kind", "status", "cpu", "name", "length/capacity", "check"
    );
    for rec in &r.records {
        let status = if rec.error != 0 {
            format!("{} ({})", rec.status, rec.error)
        } else {
            rec.status.clone()
        };
        let _ = writeln!(
            s,
            "  {:>3}  {:>#8x}  {:<10} {:<22} {:>4}  {:<20} {:>17}  {:<5} {}",
            rec.index,
            rec.offset,
            rec.kind,
            status,
            rec.cpu.map_or("-".into(), |c| c.to_string()),
            rec.name,
            format!("{}/{}", rec.length, rec.capacity),
            if rec.crc_ok { "ok" } else { "BAD" },
            rec.file.as_deref().unwrap_or("-")
        );
        if let Some(o) = &rec.origin {
            let _ = writeln!(s, "       origin: {}", origin_text(rec.record_kind, o));
        }
        if let Some(t) = &rec.trace {
            let _ = match (&t.from, &t.problem) {
                (Some(from), _) => writeln!(
                    s,
                    "       ETR trace: {} bytes from {from}{}",
                    t.bytes,
                    if t.barrier {
                        ", barrier over the first frame"
                    } else {
                        ""
                    }
                ),
                (None, Some(why)) => writeln!(s, "       ETR trace: MISSING: {why}"),
                (None, None) => Ok(()),
            };
        }
    }
    let commit = match r.commit.state {
        CommitState::Ok => format!(
            "ok ({} records, {} bytes used)",
            r.commit.records.unwrap_or(0),
            r.commit.used_bytes.unwrap_or(0)
        ),
        CommitState::Missing => "MISSING (torn or unfinished dump)".into(),
        CommitState::Corrupt => "CORRUPT".into(),
    };
    let _ = writeln!(s, "commit:    {commit}");
    if let Some(p) = &r.path {
        let _ = writeln!(s, "path:      {p}");
    }
    if !r.captures.is_empty() {
        let _ = writeln!(s, "capture kernel's device dumps: {}", r.captures.len());
    }
    for c in &r.captures {
        if let Some(why) = &c.problem {
            let _ = writeln!(s, "  {}: NOT USED: {why}", c.name);
            continue;
        }
        let _ = writeln!(s, "  {} ({:#x} bytes):", c.name, c.size);
        for rec in &c.records {
            let _ = writeln!(
                s,
                "    {} {}: {}, {}/{} bytes; {}",
                rec.kind,
                rec.name,
                rec.status,
                rec.length,
                rec.capacity,
                match &rec.problem {
                    Some(why) => why.clone(),
                    None => format!(
                        "used{} (origin: {})",
                        match (rec.record_kind, rec.cpu) {
                            (RecordKind::CpuDebug, Some(c)) => format!(" as CPU {c}'s sample"),
                            _ => String::new(),
                        },
                        rec.origin
                            .as_ref()
                            .map_or("capture kernel".to_string(), ToString::to_string)
                    ),
                }
            );
        }
    }
    if let Some(why) = &r.no_trace {
        let _ = writeln!(s, "trace:     {why}");
    }
    let _ = writeln!(
        s,
        "result:    {}",
        if r.clean {
            "clean".to_string()
        } else {
            format!("{} problem(s)", r.problems.len())
        }
    );
    s
}

//! The pre-panic report: per CPU, the panic CPU first, the CPU debug sample and the last
//! branches and functions executed before the panic, decoded through OpenCSD and symbolised
//! with vmlinux; rendered as text, JSON or an HTML page with a per-CPU timeline.

use std::collections::VecDeque;
use std::fmt::Write as _;

use cspd_hw::a64::direct_target;
use serde::Serialize;

use crate::capture::stop_points;
use crate::capture::Capture;
use crate::capture::DumpPath;
use crate::capture::RecordOrigin;
use crate::decode::decode_last;
use crate::decode::CodeImages;
use crate::decode::Element;
use crate::decode::Memory;
use crate::elf::Symbolizer;
use crate::filter::Filter;
use crate::filter::Untraced;
use crate::info::render_phases;
use crate::info::PhasesReport;
use crate::modules::ModuleSymbols;
use crate::snapshot::VmlinuxImage;

/// Report options.
#[derive(Debug, Clone)]
pub struct Options<'t> {
    /// How many branches and functions to keep per CPU.
    pub last: usize,
    /// Where the kernel text comes from when the input holds none (a region file): another
    /// vmcore of the same kernel at the same KASLR offset, and its name ([`TextSource`]).
    pub text_from: Option<TextSource<'t>>,
}

/// A vmcore of another boot of the same kernel, read for its text.
#[derive(Clone)]
pub struct TextSource<'t> {
    /// The vmcore.
    pub vmcore: &'t crate::vmcore::Vmcore,
    /// Its name, for the notes.
    pub name: String,
}

impl std::fmt::Debug for TextSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextSource")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// An address and its symbol.
#[derive(Debug, Clone, Serialize)]
pub struct Addr {
    /// The address, hex.
    pub addr: String,
    /// `function+0xoff`, when vmlinux has a symbol for it.
    pub symbol: Option<String>,
}

/// A taken branch, a P0 instruction that is not a branch (`ISB`, `WFI`), an exception (from its
/// preferred return address to the vector, kind `exception`), or a jump the decoder could not
/// follow further (kind `target`).
#[derive(Debug, Clone, Serialize)]
pub struct Branch {
    /// The branch instruction (absent when the decoder only saw the target).
    pub from: Option<Addr>,
    /// Where execution went; `None` only for a CPU's last branch when it is indirect and the
    /// trace ended before the address packet that names its target.
    pub to: Option<Addr>,
    /// Branch type as OpenCSD names it.
    pub kind: String,
    /// The trace went off after this branch: why, as the trace unit's filter explains it
    /// (absent for a branch the trace followed, or one the filter does not explain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untraced: Option<String>,
}

/// A run of execution inside one function (or at one address, without symbols).
#[derive(Debug, Clone, Serialize)]
pub struct FunctionRun {
    /// Function name, or the address where the run starts.
    pub name: String,
    /// First address of the run, hex.
    pub start: String,
    /// Instructions executed in the run (0 when unknown).
    pub instructions: u64,
}

/// The CPU debug sample, as the C driver prints it, with the PC's symbol.
#[derive(Debug, Clone, Serialize)]
pub struct SampleInfo {
    /// What happened (`sampled`, `powered down…`).
    pub outcome: String,
    /// The sampled PC, hex.
    pub pc: Option<Addr>,
    /// The C driver's lines.
    pub text: String,
    /// Which path wrote the sample's record.
    pub origin: RecordOrigin,
    /// The CPU's MPIDR affinity, hex, when the record has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpidr: Option<String>,
    /// Whether a capture kernel sampled the CPU as it found it (no power-up requested).
    pub as_found: bool,
}

impl SampleInfo {
    /// Where the sample came from, in words: its record's origin, said for a sample.
    pub fn origin_text(&self) -> String {
        let mut t = match &self.origin {
            RecordOrigin::Runtime => "recorded when the device was bound".to_string(),
            o => o.to_string(),
        };
        if self.as_found {
            t.push_str(", taken as found");
        }
        if let Some(m) = &self.mpidr {
            t.push_str(&format!("; MPIDR {m}"));
        }
        t
    }
}

/// A CPU's trace unit, and which path wrote its record.
#[derive(Debug, Clone, Serialize)]
pub struct SourceInfo {
    /// Its record's name.
    pub name: String,
    /// Which path wrote its record (its registers read at panic, or recorded at enable).
    pub origin: RecordOrigin,
}

/// A trace sink whose trace the report read.
#[derive(Debug, Clone, Serialize)]
pub struct SinkInfo {
    /// Its record's name.
    pub name: String,
    /// Bytes of trace.
    pub bytes: u64,
    /// Which path wrote its record (drained at panic, or by the capture kernel).
    pub origin: RecordOrigin,
}

/// The hardware stop a CPU's trace unit was programmed with (its saved ViewInst registers).
#[derive(Debug, Clone, Serialize)]
pub struct HwStopInfo {
    /// Stop points armed: the crash path's entries, one address comparator each.
    pub stop_points: u32,
    /// The start/stop logic was found stopped: the CPU reached one of them, and its trace ends
    /// there (`TRCVICTLR.SSSTATUS` 0 after the panic path stopped the unit); `None` when the
    /// registers were recorded at enable and the unit was not read at the crash.
    pub reached: Option<bool>,
}

/// What a CPU's trace unit was set to trace (its ViewInst filter, saved at panic).
#[derive(Debug, Clone, Serialize)]
pub struct FilterInfo {
    /// The Non-secure levels traced: `EL0 and EL1`, `EL1 only`, `EL0 only`.
    pub levels: String,
    /// Address ranges traced, both ends included (none: everywhere).
    pub include: Vec<[Addr; 2]>,
    /// Address ranges left out.
    pub exclude: Vec<[Addr; 2]>,
    /// Start points.
    pub start: Vec<Addr>,
    /// Stop points (the user's and the crash path's hardware stop).
    pub stop: Vec<Addr>,
    /// Whether the filter leaves code out (a stop point alone does not).
    pub cuts: bool,
}

impl FilterInfo {
    fn new(f: &Filter, sym: Names<'_>) -> Self {
        let ranges = |v: &[(u64, u64)]| {
            v.iter()
                .map(|&(lo, hi)| [addr(sym, lo), addr(sym, hi)])
                .collect()
        };
        Self {
            levels: f.levels(),
            include: ranges(&f.include),
            exclude: ranges(&f.exclude),
            start: f.start.iter().map(|&a| addr(sym, a)).collect(),
            stop: f.stop.iter().map(|&a| addr(sym, a)).collect(),
            cuts: f.cuts(),
        }
    }

    /// One line for the text report.
    fn line(&self) -> String {
        let mut s = format!("traced: {}", self.levels);
        let list = |v: &[[Addr; 2]]| {
            v.iter()
                .map(|[lo, hi]| format!("{}..{}", show(lo), show(hi)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.include.is_empty() {
            let _ = write!(s, "; in {}", list(&self.include));
        }
        if !self.exclude.is_empty() {
            let _ = write!(s, "; not in {}", list(&self.exclude));
        }
        let points = |v: &[Addr]| v.iter().map(show).collect::<Vec<_>>().join(", ");
        if !self.start.is_empty() {
            let _ = write!(s, "; starting at {}", points(&self.start));
        }
        if !self.stop.is_empty() {
            let _ = write!(s, "; stopping at {}", points(&self.stop));
        }
        s
    }
}

/// What the text report says of a CPU's trace going off and on again.
fn restarts_line(r: &Restarts, filtered: bool) -> Option<String> {
    if r.total == 0 {
        return None;
    }
    let explained = r.total - r.unexplained;
    let mut s = format!(
        "the trace went off and on again {} time(s) in the window",
        r.total
    );
    if explained > 0 {
        let _ = write!(
            s,
            ": {explained} where the filter leaves code out (not a loss)"
        );
    }
    if r.unexplained > 0 {
        let _ = write!(
            s,
            "{} {} {}: trace lost there",
            if explained > 0 { ";" } else { ":" },
            r.unexplained,
            if filtered {
                "not explained by the filter"
            } else {
                "with no filter set"
            }
        );
    }
    Some(s)
}

/// What one CPU did before the panic.
#[derive(Debug, Clone, Serialize)]
pub struct CpuReport {
    /// Logical CPU.
    pub cpu: u32,
    /// Whether this CPU panicked.
    pub panic: bool,
    /// Trace ID of its ETM.
    pub trace_id: Option<u8>,
    /// Its ETM's record, and which path wrote it.
    pub source: Option<SourceInfo>,
    /// Who had its ETM tracing at the panic (`sysfs` or `perf`), when the record says.
    pub session: Option<&'static str>,
    /// The hardware stop of its trace unit, when the dump saved it.
    pub hw_stop: Option<HwStopInfo>,
    /// What its trace unit was set to trace, when the dump saved it.
    pub filter: Option<FilterInfo>,
    /// Where its trace went off and on again in the decoded window.
    pub restarts: Restarts,
    /// The CPU debug sample.
    pub sample: Option<SampleInfo>,
    /// Trace elements decoded for the CPU.
    pub elements: u64,
    /// Last functions, oldest first.
    pub functions: Vec<FunctionRun>,
    /// Last branches, oldest first.
    pub branches: Vec<Branch>,
    /// Why there is no trace for the CPU, if there is none.
    pub no_trace: Option<String>,
    /// How much of the sink its trace holds, when there is one sink of formatted trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_share: Option<SinkShare>,
}

/// How much of the sink a CPU's trace holds, from the formatter's frames.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SinkShare {
    /// Bytes of its trace in the sink.
    pub bytes: u64,
    /// Of them, those that entered the sink after the panicking CPU's last byte (its trace ends at
    /// the crash): what it wrote while the crash went on, or kept writing after it (a CPU the
    /// crash stop did not stop). `None` when no panicking CPU is known or none of its trace is
    /// left.
    pub after_crash: Option<u64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Kernel release, when known.
    pub release: Option<String>,
    /// Runtime `_text`, hex.
    pub text: String,
    /// KASLR offset, hex.
    pub kaslr_offset: String,
    /// The panic CPU.
    pub panic_cpu: Option<u32>,
    /// The panic message.
    pub panic_message: Option<String>,
    /// How long each phase of the panic path took (format version 3).
    pub phases: Option<PhasesReport>,
    /// Which path committed the dump (absent for a snapshot, or without a sound commit).
    pub path: Option<DumpPath>,
    /// The trace sinks, and which path wrote each.
    pub sinks: Vec<SinkInfo>,
    /// How the trace was decoded.
    pub decoder: String,
    /// Whether addresses are symbolised with vmlinux's symbols.
    pub symbols: bool,
    /// The loadable modules of the dump, and how their code is named.
    pub modules: Vec<ModuleNaming>,
    /// Per CPU, panic CPU first.
    pub cpus: Vec<CpuReport>,
    /// Errors the decoder logged, the first 64 (a packet cut at the start of a wrapped buffer
    /// is usual).
    pub decoder_errors: Vec<String>,
    /// Errors the decoder logged in all.
    pub decoder_error_count: u64,
    /// What the reader should know about the decode (the kernel text it used, say).
    pub notes: Vec<String>,
    /// What went wrong.
    pub warnings: Vec<String>,
}

/// How a note naming an inferred panicking CPU starts (the CPU number follows).
pub const INFERRED_PREFIX: &str = "the panicking CPU is CPU ";

/// How the report shows the target of an indirect last branch.
const NOT_TRACED: &str = "(target not traced)";

/// Names code addresses: module code from the dump's module list (and the modules' `.ko`
/// files), the rest from vmlinux's symbols.
#[derive(Clone, Copy, Default)]
struct Names<'a> {
    kernel: Option<&'a Symbolizer>,
    modules: Option<&'a ModuleSymbols>,
}

impl Names<'_> {
    /// `function+0xoff`, `function+0xoff [module]` or `module+0xoff`.
    fn name(&self, a: u64) -> Option<String> {
        self.modules
            .and_then(|m| m.name(a))
            .or_else(|| self.kernel.and_then(|s| s.name(a)))
    }

    /// The function (`function`, `function [module]`, or `module+0xoff`).
    fn function(&self, a: u64) -> Option<String> {
        self.modules
            .and_then(|m| m.function(a))
            .or_else(|| self.kernel.and_then(|s| s.function(a).map(str::to_string)))
    }
}

fn addr(sym: Names<'_>, a: u64) -> Addr {
    Addr {
        addr: format!("{a:#x}"),
        symbol: sym.name(a),
    }
}

/// How the code of one loadable module is named.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleNaming {
    /// Module name.
    pub name: String,
    /// The `.ko` its functions are named from; absent: named `module+0xoffset`.
    pub ko: Option<String>,
}

/// What a branch still waiting for its target is.
#[derive(Debug, Clone, Copy)]
enum Pending {
    /// A taken branch.
    Branch,
    /// A taken waypoint that is not a branch (`ISB`): it falls through.
    Waypoint,
    /// An exception, from its preferred return address to the vector.
    Exception,
}

/// A branch after which the trace has no instruction range: a direct branch's target is in its
/// encoding (an indirect one's came as a BranchTarget element, when the trace named it: `to` is
/// absent otherwise); a waypoint that is not a branch (ISB) falls through to the next
/// instruction; an exception's vector is not known without a range after it. With the unit's
/// `filter` (the trace came on again elsewhere), also why the trace went off there, when the
/// filter explains it.
fn untraced_target(
    (from, kind, what): (u64, String, Pending),
    sym: Names<'_>,
    word: &mut dyn FnMut(u64) -> Option<u32>,
    filter: Option<&Filter>,
) -> (Branch, Option<Untraced>) {
    let to = match what {
        Pending::Branch => word(from).and_then(|w| direct_target(w, from)),
        Pending::Waypoint => Some(from.wrapping_add(4)),
        Pending::Exception => None,
    };
    let why = filter.and_then(|f| f.untraced(to));
    let branch = Branch {
        from: Some(addr(sym, from)),
        to: to.map(|t| addr(sym, t)),
        kind,
        untraced: why.map(Untraced::describe),
    };
    (branch, why)
}

/// How often a CPU's trace went off and came on again inside its decoded window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Restarts {
    /// Trace-ons after the window's first instruction.
    pub total: u64,
    /// Those the trace unit's filter does not explain: trace lost there.
    pub unexplained: u64,
}

/// Sums the decoded elements of one CPU up into its last `last` function runs and branches,
/// and counts where its trace went off and on again (`filter`: what the unit was set to trace,
/// which explains those places); `word` reads the instruction at an address, for the target of a
/// branch no range follows.
fn summarise(
    els: &VecDeque<Element>,
    sym: Names<'_>,
    filter: Option<&Filter>,
    last: usize,
    word: &mut dyn FnMut(u64) -> Option<u32>,
) -> (Vec<FunctionRun>, Vec<Branch>, Restarts) {
    let mut restarts = Restarts::default();
    let mut ran = false;
    let mut funcs: Vec<FunctionRun> = Vec::new();
    let mut branches = Vec::new();
    // The last branch, waypoint or exception not yet given its target: (address, kind, what it
    // is).
    let mut pending: Option<(u64, String, Pending)> = None;
    let last_branch = |e: &Element| match e {
        Element::Range {
            end,
            last_size,
            taken: true,
            branch,
            ..
        } if *branch != crate::decode::BranchType::None => Some((
            end.wrapping_sub(u64::from(*last_size)),
            e.branch_name(),
            if branch.is_branch() {
                Pending::Branch
            } else {
                Pending::Waypoint
            },
        )),
        _ => None,
    };
    for e in els {
        if let Some(a) = e.addr() {
            if let Some((from, kind, _)) = pending.take() {
                branches.push(Branch {
                    from: Some(addr(sym, from)),
                    to: Some(addr(sym, a)),
                    kind,
                    untraced: None,
                });
            } else if matches!(e, Element::NoAccess { .. }) {
                branches.push(Branch {
                    from: None,
                    to: Some(addr(sym, a)),
                    kind: "target".into(),
                    untraced: None,
                });
            }
            let name = sym.function(a).unwrap_or_else(|| format!("{a:#x}"));
            let n = match e {
                Element::Range { count, .. } => u64::from(*count),
                _ => 0,
            };
            match funcs.last_mut() {
                Some(f) if f.name == name => f.instructions += n,
                _ => funcs.push(FunctionRun {
                    name,
                    start: format!("{a:#x}"),
                    instructions: n,
                }),
            }
        }
        match e {
            // A range whose last instruction is not a branch (a range cut by an exception)
            // adds no branch.
            Element::Range { .. } => {
                ran = true;
                pending = last_branch(e);
            }
            // An exception goes from its preferred return address to the vector, where the
            // next element starts.
            Element::Exception { ret: Some(r), .. } => {
                pending = Some((*r, "exception".into(), Pending::Exception));
            }
            // The trace went off after the branch (its target is in code the trace unit was
            // set not to trace: a range filter, an excluded exception level) and comes on
            // again elsewhere: the branch was taken all the same.
            Element::TraceOn => {
                let why = match pending.take() {
                    Some(p) => {
                        let (b, why) = untraced_target(p, sym, word, filter);
                        branches.push(b);
                        why
                    }
                    // The trace went off after an instruction that is not a branch (a range
                    // cut by an exception into an untraced vector, a stop point).
                    None => filter.and_then(|f| f.untraced(None)),
                };
                if ran {
                    restarts.total += 1;
                    restarts.unexplained += u64::from(why.is_none());
                }
            }
            _ => pending = None,
        }
    }
    // The trace ended right after a branch (the ETM stopped before the next instruction range).
    if let Some(p) = pending {
        branches.push(untraced_target(p, sym, word, None).0);
    }
    funcs.drain(..funcs.len().saturating_sub(last));
    branches.drain(..branches.len().saturating_sub(last));
    (funcs, branches, restarts)
}

/// Builds the report: decodes the capture in process, keeping the last elements of each trace
/// ID, and symbolises them.
pub fn build(capture: &Capture<'_>, vmlinux: Option<&VmlinuxImage<'_>>, opts: &Options) -> Report {
    let kernel_sym = vmlinux.map(|v| Symbolizer {
        vmlinux: v.elf.clone(),
        offset: capture.kernel_relocation(&v.elf),
    });
    let sym = Names {
        kernel: kernel_sym.as_ref(),
        modules: Some(&capture.module_symbols),
    };
    let mut warnings = Vec::new();
    let mut report_notes: Vec<String> = capture.notes.clone();
    // Elements kept per trace ID: enough that a loop in the last function does not hide the
    // functions before it, still a bounded amount of memory.
    let keep = opts.last.saturating_mul(128).max(1024);
    let mut memory = CodeImages::new(capture, vmlinux.map(|v| (v.bytes, &v.elf)));
    if let (Some(t), Some(voff)) = (&opts.text_from, capture.kernel.kimage_voffset) {
        if memory.text_from(t.vmcore, voff, &t.name) == 0 {
            warnings.push(format!("{} holds none of the kernel's text", t.name));
        }
    }
    report_notes.extend(memory.notes.iter().cloned());
    let mut decoded = None;
    let decoder = match decode_last(capture, &mut memory, keep) {
        Ok(d) => {
            let (pages, bytes) = memory.paged();
            let mut name = crate::decode::decoder_name();
            if pages > 0 {
                let _ = write!(
                    name,
                    "; code outside vmlinux (modules) read from the vmcore: {pages} page(s), {} KiB",
                    bytes / 1024
                );
            }
            if let Some(f) = &d.fatal {
                warnings.push(format!("trace decoded in part: {f}"));
            }
            decoded = Some(d);
            name
        }
        Err(crate::decode::DecodeError::Nothing(why)) => format!("not run: {why}"),
        Err(e) => {
            warnings.push(format!("trace not decoded: {e}"));
            format!("not run: {e}")
        }
    };
    if decoded.is_some() && !memory.has_code() {
        report_notes.push(
            "no kernel image (--vmlinux): only branch targets are known, not the instructions \
             between them"
                .into(),
        );
    }
    // An instruction word as the kernel ran it (module code read through the page tables, the
    // vmcore's kernel image, else vmlinux as built).
    let mut word = |a: u64| -> Option<u32> {
        let mut b = [0u8; 4];
        (memory.read(a, &mut b) == 4).then(|| u32::from_le_bytes(b))
    };
    let mut cpus = Vec::new();
    for cpu in capture.cpus() {
        let etm = capture.etms.iter().find(|e| e.state.cpu == cpu);
        let sample = capture
            .samples
            .iter()
            .find(|s| s.sample.cpu == cpu)
            .map(|x| {
                let s = &x.sample;
                let pc = (s.outcome == cspd_format::cpu_debug::Outcome::Sampled)
                    .then(|| addr(sym, s.pc.pc));
                let mut text = format!("{}", s.report());
                if let Some(Addr {
                    symbol: Some(name), ..
                }) = &pc
                {
                    text = text
                        .lines()
                        .map(|l| {
                            if l.trim_start().starts_with("EDPCSR:") {
                                format!("{l} {name}")
                            } else {
                                l.to_string()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                }
                if let Some(n) = as_found_note(cpu, s, pc.as_ref()) {
                    report_notes.push(n);
                }
                SampleInfo {
                    outcome: s.reason().to_string(),
                    pc,
                    text,
                    origin: x.origin.clone(),
                    mpidr: s.mpidr.map(|m| format!("{m:#x}")),
                    as_found: s.as_found(),
                }
            });
        let id = etm.map(|e| e.trace_id());
        let filter = etm.and_then(|e| Filter::from_state(&e.state));
        let (mut functions, mut branches, mut elements, mut no_trace, mut restarts) =
            (Vec::new(), Vec::new(), 0, None, Restarts::default());
        match (id, &decoded) {
            (None, _) => no_trace = Some("no ETMv4 source record for this CPU".into()),
            (Some(_), None) => no_trace = Some(decoder.clone()),
            (Some(id), Some(d)) => match d.by_id.get(&id) {
                Some(els) => {
                    elements = d.totals.get(&id).copied().unwrap_or(0);
                    (functions, branches, restarts) =
                        summarise(els, sym, filter.as_ref(), opts.last, &mut word);
                    if functions.is_empty() {
                        no_trace = Some(no_code_left(id, elements));
                    }
                }
                None => no_trace = Some(format!("no trace with ID {id:#x} in the buffer")),
            },
        }
        let hw_stop = etm.and_then(|e| e.state.hw_stop()).and_then(|h| {
            (h.stop_points > 0).then_some(HwStopInfo {
                stop_points: h.stop_points,
                reached: h.stopped,
            })
        });
        cpus.push(CpuReport {
            cpu,
            panic: capture.panic_cpu == Some(cpu),
            trace_id: id,
            source: etm.map(|e| SourceInfo {
                name: e.name.clone(),
                origin: e.origin.clone(),
            }),
            session: etm.and_then(|e| e.state.session()),
            hw_stop,
            filter: filter.as_ref().map(|f| FilterInfo::new(f, sym)),
            restarts,
            sample,
            elements,
            functions,
            branches,
            no_trace,
            sink_share: None,
        });
    }
    // A dump that no panic-time step completed (plain kdump) names no panicking CPU: the one
    // CPU whose trace ends with a branch to one of its trace unit's stop points (the crash path's
    // entries) is where the crash began.
    let mut panic_cpu = capture.panic_cpu;
    let mut stopped_n = 0;
    if panic_cpu.is_none() && capture.path == Some(DumpPath::Runtime) {
        let stopped: Vec<(u32, u64)> = cpus
            .iter()
            .filter_map(|c: &CpuReport| {
                let etm = capture.etms.iter().find(|e| e.state.cpu == c.cpu)?;
                let to = c.branches.last()?.to.as_ref()?;
                let to = u64::from_str_radix(to.addr.trim_start_matches("0x"), 16).ok()?;
                stop_points(&etm.state)
                    .any(|a| a == to)
                    .then_some((c.cpu, to))
            })
            .collect();
        stopped_n = stopped.len();
        if let [(cpu, at)] = stopped[..] {
            panic_cpu = Some(cpu);
            if let Some(c) = cpus.iter_mut().find(|c| c.cpu == cpu) {
                c.panic = true;
            }
            let name = addr(sym, at).symbol.unwrap_or_else(|| format!("{at:#x}"));
            report_notes.push(format!(
                "{INFERRED_PREFIX}{cpu}, inferred: no record names it (no panic-time step ran), \
                 and its trace alone ends at a stop point, the entry of {name}"
            ));
        }
    }
    // Plain kdump with the CPU debug driver in the capture kernel: it booted on the panicking
    // CPU, and sampled every other one as found.
    if let (None, Some(cpu)) = (panic_cpu, capture.capture_kernel_cpu()) {
        panic_cpu = Some(cpu);
        if let Some(c) = cpus.iter_mut().find(|c| c.cpu == cpu) {
            c.panic = true;
        }
        report_notes.push(format!(
            "{}{cpu}, inferred: no record names it (no panic-time step ran) and the traces do \
             not tell ({stopped_n} CPUs' traces end at a stop point), but the capture kernel ran \
             on it (panic() starts it on the panicking CPU): its CPU debug driver sampled every \
             other CPU, not this one",
            INFERRED_PREFIX
        ));
    }
    sink_shares(capture, &mut cpus, panic_cpu, &mut report_notes);
    Report {
        release: capture.kernel.release.clone(),
        text: format!("{:#x}", capture.text_addr()),
        kaslr_offset: format!("{:#x}", capture.kernel.kaslr_offset),
        panic_cpu,
        panic_message: capture.panic_message.clone(),
        phases: capture.phases.as_ref().map(PhasesReport::from),
        path: capture.path,
        sinks: capture
            .sinks
            .iter()
            .map(|s| SinkInfo {
                name: s.name.clone(),
                bytes: s.trace.len() as u64,
                origin: s.origin.clone(),
            })
            .collect(),
        decoder,
        symbols: kernel_sym.is_some(),
        modules: capture
            .module_symbols
            .modules()
            .iter()
            .map(|m| ModuleNaming {
                name: m.name.clone(),
                ko: m.ko.as_ref().map(|k| k.path.display().to_string()),
            })
            .collect(),
        decoder_errors: decoded
            .as_ref()
            .map(|d| d.errors.clone())
            .unwrap_or_default(),
        decoder_error_count: decoded.as_ref().map_or(0, |d| d.error_count),
        cpus,
        notes: report_notes,
        warnings,
    }
}

/// Why a CPU whose trace ID is in the buffer has no code in it: what is left of its stream (a
/// trace-on, the flush at its stop) decodes to no instruction.
/// The addresses of a trace unit's stop points: the single address comparators its saved
/// `TRCVISSCTLR` selects as stop points (bits 31:16).
/// The functions where Linux parks a CPU it stops and cannot power off (arm64: the stop IPI's
/// handler, with `cpu_park_loop()` inlined; older kernels' names too).
const PARK_FUNCTIONS: &[&str] = &[
    "arm64_nmi_cpu_stop",
    "ipi_cpu_crash_stop",
    "local_cpu_stop",
    "panic_smp_self_stop",
    "cpu_park_loop",
];

/// What a capture kernel's sample, taken as found, says of a CPU that was not online there: a
/// note naming it parked (its PC in a park function) or still running where it hung, `None` for
/// a sample that is not such a sample of executed code.
fn as_found_note(
    cpu: u32,
    s: &cspd_format::cpu_debug::CpuSample,
    pc: Option<&Addr>,
) -> Option<String> {
    if !s.as_found() || s.outcome != cspd_format::cpu_debug::Outcome::Sampled {
        return None;
    }
    let at = pc.map_or_else(
        || format!("{:#x}", s.pc.pc),
        |a| a.symbol.clone().unwrap_or_else(|| a.addr.clone()),
    );
    let func = at.split('+').next().unwrap_or_default();
    Some(if PARK_FUNCTIONS.contains(&func) {
        format!(
            "CPU {cpu} was parked by the crash stop: the capture kernel found it in {at}, where a \
             CPU the crash stop cannot power off waits"
        )
    } else {
        format!(
            "CPU {cpu} did not stop at the crash: the capture kernel found it running at {at} \
             (interrupts masked, or the stop IPI not taken)"
        )
    })
}

fn no_code_left(id: u8, elements: u64) -> String {
    let s = if elements == 1 { "" } else { "s" };
    format!(
        "no executed code of trace ID {id:#x} is left in the buffer ({elements} element{s} of it): \
         a full buffer keeps the newest trace, so CPUs that went on tracing after this one \
         stopped (a CPU that ignored the stop request keeps its unit running until the panic \
         path stops it) overwrote it; a larger sink, or trace restricted to fewer CPUs, keeps it"
    )
}

/// What the report says of a CPU's hardware stop.
fn hw_stop_line(h: &HwStopInfo) -> String {
    let n = h.stop_points;
    let s = if n == 1 { "" } else { "s" };
    match h.reached {
        Some(true) => format!(
            "hardware stop: reached ({n} crash-path stop point{s} armed): the trace ends where the crash began"
        ),
        Some(false) => format!(
            "hardware stop: not reached ({n} stop point{s} armed): traced until the panic path stopped the unit"
        ),
        None => format!(
            "hardware stop: {n} crash-path stop point{s} armed (registers recorded at enable; the unit was not read at the crash)"
        ),
    }
}

/// What the report says of a sink: its trace and which path wrote it.
fn sink_line(k: &SinkInfo) -> String {
    format!(
        "trace:   sink {}, {} bytes; origin: {}",
        k.name, k.bytes, k.origin
    )
}

/// What the report says of a CPU's trace unit: its record and which path wrote it.
fn source_line(src: &SourceInfo) -> String {
    format!("trace unit {}; origin: {}", src.name, src.origin)
}

/// The modules and how their code is named, on one line.
fn modules_line(m: &[ModuleNaming]) -> String {
    let named = m.iter().filter(|m| m.ko.is_some()).count();
    let list: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
    format!(
        "{} loaded ({}), {named} named from their .ko{}",
        m.len(),
        list.join(", "),
        if named < m.len() {
            ", the others by offset (--modules DIR)"
        } else {
            ""
        }
    )
}

fn show(a: &Addr) -> String {
    match &a.symbol {
        Some(s) => format!("{} {s}", a.addr),
        None => a.addr.clone(),
    }
}

/// Fills each CPU's share of the sink, when there is one sink of formatted trace, and says in a
/// note, for trace a capture kernel collected (the sink kept capturing until it stopped it), how
/// much each other CPU wrote after the panicking CPU's trace ended, or that none of the panicking
/// CPU's trace is left.
fn sink_shares(
    capture: &Capture<'_>,
    cpus: &mut [CpuReport],
    panic_cpu: Option<u32>,
    notes: &mut Vec<String>,
) {
    let [sink] = &capture.sinks[..] else {
        return;
    };
    if sink.format != crate::capture::SinkFormat::Frames {
        return;
    }
    let frames = sink.frames();
    let total = crate::deformat::bytes_per_id(frames);
    let panic_id = panic_cpu.and_then(|p| cpus.iter().find(|c| c.cpu == p)?.trace_id);
    let after = panic_id.and_then(|id| crate::deformat::bytes_after(frames, id));
    for c in cpus.iter_mut() {
        let Some(id) = c.trace_id else {
            continue;
        };
        c.sink_share = Some(SinkShare {
            bytes: total.get(&id).copied().unwrap_or(0),
            after_crash: after.as_ref().map(|a| a.get(&id).copied().unwrap_or(0)),
        });
    }
    if !matches!(sink.origin, RecordOrigin::CaptureKernel { .. }) {
        return;
    }
    let size = frames.len();
    match (panic_cpu, &after) {
        (Some(p), Some(_)) => {
            for c in cpus.iter().filter(|c| c.cpu != p) {
                let Some(SinkShare {
                    after_crash: Some(n),
                    ..
                }) = c.sink_share
                else {
                    continue;
                };
                notes.push(format!(
                    "CPU {}'s trace took {n} bytes of the sink ({size} bytes) after the panicking \
                     CPU {p}'s trace ended{}",
                    c.cpu,
                    if n == 0 {
                        ": it had stopped before the crash"
                    } else {
                        ": it went on running after the crash (the crash stop did not stop it)"
                    }
                ));
            }
        }
        (Some(p), None) => {
            let most = cpus
                .iter()
                .filter_map(|c| Some((c.cpu, c.sink_share?.bytes)))
                .max_by_key(|&(_, b)| b);
            notes.push(format!(
                "none of the panicking CPU {p}'s trace is left in the sink: trace written after \
                 the crash overwrote it{}",
                most.map_or(String::new(), |(cpu, b)| format!(
                    "; CPU {cpu}'s trace fills {b} of its {size} bytes (a CPU the crash stop did \
                     not stop)"
                ))
            ));
        }
        (None, _) => {}
    }
}

/// Renders the report as text.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "kernel:  {} (_text {}, KASLR offset {})",
        r.release.as_deref().unwrap_or("unknown"),
        r.text,
        r.kaslr_offset
    );
    if let Some(m) = &r.panic_message {
        let cpu = r.panic_cpu.map_or("?".into(), |c| c.to_string());
        let _ = writeln!(s, "panic:   CPU {cpu}: {}", m.trim_end());
    }
    if let Some(p) = &r.phases {
        s.push_str(&render_phases(p));
    }
    if let Some(p) = &r.path {
        let _ = writeln!(s, "path:    {p}");
    }
    for k in &r.sinks {
        let _ = writeln!(s, "{}", sink_line(k));
    }
    let _ = writeln!(s, "decoder: {}", r.decoder);
    if !r.modules.is_empty() {
        let _ = writeln!(s, "modules: {}", modules_line(&r.modules));
    }
    for c in &r.cpus {
        let _ = writeln!(
            s,
            "\nCPU {}{}{}",
            c.cpu,
            if c.panic { " (panic CPU)" } else { "" },
            c.trace_id.map_or(String::new(), |id| format!(
                ", trace ID {id:#x}, {} trace elements",
                c.elements
            ))
        );
        if let Some(src) = &c.source {
            let _ = writeln!(s, "  {}", source_line(src));
        }
        if let Some(by) = c.session {
            let _ = writeln!(s, "  traced for a {by} session");
        }
        if let Some(sm) = &c.sample {
            let _ = writeln!(s, "  CPU debug sample (origin: {}):", sm.origin_text());
            for l in sm.text.lines() {
                let _ = writeln!(s, "    {l}");
            }
        }
        if let Some(h) = &c.hw_stop {
            let _ = writeln!(s, "  {}", hw_stop_line(h));
        }
        if let Some(f) = &c.filter {
            let _ = writeln!(s, "  {}", f.line());
        }
        if let Some(l) = restarts_line(&c.restarts, c.filter.as_ref().is_some_and(|f| f.cuts)) {
            let _ = writeln!(s, "  {l}");
        }
        if let Some(k) = &c.sink_share {
            let _ = writeln!(
                s,
                "  sink: {} bytes of its trace{}",
                k.bytes,
                k.after_crash.map_or(String::new(), |n| format!(
                    ", {n} of them after the panicking CPU's trace ended"
                ))
            );
        }
        if let Some(why) = &c.no_trace {
            let _ = writeln!(s, "  no trace: {why}");
            continue;
        }
        let _ = writeln!(s, "  last functions (oldest first, last one at the panic):");
        for f in &c.functions {
            if f.instructions > 0 {
                let _ = writeln!(s, "    {:<40} {} instructions", f.name, f.instructions);
            } else {
                let _ = writeln!(s, "    {}", f.name);
            }
        }
        let _ = writeln!(s, "  last branches (oldest first):");
        for b in &c.branches {
            let from = b.from.as_ref().map_or("?".into(), show);
            let to = b.to.as_ref().map_or(NOT_TRACED.into(), show);
            match &b.untraced {
                Some(why) => {
                    let _ = writeln!(s, "    {from} -> {to} [{}; trace off: {why}]", b.kind);
                }
                None => {
                    let _ = writeln!(s, "    {from} -> {to} [{}]", b.kind);
                }
            }
        }
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(name: &str) -> String {
    let h = name.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    });
    format!("hsl({},60%,65%)", h % 360)
}

/// Renders an HTML page with the report and a per-CPU timeline (inline SVG).
pub fn render_html(r: &Report) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>csdump: before the panic</title>\n<style>body{font-family:sans-serif;margin:1em}pre{background:#f4f4f4;padding:.5em}svg text{font-size:10px}</style></head><body>\n",
    );
    let _ = writeln!(s, "<h1>Before the panic</h1>");
    let _ = writeln!(
        s,
        "<p>Kernel {} (_text {}, KASLR offset {}). Decoder: {}.</p>",
        esc(r.release.as_deref().unwrap_or("unknown")),
        r.text,
        r.kaslr_offset,
        esc(&r.decoder)
    );
    if !r.modules.is_empty() {
        let _ = writeln!(s, "<p>Modules: {}.</p>", esc(&modules_line(&r.modules)));
    }
    if let Some(m) = &r.panic_message {
        let _ = writeln!(
            s,
            "<p><b>Panic</b> on CPU {}: <code>{}</code></p>",
            r.panic_cpu.map_or("?".into(), |c| c.to_string()),
            esc(m.trim_end())
        );
    }
    if let Some(p) = &r.phases {
        let _ = writeln!(s, "<pre>{}</pre>", esc(&render_phases(p)));
    }
    if let Some(p) = &r.path {
        let _ = writeln!(s, "<p>Dump path: {}.</p>", esc(&p.to_string()));
    }
    if !r.sinks.is_empty() {
        let _ = writeln!(s, "<ul>");
        for k in &r.sinks {
            let _ = writeln!(s, "<li>{}</li>", esc(&sink_line(k)));
        }
        let _ = writeln!(s, "</ul>");
    }
    // Timeline: one lane per CPU, the last functions left to right, ending at the panic.
    let lane = 36;
    let width = 1000;
    let left = 80;
    let height = lane * r.cpus.len().max(1) + 20;
    let _ = writeln!(
        s,
        "<h2>Timeline</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">",
        width + left + 20
    );
    for (i, c) in r.cpus.iter().enumerate() {
        let y = 10 + i * lane;
        let _ = writeln!(
            s,
            "<text x=\"0\" y=\"{}\">CPU {}{}</text>",
            y + 18,
            c.cpu,
            if c.panic { " (panic)" } else { "" }
        );
        let n = c.functions.len();
        if n == 0 {
            let _ = writeln!(
                s,
                "<text x=\"{left}\" y=\"{}\" fill=\"#888\">no trace</text>",
                y + 18
            );
            continue;
        }
        let w = width / n.max(1);
        for (j, f) in c.functions.iter().enumerate() {
            let x = left + j * w;
            let _ = writeln!(
                s,
                "<g><title>{} ({} instructions, from {})</title><rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"26\" fill=\"{}\" stroke=\"#fff\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
                esc(&f.name),
                f.instructions,
                f.start,
                w,
                color(&f.name),
                x + 2,
                y + 17,
                esc(&f.name.chars().take(w / 6).collect::<String>())
            );
        }
    }
    let _ = writeln!(s, "</svg>");
    for c in &r.cpus {
        let _ = writeln!(
            s,
            "<h2>CPU {}{}</h2>",
            c.cpu,
            if c.panic { " (panic CPU)" } else { "" }
        );
        if let Some(src) = &c.source {
            let _ = writeln!(s, "<p>{}</p>", esc(&source_line(src)));
        }
        if let Some(sm) = &c.sample {
            let _ = writeln!(
                s,
                "<p>CPU debug sample (origin: {}):</p><pre>{}</pre>",
                esc(&sm.origin_text()),
                esc(&sm.text)
            );
        }
        if let Some(by) = c.session {
            let _ = writeln!(s, "<p>traced for a {by} session</p>");
        }
        if let Some(h) = &c.hw_stop {
            let _ = writeln!(s, "<p>{}</p>", esc(&hw_stop_line(h)));
        }
        if let Some(f) = &c.filter {
            let _ = writeln!(s, "<p>{}</p>", esc(&f.line()));
        }
        if let Some(l) = restarts_line(&c.restarts, c.filter.as_ref().is_some_and(|f| f.cuts)) {
            let _ = writeln!(s, "<p>{}</p>", esc(&l));
        }
        if let Some(why) = &c.no_trace {
            let _ = writeln!(s, "<p>No trace: {}</p>", esc(why));
            continue;
        }
        let _ = writeln!(s, "<h3>Last branches</h3><ol>");
        for b in &c.branches {
            let from = b.from.as_ref().map_or("?".into(), show);
            let _ = writeln!(
                s,
                "<li><code>{} &rarr; {}</code> [{}{}]</li>",
                esc(&from),
                esc(&b.to.as_ref().map_or(NOT_TRACED.into(), show)),
                esc(&b.kind),
                b.untraced
                    .as_ref()
                    .map_or(String::new(), |w| format!("; trace off: {}", esc(w)))
            );
        }
        let _ = writeln!(s, "</ol>");
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::decode::BranchType;
    use crate::decode::BranchType as B;

    fn range(start: u64, end: u64, taken: bool, branch: BranchType) -> Element {
        range_c(start, end, taken, branch, false)
    }

    fn range_c(start: u64, end: u64, taken: bool, branch: BranchType, cond: bool) -> Element {
        Element::Range {
            start,
            end,
            count: u32::try_from((end - start) / 4).unwrap_or(0),
            last_size: 4,
            taken,
            branch,
            conditional: cond,
        }
    }

    /// The stop points are the comparators `TRCVISSCTLR.STOP` selects and the record saved;
    /// start points and unsaved comparators are not.
    #[test]
    fn a_cpu_found_in_a_park_function_is_parked_one_found_elsewhere_did_not_stop() {
        let arch = cspd_format::cpu_debug::ArchData::from_ids(3, 2, true).unwrap();
        let mut s = cspd_format::cpu_debug::CpuSample::for_arch(0, &arch);
        s.outcome = cspd_format::cpu_debug::Outcome::Sampled;
        let at = |sym: &str| Addr {
            addr: "0xffff800080001000".into(),
            symbol: Some(sym.into()),
        };
        // A panic-path sample says nothing of the kind.
        assert_eq!(
            as_found_note(0, &s, Some(&at("arm64_nmi_cpu_stop+0x60"))),
            None
        );
        s.flags |= cspd_format::cpu_debug::FLAG_AS_FOUND;
        let parked = as_found_note(0, &s, Some(&at("arm64_nmi_cpu_stop+0x60"))).unwrap();
        assert!(
            parked.starts_with("CPU 0 was parked by the crash stop"),
            "{parked}"
        );
        let hung = as_found_note(2, &s, Some(&at("lkdtm_HARDLOCKUP+0x4"))).unwrap();
        assert!(
            hung.starts_with("CPU 2 did not stop at the crash: the capture kernel found it running at lkdtm_HARDLOCKUP+0x4"),
            "{hung}"
        );
        s.outcome = cspd_format::cpu_debug::Outcome::PoweredDown;
        assert_eq!(as_found_note(0, &s, None), None);
    }

    #[test]
    fn stop_points_are_the_saved_comparators_selected_as_stops() {
        let mut s = cspd_format::etm4x::SavedState {
            trcvissctlr: (0b101 << 16) | 0b10,
            cmp_saved: 0b111,
            ..Default::default()
        };
        s.acvr[0] = 0x1000;
        s.acvr[1] = 0x2000;
        s.acvr[2] = 0x3000;
        assert_eq!(stop_points(&s).collect::<Vec<_>>(), [0x1000, 0x3000]);
        s.cmp_saved = 0b011;
        assert_eq!(stop_points(&s).collect::<Vec<_>>(), [0x1000]);
        s.trcvissctlr = 0b111;
        assert_eq!(stop_points(&s).count(), 0);
    }

    #[test]
    fn exceptions_are_branches_from_the_return_address_to_the_vector() {
        let els: VecDeque<Element> = [
            // A taken branch to 0x200, interrupted before its target ran.
            range_c(0x100, 0x110, true, B::Direct, true),
            Element::Exception {
                ret: Some(0x200),
                number: 0xE,
            },
            range(0x1280, 0x1290, true, B::ExceptionReturn),
            range_c(0x200, 0x208, false, B::Direct, true),
            // A data abort at 0x210: the range before it ends in an ordinary instruction.
            range(0x208, 0x210, true, B::None),
            Element::Exception {
                ret: Some(0x210),
                number: 0xC,
            },
            range(0x1200, 0x1204, true, B::Isb),
            range(0x1204, 0x1208, true, B::ExceptionReturn),
            range(0x210, 0x214, true, B::DirectLink),
        ]
        .into();
        // The last range ends in a BL at 0x210 (`bl .+0x40`) that no range follows.
        let (_, branches, _) = summarise(&els, Names::default(), None, 64, &mut |a| {
            (a == 0x210).then_some(0x9400_0010)
        });
        let got: Vec<(Option<String>, String, String)> = branches
            .into_iter()
            .map(|b| {
                (
                    b.from.map(|a| a.addr),
                    b.to.map_or("?".into(), |a| a.addr),
                    b.kind,
                )
            })
            .collect();
        let want = [
            ("0x10c", "0x200", "BR <cond>"),
            ("0x200", "0x1280", "exception"),
            ("0x128c", "0x200", "iBR A64:eret"),
            ("0x210", "0x1200", "exception"),
            ("0x1200", "0x1204", "ISB"),
            ("0x1204", "0x210", "iBR A64:eret"),
            ("0x210", "0x250", "BR b+link"),
        ];
        let want: Vec<(Option<String>, String, String)> = want
            .iter()
            .map(|(f, t, k)| (Some(f.to_string()), t.to_string(), k.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_stream_left_without_code_is_said_to_be_overwritten() {
        // What trace-kdump's ETF held of the panicking CPU once a CPU spinning with interrupts
        // off had filled it: the trace-on and the flush of its stop, no instruction.
        let els: VecDeque<Element> = [Element::TraceOn, Element::NoSync].into();
        let (f, b, _) = summarise(&els, Names::default(), None, 64, &mut |_| None);
        assert!(f.is_empty() && b.is_empty());
        let why = no_code_left(0x12, 2);
        assert!(
            why.starts_with(
                "no executed code of trace ID 0x12 is left in the buffer (2 elements of it)"
            ),
            "{why}"
        );
        assert!(no_code_left(0x12, 1).contains("(1 element of it)"));
    }

    #[test]
    fn a_branch_out_of_the_traced_code_is_listed_when_the_trace_comes_back_elsewhere() {
        // A range filter on 0x1000..=0x1034: a BL out of it, the trace on again at the return
        // into it, the RET out of it, the trace on again at the next entry.
        let els: VecDeque<Element> = [
            range(0x1000, 0x1028, true, B::DirectLink),
            Element::TraceOn,
            range(0x1028, 0x1034, true, B::Return),
            Element::TraceOn,
            range(0x1000, 0x1010, false, B::None),
        ]
        .into();
        // BL 0x1024 -> 0x2000 (imm26 = (0x2000 - 0x1024) / 4).
        let bl = 0x9400_0000 | ((0x2000 - 0x1024) / 4);
        let (_, b, _) = summarise(&els, Names::default(), None, 64, &mut |a| {
            (a == 0x1024).then_some(bl).or(Some(0xD65F_03C0))
        });
        let got: Vec<(Option<String>, Option<String>)> = b
            .iter()
            .map(|x| {
                (
                    x.from.as_ref().map(|a| a.addr.clone()),
                    x.to.as_ref().map(|a| a.addr.clone()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("0x1024".into()), Some("0x2000".into())),
                (Some("0x1030".into()), None),
            ]
        );
    }

    #[test]
    fn the_filter_explains_where_the_trace_went_off_and_an_unfiltered_restart_is_a_loss() {
        // EL0 excluded: an ERET to user space (no target: the trace goes off), the trace on
        // again at the next exception's vector; then a BL into the kernel's own code and a
        // trace-on that nothing in the filter explains.
        let k = 0xFFFF_8000_8000_0000u64;
        let els: VecDeque<Element> = [
            range(k, k + 0x10, true, B::Return),
            Element::TraceOn,
            range(k + 0x800, k + 0x810, true, B::DirectLink),
            Element::TraceOn,
            range(k + 0x900, k + 0x910, false, B::None),
        ]
        .into();
        let f = Filter {
            excluded_ns: 0b101,
            ..Filter::default()
        };
        let bl = 0x9400_0000 | 0x40; // BL +0x100
        let mut word = |a: u64| Some(if a == k + 0x80c { bl } else { 0xD69F_03E0 });
        let (_, b, r) = summarise(&els, Names::default(), Some(&f), 64, &mut word);
        assert_eq!(
            r,
            Restarts {
                total: 2,
                unexplained: 1
            }
        );
        assert_eq!(
            b[0].untraced.as_deref(),
            Some("into code the filter leaves out")
        );
        assert_eq!(b[0].to.as_ref().map(|a| a.addr.clone()), None);
        assert_eq!(
            b[1].to.as_ref().map(|a| a.addr.as_str()),
            Some("0xffff80008000090c")
        );
        assert_eq!(
            b[1].untraced, None,
            "a kernel target is traced with EL0 excluded"
        );
        let line = restarts_line(&r, true).unwrap();
        assert!(
            line.contains("1 where the filter leaves code out (not a loss); 1 not explained"),
            "{line}"
        );
        // Without a filter both are losses; the window's first trace-on is not counted.
        let (_, _, r) = summarise(&els, Names::default(), None, 64, &mut word);
        assert_eq!(
            r,
            Restarts {
                total: 2,
                unexplained: 2
            }
        );
        assert!(restarts_line(&r, false)
            .unwrap()
            .ends_with("2 with no filter set: trace lost there"));
        let mut first: VecDeque<Element> = [Element::NoSync, Element::TraceOn].into();
        first.extend(els.iter().take(1).cloned());
        assert_eq!(
            summarise(&first, Names::default(), None, 64, &mut word).2,
            Restarts::default()
        );
        // A user-space target named by the encoding is EL0.
        assert_eq!(
            f.untraced(Some(0x40_0000))
                .map(Untraced::describe)
                .as_deref(),
            Some("EL0 not traced")
        );
    }

    #[test]
    fn a_last_indirect_branch_has_the_target_the_trace_names_else_none() {
        let els: VecDeque<Element> = [
            range_c(0x100, 0x110, true, B::Direct, true),
            range(0x200, 0x20c, true, B::Return),
        ]
        .into();
        // RET: the target is in a register, and the trace ended before its address packet.
        let (_, b, _) = summarise(&els, Names::default(), None, 64, &mut |_| Some(0xD65F_03C0));
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].from.as_ref().map(|a| a.addr.as_str()), Some("0x208"));
        assert!(b[1].to.is_none());
        // A direct branch whose code cannot be read: listed, target unknown.
        let (_, b, _) = summarise(&els, Names::default(), None, 64, &mut |_| None);
        assert!(b[1].to.is_none());
        // The address packet after the RET named its target: the branch goes there, and the
        // function it enters is the last one, with no instruction executed in it.
        let mut els = els;
        els.push_back(Element::BranchTarget { addr: 0x4000 });
        let (f, b, _) = summarise(&els, Names::default(), None, 64, &mut |_| Some(0xD65F_03C0));
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].from.as_ref().map(|a| a.addr.as_str()), Some("0x208"));
        assert_eq!(b[1].to.as_ref().map(|a| a.addr.as_str()), Some("0x4000"));
        assert_eq!(b[1].kind, "iBR A64:ret");
        let last = f.last().map(|r| (r.start.as_str(), r.instructions));
        assert_eq!(last, Some(("0x4000", 0)));
        // A range that does not end in a taken branch adds nothing.
        let els: VecDeque<Element> = [range_c(0x100, 0x110, false, B::Direct, true)].into();
        assert!(
            summarise(&els, Names::default(), None, 64, &mut |_| Some(0x9400_0010))
                .1
                .is_empty()
        );
    }
}

//! Decoding a capture's trace with OpenCSD's library (the `opencsd` crate over libopencsd's C
//! API), in a confined child process ([`child`]): no temporary file, memory bounded by what the
//! caller keeps.
//!
//! The interface, for the report and the GDB stub:
//!
//! - [`decode_each`] streams every [`Element`] of the first sink that holds trace to a callback,
//!   with the trace ID of the source that emitted it, in trace order; the callback may stop the
//!   decode.
//! - [`decode_last`] keeps only the last `keep` elements of each trace ID ([`Decoded`], a bounded
//!   ring per ID, oldest first), which is what a report of "what ran before the panic" needs.
//! - The decoder reads the traced code through a [`Memory`]; [`CodeImages`] is the one csdump
//!   builds from a capture: vmlinux's text as the kernel ran it (read from the vmcore when it
//!   holds the kernel image, else as built), a snapshot's memory images, and code outside
//!   vmlinux (modules) read from the vmcore through the kernel's page tables on demand.
//!
//! The trace is untrusted input and OpenCSD is C++: it runs in a child process that has a copy
//! of the capture and the memory and may only read, map memory and write its elements to a pipe
//! (see [`child`]); a crash or a hang there ends the decode as partial, with why, and the
//! elements before it are kept. [`decode_in_process`] (or `CSDUMP_DECODER_IN_PROCESS=1`) runs
//! it in csdump's own process instead: for the fuzz target, whose sanitizer instruments the
//! library there, and for input the user trusts.
//!
//! Elements are what OpenCSD's generic elements say, in csdump's words: a range of executed
//! instructions (start, end, instruction count, size of the last one, whether it was a taken
//! branch and what kind of branch), an exception with its preferred return address, an
//! exception return, no-sync and trace-on (where the trace starts or restarts), and no-access
//! (the decoder reached code it has no image of).

pub mod child;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use serde::Serialize;
use thiserror::Error;

use crate::capture::Capture;
use crate::capture::Protocol;
use crate::capture::SinkFormat;
use crate::elf::Vmlinux;

pub use opencsd::Flow;

/// What kind of instruction ends a range (its last instruction), as the decoder classed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BranchType {
    /// Not a branch: the range was cut by an exception (or the trace) before one.
    None,
    /// A direct branch (`B`, `B.cond`, `CBZ`, `TBZ`…).
    Direct,
    /// A direct branch with link (`BL`).
    DirectLink,
    /// An indirect branch (`BR`).
    Indirect,
    /// An indirect branch with link (`BLR`).
    IndirectLink,
    /// `RET`.
    Return,
    /// `ERET`.
    ExceptionReturn,
    /// `ISB` (a P0 element on ETMv4).
    Isb,
    /// `DSB` or `DMB` traced as a waypoint.
    Barrier,
    /// `WFI` or `WFE` traced as a waypoint.
    Wait,
    /// `TSTART`.
    Tstart,
}

impl BranchType {
    fn from_elem(e: &opencsd::Element<'_>) -> Self {
        use opencsd::InstrSubtype as S;
        use opencsd::InstrType as T;
        match (e.last_type(), e.last_subtype()) {
            (T::Branch, S::Link) => Self::DirectLink,
            (T::Branch, _) => Self::Direct,
            (T::IndirectBranch, S::Link) => Self::IndirectLink,
            (T::IndirectBranch, S::Ret | S::ImpliedRet) => Self::Return,
            (T::IndirectBranch, S::Eret) => Self::ExceptionReturn,
            (T::IndirectBranch, S::None) => Self::Indirect,
            (T::Isb, _) => Self::Isb,
            (T::DsbDmb, _) => Self::Barrier,
            (T::WfiWfe, _) => Self::Wait,
            (T::Tstart, _) => Self::Tstart,
            (T::Other, _) => Self::None,
        }
    }

    /// Whether the instruction is a branch (direct or indirect), not a barrier or a wait.
    pub fn is_branch(self) -> bool {
        matches!(
            self,
            Self::Direct
                | Self::DirectLink
                | Self::Indirect
                | Self::IndirectLink
                | Self::Return
                | Self::ExceptionReturn
        )
    }

    /// Whether the target is in a register (the trace names it with an address packet).
    pub fn is_indirect(self) -> bool {
        matches!(
            self,
            Self::Indirect | Self::IndirectLink | Self::Return | Self::ExceptionReturn
        )
    }

    /// OpenCSD's name for it (`BR`, `BR b+link`, `iBR A64:ret`, `ISB`…), as its tools print
    /// a range's last instruction.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "---",
            Self::Direct => "BR",
            Self::DirectLink => "BR b+link",
            Self::Indirect => "iBR",
            Self::IndirectLink => "iBR b+link",
            Self::Return => "iBR A64:ret",
            Self::ExceptionReturn => "iBR A64:eret",
            Self::Isb => "ISB",
            Self::Barrier => "DSB.DMB",
            Self::Wait => "WFI.WFE",
            Self::Tstart => "TSTART",
        }
    }
}

/// What a decoded trace element says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Element {
    /// Instructions `start..end` were executed; the last one (at `end - last_size`) is of type
    /// `branch`, and was executed (`taken`, for a branch) or not.
    Range {
        /// First instruction.
        start: u64,
        /// Address after the last instruction.
        end: u64,
        /// Number of instructions.
        count: u32,
        /// Size of the last instruction in bytes.
        last_size: u32,
        /// Whether the last instruction was executed (a branch: taken).
        taken: bool,
        /// What the last instruction is.
        branch: BranchType,
        /// Whether the last instruction is conditional.
        conditional: bool,
    },
    /// The decoder reached `addr` but has no memory image there.
    NoAccess {
        /// The address.
        addr: u64,
    },
    /// An exception; `ret` is its preferred return address, when the trace gave one.
    Exception {
        /// Preferred return address.
        ret: Option<u64>,
        /// The ETMv4 exception number (IHI 0064, exception packet: 0xE IRQ, 0xC data fault…).
        number: u32,
    },
    /// Return from an exception.
    ExceptionReturn,
    /// The trace is not synchronised: decode start, or after an overflow or a bad packet.
    NoSync,
    /// A trace-on: the trace starts, or restarts after a gap.
    TraceOn,
    /// Where the last branch went: the trace ends with a taken indirect branch (a return, an
    /// `ERET`, a `BR`) or an exception (to its vector), and the address packet that named its
    /// target, with no instruction after it (the trace unit stopped there, at a stop point or
    /// when the sink stopped). Only ever a trace ID's last element; the instruction at `addr`
    /// was not executed.
    BranchTarget {
        /// The branch's target.
        addr: u64,
    },
}

impl Element {
    /// Returns the first address the element executed or reached, if any.
    pub fn addr(&self) -> Option<u64> {
        match self {
            Self::Range { start, .. } => Some(*start),
            Self::NoAccess { addr } | Self::BranchTarget { addr } => Some(*addr),
            Self::Exception { ret, .. } => *ret,
            _ => None,
        }
    }

    /// The branch name of a range's last instruction with `<cond>` when conditional, as
    /// OpenCSD's tools print it; empty for other elements.
    pub fn branch_name(&self) -> String {
        match self {
            Self::Range {
                branch,
                conditional: true,
                ..
            } => format!("{} <cond>", branch.name()),
            Self::Range { branch, .. } => branch.name().to_string(),
            _ => String::new(),
        }
    }

    fn from_elem(e: &opencsd::Element<'_>) -> Option<Self> {
        use opencsd::ElemKind as K;
        Some(match e.kind() {
            K::InstrRange => Self::Range {
                start: e.start(),
                end: e.end(),
                count: e.instructions(),
                last_size: e.last_size(),
                taken: e.last_executed(),
                branch: BranchType::from_elem(e),
                conditional: e.last_conditional(),
            },
            K::AddrNacc => Self::NoAccess { addr: e.start() },
            K::Exception => Self::Exception {
                ret: e.return_address(),
                number: e.exception_number(),
            },
            K::ExceptionReturn => Self::ExceptionReturn,
            K::NoSync => Self::NoSync,
            K::TraceOn => Self::TraceOn,
            _ => return None,
        })
    }
}

/// Name of an ETMv4 exception number (IHI 0064, Exception instruction trace packet), for
/// AArch64 PEs.
pub fn exception_name(number: u32) -> &'static str {
    match number {
        0x0 => "PE reset",
        0x1 => "debug halt",
        0x2 => "call (SVC, HVC, SMC)",
        0x3 => "trap",
        0x4 => "system error",
        0x6 => "instruction debug",
        0x7 => "data debug",
        0xA => "alignment",
        0xB => "instruction fault",
        0xC => "data fault",
        0xE => "IRQ",
        0xF => "FIQ",
        _ => "exception",
    }
}

/// Why trace could not be decoded.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// The capture has nothing to decode (named why).
    #[error("{0}")]
    Nothing(String),
    /// The library refused the configuration or the trace.
    #[error(transparent)]
    Library(#[from] opencsd::Error),
    /// The library refused them in the decoder's process (its message), or that process could
    /// not be started.
    #[error("{0}")]
    Apart(String),
}

/// What [`decode_each`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Index of the sink decoded.
    pub sink: usize,
    /// Trace bytes decoded.
    pub bytes: u64,
    /// Whether the callback stopped the decode.
    pub stopped: bool,
    /// Errors the library logged (a packet cut at the start of a wrapped buffer is usual), the
    /// first [`opencsd::MAX_ERRORS`].
    pub errors: Vec<String>,
    /// Errors it logged in all.
    pub error_count: u64,
    /// Why the decode ended before the end of the trace (the elements before it are good).
    pub fatal: Option<String>,
}

/// Elements kept per trace ID.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// Last elements, oldest first, by trace ID.
    pub by_id: BTreeMap<u8, VecDeque<Element>>,
    /// Elements seen in total, by trace ID.
    pub totals: BTreeMap<u8, u64>,
    /// Errors the decoder logged, the first [`opencsd::MAX_ERRORS`].
    pub errors: Vec<String>,
    /// Errors it logged in all.
    pub error_count: u64,
    /// Trace bytes decoded.
    pub bytes: u64,
    /// Why the decode ended before the end of the trace (the elements before it are good).
    pub fatal: Option<String>,
}

/// The traced code, as the decoder reads it.
pub trait Memory {
    /// Fills `buf` from address `addr` on, as far as it can; returns how many bytes it filled
    /// (0: no code there).
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize;

    /// Pages of code read on demand so far, and their bytes (none for memory that holds all it
    /// serves).
    fn read_on_demand(&self) -> (usize, usize) {
        (0, 0)
    }

    /// Counts what a copy of this memory read on demand in the decoder's process.
    fn add_read_on_demand(&mut self, _pages: usize, _bytes: usize) {}
}

/// Memory that holds nothing (the decoder then only follows what the trace says outright).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMemory;

impl Memory for NoMemory {
    fn read(&mut self, _addr: u64, _buf: &mut [u8]) -> usize {
        0
    }
}

static IN_PROCESS: AtomicBool = AtomicBool::new(false);

/// Makes later decodes run OpenCSD in this process (`true`) or in a confined child (`false`, the
/// default): for the fuzz target, whose sanitizer instruments the library in process, and for
/// input the user trusts (as `CSDUMP_DECODER_IN_PROCESS=1` does).
pub fn decode_in_process(yes: bool) {
    IN_PROCESS.store(yes, Ordering::Relaxed);
}

fn in_process() -> bool {
    IN_PROCESS.load(Ordering::Relaxed)
        || std::env::var_os("CSDUMP_DECODER_IN_PROCESS").is_some_and(|v| v == "1")
}

/// What the report and the GDB stub say of where the decoder ran.
pub fn decoder_name() -> String {
    let place = if in_process() {
        "in process"
    } else {
        "in a confined child process"
    };
    format!("OpenCSD {} (libopencsd, {place})", opencsd::version())
}

/// Streams every element of the first sink of `capture` that holds trace to `f`, with its
/// trace ID, reading code through `memory`.
pub fn decode_each(
    capture: &Capture<'_>,
    memory: &mut dyn Memory,
    mut f: impl FnMut(u8, &Element) -> Flow,
) -> Result<Summary, DecodeError> {
    if capture.etms.is_empty() {
        return Err(DecodeError::Nothing("no ETMv4 or ETE source".into()));
    }
    let Some(sink) = capture.sinks.iter().position(|s| !s.frames().is_empty()) else {
        return Err(DecodeError::Nothing(
            capture
                .no_trace()
                .unwrap_or_else(|| "no trace in any sink".into()),
        ));
    };
    if in_process() {
        decode_here(capture, sink, memory, &mut f)
    } else {
        decode_apart(capture, sink, memory, &mut f)
    }
}

/// [`decode_each`] in a confined child process: the child decodes and sends each element, then
/// the summary; the parent hands them to `f`.
fn decode_apart(
    capture: &Capture<'_>,
    sink: usize,
    memory: &mut dyn Memory,
    f: &mut dyn FnMut(u8, &Element) -> Flow,
) -> Result<Summary, DecodeError> {
    let mut child = child::spawn(|tx| {
        let r = decode_here(capture, sink, &mut *memory, &mut |id, e| {
            wire::send_element(tx, id, e);
            if tx.closed {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        match r {
            Ok(s) => wire::send_summary(tx, &s, memory.read_on_demand()),
            Err(e) => wire::send_error(tx, &e.to_string()),
        }
    })
    .map_err(|e| DecodeError::Apart(format!("cannot start the decoder's process: {e}")))?;
    let (mut summary, mut refused, mut bad) = (None, None, None);
    loop {
        match wire::receive(&mut child.stream) {
            Ok(None) => break,
            Ok(Some(wire::Msg::Element(id, e))) => {
                if f(id, &e) == Flow::Stop {
                    child.kill();
                    return Ok(Summary {
                        sink,
                        stopped: true,
                        ..Summary::default()
                    });
                }
            }
            Ok(Some(wire::Msg::Summary(s, (pages, bytes)))) => {
                memory.add_read_on_demand(pages, bytes);
                summary = Some(s);
            }
            Ok(Some(wire::Msg::Error(m))) => refused = Some(m),
            Err(e) => {
                bad = Some(format!("sent a damaged stream ({e})"));
                break;
            }
        }
    }
    let ended = child.finish();
    if let Some(m) = refused {
        if ended.is_none() && bad.is_none() {
            return Err(DecodeError::Apart(m));
        }
    }
    match (summary, ended.or(bad)) {
        (Some(s), None) => Ok(s),
        (s, why) => {
            let why = why.unwrap_or_else(|| "ended without its summary".into());
            let mut s = s.unwrap_or(Summary {
                sink,
                ..Summary::default()
            });
            s.fatal = Some(format!(
                "OpenCSD's decoder process {why}; the elements decoded before that are kept"
            ));
            Ok(s)
        }
    }
}

/// [`decode_each`] in this process.
fn decode_here(
    capture: &Capture<'_>,
    sink: usize,
    memory: &mut dyn Memory,
    f: &mut dyn FnMut(u8, &Element) -> Flow,
) -> Result<Summary, DecodeError> {
    let s = &capture.sinks[sink];
    let format = match s.format {
        SinkFormat::Frames => opencsd::Format::FRAMES,
        SinkFormat::Tpiu => opencsd::Format::TPIU,
        SinkFormat::Single => opencsd::Format::Single,
    };
    let mut tree = opencsd::DecodeTree::new(format)?;
    for e in &capture.etms {
        let core = capture
            .core_types
            .iter()
            .find(|(c, _)| *c == e.state.cpu)
            .and_then(|(_, t)| crate::cores::core_arch(t))
            .unwrap_or(opencsd::Core::ARMV8_A);
        let st = &e.state;
        let idr = |n: usize| st.idr.get(n).copied().unwrap_or(0);
        match e.protocol {
            Protocol::Etmv4 => tree.add_etmv4(&opencsd::Etmv4Config {
                idr: [
                    idr(0),
                    idr(1),
                    idr(2),
                    idr(8),
                    idr(9),
                    idr(10),
                    idr(11),
                    idr(12),
                    idr(13),
                ],
                configr: st.trcconfigr,
                traceidr: st.trctraceidr,
                core,
            })?,
            Protocol::Ete => tree.add_ete(&opencsd::EteConfig {
                idr: [idr(0), idr(1), idr(2), idr(8)],
                devarch: st.devarch,
                configr: st.trcconfigr,
                traceidr: st.trctraceidr,
                core,
            })?,
        };
        // A single-source buffer has one decoder, the first source (as OpenCSD's reader does).
        if s.format == SinkFormat::Single {
            break;
        }
    }
    tree.set_memory(|addr, buf| memory.read(addr, buf))?;
    // A packet the decoder could not make sense of, or code that does not match the trace:
    // the decoder says so with a no-sync element and resynchronises.
    let mut errors = Vec::new();
    let mut error_count = 0u64;
    // The trace IDs whose last element so far is a taken indirect branch or an exception: the
    // address packet after it names where the CPU went.
    let mut awaiting = [false; 128];
    let out = tree.decode(s.frames(), |id, el| {
        use opencsd::Unsync;
        if el.kind() == opencsd::ElemKind::NoSync {
            let why = match el.unsync_reason() {
                Unsync::BadPacket => Some("a packet it cannot decode (corrupt trace)"),
                Unsync::BadImage => Some("code that does not match the trace (wrong image?)"),
                _ => None,
            };
            if let Some(why) = why {
                error_count += 1;
                if errors.len() < opencsd::MAX_ERRORS {
                    errors.push(format!(
                        "trace byte {}, ID {id:#x}: {why}; resynchronised",
                        el.index()
                    ));
                }
            }
        }
        match Element::from_elem(&el) {
            Some(e) => {
                if let Some(a) = awaiting.get_mut(usize::from(id)) {
                    *a = match e {
                        Element::Range {
                            taken: true,
                            branch,
                            ..
                        } => branch.is_indirect(),
                        Element::Exception { .. } => true,
                        _ => false,
                    };
                }
                f(id, &e)
            }
            None => Flow::Continue,
        }
    })?;
    // The target of a last indirect branch, from the address packet after it.
    if !out.stopped && out.fatal.is_none() {
        for (id, _) in awaiting.iter().enumerate().filter(|(_, a)| **a) {
            // CAST: an index of a 128-entry array.
            let id = id as u8;
            if let Some(addr) = tree.trailing_address(id) {
                if f(id, &Element::BranchTarget { addr }) == Flow::Stop {
                    break;
                }
            }
        }
    }
    for l in &out.errors {
        error_count += 1;
        if errors.len() < opencsd::MAX_ERRORS {
            errors.push(if l.trace_id == 0xFF || l.trace_id == 0 {
                format!("trace byte {}: {}", l.index, l.message)
            } else {
                format!(
                    "trace byte {}, ID {:#x}: {}",
                    l.index, l.trace_id, l.message
                )
            });
        }
    }
    Ok(Summary {
        sink,
        bytes: out.bytes,
        stopped: out.stopped,
        errors,
        error_count,
        fatal: out.fatal,
    })
}

/// Decodes the first sink of `capture` that holds trace, keeping the last `keep` elements of
/// each trace ID.
pub fn decode_last(
    capture: &Capture<'_>,
    memory: &mut dyn Memory,
    keep: usize,
) -> Result<Decoded, DecodeError> {
    let mut d = Decoded::default();
    let s = decode_each(capture, memory, |id, el| {
        let q = d.by_id.entry(id).or_default();
        if keep > 0 {
            if q.len() == keep {
                q.pop_front();
            }
            q.push_back(el.clone());
        }
        *d.totals.entry(id).or_default() += 1;
        Flow::Continue
    })?;
    d.errors = s.errors;
    d.error_count = s.error_count;
    d.bytes = s.bytes;
    d.fatal = s.fatal;
    Ok(d)
}

/// Bytes of one image: borrowed from the input, owned, or a mapped file.
enum Bytes<'a> {
    Borrowed(Cow<'a, [u8]>),
    Mapped(memmap2::Mmap),
}

impl Bytes<'_> {
    fn get(&self) -> &[u8] {
        match self {
            Self::Borrowed(b) => b,
            Self::Mapped(m) => m,
        }
    }
}

struct Image<'a> {
    addr: u64,
    bytes: Bytes<'a>,
}

/// Most bytes of code [`CodeImages`] reads through the kernel's page tables (64 MiB).
pub const MAX_PAGED_BYTES: usize = 64 << 20;
const PAGE: u64 = 4096;

/// The code a capture's kernel ran, for the decoder and the report.
pub struct CodeImages<'a> {
    images: Vec<Image<'a>>,
    last: usize,
    kmem: Option<crate::kmem::KernelMemory<'a>>,
    core: Option<&'a crate::vmcore::Vmcore>,
    pages: HashMap<u64, Option<Box<[u8]>>>,
    paged: usize,
    /// Pages and bytes read on demand by the decoder's process.
    paged_apart: (usize, usize),
    /// Another boot's page tables (`text_from`) and `kimage_voffset`: code mapped outside
    /// vmlinux's addresses is served where it maps into the kernel image (the entry trampoline's
    /// fixmap alias), never from another boot's other memory (its modules).
    image_aliases: Option<(crate::kmem::KernelMemory<'a>, u64)>,
    /// Notes for the reader (the text as built, say).
    pub notes: Vec<String>,
    /// Executable sections of vmlinux read from the vmcore (the text as the kernel ran it).
    pub from_core: usize,
}

impl<'a> CodeImages<'a> {
    /// The code of `capture`: vmlinux's executable sections at their runtime addresses (read
    /// from the vmcore when it holds them, else vmlinux as built), else the memory images of a
    /// snapshot input; and on demand, code outside them read through the kernel's page tables
    /// of a vmcore.
    pub fn new(capture: &Capture<'a>, vmlinux: Option<(&'a [u8], &Vmlinux)>) -> Self {
        let mut m = Self {
            images: Vec::new(),
            last: 0,
            kmem: None,
            core: capture.core,
            pages: HashMap::new(),
            paged: 0,
            paged_apart: (0, 0),
            image_aliases: None,
            notes: Vec::new(),
            from_core: 0,
        };
        if let Some((bytes, elf)) = vmlinux {
            let reloc = capture.kernel_relocation(elf);
            for s in &elf.exec {
                let Some(built) = usize::try_from(s.offset)
                    .ok()
                    .zip(usize::try_from(s.size).ok())
                    .and_then(|(o, n)| bytes.get(o..o.checked_add(n)?))
                else {
                    continue;
                };
                let addr = s.addr.wrapping_add(reloc);
                let ran = capture
                    .runtime_text(addr, s.size)
                    .map(Cow::<[u8]>::Owned)
                    .filter(|b| b.len() == built.len());
                let b = match ran {
                    Some(b) => {
                        m.from_core += 1;
                        b
                    }
                    None => Cow::Borrowed(built),
                };
                m.images.push(Image {
                    addr,
                    bytes: Bytes::Borrowed(b),
                });
            }
            if m.images.is_empty() {
                m.notes
                    .push("vmlinux has no executable section: no memory image".into());
            } else if m.from_core == 0 {
                m.notes.push(
                    "kernel text from vmlinux, as built: code the kernel patched at run time \
                     (alternatives, jump labels) may decode wrongly; a vmcore gives the text as \
                     it ran"
                        .into(),
                );
            }
        } else {
            for mi in &capture.memory {
                match map_image(mi) {
                    Ok(b) => m.images.push(Image {
                        addr: mi.address,
                        bytes: Bytes::Mapped(b),
                    }),
                    Err(e) => m.notes.push(e),
                }
            }
        }
        m.images.sort_by_key(|i| i.addr);
        if let (Some(core), Some(info)) = (capture.core, capture.vmcoreinfo) {
            m.kmem = crate::kmem::KernelMemory::new(core, info);
        }
        m
    }

    /// Replaces vmlinux's text as built with the text another vmcore of the same kernel holds
    /// (`text`: another boot of the same build at the same KASLR offset and physical load
    /// address, such as a memory dump taken after a warm reboot), for a capture whose own input
    /// holds no kernel text (a region file). `kimage_voffset` is the capture's. Returns how many
    /// sections were replaced; a section the vmcore does not hold whole stays as built.
    ///
    /// That boot's page tables then serve code mapped outside vmlinux's addresses where it maps
    /// into the kernel image (the entry trampoline's fixmap alias, through which every exception
    /// from user space enters); code elsewhere (modules) is not read from another boot.
    pub fn text_from(
        &mut self,
        text: &'a crate::vmcore::Vmcore,
        kimage_voffset: u64,
        name: &str,
    ) -> usize {
        if self.from_core > 0 {
            return 0;
        }
        let mut n = 0;
        for img in &mut self.images {
            let len = img.bytes.get().len();
            let Some(paddr) = img.addr.checked_sub(kimage_voffset) else {
                continue;
            };
            if let Ok(b) = text.read_phys(paddr, len as u64) {
                if b.len() == len {
                    img.bytes = Bytes::Borrowed(Cow::Owned(b));
                    n += 1;
                }
            }
        }
        if n > 0 && self.kmem.is_none() {
            let info = text.vmcoreinfo().map(String::from_utf8_lossy);
            self.image_aliases = info
                .and_then(|i| crate::kmem::KernelMemory::new(text, &i))
                .map(|k| (k, kimage_voffset));
        }
        if n > 0 {
            self.notes
                .retain(|s| !s.starts_with("kernel text from vmlinux, as built"));
            self.notes.push(format!(
                "kernel text read from {name} (another boot of the same kernel at the same KASLR \
                 offset): code that boot patched otherwise than the one that panicked decodes \
                 another way than it ran"
            ));
        }
        n
    }

    /// Whether any code is known (images, or a vmcore's page tables).
    pub fn has_code(&self) -> bool {
        !self.images.is_empty() || self.kmem.is_some()
    }

    /// Pages of code read through the kernel's page tables so far, and their bytes.
    pub fn paged(&self) -> (usize, usize) {
        (
            self.pages.values().flatten().count() + self.paged_apart.0,
            self.paged + self.paged_apart.1,
        )
    }

    fn image_read(&mut self, addr: u64, buf: &mut [u8]) -> Option<usize> {
        let hit = |i: &Image<'_>| {
            addr.checked_sub(i.addr)
                .is_some_and(|o| o < i.bytes.get().len() as u64)
        };
        let idx = if self.images.get(self.last).is_some_and(hit) {
            self.last
        } else {
            let i = self
                .images
                .partition_point(|i| i.addr <= addr)
                .checked_sub(1)?;
            if !hit(self.images.get(i)?) {
                return None;
            }
            self.last = i;
            i
        };
        let img = self.images.get(idx)?;
        let off = usize::try_from(addr - img.addr).ok()?;
        let src = img.bytes.get().get(off..)?;
        let n = src.len().min(buf.len());
        buf.get_mut(..n)?.copy_from_slice(src.get(..n)?);
        Some(n)
    }

    /// Reads the kernel image's bytes at `addr` outside vmlinux's addresses, through
    /// [`Self::text_from`]'s page tables: at most to the end of `addr`'s page.
    fn alias_read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let Some((km, voff)) = &self.image_aliases else {
            return 0;
        };
        if addr < crate::capture::KERNEL_SPACE {
            return 0;
        }
        let Some(va) = km.phys(addr).map(|pa| pa.wrapping_add(*voff)) else {
            return 0;
        };
        // CAST: below PAGE.
        let room = (PAGE - (addr & (PAGE - 1))) as usize;
        let n = buf.len().min(room);
        let Some(b) = buf.get_mut(..n) else {
            return 0;
        };
        self.image_read(va, b).unwrap_or(0)
    }

    fn page_read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        if self.image_aliases.is_some() {
            return self.alias_read(addr, buf);
        }
        let (Some(km), Some(core)) = (&self.kmem, self.core) else {
            return 0;
        };
        if addr < crate::capture::KERNEL_SPACE {
            return 0;
        }
        let page = addr & !(PAGE - 1);
        if !self.pages.contains_key(&page) {
            let bytes = if self.paged + PAGE as usize > MAX_PAGED_BYTES {
                None
            } else {
                km.phys(page)
                    .and_then(|pa| core.read_phys(pa, PAGE).ok())
                    .map(Vec::into_boxed_slice)
            };
            if bytes.is_some() {
                self.paged += PAGE as usize;
            }
            self.pages.insert(page, bytes);
        }
        let Some(Some(p)) = self.pages.get(&page) else {
            return 0;
        };
        // CAST: below PAGE.
        let off = (addr - page) as usize;
        let src = p.get(off..).unwrap_or(&[]);
        let n = src.len().min(buf.len());
        if let (Some(d), Some(s)) = (buf.get_mut(..n), src.get(..n)) {
            d.copy_from_slice(s);
        }
        n
    }
}

impl Memory for CodeImages<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        match self.image_read(addr, buf) {
            Some(n) => n,
            None => self.page_read(addr, buf),
        }
    }

    fn read_on_demand(&self) -> (usize, usize) {
        self.paged()
    }

    fn add_read_on_demand(&mut self, pages: usize, bytes: usize) {
        self.paged_apart.0 += pages;
        self.paged_apart.1 += bytes;
    }
}

/// Largest memory image of a snapshot csdump maps (4 GiB).
pub const MAX_IMAGE_BYTES: u64 = 4 << 30;

/// Maps the bytes of a snapshot memory image: a regular file, at most [`MAX_IMAGE_BYTES`].
fn map_image(m: &crate::capture::MemImage) -> Result<memmap2::Mmap, String> {
    let name = m.path.display();
    let f = File::open(&m.path).map_err(|e| format!("{name}: memory image not read: {e}"))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("{name}: memory image not read: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{name}: memory image is not a regular file; not read"
        ));
    }
    let end = m.offset.checked_add(m.length).filter(|&e| e <= meta.len());
    if end.is_none() || m.length > MAX_IMAGE_BYTES || m.length == 0 {
        return Err(format!(
            "{name}: memory image offset {:#x} length {:#x} is not within the file's {:#x} \
             bytes (or over {MAX_IMAGE_BYTES:#x}); not read",
            m.offset,
            m.length,
            meta.len()
        ));
    }
    // SAFETY: a read-only private mapping of a regular file csdump does not write; a file
    // truncated underneath raises SIGBUS, not unsafety in code that reads the slice.
    unsafe {
        memmap2::MmapOptions::new()
            .offset(m.offset)
            .len(m.length as usize)
            .map(&f)
    }
    .map_err(|e| format!("{name}: memory image not mapped: {e}"))
}

/// The decoder process's stream: one tag byte, then the record, little-endian.
///
/// `E` an element (trace ID, element kind, its fields), `S` the summary (with what the memory
/// read on demand), `X` the library's refusal. The parent reads it as it would read any input:
/// every length is bounded, an unknown tag or a cut record is an error.
mod wire {
    use super::child::read_record;
    use super::child::Sender;
    use super::BranchType;
    use super::Element;
    use super::Read;
    use super::Summary;

    /// Longest string the parent takes from the stream.
    const MAX_TEXT: usize = 64 << 10;

    const BRANCHES: [BranchType; 11] = [
        BranchType::None,
        BranchType::Direct,
        BranchType::DirectLink,
        BranchType::Indirect,
        BranchType::IndirectLink,
        BranchType::Return,
        BranchType::ExceptionReturn,
        BranchType::Isb,
        BranchType::Barrier,
        BranchType::Wait,
        BranchType::Tstart,
    ];

    /// One record of the stream.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Msg {
        Element(u8, Element),
        Summary(Summary, (usize, usize)),
        Error(String),
    }

    pub fn send_element(tx: &mut Sender, id: u8, e: &Element) {
        let mut b = [0u8; 32];
        b[0] = b'E';
        b[1] = id;
        let n = match *e {
            Element::Range {
                start,
                end,
                count,
                last_size,
                taken,
                branch,
                conditional,
            } => {
                b[2] = b'r';
                b[3..11].copy_from_slice(&start.to_le_bytes());
                b[11..19].copy_from_slice(&end.to_le_bytes());
                b[19..23].copy_from_slice(&count.to_le_bytes());
                b[23..27].copy_from_slice(&last_size.to_le_bytes());
                b[27] = u8::from(taken) | u8::from(conditional) << 1;
                // CAST: an index of BRANCHES.
                b[28] = BRANCHES.iter().position(|t| *t == branch).unwrap_or(0) as u8;
                29
            }
            Element::NoAccess { addr } | Element::BranchTarget { addr } => {
                b[2] = if matches!(e, Element::NoAccess { .. }) {
                    b'n'
                } else {
                    b't'
                };
                b[3..11].copy_from_slice(&addr.to_le_bytes());
                11
            }
            Element::Exception { ret, number } => {
                b[2] = b'x';
                b[3] = u8::from(ret.is_some());
                b[4..12].copy_from_slice(&ret.unwrap_or(0).to_le_bytes());
                b[12..16].copy_from_slice(&number.to_le_bytes());
                16
            }
            Element::ExceptionReturn => {
                b[2] = b'e';
                3
            }
            Element::NoSync => {
                b[2] = b's';
                3
            }
            Element::TraceOn => {
                b[2] = b'o';
                3
            }
        };
        tx.send(&b[..n]);
    }

    fn text(tx: &mut Sender, t: &str) {
        let t = &t.as_bytes()[..t.len().min(MAX_TEXT)];
        // CAST: at most MAX_TEXT.
        tx.send(&(t.len() as u32).to_le_bytes());
        tx.send(t);
    }

    pub fn send_summary(tx: &mut Sender, s: &Summary, paged: (usize, usize)) {
        tx.send(b"S");
        tx.send(&(s.sink as u64).to_le_bytes());
        tx.send(&s.bytes.to_le_bytes());
        tx.send(&[u8::from(s.stopped), u8::from(s.fatal.is_some())]);
        tx.send(&s.error_count.to_le_bytes());
        text(tx, s.fatal.as_deref().unwrap_or(""));
        let errors = &s.errors[..s.errors.len().min(opencsd::MAX_ERRORS)];
        // CAST: at most MAX_ERRORS.
        tx.send(&(errors.len() as u32).to_le_bytes());
        for e in errors {
            text(tx, e);
        }
        tx.send(&(paged.0 as u64).to_le_bytes());
        tx.send(&(paged.1 as u64).to_le_bytes());
    }

    pub fn send_error(tx: &mut Sender, message: &str) {
        tx.send(b"X");
        text(tx, message);
    }

    type Result<T> = std::io::Result<T>;

    fn bad(what: &str) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
    }

    fn array<const N: usize>(r: &mut impl Read) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        if read_record(r, &mut b)? {
            Ok(b)
        } else {
            Err(bad("a record cut short"))
        }
    }

    fn u32_(r: &mut impl Read) -> Result<u32> {
        Ok(u32::from_le_bytes(array(r)?))
    }

    fn u64_(r: &mut impl Read) -> Result<u64> {
        Ok(u64::from_le_bytes(array(r)?))
    }

    fn usize_(r: &mut impl Read) -> Result<usize> {
        usize::try_from(u64_(r)?).map_err(|_| bad("a count beyond this machine's"))
    }

    fn text_(r: &mut impl Read) -> Result<String> {
        let n = u32_(r)? as usize;
        if n > MAX_TEXT {
            return Err(bad("a string longer than any the decoder sends"));
        }
        let mut b = vec![0u8; n];
        if n > 0 && !read_record(r, &mut b)? {
            return Err(bad("a record cut short"));
        }
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// The next record; `None` at the end of the stream.
    pub fn receive(r: &mut impl Read) -> Result<Option<Msg>> {
        let mut tag = [0u8; 1];
        if !read_record(r, &mut tag)? {
            return Ok(None);
        }
        Ok(Some(match tag[0] {
            b'E' => {
                let [id, kind] = array(r)?;
                let e = match kind {
                    b'r' => {
                        let b: [u8; 26] = array(r)?;
                        let u64_at = |i: usize| {
                            u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default())
                        };
                        let u32_at = |i: usize| {
                            u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default())
                        };
                        Element::Range {
                            start: u64_at(0),
                            end: u64_at(8),
                            count: u32_at(16),
                            last_size: u32_at(20),
                            taken: b[24] & 1 != 0,
                            conditional: b[24] & 2 != 0,
                            branch: *BRANCHES
                                .get(usize::from(b[25]))
                                .ok_or_else(|| bad("an unknown branch type"))?,
                        }
                    }
                    b'n' => Element::NoAccess { addr: u64_(r)? },
                    b't' => Element::BranchTarget { addr: u64_(r)? },
                    b'x' => {
                        let [has] = array(r)?;
                        let ret = u64_(r)?;
                        Element::Exception {
                            ret: (has != 0).then_some(ret),
                            number: u32_(r)?,
                        }
                    }
                    b'e' => Element::ExceptionReturn,
                    b's' => Element::NoSync,
                    b'o' => Element::TraceOn,
                    _ => return Err(bad("an unknown element kind")),
                };
                Msg::Element(id, e)
            }
            b'S' => {
                let sink = usize_(r)?;
                let bytes = u64_(r)?;
                let [stopped, fatal] = array(r)?;
                let error_count = u64_(r)?;
                let fatal_text = text_(r)?;
                let n = u32_(r)? as usize;
                if n > opencsd::MAX_ERRORS {
                    return Err(bad("more error messages than the decoder keeps"));
                }
                let errors = (0..n).map(|_| text_(r)).collect::<Result<Vec<_>>>()?;
                let paged = (usize_(r)?, usize_(r)?);
                Msg::Summary(
                    Summary {
                        sink,
                        bytes,
                        stopped: stopped != 0,
                        errors,
                        error_count,
                        fatal: (fatal != 0).then_some(fatal_text),
                    },
                    paged,
                )
            }
            b'X' => Msg::Error(text_(r)?),
            _ => return Err(bad("an unknown record")),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_and_the_summary_cross_the_pipe_unchanged() {
        use wire::Msg;
        let els = [
            Element::Range {
                start: 0xffff_8000_8001_0000,
                end: 0xffff_8000_8001_0040,
                count: 16,
                last_size: 4,
                taken: true,
                branch: BranchType::Tstart,
                conditional: true,
            },
            Element::NoAccess { addr: 0x1234 },
            Element::Exception {
                ret: Some(0xffff_0000_0000_1000),
                number: 0xE,
            },
            Element::Exception {
                ret: None,
                number: 0xC,
            },
            Element::ExceptionReturn,
            Element::NoSync,
            Element::TraceOn,
            Element::BranchTarget { addr: u64::MAX },
        ];
        let summary = Summary {
            sink: 2,
            bytes: 1 << 20,
            stopped: false,
            errors: vec!["trace byte 16: a packet cut".into(), String::new()],
            error_count: 7,
            fatal: Some("the tree refused".into()),
        };
        let sent = els.clone();
        let s2 = summary.clone();
        let mut ch = child::spawn(move |tx| {
            for (i, e) in sent.iter().enumerate() {
                // CAST: a handful of elements.
                wire::send_element(tx, i as u8, e);
            }
            wire::send_summary(tx, &s2, (3, 12288));
            wire::send_error(tx, "OpenCSD: refused");
        })
        .expect("fork");
        let mut got = Vec::new();
        while let Some(m) = wire::receive(&mut ch.stream).expect("a whole stream") {
            got.push(m);
        }
        assert_eq!(ch.finish(), None);
        let mut want: Vec<Msg> = els
            .into_iter()
            .enumerate()
            .map(|(i, e)| Msg::Element(i as u8, e))
            .collect();
        want.push(Msg::Summary(summary, (3, 12288)));
        want.push(Msg::Error("OpenCSD: refused".into()));
        assert_eq!(got, want);
    }

    #[test]
    fn a_damaged_stream_is_an_error_not_a_guess() {
        // A range whose branch type is past the last one.
        let mut range = b"E\x10r".to_vec();
        range.extend([0u8; 25]);
        range.push(0x99);
        let cases: [(&[u8], &str); 5] = [
            (b"Q", "an unknown record"),
            (b"E\x10z", "an unknown element kind"),
            (b"E\x10r\x00\x01", "a record cut short"),
            (
                b"X\xff\xff\xff\xff",
                "a string longer than any the decoder sends",
            ),
            (&range, "an unknown branch type"),
        ];
        for (bytes, want) in cases {
            let mut r = bytes;
            let e = wire::receive(&mut r).expect_err(want);
            assert_eq!(e.to_string(), want);
        }
        let mut empty: &[u8] = b"";
        assert_eq!(wire::receive(&mut empty).expect("end"), None);
    }

    #[test]
    fn branch_names() {
        let r = |branch, conditional| Element::Range {
            start: 0,
            end: 4,
            count: 1,
            last_size: 4,
            taken: true,
            branch,
            conditional,
        };
        assert_eq!(r(BranchType::Direct, true).branch_name(), "BR <cond>");
        assert_eq!(r(BranchType::Return, false).branch_name(), "iBR A64:ret");
        assert!(BranchType::Return.is_indirect() && BranchType::Return.is_branch());
        assert!(!BranchType::Isb.is_branch() && !BranchType::None.is_branch());
    }
}

//! What one vCPU executed, from the blocks QEMU runs, as P0 elements and exceptions.
//!
//! QEMU ends a translation block at every branch, exception-generating instruction, `ISB`, `WFI`
//! and `WFE`, and takes interrupts only between blocks. So the block that runs next tells how the
//! previous one ended: the fall-through or the target of its last instruction, or an exception
//! vector. Two cases need more than the two addresses, and plugin API v1 reads no registers:
//!
//! - an exception taken right after a conditional or indirect branch, before its target ran: the
//!   outcome is the exception's preferred return address, `ELR_EL1`;
//! - a synchronous exception in the middle of a block (a data abort): the faulting instruction is
//!   again `ELR_EL1`.
//!
//! The kernel's exception entry saves `ELR_EL1` to its stack frame (`mrs xN, elr_el1`, then a
//! store of `xN`); the plugin reads the stored value from guest memory and hands it to
//! [`Tracker::elr_stored`]. Until then the blocks that run are queued, and replayed once the
//! address is known. A vector is recognised by its offset (a multiple of 0x80) after a block whose
//! ending does not explain the next address; the vector bases found that way are remembered
//! ([`VectorBases`]) to tell an exception after an indirect branch from the branch itself.
//!
//! # ViewInst
//!
//! A block is traced once its ending is known, instruction by instruction as far as the
//! filters require (IHI 0064, "ViewInst function"): the executed instructions are those before
//! a fault inside the block (a faulting instruction has not executed), or all of them. ViewInst
//! is active for an instruction when `TRCVICTLR.EVENT` is TRUE, its exception level is not
//! excluded by `TRCVICTLR.EXLEVEL_NS`, the include/exclude ranges let its address through (no
//! include range: everything is included), and the start/stop logic is started or the
//! instruction is a start point. The start/stop logic "is active for an instruction which
//! causes a start and remains active up to and including an instruction which causes a stop"
//! (`TRCVISSCTLR`): a stop point is itself traced, its own P0 element included, and nothing
//! after it. A single address comparator matches the A64 instruction whose address is
//! `TRCACVRn` with bits 1:0 ignored, at the exception levels `TRCACATRn` does not exclude.
//!
//! What the trace says: the P0 elements of active instructions (the target address of an
//! active indirect branch included); where ViewInst becomes active again after being inactive,
//! or after a discontinuity, a Trace On with the address of that instruction (after an
//! A-sync and Trace Info, so that a decoder can start there too); an exception when ViewInst
//! was active for the instruction before it and the start/stop logic is still started. Nothing
//! is output when ViewInst becomes inactive: a decoder infers execution only up to the last P0
//! element, so the instructions between that element and the point where trace stopped are not
//! claimed. The decode therefore gives exactly the flow the CPU executed while ViewInst was
//! active, which is what the ground truth ([`Truth`]) records, apart from the encoder.
//!
//! The check costs little in the common case: a block with no start or stop point in it and
//! that no range bound cuts is traced or not as a whole.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::a64::{self, Kind};
use crate::encoder::{Encoder, ExceptionType};
use crate::etm::TraceProgram;
use crate::truth::{Event, EventKind, Truth};

/// One translated block: its address range and the P0 elements in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TbInfo {
    /// Address of the first instruction.
    pub start: u64,
    /// Address after the last instruction.
    pub end: u64,
    /// Address of the last instruction.
    pub last_addr: u64,
    /// Class of the last instruction.
    pub last: Kind,
    /// P0 elements before the last instruction (QEMU normally ends a block at one).
    pub inner: Box<[(u64, Kind)]>,
    /// The instruction words.
    pub words: Box<[u32]>,
}

impl TbInfo {
    /// Describes the block of A64 instructions `words` at `start`; `None` when it is empty.
    pub fn new(start: u64, words: &[u32]) -> Option<Self> {
        let (&last_word, body) = words.split_last()?;
        let n = u64::try_from(words.len()).ok()?;
        let last_addr = start.wrapping_add((n - 1) * 4);
        let inner = body
            .iter()
            .enumerate()
            .filter_map(|(i, &w)| {
                let addr = start.wrapping_add(i as u64 * 4);
                let k = a64::kind(addr, w);
                k.is_p0().then_some((addr, k))
            })
            .collect();
        Some(Self {
            start,
            end: start.wrapping_add(n * 4),
            last_addr,
            last: a64::kind(last_addr, last_word),
            inner,
            words: words.into(),
        })
    }

    /// Returns the instruction word at `addr` if it is in the block.
    pub fn word_at(&self, addr: u64) -> Option<u32> {
        if addr < self.start || addr >= self.end || addr & 3 != 0 {
            return None;
        }
        let i = usize::try_from((addr - self.start) / 4).ok()?;
        self.words.get(i).copied()
    }
}

/// Exception vector table bases seen so far, shared by all vCPUs.
#[derive(Debug, Default)]
pub struct VectorBases {
    slots: [AtomicU64; 16],
}

impl VectorBases {
    /// Remembers the table that holds the vector at `vector`.
    pub fn learn(&self, vector: u64) {
        let base = vector & !0x7FF;
        for s in &self.slots {
            match s.compare_exchange(0, base, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(v) if v == base => return,
                Err(_) => {}
            }
        }
    }

    /// Returns whether `addr` is a vector of a known table.
    pub fn is_vector(&self, addr: u64) -> bool {
        addr & 0x7F == 0
            && self
                .slots
                .iter()
                .any(|s| s.load(Ordering::Relaxed) == addr & !0x7FF)
    }
}

/// The exception type a vector offset names for an asynchronous exception, or `None` for the
/// synchronous vectors.
fn async_type(vector: u64) -> Option<ExceptionType> {
    match vector & 0x180 {
        0x080 => Some(ExceptionType::Irq),
        0x100 => Some(ExceptionType::Fiq),
        0x180 => Some(ExceptionType::SystemError),
        _ => None,
    }
}

/// Most blocks queued behind an exception whose return address is not known yet.
const MAX_QUEUED: usize = 4096;

/// How a block ended, as far as the addresses tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Execution went on to the next block without a P0 element or exception.
    Seq,
    /// A P0 element (atom E or N); `addr` is the target of an indirect branch.
    Atom { taken: bool, addr: Option<u64> },
    /// An atom (if any), then an exception with a known return address; `within` when it was
    /// taken inside the block (the instruction at `ret` and those after it did not run).
    Exception {
        atom: Option<(bool, Option<u64>)>,
        ty: ExceptionType,
        ret: u64,
        within: bool,
    },
    /// An exception whose return address (and so the outcome of the block's last branch or its
    /// faulting instruction) is still to be read.
    NeedElr,
    /// Nothing explains the next address.
    Gap,
}

/// Works out how `p` ended when the next block starts at `next`, `elr` being the exception
/// return address if it is known.
fn ending(p: &TbInfo, next: u64, elr: Option<u64>, vectors: &VectorBases) -> Ending {
    // The address after the block when it ran to its end, if the addresses tell.
    let successor = match p.last {
        Kind::Other | Kind::Waypoint | Kind::Call => Some(p.end),
        Kind::Direct { target, .. } => Some(target),
        Kind::Cond { target } if next == target => Some(target),
        Kind::Cond { .. } if next == p.end => Some(p.end),
        Kind::Indirect { .. } | Kind::Eret if !vectors.is_vector(next) => Some(next),
        _ => None,
    };
    // How the last instruction ended when execution went on at `to`.
    let last_atom = |to: u64| -> Option<(bool, Option<u64>)> {
        match p.last {
            Kind::Other | Kind::Call | Kind::Breakpoint => None,
            Kind::Direct { .. } | Kind::Waypoint => Some((true, None)),
            Kind::Cond { target } => Some((to == target, None)),
            Kind::Indirect { .. } | Kind::Eret => Some((true, Some(to))),
        }
    };
    if successor == Some(next) {
        return match last_atom(next) {
            None => Ending::Seq,
            Some((taken, addr)) => Ending::Atom { taken, addr },
        };
    }
    if next & 0x7F != 0 {
        return Ending::Gap;
    }
    // Whether the block, run to its end, can have gone on at `r`.
    let fits = |r: u64| match p.last {
        Kind::Cond { target } => r == target || r == p.end,
        Kind::Indirect { .. } | Kind::Eret => true,
        _ => successor == Some(r),
    };
    let mid_block_type = |r: u64| match p.word_at(r) {
        Some(w) if a64::is_load_store(w) => ExceptionType::DataFault,
        _ if r == p.last_addr && p.last == Kind::Breakpoint => ExceptionType::InstDebug,
        _ => ExceptionType::Trap,
    };
    match async_type(next) {
        // An interrupt is taken between blocks: the block ran to its end.
        Some(ty) => {
            let ret = match (successor, elr) {
                (Some(s), _) => s,
                (None, Some(r)) => r,
                (None, None) => return Ending::NeedElr,
            };
            if !fits(ret) {
                return Ending::Gap;
            }
            Ending::Exception {
                atom: last_atom(ret),
                ty,
                ret,
                within: false,
            }
        }
        // A synchronous exception: the last instruction's own, a fault inside the block (the
        // faulting instruction did not complete), or an instruction abort at the successor.
        None => match p.last {
            Kind::Call => Ending::Exception {
                atom: None,
                ty: ExceptionType::Call,
                ret: p.end,
                within: false,
            },
            Kind::Breakpoint if elr.is_none() => Ending::Exception {
                atom: None,
                ty: ExceptionType::InstDebug,
                ret: p.last_addr,
                within: true,
            },
            _ => match elr {
                None => Ending::NeedElr,
                Some(r) if r >= p.start && r <= p.last_addr => Ending::Exception {
                    atom: None,
                    ty: mid_block_type(r),
                    ret: r,
                    within: true,
                },
                Some(r) => {
                    if !fits(r) {
                        return Ending::Gap;
                    }
                    Ending::Exception {
                        atom: last_atom(r),
                        ty: ExceptionType::InstFault,
                        ret: r,
                        within: false,
                    }
                }
            },
        },
    }
}

/// Whether the ending shows an exception taken to a vector that the block's last instruction
/// does not explain, so that the vector's table can be learnt.
fn reveals_vector(p: &TbInfo, next: u64) -> bool {
    if next & 0x7F != 0 {
        return false;
    }
    match p.last {
        Kind::Other | Kind::Waypoint | Kind::Call => next != p.end,
        Kind::Direct { target, .. } => next != target,
        Kind::Cond { target } => next != target && next != p.end,
        Kind::Breakpoint => true,
        Kind::Indirect { .. } | Kind::Eret => false,
    }
}

/// Learns a vector table from the transition from block `p` to the block at `next`, when the
/// transition shows an exception. Cheap: run it for every block, traced or not.
pub fn learn(p: &TbInfo, next: u64, vectors: &VectorBases) {
    if reveals_vector(p, next) {
        vectors.learn(next);
    }
}

/// An exception waiting for its return address.
#[derive(Debug)]
struct Pending {
    /// The block that ended in it.
    from: &'static TbInfo,
    /// The blocks run since, the vector's first.
    queue: Vec<&'static TbInfo>,
}

/// The ViewInst function of a trace session, compiled from its [`TraceProgram`] for the check
/// that runs on every executed block.
#[derive(Debug)]
struct View {
    /// The event (`TRCVICTLR.EVENT`) is TRUE.
    event: bool,
    /// `TRCVICTLR.EXLEVEL_NS`.
    exclude_el: u8,
    /// Start comparators: (instruction address, `EXLEVEL_NS`).
    start: Box<[(u64, u8)]>,
    /// Stop comparators.
    stop: Box<[(u64, u8)]>,
    /// Include ranges: (lower, upper, `EXLEVEL_NS`), bounds inclusive.
    include: Box<[(u64, u64, u8)]>,
    /// Exclude ranges.
    exclude: Box<[(u64, u64, u8)]>,
    /// No start or stop point and no range: ViewInst depends on the exception level and the
    /// start/stop state only.
    simple: bool,
    /// No include or exclude range.
    no_ranges: bool,
    /// Bit `n` set: the event and `EXLEVEL_NS` let instructions at EL`n` through.
    el_active: u8,
    /// Every start and stop point (at most the eight comparators), for the test run on every
    /// block; a match here sends the block to the exact, per-instruction check.
    points: [u64; crate::etm::ADDR_CMPS],
    /// How many of `points` are used.
    npoints: usize,
}

impl View {
    fn new(prog: &TraceProgram) -> Self {
        let singles = |v: &[crate::etm::AddrComparator]| -> Box<[(u64, u8)]> {
            v.iter().map(|c| (c.addr & !3, c.exclude_el_ns)).collect()
        };
        let ranges = |v: &[crate::etm::AddrRange]| -> Box<[(u64, u64, u8)]> {
            v.iter().map(|r| (r.lo, r.hi, r.exclude_el_ns)).collect()
        };
        let (start, stop) = match prog.start_stop.as_ref() {
            Some(ss) => (singles(&ss.start), singles(&ss.stop)),
            None => (Box::default(), Box::default()),
        };
        // An event the emulation cannot evaluate counts as TRUE (the log names it).
        let event = !prog.event_always_false();
        let include = ranges(&prog.include);
        let exclude = ranges(&prog.exclude);
        let mut points = [0; crate::etm::ADDR_CMPS];
        let mut npoints = 0;
        for (slot, &(a, _)) in points.iter_mut().zip(start.iter().chain(stop.iter())) {
            *slot = a;
            npoints += 1;
        }
        Self {
            simple: start.is_empty() && stop.is_empty() && include.is_empty() && exclude.is_empty(),
            no_ranges: include.is_empty() && exclude.is_empty(),
            el_active: if event { !prog.exclude_el_ns } else { 0 },
            points,
            npoints,
            event,
            exclude_el: prog.exclude_el_ns,
            start,
            stop,
            include,
            exclude,
        }
    }

    fn hit(cmps: &[(u64, u8)], insn: u64, el: u8) -> bool {
        cmps.iter().any(|&(a, x)| a == insn && x & (1 << el) == 0)
    }

    /// Whether a start or stop point lies in `[lo, limit)` (whatever the exception levels its
    /// comparator matches at: the per-instruction check that follows a hit is exact).
    fn ss_hit(&self, lo: u64, limit: u64) -> bool {
        let len = limit.wrapping_sub(lo);
        self.points
            .get(..self.npoints)
            .is_some_and(|p| p.iter().any(|&a| a.wrapping_sub(lo) < len))
    }

    fn in_ranges(ranges: &[(u64, u64, u8)], insn: u64, el: u8) -> bool {
        ranges
            .iter()
            .any(|&(lo, hi, x)| insn >= lo && insn <= hi && x & (1 << el) == 0)
    }

    /// ViewInst for the instruction at `insn` at EL`el`, but for the start/stop logic.
    fn filters(&self, insn: u64, el: u8) -> bool {
        self.event
            && self.exclude_el & (1 << el) == 0
            && (self.include.is_empty() || Self::in_ranges(&self.include, insn, el))
            && !Self::in_ranges(&self.exclude, insn, el)
    }

    /// [`Self::filters`] for every instruction of `[lo, last]`, when it is the same for all.
    fn filters_uniform(&self, lo: u64, last: u64, el: u8) -> Option<bool> {
        if !self.event || self.exclude_el & (1 << el) != 0 {
            return Some(false);
        }
        // A range cuts the block when one of its bounds falls strictly inside it.
        let cuts = |&(r_lo, r_hi, x): &(u64, u64, u8)| {
            x & (1 << el) == 0 && ((r_lo > lo && r_lo <= last) || (r_hi >= lo && r_hi < last))
        };
        if self.include.iter().any(cuts) || self.exclude.iter().any(cuts) {
            return None;
        }
        Some(self.filters(lo, el))
    }
}

/// A trace session of one vCPU: from the enabling of its ETM to its disabling.
#[derive(Debug)]
struct Session {
    view: View,
    enc: Encoder,
    truth: Truth,
    /// The first block has been seen.
    begun: bool,
    /// ViewInst was active for the last instruction processed, and the decoder's view of the
    /// flow continues from it (no discontinuity since).
    last_on: bool,
    /// Something was traced in this session.
    ever_on: bool,
    /// The start/stop logic is in the started state.
    started: bool,
    /// The address of the instruction that stopped the start/stop logic in the block being
    /// processed, for the truth once the block's last element is recorded.
    stop_in_block: Option<u64>,
    /// The last block ended with a P0 element or an exception: a periodic synchronisation may go
    /// where the next one starts.
    sync_due: bool,
    pending: Option<Pending>,
    /// Last address known to have executed, for gap records.
    last_known: u64,
    /// Mistakes to make on purpose (test-only `fault=tracker-*`).
    faults: TrackerFaults,
    /// Occurrences of each situation a planted mistake waits for.
    seen: [u64; 3],
    /// The mistakes planted and not yet reported.
    planted: Vec<String>,
}

impl Session {
    /// Counts an occurrence of situation `which`; returns whether to plant the mistake now.
    fn plant(&mut self, which: usize) -> bool {
        self.seen[which] += 1;
        self.seen[which].is_multiple_of(PLANT_EVERY[which])
    }
}

/// Mistakes the tracker makes on purpose, so that a judge can show it catches what the
/// ground truth, which the tracker writes too, cannot (test-only plugin faults `tracker-*`).
/// Each is made at every [`PLANT_EVERY`]th occurrence of its situation, in the trace and in the
/// ground truth alike, and named by [`Tracker::take_planted`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackerFaults {
    /// An interrupt's return address traced 4 bytes too far (`tracker-elr-off`).
    pub elr_off: bool,
    /// An indirect branch traced as an exception to its target, taken at the branch
    /// (`tracker-indirect-as-exception`).
    pub indirect_as_exception: bool,
    /// A conditional branch at a block's end that was not taken traced as taken
    /// (`tracker-cond-misread`).
    pub cond_misread: bool,
}

/// How often each planted mistake is made (elr-off, indirect-as-exception, cond-misread): at
/// every this many occurrences of its situation, so that some land in a trace buffer's window.
pub const PLANT_EVERY: [u64; 3] = [2, 1024, 4096];

/// Counters of what the tracker met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    /// Blocks seen.
    pub blocks: u64,
    /// Exceptions resolved from a saved `ELR_EL1`.
    pub elr_resolved: u64,
    /// Exceptions whose return address never came (recorded as gaps).
    pub elr_lost: u64,
    /// Discontinuities nothing explained.
    pub gaps: u64,
}

/// The execution tracker of one vCPU.
#[derive(Debug)]
pub struct Tracker {
    session: Option<Session>,
    stats: TrackerStats,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

impl Tracker {
    /// Returns a tracker that has seen nothing.
    pub const fn new() -> Self {
        Self {
            session: None,
            stats: TrackerStats {
                blocks: 0,
                elr_resolved: 0,
                elr_lost: 0,
                gaps: 0,
            },
        }
    }

    /// Returns the counters.
    pub fn stats(&self) -> TrackerStats {
        self.stats
    }

    /// Returns whether a trace session is open.
    pub fn tracing(&self) -> bool {
        self.session.is_some()
    }

    /// Returns the address of the stop point that stopped the open session's start/stop logic,
    /// if one did.
    pub fn stopped_at(&self) -> Option<u64> {
        self.session
            .as_ref()
            .and_then(|s| s.truth.stop())
            .map(|(a, _)| a)
    }

    /// Returns whether an exception waits for its `ELR_EL1`.
    pub fn waiting_for_elr(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.pending.is_some())
    }

    /// Opens a trace session with the programming `prog`, keeping the last `truth_depth`
    /// events and those within `truth_cover` bytes of sink input ([`Truth::covering`]). Trace
    /// starts at the next block.
    pub fn start(
        &mut self,
        prog: TraceProgram,
        truth_depth: usize,
        truth_cover: u64,
        faults: TrackerFaults,
    ) {
        let mut truth = Truth::covering(truth_depth, truth_cover);
        truth.set_start_stop(prog.start_stop.is_some(), prog.started);
        self.session = Some(Session {
            view: View::new(&prog),
            enc: Encoder::new(prog.sync_period_bytes),
            truth,
            begun: false,
            last_on: false,
            ever_on: false,
            started: prog.started,
            stop_in_block: None,
            sync_due: false,
            pending: None,
            last_known: 0,
            faults,
            seen: [0; 3],
            planted: Vec::new(),
        });
    }

    /// The vCPU runs block `t` after block `p` (`None` for its first block); [`learn`] was
    /// called for the pair.
    pub fn exec(&mut self, p: Option<&'static TbInfo>, t: &'static TbInfo, vectors: &VectorBases) {
        self.stats.blocks += 1;
        let Some(s) = self.session.as_mut() else {
            return;
        };
        if let Some(pend) = s.pending.as_mut() {
            pend.queue.push(t);
            if pend.queue.len() > MAX_QUEUED {
                self.stats.elr_lost += 1;
                Self::resolve(s, None, vectors, &mut self.stats);
            }
            return;
        }
        match p {
            Some(p) if s.begun => Self::transition(s, p, t, None, vectors, &mut self.stats),
            _ => Self::begin(s, t),
        }
    }

    /// The saved `ELR_EL1` of the exception being waited for.
    pub fn elr_stored(&mut self, elr: u64, vectors: &VectorBases) {
        if let Some(s) = self.session.as_mut() {
            if s.pending.is_some() {
                self.stats.elr_resolved += 1;
                Self::resolve(s, Some(elr), vectors, &mut self.stats);
            }
        }
    }

    /// Returns the trace bytes encoded so far and forgets them.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        self.session
            .as_mut()
            .map(|s| s.enc.take())
            .unwrap_or_default()
    }

    /// Records that the bytes taken so far reached the sink, whose input count is now
    /// `sink_bytes` ([`Truth::handed_to_sink`]).
    pub fn handed_to_sink(&mut self, sink_bytes: u64) {
        if let Some(s) = self.session.as_mut() {
            s.truth.handed_to_sink(sink_bytes);
        }
    }

    /// Returns the mistakes planted since the last call (test-only `fault=tracker-*`).
    pub fn take_planted(&mut self) -> Vec<String> {
        self.session
            .as_mut()
            .map(|s| std::mem::take(&mut s.planted))
            .unwrap_or_default()
    }

    /// Returns how many encoded bytes wait to be taken.
    pub fn pending_bytes(&self) -> usize {
        self.session.as_ref().map_or(0, |s| s.enc.pending())
    }

    /// Writes out the atoms held back for a packet (a flush request reached the trace unit) and
    /// returns the bytes encoded so far.
    pub fn flush(&mut self) -> Vec<u8> {
        self.session
            .as_mut()
            .map(|s| {
                s.enc.flush_atoms();
                s.enc.take()
            })
            .unwrap_or_default()
    }

    /// Closes the trace session: an exception still waiting for its return address becomes a
    /// gap, the atoms are flushed. Returns the last bytes and the ground truth, which holds the
    /// state the start/stop logic is left in (`TRCVICTLR.SSSTATUS` once the unit is idle).
    pub fn stop(&mut self, vectors: &VectorBases) -> Option<(Vec<u8>, Truth)> {
        let mut s = self.session.take()?;
        if s.pending.is_some() {
            self.stats.elr_lost += 1;
            Self::resolve(&mut s, None, vectors, &mut self.stats);
        }
        s.enc.flush_atoms();
        s.truth.set_ssstatus(s.started);
        Some((s.enc.take(), s.truth))
    }

    /// Returns a copy of the ground truth of the open session.
    pub fn truth(&self) -> Option<Truth> {
        self.session.as_ref().map(|s| {
            let mut t = s.truth.clone();
            t.set_ssstatus(s.started);
            t
        })
    }

    fn begin(s: &mut Session, t: &'static TbInfo) {
        s.begun = true;
        s.last_on = false;
        s.last_known = t.start;
    }

    /// ViewInst becomes active (again) at `insn`, or stays active: a Trace On (with a
    /// synchronisation) after a discontinuity, else the periodic synchronisation if one is due
    /// where a block starts after a P0 element or an exception.
    fn resume(s: &mut Session, insn: u64, block_start: bool) {
        if !s.last_on {
            if s.ever_on {
                s.truth.push(Event {
                    kind: EventKind::Gap,
                    from: s.last_known,
                    to: insn,
                });
            }
            s.enc.trace_on(insn);
            s.ever_on = true;
        } else if block_start && s.sync_due {
            // Only where a range ends, so that a decoder that starts here loses nothing.
            s.enc.maybe_sync(insn);
        }
        s.sync_due = false;
    }

    /// Runs ViewInst over the instructions of block `p` that executed, `[p.start, limit)`, in
    /// program order, and traces the P0 elements inside the block it is active for (the last
    /// instruction's element is [`Self::emit`]'s).
    ///
    /// ViewInst is active for an instruction when the event is TRUE, its exception level is not
    /// excluded, the include/exclude ranges let it through, and the start/stop logic is started
    /// or the instruction is a start point. The start/stop logic is active for an instruction
    /// which causes a start and remains active up to and including an instruction which causes
    /// a stop (IHI 0064, `TRCVISSCTLR`): a start point is traced, and so is a stop point; the
    /// instructions after a stop point are not.
    fn body(s: &mut Session, p: &TbInfo, limit: u64) {
        if limit <= p.start {
            return;
        }
        let el = crate::encoder::el_of(p.start);
        let last = limit - 4;
        s.last_known = last;
        // The common case, checked for every block: no comparator in the block, and the ranges
        // do not cut it.
        let uniform = if s.view.simple {
            Some(s.view.el_active & (1 << el) != 0)
        } else if s.view.ss_hit(p.start, limit) {
            None
        } else if s.view.no_ranges {
            Some(s.view.el_active & (1 << el) != 0)
        } else {
            s.view.filters_uniform(p.start, last, el)
        };
        {
            if let Some(f) = uniform {
                let active = f && s.started;
                if active {
                    Self::resume(s, p.start, true);
                    for &(addr, k) in p.inner.iter().filter(|(a, _)| *a < limit) {
                        Self::inner_p0(s, addr, k);
                    }
                }
                s.last_on = active;
                s.sync_due = false;
                return;
            }
        }
        let mut inner = p.inner.iter().peekable();
        let mut insn = p.start;
        while insn < limit {
            let start = View::hit(&s.view.start, insn, el);
            let stop = View::hit(&s.view.stop, insn, el);
            let ss_active = s.started || start;
            if stop {
                if ss_active {
                    s.stop_in_block = Some(insn);
                }
                s.started = false;
            } else if start {
                s.started = true;
            }
            let active = ss_active && s.view.filters(insn, el);
            if active {
                Self::resume(s, insn, insn == p.start);
            }
            if let Some(&&(addr, k)) = inner.peek() {
                if addr == insn {
                    inner.next();
                    if active {
                        Self::inner_p0(s, addr, k);
                    }
                }
            }
            s.last_on = active;
            insn = insn.wrapping_add(4);
        }
        s.sync_due = false;
    }

    fn transition(
        s: &mut Session,
        p: &'static TbInfo,
        t: &'static TbInfo,
        elr: Option<u64>,
        vectors: &VectorBases,
        stats: &mut TrackerStats,
    ) {
        let end = ending(p, t.start, elr, vectors);
        if end == Ending::NeedElr {
            s.pending = Some(Pending {
                from: p,
                queue: vec![t],
            });
            return;
        }
        let limit = match end {
            Ending::Exception {
                ret, within: true, ..
            } => ret,
            _ => p.end,
        };
        Self::body(s, p, limit);
        Self::emit(s, p, t.start, end, stats);
        if let Some(at) = s.stop_in_block.take() {
            s.truth.stopped_at(at);
        }
        s.sync_due = !matches!(end, Ending::Seq);
    }

    /// A P0 element in the middle of a block: only waypoints and untaken branches can be.
    fn inner_p0(s: &mut Session, addr: u64, k: Kind) {
        let kind = if k == Kind::Waypoint {
            EventKind::Waypoint
        } else {
            EventKind::NotTaken
        };
        s.enc.atom(k == Kind::Waypoint);
        s.truth.push(Event {
            kind,
            from: addr,
            to: addr.wrapping_add(4),
        });
    }

    fn atom(s: &mut Session, p: &TbInfo, taken: bool, addr: Option<u64>, next: u64) {
        s.enc.atom(taken);
        let kind = match (p.last, taken) {
            (Kind::Waypoint, _) => EventKind::Waypoint,
            (_, true) => EventKind::Taken,
            (_, false) => EventKind::NotTaken,
        };
        s.truth.push(Event {
            kind,
            from: p.last_addr,
            to: next,
        });
        if let Some(a) = addr {
            s.enc.address(a);
        }
    }

    /// The element the block's ending gives: the last instruction's P0 element when ViewInst
    /// was active for it, an exception when ViewInst was active for the instruction before it
    /// and the start/stop logic is still started (an exception right after a stop point is
    /// not traced).
    fn emit(s: &mut Session, p: &TbInfo, next: u64, end: Ending, stats: &mut TrackerStats) {
        match end {
            Ending::Seq | Ending::NeedElr => {}
            Ending::Atom { mut taken, addr } => {
                if !s.last_on {
                    return;
                }
                match (p.last, taken, addr) {
                    (Kind::Cond { target }, false, _) if s.faults.cond_misread && s.plant(2) => {
                        s.planted.push(format!(
                            "cond-misread: the branch at {:#x} traced taken to {target:#x}, \
                             execution went on at {:#x}",
                            p.last_addr, p.end
                        ));
                        taken = true;
                    }
                    (Kind::Indirect { .. }, true, Some(a))
                        if a & 0x7F != 0 && s.faults.indirect_as_exception && s.plant(1) =>
                    {
                        s.planted.push(format!(
                            "indirect-as-exception: the branch at {:#x} to {a:#x} traced as an \
                             exception",
                            p.last_addr
                        ));
                        s.enc.exception(ExceptionType::Trap, p.last_addr, a);
                        s.truth.push(Event {
                            kind: EventKind::Exception(ExceptionType::Trap),
                            from: p.last_addr,
                            to: a,
                        });
                        return;
                    }
                    _ => {}
                }
                let to = if taken {
                    match p.last {
                        Kind::Direct { target, .. } | Kind::Cond { target } => target,
                        _ => addr.unwrap_or(p.end),
                    }
                } else {
                    p.end
                };
                Self::atom(s, p, taken, addr, to);
            }
            Ending::Exception {
                atom, ty, mut ret, ..
            } => {
                if !s.last_on {
                    return;
                }
                if ty == ExceptionType::Irq && s.faults.elr_off && s.plant(0) {
                    s.planted.push(format!(
                        "elr-off: the interrupt into {next:#x} traced returning to {:#x}, not \
                         {ret:#x}",
                        ret + 4
                    ));
                    ret += 4;
                }
                if let Some((taken, addr)) = atom {
                    Self::atom(s, p, taken, addr, ret);
                }
                if !s.started {
                    // ViewInst is not active after a stop point: the flow seen by a decoder
                    // ends here.
                    s.last_on = false;
                    return;
                }
                s.enc.exception(ty, ret, next);
                s.truth.push(Event {
                    kind: EventKind::Exception(ty),
                    from: ret,
                    to: next,
                });
            }
            Ending::Gap => {
                stats.gaps += 1;
                s.enc.flush_atoms();
                s.last_on = false;
            }
        }
    }

    /// Ends the wait for an exception's return address, with `elr` or without (a gap), and
    /// replays the blocks queued behind it.
    fn resolve(s: &mut Session, elr: Option<u64>, vectors: &VectorBases, stats: &mut TrackerStats) {
        let Some(pend) = s.pending.take() else {
            return;
        };
        let mut blocks = pend.queue.into_iter();
        let Some(first) = blocks.next() else {
            return;
        };
        match elr {
            Some(r) => Self::transition(s, pend.from, first, Some(r), vectors, stats),
            None => {
                // How the block ended is not known: a discontinuity, and the decoder's view
                // restarts where the next traced instruction is.
                stats.gaps += 1;
                s.enc.flush_atoms();
                s.last_on = false;
                s.last_known = first.start;
            }
        }
        let mut prev = first;
        for t in blocks {
            if let Some(p) = s.pending.as_mut() {
                p.queue.push(t);
            } else {
                Self::transition(s, prev, t, None, vectors, stats);
            }
            prev = t;
        }
    }
}

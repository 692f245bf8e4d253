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

/// A trace session of one vCPU: from the enabling of its ETM to its disabling.
#[derive(Debug)]
struct Session {
    prog: TraceProgram,
    enc: Encoder,
    truth: Truth,
    /// The first block has been seen.
    begun: bool,
    /// The current block is traced.
    on: bool,
    /// The start/stop state of the ViewInst start/stop control.
    started: bool,
    /// A stop address was in the current block.
    stop_after: bool,
    pending: Option<Pending>,
    /// Last address known to have executed, for gap records.
    last_known: u64,
}

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

    /// Returns whether an exception waits for its `ELR_EL1`.
    pub fn waiting_for_elr(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.pending.is_some())
    }

    /// Opens a trace session with the programming `prog`, keeping the last `truth_depth`
    /// events. Trace starts at the next block.
    pub fn start(&mut self, prog: TraceProgram, truth_depth: usize) {
        let started = prog.start_stop.as_ref().is_none_or(|ss| ss.started);
        self.session = Some(Session {
            enc: Encoder::new(prog.sync_period_bytes),
            prog,
            truth: Truth::new(truth_depth),
            begun: false,
            on: false,
            started,
            stop_after: false,
            pending: None,
            last_known: 0,
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
    /// gap, the atoms are flushed. Returns the last bytes and the ground truth.
    pub fn stop(&mut self, vectors: &VectorBases) -> Option<(Vec<u8>, Truth)> {
        let mut s = self.session.take()?;
        if s.pending.is_some() {
            self.stats.elr_lost += 1;
            Self::resolve(&mut s, None, vectors, &mut self.stats);
        }
        s.enc.flush_atoms();
        Some((s.enc.take(), s.truth))
    }

    /// Returns a copy of the ground truth of the open session.
    pub fn truth(&self) -> Option<Truth> {
        self.session.as_ref().map(|s| s.truth.clone())
    }

    fn begin(s: &mut Session, t: &'static TbInfo) {
        s.begun = true;
        s.on = Self::traced(s, t);
        if s.on {
            s.enc.trace_on(t.start);
        }
        s.last_known = t.start;
    }

    /// Whether block `t` is traced: exception level filter, start/stop, include/exclude ranges.
    fn traced(s: &mut Session, t: &TbInfo) -> bool {
        if s.prog.event_always_false {
            return false;
        }
        if let Some(ss) = s.prog.start_stop.as_ref() {
            if s.stop_after {
                s.started = false;
                s.stop_after = false;
            }
            let hit = |addrs: &[u64]| addrs.iter().any(|&a| a >= t.start && a < t.end);
            if !s.started && hit(&ss.start) {
                s.started = true;
            }
            if s.started && hit(&ss.stop) {
                s.stop_after = true;
            }
            if !s.started {
                return false;
            }
        }
        let el = crate::encoder::el_of(t.start);
        if s.prog.exclude_el_ns & (1 << el) != 0 {
            return false;
        }
        if !s.prog.include.is_empty()
            && !s
                .prog
                .include
                .iter()
                .any(|&(lo, hi)| t.start >= lo && t.start <= hi)
        {
            return false;
        }
        !s.prog
            .exclude
            .iter()
            .any(|&(lo, hi)| t.start >= lo && t.start <= hi)
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
        let was_on = s.on;
        if was_on {
            let limit = match end {
                Ending::Exception {
                    ret, within: true, ..
                } => ret,
                _ => p.last_addr,
            };
            for &(addr, k) in p.inner.iter().filter(|(a, _)| *a < limit) {
                Self::inner_p0(s, addr, k);
            }
            Self::emit(s, p, t.start, end, stats);
        }
        s.on = Self::traced(s, t);
        if s.on && (!was_on || end == Ending::Gap) {
            s.truth.push(Event {
                kind: EventKind::Gap,
                from: s.last_known,
                to: t.start,
            });
            s.enc.trace_on(t.start);
        } else if s.on && !matches!(end, Ending::Seq) {
            // Only where a range ends, so that a decoder that starts here loses nothing.
            s.enc.maybe_sync(t.start);
        }
        s.last_known = t.start;
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

    fn emit(s: &mut Session, p: &TbInfo, next: u64, end: Ending, stats: &mut TrackerStats) {
        match end {
            Ending::Seq | Ending::NeedElr => {}
            Ending::Atom { taken, addr } => {
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
            Ending::Exception { atom, ty, ret, .. } => {
                if let Some((taken, addr)) = atom {
                    Self::atom(s, p, taken, addr, ret);
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
                stats.gaps += 1;
                if s.on {
                    s.enc.flush_atoms();
                }
                s.on = Self::traced(s, first);
                if s.on {
                    s.truth.push(Event {
                        kind: EventKind::Gap,
                        from: pend.from.last_addr,
                        to: first.start,
                    });
                    s.enc.trace_on(first.start);
                }
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

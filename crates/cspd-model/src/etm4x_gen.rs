// SPDX-License-Identifier: GPL-2.0

//! ETMv4 instruction trace generator for a known path through real A64 code.
//!
//! Given a code image, a start address and the outcome of every conditional and indirect
//! branch, [`generate`] walks the code the way the processor would and writes the packets an
//! ETMv4 trace unit would emit for it (Arm IHI 0064, instruction trace, A64, no cycle counts,
//! no return stack): A-sync, Trace Info, optional Timestamp, Trace On, a long Address with
//! Context, then Atoms (E/N) for every branch and an Address packet (exact match, short,
//! long 32-bit or long 64-bit, whichever is smallest) after each indirect branch. Periodic
//! synchronisation repeats A-sync, Trace Info and a full address.
//!
//! Each executed run of instructions that ends in a branch is reported as an [`ExecRange`];
//! these are exactly the instruction ranges a decoder recovers from the stream.
//!
//! Plain `core` Rust: the stream goes into a caller's buffer, ranges go to a callback.

pub use cspd_hw::a64::classify;
pub use cspd_hw::a64::A64Class;
pub use cspd_hw::a64::BranchKind;

/// A64 code loaded at an address.
#[derive(Clone, Copy, Debug)]
pub struct CodeImage<'a> {
    /// Address of `bytes[0]`.
    pub base: u64,
    /// The code, little-endian A64 instruction words.
    pub bytes: &'a [u8],
}

/// Where the generator reads the instructions it walks.
pub trait Code {
    /// Returns the little-endian instruction word at `addr`, or `None` outside the code or if
    /// unaligned.
    fn word(&self, addr: u64) -> Option<u32>;
}

impl Code for CodeImage<'_> {
    fn word(&self, addr: u64) -> Option<u32> {
        CodeImage::word(self, addr)
    }
}

impl CodeImage<'_> {
    /// Returns the instruction word at `addr`, or `None` outside the image or if unaligned.
    pub fn word(&self, addr: u64) -> Option<u32> {
        if addr & 3 != 0 {
            return None;
        }
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let b = self.bytes.get(off..off.checked_add(4)?)?;
        let mut w = [0u8; 4];
        w.copy_from_slice(b);
        Some(u32::from_le_bytes(w))
    }
}

/// The outcome of one branch on the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A conditional branch is taken; a `RET` returns to the address pushed by the last
    /// `BL`/`BLR` on the path.
    Taken,
    /// A conditional branch is not taken.
    NotTaken,
    /// An indirect branch (`BR`, `BLR`, `RET`) goes to this address.
    To(u64),
}

/// One run of executed instructions ending in a branch, as a decoder reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecRange {
    /// Address of the first instruction.
    pub start: u64,
    /// Address after the last instruction (the branch).
    pub end: u64,
    /// Number of instructions.
    pub insns: u32,
    /// Kind of the branch that ends the range.
    pub kind: BranchKind,
    /// Whether the branch was taken (E atom) or not (N atom).
    pub taken: bool,
}

/// A branch that needs a decision, as shown to the decision callback of [`generate_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BranchSite {
    /// Address of the branch instruction.
    pub addr: u64,
    /// Kind of branch.
    pub kind: BranchKind,
    /// Where a `RET` answered with [`Decision::Taken`] would go: the return address pushed
    /// by the most recent `BL`/`BLR` still on the modelled link stack.
    pub return_to: Option<u64>,
}

/// Why the walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A branch needed a decision and none was left.
    DecisionsExhausted,
    /// An indirect branch at this address had no target (no `To`, no return address).
    NeedTarget(u64),
    /// The instruction at this address is not modelled.
    Unsupported(u64),
    /// Execution reached an address outside the image.
    LeftImage(u64),
    /// The configured instruction limit was reached.
    InstructionLimit,
}

/// Why no stream could be generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenError {
    /// The output buffer is full; this many bytes had been written.
    OutOfSpace(usize),
    /// The start address is not in the image or not 4-byte aligned.
    BadStart(u64),
    /// The decision does not fit the branch at this address (for example `To` on a
    /// conditional branch, an unaligned target, or `NotTaken` on an indirect branch).
    BadDecision(u64),
}

/// Trace unit settings that shape the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// Exception level of the traced code (0..=3).
    pub el: u8,
    /// Non-secure state.
    pub non_secure: bool,
    /// Context ID to report (`TRCCONFIGR.CID` set), 32 bits as in `TRCIDR2` of Juno parts.
    pub context_id: Option<u32>,
    /// VMID to report (`TRCCONFIGR.VMID` set), 8 bits.
    pub vmid: Option<u8>,
    /// First timestamp value (`TRCCONFIGR.TS` set); `None` for no timestamps.
    pub timestamp: Option<u64>,
    /// Timestamp increment between two timestamp packets.
    pub timestamp_step: u64,
    /// Emit a timestamp after this many branches (0: only at synchronisation points).
    pub timestamp_every: u32,
    /// Resynchronise (A-sync, Trace Info, address) once this many bytes were written since
    /// the last synchronisation (0: only at the start).
    pub sync_period: usize,
    /// Stop after this many instructions.
    pub max_insns: u64,
}

impl GenConfig {
    /// Returns kernel tracing at Non-secure EL1 with context ID 0, no timestamps, a
    /// synchronisation every 4096 bytes and a limit of one million instructions.
    pub const fn kernel() -> Self {
        Self {
            el: 1,
            non_secure: true,
            context_id: Some(0),
            vmid: None,
            timestamp: None,
            timestamp_step: 0,
            timestamp_every: 0,
            sync_period: 4096,
            max_insns: 1_000_000,
        }
    }

    /// Returns the `TRCCONFIGR` value of a unit that produces this stream.
    pub const fn trcconfigr(&self) -> u32 {
        let mut v = 1;
        if self.context_id.is_some() {
            v |= 1 << 6;
        }
        if self.vmid.is_some() {
            v |= 1 << 7;
        }
        if self.timestamp.is_some() {
            v |= 1 << 11;
        }
        v
    }
}

/// What [`generate`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenSummary {
    /// Bytes written to the output.
    pub bytes: usize,
    /// Ranges reported.
    pub ranges: u64,
    /// Instructions in the reported ranges.
    pub insns: u64,
    /// Decisions consumed.
    pub decisions_used: usize,
    /// Synchronisation points written (including the first).
    pub syncs: u32,
    /// Why the walk ended.
    pub stop: StopReason,
}

/// Depth of the modelled link-register stack used for `RET` with [`Decision::Taken`].
const CALL_STACK: usize = 32;

struct Emitter<'a> {
    out: &'a mut [u8],
    len: usize,
    history: [u64; 3],
    atoms: u8,
    natoms: u8,
    ts: Option<u64>,
    ts_sent: u64,
    since_sync: usize,
    syncs: u32,
}

impl Emitter<'_> {
    fn byte(&mut self, b: u8) -> Result<(), GenError> {
        let slot = self
            .out
            .get_mut(self.len)
            .ok_or(GenError::OutOfSpace(self.len))?;
        *slot = b;
        self.len += 1;
        self.since_sync = self.since_sync.saturating_add(1);
        Ok(())
    }

    fn bytes(&mut self, bs: &[u8]) -> Result<(), GenError> {
        for b in bs {
            self.byte(*b)?;
        }
        Ok(())
    }

    fn push_history(&mut self, addr: u64) {
        self.history = [addr, self.history[0], self.history[1]];
    }

    /// Writes the buffered atoms as one Atom format 1, 2 or 3 packet.
    fn flush_atoms(&mut self) -> Result<(), GenError> {
        let header = match self.natoms {
            0 => return Ok(()),
            1 => 0xF6 | (self.atoms & 1),
            2 => 0xD8 | (self.atoms & 3),
            _ => 0xF8 | (self.atoms & 7),
        };
        self.atoms = 0;
        self.natoms = 0;
        self.byte(header)
    }

    fn atom(&mut self, taken: bool) -> Result<(), GenError> {
        if taken {
            self.atoms |= 1 << self.natoms;
        }
        self.natoms += 1;
        if self.natoms == 3 {
            self.flush_atoms()?;
        }
        Ok(())
    }

    /// Writes the 64-bit IS0 address field (bits 63:2).
    fn addr64(&mut self, a: u64) -> Result<(), GenError> {
        // CAST: each value is masked to its byte.
        self.byte(((a >> 2) & 0x7F) as u8)?;
        self.byte(((a >> 9) & 0x7F) as u8)?;
        for shift in [16, 24, 32, 40, 48, 56] {
            self.byte(((a >> shift) & 0xFF) as u8)?;
        }
        Ok(())
    }

    /// Writes the smallest address packet that gives `a` to the decoder.
    fn address(&mut self, a: u64) -> Result<(), GenError> {
        self.flush_atoms()?;
        if let Some(i) = self.history.iter().position(|h| *h == a) {
            // CAST: `i < 3`.
            self.byte(0x90 | i as u8)?;
            self.push_history(a);
            return Ok(());
        }
        let last = self.history[0];
        // CAST: every value below is masked to its byte.
        if a >> 9 == last >> 9 {
            self.bytes(&[0x95, ((a >> 2) & 0x7F) as u8])?;
        } else if a >> 17 == last >> 17 {
            self.bytes(&[
                0x95,
                0x80 | ((a >> 2) & 0x7F) as u8,
                ((a >> 9) & 0xFF) as u8,
            ])?;
        } else if a >> 32 == last >> 32 {
            self.bytes(&[
                0x9A,
                ((a >> 2) & 0x7F) as u8,
                ((a >> 9) & 0x7F) as u8,
                ((a >> 16) & 0xFF) as u8,
                ((a >> 24) & 0xFF) as u8,
            ])?;
        } else {
            self.byte(0x9D)?;
            self.addr64(a)?;
        }
        self.push_history(a);
        Ok(())
    }

    /// Writes a Timestamp packet and advances the timestamp.
    fn timestamp(&mut self, step: u64) -> Result<(), GenError> {
        let Some(ts) = self.ts else {
            return Ok(());
        };
        self.flush_atoms()?;
        self.byte(0x02)?;
        let bits = 64 - (ts | self.ts_sent).leading_zeros();
        let n = bits.div_ceil(7).clamp(1, 9);
        for i in 0..n {
            // CAST: each value is masked to its byte.
            let b = if i == 8 {
                (ts >> 56) as u8
            } else {
                let more = if i + 1 < n { 0x80 } else { 0 };
                ((ts >> (7 * i)) & 0x7F) as u8 | more
            };
            self.byte(b)?;
        }
        self.ts_sent = ts;
        self.ts = Some(ts.wrapping_add(step));
        Ok(())
    }

    /// Writes a synchronisation point that restarts decoding at `pc`.
    fn sync(&mut self, pc: u64, cfg: &GenConfig, first: bool) -> Result<(), GenError> {
        self.flush_atoms()?;
        self.since_sync = 0;
        self.syncs = self.syncs.saturating_add(1);
        // A-sync: eleven zero bytes then 0x80.
        for _ in 0..11 {
            self.byte(0)?;
        }
        self.byte(0x80)?;
        // Trace Info: PLCTL says an INFO field follows; INFO = 0 (no cycle counting, no
        // conditional or load/store tracing).
        self.bytes(&[0x01, 0x01, 0x00])?;
        self.history = [0; 3];
        self.timestamp(cfg.timestamp_step)?;
        if first {
            // Trace On: the start of a trace session.
            self.byte(0x04)?;
        }
        // Address with Context, long, 64-bit, IS0.
        self.byte(0x85)?;
        self.addr64(pc)?;
        let mut info = (cfg.el & 3) | (1 << 4);
        if cfg.non_secure {
            info |= 1 << 5;
        }
        if cfg.vmid.is_some() {
            info |= 1 << 6;
        }
        if cfg.context_id.is_some() {
            info |= 1 << 7;
        }
        self.byte(info)?;
        if let Some(vmid) = cfg.vmid {
            self.byte(vmid)?;
        }
        if let Some(cid) = cfg.context_id {
            self.bytes(&cid.to_le_bytes())?;
        }
        self.push_history(pc);
        Ok(())
    }
}

/// The decisions of the model-backed trace units: a `RET` returns to its caller, other
/// indirect branches end the walk, and a conditional branch is not taken, except every fourth
/// time the same one is met, so that loops end.
pub struct LoopBreaker {
    seen: [(u64, u8); 64],
}

impl LoopBreaker {
    /// Returns a policy that has met no branch yet.
    pub const fn new() -> Self {
        Self { seen: [(0, 0); 64] }
    }

    /// Returns the decision for `site` (for [`generate_with`]).
    pub fn decide(&mut self, site: BranchSite) -> Option<Decision> {
        match site.kind {
            BranchKind::Return => site.return_to.map(|_| Decision::Taken),
            k if k.is_indirect() => None,
            _ => {
                let i = usize::try_from(site.addr >> 2).unwrap_or(0) % self.seen.len();
                let slot = &mut self.seen[i];
                if slot.0 != site.addr {
                    *slot = (site.addr, 0);
                }
                slot.1 += 1;
                if slot.1 >= 4 {
                    slot.1 = 0;
                    Some(Decision::Taken)
                } else {
                    Some(Decision::NotTaken)
                }
            }
        }
    }
}

impl Default for LoopBreaker {
    fn default() -> Self {
        Self::new()
    }
}

/// Generates the ETMv4 stream for the path that starts at `start` in `image` (a [`CodeImage`]
/// or any other [`Code`]) and follows
/// `decisions`, writing it to `out` and reporting every executed range to `on_range`.
///
/// Decisions are consumed by conditional branches (`Taken`/`NotTaken`) and indirect branches
/// (`To(target)`, or `Taken` for a `RET` that returns to the last `BL`/`BLR` on the path).
/// Direct unconditional branches are always taken and consume none. The walk ends when a
/// branch needs a decision that is not there, at an unmodelled instruction, outside the
/// image or at [`GenConfig::max_insns`]; the reason is in [`GenSummary::stop`].
pub fn generate<C: Code + ?Sized, F: FnMut(ExecRange)>(
    image: &C,
    start: u64,
    decisions: &[Decision],
    cfg: &GenConfig,
    out: &mut [u8],
    on_range: F,
) -> Result<GenSummary, GenError> {
    let mut it = decisions.iter();
    generate_with(image, start, |_| it.next().copied(), cfg, out, on_range)
}

/// Like [`generate`], but asks `decide` for each decision; `None` ends the walk with
/// [`StopReason::DecisionsExhausted`].
pub fn generate_with<C, D, F>(
    image: &C,
    start: u64,
    mut decide: D,
    cfg: &GenConfig,
    out: &mut [u8],
    mut on_range: F,
) -> Result<GenSummary, GenError>
where
    C: Code + ?Sized,
    D: FnMut(BranchSite) -> Option<Decision>,
    F: FnMut(ExecRange),
{
    if image.word(start).is_none() {
        return Err(GenError::BadStart(start));
    }
    let mut em = Emitter {
        out,
        len: 0,
        history: [0; 3],
        atoms: 0,
        natoms: 0,
        ts: cfg.timestamp,
        ts_sent: 0,
        since_sync: 0,
        syncs: 0,
    };
    em.sync(start, cfg, true)?;

    let mut calls = [0u64; CALL_STACK];
    let mut ncalls = 0usize;
    let mut next_decision = 0usize;
    let mut pc = start;
    let mut block_start = start;
    let mut block_insns = 0u32;
    let mut total = 0u64;
    let mut ranges = 0u64;
    let mut branches = 0u32;

    let stop = loop {
        if total >= cfg.max_insns {
            break StopReason::InstructionLimit;
        }
        let Some(word) = image.word(pc) else {
            break StopReason::LeftImage(pc);
        };
        let (kind, offset) = match classify(word) {
            A64Class::Other => {
                pc = pc.wrapping_add(4);
                block_insns = block_insns.saturating_add(1);
                total += 1;
                continue;
            }
            A64Class::Unsupported => break StopReason::Unsupported(pc),
            A64Class::Branch { kind, offset } => (kind, offset),
        };
        let next = pc.wrapping_add(4);
        let decision = if matches!(kind, BranchKind::Direct | BranchKind::DirectLink) {
            None
        } else {
            let return_to = ncalls.checked_sub(1).and_then(|i| calls.get(i)).copied();
            let site = BranchSite {
                addr: pc,
                kind,
                return_to,
            };
            match decide(site) {
                None => break StopReason::DecisionsExhausted,
                Some(d) => {
                    next_decision = next_decision.saturating_add(1);
                    Some(d)
                }
            }
        };
        let (taken, target) = match (kind, decision) {
            (BranchKind::Direct | BranchKind::DirectLink, _) => {
                (true, pc.wrapping_add_signed(offset))
            }
            (BranchKind::Conditional, Some(Decision::Taken)) => {
                (true, pc.wrapping_add_signed(offset))
            }
            (BranchKind::Conditional, Some(Decision::NotTaken)) => (false, next),
            (_, Some(Decision::To(t))) if kind.is_indirect() && t & 3 == 0 => (true, t),
            (BranchKind::Return, Some(Decision::Taken)) if ncalls > 0 => {
                ncalls -= 1;
                (true, calls.get(ncalls).copied().unwrap_or(0))
            }
            (_, Some(Decision::Taken)) if kind.is_indirect() => break StopReason::NeedTarget(pc),
            _ => return Err(GenError::BadDecision(pc)),
        };
        block_insns = block_insns.saturating_add(1);
        total += 1;
        em.atom(taken)?;
        on_range(ExecRange {
            start: block_start,
            end: next,
            insns: block_insns,
            kind,
            taken,
        });
        ranges += 1;
        if kind.is_link() {
            if ncalls == CALL_STACK {
                // Keep the most recent return addresses.
                calls.copy_within(1.., 0);
                ncalls -= 1;
            }
            if let Some(slot) = calls.get_mut(ncalls) {
                *slot = next;
                ncalls += 1;
            }
        }
        if kind.is_indirect() {
            em.address(target)?;
        }
        pc = target;
        block_start = target;
        block_insns = 0;
        branches = branches.wrapping_add(1);
        if branches.checked_rem(cfg.timestamp_every) == Some(0) {
            em.timestamp(cfg.timestamp_step)?;
        }
        if cfg.sync_period != 0 && em.since_sync >= cfg.sync_period {
            em.sync(pc, cfg, false)?;
        }
    };
    em.flush_atoms()?;
    Ok(GenSummary {
        bytes: em.len,
        ranges,
        insns: total.saturating_sub(u64::from(block_insns)),
        decisions_used: next_decision,
        syncs: em.syncs,
        stop,
    })
}

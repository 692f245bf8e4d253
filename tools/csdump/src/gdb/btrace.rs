//! A CPU's decoded trace as GDB's branch trace: BTS blocks (`<block begin end/>`, `end` the
//! last instruction of the block, inclusive; gdb/features/btrace.dtd), served newest first.
//!
//! [`Builder::push`] is the one place that reads decoded trace elements: ranges of executed
//! instructions become blocks (a range that starts where the previous one ended continues its
//! block), exceptions and exception returns end a block, and a place where the trace lost
//! track (no sync, trace on after a gap, code the decoder could not read) becomes a gap. GDB
//! has no gap element in BTS format; a block whose end is below its begin makes GDB record a
//! gap there ("Recorded trace may be corrupted at instruction N (pc = ...)") and go on.
//!
//! GDB takes the end of the newest block as the thread's current instruction, not yet executed,
//! and lists the history up to the one before it. [`Builder::finish`] therefore ends the trace
//! where the CPU was going next: the target of a last direct branch (read from its encoding) or
//! of a last indirect one (the address packet after it), the instruction after a last range
//! that did not end in a taken branch, the address the decoder could not read; only when the
//! trace ends in an exception, or an indirect branch whose target it does not name, is the
//! last traced instruction the current one.

use std::collections::VecDeque;
use std::fmt::Write as _;

use cspd_hw::a64::direct_target;

use super::memory::Relocation;
use crate::decode::Element;

/// One piece of a CPU's flow, oldest first, at link-time addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// Instructions `begin..=end` executed in sequence.
    Block {
        /// First instruction.
        begin: u64,
        /// Last instruction.
        end: u64,
    },
    /// The trace lost track: what ran here is unknown. `at` is where it was lost (code the
    /// decoder could not read) or where it resumed.
    Gap {
        /// The address GDB's warning names.
        at: u64,
    },
}

/// Why the current instruction is where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEnd {
    /// The trace ends with a taken branch: the current instruction is its target (a direct
    /// branch's from its encoding, an indirect one's from the address packet after it).
    Branch {
        /// The branch instruction (link-time).
        from: u64,
    },
    /// The last range ends in an instruction that falls through: the next one is current.
    Sequential,
    /// The trace ends with an indirect branch whose target the trace does not name (or a
    /// taken branch whose code is not readable), so the branch itself is shown as current.
    Indirect,
    /// The trace ends with an exception: the vector is not in the trace, so the last executed
    /// instruction is shown as current.
    Exception,
    /// The trace ends where the decoder could not read the code: that address is current.
    Unreadable,
    /// The trace ends with an exception and the address of its vector: the vector is current.
    Vector,
}

impl TraceEnd {
    /// Says it in words, for the user.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Branch { .. } => "the target of the last branch",
            Self::Sequential => "the instruction after the last one traced",
            Self::Indirect => {
                "the last traced instruction (an indirect branch whose target the trace does \
                 not hold)"
            }
            Self::Exception => {
                "the last traced instruction (an exception followed, whose vector the trace \
                 does not hold)"
            }
            Self::Unreadable => "where the decoder could not read the code",
            Self::Vector => "the vector of the last exception",
        }
    }
}

/// A CPU's trace as GDB reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTrace {
    /// The flow, oldest first; the last piece is a block ending at [`Self::pc`].
    pub pieces: Vec<Piece>,
    /// The current instruction (link-time): the thread's PC.
    pub pc: u64,
    /// How [`Self::pc`] was found.
    pub end: TraceEnd,
    /// Instructions served (executed, the current one not counted).
    pub instructions: u64,
    /// Instructions decoded in all (more than served when the oldest were left out).
    pub decoded: u64,
    /// Gaps in the flow.
    pub gaps: usize,
}

impl ThreadTrace {
    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.pieces.len() - self.gaps
    }

    /// Returns the `<btrace>` document, newest block first.
    pub fn xml(&self) -> String {
        let mut s = String::with_capacity(96 + self.pieces.len() * 56);
        s.push_str(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n\
             <btrace version=\"1.0\">\n",
        );
        for p in self.pieces.iter().rev() {
            let (begin, end) = match *p {
                Piece::Block { begin, end } => (begin, end),
                // An end below the begin: GDB records a gap.
                Piece::Gap { at } => (at.max(1), at.max(1) - 1),
            };
            let _ = writeln!(s, "<block begin=\"{begin:#x}\" end=\"{end:#x}\"/>");
        }
        s.push_str("</btrace>\n");
        s
    }
}

/// An open block, at runtime addresses.
#[derive(Debug, Clone, Copy)]
struct Open {
    begin: u64,
    /// The last instruction.
    last: u64,
    /// The address after it.
    next: u64,
}

/// What the last element says about where the CPU went next.
#[derive(Debug, Clone, Copy)]
enum Tail {
    None,
    Range {
        last: u64,
        next: u64,
        taken: bool,
    },
    /// The last range ended in a taken branch whose target the trace named.
    Target {
        from: u64,
        to: u64,
    },
    Exception,
    /// An exception whose vector the trace named.
    Vector(u64),
    Unreadable(u64),
}

/// Builds a [`ThreadTrace`] from one CPU's decoded elements, oldest first, keeping the newest
/// blocks that hold at least the instructions asked for (all when no limit is given).
pub struct Builder<'r> {
    reloc: &'r Relocation,
    /// Closed pieces, oldest first, with their instruction counts.
    pieces: VecDeque<(Piece, u64)>,
    /// Instructions in `pieces`.
    kept: u64,
    limit: Option<u64>,
    open: Option<Open>,
    /// Instructions in the open block.
    open_count: u64,
    /// The next range continues the open block if it starts where that block ends.
    contiguous: bool,
    /// A gap to record before the next block: where the trace was lost, if known.
    pending_gap: Option<Option<u64>>,
    tail: Tail,
    /// Instructions decoded in all.
    decoded: u64,
}

impl<'r> Builder<'r> {
    /// Returns an empty builder; addresses are relocated with `reloc`. With `last`, only the
    /// newest blocks holding (at least) that many instructions are kept: GDB computes the
    /// history of every instruction it is given.
    pub fn new(reloc: &'r Relocation, last: Option<u64>) -> Self {
        Self {
            reloc,
            pieces: VecDeque::new(),
            kept: 0,
            limit: last,
            open: None,
            open_count: 0,
            contiguous: false,
            pending_gap: None,
            tail: Tail::None,
            decoded: 0,
        }
    }

    /// Instructions kept so far.
    pub fn kept(&self) -> u64 {
        self.kept + self.open_count
    }

    /// Takes the next decoded element. This is the adapter between the decoder's elements and
    /// GDB's blocks: the rest of the builder works on instruction ranges, exceptions and gaps.
    pub fn push(&mut self, e: &Element) {
        match *e {
            Element::Range {
                start,
                end,
                count,
                last_size,
                taken,
                ..
            } => self.range(start, end, count, last_size, taken),
            Element::Exception { .. } => {
                self.boundary();
                self.tail = Tail::Exception;
            }
            Element::ExceptionReturn => self.boundary(),
            Element::NoAccess { addr } => {
                self.boundary();
                self.lost(Some(addr));
                self.tail = Tail::Unreadable(addr);
            }
            Element::NoSync | Element::TraceOn => {
                self.boundary();
                self.lost(None);
            }
            Element::BranchTarget { addr } => match self.tail {
                Tail::Range {
                    last, taken: true, ..
                } => {
                    self.tail = Tail::Target {
                        from: last,
                        to: addr,
                    }
                }
                Tail::Exception => self.tail = Tail::Vector(addr),
                _ => {}
            },
        }
    }

    /// Instructions `start..end` executed, the last one `last_size` bytes long and executed
    /// (a branch: taken) or not.
    fn range(&mut self, start: u64, end: u64, count: u32, last_size: u32, taken: bool) {
        let size = u64::from(last_size.max(1));
        let Some(last) = end.checked_sub(size).filter(|&l| l >= start) else {
            return;
        };
        if count == 0 {
            return;
        }
        self.decoded += u64::from(count);
        self.tail = Tail::Range {
            last,
            next: end,
            taken,
        };
        match &mut self.open {
            Some(o) if self.contiguous && o.next == start => {
                o.last = last;
                o.next = end;
                self.open_count += u64::from(count);
            }
            _ => {
                self.close();
                if let Some(at) = self.pending_gap.take() {
                    let at = self.reloc.to_link(at.unwrap_or(start));
                    self.pieces.push_back((Piece::Gap { at }, 0));
                }
                self.open = Some(Open {
                    begin: start,
                    last,
                    next: end,
                });
                self.open_count = u64::from(count);
            }
        }
        self.contiguous = true;
    }

    /// The flow does not continue sequentially from the open block.
    fn boundary(&mut self) {
        self.contiguous = false;
    }

    /// The trace lost track (at `at`, when known); a gap is recorded if more trace follows.
    fn lost(&mut self, at: Option<u64>) {
        if self.open.is_some() || !self.pieces.is_empty() {
            // The first loss names the place; a later marker does not replace it.
            if !matches!(self.pending_gap, Some(Some(_))) {
                self.pending_gap = Some(at);
            }
        }
    }

    fn close(&mut self) {
        if let Some(o) = self.open.take() {
            let block = Piece::Block {
                begin: self.reloc.to_link(o.begin),
                end: self.reloc.to_link(o.last),
            };
            self.pieces.push_back((block, self.open_count));
            self.kept += self.open_count;
            self.open_count = 0;
            self.trim();
        }
    }

    /// Drops the oldest pieces the limit does not need (and a gap they leave in front).
    fn trim(&mut self) {
        let Some(limit) = self.limit else {
            return;
        };
        while let Some(&(p, n)) = self.pieces.front() {
            let rest = self.kept - n + self.open_count;
            if matches!(p, Piece::Gap { .. }) || rest >= limit {
                self.pieces.pop_front();
                self.kept = rest - self.open_count;
            } else {
                break;
            }
        }
    }

    /// Ends the trace; `word` reads the instruction at a runtime address (for the target of a
    /// last direct branch). `None` when no instruction was traced.
    pub fn finish(mut self, word: &dyn Fn(u64) -> Option<u32>) -> Option<ThreadTrace> {
        let open = self.open?;
        let to_link = |a: u64| self.reloc.to_link(a);
        // The runtime address of the current instruction, and whether it extends the open block
        // (the next sequential one) or starts a block of its own.
        let (current, end) = match self.tail {
            Tail::Unreadable(addr) => (Some(addr), TraceEnd::Unreadable),
            Tail::Exception | Tail::None => (None, TraceEnd::Exception),
            Tail::Vector(v) => (Some(v), TraceEnd::Vector),
            Tail::Target { from, to } => (
                Some(to),
                TraceEnd::Branch {
                    from: to_link(from),
                },
            ),
            Tail::Range { last, next, taken } => {
                let w = word(last);
                if !taken {
                    (Some(next), TraceEnd::Sequential)
                } else if let Some(t) = w.and_then(|w| direct_target(w, last)) {
                    (
                        Some(t),
                        TraceEnd::Branch {
                            from: to_link(last),
                        },
                    )
                } else if w.is_some_and(|w| !is_indirect_branch(w)) {
                    // An executed instruction that is not a branch (ISB, a waypoint).
                    (Some(next), TraceEnd::Sequential)
                } else {
                    (None, TraceEnd::Indirect)
                }
            }
        };
        let pc = match current {
            Some(c) if c == open.next && self.contiguous => {
                self.open = Some(Open {
                    last: c,
                    next: c.wrapping_add(4),
                    ..open
                });
                self.close();
                to_link(c)
            }
            Some(c) => {
                self.close();
                let block = Piece::Block {
                    begin: to_link(c),
                    end: to_link(c),
                };
                self.pieces.push_back((block, 0));
                to_link(c)
            }
            None => {
                self.close();
                to_link(open.last)
            }
        };
        // The current instruction was counted as executed when it is the last traced one.
        let not_executed = u64::from(current.is_none());
        let pieces: Vec<Piece> = self.pieces.into_iter().map(|(p, _)| p).collect();
        Some(ThreadTrace {
            gaps: pieces
                .iter()
                .filter(|p| matches!(p, Piece::Gap { .. }))
                .count(),
            pieces,
            pc,
            end,
            instructions: self.kept.saturating_sub(not_executed),
            decoded: self.decoded.saturating_sub(not_executed),
        })
    }
}

/// Whether an A64 word is a branch to a register (`BR`, `BLR`, `RET`, `ERET` and their
/// pointer-authenticated forms: the unconditional branch (register) class, DDI 0487 C4.1.93).
pub fn is_indirect_branch(w: u32) -> bool {
    w & 0xFE00_0000 == 0xD600_0000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::BranchType;

    fn range(start: u64, end: u64, taken: bool) -> Element {
        Element::Range {
            start,
            end,
            count: u32::try_from((end - start) / 4).unwrap_or(0),
            last_size: 4,
            taken,
            branch: BranchType::None,
            conditional: false,
        }
    }

    const BL: u32 = 0x9400_0010; // bl .+0x40
    const RET: u32 = 0xD65F_03C0;
    const NOP: u32 = 0xD503_201F;

    fn build(
        els: &[Element],
        reloc: &Relocation,
        word: &dyn Fn(u64) -> Option<u32>,
    ) -> ThreadTrace {
        let mut b = Builder::new(reloc, None);
        for e in els {
            b.push(e);
        }
        b.finish(word).unwrap()
    }

    #[test]
    fn contiguous_ranges_make_one_block_and_a_last_direct_branch_gives_the_pc() {
        let r = Relocation::none();
        let t = build(
            &[
                Element::NoSync,
                Element::TraceOn,
                range(0x100, 0x110, false),
                range(0x110, 0x120, true),
                range(0x200, 0x210, true),
            ],
            &r,
            &|a| Some(if a == 0x20c { BL } else { NOP }),
        );
        assert_eq!(
            t.pieces,
            [
                Piece::Block {
                    begin: 0x100,
                    end: 0x11c
                },
                Piece::Block {
                    begin: 0x200,
                    end: 0x20c
                },
                Piece::Block {
                    begin: 0x24c,
                    end: 0x24c
                },
            ]
        );
        assert_eq!(t.pc, 0x24c);
        assert_eq!(t.end, TraceEnd::Branch { from: 0x20c });
        assert_eq!(t.instructions, 12);
        assert_eq!(t.gaps, 0);
        let x = t.xml();
        let blocks: Vec<&str> = x.lines().filter(|l| l.starts_with("<block")).collect();
        assert_eq!(
            blocks,
            [
                "<block begin=\"0x24c\" end=\"0x24c\"/>",
                "<block begin=\"0x200\" end=\"0x20c\"/>",
                "<block begin=\"0x100\" end=\"0x11c\"/>",
            ]
        );
        assert!(x.starts_with("<?xml version=\"1.0\"?>"));
        assert!(x.contains("<btrace version=\"1.0\">"));
    }

    #[test]
    fn a_last_fall_through_extends_the_block_and_an_indirect_branch_is_current() {
        let r = Relocation::none();
        let t = build(&[range(0x100, 0x110, false)], &r, &|_| Some(NOP));
        assert_eq!(
            t.pieces,
            [Piece::Block {
                begin: 0x100,
                end: 0x110
            }]
        );
        assert_eq!(
            (t.pc, t.end, t.instructions),
            (0x110, TraceEnd::Sequential, 4)
        );
        let t = build(&[range(0x100, 0x110, true)], &r, &|_| Some(RET));
        assert_eq!(
            t.pieces,
            [Piece::Block {
                begin: 0x100,
                end: 0x10c
            }]
        );
        assert_eq!(
            (t.pc, t.end, t.instructions),
            (0x10c, TraceEnd::Indirect, 3)
        );
        // The trace named the RET's target (the address packet after it): that is current,
        // in a block of its own.
        let t = build(
            &[
                range(0x100, 0x110, true),
                Element::BranchTarget { addr: 0x4000 },
            ],
            &r,
            &|_| Some(RET),
        );
        assert_eq!(
            t.pieces,
            [
                Piece::Block {
                    begin: 0x100,
                    end: 0x10c
                },
                Piece::Block {
                    begin: 0x4000,
                    end: 0x4000
                }
            ]
        );
        assert_eq!(
            (t.pc, t.end, t.instructions),
            (0x4000, TraceEnd::Branch { from: 0x10c }, 4)
        );
        // Code that cannot be read: the branch's target is unknown.
        let t = build(&[range(0x100, 0x110, true)], &r, &|_| None);
        assert_eq!((t.pc, t.end), (0x10c, TraceEnd::Indirect));
        // A taken waypoint that is not a branch (ISB) falls through.
        let t = build(&[range(0x100, 0x110, true)], &r, &|_| Some(0xD503_3FDF));
        assert_eq!((t.pc, t.end), (0x110, TraceEnd::Sequential));
    }

    #[test]
    fn exceptions_split_blocks_and_lost_trace_is_a_gap() {
        let r = Relocation::none();
        let t = build(
            &[
                range(0x100, 0x108, false),
                Element::Exception {
                    ret: Some(0x108),
                    number: 0xE,
                },
                range(0x1280, 0x1290, true),
                range(0x108, 0x110, false),
                Element::NoAccess { addr: 0x9000 },
                Element::TraceOn,
                range(0x300, 0x308, false),
                Element::TraceOn,
                range(0x400, 0x404, true),
                Element::Exception {
                    ret: Some(0x404),
                    number: 0xC,
                },
            ],
            &r,
            &|a| Some(if a == 0x128c { 0xD69F_03E0 } else { NOP }),
        );
        assert_eq!(
            t.pieces,
            [
                Piece::Block {
                    begin: 0x100,
                    end: 0x104
                },
                Piece::Block {
                    begin: 0x1280,
                    end: 0x128c
                },
                Piece::Block {
                    begin: 0x108,
                    end: 0x10c
                },
                Piece::Gap { at: 0x9000 },
                Piece::Block {
                    begin: 0x300,
                    end: 0x304
                },
                Piece::Gap { at: 0x400 },
                Piece::Block {
                    begin: 0x400,
                    end: 0x400
                },
            ]
        );
        assert_eq!((t.pc, t.end), (0x400, TraceEnd::Exception));
        assert_eq!(t.gaps, 2);
        assert_eq!(t.blocks(), 5);
        let x = t.xml();
        assert!(x.contains("<block begin=\"0x9000\" end=\"0x8fff\"/>"));
    }

    #[test]
    fn a_trace_ending_in_unreadable_code_ends_there() {
        let r = Relocation::none();
        let t = build(
            &[
                range(0x100, 0x108, true),
                Element::NoAccess { addr: 0x9000 },
            ],
            &r,
            &|_| Some(0x1400_0000),
        );
        assert_eq!(t.pc, 0x9000);
        assert_eq!(t.end, TraceEnd::Unreadable);
        assert_eq!(
            t.pieces.last(),
            Some(&Piece::Block {
                begin: 0x9000,
                end: 0x9000
            })
        );
        assert_eq!(t.gaps, 0);
    }

    #[test]
    fn addresses_are_relocated_to_link_time() {
        // Image linked at 0x1000..0x2000, running 0x10000 higher; 0x50000 is outside it.
        let r = Relocation::new(0x10000, Some((0x1000, 0x2000)));
        let t = build(
            &[range(0x11000, 0x11008, true), range(0x50000, 0x50004, true)],
            &r,
            &|a| Some(if a == 0x50000 { 0x17FF_0400 } else { NOP }), // b .-0x3f000
        );
        assert_eq!(
            t.pieces,
            [
                Piece::Block {
                    begin: 0x1000,
                    end: 0x1004
                },
                Piece::Block {
                    begin: 0x50000,
                    end: 0x50000
                },
                Piece::Block {
                    begin: 0x1000,
                    end: 0x1000
                },
            ]
        );
        assert_eq!(t.pc, 0x1000);
    }

    #[test]
    fn a_limit_keeps_the_newest_blocks_that_hold_it() {
        let r = Relocation::none();
        let mut b = Builder::new(&r, Some(10));
        for i in 0..10u64 {
            if i == 5 {
                b.push(&Element::TraceOn);
            }
            b.push(&range(0x1000 * (i + 1), 0x1000 * (i + 1) + 0x10, false));
        }
        let t = b.finish(&|_| Some(NOP)).unwrap();
        // Three blocks of four hold ten; the last one ends at the current instruction.
        assert_eq!(
            t.pieces,
            [
                Piece::Block {
                    begin: 0x8000,
                    end: 0x800c
                },
                Piece::Block {
                    begin: 0x9000,
                    end: 0x900c
                },
                Piece::Block {
                    begin: 0xa000,
                    end: 0xa010
                },
            ]
        );
        assert_eq!((t.instructions, t.decoded, t.gaps), (12, 40, 0));
        // The gap before block 5 is kept when the window reaches back past it, and only then.
        let mut b = Builder::new(&r, Some(22));
        for i in 0..10u64 {
            if i == 5 {
                b.push(&Element::TraceOn);
            }
            b.push(&range(0x1000 * (i + 1), 0x1000 * (i + 1) + 0x10, false));
        }
        let t = b.finish(&|_| Some(NOP)).unwrap();
        assert_eq!(
            t.pieces[0],
            Piece::Block {
                begin: 0x5000,
                end: 0x500c
            }
        );
        assert_eq!(t.pieces[1], Piece::Gap { at: 0x6000 });
        assert_eq!((t.instructions, t.gaps), (24, 1));
    }

    #[test]
    fn nothing_traced_is_none() {
        let r = Relocation::none();
        let mut b = Builder::new(&r, None);
        b.push(&Element::NoSync);
        b.push(&Element::NoAccess { addr: 4 });
        assert!(b.finish(&|_| None).is_none());
    }
}

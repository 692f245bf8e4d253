#!/usr/bin/env python3
"""Judges csdump's decode of a trace scenario's dump against the independent execution record.

The record (exec.rec, written by tools/exec-record beside the CoreSight plugin) holds, per
vCPU, the translated blocks the vCPU executed, in order, with their instruction words. It
shares no code with the CoreSight emulation that produced the trace (crates/cspd-emu), so a
mistake of the emulation's tracker (where a block ends, which branch was taken, an exception's
return address) makes csdump's decode disagree with it, where truth.json, written by that
same tracker, would agree.

For each CPU with trace, every branch, waypoint and exception csdump decodes (`csdump report
--json`, the whole window) must be what the record says the CPU did, newest first:
- a taken branch from A to T: the record has block B right after block A, A's last instruction
  is at A, it is a branch (llvm-mc-19 disassembles it; a direct branch's target must be T) and
  B starts at T;
- an exception from R to V: V is a vector entry (0x80-aligned), the block after A starts at V,
  and A holds R or ends at R (an interrupt: exactly at A's end; R after a taken branch of A:
  that branch, then the exception);
- an ISB waypoint at W: W is in the block whose boundary was just matched;
- every other boundary of the record that leaves the straight line (a block that does not
  start where the previous one ended, or an unconditional branch) must have been reported;
- where csdump lost the flow (a `target` element: code the vmcore does not hold, such as user
  space), the record is followed to the branch that entered that code, and every block skipped
  must lie outside the kernel's upper half.
The newest decoded branch must be matched where the CPU's trace ended (the first boundary of the
record, searched from the newest, that starts a run of matches), and the record must reach back
to the oldest decoded branch; otherwise the check says the record is too short, not that the
trace is wrong.

The trace must also be whole: no decoder error, `csdump report` exit 3 only where a record of
the dump is damaged (a planted fault), and the plugin's counts of dropped trace bytes, lost
exception returns and gaps all zero.

Prints per CPU what it compared; exits 1 with the CPU and the event on the first disagreement.
"""

import argparse
import array
import itertools
import json
import os
import re
import struct
import subprocess
import sys

MAGIC = b"EXECREC1"
HEADER = 4096
INDEX_BITS = 40
INDEX_MASK = (1 << INDEX_BITS) - 1
# A cycle entry (a loop of 2..MAX_PERIOD blocks, each run once per pass) has low bits
# INDEX_MASK - (period - 2); tools/exec-record's documentation has the format.
MAX_PERIOD = 8
KERNEL_VA = 0xFFFF_0000_0000_0000
# ISB (any option): 1101 0101 0000 0011 0011 xxxx 1101 1111.
ISB_MASK, ISB_BITS = 0xFFFFF0FF, 0xD50330DF
# How many decoded events must match in a row for the newest one's place in the record to count.
ANCHOR_RUN = 32
LLVM_MC = "llvm-mc-19"


class Bad(Exception):
    pass


class Record:
    """exec.rec: the rings and the table of translated blocks (see tools/exec-record)."""

    def __init__(self, path):
        try:
            f = open(path, "rb")
        except OSError as e:
            raise Bad(f"cannot read the execution record {path}: {e}")
        with f:
            h = f.read(HEADER)
            if len(h) < HEADER or h[:8] != MAGIC:
                raise Bad(f"{path} is not an execution record (magic {h[:8]!r})")
            ver, self.vcpus = struct.unpack_from("<II", h, 8)
            self.entries, table_size, used, frozen, self.frozen_at, full = struct.unpack_from("<QQQQQQ", h, 16)
            if ver not in (1, 2):
                raise Bad(f"{path}: version {ver}, this judge reads 1 and 2")
            self.counts = struct.unpack_from(f"<{self.vcpus}Q", h, 64)
            self.frozen = frozen - 1 if frozen else None
            self.table_full = bool(full)
            self.path = path
            self.table_start = HEADER + self.vcpus * self.entries * 8
            f.seek(self.table_start)
            self.table = f.read(min(used, table_size))
        self.blocks = {}

    def ring(self, vcpu):
        """The vCPU's entries, oldest first, as (block index, repeats)."""
        n = self.counts[vcpu]
        kept = min(n, self.entries)
        a = array.array("Q")
        with open(self.path, "rb") as f:
            f.seek(HEADER + vcpu * self.entries * 8)
            a.fromfile(f, self.entries)
        if sys.byteorder != "little":
            a.byteswap()
        start = n % self.entries if n > self.entries else 0
        order = (a[start:] + a[:start]) if n > self.entries else a[:kept]
        # A wrapped ring's oldest cycle entries may have lost the loop they repeat.
        drop = 0
        for j in range(min(len(order), 2 * MAX_PERIOD)):
            p = period(order[j])
            if p and j - p < drop:
                drop = j + 1
        if drop:
            order = order[drop:]
        return order, n > self.entries

    def block_starts(self):
        """{table index: (start address, instruction count)} of every block in the table, walked
        in table order; None when the walk does not end exactly at the table's end (an entry
        with no instruction or one that runs past the table)."""
        out, off, t = {}, 0, self.table
        while off + 16 <= len(t):
            addr, n = struct.unpack_from("<QI", t, off)
            if n == 0 or off + 16 + 4 * n > len(t):
                return None
            out[off // 8] = (addr, n)
            off += 16 + (4 * n + 7) // 8 * 8
        return out if off == len(t) else None

    def last_words(self):
        """The last instruction word of every block in the table (walked in table order: far
        fewer than the ring's entries, which name blocks again and again)."""
        out, off, t = set(), 0, self.table
        while off + 16 <= len(t):
            n = struct.unpack_from("<I", t, off + 8)[0]
            end = off + 16 + 4 * n
            if n == 0 or end > len(t):
                break
            out.add(struct.unpack_from("<I", t, end - 4)[0])
            off += 16 + (4 * n + 7) // 8 * 8
        return out

    def block(self, index):
        """(start address, instruction words) of the block at table index `index`."""
        b = self.blocks.get(index)
        if b is None:
            off = index * 8
            if off + 16 > len(self.table):
                raise Bad(f"{self.path}: a ring entry points past the table ({off:#x})")
            addr, n = struct.unpack_from("<QI", self.table, off)
            if off + 16 + 4 * n > len(self.table):
                raise Bad(f"{self.path}: the block at table offset {off:#x} runs past the table")
            if n == 0:
                raise Bad(f"{self.path}: the block at table offset {off:#x} has no instruction")
            b = (addr, struct.unpack_from(f"<{n}I", self.table, off + 16))
            self.blocks[index] = b
        return b


class Disassembler:
    """Last instructions of blocks, disassembled by llvm-mc (not by the project's code)."""

    def __init__(self):
        self.cache = {}

    def classify(self, words):
        """Fills the cache for `words`: word -> (kind, offset) with kind 'direct' (b, bl),
        'cond' (b.cc, cbz, cbnz, tbz, tbnz), 'indirect' (br, blr, ret, eret and their
        authenticated forms) or None, and the direct target's offset in bytes."""
        todo = sorted({w for w in words if w not in self.cache})
        if not todo:
            return
        text = "".join(" ".join(f"0x{(w >> s) & 0xFF:02x}" for s in (0, 8, 16, 24)) + "\n" for w in todo)
        try:
            r = subprocess.run([LLVM_MC, "--disassemble", "-triple=aarch64", "-mattr=+all"],
                               input=text, capture_output=True, text=True)
        except FileNotFoundError:
            raise Bad(f"{LLVM_MC} is missing (package llvm-19, which scripts/setup.sh installs)")
        # An encoding llvm-mc does not know gets a warning naming its input line, and no output.
        invalid = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):\d+: warning: invalid instruction encoding",
                                                          r.stderr)}
        out = iter([l.strip() for l in r.stdout.splitlines() if l.strip() and not l.strip().startswith(".text")])
        for n, w in enumerate(todo, 1):
            self.cache[w] = (None, 0) if n in invalid else self.kind_of(next(out, ""))
        if next(out, None) is not None:
            raise Bad(f"{LLVM_MC} printed more instructions than it was given: cannot pair them")

    @staticmethod
    def kind_of(line):
        m = line.split(None, 1)
        if not m:
            return (None, 0)
        op, rest = m[0], (m[1] if len(m) > 1 else "")
        imm = re.search(r"#(-?(?:0x[0-9a-f]+|\d+))\s*$", rest)
        off = int(imm.group(1), 0) if imm else 0
        if op in ("b", "bl"):
            return ("direct", off)
        if op.startswith("b.") or op in ("cbz", "cbnz", "tbz", "tbnz"):
            return ("cond", off)
        if op in ("br", "blr", "ret", "eret", "braa", "brab", "blraa", "blrab", "braaz", "brabz",
                  "blraaz", "blrabz", "retaa", "retab", "eretaa", "eretab"):
            return ("indirect", 0)
        return (None, 0)


def events_of(cpu):
    """csdump's decoded events of `cpu`, oldest first: ('T', from, to), ('X', from, to),
    ('W', addr) or ('G', to) (the decoder lost the flow: code it could not read)."""
    out = []
    h = lambda x: int(x["addr"], 16) if x else None
    for b in cpu["branches"]:
        k = b["kind"]
        if k == "target":
            out.append(("G", h(b["to"])))
        elif k == "exception":
            out.append(("X", h(b["from"]), h(b["to"])))
        elif k == "ISB":
            out.append(("W", h(b["from"])))
        else:
            out.append(("T", h(b["from"]), h(b["to"])))
    return out


def period(entry):
    """The number of blocks of a cycle entry's loop; 0 for a block's entry."""
    low = entry & INDEX_MASK
    return INDEX_MASK - low + 2 if low > INDEX_MASK - MAX_PERIOD + 1 else 0


def index_at(ring, j, r):
    """The table index of the block that is run `r` (from 0) of ring entry `j`: the entry's
    block, or for a cycle entry its loop's block number r % period (the loop is the period
    entries before it)."""
    e = ring[j]
    p = period(e)
    return (ring[j - p + r % p] if p else e) & INDEX_MASK


def boundaries(rec, ring, at=None):
    """The record's block boundaries, newest first, from position `at` (default: the newest):
    ((A, B), position) with A and B (start, words) and the position to start at A -> its
    predecessor. A position is (entry, run) counted from the ring's oldest entry; an entry has
    1 + its upper bits runs (a block repeated, or the blocks of a cycle entry)."""
    j, r = at if at is not None else (len(ring) - 1, ring[-1] >> INDEX_BITS if ring else 0)
    if j < 0:
        return
    prev = rec.block(index_at(ring, j, r))
    cyc = period(ring[j])
    while True:
        # The run before `prev`: an earlier run of the same entry, or the entry before's last.
        if r > 0:
            r -= 1
            blk = rec.block(index_at(ring, j, r)) if cyc else prev
        else:
            j -= 1
            if j < 0:
                return
            r = ring[j] >> INDEX_BITS
            cyc = period(ring[j])
            blk = rec.block(index_at(ring, j, r))
        yield (blk, prev), (j, r)
        prev = blk


def forward(rec, ring, at):
    """The blocks the record runs after the block at position `at` (as boundaries() gives
    positions), oldest first, as (start, words), up to the ring's newest."""
    j, r = at
    while True:
        if 0 <= j < len(ring) and r < ring[j] >> INDEX_BITS:
            r += 1
        else:
            j, r = j + 1, 0
            if j >= len(ring):
                return
        yield rec.block(index_at(ring, j, r))


def blocks_back(rec, ring):
    """The record's blocks, newest first, as (start, words)."""
    it = boundaries(rec, ring)
    first = next(it, None)
    if first is None:
        if ring:
            yield rec.block(index_at(ring, 0, 0))
        return
    yield first[0][1]
    yield first[0][0]
    for (a, _), _ in it:
        yield a


def following(rec, ring, at, count):
    """Up to `count` blocks the record runs after the block at position `at`, oldest first."""
    return list(itertools.islice(forward(rec, ring, at), count))


def hits(rec, ring, e, hit):
    """The boundaries of `ring` where event `e` can have happened, newest first, as
    ((A, B), position): what walking boundaries(rec, ring) and keeping those where hit(e, A, B)
    holds gives. Instead of walking every boundary (tens of millions when the ring is full),
    the ring's bytes are searched for the blocks that can be A or B; when the table cannot be
    walked cleanly or the host is big-endian, every boundary is walked."""
    starts = rec.block_starts() if sys.byteorder == "little" else None
    if starts is None:
        for (a, b), pos in boundaries(rec, ring):
            if hit(e, a, b):
                yield (a, b), pos
        return
    if e[0] == "T":
        can_a = {i for i, (s, n) in starts.items() if s + 4 * n - 4 == e[1]}
        can_b = {i for i, (s, n) in starts.items() if s == e[2]}
    elif e[0] == "X":
        can_a, can_b = None, {i for i, (s, n) in starts.items() if s == e[2]}
    elif e[0] == "W":
        can_a, can_b = {i for i, (s, n) in starts.items() if s <= e[1] <= s + 4 * n - 4}, None
    else:
        return
    raw = _ring_bytes(ring)
    patterns = lambda blocks: [i.to_bytes(5, "little") for i in blocks]
    # Search the ring for the side with fewer blocks (each is a scan of the whole ring): A (the
    # entries j of the boundaries j -> j + 1) or B (the entries j + 1).
    by_a = can_b is None or (can_a is not None and len(can_a) <= len(can_b))
    entries = set()
    last = len(ring) - 1
    for pat in patterns(can_a if by_a else can_b):
        at = raw.find(pat)
        while at >= 0:
            if at % 8 == 0:
                # The entry's cross boundary and repetitions; for B also the cross boundary of
                # the entry before.
                j = at // 8
                entries.add(j)
                if not by_a and j:
                    entries.add(j - 1)
                # A cycle entry whose loop holds this block: its runs and its boundaries in and
                # out are boundaries of this block too.
                for c in range(j + 1, min(j + MAX_PERIOD, last) + 1):
                    p = period(ring[c])
                    if p and c - p <= j:
                        entries.update((c - 1, c))
            at = raw.find(pat, at + 1)
    ok_a = (lambda i: True) if can_a is None else can_a.__contains__
    ok_b = (lambda i: True) if can_b is None else can_b.__contains__
    for j in sorted(entries, reverse=True):
        reps = ring[j] >> INDEX_BITS
        p = period(ring[j])
        if j < last:
            idx, nxt = index_at(ring, j, reps), index_at(ring, j + 1, 0)
            if ok_a(idx) and ok_b(nxt):
                a, b = rec.block(idx), rec.block(nxt)
                if hit(e, a, b):
                    yield (a, b), (j, reps)
        if not reps:
            continue
        if not p:
            idx = ring[j] & INDEX_MASK
            if ok_a(idx) and ok_b(idx):
                a = rec.block(idx)
                if hit(e, a, a):
                    for r in range(reps - 1, -1, -1):
                        yield (a, a), (j, r)
            continue
        # A cycle entry: run r -> r + 1 is the loop's block r % p -> (r + 1) % p.
        pairs = {}
        for k in range(p):
            ia, ib = index_at(ring, j, k), index_at(ring, j, k + 1)
            pairs[k] = ok_a(ia) and ok_b(ib) and hit(e, rec.block(ia), rec.block(ib))
        if any(pairs.values()):
            for r in range(reps - 1, -1, -1):
                if pairs[r % p]:
                    yield (rec.block(index_at(ring, j, r)), rec.block(index_at(ring, j, r + 1))), (j, r)


_RING_BYTES = {}


def _ring_bytes(ring):
    """`ring`'s bytes, kept for the ring object (judges search the same ring many times)."""
    key = id(ring)
    hit = _RING_BYTES.get(key)
    if hit is None or hit[0] is not ring:
        hit = _RING_BYTES[key] = (ring, ring.tobytes())
    return hit[1]


def walked_to(ring, pos):
    """How many boundaries boundaries(rec, ring) walks up to and including the one at `pos`."""
    j, r = pos
    last = len(ring) - 1
    reps = lambda x: x >> INDEX_BITS
    if j == last:
        return reps(ring[last]) - r
    # The repetitions of the entries between are the top three bytes of each (little-endian)
    # entry: summed a byte lane at a time, not entry by entry (tens of millions of them).
    raw = ring[j + 1:last].tobytes() if sys.byteorder == "little" else None
    if raw is None:
        between = sum(1 + reps(x) for x in ring[j + 1:last])
    else:
        between = (last - j - 1) + sum(sum(raw[INDEX_BITS // 8 + k::8]) << (8 * k) for k in range(3))
    return reps(ring[last]) + between + 1 + reps(ring[j]) - r


def describe(ev):
    return {"T": "taken branch", "X": "exception", "W": "ISB", "G": "lost flow"}[ev[0]] + " " + \
        " -> ".join(f"{x:#x}" for x in ev[1:] if x is not None)


def asynchronous(vector):
    """Whether `vector` is an IRQ, FIQ or SError entry of a vector table (entries 0x80 apart,
    in groups of four: synchronous, IRQ, FIQ, SError). QEMU takes those between blocks, so
    their preferred return is where the block before ended."""
    return vector & 0x7F == 0 and (vector >> 7) & 3 != 0


# Code the trace units did not trace (--untraced-el0: EL0, which the user excluded through the
# ETMs' sysfs mode; --traced-range: everything outside the range set; --untraced-range: the range
# excluded), or None.
UNTRACED = None


class Matcher:
    def __init__(self, rec, dis, cpu, events, unserved=None):
        self.rec, self.dis, self.cpu, self.ev = rec, dis, cpu, events
        # Code the decoder was not given (user space for a vmcore; a snapshot that holds only
        # vmlinux's text also lacks the kernel's aliases of it): it decodes none of it.
        self.unserved = unserved or (lambda x: x < KERNEL_VA)
        self.untraced = UNTRACED
        self.user_skipped = 0
        # The oldest event index a match reached (for the best candidate's message).
        self.deepest = len(events)

    def hit(self, e, a, b):
        """Whether the boundary A -> B can be where event `e` happened."""
        start, words = a
        last = start + 4 * len(words) - 4
        if e[0] == "T":
            return e[1] == last and e[2] == b[0]
        if e[0] == "X":
            return e[2] == b[0]
        if e[0] == "W":
            return start <= e[1] <= last
        return False

    def must_report(self, a, b):
        """Whether the boundary A -> B leaves the straight line (the trace must show it)."""
        start, words = a
        end = start + 4 * len(words)
        if b[0] != end:
            return True
        kind, _ = self.dis.cache.get(words[-1], (None, 0))
        return kind in ("direct", "indirect")

    def match_at(self, it, i, stop_after=None):
        """Matches the events ev[..i] (newest first) against the boundaries `it` yields.
        Returns the number matched, or raises Bad naming the first disagreement."""
        ev = self.ev
        matched = 0
        lost = None
        for a, b in it:
            self.deepest = min(self.deepest, i)
            if i < 0 or (stop_after is not None and matched >= stop_after):
                return matched
            start, words = a
            end = start + 4 * len(words)
            last = end - 4
            self.dis.classify([words[-1]])
            kind, off = self.dis.cache[words[-1]]
            e = ev[i]
            if e[0] == "G":
                # Lost flow (a run of `target` elements: addresses csdump could not read). The
                # record is skipped back to where the event before the run entered that code;
                # nothing skipped may be kernel code, and each lost address must be in a block
                # the CPU ran there.
                if lost is None:
                    j = i
                    while j >= 0 and ev[j][0] == "G":
                        j -= 1
                    lost = (j, {x[1] for x in ev[j + 1:i + 1]})
                j, want = lost
                for x in [x for x in want if start <= x < end or x == b[0]]:
                    want.discard(x)
                entry = ev[j] if j >= 0 else None
                entered = entry is not None and entry[2:] == (b[0],) and (
                    entry[0] == "X" or (entry[0] == "T" and entry[1] == last))
                if not entered:
                    self.user_skipped += self.unserved(start)
                    if entry is None and self.unserved(b[0]) and not self.unserved(start) and not want:
                        # The window starts in that code: everything is matched.
                        matched += i + 1
                        i = -1
                        continue
                    if not self.unserved(start) and not self.unserved(b[0]) and self.must_report(a, b):
                        raise Bad(f"CPU{self.cpu}: csdump lost the flow at event {i} ({describe(e)}), but the "
                                  f"record has the CPU in kernel code meanwhile: block {start:#x} -> {b[0]:#x}")
                    continue
                if want:
                    raise Bad(f"CPU{self.cpu}: csdump lost the flow at {', '.join(f'{x:#x}' for x in sorted(want))} "
                              f"(events {j + 1}..{i}), where the record has the CPU run no such instruction")
                matched += i - j
                i = j
                lost = None
                e = ev[i]
            took = False
            if e[0] == "X" and e[2] is None and self.untraced and self.untraced(b[0]):
                # An exception into code the trace unit did not trace (its vector outside the
                # traced range): the trace gives where it returns, not its target. Judged as an
                # exception into B.
                e = ("X", e[1], b[0])
            if e[0] == "X" and (e[2] is None or e[2] & 0x7F):
                into = "no target" if e[2] is None else f"{e[2]:#x}"
                raise Bad(f"CPU{self.cpu}: csdump's exception at event {i} enters {into}, which is not an "
                          "exception vector (vector entries are 0x80 apart)")
            if e[0] == "X" and e[2] == b[0]:
                # An exception into B; A's last branch may have been taken first.
                i -= 1
                matched += 1
                ret = e[1]
                if i >= 0 and ev[i][0] == "T" and ev[i][1] == last and ev[i][2] == ret:
                    self.check_branch(kind, off, last, ret, i)
                    i -= 1
                    matched += 1
                elif (self.unserved(start) or (i >= 0 and ev[i][0] == "G")) and (
                        kind == "indirect" or (kind is not None and last + off == ret)):
                    # From code csdump could not follow (user space): A's last branch, which it
                    # could not see, took the CPU to where the exception returns.
                    pass
                elif not (start <= ret <= end) or (asynchronous(b[0]) and ret != end):
                    raise Bad(f"CPU{self.cpu}: csdump's exception at event {i + 1} returns to {ret:#x}, but the "
                              f"record's block before the vector {b[0]:#x} is {start:#x}..{end:#x} and its "
                              "last branch was not reported as taken to it")
                took = True
            elif e[0] == "T" and e[1] == last and e[2] == b[0]:
                self.check_branch(kind, off, last, b[0], i)
                i -= 1
                matched += 1
                took = True
            elif e[0] == "T" and e[2] is None and e[1] == last and self.untraced and self.untraced(b[0]):
                # An indirect branch into code the trace unit did not trace: no target.
                i -= 1
                matched += 1
                took = True
            elif self.unserved(start) and self.unserved(b[0]):
                # User space, which the vmcore does not serve: csdump decodes none of it.
                self.user_skipped += 1
                continue
            elif self.untraced and (self.untraced(b[0]) or self.untraced(start)) and e[0] != "W":
                # Into or out of code the trace unit did not trace: a branch into it ends the
                # trace without a target, the exception that leaves it has no packet (the trace
                # starts again at the vector).
                self.user_skipped += 1
                continue
            elif self.must_report(a, b) and e[0] != "W":
                raise Bad(f"CPU{self.cpu}: csdump's event {i} ({describe(e)}) is not what the CPU did: the record "
                          f"has block {start:#x}..{end:#x} (last instruction {last:#x}, "
                          f"{kind or 'not a branch'}) followed by {b[0]:#x}")
            # ISBs of block A, newest first.
            for w_at in range(len(words) - 1, -1, -1):
                if i >= 0 and ev[i][0] == "W" and (words[w_at] & ISB_MASK) == ISB_BITS \
                        and ev[i][1] == start + 4 * w_at:
                    i -= 1
                    matched += 1
            if not took and i >= 0 and ev[i][0] == "W" and not (start <= ev[i][1] < end) \
                    and self.must_report(a, b):
                raise Bad(f"CPU{self.cpu}: csdump's ISB at {ev[i][1]:#x} (event {i}) is not in the record's "
                          f"block {start:#x}..{end:#x}")
        if i >= 0:
            raise Short(i)
        return matched

    def check_branch(self, kind, off, last, to, i):
        if kind is None:
            raise Bad(f"CPU{self.cpu}: csdump's event {i} is a taken branch from {last:#x}, which "
                      f"{LLVM_MC} does not disassemble as a branch")
        if kind in ("direct", "cond") and last + off != to:
            raise Bad(f"CPU{self.cpu}: csdump's event {i} is a branch from {last:#x} to {to:#x}, but the "
                      f"instruction there branches to {last + off:#x}")


class Short(Exception):
    def __init__(self, left):
        self.left = left


def _newest_match(rec, dis, cpu, events, ring, wrapped, unserved=None):
    """check_cpu's search: (the position of the boundary of the decode's newest event, events
    matched, boundaries skipped in code the decoder was not given, the matcher).

    The decode's newest ANCHOR_RUN events must match in a row for a place to be a candidate.
    When none does, a decode whose wrong event lies among its newest would be said to end nowhere
    in the record: the search is made again with a SHORT_ANCHOR_RUN, so that the judge names the
    event where such a decode parts from what the CPU did."""
    try:
        return _newest_match_run(rec, dis, cpu, events, ring, wrapped, unserved, ANCHOR_RUN)
    except NoAnchor as first:
        if min(ANCHOR_RUN, len(events)) <= SHORT_ANCHOR_RUN:
            raise Bad(str(first))
        try:
            return _newest_match_run(rec, dis, cpu, events, ring, wrapped, unserved, SHORT_ANCHOR_RUN)
        except NoAnchor:
            raise Bad(str(first))


# The newest events of a decode a place in the record must match to be where the decode ended,
# and the shorter run tried when no place matches that many (see _newest_match).
SHORT_ANCHOR_RUN = 4


class NoAnchor(Exception):
    """No place in the record matches the decode's newest events in a row."""


def _newest_match_run(rec, dis, cpu, events, ring, wrapped, unserved, anchor):
    """_newest_match with `anchor` newest events to match in a row; NoAnchor when no place does."""
    m = Matcher(rec, dis, cpu, events, unserved)
    n = len(events)
    run = min(anchor, n)
    best = None
    for (a, b), pos in hits(rec, ring, events[-1], m.hit):

        def from_here():
            yield (a, b)
            for bd, _ in boundaries(rec, ring, pos):
                yield bd
        try:
            got = m.match_at(from_here(), n - 1, stop_after=run)
        except (Bad, Short):
            continue
        if got < run:
            continue
        # A candidate: the newest events match here. The whole decode must.
        m.user_skipped = 0
        m.deepest = n
        try:
            total = m.match_at(from_here(), n - 1)
            return pos, total, m.user_skipped, m
        except Short as s:
            why = ("the ring wrapped: the record keeps the newest "
                   f"{rec.entries} blocks" if wrapped else "the record starts there")
            err = Bad(f"CPU{cpu}: the record does not reach back to csdump's oldest {s.left + 1} events "
                      f"({why}): a sizing error of the harness, not a verdict on the trace")
            depth = s.left
        except Bad as e:
            err, depth = e, m.deepest
        # Keep the candidate that matched the most; a repeated loop gives several.
        if best is None or depth < best[0]:
            best = (depth, err)
    if best is not None:
        if wrapped:
            raise Bad(f"{best[1]} (the record's ring wrapped: it keeps the newest {rec.entries} of the "
                      f"{rec.counts[cpu]} entries CPU{cpu} wrote, so the place where the decode ended may "
                      "be older than it, and this the closest look-alike)")
        raise best[1]
    if wrapped:
        raise NoAnchor(f"CPU{cpu}: csdump's newest event ({describe(events[-1])}) and the {run} before it are "
                       f"not among the {rec.entries} newest entries the record kept (its ring wrapped: the CPU "
                       f"ran {rec.counts[cpu]}): the record may not reach back to where the trace ended (a "
                       "sizing error of the harness), or the decode's end is wrong")
    raise NoAnchor(f"CPU{cpu}: csdump's newest event ({describe(events[-1])}) and the {run} before "
                   "it are nowhere in the record as a run")


# A decode that ends in a run of one event this long (a CPU that polls) is matched without it
# first, then the run is checked on the blocks the record has after that place.
TRAIL_RUN = 64


def check_cpu(rec, dis, cpu, events, ring, wrapped, unserved=None):
    """Finds csdump's decode of `cpu` as a run of the record's boundaries: the newest place
    where it matches whole (`unserved`: see Matcher). Returns (boundaries after its end, events
    matched, boundaries skipped in code the decoder was not given).

    A decode that ends in a long run of one event (a CPU polling a flag when the trace stopped:
    thousands of iterations of one loop) would be tried at every iteration the record holds,
    each try walking the run back. The decode without the run is found instead (its newest event
    is not the loop's), and the run must follow it in the record: that many iterations of the
    loop, and no branch, exception or block the trace must show in between."""
    n = len(events)
    trail = trail_of(events)
    if trail < TRAIL_RUN or trail == n:
        pos, total, skipped, _ = _newest_match(rec, dis, cpu, events, ring, wrapped, unserved)
        return walked_to(ring, pos) - 1, total, skipped
    head = events[:n - trail]
    pos, total, skipped, m = _newest_match(rec, dis, cpu, head, ring, wrapped, unserved)
    loop, seen, walked = events[-1], 0, 0
    after = forward(rec, ring, pos)
    prev = next(after, None)
    for b in after:
        if seen == trail:
            break
        walked += 1
        if m.hit(loop, prev, b):
            seen += 1
        else:
            m.dis.classify([prev[1][-1]])
            if m.must_report(prev, b) and not (m.unserved(prev[0]) and m.unserved(b[0])):
                raise Bad(f"CPU{cpu}: csdump decodes {trail} {describe(loop)} after its event {n - trail - 1}, "
                          f"but after {seen} of them the record has block {prev[0]:#x} -> {b[0]:#x}")
        prev = b
    if seen < trail:
        raise Bad(f"CPU{cpu}: the record ends {seen} of the {trail} {describe(loop)} that csdump decodes "
                  f"after its event {n - trail - 1}: a sizing error of the harness, not a verdict")
    return walked_to(ring, pos) - 1 - walked, total + trail, skipped


def self_test(rec, dis, cpu, events, ring, wrapped, unserved=None):
    """The judge must fail a decode that differs from the record by one event: a kernel branch
    (one with a target) whose target is one instruction off, one kernel branch dropped, an exception that returns
    one instruction off (an interrupt's, whose return is exact). Each mutation is made in the
    middle of the window."""
    kernel = lambda e: all(x is None or x >= KERNEL_VA for x in e[1:])
    mid = len(events) // 2
    # A branch whose target the decode gives (a branch into untraced code may have none).
    t = next(i for i in range(mid, len(events))
             if events[i][0] == "T" and kernel(events[i]) and events[i][2] is not None)
    x = next((i for i in range(mid, len(events))
              if events[i][0] == "X" and kernel(events[i]) and None not in events[i][1:]
              and asynchronous(events[i][2])), None)
    cases = [("a branch target one instruction off", t, ("T", events[t][1], events[t][2] + 4)),
             ("a branch dropped", t, None)]
    if x is not None:
        cases.append(("an exception that returns one instruction off", x,
                      ("X", events[x][1] + 4, events[x][2])))
    mutations = [(what, i, events[:i] + ([ev] if ev else []) + events[i + 1:]) for what, i, ev in cases]
    _fails(rec, dis, cpu, mutations + _trail_mutations(events), ring, wrapped, unserved)


def trail_of(events):
    """How many events the decode ends with that are its newest one (a CPU polling)."""
    n = len(events)
    return next((k for k in range(1, n) if events[n - 1 - k] != events[-1]), n)


def _trail_mutations(events):
    """For a decode that ends in a polling loop (TRAIL_RUN events or more, checked on their own
    by check_cpu): the run with each branch's target one instruction off."""
    n, last, trail = len(events), events[-1], trail_of(events)
    if not (TRAIL_RUN <= trail < n and last[0] == "T"):
        return []
    return [(f"the trailing run of {trail} branches each one instruction off", n - trail,
             events[:n - trail] + [("T", last[1], last[2] + 4)] * trail)]


def self_test_trail(rec, dis, cpu, events, ring, wrapped, unserved=None):
    """self_test's check of a decode's trailing polling loop alone (none when it has none)."""
    _fails(rec, dis, cpu, _trail_mutations(events), ring, wrapped, unserved)


def _fails(rec, dis, cpu, mutations, ring, wrapped, unserved):
    for what, i, mutated in mutations:
        try:
            check_cpu(rec, dis, cpu, mutated, ring, wrapped, unserved)
        except Bad as e:
            print(f"self-test: {what} (CPU{cpu}, event {i}) fails the judge: {str(e)[:160]}")
            continue
        raise Bad(f"the judge passed a decode with {what} (CPU{cpu}, event {i}): it cannot be trusted")


def check_whole(a, status, report):
    """The trace decodes whole: no decoder error, `csdump report` exit 3 (decoded in part) only
    when a record of the dump is damaged or partial (a fault the scenario planted), and the
    plugin neither dropped trace bytes nor lost an exception's return or the flow."""
    if report["decoder_error_count"]:
        raise Bad(f"csdump's decode has {report['decoder_error_count']} decoder errors: "
                  f"{report['decoder_errors'][:3]}")
    if status == 3:
        r = subprocess.run([a.csdump, "info", "--json", a.vmcore], capture_output=True, text=True)
        try:
            records = json.loads(r.stdout)["records"]
        except (ValueError, KeyError):
            raise Bad(f"csdump info failed ({r.returncode}): {r.stderr[-500:]}")
        damaged = [f"{x['kind']} {x['status']}" for x in records if x.get("status") != "ok"]
        if not damaged:
            raise Bad("csdump report says the trace decoded in part (exit 3), but every record of the "
                      "dump is sound")
        print(f"csdump report exit 3: the dump has {', '.join(damaged)} (the scenario's fault)")
    try:
        log = open(os.path.join(a.dir, "plugin.log"), errors="replace").read()
    except OSError as e:
        raise Bad(f"cannot read the plugin's log: {e}")
    m = re.search(r"qemu-coresight: exit: .*?\((\d+) dropped, (\d+) of them after the TMC took its last byte\)"
                  r".*?(\d+) lost, (\d+) gaps", log)
    if not m:
        raise Bad("the plugin's log has no exit line with its dropped, lost and gap counts")
    dropped, after_stop, lost, gaps = map(int, m.groups())
    if a.dropped_after_stop and dropped == after_stop:
        # A CPU that went on tracing after the capture kernel stopped the sink: its bytes had
        # nowhere to go, and none of them is in the dump.
        print(f"the plugin dropped {dropped} trace bytes, all after the TMC took its last byte (a CPU "
              "traced on after the sink stopped)")
        dropped = 0
    if dropped or lost or gaps:
        raise Bad(f"the plugin dropped {dropped} trace bytes, lost {lost} exception returns and "
                  f"recorded {gaps} gaps: the trace is not whole")


# `HVC #imm` or `SMC #imm`: a call to the firmware (PSCI's conduit).
HVC_SMC_MASK, HVC_SMC = 0xFFE0_001E, 0xD400_0002


def newest_block(rec, cpu):
    """(start, words) of the newest block the record has vCPU `cpu` run (the record froze when the
    capture kernel started: what each CPU was running then)."""
    ring, _ = rec.ring(cpu)
    return next(blocks_back(rec, ring), None)


def capture_sample_faults(rec, cpu, sample):
    """Why the capture kernel's sample of `cpu` contradicts the record, or None: a sampled PC lies in
    the newest block the CPU ran (a CPU that ignored the crash stop still runs it), which is no call
    to the firmware; a powered-off CPU's newest block ends with a call to the firmware that never
    returned."""
    b = newest_block(rec, cpu)
    if b is None:
        return f"the record has no block of CPU{cpu}"
    start, words = b
    if sample.get("outcome") == "sampled":
        pc = int(sample["pc"]["addr"], 16)
        if not start <= pc < start + 4 * len(words):
            return (f"CPU{cpu}'s sample {pc:#x} is not in the block it ran last "
                    f"({start:#x}..{start + 4 * len(words):#x})")
        if words[-1] & HVC_SMC_MASK == HVC_SMC:
            return (f"CPU{cpu} is said sampled, but the block it ran last ({start:#x}) ends with a call "
                    "to the firmware that never returned (it was powered off)")
        return None
    if sample.get("outcome", "").startswith("powered off"):
        if words[-1] & HVC_SMC_MASK != HVC_SMC:
            return (f"CPU{cpu} is said powered off, but the block it ran last ({start:#x}) ends with "
                    f"{words[-1]:#010x}, no call to the firmware")
        return None
    return f"CPU{cpu}: a capture sample with outcome {sample.get('outcome')!r}"


def check_capture_samples(a, rec, report):
    """--capture-samples N: the capture kernel's samples (of CPUs not online there) against the
    record: at least N of them, each consistent with what the CPU last ran; and each, moved out of
    that block or said of the other state, fails the check (its self-test, always run)."""
    got = [(c["cpu"], c["sample"]) for c in report["cpus"]
           if ((c.get("sample") or {}).get("origin") or {}).get("by") == "capture-kernel"]
    if len(got) < a.capture_samples:
        raise Bad(f"{len(got)} capture kernel's CPU samples in csdump's report, expected {a.capture_samples}")
    for cpu, sm in got:
        why = capture_sample_faults(rec, cpu, sm)
        if why:
            raise Bad(f"capture sample: {why}")
        start, words = newest_block(rec, cpu)
        print(f"capture sample: CPU{cpu} {sm['outcome']}"
              + (f" at {sm['pc']['addr']}" if sm.get("pc") else "")
              + f", consistent with the block it ran last ({start:#x}, {len(words)} instructions)")
        if sm.get("outcome") == "sampled":
            moved = dict(sm, pc=dict(sm["pc"], addr=hex(start + 4 * len(words))))
            bad = [("its PC one block further", moved), ("said powered off", dict(sm, outcome="powered off"))]
        else:
            bad = [("said sampled in that block", dict(sm, outcome="sampled", pc={"addr": hex(start)}))]
        for what, m in bad:
            if capture_sample_faults(rec, cpu, m) is None:
                raise Bad(f"self-test: CPU{cpu}'s capture sample {what} passes the judge")
            print(f"self-test: CPU{cpu}'s capture sample {what} fails the judge")


def hex_range(v):
    """An address range given as LO:HI (hexadecimal), as a pair."""
    lo, hi = (int(x, 16) for x in v.split(":"))
    return lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the run directory (exec.rec)")
    ap.add_argument("--vmcore", required=True, help="the dump csdump decodes")
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--csdump", required=True)
    ap.add_argument("--cpus", help="CPUs to judge (default: every CPU csdump decoded trace for)")
    ap.add_argument("--text-from", help="csdump report --text-from: the kernel text of a region "
                    "file's dump, from a vmcore of the next boot (warm reboot)")
    ap.add_argument("--expect-no-decode", metavar="WHY",
                    help="the scenario's sink record holds no trace csdump can decode, for this reason")
    ap.add_argument("--untraced-el0", action="store_true",
                    help="EL0 was excluded from the trace (the ETMs' sysfs mode): the decode may pass from "
                         "kernel code into EL0 and back with no event")
    ap.add_argument("--traced-range", metavar="LO:HI", type=hex_range,
                    help="the ETMs traced only LO..HI (hexadecimal, both ends included): the decode passes "
                         "into and out of it with no event, every boundary inside it is in the decode")
    ap.add_argument("--untraced-range", metavar="LO:HI", type=hex_range,
                    help="the ETMs excluded LO..HI (hexadecimal, both ends included): the decode passes "
                         "into and out of it with no event, every boundary outside it is in the decode")
    ap.add_argument("--dropped-after-stop", action="store_true",
                    help="trace bytes the plugin dropped are accepted when all of them came after the TMC "
                    "took its last byte (a CPU that went on tracing after the capture kernel stopped the sink)")
    ap.add_argument("--capture-samples", type=int, default=0, metavar="N",
                    help="csdump's report has at least N samples a kdump capture kernel took of CPUs not "
                    "online there: judge each against what the record says the CPU ran last")
    ap.add_argument("--self-test", action="store_true",
                    help="also require the judge to fail the first CPU's decode mutated by one event")
    a = ap.parse_args()
    global UNTRACED
    if a.untraced_el0:
        UNTRACED = lambda x: x < KERNEL_VA  # noqa: E731
    if a.traced_range:
        lo, hi = a.traced_range
        UNTRACED = lambda x: not lo <= x <= hi  # noqa: E731
    if a.untraced_range:
        xlo, xhi = a.untraced_range
        UNTRACED = lambda x: xlo <= x <= xhi  # noqa: E731
    try:
        rec = Record(os.path.join(a.dir, "exec.rec"))
        if rec.table_full:
            raise Bad("the execution record's table filled up: raise exec-record's table=")
        text = ["--text-from", a.text_from] if a.text_from else []
        r = subprocess.run([a.csdump, "report", a.vmcore, "--vmlinux", a.vmlinux, "--json",
                            "--last", "100000000"] + text, capture_output=True, text=True)
        if r.returncode not in (0, 3):
            raise Bad(f"csdump report failed ({r.returncode}): {r.stderr[-1000:]}")
        report = json.loads(r.stdout)
        check_whole(a, r.returncode, report)
        dis = Disassembler()
        # Every block's last instruction, disassembled once, in one llvm-mc run.
        dis.classify(rec.last_words())
        want = {int(c) for c in a.cpus.split(",")} if a.cpus else None
        judged = 0
        print(f"execution record: {rec.vcpus} vCPUs, blocks run {list(rec.counts)}, ring {rec.entries} "
              f"entries each, table {len(rec.table)} bytes, "
              + (f"frozen by vCPU {rec.frozen} at {rec.frozen_at:#x}" if rec.frozen is not None else "not frozen"))
        for c in report["cpus"]:
            cpu = c["cpu"]
            if want is not None and cpu not in want:
                continue
            events = events_of(c)
            if not events:
                continue
            if cpu >= rec.vcpus:
                raise Bad(f"CPU{cpu}: the record has {rec.vcpus} vCPUs")
            ring, wrapped = rec.ring(cpu)
            skipped, total, m_user = check_cpu(rec, dis, cpu, events, ring, wrapped)
            gaps = sum(1 for e in events if e[0] == "G")
            print(f"CPU{cpu}: all {len(events)} decoded events ({gaps} where the flow was lost) are what the "
                  f"record says the CPU did; the trace ends {skipped} block boundaries before the "
                  f"record's end; {m_user} user-space boundaries csdump could not decode")
            judged += 1
            if a.self_test and judged > 1:
                self_test_trail(rec, dis, cpu, events, ring, wrapped)
            if a.self_test and judged == 1:
                self_test(rec, dis, cpu, events, ring, wrapped)
                try:
                    check_whole(a, 0, dict(report, decoder_error_count=1, decoder_errors=["planted"]))
                except Bad as e:
                    print(f"self-test: a decoder error fails the judge: {e}")
                else:
                    raise Bad("the judge passed a decode with a decoder error")
        if a.capture_samples:
            check_capture_samples(a, rec, report)
        if a.expect_no_decode:
            if judged:
                raise Bad(f"csdump decoded trace for {judged} CPUs where the scenario expects none "
                          f"({a.expect_no_decode})")
            print(f"check_exec: ok: csdump decodes no trace, as expected ({a.expect_no_decode})")
            return 0
        if not judged:
            raise Bad("no CPU's decode to judge")
    except Bad as e:
        print(f"check_exec: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_exec: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

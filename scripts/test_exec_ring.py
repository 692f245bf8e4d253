#!/usr/bin/env python3
"""check_exec.py's walks of an execution record's ring (boundaries, forward, hits, walked_to,
blocks_back) against the plain list of blocks the ring stands for, on rings encoded as
tools/exec-record encodes them (block entries with repeats, cycle entries for loops of 2 to 8
blocks; its own tests check its encoder against the same format). Exits 1 on the first
difference."""

import array
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_exec as ce  # noqa: E402

MAX_REPEATS = (1 << (64 - ce.INDEX_BITS)) - 1


def encode(blocks, size):
    """The ring (oldest first) and the entries written, for table indices `blocks`."""
    ring, n = [0] * size, 0
    for b in blocks:
        at = lambda back: ring[(n - back) % size]
        kept = min(n, size)
        new = b
        if kept:
            e = at(1)
            reps, p = e >> ce.INDEX_BITS, ce.period(e)
            if not p and e & ce.INDEX_MASK == b and reps < MAX_REPEATS:
                ring[(n - 1) % size] = e + (1 << ce.INDEX_BITS)
                continue
            if p and kept > p and reps < MAX_REPEATS and at(1 + p - (reps + 1) % p) == b:
                ring[(n - 1) % size] = e + (1 << ce.INDEX_BITS)
                continue
            if not p:
                for q in range(2, min(ce.MAX_PERIOD, kept) + 1):
                    once = all(at(k) >> ce.INDEX_BITS == 0 and not ce.period(at(k)) for k in range(1, q))
                    if at(q) == b and once:
                        new = ce.INDEX_MASK - (q - 2)
                        break
        ring[n % size] = new
        n += 1
    kept = min(n, size)
    return [ring[i % size] for i in range(n - kept, n)], n


class FakeRecord:
    """A record whose table index i is the block at 0x1000 * (i + 1), i + 1 instructions long
    (a branch last, so every boundary counts)."""

    def __init__(self, ring, n, size):
        self.entries, self.counts = size, (n,)
        self._ring = ring

    def block(self, index):
        return (0x1000 * (index + 1), tuple([0xD503201F] * index + [0x14000000]))

    def block_starts(self):
        return {i: (0x1000 * (i + 1), i + 1) for i in range(16)}

    def ring(self, _vcpu):
        # As Record.ring() does after reading the file: drop orphaned cycle entries.
        order = array.array("Q", self._ring)
        drop = 0
        for j in range(min(len(order), 2 * ce.MAX_PERIOD)):
            p = ce.period(order[j])
            if p and j - p < drop:
                drop = j + 1
        return order[drop:], self.counts[0] > self.entries


def check(case, blocks, size):
    ring_list, n = encode(blocks, size)
    rec = FakeRecord(ring_list, n, size)
    ring, wrapped = rec.ring(0)
    back = [b[0] // 0x1000 - 1 for b in ce.blocks_back(rec, ring)]
    if not blocks[::-1][:len(back)] == back or (not wrapped and len(back) != len(blocks)):
        raise SystemExit(f"case {case}: blocks_back gives {back[:20]}..., the blocks were {blocks[::-1][:20]}...")
    pos = [p for _, p in ce.boundaries(rec, ring)]
    if len(pos) != len(back) - 1:
        raise SystemExit(f"case {case}: {len(pos)} boundaries for {len(back)} blocks")
    for k, p in enumerate(pos):
        # walked_to counts up to and including the boundary; forward runs the blocks after it.
        if ce.walked_to(ring, p) != k + 1:
            raise SystemExit(f"case {case}: walked_to{p} is {ce.walked_to(ring, p)}, boundary {k + 1}")
        if k % 7 == 0:
            fw = [b[0] // 0x1000 - 1 for b in ce.forward(rec, ring, p)]
            if fw != back[:k + 1][::-1]:
                raise SystemExit(f"case {case}: forward from {p} gives {fw}, want {back[:k + 1][::-1]}")
    # hits() finds, newest first, every boundary where a taken branch from X's end to Y was.
    pairs = {(back[k + 1], back[k]) for k in range(len(back) - 1)}
    for x, y in sorted(pairs)[:6]:
        a, b = rec.block(x), rec.block(y)
        e = ("T", a[0] + 4 * len(a[1]) - 4, b[0])
        want = [p for (aa, bb), p in ce.boundaries(rec, ring) if aa == a and bb == b]
        got = [p for _, p in ce.hits(rec, ring, e, lambda e, aa, bb: aa == a and bb == b)]
        if got != want:
            raise SystemExit(f"case {case}: hits of {x}->{y} gives {got[:12]}, walking gives {want[:12]}")


def main():
    rnd = random.Random(1)
    cases = [[3, 5] * 500 + [3], [7, 8, 9] * 10 + [4], [1, 1, 2] * 6, list(range(9)) * 5]
    for k in range(300):
        alphabet = 2 + k % 6
        blocks = []
        while len(blocks) < rnd.randrange(1, 200):
            blocks += [rnd.randrange(alphabet)] * (1 + rnd.randrange(5) if rnd.random() < 0.25 else 1)
        cases.append(blocks)
    for k, blocks in enumerate(cases):
        check(k, blocks, 1 << 12)
        check(f"{k} wrapped", blocks * 3, 24)
    spin, _ = encode([3, 5] * 500 + [3], 64)
    if len(spin) != 3:
        raise SystemExit(f"a two-block loop of 1001 blocks takes {len(spin)} entries, not 3")
    print(f"test_exec_ring: {2 * len(cases)} rings walked as their blocks, every way check_exec.py walks them")


if __name__ == "__main__":
    main()

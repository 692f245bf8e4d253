#!/usr/bin/env python3
"""Replays a trace scenario's dump in GDB: Debian's gdb-multiarch, in batch mode, with the
kernel's vmlinux, connected to `csdump gdb` (`target remote | csdump gdb vmcore --vmlinux
vmlinux`), and checks what GDB prints against the QEMU plugin's ground truth (truth.json: each
vCPU's last branches, waypoints and exceptions, written when its ETM stopped).

The truth gives each CPU's last instructions: between one event's destination and the next
event's source, execution is sequential (an exception's source is its preferred return address,
not executed). GDB speaks in vmlinux's link-time addresses: a truth address inside the kernel
image is moved down by the dump's KASLR offset (VMCOREINFO KERNELOFFSET), module addresses are
not moved. Checked, on GDB's own output:

- `info threads`: one thread per CPU with trace, `Thread <cpu+1> (CPU <cpu>...)`, the panicking
  CPU's selected and marked `panicked`, its frame in the function of its current instruction;
- `info record`: branch trace store, the instruction count;
- `record instruction-history`: the panicking CPU's last instructions are the truth's last
  ones, address by address, each named with the function System.map gives it;
- the current instruction is where the truth says the CPU went after its last branch or exception
  (the trace names it: a direct branch's target by its encoding, an indirect branch's and an
  exception's by the address packet after it);
- `reverse-stepi`, three times: the PC steps back through the truth's last instructions, and
  `x/i $pc` disassembles each from the dump's memory;
- `record function-call-history` on the whole trace (`--last 0`): the panicking CPU's calls run
  through the given functions in order (sysrq_handle_crash, then panic), and end in the function
  of its last executed instruction;
- the other CPU's history is its truth's last instructions;
- with --snapshot: the same dump written as an OpenCSD snapshot (`csdump snapshot`) replays to
  the same history and PC, its memory served from the snapshot's images (no vmcore).

gdb-multiarch missing is a failure (scripts/setup.sh installs it).
"""

import argparse
import bisect
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_trace  # noqa: E402  (the vmcore reader, ground truth, symbols of the trace check)

Bad = check_trace.Bad
HISTORY = 32


def kernel_image(system_map):
    """Link-time [_text, _end) from System.map."""
    want = {"_text": None, "_end": None}
    for line in open(system_map):
        p = line.split()
        if len(p) >= 3 and p[2] in want:
            want[p[2]] = int(p[0], 16)
    if None in want.values():
        raise Bad(f"{system_map} lacks _text or _end")
    return want["_text"], want["_end"]


class Funcs:
    """The names System.map gives the function holding a link-time address: every symbol at that
    function's start (aliases), without suffixes such as `.constprop.0`."""

    def __init__(self, path):
        starts = {}
        for line in open(path):
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                starts.setdefault(int(p[0], 16), set()).add(check_trace.func(p[2]))
        self.addrs = sorted(starts)
        self.starts = starts

    def __call__(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.starts[self.addrs[i]] if i >= 0 else set()


class Reloc:
    """Runtime to link-time addresses: the kernel image moves by the KASLR offset."""

    def __init__(self, offset, image):
        self.offset, self.lo, self.hi = offset, image[0], image[1]

    def __call__(self, rt):
        link = rt - self.offset
        return link if self.lo <= link < self.hi else rt


def truth_stream(tc, need):
    """The CPU's last executed instructions (runtime addresses, oldest first, at least `need`
    when the truth holds them) and its current instruction as the trace can show it."""
    ev = tc["events"]
    if tc.get("reason") != "stopped" or not ev:
        raise Bad(f"CPU{tc['cpu']}: the truth was not written when its ETM stopped")
    h = lambda x: int(x, 16)
    out = []
    last = ev[-1]
    for i in range(len(ev) - 1, 0, -1):
        e, prev = ev[i], ev[i - 1]
        if e["kind"] == "gap" or prev["kind"] == "gap":
            break
        end = h(e["from"]) - (4 if e["kind"] == "exception" else 0)
        start = h(prev["to"])
        if end < start - 4 or end - start > 1 << 20:
            raise Bad(f"CPU{tc['cpu']}: truth events {i - 1}..{i} are not a sequential run")
        out[:0] = range(start, end + 1, 4)
        if len(out) > need + 2:
            break
    # The trace names where the last event went (a direct branch's target in its encoding, an
    # indirect branch's or an exception's in the address packet after it): that is current.
    return out, h(last["to"])


def run_gdb(a, target, cmds, timeout=600):
    """Runs gdb-multiarch on vmlinux with `target` (a `target remote` argument) and `cmds`;
    returns {section: text} split at the `echo ==NAME==` markers put in."""
    args = ["gdb-multiarch", "-batch", "-nx", "-ex", "set pagination off", "-ex", "set width 0",
            "-ex", "set confirm off", "-ex", f"file {a.vmlinux}", "-ex", f"target remote {target}"]
    for c in cmds:
        args += ["-ex", c]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if "Remote connection closed" in r.stderr or "internal-error" in r.stderr or "panicked" in r.stderr:
        raise Bad(f"GDB lost the stub: {r.stderr[-2000:]}")
    sections, cur = {}, "start"
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"==(\w+)==", line)
        if m:
            cur = m.group(1)
            continue
        sections.setdefault(cur, []).append(line)
    return {k: "\n".join(v) for k, v in sections.items()}, r.stderr


def mark(name):
    return f"echo =={name}==\\n"


HIST_RE = re.compile(r"^(\d+)\t\s+(?:=> )?0x([0-9a-f]+)(?: <([^>]+)>)?:\t(.*)$")


def history(text):
    """(address, symbol, instruction) of each `record instruction-history` line."""
    out = []
    for line in text.splitlines():
        m = HIST_RE.match(line)
        if m:
            out.append((int(m.group(2), 16), m.group(3), m.group(4)))
    return out


def printed(text):
    return [int(m.group(1), 16) for m in re.finditer(r"^\$\d+ = 0x([0-9a-f]+)$", text, re.M)]


def func_of(sym):
    return check_trace.func(sym) if sym else None


def check_history(cpu, hist, stream, current, reloc, funcs, what):
    """The history lines against the truth's last instructions; returns how many it checked."""
    want = [reloc(x) for x in stream[-len(hist):]]
    got = [x[0] for x in hist]
    if len(hist) < HISTORY or got != want:
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                break
        else:
            i = min(len(got), len(want))
        hx = lambda v, j: hex(v[j]) if j < len(v) else None
        raise Bad(f"{what}: CPU{cpu}'s history differs from the ground truth at line {i} of {len(got)} "
                  f"(want {HISTORY}): GDB {hx(got, i)}, truth {hx(want, i)}\n"
                  + "\n".join(f"  {g:#x} {w:#x}" for g, w in zip(got, want)))
    named = 0
    for addr, s, insn in hist:
        if reloc.lo <= addr < reloc.hi:
            want_fn = funcs(addr)
            if func_of(s) not in want_fn:
                raise Bad(f"{what}: GDB names {addr:#x} <{s}>, System.map says {sorted(want_fn)}")
            named += 1
        if not insn.strip() or "Cannot access memory" in insn:
            raise Bad(f"{what}: GDB could not disassemble {addr:#x}: {insn!r}")
    return named


def inlined(vmlinux, addr):
    """The functions llvm-addr2line names at addr, the inlined ones included."""
    r = subprocess.run(["llvm-addr2line-19", "-f", "-i", "-e", vmlinux, f"{addr:#x}"],
                       capture_output=True, text=True)
    return set(r.stdout.splitlines()[0::2])


def check(a):
    if shutil.which("gdb-multiarch") is None:
        raise Bad("gdb-multiarch is missing: run scripts/setup.sh (Debian package gdb-multiarch)")
    vmcore = os.path.join(a.dir, "vmcore.elf")
    v = check_trace.Vmcore(vmcore)
    offset = int(v.info.get("KERNELOFFSET", "0"), 16)
    reloc = Reloc(offset, kernel_image(a.system_map))
    sym = check_trace.Symbols(a.system_map, 0)
    funcs = Funcs(a.system_map)
    truth = check_trace.truth_of(a.dir, at_exit=a.panic_cpu is not None)
    if a.panic_cpu is not None:
        # Plain kdump: no session was stopped by software; each ends where its trace into the
        # sink ended, as check_trace.py --plain-kdump checks (nothing after the sink stopped).
        for c in truth.values():
            c["reason"] = "stopped"
    cpus = sorted(truth)
    # The panicking CPU, from the dump's panic record; with --panic-cpu (plain kdump, no record
    # names it) the CPU the trigger ran on, which csdump gdb must infer and select.
    r = subprocess.run([a.csdump, "info", vmcore, "--json"], capture_output=True, text=True)
    try:
        panic_cpu = json.loads(r.stdout)["panic"]["cpu"]
    except (ValueError, KeyError, TypeError):
        panic_cpu = None
    if a.panic_cpu is not None:
        if panic_cpu is not None:
            raise Bad(f"--panic-cpu is for a dump that names no panicking CPU; this one names CPU{panic_cpu}")
        panic_cpu = a.panic_cpu
    elif panic_cpu is None:
        raise Bad(f"csdump info names no panicking CPU ({r.returncode}): {r.stderr[-500:]}")
    if panic_cpu not in truth:
        raise Bad(f"the panicking CPU{panic_cpu} has no ground truth")
    other = next(c for c in cpus if c != panic_cpu)
    streams = {c: truth_stream(truth[c], HISTORY + 4) for c in cpus}

    # With --modules the stub serves the modules' .ko files as libraries (qXfer:libraries:read):
    # GDB loads their symbols at the addresses the dump's module list gives.
    mods = f" --modules {a.modules}" if a.modules else ""
    target = f"| {a.csdump} gdb {vmcore} --vmlinux {a.vmlinux}{mods}"
    cmds = [
        mark("threads"), "info threads",
        "record btrace bts",
        # In replay GDB reads only vmlinux's read-only sections by default; module code (and any
        # memory, as it was at the panic) comes from the stub with this.
        "set record btrace replay-memory-access read-write",
        mark("record"), "info record",
        f"set record instruction-history-size {HISTORY}",
        mark("history"), "record instruction-history",
        mark("pc"), "p/x $pc",
    ]
    if a.source:
        # The source line of the current instruction (vmlinux's line table).
        cmds += [mark("line"), "info line *$pc"]
    for i in range(3):
        cmds += ["reverse-stepi", mark(f"step{i}"), "p/x $pc", "x/i $pc"]
    cmds += [
        mark("other"), f"thread {cpus.index(other) + 1}", "record instruction-history",
        mark("end"),
    ]
    out, err = run_gdb(a, target, cmds)
    # The calls, on the whole trace (--last 0): the window served by default may not reach back
    # to the trigger.
    calls_out, calls_err = run_gdb(a, f"| {a.csdump} gdb --last 0 {vmcore} --vmlinux {a.vmlinux}{mods}", [
        # Names as System.map has them (Rust's too).
        "set print demangle off",
        "record btrace bts",
        mark("record"), "info record",
        "set record function-call-history-size unlimited",
        mark("calls"), "record function-call-history",
        mark("end"),
    ])
    lines = 0

    # info threads
    threads = out.get("threads", "")
    rows = [l for l in threads.splitlines() if "(CPU " in l]
    if len(rows) != len(cpus):
        raise Bad(f"info threads lists {len(rows)} CPUs, the truth has {len(cpus)}:\n{threads}\n{err[-1500:]}")
    stream, current = streams[panic_cpu]
    for c in cpus:
        row = next((l for l in rows if f"Thread {c + 1} (CPU {c}," in l), None)
        if row is None:
            raise Bad(f"info threads has no Thread {c + 1} (CPU {c}):\n{threads}")
        if c == panic_cpu:
            if not row.startswith("*") or "panicked" not in row:
                raise Bad(f"the panicking CPU{c} is not the selected, panicked thread: {row}")
            fns = set(funcs(reloc(current)))
            if a.source:
                # With a line table GDB names the innermost function inlined there.
                fns |= inlined(a.vmlinux, reloc(current))
            if reloc.lo <= reloc(current) < reloc.hi and \
                    not any(f" in {f} " in row or f") {f} (" in row for f in fns):
                raise Bad(f"CPU{c}'s frame is not in {sorted(fns)}: {row}")
        lines += 1
    print(f"info threads: {len(rows)} threads, one per CPU, the panicking CPU{panic_cpu} selected")

    rec = out.get("record", "")
    m = re.search(r"Recorded (\d+) instructions in (\d+) functions \((\d+) gaps\) for thread", rec)
    if "Recording format: Branch Trace Store." not in rec or not m:
        raise Bad(f"info record: {rec}")
    lines += 2
    print(f"info record: branch trace store, {m.group(1)} instructions in {m.group(2)} functions, "
          f"{m.group(3)} gaps")

    # The panicking CPU's last instructions.
    hist = history(out.get("history", ""))
    named = check_history(panic_cpu, hist, stream, current, reloc, funcs, "record instruction-history")
    lines += len(hist)
    print(f"record instruction-history: CPU{panic_cpu}'s last {len(hist)} instructions are the ground truth's "
          f"({named} named as System.map names them; last {hist[-1][0]:#x} <{hist[-1][1]}>: {hist[-1][2]})")

    pcs = printed(out.get("pc", ""))
    if pcs != [reloc(current)]:
        raise Bad(f"the current instruction is {pcs}, the truth says {reloc(current):#x}")
    lines += 1
    print(f"current instruction: {reloc(current):#x} <{sym(reloc(current))}>, where the truth says CPU{panic_cpu} went")
    if a.source:
        # GDB's line for the current instruction against llvm-addr2line's for the truth's address,
        # both read from vmlinux's DWARF line table.
        sec = out.get("line", "")
        m = re.search(r'Line (\d+) of "([^"]+)"', sec)
        want = reloc(current)
        r = subprocess.run(["llvm-addr2line-19", "-e", a.vmlinux, f"{want:#x}"],
                           capture_output=True, text=True)
        ref = r.stdout.strip().rsplit(":", 1)
        if not m or len(ref) != 2 or not ref[0].endswith(m.group(2)) or ref[1].split()[0] != m.group(1):
            raise Bad(f"info line *$pc: {sec.strip()!r}; llvm-addr2line says {r.stdout.strip()!r} for {want:#x}")
        lines += 1
        print(f"source: the current instruction is line {m.group(1)} of {m.group(2)}, as llvm-addr2line "
              f"reads the line table")
    for i in range(3):
        sec = out.get(f"step{i}", "")
        got = printed(sec)
        want = reloc(stream[-1 - i])
        if got != [want]:
            raise Bad(f"reverse-stepi {i + 1}: PC {got}, the truth's previous instruction is {want:#x}\n{sec}")
        dis = [l for l in sec.splitlines() if l.startswith("=> 0x")]
        if len(dis) != 1 or f"0x{want:x}" not in dis[0] or "Cannot access" in dis[0]:
            raise Bad(f"x/i $pc after reverse-stepi {i + 1}: {sec}")
        lines += 2
    print(f"reverse-stepi x3: the PC steps back through {', '.join(hex(reloc(x)) for x in stream[-1:-4:-1])}, "
          "each disassembled from the dump")

    calls = [l.split("\t", 1)[1].strip() for l in calls_out.get("calls", "").splitlines()
             if re.match(r"^\d+\t", l)]
    if not calls:
        raise Bad(f"record function-call-history printed nothing: {calls_out.get('calls')}\n{calls_err[-1500:]}")
    full = re.search(r"Recorded (\d+) instructions in (\d+) functions", calls_out.get("record", ""))
    names = [func_of(c) for c in calls]
    through = a.through.split(",")
    moved = moved_path(a.dir)
    if moved and not all(w in names for w in moved[0]):
        # check_trace.py found the crash path begun on another CPU (the task preempted at the
        # crash entry and resumed here): this CPU's history holds the rest of it.
        print(f"the run's check.txt: the crashing task ran {' -> '.join(moved[0])} on CPU{moved[1]} and "
              f"resumed at {moved[2]} on this CPU; the history must run through the rest of {through}")
        through = [w for w in through if w not in moved[0]]
    i, seen = 0, []
    for w in through:
        try:
            i = names.index(w, i) + 1
        except ValueError:
            raise Bad(f"record function-call-history does not run through {through} (found {seen}; "
                      f"{len(names)} calls, last: {names[-12:]})")
        seen.append(w)
        lines += 1
    # The history ends with the last executed instruction (GDB leaves out a segment that holds
    # only the current one).
    last = reloc(stream[-1])
    last_fn = funcs(last) if reloc.lo <= last < reloc.hi else None
    if last_fn and names[-1] not in last_fn:
        raise Bad(f"record function-call-history ends in {names[-1]}, the last executed instruction "
                  f"({last:#x}) is in {sorted(last_fn)}")
    lines += 1
    print(f"record function-call-history (the whole trace, {full.group(1) if full else '?'} instructions): "
          f"{len(calls)} calls, through {' -> '.join(seen)}, ending in {names[-1]}")

    ostream, ocurrent = streams[other]
    ohist = history(out.get("other", ""))
    check_history(other, ohist, ostream, ocurrent, reloc, funcs, f"thread of CPU{other}")
    lines += len(ohist)
    print(f"CPU{other}: its last {len(ohist)} instructions are the ground truth's")

    if a.snapshot:
        snap = os.path.join(a.dir, "gdb-snapshot")
        shutil.rmtree(snap, ignore_errors=True)
        r = subprocess.run([a.csdump, "snapshot", vmcore, "-o", snap, "--vmlinux", a.vmlinux],
                           capture_output=True, text=True)
        if r.returncode not in (0, 3):
            raise Bad(f"csdump snapshot failed ({r.returncode}): {r.stderr}")
        sout, serr = run_gdb(a, f"| {a.csdump} gdb {snap} --vmlinux {a.vmlinux}", [
            f"thread {cpus.index(panic_cpu) + 1}",
            "record btrace bts",
            f"set record instruction-history-size {HISTORY}",
            mark("history"), "record instruction-history",
            mark("pc"), "p/x $pc",
        ])
        shist = history(sout.get("history", ""))
        if [x[0] for x in shist] != [x[0] for x in hist] or printed(sout.get("pc", "")) != pcs:
            raise Bad(f"the snapshot replays otherwise than the vmcore:\n{sout.get('history')}\n{serr[-1500:]}")
        check_history(panic_cpu, shist, stream, current, reloc, funcs, "snapshot")
        lines += len(shist) + 1
        print(f"OpenCSD snapshot of the dump (no vmcore, memory from its images): the same {len(shist)} "
              f"instructions and current instruction")
    if lines < 10:
        raise Bad(f"only {lines} lines of GDB output checked")
    print(f"check_gdb: {lines} lines of gdb-multiarch output checked against the ground truth")


def moved_path(d):
    """What check_trace.py said of a crash path that moved to the panicking CPU at the crash entry
    (its resumed_elsewhere), from the run's check.txt: (the functions run elsewhere, that CPU,
    the entry), or None."""
    try:
        text = open(os.path.join(d, "check.txt"), errors="replace").read()
    except OSError:
        return None
    m = re.search(r"the crashing task ran (.+?) on CPU(\d+), took an interrupt at the first instruction of "
                  r"(\S+) there", text)
    return (m.group(1).split(" -> "), int(m.group(2)), m.group(3)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the trace scenario's run directory")
    ap.add_argument("--csdump", required=True)
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--system-map", help="default: System.map next to vmlinux")
    ap.add_argument("--through", default="sysrq_handle_crash,panic",
                    help="functions the panicking CPU's calls run through, in order")
    ap.add_argument("--panic-cpu", type=int, help="plain kdump: the dump names no panicking CPU; it is this one "
                    "(csdump gdb must infer it and select its thread; the truth is the plugin's at exit)")
    ap.add_argument("--modules", help="the .ko files (csdump gdb --modules): module functions named in "
                    "the call history (--through may name them)")
    ap.add_argument("--source", action="store_true",
                    help="vmlinux has a line table: check the source line GDB shows")
    ap.add_argument("--snapshot", action="store_true",
                    help="also replay the dump written as an OpenCSD snapshot")
    a = ap.parse_args()
    a.system_map = a.system_map or os.path.join(os.path.dirname(os.path.abspath(a.vmlinux)), "System.map")
    try:
        check(a)
    except (Bad, subprocess.TimeoutExpired) as e:
        print(f"check_gdb: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_gdb: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Alters one event of a plugin truth.json for the judges' negative tests, without parsing it.

The plugin writes truth.json with one event per line ("  {"kind": ..., "from": ..., "to": ...}").
A device-file run's holds 6 M events per CPU (750 MB); json.load and json.dump of it took 47 s of
one negative. The negatives pick their event counting from a CPU's newest, so this walks that
CPU's event lines backwards in a mapping of the file and copies it with the one line changed.
"""
import mmap
import re

LINE = re.compile(rb'^  \{"kind": "([a-z-]+)", "from": "0x([0-9a-f]+)", "to": "0x([0-9a-f]+)"(.*)$')


class Event:
    """One event line: its byte range in the file and its fields."""

    def __init__(self, start, end, line):
        m = LINE.match(line)
        if not m:
            raise ValueError(f"truth.json: not an event line at byte {start}: {line[:120]!r}")
        self.start, self.end = start, end
        self.kind = m.group(1).decode()
        self.frm, self.to = int(m.group(2), 16), int(m.group(3), 16)
        self.rest = m.group(4)

    def kernel_from(self):
        return self.frm >> 48 == 0xFFFF

    def kernel_to(self):
        return self.to >> 48 == 0xFFFF

    def line(self):
        return (b'  {"kind": "%s", "from": "%s", "to": "%s"' % (
            self.kind.encode(), hex(self.frm).encode(), hex(self.to).encode())) + self.rest


class Truth:
    """A truth.json mapped read-only."""

    def __init__(self, path):
        self.f = open(path, "rb")
        self.mm = mmap.mmap(self.f.fileno(), 0, access=mmap.ACCESS_READ)

    def section(self, cpu):
        """The byte range of `cpu`'s event lines."""
        head = self.mm.find(b'\n{"cpu": %d,' % cpu)
        if head < 0:
            raise ValueError(f"truth.json has no CPU {cpu}")
        first = self.mm.find(b"\n", head + 1) + 1
        end = self.mm.find(b"\n]}", first - 1)
        if first <= 0 or end < 0:
            raise ValueError(f"truth.json: CPU {cpu}'s event list is not closed")
        return first, end

    def newest_first(self, cpu):
        """`cpu`'s events from its newest to its oldest."""
        first, end = self.section(cpu)
        while end > first:
            start = self.mm.rfind(b"\n", first - 1, end) + 1
            line = self.mm[start:end].rstrip(b",")
            yield Event(start, start + len(line), line)
            end = start - 1

    def write_with(self, dst, event):
        """Copies the file to `dst` with `event`'s line as it now reads."""
        with open(dst, "wb") as out:
            out.write(self.mm[:event.start])
            out.write(event.line())
            out.write(self.mm[event.end:])


def nth_newest(truth, cpu, n, pick):
    """The `n`th newest (0: the newest) of `cpu`'s events that `pick` accepts."""
    for e in truth.newest_first(cpu):
        if pick(e):
            if n == 0:
                return e
            n -= 1
    raise ValueError(f"truth.json: CPU {cpu} has too few events for the alteration")

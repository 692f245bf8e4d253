"""Watches, through QEMU's gdbstub, what the panic path cleans to the point of coherency.

Under TCG a `DC CVAC` makes no memory access and the plugin API cannot read its operand, so
cleaning is observed from outside the guest: QEMU runs with `-gdb tcp:127.0.0.1:PORT`, and this
client of GDB's remote serial protocol (written here, without GDB, so that it controls its own
timeouts) puts a breakpoint on `panic`, then on `dcache_clean_poc` (arch/arm64/mm/cache.S: x0 is
the start address, x1 the end), and at each hit writes down the cleaned range and which 64-byte
lines of the dump region changed since the previous hit (the region is read in QEMU's physical
memory mode). When no clean comes for QUIET_S seconds after the last one (the panic path is
done, or a callback hangs), it stops the guest once more, notes the lines changed since, writes
the region as it is then, removes its breakpoints and detaches.

The kernel must run with `nokaslr`: the breakpoints are the addresses in System.map.
scripts/check_clean.py judges the observation.
"""

import json
import os
import re
import socket
import threading
import time

LINE = 64
QUIET_S = 2.0
# Bytes per `m` packet: QEMU's packet buffer is 4096 bytes, a reply two hex digits per byte.
CHUNK = 1024
REGION_RE = re.compile(r"coresight_panic_dump: dump region at (0x[0-9a-f]+), (\d+) KiB")


class GdbError(Exception):
    pass


def symbols(system_map, names):
    found = {}
    with open(system_map) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] in names and parts[2] not in found:
                found[parts[2]] = int(parts[0], 16)
    missing = [n for n in names if n not in found]
    if missing:
        raise GdbError(f"{system_map} has no symbol {', '.join(missing)}")
    return found


class Remote:
    """GDB's remote serial protocol over TCP, in no-ack mode."""

    def __init__(self, port, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                # Small packets both ways, one round trip each: no Nagle delay.
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise GdbError(f"cannot connect to QEMU's gdbstub on port {port}: {e}")
                time.sleep(0.1)
        self.buf = b""
        self.ack = True
        # QEMU stops the guest when a debugger connects and says so at once (a stop reply).
        self.read_packet(5)
        if self.command("QStartNoAckMode") == "OK":
            self.ack = False

    def send(self, payload):
        data = payload.encode()
        self.sock.sendall(b"$" + data + b"#%02x" % (sum(data) & 0xFF))

    def read_packet(self, timeout):
        """The next packet's payload, or None when nothing came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            start = self.buf.find(b"$")
            if start >= 0:
                end = self.buf.find(b"#", start)
                if end >= 0 and len(self.buf) >= end + 3:
                    payload = self.buf[start + 1:end]
                    self.buf = self.buf[end + 3:]
                    if self.ack:
                        self.sock.sendall(b"+")
                    return payload.decode(errors="replace")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                raise GdbError("QEMU closed the gdbstub connection")
            self.buf += chunk

    def command(self, payload, timeout=30):
        self.send(payload)
        while True:
            reply = self.read_packet(timeout)
            if reply is None:
                raise GdbError(f"no reply to {payload[:20]!r} within {timeout} s")
            # Console output of a monitor command comes first, as `O` packets.
            if reply.startswith("O") and reply != "OK" and payload.startswith("qRcmd"):
                self.output += bytes.fromhex(reply[1:]).decode(errors="replace")
                continue
            return reply

    def monitor(self, text):
        self.output = ""
        reply = self.command("qRcmd," + text.encode().hex())
        if reply != "OK":
            raise GdbError(f"monitor {text!r}: {reply}")
        return self.output

    def register(self, n):
        """Core register `n` of the CPU that stopped (x0-x30, then sp and pc), from a `g` packet:
        QEMU answers `p` only to a client that read its target description."""
        reply = self.command("g")
        if len(reply) < 16 * (n + 1):
            raise GdbError(f"register {n}: {reply[:40]!r}")
        return int.from_bytes(bytes.fromhex(reply[16 * n:16 * (n + 1)]), "little")

    def read_phys(self, addr, size):
        if self.command("Qqemu.PhyMemMode:1") != "OK":
            raise GdbError("QEMU's gdbstub has no physical memory mode")
        out = bytearray()
        try:
            while len(out) < size:
                n = min(CHUNK, size - len(out))
                reply = self.command(f"m{addr + len(out):x},{n:x}")
                if reply.startswith("E") or len(reply) != 2 * n:
                    raise GdbError(f"reading {n} bytes at physical {addr + len(out):#x}: {reply[:20]!r}")
                out += bytes.fromhex(reply)
        finally:
            self.command("Qqemu.PhyMemMode:0")
        return bytes(out)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def changed_lines(old, new):
    return [i for i in range(0, len(new), LINE) if old[i:i + LINE] != new[i:i + LINE]]


class Observer:
    """Runs the observation in a thread; `wait` blocks until it has detached (or failed)."""

    def __init__(self, port, system_map, console_path, outdir):
        self.port = port
        self.addrs = symbols(system_map, ["panic", "dcache_clean_poc"])
        self.console_path = console_path
        self.outdir = outdir
        self.error = None
        self.log = open(os.path.join(outdir, "clean-observer.log"), "w")
        self.t0 = time.monotonic()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def wait(self, timeout):
        if not self.done.wait(timeout):
            raise GdbError(f"the clean observer did not finish within {timeout} s")
        if self.error:
            raise GdbError(self.error)

    def note(self, text):
        print(f"{time.monotonic() - self.t0:8.3f} {text}", file=self.log, flush=True)

    def _region(self):
        with open(self.console_path, errors="replace") as f:
            m = REGION_RE.search(f.read())
        if not m:
            raise GdbError("the console does not say where the dump region is")
        return int(m.group(1), 16), int(m.group(2)) * 1024

    def _run(self):
        try:
            self._observe()
        except (GdbError, OSError, ValueError) as e:
            self.error = f"clean observer: {e}"
            self.note(self.error)
        finally:
            self.done.set()

    def _observe(self):
        r = Remote(self.port, 60)
        try:
            panic, clean = self.addrs["panic"], self.addrs["dcache_clean_poc"]
            if r.command(f"Z0,{panic:x},4") != "OK":
                raise GdbError("QEMU refused a breakpoint on panic")
            r.send("c")
            # Until the panic: the guest boots and runs its test, for minutes at most.
            while True:
                stop = r.read_packet(900)
                if stop is None:
                    raise GdbError("no panic within 900 s")
                self.note(f"stop {stop}")
                if stop.startswith("T05") and r.register(32) == panic:
                    break
            r.command(f"z0,{panic:x},4")
            base, size = self._region()
            self.note(f"panic; region {base:#x} {size:#x}")
            snap = r.read_phys(base, size)
            self.note("region read")
            steps = []
            if r.command(f"Z0,{clean:x},4") != "OK":
                raise GdbError("QEMU refused a breakpoint on dcache_clean_poc")
            r.send("c")
            while True:
                stop = r.read_packet(QUIET_S if steps else 600)
                self.note(f"stop {stop}")
                if stop is None:
                    break
                # Stops the harness makes through QMP (pvpanic's pause) are not ours to resume.
                if not stop.startswith("T05"):
                    continue
                pc = r.register(32)
                if pc != clean:
                    r.send("c")
                    continue
                start, end = r.register(0), r.register(1)
                self.note(f"clean {start:#x}-{end:#x}")
                m = re.search(r"gpa:\s*(0x[0-9a-f]+)", r.monitor(f"gva2gpa {start:#x}"))
                pa = int(m.group(1), 16) if m else None
                new = r.read_phys(base, size)
                # Past the breakpoint as GDB goes: removed, one instruction stepped, put back.
                r.command(f"z0,{clean:x},4")
                r.send("s")
                while True:
                    stepped = r.read_packet(30)
                    if stepped is None:
                        raise GdbError("no stop after stepping past dcache_clean_poc's breakpoint")
                    if stepped.startswith("T05"):
                        break
                if r.command(f"Z0,{clean:x},4") != "OK":
                    raise GdbError("QEMU refused the breakpoint on dcache_clean_poc again")
                steps.append({
                    "va": [start, end],
                    "pa": [pa, pa + (end - start)] if pa is not None else None,
                    "changed": changed_lines(snap, new),
                })
                snap = new
                r.send("c")
            if not steps:
                raise GdbError("the panic path cleaned nothing (no dcache_clean_poc after panic)")
            r.sock.sendall(b"\x03")
            while True:
                stop = r.read_packet(30)
                if stop is None:
                    raise GdbError("the guest did not stop for the final read")
                if stop.startswith("T") or stop.startswith("S"):
                    break
            final = r.read_phys(base, size)
            with open(os.path.join(self.outdir, "clean-final.bin"), "wb") as f:
                f.write(final)
            obs = {
                "region": {"paddr": base, "size": size},
                "line": LINE,
                "quiet_s": QUIET_S,
                "steps": steps,
                "final": {"changed": changed_lines(snap, final), "region": "clean-final.bin"},
            }
            with open(os.path.join(self.outdir, "clean.json"), "w") as f:
                f.write(json.dumps(obs))
            r.command(f"z0,{clean:x},4")
        finally:
            # Detached, QEMU removes every breakpoint and lets the guest run on, also when the
            # observation failed (a guest left stopped would only time out later).
            try:
                r.send("D")
                r.read_packet(5)
            except (GdbError, OSError):
                pass
            r.close()

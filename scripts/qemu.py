#!/usr/bin/env python3
"""Boot the test kernel in qemu-system-aarch64 (-M virt, TCG), let it panic, capture a vmcore.

Two capture methods:

  qemu-dump  pvpanic-pci with `-action panic=pause`: QEMU reports GUEST_PANICKED on QMP and holds
             the guest. pvpanic's notifier has the highest priority, so the other panic notifiers
             (ours among them) have not run yet: the harness resumes the guest, waits for panic() to
             print its closing line, stops the guest and writes an ELF vmcore with QMP
             `dump-guest-memory`.
  kdump      the guest loads a capture kernel with `kexec -s -p` (the command line given says
             whether crash_kexec_post_notifiers is on); after the panic the capture kernel copies /proc/vmcore to
             a raw virtio disk, which becomes the vmcore on the host; with --makedumpfile it also
             saves makedumpfile's files of the same /proc/vmcore, as distributions' kdump does.
  warm       panic=1 reboots the guest with its RAM; the second boot saves the previous boot's
             dump from debugfs to a virtio disk, which becomes the region file on the host.
  boot       no capture: boot, wait for a console line, stop (used to look at a live guest);
             prints how long that took and QEMU's peak RSS.

CoreSight components (--coresight): the guest's RAM comes from a file in /dev/shm that QEMU maps
shared (memory-backend-file, share=on), the TCG plugin tools/qemu-coresight
(target/release/libqemu_coresight.so, or --plugin / $CSPD_PLUGIN) maps the same file and serves
the components' registers in the top of it (0x7ff00000..0x7ff30000), and the guest kernel gets
`mem=1023M` so it never owns that window. The plugin writes truth.json and plugin.log to the
workdir; --cs-arg KEY=VALUE (repeatable) passes more options to it (tmc=etf, fault=NAME@CPU, ...).
The RAM file is removed after the run. --shared-ram alone gives the same RAM file without the
plugin (the baseline of the plugin benchmark).

Every QEMU command line gets the words of $CSPD_QEMU_EXTRA appended and is written, one line per
invocation, to WORKDIR/cmdline.txt.

Every wait has a timeout; on any failure the script says what it waited for and exits non-zero.
"""

import argparse
import gzip
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import gdb_observe

PANIC_LINE = "Kernel panic - not syncing"
PANIC_END = "---[ end Kernel panic"

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PLUGIN = os.path.join(REPO, "target", "release", "libqemu_coresight.so")
DEFAULT_EXEC_RECORD = os.path.join(REPO, "target", "release", "libexec_record.so")
# Where -M virt puts guest RAM.
RAM_BASE = 0x40000000
# The guest RAM files of --shared-ram / --coresight: /dev/shm/cspd-ram-<pid of qemu.py>-<n>.
SHM_DIR = "/dev/shm"
SHM_PREFIX = "cspd-ram-"
# -M virt puts RAM at 0x40000000; the plugin's register window is the top of 1 GiB of it, from
# 0x7ff00000: the guest kernel gets the RAM below (mem=1023M).
CS_RAM_SIZE = 1 << 30
CS_KERNEL_MEM = "mem=1023M"
# Plugin options the harness sets itself.
CS_OWN_KEYS = ("ram", "truth", "log")


class Failure(Exception):
    """A step of the run did not happen; the message says which."""


class Console:
    """Follows the serial console log file QEMU writes."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.text = ""

    def poll(self):
        try:
            with open(self.path, "r", errors="replace") as f:
                f.seek(self.pos)
                new = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            new = ""
        self.text += new
        return new

    def wait_for(self, needle, timeout, proc=None, what=None, poll=0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if needle in self.text:
                return
            if proc is not None and proc.poll() is not None:
                self.poll()
                if needle in self.text:
                    return
                raise Failure(f"QEMU exited (status {proc.returncode}) before the console showed "
                              f"{what or repr(needle)}")
            time.sleep(poll)
        raise Failure(f"timed out after {timeout} s waiting for {what or repr(needle)} on the console")


class Qmp:
    """A minimal QMP client over a UNIX socket."""

    def __init__(self, path, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise Failure(f"could not connect to QMP socket {path} within {timeout} s")
                time.sleep(0.1)
        self.buf = b""
        self.events = []
        self._read_message(timeout)  # greeting
        self.command("qmp_capabilities")

    def _read_message(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"QMP did not answer within {timeout} s")
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise Failure("QMP connection closed")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name, timeout=30, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read_message(timeout)
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise Failure(f"QMP {name} failed: {reply['error'].get('desc')}")
            return reply.get("return")

    def wait_event(self, name, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["event"] == name:
                    return e
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"timed out after {timeout} s waiting for QMP event {name}")
            try:
                msg = self._read_message(left)
            except Failure:
                continue
            if "event" in msg:
                self.events.append(msg)


def qemu_binary():
    q = shutil.which("qemu-system-aarch64")
    if q is None:
        raise Failure("qemu-system-aarch64 is missing: run scripts/setup.sh (package qemu-system-arm)")
    return q


def base_args(a, workdir):
    machine = ["-M", "virt"]
    if a.ram_file:
        machine = ["-M", "virt,memory-backend=mem", "-object",
                   f"memory-backend-file,id=mem,size={a.mem},mem-path={a.ram_file},share=on"]
    plugin = []
    if a.coresight:
        opts = [f"file={a.plugin}", f"ram={a.ram_file}",
                f"truth={os.path.join(workdir, 'truth.json')}",
                f"log={os.path.join(workdir, 'plugin.log')}"] + (a.cs_arg or [])
        # QEMU's option syntax: a comma inside a value is written twice.
        plugin = ["-plugin", ",".join(o.replace(",", ",,") for o in opts)]
    if a.coresight and a.exec_record:
        # The independent execution record (tools/exec-record), beside the CoreSight plugin.
        plugin += ["-plugin", ",".join([f"file={a.exec_record}",
                                        f"out={os.path.join(workdir, 'exec.rec')}",
                                        f"ram={RAM_BASE:#x}+{parse_size(a.mem):#x}"]
                                       + ([f"entries={a.exec_entries}"] if a.exec_entries else [])
                                       + ([f"freeze_at={a.exec_freeze_at}"] if a.exec_freeze_at else []))]
    return [qemu_binary()] + machine + [
        "-cpu", a.cpu, "-smp", str(a.smp), "-m", a.mem,
        "-display", "none", "-monitor", "none", "-nic", "none",
        "-serial", f"file:{os.path.join(workdir, 'console.log')}",
        "-kernel", a.kernel, "-initrd", a.initrd,
        "-device", "vmcoreinfo",
    ] + plugin + [x for extra in (a.qemu_arg or []) for x in extra.split()]


def start(args, workdir):
    args = args + shlex.split(os.environ.get("CSPD_QEMU_EXTRA", ""))
    with open(os.path.join(workdir, "cmdline.txt"), "a") as f:
        print(shlex.join(args), file=f)
    log = open(os.path.join(workdir, "qemu.log"), "w")
    print("+ " + " ".join(args), file=log, flush=True)
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def peak_rss_kib(proc):
    """QEMU's peak resident set (VmHWM) so far, in KiB; None once it has exited."""
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def stop(proc):
    # SIGTERM first: QEMU then exits through its normal path, which runs the plugins' atexit
    # callbacks (the CoreSight plugin writes its truth file and exit counts there).
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(timeout=30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def observer_for(a, workdir, args):
    """With --observe-cleans: QEMU's gdbstub on a free port, and the observer that will watch it
    (scripts/gdb_observe.py); else no observer."""
    if not a.observe_cleans:
        return None
    port = free_port()
    args += ["-gdb", f"tcp:127.0.0.1:{port}"]
    return gdb_observe.Observer(port, a.observe_cleans, os.path.join(workdir, "console.log"), workdir)


def observed(observer):
    """Waits until the observer has taken the dump region's final state and detached."""
    if observer is not None:
        try:
            observer.wait(180)
        except gdb_observe.GdbError as e:
            raise Failure(str(e))


def dig_holes(path):
    """Give back the disk blocks of a dump's zero pages (util-linux `fallocate --dig-holes`).

    A guest's memory dump is mostly zero pages: a 1 GiB vmcore holds about 50 MiB of data, and
    the scenarios keep dozens of them. The file's contents do not change; where the filesystem
    cannot punch holes the file stays as it is, with a warning.
    """
    r = subprocess.run(["fallocate", "--dig-holes", path], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"warning: {path} keeps its zero pages on disk: fallocate --dig-holes: "
              f"{r.stderr.strip()}", file=sys.stderr)


def run_qemu_dump(a, workdir):
    qmp_path = os.path.join(workdir, "qmp.sock")
    if os.path.exists(qmp_path):
        os.unlink(qmp_path)
    append = a.append
    args = base_args(a, workdir) + [
        "-append", append,
        "-device", "pvpanic-pci", "-action", "panic=pause",
        "-qmp", f"unix:{qmp_path},server=on,wait=off",
    ]
    observer = observer_for(a, workdir, args)
    proc = start(args, workdir)
    if observer:
        observer.start()
    console = Console(os.path.join(workdir, "console.log"))
    try:
        qmp = Qmp(qmp_path, 30)
        try:
            qmp.wait_event("GUEST_PANICKED", a.panic_timeout)
        except Failure:
            console.poll()
            raise Failure(f"the guest did not panic within {a.panic_timeout} s "
                          f"(last console line: {last_line(console.text)!r})")
        # pvpanic ran first and QEMU paused the guest: let the rest of panic() run. A nested
        # panic (one raised inside a panic notifier) pauses it again: resume it each time.
        qmp.events.clear()
        qmp.command("cont")
        deadline = time.monotonic() + 120
        while PANIC_END not in console.text:
            if time.monotonic() > deadline:
                raise Failure("timed out after 120 s waiting for the end of panic() after the "
                              f"notifiers (last console line: {last_line(console.text)!r})")
            try:
                # Briefly: the guest spins in panic()'s last loop meanwhile, and every block it
                # runs there is one more the execution record keeps (exec-record).
                qmp.wait_event("GUEST_PANICKED", 0.05)
                qmp.events.clear()
                qmp.command("cont")
            except Failure:
                pass
            console.poll()
        observed(observer)
        qmp.command("stop")
        out = os.path.abspath(a.vmcore)
        if os.path.exists(out):
            os.unlink(out)
        t = time.monotonic()
        qmp.command("dump-guest-memory", timeout=600, paging=False, protocol=f"file:{out}",
                    format="elf")
        dig_holes(out)
        print(f"qemu-dump: {os.path.getsize(out)} byte vmcore in {time.monotonic() - t:.1f} s: {out}")
        qmp.command("quit")
    finally:
        console.poll()
        stop(proc)


# makedumpfile's files the capture kernel writes with --makedumpfile, from the same /proc/vmcore:
# the disk serial its init looks for, and the file name in the workdir. vmcore.flat.gz, the
# flattened stream through gzip (kdump-tools' KDUMP_COMPRESSION=gzip), is gzipped here: the same
# bytes, without 7 s of gzip under TCG.
MAKEDUMPFILE_DISKS = [
    ("cspd-flat", "vmcore.flat"),       # -F -c -d 31, piped (Debian's kdump-tools)
    ("cspd-kdump", "vmcore.kdump"),     # -l -d 31 (Fedora's and RHEL's kdump)
]


def run_kdump(a, workdir):
    disk = os.path.abspath(a.vmcore)
    with open(disk, "wb") as f:
        f.truncate(int(a.disk_size))
    args = base_args(a, workdir) + [
        "-append", a.append,
        "-drive", f"file={disk},format=raw,if=none,id=vmcore",
        "-device", "virtio-blk-pci,drive=vmcore",
        "-no-reboot",
    ]
    extra = []
    if a.makedumpfile:
        for serial, name in MAKEDUMPFILE_DISKS:
            path = os.path.join(workdir, name)
            with open(path, "wb") as f:
                f.truncate(512 << 20)
            extra.append((serial, path))
            args += ["-drive", f"file={path},format=raw,if=none,id={serial}",
                     "-device", f"virtio-blk-pci,drive={serial},serial={serial}"]
    proc = start(args, workdir)
    console = Console(os.path.join(workdir, "console.log"))
    try:
        try:
            console.wait_for(PANIC_LINE, a.panic_timeout, proc, "the panic")
        except Failure as e:
            raise Failure(f"{e} (last console line: {last_line(console.text)!r})")
        try:
            proc.wait(timeout=a.capture_timeout)
        except subprocess.TimeoutExpired:
            raise Failure(f"the capture kernel did not finish within {a.capture_timeout} s "
                          f"(last console line: {last_line(console.poll() and console.text)!r})")
        console.poll()
        m = re.search(r"CSPD: vmcore saved: (\d+) bytes", console.text)
        if not m:
            why = re.search(r"CSPD: capture failed: (.*)", console.text)
            raise Failure("the capture kernel did not save the vmcore"
                          + (f": {why.group(1)}" if why else
                             f" (last console line: {last_line(console.text)!r})"))
        size = int(m.group(1))
        with open(disk, "r+b") as f:
            f.truncate(size)
        dig_holes(disk)
        print(f"kdump: {size} byte vmcore: {disk}")
        for serial, path in extra:
            m = re.search(rf"CSPD: makedumpfile {serial} saved: (\d+) bytes \((.*)\)", console.text)
            if not m:
                why = re.search(rf"CSPD: makedumpfile {serial} failed: (.*)", console.text)
                raise Failure(f"the capture kernel's makedumpfile did not write {os.path.basename(path)}"
                              + (f": {why.group(1)}" if why else " (no makedumpfile in the capture initramfs?)"))
            with open(path, "r+b") as f:
                f.truncate(int(m.group(1)))
            print(f"kdump: {m.group(1)} byte {os.path.basename(path)} ({m.group(2)}): {path}")
            if serial == "cspd-flat":
                with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as out:
                    shutil.copyfileobj(f, out)
                print(f"kdump: {os.path.getsize(path + '.gz')} byte {os.path.basename(path)}.gz "
                      f"(gzip of it): {path}.gz")
    finally:
        console.poll()
        stop(proc)


def run_warm(a, workdir):
    """Panic, let the guest reboot itself (panic=1, RAM kept), and take what the second boot saved.

    The second boot copies the previous boot's dump (debugfs last_dump) to the virtio disk and
    powers off; the disk, cut to the size it printed, becomes the region file. When the second
    boot finds no dump, the region file is not written and the run still succeeds: the caller
    judges the console.

    With --dump-at TEXT the second boot does not power off: when TEXT is on the console, QMP
    dump-guest-memory writes that boot's memory to --second-vmcore (the same kernel text as the
    first boot, for a decoder), and QEMU is told to quit.
    """
    disk = os.path.abspath(a.vmcore)
    with open(disk, "wb") as f:
        f.truncate(int(a.disk_size))
    args = base_args(a, workdir) + [
        "-append", a.append,
        "-drive", f"file={disk},format=raw,if=none,id=vmcore",
        "-device", "virtio-blk-pci,drive=vmcore",
    ]
    qmp_path = os.path.join(workdir, "qmp.sock")
    if a.reset_on or a.dump_at:
        if os.path.exists(qmp_path):
            os.unlink(qmp_path)
        args += ["-qmp", f"unix:{qmp_path},server=on,wait=off"]
    observer = observer_for(a, workdir, args)
    proc = start(args, workdir)
    if observer:
        observer.start()
    console = Console(os.path.join(workdir, "console.log"))
    try:
        qmp = Qmp(qmp_path, 30) if a.reset_on or a.dump_at else None
        try:
            console.wait_for(PANIC_LINE, a.panic_timeout, proc, "the panic")
        except Failure as e:
            raise Failure(f"{e} (last console line: {last_line(console.text)!r})")
        if a.reset_on:
            # The guest will not reboot by itself: reset it as a watchdog would.
            console.wait_for(a.reset_on, 60, proc, repr(a.reset_on))
            time.sleep(1)
            observed(observer)
            qmp.command("system_reset")
        if a.dump_at:
            console.wait_for(a.dump_at, a.capture_timeout, proc, repr(a.dump_at))
            out = os.path.abspath(a.second_vmcore)
            if os.path.exists(out):
                os.unlink(out)
            qmp.command("stop")
            t = time.monotonic()
            qmp.command("dump-guest-memory", timeout=600, paging=False, protocol=f"file:{out}",
                        format="elf")
            dig_holes(out)
            print(f"warm: {os.path.getsize(out)} byte vmcore of the second boot in "
                  f"{time.monotonic() - t:.1f} s: {out}")
            qmp.command("quit")
        try:
            proc.wait(timeout=a.capture_timeout)
        except subprocess.TimeoutExpired:
            console.poll()
            raise Failure(f"the second boot did not finish within {a.capture_timeout} s "
                          f"(last console line: {last_line(console.text)!r})")
        console.poll()
        m = re.search(r"CSPD: last dump saved: (\d+) bytes", console.text)
        if m:
            size = int(m.group(1))
            with open(disk, "r+b") as f:
                f.truncate(size)
            print(f"warm: {size} byte region saved by the second boot: {disk}")
        elif "CSPD: no last dump after reboot" in console.text:
            os.unlink(disk)
            print("warm: the second boot found no previous dump")
        else:
            raise Failure("the second boot neither saved a dump nor reported none "
                          f"(last console line: {last_line(console.text)!r})")
    finally:
        console.poll()
        stop(proc)


def run_boot(a, workdir):
    args = base_args(a, workdir) + ["-append", a.append]
    t = time.monotonic()
    proc = start(args, workdir)
    console = Console(os.path.join(workdir, "console.log"))
    try:
        console.wait_for(a.wait_for, a.panic_timeout, proc, poll=0.05)
        took = time.monotonic() - t
        rss = peak_rss_kib(proc)
        print(f"boot: saw {a.wait_for!r} after {took:.2f} s (QEMU peak RSS {rss} KiB)")
    finally:
        stop(proc)


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)B?", text.strip().upper())
    if not m:
        raise Failure(f"cannot read the memory size {text!r}")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2) or " "))


def remove_stale_ram_files():
    """RAM files left by runs that were killed (their qemu.py is gone)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        m = re.fullmatch(re.escape(SHM_PREFIX) + r"(\d+)-\d+", name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except OSError:
                pass
        except OSError:
            pass


def make_ram_file(a):
    """Creates the guest RAM file (sparse, full size) so the plugin can map it when it loads."""
    if not os.path.isdir(SHM_DIR):
        raise Failure(f"{SHM_DIR} is missing: the shared guest RAM needs a tmpfs there")
    remove_stale_ram_files()
    size = parse_size(a.mem)
    for n in range(100):
        path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-{n}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        return path
    raise Failure(f"could not create a guest RAM file in {SHM_DIR}")


def setup_coresight(a):
    """Checks the plugin options; returns an error message or None."""
    if a.coresight:
        a.shared_ram = True
        a.plugin = os.path.abspath(a.plugin)
        if not os.path.isfile(a.plugin):
            return (f"the QEMU CoreSight plugin {a.plugin} is missing: build it with "
                    "cargo build --release -p qemu-coresight (or give --plugin / CSPD_PLUGIN)")
        for kv in a.cs_arg or []:
            key, eq, _ = kv.partition("=")
            if not eq or not key:
                return f"--cs-arg {kv!r}: expected KEY=VALUE"
            if key in CS_OWN_KEYS or key == "file":
                return f"--cs-arg {kv!r}: the harness sets {key}= itself"
        if a.exec_record:
            a.exec_record = os.path.abspath(a.exec_record)
            if not os.path.isfile(a.exec_record):
                return (f"the execution recorder {a.exec_record} is missing: build it with "
                        "cargo build --release -p exec-record (or give --exec-record)")
        if parse_size(a.mem) != CS_RAM_SIZE:
            return (f"--coresight needs --mem 1G (the plugin's register window is the top of "
                    f"1 GiB of RAM), not {a.mem}")
        if not re.search(r"(^|\s)mem=", a.append):
            a.append += " " + CS_KERNEL_MEM
    elif a.cs_arg:
        return "--cs-arg needs --coresight"
    return None


def qemu_log_tail(workdir, n=5):
    try:
        with open(os.path.join(workdir, "qemu.log"), errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip() and not l.startswith("+ ")]
    except OSError:
        return []
    return lines[-n:]


def last_line(text):
    lines = [l for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["qemu-dump", "kdump", "warm", "boot"])
    p.add_argument("--kernel", required=True)
    p.add_argument("--initrd", required=True)
    p.add_argument("--append", required=True)
    p.add_argument("--workdir", required=True,
                   help="console.log, qemu.log, cmdline.txt and the QMP socket go here")
    p.add_argument("--vmcore", help="where to write the vmcore")
    p.add_argument("--cpu", default="cortex-a57")
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--mem", default="1G")
    p.add_argument("--disk-size", default=str(1536 << 20), help="virtio disk for kdump, bytes")
    p.add_argument("--makedumpfile", action="store_true",
                   help="kdump: the capture kernel also saves makedumpfile's flattened (-F -c -d 31, "
                   "plain and gzip'ed) and kdump-compressed (-l -d 31) dumps of the same /proc/vmcore "
                   "as vmcore.flat, vmcore.flat.gz and vmcore.kdump in the workdir")
    p.add_argument("--panic-timeout", type=int, default=240, help="seconds from start to the panic")
    p.add_argument("--capture-timeout", type=int, default=300, help="seconds from the panic to the saved vmcore")
    p.add_argument("--reset-on", help="warm: reset the machine (QMP system_reset) 1 s after this "
                   "console text, for a guest that hangs in its panic path")
    p.add_argument("--wait-for", default="CSPD: idle", help="console text that ends a 'boot' run")
    p.add_argument("--dump-at", help="warm: when the second boot prints this, write its memory to "
                   "--second-vmcore (QMP dump-guest-memory) and quit QEMU")
    p.add_argument("--second-vmcore", help="warm --dump-at: where the second boot's vmcore goes")
    p.add_argument("--qemu-arg", action="append", help="extra QEMU arguments")
    p.add_argument("--observe-cleans", metavar="SYSTEM_MAP",
                   help="qemu-dump, warm with --reset-on: watch what the panic path cleans to the "
                   "point of coherency through QEMU's gdbstub (the kernel's System.map; nokaslr) "
                   "into clean.json and clean-final.bin (scripts/gdb_observe.py)")
    p.add_argument("--coresight", action="store_true",
                   help="load the CoreSight TCG plugin on shared guest RAM, kernel mem=1023M")
    p.add_argument("--cs-arg", action="append", metavar="KEY=VALUE",
                   help="another plugin option, e.g. tmc=etb, tmc_size=65536, fault=etm-os-lock@1")
    p.add_argument("--plugin", default=os.environ.get("CSPD_PLUGIN") or DEFAULT_PLUGIN,
                   help="the plugin (default $CSPD_PLUGIN or target/release/libqemu_coresight.so)")
    p.add_argument("--exec-record", default=os.environ.get("CSPD_EXEC_RECORD") or DEFAULT_EXEC_RECORD,
                   help="with --coresight: the execution recorder plugin, whose record (exec.rec) the "
                   "trace judges compare with (default $CSPD_EXEC_RECORD or "
                   "target/release/libexec_record.so; '' for none)")
    p.add_argument("--exec-freeze-at", default=None, metavar="ADDR",
                   help="the execution record also freezes when a vCPU starts the block at ADDR (hex, a "
                   "kernel address: boot with nokaslr; exec-record's freeze_at=)")
    p.add_argument("--exec-entries", type=int, default=None, metavar="N",
                   help="ring entries per vCPU of the execution record (exec-record's entries=; its "
                   "default, 16 Mi, unless given)")
    p.add_argument("--shared-ram", action="store_true",
                   help="guest RAM from a shared file in /dev/shm (implied by --coresight)")
    a = p.parse_args()
    a.workdir = os.path.abspath(a.workdir)
    os.makedirs(a.workdir, exist_ok=True)
    if a.mode != "boot" and not a.vmcore:
        p.error("--vmcore is required for a capture")
    if a.dump_at and (a.mode != "warm" or not a.second_vmcore):
        p.error("--dump-at is for a warm run and needs --second-vmcore")
    if a.observe_cleans and not (a.mode == "qemu-dump" or (a.mode == "warm" and a.reset_on)):
        # Elsewhere the guest reboots or kexecs on its own while the observer still waits for
        # the panic path to go quiet, and the next kernel's cleans would count.
        p.error("--observe-cleans is for qemu-dump, or a warm run with --reset-on")
    if a.observe_cleans and "nokaslr" not in a.append.split():
        p.error("--observe-cleans needs nokaslr on the command line (breakpoints from System.map)")
    for f in (a.kernel, a.initrd):
        if not os.path.isfile(f):
            print(f"error: {f} does not exist", file=sys.stderr)
            return 1
    a.ram_file = None
    try:
        why = setup_coresight(a)
    except Failure as e:
        why = str(e)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 1
    # Killed by a timeout or a signal: still stop QEMU and remove the RAM file (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        if a.shared_ram:
            a.ram_file = make_ram_file(a)
        {"qemu-dump": run_qemu_dump, "kdump": run_kdump, "warm": run_warm, "boot": run_boot}[a.mode](a, a.workdir)
    except Failure as e:
        print(f"error: {a.mode}: {e} (console: {os.path.join(a.workdir, 'console.log')})", file=sys.stderr)
        for line in qemu_log_tail(a.workdir) if "QEMU exited" in str(e) else []:
            print(f"  qemu.log: {line}", file=sys.stderr)
        return 1
    finally:
        if a.ram_file:
            try:
                os.unlink(a.ram_file)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

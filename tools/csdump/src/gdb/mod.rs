//! `csdump gdb`: a GDB remote stub that replays what each CPU executed before the panic.
//!
//! Each CPU with decoded trace is a thread, stopped where its trace ends; the panicking CPU's
//! thread is the one the stop reply names. Its program counter is known (the end of its trace)
//! and nothing else is: the other registers are reported unavailable. The trace is served as
//! GDB's branch trace (BTS format, [`btrace`]) once GDB enables it with `record btrace bts`,
//! after which `record instruction-history`, `record function-call-history` and
//! `reverse-stepi` replay it. Memory reads come from the vmcore, vmlinux's text or a snapshot's
//! memory images ([`memory`]). Addresses are vmlinux's link-time ones: the stub subtracts the
//! dump's KASLR offset, so that `gdb vmlinux` names them as it is.
//!
//! The stub never lets the target run or change: resume, step, write and breakpoint packets
//! are refused. It speaks over stdin/stdout (`target remote | csdump gdb ...`) or one TCP
//! connection on a loopback address.
//!
//! Layout: [`rsp`] frames packets, [`session`] answers them, [`tdesc`] is the target
//! description, [`btrace`] turns decoded elements into blocks, [`trace`] is the adapter to the
//! decoder, [`memory`] serves reads and relocates. Loadable modules with their `.ko` are offered
//! as libraries ([`library_list`]).

pub mod btrace;
pub mod memory;
pub mod rsp;
pub mod session;
pub mod tdesc;
pub mod trace;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::io::BufReader;
use std::io::Write;
use std::net::SocketAddr;
use std::net::TcpListener;
use std::net::ToSocketAddrs;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;
use std::time::Instant;

use thiserror::Error;

use self::btrace::Builder;
use self::memory::DumpMemory;
use self::session::End;
use self::session::SessionError;
use self::session::Target;
use self::session::Thread;
use crate::capture::Capture;
use crate::capture::DumpPath;
use crate::capture::Origin;
use crate::report::INFERRED_PREFIX;
use crate::snapshot::VmlinuxImage;

/// `csdump gdb --help`.
pub const HELP: &str = "\
Serves the decoded pre-panic trace to GDB as a remote target.

Each CPU with trace is a thread, stopped where its trace ends; the panicking CPU's thread is
selected. Only the PC is known (the end of the trace: the target of a last direct branch, else
the last traced instruction); the other registers read as unavailable, since the vmcore's saved
registers are from a later moment. `record btrace bts` turns on GDB's replay of the trace:
`record instruction-history`, `record function-call-history`, `reverse-stepi`, `record goto`.
Memory reads come from the vmcore (what memory held at the panic, kernel text as the kernel
patched it), from vmlinux's text, or from a snapshot's memory images; during replay GDB reads
only vmlinux's read-only sections unless `set record btrace replay-memory-access read-write`.
The dump cannot run: resume, step, breakpoint and write packets are refused.

Addresses are vmlinux's link-time addresses: the stub subtracts the dump's KASLR offset (from
its Identity record) from every address in the kernel image, so that plain `gdb vmlinux` shows
symbols (and source lines, when vmlinux has debug info). Module and other addresses are served
as they ran. With --modules DIR, each module whose .ko has the build ID it ran with is a shared
library of the target (qXfer:libraries:read; the target's OS ABI is then `none`), its code
sections where the module was loaded (its data sections, whose addresses the dump does not
record, at non-canonical addresses where nothing runs): `info sharedlibrary` lists them and GDB
names their functions.

By default each CPU's newest 65536 instructions are served, decoded from the end of the trace
buffer (--last; 0 for everything): GDB computes the history of every instruction it is given,
a few microseconds each. While the trace decodes, the stub keeps GDB waiting. A place where the
trace was lost (code the decoder could not read, lost synchronisation) shows in GDB's history as
a decode error.

Over stdin/stdout:
  $ gdb-multiarch vmlinux
  (gdb) target remote | csdump gdb vmcore.elf --vmlinux vmlinux
  (gdb) record btrace bts
  (gdb) record instruction-history
  (gdb) reverse-stepi

Over TCP (one connection, loopback only unless --allow-remote):
  $ csdump gdb vmcore.elf --vmlinux vmlinux --listen 127.0.0.1:1234
  (gdb) target remote 127.0.0.1:1234";

/// `csdump gdb`'s command line.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The vmcore, region file or OpenCSD snapshot directory.
    pub input: PathBuf,
    /// vmlinux of the kernel that wrote the dump: needed for a dump (the decoder reads the code
    /// from it); for a snapshot, it relocates addresses to vmlinux's link-time ones.
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<PathBuf>,
    /// Directory of the kernel's loadable modules (`.ko` files, searched recursively): each
    /// module whose .ko has the build ID it ran with is offered to GDB as a library at the
    /// addresses it was loaded at (`info sharedlibrary`), so that GDB names its functions.
    #[arg(long, value_name = "DIR")]
    pub modules: Option<PathBuf>,
    /// Listen on this TCP address (host:port, loopback) for one GDB connection instead of
    /// speaking on stdin/stdout; port 0 picks a free one (printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Let --listen take an address that is not loopback.
    #[arg(long, requires = "listen")]
    pub allow_remote: bool,
    /// Serve each CPU's last N instructions (whole blocks: a few more), 0 for its whole trace.
    /// GDB computes the history of every instruction it is given when it reads the trace.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LAST)]
    pub last: u64,
    /// Use --vmlinux (and a module's .ko) even when its build ID is not the dump's.
    #[arg(long)]
    pub force: bool,
}

impl Args {
    /// The serving options.
    pub fn options(&self) -> Options {
        Options {
            listen: self.listen.clone(),
            allow_remote: self.allow_remote,
            last: (self.last > 0).then_some(self.last),
        }
    }
}

/// The notification sent while the trace decodes (GDB ignores it).
const KEEP_ALIVE: &[u8] = b"csdump:decoding";

/// Instructions served per CPU unless `--last` says otherwise.
pub const DEFAULT_LAST: u64 = 65_536;

/// Trace bytes decoded first when serving a window (a multiple of the 16-byte frame).
const FIRST_TAIL: usize = 32 * 1024;

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// Listen on this TCP address instead of speaking on stdin/stdout.
    pub listen: Option<String>,
    /// Accept a listening address that is not loopback.
    pub allow_remote: bool,
    /// Serve each CPU's last this many instructions (all when `None`).
    pub last: Option<u64>,
}

/// Why the stub could not serve.
#[derive(Debug, Error)]
pub enum GdbError {
    /// A dump was given without vmlinux.
    #[error(
        "a dump needs --vmlinux: the decoder reads the code the trace ran from it (and GDB needs \
         its symbols)"
    )]
    NoVmlinux,
    /// Nothing to replay.
    #[error("no CPU has decoded trace to replay: {0}")]
    NoTrace(String),
    /// The listening address is not acceptable.
    #[error("{0}")]
    Listen(String),
    /// The session broke.
    #[error("{0}")]
    Session(#[from] SessionError),
    /// Setting up the connection failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

/// The stub's target, ready to serve: its memory and threads.
pub struct Prepared<'a> {
    /// The memory.
    pub memory: DumpMemory<'a>,
    /// The threads, by CPU.
    pub threads: Vec<Thread>,
    /// Index of the panicking CPU's thread (else the first).
    pub selected: usize,
    /// What `monitor info` says.
    pub info: String,
    /// What the user should know before GDB connects.
    pub notes: Vec<String>,
    /// Trace buffer size.
    pub buffer_size: Option<u64>,
    /// The modules with a `.ko`, as GDB's library list.
    pub libraries: Option<String>,
}

impl Prepared<'_> {
    /// The target to serve.
    pub fn target(&self) -> Target<'_> {
        Target {
            threads: &self.threads,
            selected: self.selected,
            memory: &self.memory,
            buffer_size: self.buffer_size,
            info: &self.info,
            libraries: self.libraries.as_deref(),
        }
    }
}

/// Decodes `capture` and builds the threads and memory the stub serves.
pub fn prepare<'a>(
    capture: &Capture<'a>,
    vmlinux: Option<&VmlinuxImage<'a>>,
    opts: &Options,
) -> Result<Prepared<'a>, GdbError> {
    if capture.origin == Origin::Dump && vmlinux.is_none() {
        return Err(GdbError::NoVmlinux);
    }
    let reloc = memory::relocation(capture, vmlinux);
    let memory = DumpMemory::new(capture, vmlinux, reloc);
    let mut notes = memory.notes.clone();
    // With a window, decode the end of the buffer, and more of it (twice as much each time)
    // until the panicking CPU's window is full and every CPU has some trace: the decode time
    // follows the window, not the buffer.
    let total = trace::trace_len(capture);
    let mut tail = match opts.last {
        Some(_) => FIRST_TAIL.min(total),
        None => total,
    };
    let panic_id = capture
        .etms
        .iter()
        .find(|e| Some(e.state.cpu) == capture.panic_cpu)
        .map(|e| e.trace_id());
    let enough = |b: &Builder<'_>| opts.last.is_none_or(|n| b.kept() >= n);
    let (builders, decoded) = loop {
        let mut builders: BTreeMap<u8, (u32, Builder<'_>)> = capture
            .etms
            .iter()
            .map(|e| (e.trace_id(), (e.state.cpu, Builder::new(&reloc, opts.last))))
            .collect();
        let part = trace::with_tail(capture, tail);
        let decoded = trace::each_element(&part, vmlinux, |id, e| {
            if let Some((_, b)) = builders.get_mut(&id) {
                b.push(e);
            }
        })
        .map_err(GdbError::NoTrace)?;
        // The panicking CPU's window is full, and every other CPU shows some trace.
        let full = match panic_id.and_then(|id| builders.get(&id)) {
            Some((_, b)) => enough(b) && builders.values().all(|(_, b)| b.kept() > 0),
            None => builders.values().all(|(_, b)| enough(b)),
        };
        if full || tail >= total {
            break (builders, decoded);
        }
        tail = tail.saturating_mul(2).min(total);
    };
    if tail < total {
        notes.push(format!(
            "decoded the last {} KiB of the {} KiB of trace: the panicking CPU's newest {} \
             instructions and every CPU's last ones (--last 0 decodes and serves it all)",
            tail / 1024,
            total / 1024,
            opts.last.unwrap_or(0)
        ));
    }
    // The instruction at a runtime address, for the target of a last direct branch.
    let word = |rt: u64| {
        let mut b = [0u8; 4];
        (memory.read_runtime(rt, &mut b) == 4).then(|| u32::from_le_bytes(b))
    };
    let mut threads = Vec::new();
    let mut missing = Vec::new();
    let mut by_cpu: Vec<(u32, u8, Builder<'_>)> = builders
        .into_iter()
        .map(|(id, (cpu, b))| (cpu, id, b))
        .collect();
    by_cpu.sort_by_key(|&(cpu, _, _)| cpu);
    for (cpu, id, b) in by_cpu {
        match b.finish(&word) {
            Some(trace) => threads.push(Thread {
                cpu,
                panic: capture.panic_cpu == Some(cpu),
                trace,
            }),
            None => missing.push(format!(
                "CPU {cpu}: no instruction decoded for trace ID {id:#x}"
            )),
        }
    }
    if threads.is_empty() {
        let mut why = missing.join("; ");
        if why.is_empty() {
            why = "no ETM source".into();
        }
        if memory.is_empty() {
            why.push_str(" (no code to decode against: give --vmlinux or a snapshot with images)");
        }
        return Err(GdbError::NoTrace(why));
    }
    notes.extend(missing);
    // A dump no panic-time step completed (plain kdump) names no panicking CPU: as the report
    // does, the one thread stopped at one of its trace unit's stop points, else the CPU the
    // capture kernel ran on.
    if capture.panic_cpu.is_none() && capture.path == Some(DumpPath::Runtime) {
        let stopped: Vec<u32> = threads
            .iter()
            .filter(|t| {
                capture
                    .stop_points(t.cpu)
                    .iter()
                    .any(|&a| reloc.to_link(a) == t.trace.pc)
            })
            .map(|t| t.cpu)
            .collect();
        let inferred = match stopped[..] {
            [cpu] => Some((cpu, "its trace alone ends at a stop point")),
            _ => capture
                .capture_kernel_cpu()
                .map(|cpu| (cpu, "the capture kernel ran on it")),
        };
        if let Some((cpu, why)) = inferred {
            if let Some(t) = threads.iter_mut().find(|t| t.cpu == cpu) {
                t.panic = true;
                notes.push(format!(
                    "{INFERRED_PREFIX}{cpu}, inferred: no record names it (no panic-time step \
                     ran), and {why}"
                ));
            }
        }
    }
    let selected = match threads.iter().position(|t| t.panic) {
        Some(i) => i,
        None => {
            notes.push(match capture.panic_cpu {
                Some(c) => format!(
                    "the panicking CPU {c} has no trace: CPU {} is selected",
                    threads[0].cpu
                ),
                None => format!(
                    "the dump names no panicking CPU: CPU {} is selected",
                    threads[0].cpu
                ),
            });
            0
        }
    };
    let mut info = String::new();
    if let Some(r) = &capture.kernel.release {
        let _ = writeln!(info, "kernel: {r}");
    }
    if let Some(m) = &capture.panic_message {
        let cpu = capture.panic_cpu.map_or("?".into(), |c| c.to_string());
        let _ = writeln!(info, "panic: CPU {cpu}: {}", m.trim_end());
    }
    let _ = writeln!(
        info,
        "addresses: vmlinux's link-time ones ({})",
        if reloc.offset() == 0 {
            "the trace's, not moved".to_string()
        } else {
            format!("the trace's minus the KASLR offset {:#x}", reloc.offset())
        }
    );
    let _ = writeln!(info, "decoder: {}", decoded.decoder);
    for n in &decoded.notes {
        let _ = writeln!(info, "note: {n}");
    }
    if !decoded.errors.is_empty() {
        let _ = writeln!(
            info,
            "decoder errors: {} (first: {})",
            decoded.errors.len(),
            decoded.errors[0]
        );
    }
    for th in &threads {
        let t = &th.trace;
        let _ = writeln!(
            info,
            "CPU {}{}: thread {}, {} instructions ({} decoded) in {} blocks, {} gaps; current \
             instruction {:#x}: {}",
            th.cpu,
            if th.panic { " (panic)" } else { "" },
            th.tid(),
            t.instructions,
            t.decoded,
            t.blocks(),
            t.gaps,
            t.pc,
            t.end.describe()
        );
        if t.instructions < t.decoded {
            notes.push(format!(
                "CPU {}: the last {} of {} decoded instructions are served (--last {}; 0 for all)",
                th.cpu,
                t.instructions,
                t.decoded,
                opts.last.unwrap_or(0)
            ));
        }
    }
    let buffer_size = capture
        .sinks
        .iter()
        .find(|s| !s.frames().is_empty())
        .map(|s| s.trace.len() as u64);
    let libraries = library_list(&capture.module_symbols);
    if let Some(n) = libraries.as_ref().map(|_| {
        capture
            .module_symbols
            .modules()
            .iter()
            .filter(|m| m.ko.is_some())
            .count()
    }) {
        let _ = writeln!(
            info,
            "modules: {n} offered to GDB as libraries at their load addresses (info sharedlibrary)"
        );
    }
    Ok(Prepared {
        memory,
        threads,
        selected,
        info,
        notes,
        buffer_size,
        libraries,
    })
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The modules whose `.ko` was accepted, as GDB's library list (`library-list.dtd`): each
/// `.ko` by its path, with the address of each of its allocated sections in file order (code
/// where the kernel loaded it; data, whose address the dump does not record, where nothing
/// runs). `None` when no module has a `.ko`.
pub fn library_list(modules: &crate::modules::ModuleSymbols) -> Option<String> {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE library-list SYSTEM \"library-list.dtd\">\n\
         <library-list version=\"1.0\">\n",
    );
    let mut any = false;
    for (slot, m) in modules.modules().iter().enumerate() {
        let Some(ko) = &m.ko else {
            continue;
        };
        any = true;
        let _ = writeln!(
            s,
            "<library name=\"{}\">",
            xml_escape(&ko.path.to_string_lossy())
        );
        for a in m.section_addresses(slot as u64) {
            let _ = writeln!(s, "<section address=\"{a:#x}\"/>");
        }
        s.push_str("</library>\n");
    }
    s.push_str("</library-list>\n");
    any.then_some(s)
}

/// Whether every address `addr` names is a loopback one.
fn loopback(addrs: &[SocketAddr]) -> bool {
    !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
}

/// Serves `capture` to GDB as `opts` says; messages go to `log`.
pub fn run(
    capture: &Capture<'_>,
    vmlinux: Option<&VmlinuxImage<'_>>,
    opts: &Options,
    log: &mut dyn Write,
) -> Result<End, GdbError> {
    let started = Instant::now();
    let mut transport = transport(opts)?;
    // Over stdin/stdout GDB has sent its first packet already and waits 2 s for each answer:
    // while the trace decodes, notifications it ignores keep it waiting.
    let prepared = std::thread::scope(|s| {
        let (done, finished) = mpsc::channel::<()>();
        let decode = s.spawn(move || {
            let r = prepare(capture, vmlinux, opts);
            drop(done);
            r
        });
        if let Transport::Stdio(out) = &mut transport {
            while finished.recv_timeout(Duration::from_millis(250))
                == Err(RecvTimeoutError::Timeout)
            {
                if rsp::write_notification(out, KEEP_ALIVE).is_err() {
                    break;
                }
            }
        }
        decode.join()
    })
    .map_err(|_| GdbError::NoTrace("the decode stopped unexpectedly".into()))??;
    let took = started.elapsed();
    for n in &prepared.notes {
        let _ = writeln!(log, "csdump gdb: note: {n}");
    }
    let target = prepared.target();
    let summary: Vec<String> = target
        .threads
        .iter()
        .map(|t| {
            format!(
                "CPU {}{} {} instructions",
                t.cpu,
                if t.panic { " (panic)" } else { "" },
                t.trace.instructions
            )
        })
        .collect();
    let _ = writeln!(
        log,
        "csdump gdb: {} thread(s): {}; decoded in {:.2} s; `record btrace bts` replays them",
        target.threads.len(),
        summary.join(", "),
        took.as_secs_f64()
    );
    let end = match transport {
        Transport::Stdio(stdout) => session::serve(target, io::stdin().lock(), stdout, log)?,
        Transport::Tcp(addr, addrs) => {
            let io_err = |what: String| move |source| GdbError::Io { what, source };
            let l = TcpListener::bind(&addrs[..]).map_err(io_err(format!("--listen {addr}")))?;
            let at = l.local_addr().map_err(io_err("listening socket".into()))?;
            let _ = writeln!(
                log,
                "csdump gdb: listening on {at} (in GDB: target remote {at})"
            );
            let _ = log.flush();
            let (stream, peer) = l.accept().map_err(io_err(format!("accepting on {at}")))?;
            let _ = writeln!(log, "csdump gdb: connection from {peer}");
            let _ = stream.set_nodelay(true);
            let reader = stream.try_clone().map_err(io_err("socket".into()))?;
            session::serve(target, BufReader::new(reader), stream, log)?
        }
    };
    let _ = writeln!(
        log,
        "csdump gdb: {}",
        match end {
            End::Detached => "GDB detached",
            End::Killed => "GDB killed the target; the dump is unchanged",
            End::Disconnected => "GDB disconnected",
        }
    );
    Ok(end)
}

/// Where GDB is.
enum Transport {
    /// On stdin and stdout. Standard output is line buffered (a reply holding newlines, XML,
    /// would go out in pieces): this is a file on the same descriptor, one write per packet.
    Stdio(File),
    /// One connection to this address (as given, and resolved).
    Tcp(String, Vec<SocketAddr>),
}

/// Checks the transport `opts` asks for, before anything is decoded.
fn transport(opts: &Options) -> Result<Transport, GdbError> {
    let Some(addr) = &opts.listen else {
        return io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(|fd| Transport::Stdio(File::from(fd)))
            .map_err(|source| GdbError::Io {
                what: "standard output".into(),
                source,
            });
    };
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| GdbError::Listen(format!("--listen {addr}: {e}")))?
        .collect();
    if !opts.allow_remote && !loopback(&addrs) {
        return Err(GdbError::Listen(format!(
            "--listen {addr}: not a loopback address; the stub serves kernel memory to whoever \
             connects (--allow-remote to listen there anyway)"
        )));
    }
    Ok(Transport::Tcp(addr.clone(), addrs))
}

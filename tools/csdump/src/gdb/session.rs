//! The stub's side of a GDB session: what each packet gets back.
//!
//! The target is a set of stopped threads (one per CPU with trace) that never run: anything that
//! would resume or write gets an error, reads are served from the dump, and branch trace is
//! served per thread once GDB enables it (`record btrace bts`, which sends `Qbtrace:bts` for
//! each thread).

use std::fmt::Write as _;
use std::io;
use std::io::BufRead;
use std::io::Write;

use super::btrace::ThreadTrace;
use super::memory::Memory;
use super::rsp;
use super::rsp::BadPacket;
use super::rsp::Event;
use super::rsp::ReadError;
use super::rsp::Reader;
use super::tdesc;

/// One CPU, as a GDB thread.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Logical CPU number.
    pub cpu: u32,
    /// Whether this CPU panicked.
    pub panic: bool,
    /// Its trace.
    pub trace: ThreadTrace,
}

impl Thread {
    /// The GDB thread ID (CPU number + 1: GDB reserves 0 and -1).
    pub fn tid(&self) -> u64 {
        u64::from(self.cpu) + 1
    }
}

/// What the stub serves.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// The threads, by CPU number.
    pub threads: &'a [Thread],
    /// Index of the thread the stop reply names (the panicking CPU's).
    pub selected: usize,
    /// The memory.
    pub memory: &'a dyn Memory,
    /// Size of the trace buffer in bytes, for `info record`.
    pub buffer_size: Option<u64>,
    /// What `monitor info` prints.
    pub info: &'a str,
    /// The loadable modules as GDB's library list (`qXfer:libraries:read`), when there are
    /// any with their `.ko`.
    pub libraries: Option<&'a str>,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// GDB detached (`D`).
    Detached,
    /// GDB killed the target (`k`, `vKill`).
    Killed,
    /// The connection closed between packets.
    Disconnected,
}

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The byte stream broke the protocol.
    #[error("{0}")]
    Protocol(#[from] ReadError),
    /// Writing to GDB failed.
    #[error("writing to GDB: {0}")]
    Write(io::Error),
}

/// A thread selection in `H`, `T`, `qThreadExtraInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sel {
    /// `-1`: all threads.
    All,
    /// `0`: any thread.
    Any,
    /// One thread ID.
    Id(u64),
}

fn parse_tid(s: &[u8]) -> Option<Sel> {
    // Multiprocess form `pPID.TID`: only the thread part matters.
    let s = match s.strip_prefix(b"p") {
        Some(r) => r.iter().position(|&c| c == b'.').map_or(r, |i| &r[i + 1..]),
        None => s,
    };
    match s {
        b"-1" => Some(Sel::All),
        b"0" => Some(Sel::Any),
        _ => rsp::parse_hex(s).map(Sel::Id),
    }
}

/// Per-thread branch trace state.
#[derive(Debug, Clone, Default)]
struct Btrace {
    enabled: bool,
    /// The whole trace was sent since it was enabled: nothing is new.
    delivered: bool,
    xml: Option<String>,
}

/// A packet's effect on the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send these packets (console output first, then the reply); go on.
    Reply(Vec<Vec<u8>>),
    /// Send these packets, then end.
    ReplyAndEnd(Vec<Vec<u8>>, End),
    /// End without a reply.
    End(End),
}

fn one(p: impl Into<Vec<u8>>) -> Action {
    Action::Reply(vec![p.into()])
}

/// `E.` and `msg`, frame characters kept out of it: GDB shows the message.
fn error_packet(msg: &str) -> Vec<u8> {
    let clean: String = msg
        .chars()
        .map(|c| {
            if matches!(c, '$' | '#' | '}' | '*') || !c.is_ascii() || c.is_ascii_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    format!("E.{clean}").into_bytes()
}

fn error(msg: &str) -> Action {
    one(error_packet(msg))
}

/// Console output (`O` packet) of `text`.
fn output(text: &str) -> Vec<u8> {
    let mut p = b"O".to_vec();
    rsp::push_hex(&mut p, text.as_bytes());
    p
}

/// Parses `ADDR,LEN` (hex).
fn addr_len(s: &[u8]) -> Option<(u64, u64)> {
    let i = s.iter().position(|&c| c == b',')?;
    Some((rsp::parse_hex(&s[..i])?, rsp::parse_hex(&s[i + 1..])?))
}

/// Serves the part of `data` a `qXfer` read of `offset,length` asks for: `m` and a chunk when
/// more follows, `l` and the rest at the end.
fn xfer(data: &[u8], offset: u64, length: u64) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let want = usize::try_from(length)
        .unwrap_or(usize::MAX)
        .min(rsp::MAX_PACKET - 1);
    let rest = &data[start..];
    let mut out = vec![b'm'];
    let took = rsp::escape_binary(&rest[..want.min(rest.len())], want, &mut out);
    if took == rest.len() {
        out[0] = b'l';
    }
    if took == 0 && !rest.is_empty() {
        // Not even one byte fits (a length of 1 and an escaped byte): say so.
        return b"E.qXfer length too small".to_vec();
    }
    out
}

/// The state of one session.
pub struct Session<'t> {
    t: Target<'t>,
    noack: bool,
    /// Thread for `g`, `p`, `m` and `qXfer:btrace` (`Hg`), as an index.
    general: Option<usize>,
    btrace: Vec<Btrace>,
}

/// What the stub refuses to do, in one sentence.
const NO_RUN: &str = "csdump gdb: a dump cannot run: it replays the recorded trace only. Use \
                      reverse-stepi, reverse-step, `record goto` and `record \
                      instruction-history`.\n";

impl<'t> Session<'t> {
    /// Returns a new session on `t`.
    pub fn new(t: Target<'t>) -> Self {
        Self {
            t,
            noack: false,
            general: None,
            btrace: vec![Btrace::default(); t.threads.len()],
        }
    }

    /// Whether acknowledgements are off (`QStartNoAckMode`).
    pub fn noack(&self) -> bool {
        self.noack
    }

    fn index(&self, tid: u64) -> Option<usize> {
        self.t.threads.iter().position(|th| th.tid() == tid)
    }

    fn current(&self) -> usize {
        self.general.unwrap_or(self.t.selected)
    }

    fn thread(&self) -> Option<&'t Thread> {
        self.t.threads.get(self.current())
    }

    fn stop_reply(&self) -> Vec<u8> {
        let Some(th) = self.t.threads.get(self.t.selected) else {
            return b"S05".to_vec();
        };
        let mut s = format!("T05thread:{:x};core:{:x};", th.tid(), th.cpu).into_bytes();
        s.extend_from_slice(format!("{:x}:", tdesc::PC_REGNUM).as_bytes());
        rsp::push_hex(&mut s, &th.trace.pc.to_le_bytes());
        s.push(b';');
        s
    }

    fn register(&self, th: &Thread, n: usize, out: &mut Vec<u8>) -> bool {
        let Some(size) = tdesc::reg_size(n) else {
            return false;
        };
        if n == tdesc::PC_REGNUM {
            rsp::push_hex(out, &th.trace.pc.to_le_bytes());
        } else {
            // Only the PC is known at the end of the trace: the vmcore's registers are from a
            // later moment (after the dump ran), and mixing them in would show a false frame.
            out.resize(out.len() + 2 * size, b'x');
        }
        true
    }

    fn extra_info(&self, th: &Thread) -> String {
        let mut s = format!("CPU {}", th.cpu);
        if th.panic {
            s.push_str(", panicked");
        }
        let _ = write!(s, ", {} instructions traced", th.trace.instructions);
        if th.trace.gaps > 0 {
            let _ = write!(s, ", {} gaps", th.trace.gaps);
        }
        s
    }

    fn supported(&self) -> Vec<u8> {
        format!(
            "PacketSize={:x};QStartNoAckMode+;qXfer:features:read+;qXfer:btrace:read+;\
             qXfer:btrace-conf:read+;Qbtrace:bts+;Qbtrace:off+;Qbtrace:pt-{}",
            rsp::MAX_PACKET,
            if self.t.libraries.is_some() {
                ";qXfer:libraries:read+"
            } else {
                ""
            }
        )
        .into_bytes()
    }

    fn btrace_conf(&self, i: usize) -> String {
        let mut s = String::from(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n\
             <btrace-conf version=\"1.0\">\n",
        );
        if self.btrace.get(i).is_some_and(|b| b.enabled) {
            match self.t.buffer_size {
                Some(n) => {
                    let _ = writeln!(s, "<bts size=\"{n:#x}\"/>");
                }
                None => s.push_str("<bts/>\n"),
            }
        }
        s.push_str("</btrace-conf>\n");
        s
    }

    /// The `qXfer:btrace:read` reply for annex `annex` of the current thread.
    fn btrace_read(&mut self, annex: &[u8], offset: u64, length: u64) -> Action {
        let i = self.current();
        let Some(th) = self.t.threads.get(i) else {
            return error("no such thread");
        };
        let Some(bt) = self.btrace.get_mut(i) else {
            return error("no such thread");
        };
        if !bt.enabled {
            return error("branch tracing is not enabled for this thread (record btrace bts)");
        }
        // The trace never grows: after the whole of it was read, nothing is new. GDB first asks
        // for a delta (which needs the trace it has to end where the new one starts): refused
        // until the trace was read, so that GDB asks for "new" and takes it all.
        let whole = match annex {
            b"all" => true,
            b"new" => !bt.delivered,
            b"delta" if bt.delivered => false,
            b"delta" => return error("no delta: read the whole trace"),
            _ => return error("unknown btrace annex"),
        };
        if !whole {
            return one(xfer(
                b"<?xml version=\"1.0\"?>\n<btrace version=\"1.0\">\n</btrace>\n",
                offset,
                length,
            ));
        }
        let xml = bt.xml.get_or_insert_with(|| th.trace.xml());
        let reply = xfer(xml.as_bytes(), offset, length);
        if reply.first() == Some(&b'l') {
            bt.delivered = true;
        }
        one(reply)
    }

    fn qxfer(&mut self, rest: &[u8]) -> Action {
        // object:read:annex:offset,length
        let mut parts = rest.splitn(4, |&c| c == b':');
        let (Some(object), Some(op), Some(annex), Some(range)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return error("malformed qXfer");
        };
        if op != b"read" {
            return one(Vec::new());
        }
        let Some((offset, length)) = addr_len(range) else {
            return error("malformed qXfer offset,length");
        };
        match object {
            b"features" if annex == b"target.xml" => {
                // With libraries to offer, the target says its OS ABI is none: GDB then takes
                // them from this list (for GNU/Linux it would ask for the SVR4 link map).
                let xml = tdesc::target_xml_with(self.t.libraries.is_some());
                one(xfer(xml.as_bytes(), offset, length))
            }
            b"libraries" => match self.t.libraries {
                Some(l) if annex.is_empty() => one(xfer(l.as_bytes(), offset, length)),
                Some(_) => error("no such libraries annex"),
                None => one(Vec::new()),
            },
            b"features" => error("no such target description annex"),
            b"btrace" => self.btrace_read(annex, offset, length),
            b"btrace-conf" => one(xfer(
                self.btrace_conf(self.current()).as_bytes(),
                offset,
                length,
            )),
            _ => one(Vec::new()),
        }
    }

    fn monitor(&self, hex: &[u8]) -> Action {
        let cmd = rsp::unhex(hex)
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .unwrap_or_default();
        let text = match cmd.as_str() {
            "info" | "" => self.t.info.to_string(),
            "help" => "monitor info: the dump, the decode, each CPU's trace and current \
                       instruction\n"
                .to_string(),
            _ => {
                return error(&format!(
                    "unknown monitor command {cmd:?} (try: monitor help)"
                ))
            }
        };
        let mut v: Vec<Vec<u8>> = text
            .as_bytes()
            .chunks(1024)
            .map(|c| output(&String::from_utf8_lossy(c)))
            .collect();
        v.push(b"OK".to_vec());
        Action::Reply(v)
    }

    /// Returns what `packet` gets.
    pub fn handle(&mut self, p: &[u8]) -> Action {
        let Some(&first) = p.first() else {
            return one(Vec::new());
        };
        let rest = &p[1..];
        match first {
            b'?' => one(self.stop_reply()),
            b'g' if rest.is_empty() => match self.thread() {
                Some(th) => {
                    let mut out = Vec::new();
                    for n in 0..tdesc::NUM_REGS {
                        self.register(th, n, &mut out);
                    }
                    one(out)
                }
                None => error("no such thread"),
            },
            b'p' => {
                let n = rsp::parse_hex(rest).and_then(|n| usize::try_from(n).ok());
                let mut out = Vec::new();
                match (self.thread(), n) {
                    (Some(th), Some(n)) if self.register(th, n, &mut out) => one(out),
                    _ => error("no such register"),
                }
            }
            b'm' => {
                let Some((addr, len)) = addr_len(rest) else {
                    return error("malformed m packet");
                };
                let len = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min((rsp::MAX_PACKET - 1) / 2);
                if len == 0 {
                    return one(Vec::new());
                }
                let mut buf = vec![0u8; len];
                let n = self.t.memory.read(addr, &mut buf);
                if n == 0 {
                    // EFAULT, as gdbserver answers.
                    return one("E0e");
                }
                one(rsp::hex(&buf[..n]))
            }
            b'H' if rest.len() >= 2 => {
                let (kind, id) = (rest[0], &rest[1..]);
                match (kind, parse_tid(id)) {
                    (b'g', Some(Sel::Id(t))) => match self.index(t) {
                        Some(i) => {
                            self.general = Some(i);
                            one("OK")
                        }
                        None => error("no such thread"),
                    },
                    (b'g', Some(_)) => {
                        self.general = None;
                        one("OK")
                    }
                    (b'c', Some(Sel::Id(t))) if self.index(t).is_none() => error("no such thread"),
                    (b'c', Some(_)) => one("OK"),
                    _ => error("malformed H packet"),
                }
            }
            b'T' => match parse_tid(rest) {
                Some(Sel::Id(t)) if self.index(t).is_some() => one("OK"),
                _ => error("no such thread"),
            },
            b'D' => Action::ReplyAndEnd(vec![b"OK".to_vec()], End::Detached),
            b'k' => Action::End(End::Killed),
            // Resuming: the dump cannot run. Console output, then the error as stop reply.
            b'c' | b'C' | b's' | b'S' | b'i' | b'I' => {
                Action::Reply(vec![output(NO_RUN), b"E01".to_vec()])
            }
            // Writing memory or registers.
            b'M' | b'X' | b'P' | b'G' => error("the dump is read-only"),
            // Breakpoints and watchpoints: not supported (GDB falls back to memory writes, which
            // are refused).
            b'Z' | b'z' => one(Vec::new()),
            b'q' | b'Q' | b'v' => self.query(p),
            _ => one(Vec::new()),
        }
    }

    fn query(&mut self, p: &[u8]) -> Action {
        if p.starts_with(b"qSupported") {
            return one(self.supported());
        }
        if p == b"QStartNoAckMode" {
            self.noack = true;
            return one("OK");
        }
        if let Some(r) = p.strip_prefix(b"qXfer:") {
            return self.qxfer(r);
        }
        if let Some(r) = p.strip_prefix(b"qRcmd,") {
            return self.monitor(r);
        }
        if let Some(r) = p.strip_prefix(b"qThreadExtraInfo,") {
            return match parse_tid(r).and_then(|s| match s {
                Sel::Id(t) => self.index(t),
                _ => None,
            }) {
                Some(i) => one(rsp::hex(self.extra_info(&self.t.threads[i]).as_bytes())),
                None => error("no such thread"),
            };
        }
        if let Some(r) = p.strip_prefix(b"Qbtrace:") {
            let i = self.current();
            let Some(bt) = self.btrace.get_mut(i) else {
                return error("no such thread");
            };
            return match r {
                b"bts" if bt.enabled => error("branch tracing is already enabled"),
                b"bts" => {
                    bt.enabled = true;
                    bt.delivered = false;
                    one("OK")
                }
                b"off" if !bt.enabled => error("branch tracing is not enabled"),
                b"off" => {
                    *bt = Btrace::default();
                    one("OK")
                }
                _ => error("only the bts format is served (record btrace bts)"),
            };
        }
        if p.starts_with(b"vKill") {
            return Action::ReplyAndEnd(vec![b"OK".to_vec()], End::Killed);
        }
        if p == b"vCont?" {
            // No resume action: GDB then does not use vCont.
            return one("vCont");
        }
        if p.starts_with(b"vCont;") || p == b"vCont" {
            return Action::Reply(vec![output(NO_RUN), b"E01".to_vec()]);
        }
        if p.starts_with(b"vRun") || p.starts_with(b"vAttach") {
            return error("a dump cannot run or attach to a process");
        }
        if p == b"vCtrlC" {
            return one("OK");
        }
        match p {
            b"qfThreadInfo" => {
                let mut s = b"m".to_vec();
                for (i, th) in self.t.threads.iter().enumerate() {
                    if i > 0 {
                        s.push(b',');
                    }
                    s.extend_from_slice(format!("{:x}", th.tid()).as_bytes());
                }
                one(s)
            }
            b"qsThreadInfo" => one("l"),
            b"qC" => match self.thread() {
                Some(th) => one(format!("QC{:x}", th.tid())),
                None => one(Vec::new()),
            },
            // Attached to an existing process: GDB detaches (does not kill) when it quits.
            b"qAttached" => one("1"),
            b"qSymbol::" => one("OK"),
            _ if p.starts_with(b"qAttached:") => one("1"),
            _ => one(Vec::new()),
        }
    }
}

/// Serves GDB on the byte streams `r` and `w` until it detaches, kills the target or
/// disconnects; complaints about bad packets go to `log`.
pub fn serve<R: BufRead, W: Write>(
    t: Target<'_>,
    r: R,
    mut w: W,
    log: &mut dyn Write,
) -> Result<End, SessionError> {
    let mut reader = Reader::new(r);
    let mut s = Session::new(t);
    let mut last: Vec<Vec<u8>> = Vec::new();
    let mut naks = 0u32;
    let write_err = |e: io::Error| match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => None,
        _ => Some(SessionError::Write(e)),
    };
    let send = |w: &mut W, packets: &[Vec<u8>]| -> io::Result<()> {
        for p in packets {
            rsp::write_packet(w, p)?;
        }
        Ok(())
    };
    loop {
        match reader.next_event()? {
            Event::Packet(p) => {
                naks = 0;
                if !s.noack() {
                    if let Err(e) = w.write_all(b"+") {
                        return write_err(e).map_or(Ok(End::Disconnected), Err);
                    }
                }
                let (packets, end) = match s.handle(&p) {
                    Action::Reply(v) => (v, None),
                    Action::ReplyAndEnd(v, e) => (v, Some(e)),
                    Action::End(e) => (Vec::new(), Some(e)),
                };
                if let Err(e) = send(&mut w, &packets) {
                    return write_err(e).map_or(Ok(End::Disconnected), Err);
                }
                last = packets;
                if let Some(e) = end {
                    return Ok(e);
                }
            }
            Event::Nak if !s.noack() && naks < 8 => {
                naks += 1;
                if let Err(e) = send(&mut w, &last) {
                    return write_err(e).map_or(Ok(End::Disconnected), Err);
                }
            }
            Event::Nak | Event::Ack | Event::Interrupt => {}
            Event::Bad(b) => {
                let _ = writeln!(log, "csdump gdb: bad packet from GDB: {b}");
                let r = match b {
                    // The interrupted packet is dropped; the new one gets the reply.
                    BadPacket::Restarted(_) => Ok(()),
                    _ if !s.noack() => w.write_all(b"-").and_then(|()| w.flush()),
                    _ => rsp::write_packet(&mut w, &error_packet(&format!("bad packet: {b}"))),
                };
                if let Err(e) = r {
                    return write_err(e).map_or(Ok(End::Disconnected), Err);
                }
            }
            Event::Eof => return Ok(End::Disconnected),
        }
    }
}

/// Entry point for fuzzers: serves `data` as what GDB sends, on a small target (two threads,
/// one with a gap, memory of zeros above 0x1000). Must never panic, and ends with `data`.
pub fn fuzz_session(data: &[u8]) {
    struct Zeros;
    impl Memory for Zeros {
        fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
            if addr < 0x1000 {
                return 0;
            }
            buf.fill(0);
            buf.len()
        }
    }
    use super::btrace::Piece;
    use super::btrace::TraceEnd;
    let threads = [
        Thread {
            cpu: 0,
            panic: true,
            trace: ThreadTrace {
                pieces: vec![
                    Piece::Block {
                        begin: 0x1000,
                        end: 0x100c,
                    },
                    Piece::Gap { at: 0x2000 },
                    Piece::Block {
                        begin: 0x2000,
                        end: 0x2008,
                    },
                ],
                pc: 0x2008,
                end: TraceEnd::Sequential,
                instructions: 6,
                decoded: 6,
                gaps: 1,
            },
        },
        Thread {
            cpu: 3,
            panic: false,
            trace: ThreadTrace {
                pieces: vec![Piece::Block {
                    begin: 0x3000,
                    end: 0x3000,
                }],
                pc: 0x3000,
                end: TraceEnd::Indirect,
                instructions: 0,
                decoded: 1,
                gaps: 0,
            },
        },
    ];
    let target = Target {
        threads: &threads,
        selected: 0,
        memory: &Zeros,
        buffer_size: Some(0x1000),
        info: "fuzz\n",
        libraries: Some("<library-list version=\"1.0\"></library-list>\n"),
    };
    let _ = serve(target, data, io::sink(), &mut io::sink());
}

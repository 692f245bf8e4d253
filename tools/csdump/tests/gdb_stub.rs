//! The GDB stub's protocol, packet by packet, on a synthetic target; and a fuzz-style run that
//! feeds it malformed, truncated and random packet streams: it must never panic, never hang,
//! and end every stream.

use std::io::Cursor;
use std::sync::mpsc;
use std::time::Duration;
use std::time::Instant;

use csdump::decode::BranchType;
use csdump::decode::Element;
use csdump::gdb::btrace::Builder;
use csdump::gdb::memory::Memory;
use csdump::gdb::memory::Relocation;
use csdump::gdb::rsp;
use csdump::gdb::session::serve;
use csdump::gdb::session::Action;
use csdump::gdb::session::End;
use csdump::gdb::session::Session;
use csdump::gdb::session::Target;
use csdump::gdb::session::Thread;

mod common;

use common::snapshots;
use common::Rng;

/// Memory holding `bytes` at `base`.
struct Flat {
    base: u64,
    bytes: Vec<u8>,
}

impl Memory for Flat {
    fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        let Some(off) = addr
            .checked_sub(self.base)
            .and_then(|o| usize::try_from(o).ok())
        else {
            return 0;
        };
        let src = self.bytes.get(off..).unwrap_or(&[]);
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        n
    }
}

const BASE: u64 = 0xffff_8000_8000_0000;
const NOP: u32 = 0xD503_201F;

fn range(start: u64, end: u64, taken: bool) -> Element {
    Element::Range {
        start,
        end,
        count: ((end - start) / 4) as u32,
        last_size: 4,
        taken,
        branch: BranchType::None,
        conditional: false,
    }
}

/// Code: NOPs, with `bl .+0x100` at BASE + 0x20c.
fn code() -> Flat {
    let mut bytes = Vec::new();
    for i in 0..0x1000u64 {
        let w = if i * 4 == 0x20c { 0x9400_0040u32 } else { NOP };
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    Flat { base: BASE, bytes }
}

/// CPU 0 (panicked): two blocks ending in a `bl`; CPU 1: one block ending in a fall-through.
fn threads(mem: &Flat) -> Vec<Thread> {
    let r = Relocation::none();
    let word = |a: u64| {
        let mut b = [0u8; 4];
        (mem.read(a, &mut b) == 4).then(|| u32::from_le_bytes(b))
    };
    let mut b0 = Builder::new(&r, None);
    for e in [
        Element::NoSync,
        range(BASE + 0x100, BASE + 0x120, true),
        range(BASE + 0x200, BASE + 0x210, true),
    ] {
        b0.push(&e);
    }
    let mut b1 = Builder::new(&r, None);
    b1.push(&range(BASE + 0x400, BASE + 0x440, false));
    vec![
        Thread {
            cpu: 0,
            panic: true,
            trace: b0.finish(&word).unwrap(),
        },
        Thread {
            cpu: 1,
            panic: false,
            trace: b1.finish(&word).unwrap(),
        },
    ]
}

fn target<'a>(threads: &'a [Thread], mem: &'a Flat) -> Target<'a> {
    Target {
        threads,
        selected: 0,
        memory: mem,
        buffer_size: Some(0x10000),
        info: "CPU 0 (panic): test\n",
        libraries: None,
    }
}

/// The single reply to `p`.
fn ask(s: &mut Session<'_>, p: &str) -> String {
    match s.handle(p.as_bytes()) {
        Action::Reply(v) => {
            assert_eq!(v.len(), 1, "{p}: {v:?}");
            String::from_utf8(v[0].clone()).unwrap()
        }
        a => panic!("{p}: {a:?}"),
    }
}

fn le_hex(v: u64) -> String {
    String::from_utf8(rsp::hex(&v.to_le_bytes())).unwrap()
}

/// Reads a whole qXfer object through `len`-byte reads, as GDB does.
fn read_object(s: &mut Session<'_>, object: &str, annex: &str, len: usize) -> String {
    let mut out = Vec::new();
    loop {
        let r = ask(
            s,
            &format!("qXfer:{object}:read:{annex}:{:x},{len:x}", out.len()),
        );
        let (kind, data) = r.split_at(1);
        let data = rsp::unescape_binary(data.as_bytes());
        assert!(
            data.len() <= len,
            "{} bytes for a read of {len}",
            data.len()
        );
        out.extend_from_slice(&data);
        match kind {
            "l" => return String::from_utf8(out).unwrap(),
            "m" => assert!(!data.is_empty()),
            _ => panic!("qXfer {object}: {r}"),
        }
    }
}

#[test]
fn handshake_threads_and_registers() {
    let mem = code();
    let th = threads(&mem);
    let mut s = Session::new(target(&th, &mem));
    let sup = ask(
        &mut s,
        "qSupported:multiprocess+;swbreak+;xmlRegisters=i386",
    );
    for f in [
        "QStartNoAckMode+",
        "qXfer:features:read+",
        "qXfer:btrace:read+",
        "qXfer:btrace-conf:read+",
        "Qbtrace:bts+",
        "Qbtrace:off+",
    ] {
        assert!(sup.split(';').any(|x| x == f), "{f} not in {sup}");
    }
    assert!(sup.contains(&format!("PacketSize={:x}", rsp::MAX_PACKET)));
    assert_eq!(ask(&mut s, "vMustReplyEmpty"), "");
    assert!(!s.noack());
    assert_eq!(ask(&mut s, "QStartNoAckMode"), "OK");
    assert!(s.noack());
    let tdesc = read_object(&mut s, "features", "target.xml", 100);
    assert!(tdesc.contains("<architecture>aarch64</architecture>"));
    assert!(tdesc.contains("org.gnu.gdb.aarch64.core"));
    // The stop reply names the panicking CPU's thread and its PC (register 32).
    let pc0 = th[0].trace.pc;
    assert_eq!(pc0, BASE + 0x30c, "the target of the last bl");
    assert_eq!(
        ask(&mut s, "?"),
        format!("T05thread:1;core:0;20:{};", le_hex(pc0))
    );
    assert_eq!(ask(&mut s, "qfThreadInfo"), "m1,2");
    assert_eq!(ask(&mut s, "qsThreadInfo"), "l");
    assert_eq!(ask(&mut s, "qC"), "QC1");
    assert_eq!(ask(&mut s, "qAttached"), "1");
    let extra = ask(&mut s, "qThreadExtraInfo,1");
    assert_eq!(
        String::from_utf8(rsp::unhex(extra.as_bytes()).unwrap()).unwrap(),
        "CPU 0, panicked, 12 instructions traced"
    );
    // g: 31 x registers and sp unavailable, the PC, cpsr unavailable.
    let g = ask(&mut s, "g");
    assert_eq!(g.len(), 2 * (33 * 8 + 4));
    assert_eq!(&g[..32 * 16], "x".repeat(32 * 16));
    assert_eq!(&g[32 * 16..33 * 16], le_hex(pc0));
    assert_eq!(&g[33 * 16..], "xxxxxxxx");
    assert_eq!(ask(&mut s, "p20"), le_hex(pc0));
    assert_eq!(ask(&mut s, "p1f"), "x".repeat(16));
    assert_eq!(ask(&mut s, "p21"), "x".repeat(8));
    assert!(ask(&mut s, "p22").starts_with("E."));
    // Hg selects the thread that g, p and qXfer:btrace read.
    assert_eq!(ask(&mut s, "Hg2"), "OK");
    assert_eq!(ask(&mut s, "p20"), le_hex(BASE + 0x440));
    assert_eq!(ask(&mut s, "qC"), "QC2");
    assert!(ask(&mut s, "Hg7").starts_with("E."));
    assert_eq!(ask(&mut s, "Hg0"), "OK");
    assert_eq!(ask(&mut s, "Hgp1.2"), "OK");
    assert_eq!(ask(&mut s, "qC"), "QC2");
    assert_eq!(ask(&mut s, "Hc-1"), "OK");
    assert_eq!(ask(&mut s, "T1"), "OK");
    assert!(ask(&mut s, "T3").starts_with("E."));
    // The stop reply still names the panicking CPU.
    assert!(ask(&mut s, "?").starts_with("T05thread:1;"));
}

#[test]
fn memory_reads() {
    let mem = code();
    let th = threads(&mem);
    let mut s = Session::new(target(&th, &mem));
    assert_eq!(ask(&mut s, &format!("m{:x},4", BASE + 0x20c)), "40000094");
    // A read running past the end returns what there is.
    assert_eq!(ask(&mut s, &format!("m{:x},8", BASE + 0x3ffc)), "1f2003d5");
    assert_eq!(ask(&mut s, "m10,4"), "E0e");
    assert!(ask(&mut s, "mzz,4").starts_with("E."));
    assert!(ask(&mut s, "m10").starts_with("E."));
    // A huge length is cut to what a packet holds.
    let r = ask(&mut s, &format!("m{BASE:x},ffffffff"));
    assert_eq!(r.len(), 2 * 0x4000);
}

#[test]
fn branch_trace_exchange() {
    let mem = code();
    let th = threads(&mem);
    let mut s = Session::new(target(&th, &mem));
    // Off until GDB turns it on.
    let conf = read_object(&mut s, "btrace-conf", "", 0x1000);
    assert!(conf.contains("<btrace-conf version=\"1.0\">"));
    assert!(!conf.contains("<bts"));
    assert!(ask(&mut s, "qXfer:btrace:read:all:0,1000").starts_with("E."));
    assert!(ask(&mut s, "Qbtrace:pt").starts_with("E."));
    assert!(ask(&mut s, "Qbtrace:off").starts_with("E."));
    assert_eq!(ask(&mut s, "Qbtrace:bts"), "OK");
    assert!(ask(&mut s, "Qbtrace:bts").starts_with("E."));
    let conf = read_object(&mut s, "btrace-conf", "", 0x1000);
    assert!(conf.contains("<bts size=\"0x10000\"/>"), "{conf}");
    // GDB asks for a delta first: refused before the trace was read, then "new" is all of it.
    assert!(ask(&mut s, "qXfer:btrace:read:delta:0,1000").starts_with("E."));
    let all = read_object(&mut s, "btrace", "new", 40);
    let blocks: Vec<&str> = all.lines().filter(|l| l.starts_with("<block")).collect();
    assert_eq!(
        blocks,
        [
            format!(
                "<block begin=\"{:#x}\" end=\"{:#x}\"/>",
                BASE + 0x30c,
                BASE + 0x30c
            ),
            format!(
                "<block begin=\"{:#x}\" end=\"{:#x}\"/>",
                BASE + 0x200,
                BASE + 0x20c
            ),
            format!(
                "<block begin=\"{:#x}\" end=\"{:#x}\"/>",
                BASE + 0x100,
                BASE + 0x11c
            ),
        ]
    );
    assert!(all.contains("<btrace version=\"1.0\">"));
    // Read once, nothing is new and the delta is empty.
    for annex in ["new", "delta"] {
        let x = read_object(&mut s, "btrace", annex, 0x1000);
        assert!(
            x.contains("<btrace version=\"1.0\">") && !x.contains("<block"),
            "{x}"
        );
    }
    assert_eq!(read_object(&mut s, "btrace", "all", 0x1000), all);
    assert!(ask(&mut s, "qXfer:btrace:read:bogus:0,10").starts_with("E."));
    // Reading past the end is the end.
    assert_eq!(ask(&mut s, "qXfer:btrace:read:all:100000,10"), "l");
    // Per thread: CPU 1 is still off; after Qbtrace:off, CPU 0 is too.
    assert_eq!(ask(&mut s, "Hg2"), "OK");
    assert!(ask(&mut s, "qXfer:btrace:read:all:0,1000").starts_with("E."));
    assert_eq!(ask(&mut s, "Hg1"), "OK");
    assert_eq!(ask(&mut s, "Qbtrace:off"), "OK");
    assert!(ask(&mut s, "qXfer:btrace:read:all:0,1000").starts_with("E."));
}

#[test]
fn refuses_to_run_or_write() {
    let mem = code();
    let th = threads(&mem);
    let mut s = Session::new(target(&th, &mem));
    assert_eq!(ask(&mut s, "vCont?"), "vCont");
    for p in ["c", "s", "C05", "S05", "vCont;c", "vCont;s:1"] {
        match s.handle(p.as_bytes()) {
            Action::Reply(v) => {
                assert_eq!(v.len(), 2, "{p}");
                assert!(v[0].starts_with(b"O"), "{p}: console output first");
                let msg = rsp::unhex(&v[0][1..]).unwrap();
                assert!(String::from_utf8_lossy(&msg).contains("cannot run"));
                assert_eq!(v[1], b"E01");
            }
            a => panic!("{p}: {a:?}"),
        }
    }
    for p in ["M0,4:00000000", "X0,1:a", "P20=0000000000000000", "G00"] {
        assert!(ask(&mut s, p).starts_with("E."), "{p}");
    }
    for p in [
        "Z0,ffff800080000100,4",
        "z0,ffff800080000100,4",
        "vRun;",
        "!",
    ] {
        let r = ask(&mut s, p);
        assert!(r.is_empty() || r.starts_with("E."), "{p}: {r}");
    }
    // Unknown packets get the empty reply.
    assert_eq!(ask(&mut s, "qTStatus"), "");
    assert_eq!(ask(&mut s, "qfoo"), "");
    // The monitor prints the info, then OK.
    let hexcmd = String::from_utf8(rsp::hex(b"info")).unwrap();
    match s.handle(format!("qRcmd,{hexcmd}").as_bytes()) {
        Action::Reply(v) => {
            assert_eq!(v.last().unwrap(), b"OK");
            let text = rsp::unhex(&v[0][1..]).unwrap();
            assert_eq!(text, b"CPU 0 (panic): test\n");
        }
        a => panic!("{a:?}"),
    }
    assert!(ask(
        &mut s,
        &format!("qRcmd,{}", String::from_utf8(rsp::hex(b"reboot")).unwrap())
    )
    .starts_with("E."));
    assert_eq!(
        s.handle(b"D"),
        Action::ReplyAndEnd(vec![b"OK".to_vec()], End::Detached)
    );
    assert_eq!(s.handle(b"k"), Action::End(End::Killed));
    assert_eq!(
        s.handle(b"vKill;1"),
        Action::ReplyAndEnd(vec![b"OK".to_vec()], End::Killed)
    );
}

fn packet(p: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    rsp::write_packet(&mut v, p).unwrap();
    v
}

/// Runs `serve` on `input`; returns how it ended and what it wrote.
fn run(input: Vec<u8>) -> (Result<End, String>, Vec<u8>, String) {
    let mem = code();
    let th = threads(&mem);
    let mut out = Vec::new();
    let mut log = Vec::new();
    let r =
        serve(target(&th, &mem), Cursor::new(input), &mut out, &mut log).map_err(|e| e.to_string());
    (r, out, String::from_utf8_lossy(&log).into_owned())
}

#[test]
fn serve_acks_naks_and_ends() {
    // Ack mode: '+' before each reply; a '-' gets the last reply again.
    let mut input = b"+".to_vec();
    input.extend(packet(b"qC"));
    input.push(b'-');
    input.extend(packet(b"QStartNoAckMode"));
    input.push(b'+');
    input.extend(packet(b"?"));
    input.extend(packet(b"D"));
    input.extend(packet(b"g")); // never read: D ended the session
    let (r, out, log) = run(input);
    assert_eq!(r, Ok(End::Detached));
    assert!(log.is_empty(), "{log}");
    let qc = packet(b"QC1");
    let ok = packet(b"OK");
    let mut want = b"+".to_vec();
    want.extend(&qc);
    want.extend(&qc);
    want.push(b'+');
    want.extend(&ok);
    // No-ack from here on.
    want.extend(packet(
        format!("T05thread:1;core:0;20:{};", le_hex(BASE + 0x30c)).as_bytes(),
    ));
    want.extend(&ok);
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want)
    );

    // A bad checksum: '-' in ack mode, an error reply in no-ack mode; both logged.
    let mut input = b"$qC#00".to_vec();
    input.extend(packet(b"QStartNoAckMode"));
    input.extend(b"$qC#00");
    input.extend(packet(b"k"));
    let (r, out, log) = run(input);
    assert_eq!(r, Ok(End::Killed));
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("-+$OK#9a$E.bad packet: bad checksum"),
        "{out}"
    );
    assert_eq!(log.matches("bad checksum").count(), 2, "{log}");

    // The end of the stream between packets, and inside one.
    assert_eq!(run(packet(b"qC")).0, Ok(End::Disconnected));
    let (r, _, _) = run(b"$qSupported:multi".to_vec());
    assert!(r.unwrap_err().contains("ended inside a packet"));
}

/// A stream of packets GDB might send, some valid, some not.
fn seed_stream() -> Vec<u8> {
    let mut v = b"+".to_vec();
    for p in [
        &b"qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;xmlRegisters=i386"[..],
        b"vMustReplyEmpty",
        b"QStartNoAckMode",
        b"Hgp0.0",
        b"qXfer:features:read:target.xml:0,ffb",
        b"qTStatus",
        b"?",
        b"qfThreadInfo",
        b"qsThreadInfo",
        b"qAttached",
        b"Hc-1",
        b"qC",
        b"g",
        b"qXfer:btrace-conf:read::0,ffb",
        b"Hg2",
        b"Qbtrace:bts",
        b"qXfer:btrace:read:delta:0,ffb",
        b"qXfer:btrace:read:new:0,10",
        b"qXfer:btrace:read:all:10,20",
        b"mffff800080000200,40",
        b"p20",
        b"vCont?",
        b"vCont;s:1",
        b"Z0,ffff800080000200,4",
        b"M0,1:00",
        b"qRcmd,696e666f",
        b"qThreadExtraInfo,2",
    ] {
        v.extend(packet(p));
    }
    v
}

/// Runs `serve` on each input on another thread; fails if one panics or takes over `limit`.
fn serve_all(inputs: Vec<Vec<u8>>, limit: Duration) -> usize {
    let n = inputs.len();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (i, input) in inputs.into_iter().enumerate() {
            let started = Instant::now();
            let r = std::panic::catch_unwind(|| run(input));
            let _ = tx.send((i, r.is_ok(), started.elapsed()));
        }
    });
    let mut done = 0;
    let deadline = Instant::now() + limit;
    while done < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let (i, ok, took) = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the stub did not finish input {done} within {limit:?}"));
        assert!(ok, "the stub panicked on input {i}");
        assert!(took < Duration::from_secs(5), "input {i} took {took:?}");
        done += 1;
    }
    done
}

#[test]
fn fuzz_malformed_and_truncated_packets() {
    let mut rng = Rng(0x6db0_0019);
    let seed = seed_stream();
    // The seed itself is served to the end.
    let (r, out, _) = run(seed.clone());
    assert_eq!(r, Ok(End::Disconnected));
    assert!(out.len() > 1000);
    let specials = [b'$', b'#', b'}', b'*', b'+', b'-', 0x03, b':', b',', b';'];
    let mut inputs = Vec::new();
    for i in 0..4000 {
        let mut v = seed.clone();
        match i % 6 {
            // Truncated anywhere.
            0 => v.truncate(rng.below(v.len())),
            // Bytes flipped, frame characters sprinkled in.
            1 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(v.len());
                    v[at] = if rng.below(2) == 0 {
                        specials[rng.below(specials.len())]
                    } else {
                        rng.next() as u8
                    };
                }
            }
            // A random packet with a right checksum.
            2 => {
                let len = rng.below(64);
                let body: Vec<u8> = (0..len)
                    .map(|_| {
                        let c = b"qQvmMgGpPHTXxZz?cCsSkD:,;0123456789abcdef-"[rng.below(41)];
                        if rng.below(9) == 0 {
                            rng.next() as u8
                        } else {
                            c
                        }
                    })
                    .filter(|&c| c != b'$' && c != b'#')
                    .collect();
                let at = rng.below(v.len());
                let p = packet(&body);
                v.splice(at..at, p);
            }
            // Pure noise.
            3 => v = (0..rng.below(4096)).map(|_| rng.next() as u8).collect(),
            // Commands with hostile numbers.
            4 => {
                let p = [
                    &b"m0,ffffffffffffffff"[..],
                    b"mffffffffffffffff,ffffffffffffffff",
                    b"qXfer:btrace:read:all:ffffffffffffffff,ffffffffffffffff",
                    b"qXfer:features:read:target.xml:0,0",
                    b"qXfer:features:read:target.xml:0,1",
                    b"qXfer:btrace:read:all:0,1",
                    b"p ffffffffffffffff",
                    b"pffffffffffffffffff",
                    b"Hg-2",
                    b"Hgp.",
                    b"qThreadExtraInfo,",
                    b"qRcmd,zz",
                    b"qXfer::::",
                    b"qXfer:btrace:read:all:",
                ][rng.below(14)];
                let at = rng.below(v.len());
                v.splice(at..at, packet(p));
            }
            // An unterminated payload running into the end.
            _ => {
                v.extend(b"$qXfer:btrace:read:all:");
                v.extend((0..rng.below(100_000)).map(|_| b'a' + (rng.next() % 26) as u8));
            }
        }
        inputs.push(v);
    }
    // An oversized packet and one that never ends within the skip limit.
    let mut big = b"$".to_vec();
    big.resize(rsp::MAX_PACKET * 3, b'q');
    big.extend(b"#00");
    big.extend(packet(b"D"));
    let (r, _, log) = run(big.clone());
    assert_eq!(r, Ok(End::Detached));
    assert!(log.contains("longer than"), "{log}");
    inputs.push(big);
    let n = serve_all(inputs, Duration::from_secs(120));
    assert_eq!(n, 4001);
}

/// Runs the csdump binary with `args`, stdin empty; returns its exit code and stderr.
fn csdump(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, Vec<u8>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_csdump"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "csdump panicked: {err}");
    (out.status.code(), err, out.stdout)
}

#[test]
fn a_dump_without_vmlinux_or_trace_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // A committed region whose only source record is not an ETMv4 saved state.
    let region = tmp.path().join("region.bin");
    std::fs::write(&region, common::build_region(0x2000, 512).bytes).unwrap();
    let vmlinux = tmp.path().join("vmlinux");
    // The vmlinux of the region's kernel (its identity's build ID), with no code of interest.
    snapshots::write_elf_id(
        &[0u8; 0x2000],
        BASE,
        &vmlinux,
        &[0x5a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07],
    );
    let (code, err, out) = csdump(&["gdb".as_ref(), region.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a dump needs --vmlinux"), "{err}");
    assert!(out.is_empty());
    let (code, err, out) = csdump(&[
        "gdb".as_ref(),
        region.as_os_str(),
        "--vmlinux".as_ref(),
        vmlinux.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("csdump: error: no CPU has decoded trace to replay:"),
        "{err}"
    );
    // Nothing but the notifications GDB ignores, sent while decoding.
    let out = String::from_utf8_lossy(&out);
    assert!(!out.contains('$'), "{out}");
    // Usage errors.
    let (code, err, _) = csdump(&[
        "gdb".as_ref(),
        "--allow-remote".as_ref(),
        region.as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err, _) = csdump(&[
        "gdb".as_ref(),
        "--listen".as_ref(),
        "no-such-host.invalid:1".as_ref(),
        region.as_os_str(),
        "--vmlinux".as_ref(),
        vmlinux.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--listen no-such-host.invalid:1"), "{err}");
}

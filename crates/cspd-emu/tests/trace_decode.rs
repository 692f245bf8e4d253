//! The emulated ETM's trace, as the emulated TMC holds it, decoded by OpenCSD (`trc_pkt_lister`)
//! must give exactly the instruction ranges and exceptions a recorded execution went through.
//!
//! The execution comes from a small A64 "CPU" that walks hand-assembled code the way QEMU runs
//! it: translation blocks that end at branches, interrupts taken between blocks, a data abort in
//! the middle of a block, system calls, handlers that save `ELR_EL1` to the stack like the
//! kernel's exception entry and return with `ERET`. It feeds the [`Emu`] exactly what the plugin
//! feeds it (block executions, `mrs x22, elr_el1`, the stores while a register is watched), and
//! programs the components through the window with the drivers' own sequences (`cspd-hw`).
//! What it records of the execution is independent of the tracker and the encoder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use cspd_emu::a64::{self, Kind};
use cspd_emu::bus;
use cspd_emu::config::Config;
use cspd_emu::tracker::TbInfo;
use cspd_emu::{Emu, GuestMem};
use cspd_hw::access::RawFrame;
use cspd_hw::etm4x::{Etm4x, Interface, Timeout, TraceConfig};

const WINDOW: u64 = bus::DEFAULT_WINDOW_BASE;
const CODE: u64 = 0xFFFF_8000_1000_0000;
const VECTORS: u64 = CODE + 0x1000;
const SP_PA: u64 = 0x4800_0000;
const TRACE_ID: u8 = 0x10;
/// The conditional branch to the crash path, taken only when the test says so.
const CRASH_COND: u64 = CODE + 0x48;
/// The call of the crash function.
const CRASH_CALL: u64 = CODE + 0x60;
/// The crash function's entry.
const CRASH: u64 = CODE + 0x400;

// ---- guest memory and register access ------------------------------------------------------

#[derive(Default)]
struct Mem(Mutex<HashMap<u64, u32>>);

impl GuestMem for Mem {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        Some(*self.0.lock().unwrap().get(&(paddr & !3)).unwrap_or(&0))
    }
    fn write_u32(&self, paddr: u64, value: u32) {
        self.0.lock().unwrap().insert(paddr & !3, value);
    }
    fn read_u64(&self, paddr: u64) -> Option<u64> {
        Some(u64::from(self.read_u32(paddr)?) | (u64::from(self.read_u32(paddr + 4)?) << 32))
    }
    fn writable(&self, paddr: u64, len: u64) -> bool {
        // Guest RAM: the 1 GiB from 0x4000_0000.
        paddr >= 0x4000_0000 && paddr + len <= 0x8000_0000
    }
}

/// The guest's view of one component: a read returns the staged word, then the plugin hook runs.
struct Frame<'a> {
    emu: &'a Emu,
    mem: &'a Mem,
    base: u64,
}

impl RawFrame for Frame<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        let pa = self.base + u64::from(offset);
        let v = self.mem.read_u32(pa).unwrap();
        assert!(self.emu.mmio(0, pa, 4, false));
        v
    }
    fn write32(&mut self, offset: u32, value: u32) {
        let pa = self.base + u64::from(offset);
        self.mem.write_u32(pa, value);
        assert!(self.emu.mmio(0, pa, 4, true));
    }
    fn delay_us(&mut self, _us: u32) {}
}

fn frame<'a>(emu: &'a Emu, mem: &'a Mem, off: u64) -> Frame<'a> {
    Frame {
        emu,
        mem,
        base: WINDOW + off,
    }
}

// ---- a small assembler ----------------------------------------------------------------------

const NOP: u32 = 0xD503_201F;
const RET: u32 = 0xD65F_03C0;
const ERET: u32 = 0xD69F_03E0;
const ISB: u32 = 0xD503_3FDF;
/// Not a P0 element on an ETMv4.0 (`TRCIDR2.WFXMODE` = 0).
const WFI: u32 = 0xD503_207F;
const SVC0: u32 = 0xD400_0001;
const LDR_X1_X2: u32 = 0xF940_0041;
const MRS_X22_ELR: u32 = 0xD538_4036;
/// `stp x22, x23, [sp, #0x100]`.
const STP_X22_X23_SP: u32 = 0xA910_5FF6;

fn off(from: u64, to: u64) -> u32 {
    ((to.wrapping_sub(from) as i64) / 4) as u32
}
fn b(from: u64, to: u64) -> u32 {
    0x1400_0000 | (off(from, to) & 0x03FF_FFFF)
}
fn bl(from: u64, to: u64) -> u32 {
    0x8000_0000 | b(from, to)
}
fn b_cond(from: u64, to: u64, cond: u32) -> u32 {
    0x5400_0000 | ((off(from, to) & 0x7_FFFF) << 5) | cond
}
fn cbnz(from: u64, to: u64) -> u32 {
    0xB500_0000 | ((off(from, to) & 0x7_FFFF) << 5) | 2
}
fn tbz(from: u64, to: u64) -> u32 {
    0x3600_0000 | (5 << 19) | ((off(from, to) & 0x3FFF) << 5) | 3
}
fn blr(rn: u32) -> u32 {
    0xD63F_0000 | (rn << 5)
}
fn br(rn: u32) -> u32 {
    0xD61F_0000 | (rn << 5)
}

struct Program {
    words: Vec<u32>,
    /// Targets of `blr x8` and of `br x9`.
    calls: [u64; 2],
    jumps: [u64; 2],
}

fn program() -> Program {
    let mut w = vec![NOP; 0x1800 / 4];
    let mut put = |o: u64, i: u32| w[(o / 4) as usize] = i;
    let a = |o: u64| CODE + o;
    // main
    put(0x04, LDR_X1_X2);
    put(0x08, b_cond(a(0x08), a(0x30), 0x0));
    put(0x0C, bl(a(0x0C), a(0x100)));
    put(0x10, cbnz(a(0x10), a(0x00)));
    put(0x14, blr(8));
    put(0x18, SVC0);
    put(0x1C, tbz(a(0x1C), a(0x28)));
    put(0x20, br(9));
    put(0x28, ISB);
    put(0x2C, b(a(0x2C), a(0x00)));
    put(0x30, b_cond(a(0x30), a(0x00), 0xB));
    put(0x34, b(a(0x34), a(0x00)));
    put(0x40, WFI);
    put(0x44, LDR_X1_X2);
    // Taken only when the test says the crash begins (CRASH_COND).
    put(0x48, cbnz(a(0x48), a(0x60)));
    put(0x4C, b(a(0x4C), a(0x300)));
    put(0x60, bl(a(0x60), a(0x400)));
    put(0x64, b(a(0x64), a(0x00)));
    // func_a
    put(0x104, b_cond(a(0x104), a(0x10C), 0x1));
    put(0x10C, RET);
    // func_b
    put(0x204, bl(a(0x204), a(0x100)));
    put(0x208, RET);
    // far
    put(0x304, b(a(0x304), a(0x00)));
    // crash: where a crash path begins (the stop point of the ViewInst tests), then more
    // execution that must not be traced.
    put(0x408, bl(a(0x408), a(0x200)));
    put(0x40C, b(a(0x40C), a(0x00)));
    // Vectors: synchronous (current EL, SPx) and IRQ. The IRQ handler calls a function before
    // it saves ELR_EL1, so blocks queue up behind the exception.
    for (o, call) in [(0x200u64, false), (0x280, true)] {
        let v = 0x1000 + o;
        let mut i = v;
        if call {
            put(i, bl(a(i), a(0x200)));
            i += 4;
        }
        put(i, MRS_X22_ELR);
        put(i + 4, NOP);
        put(i + 8, STP_X22_X23_SP);
        put(i + 12, ERET);
    }
    Program {
        words: w,
        calls: [a(0x100), a(0x200)],
        jumps: [a(0x00), a(0x40)],
    }
}

impl Program {
    fn word(&self, addr: u64) -> u32 {
        self.words[((addr - CODE) / 4) as usize]
    }
    fn bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

// ---- the CPU ------------------------------------------------------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// What a decoder should report: an instruction range `[start, end)` of `n` instructions whose
/// last was taken (E) or not (N), or an exception with its preferred return address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    Range {
        start: u64,
        end: u64,
        n: u64,
        taken: bool,
    },
    Exception {
        ret: u64,
    },
}

struct Cpu<'a> {
    prog: &'a Program,
    emu: &'a Emu,
    mem: &'a Mem,
    rng: Rng,
    pc: u64,
    stack: Vec<u64>,
    elr: u64,
    in_handler: bool,
    /// Start of the range the next P0 element ends.
    range_start: u64,
    expected: Vec<Elem>,
    /// The ground truth the plugin should keep: (kind, from, to).
    truth: Vec<(&'static str, u64, u64)>,
    blocks: HashMap<u64, &'static TbInfo>,
    branches: u64,
    exceptions: u64,
    /// The trace unit is enabled: ViewInst is evaluated for each executed instruction.
    tracing: bool,
    /// The ViewInst start/stop programming, `None` for the default (SSSTATUS set, no
    /// comparators: everything traced).
    view: Option<ModelView>,
    /// ViewInst was active for the last executed instruction, and nothing broke the flow a
    /// decoder follows since.
    last_active: bool,
    /// ViewInst was active for some instruction.
    ever_active: bool,
    /// Times ViewInst became active again after being inactive.
    restarts: u64,
    /// Branches executed while ViewInst was inactive.
    untraced_branches: u64,
    /// The next execution of the branch at `CRASH_COND` is taken.
    crash_now: bool,
}

/// ViewInst start/stop as IHI 0064 states it, applied to the instructions as they execute: the
/// start/stop logic is active for an instruction which causes a start and remains active up to
/// and including an instruction which causes a stop.
struct ModelView {
    start: Vec<u64>,
    stop: Vec<u64>,
    /// Include ranges, bounds inclusive (none: everything).
    include: Vec<(u64, u64)>,
    started: bool,
    /// The stop points that stopped the logic, in order.
    stops: Vec<u64>,
}

impl Cpu<'_> {
    /// The block QEMU would translate at `pc`: up to the first instruction that ends one.
    fn block(&mut self, pc: u64) -> &'static TbInfo {
        if let Some(b) = self.blocks.get(&pc) {
            return b;
        }
        let mut words = Vec::new();
        let mut a = pc;
        loop {
            let w = self.prog.word(a);
            words.push(w);
            let k = a64::kind(a, w);
            if k != Kind::Other || words.len() == 12 {
                break;
            }
            a += 4;
        }
        let tb: &'static TbInfo = Box::leak(Box::new(TbInfo::new(pc, &words).unwrap()));
        self.blocks.insert(pc, tb);
        tb
    }

    fn range_to(&mut self, end: u64, taken: bool) {
        let n = (end - self.range_start) / 4;
        self.expected.push(Elem::Range {
            start: self.range_start,
            end,
            n,
            taken,
        });
    }

    /// The instruction at `a` executes: returns whether ViewInst is active for it.
    fn exec_insn(&mut self, a: u64) -> bool {
        if !self.tracing {
            return false;
        }
        let active = match self.view.as_mut() {
            None => true,
            Some(v) => {
                let start = v.start.contains(&a);
                let stop = v.stop.contains(&a);
                let ss_active = v.started || start;
                if stop {
                    if ss_active {
                        v.stops.push(a);
                    }
                    v.started = false;
                } else if start {
                    v.started = true;
                }
                ss_active
                    && (v.include.is_empty()
                        || v.include.iter().any(|&(lo, hi)| a >= lo && a <= hi))
            }
        };
        if active && !self.last_active {
            // Trace On: the decoder's ranges start again here.
            self.range_start = a;
            if self.ever_active {
                self.restarts += 1;
            }
            self.ever_active = true;
        }
        self.last_active = active;
        active
    }

    fn started(&self) -> bool {
        self.view.as_ref().is_none_or(|v| v.started)
    }

    /// An exception after the last executed instruction: traced when ViewInst was active for
    /// that instruction and the start/stop logic is still started.
    fn exception(&mut self, ret: u64, vector: u64) {
        if self.last_active && self.started() {
            if ret != self.range_start {
                self.range_to(ret, true);
            }
            self.expected.push(Elem::Exception { ret });
            self.truth.push(("exception", ret, vector));
        } else {
            self.last_active = false;
        }
        self.exceptions += 1;
        self.elr = ret;
        self.in_handler = true;
        self.pc = vector;
        self.range_start = vector;
    }

    /// Runs one block (or takes an interrupt instead).
    fn step(&mut self) {
        if !self.in_handler && self.rng.one_in(9) {
            let pc = self.pc;
            self.exception(pc, VECTORS + 0x280);
        }
        let tb = self.block(self.pc);
        self.emu.tb_exec(0, tb);
        let mut a = tb.start;
        loop {
            let w = self.prog.word(a);
            match a64::kind(a, w) {
                Kind::Other => {
                    if w == LDR_X1_X2 && !self.in_handler && self.rng.one_in(5) {
                        // A data abort: the load does not complete; the block ends here.
                        self.exception(a, VECTORS + 0x200);
                        return;
                    }
                    self.exec_insn(a);
                    if w == MRS_X22_ELR {
                        self.emu.mrs_elr(0, 22);
                    }
                    if w == STP_X22_X23_SP {
                        let pa = SP_PA + 0x100;
                        let regs = a64::stored_regs(w);
                        self.mem.write_u32(pa, self.elr as u32);
                        self.mem.write_u32(pa + 4, (self.elr >> 32) as u32);
                        if self.emu.watching_stores(0) {
                            self.emu.stored(0, regs, pa);
                        }
                        self.mem.write_u32(pa + 8, 0x2323);
                        if self.emu.watching_stores(0) {
                            self.emu.stored(0, regs, pa + 8);
                        }
                    }
                    if a == tb.last_addr {
                        self.pc = a + 4;
                        return;
                    }
                    a += 4;
                }
                Kind::Call => {
                    self.exec_insn(a);
                    self.exception(a + 4, VECTORS + 0x200);
                    return;
                }
                Kind::Breakpoint => unreachable!(),
                k => {
                    let active = self.exec_insn(a);
                    self.branches += 1;
                    let (taken, next) = match k {
                        Kind::Direct { link, target } => {
                            if link {
                                self.stack.push(a + 4);
                            }
                            (true, target)
                        }
                        Kind::Cond { target } if a == CRASH_COND => {
                            let t = std::mem::take(&mut self.crash_now);
                            (t, if t { target } else { a + 4 })
                        }
                        Kind::Cond { target } => {
                            let t = self.rng.one_in(3);
                            (t, if t { target } else { a + 4 })
                        }
                        Kind::Indirect { link: true } => {
                            self.stack.push(a + 4);
                            (true, self.prog.calls[(self.rng.next() % 2) as usize])
                        }
                        Kind::Indirect { link: false } if w == RET => {
                            (true, self.stack.pop().unwrap())
                        }
                        Kind::Indirect { link: false } => {
                            (true, self.prog.jumps[(self.rng.next() % 2) as usize])
                        }
                        Kind::Eret => {
                            self.in_handler = false;
                            (true, self.elr)
                        }
                        Kind::Waypoint => (true, a + 4),
                        _ => unreachable!(),
                    };
                    let kind = match (k, taken) {
                        (Kind::Waypoint, _) => "waypoint",
                        (_, true) => "taken",
                        (_, false) => "not-taken",
                    };
                    if active {
                        self.range_to(a + 4, taken);
                        self.truth.push((kind, a, next));
                    } else if self.tracing {
                        self.untraced_branches += 1;
                    }
                    self.pc = next;
                    self.range_start = next;
                    return;
                }
            }
        }
    }
}

// ---- OpenCSD -----------------------------------------------------------------------------

fn trc_pkt_lister() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("trc_pkt_lister"))
        .find(|p| p.is_file())
        .expect("trc_pkt_lister is missing: scripts/setup.sh installs it (Debian libopencsd-bin)")
}

fn write_snapshot(dir: &Path, code: &[u8], trace: &[u8], regs: &[(String, u32)]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let w = |name: &str, s: String| std::fs::write(dir.join(name), s).unwrap();
    w(
        "snapshot.ini",
        "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu_0.ini\ndevice1=etm_0.ini\n\n[trace]\nmetadata=trace.ini\n".into(),
    );
    w(
        "cpu_0.ini",
        format!(
            "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A57\n\n[regs]\nPC(size:64)=0x{CODE:X}\nSP(size:64)=0\nSCTLR_EL1=0x1007\nCPSR=0x1C5\n\n[dump1]\nfile=code.bin\naddress=0x{CODE:X}\nlength=0x{:X}\n",
            code.len()
        ),
    );
    let mut etm = String::from("[device]\nname=ETM_0\nclass=trace_source\ntype=ETM4\n\n[regs]\n");
    for (name, v) in regs {
        etm.push_str(&format!("{name}=0x{v:08X}\n"));
    }
    w("etm_0.ini", etm);
    w(
        "trace.ini",
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=trace.bin\nformat=coresight\n\n[source_buffers]\nETM_0=ETB_0\n\n[core_trace_sources]\ncpu_0=ETM_0\n".into(),
    );
    std::fs::write(dir.join("code.bin"), code).unwrap();
    std::fs::write(dir.join("trace.bin"), trace).unwrap();
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap()
}

fn decode(dir: &Path) -> (Vec<Elem>, String) {
    let out = Command::new(trc_pkt_lister())
        .arg("-ss_dir")
        .arg(dir)
        .arg("-decode")
        .arg("-logstdout")
        .output()
        .expect("run trc_pkt_lister");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut elems = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line
            .split("OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=")
            .nth(1)
        {
            let (start, rest) = rest.split_once(":[").unwrap();
            let (end, rest) = rest.split_once(']').unwrap();
            let n = rest
                .split("num_i(")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap();
            let taken = rest.split("(ISA=A64) ").nth(1).unwrap().starts_with('E');
            elems.push(Elem::Range {
                start: hex(start),
                end: hex(end),
                n: n.parse().unwrap(),
                taken,
            });
        } else if let Some(rest) = line.split("OCSD_GEN_TRC_ELEM_EXCEPTION(").nth(1) {
            let ret = rest.split("pref ret addr:").nth(1).expect(line);
            let ret = ret.split([';', ' ', ')']).next().unwrap();
            elems.push(Elem::Exception { ret: hex(ret) });
        }
    }
    (elems, text)
}

// ---- the run --------------------------------------------------------------------------------

struct Run {
    expected: Vec<Elem>,
    decoded: Vec<Elem>,
    text: String,
    branches: u64,
    exceptions: u64,
    wrapped: bool,
    truth_events: usize,
    /// The plugin's truth of CPU 0.
    truth: serde_json::Value,
    /// The last traced events of the execution: (kind, from, to).
    executed_truth: Vec<(String, u64, u64)>,
    /// `TRCVICTLR` read once the unit was disabled and idle.
    victlr_after: u32,
    /// Times ViewInst became active again.
    restarts: u64,
    /// Branches executed while the unit was enabled but ViewInst inactive.
    untraced_branches: u64,
    /// The stop points that stopped the start/stop logic (the execution's record).
    stops: Vec<u64>,
    /// The plugin's log events of the run.
    events: Vec<String>,
}

/// The ViewInst programming of a run, as the kernel's driver would write it.
#[derive(Clone, Default)]
struct ViewSetup {
    /// Start points (single address comparators 0..).
    start: Vec<u64>,
    /// Stop points (the comparators after the start points).
    stop: Vec<u64>,
    /// Include ranges (address range comparator pair 3, then 2).
    include: Vec<(u64, u64)>,
    /// `TRCVICTLR.SSSTATUS`.
    started: bool,
    /// `TRCACATRn` of every comparator.
    acatr: u32,
    /// The stop points are programmed by the kernel driver's own configuration
    /// (`TraceConfig::with_stop_points`), not written here.
    by_driver: bool,
}

/// `TRCACATRn` as the C driver programs it for a kernel not in hypervisor mode: every Secure
/// level and Non-secure EL2 excluded.
const ACATR_KERNEL: u32 = (0xB << 8) | (0x4 << 12);

struct Setup {
    name: &'static str,
    blocks: usize,
    tmc_size: usize,
    seed: u64,
    view: Option<ViewSetup>,
    /// The crash path is taken once this many blocks ran with the trace unit enabled.
    crash_after: Option<usize>,
    /// A TMC-ETR with a flat buffer of this many bytes in guest memory at this address,
    /// instead of the ETF.
    etr: Option<(u64, u32)>,
    /// The plugin's `mark=` address.
    mark: Option<u64>,
}

impl Setup {
    fn new(name: &'static str, blocks: usize, tmc_size: usize, seed: u64) -> Self {
        Setup {
            name,
            blocks,
            tmc_size,
            seed,
            view: None,
            crash_after: None,
            etr: None,
            mark: None,
        }
    }
}

/// A 64-bit store to the window, as `writeq` in the C driver's `etm4x_relaxed_write64`.
fn write64(emu: &Emu, mem: &Mem, off: u64, value: u64) {
    let pa = WINDOW + off;
    mem.write_u32(pa, value as u32);
    mem.write_u32(pa + 4, (value >> 32) as u32);
    assert!(emu.mmio(0, pa, 8, true));
}

fn run(name: &'static str, blocks: usize, tmc_size: usize, seed: u64) -> Run {
    run_setup(Setup::new(name, blocks, tmc_size, seed))
}

fn run_setup(setup: Setup) -> Run {
    let Setup {
        name,
        blocks,
        tmc_size,
        seed,
        ..
    } = setup;
    let prog = program();
    let mem = Mem::default();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("emu_trace_decode")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let truth_file = dir.with_extension("truth.json");
    let mut args = vec![
        format!("tmc_size={tmc_size}"),
        if setup.etr.is_some() {
            "tmc=etr"
        } else {
            "tmc=etf"
        }
        .to_string(),
        "cpus=1".to_string(),
        format!("truth={}", truth_file.display()),
        format!("tmc_dump={}", dir.with_extension("tmc.bin").display()),
    ];
    args.extend(setup.mark.map(|m| format!("mark={m:#x}")));
    let cfg = Config::parse(args.iter().map(String::as_str)).unwrap();
    let emu = Emu::new(cfg, 1, Box::new(MemRef(&mem as *const Mem))).unwrap();

    // Vector tables are learnt from exceptions seen before trace starts, as at boot.
    let mut cpu = Cpu {
        prog: &prog,
        emu: &emu,
        mem: &mem,
        rng: Rng(seed),
        pc: CODE,
        stack: Vec::new(),
        elr: 0,
        in_handler: false,
        range_start: CODE,
        expected: Vec::new(),
        truth: Vec::new(),
        blocks: HashMap::new(),
        branches: 0,
        exceptions: 0,
        tracing: false,
        view: None,
        last_active: false,
        ever_active: false,
        restarts: 0,
        untraced_branches: 0,
        crash_now: false,
    };
    for _ in 0..300 {
        cpu.step();
    }

    // The sink and the funnel port, then the source, as the drivers program them.
    match setup.etr {
        None => cspd_hw::tmc::enable_circular(&mut frame(&emu, &mem, bus::TMC_OFFSET), 0).unwrap(),
        Some((dba, size)) => etr_enable(&mut frame(&emu, &mem, bus::TMC_OFFSET), dba, size),
    }
    {
        let mut f = frame(&emu, &mem, bus::FUNNEL_OFFSET);
        f.write32(0xFB0, 0xC5AC_CE55);
        f.write32(0x000, 0x301);
    }
    let mut vissctlr = 0;
    let mut viiectlr = 0;
    if let Some(v) = setup.view.as_ref().filter(|v| !v.by_driver) {
        // The comparators, while the unit is idle, with 64-bit stores.
        let mut f = frame(&emu, &mem, bus::ETM_OFFSET);
        f.write32(0xFB0, 0xC5AC_CE55);
        f.write32(0x300, 0);
        for (n, (&addr, is_start)) in v
            .start
            .iter()
            .map(|a| (a, true))
            .chain(v.stop.iter().map(|a| (a, false)))
            .enumerate()
        {
            let n = n as u64;
            write64(&emu, &mem, bus::ETM_OFFSET + 0x400 + 8 * n, addr);
            write64(
                &emu,
                &mem,
                bus::ETM_OFFSET + 0x480 + 8 * n,
                u64::from(v.acatr),
            );
            vissctlr |= 1 << (n + if is_start { 0 } else { 16 });
        }
        for (i, &(lo, hi)) in v.include.iter().enumerate() {
            let pair = 3 - i as u64;
            write64(&emu, &mem, bus::ETM_OFFSET + 0x400 + 16 * pair, lo);
            write64(&emu, &mem, bus::ETM_OFFSET + 0x408 + 16 * pair, hi);
            write64(
                &emu,
                &mem,
                bus::ETM_OFFSET + 0x480 + 16 * pair,
                u64::from(v.acatr),
            );
            write64(
                &emu,
                &mem,
                bus::ETM_OFFSET + 0x488 + 16 * pair,
                u64::from(v.acatr),
            );
            viiectlr |= 1 << pair;
        }
    }
    let saved = {
        let mut f = frame(&emu, &mem, bus::ETM_OFFSET);
        let mut etm = Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT);
        let ids = etm.read_ids().unwrap();
        let mut tc = TraceConfig::default_for(&ids, TRACE_ID, false).unwrap();
        if let Some(v) = setup.view.as_ref().filter(|v| v.by_driver) {
            let (with_stops, left) = tc.with_stop_points(&ids, &v.stop, false);
            assert_eq!(left, 0);
            assert_eq!(with_stops.acatr, v.acatr);
            tc = with_stops;
        } else if let Some(v) = setup.view.as_ref() {
            tc.victlr = (tc.victlr & !(1 << 9)) | if v.started { 1 << 9 } else { 0 };
            tc.vissctlr = vissctlr;
            tc.viiectlr = viiectlr;
        }
        etm.enable(&tc).unwrap();
        ids
    };
    // Trace starts at the next block; what ran before is not expected.
    cpu.expected.clear();
    cpu.truth.clear();
    cpu.range_start = cpu.pc;
    cpu.branches = 0;
    cpu.exceptions = 0;
    cpu.tracing = true;
    cpu.view = setup.view.as_ref().map(|v| {
        // All the code runs at Non-secure EL1: a comparator whose TRCACATR.EXLEVEL_NS excludes
        // EL1 matches none of it.
        let at_el1 = |a: &Vec<u64>| {
            if v.acatr & (1 << 13) != 0 {
                vec![]
            } else {
                a.clone()
            }
        };
        ModelView {
            start: at_el1(&v.start),
            stop: at_el1(&v.stop),
            include: v.include.clone(),
            started: v.started,
            stops: Vec::new(),
        }
    });
    // A block boundary where no exception is pending, so the expectation starts clean.
    for i in 0..blocks {
        if setup.crash_after == Some(i) {
            cpu.crash_now = true;
        }
        cpu.step();
    }
    assert!(!cpu.crash_now, "{name}: the crash path never ran");
    while cpu.in_handler {
        cpu.step();
    }
    // The driver's code that stops the trace unit runs in the next block: its start shows how
    // the last one ended, and nothing after it is a complete range.
    let last = cpu.block(cpu.pc);
    emu.tb_exec(0, last);
    let (save, victlr_after) = {
        let mut f = frame(&emu, &mem, bus::ETM_OFFSET);
        let mut etm = Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT);
        let save = etm.panic_save(0);
        (save, f.read32(0x080))
    };
    assert!(save.regs_valid(), "{save:?}");
    // Drain the TMC as the panic path does.
    let (data, wrapped) = match setup.etr {
        None => {
            let rsz = tmc_size / 4;
            let mut slot = vec![0u8; cspd_hw::tmc::TmcRecord::slot_len_for(rsz as u32).unwrap()];
            let summary =
                cspd_hw::tmc::panic_drain(&mut frame(&emu, &mem, bus::TMC_OFFSET), &mut slot)
                    .unwrap();
            let (hdr, data) = cspd_hw::tmc::TmcRecord::parse(&slot[..summary.record_len]).unwrap();
            (data.to_vec(), hdr.sts & 1 != 0)
        }
        Some(_) => etr_crash_data(&mut frame(&emu, &mem, bus::TMC_OFFSET), &mem),
    };
    let data = &data[..];
    // The plugin wrote the trace memory as a drain reads it when capture stopped.
    let held = std::fs::read(dir.with_extension("tmc.bin")).unwrap();
    if !wrapped {
        assert!(
            held == data,
            "{name}: the drained trace is not what the TMC memory held"
        );
    } else {
        // A wrapped buffer: the driver wrote the barrier packet over the first frame.
        assert_eq!(
            &held[16..],
            &data[16..],
            "{name}: the wrapped buffer from its oldest frame"
        );
        assert_eq!(
            &data[..16],
            &[0xFF, 0xFF, 0xFF, 0x7F].repeat(4)[..],
            "barrier packet"
        );
    }
    let size = setup.etr.map_or(tmc_size, |(_, size)| size as usize);
    assert_eq!(held.len(), if wrapped { size } else { data.len() });
    let events = emu.take_events();
    assert!(
        events.iter().any(|e| e.starts_with("tmc stopped: ")),
        "{events:?}"
    );
    // Every milestone carries the counters a benchmark takes differences of.
    let stats = emu.exit();
    assert!(
        stats.accesses.tmc > 0 && stats.accesses.funnel > 0 && stats.accesses.etm > 0,
        "{stats:?}"
    );
    assert_eq!(stats.accesses.debug, 0);
    assert_eq!(stats.trace_bytes_by_cpu[0], stats.trace_bytes);
    let tmc_stop = events
        .iter()
        .find(|e| e.starts_with("tmc stopped: "))
        .unwrap();
    // Nothing reaches the TMC after it stopped; the drain's accesses come after the event.
    assert!(
        tmc_stop.contains(" [counters: accesses tmc=")
            && tmc_stop.ends_with(&format!(
                "debug=0; trace bytes {} by cpu {}]",
                stats.trace_bytes, stats.trace_bytes
            )),
        "{tmc_stop}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("etm 0: enabled, trace id 0x10")),
        "{events:?}"
    );

    let regs = vec![
        ("TRCCONFIGR(0x004)".to_string(), save.trcconfigr),
        ("TRCTRACEIDR(0x010)".to_string(), save.trctraceidr),
        ("TRCAUTHSTATUS(0x3EE)".to_string(), save.authstatus),
        ("TRCIDR0(0x078)".to_string(), saved.idr(0)),
        ("TRCIDR1(0x079)".to_string(), saved.idr(1)),
        ("TRCIDR2(0x07A)".to_string(), saved.idr(2)),
        ("TRCIDR8(0x060)".to_string(), saved.idr(8)),
        ("TRCIDR9(0x061)".to_string(), saved.idr(9)),
        ("TRCIDR10(0x062)".to_string(), saved.idr(10)),
        ("TRCIDR11(0x063)".to_string(), saved.idr(11)),
        ("TRCIDR12(0x064)".to_string(), saved.idr(12)),
        ("TRCIDR13(0x065)".to_string(), saved.idr(13)),
    ];
    write_snapshot(&dir, &prog.bytes(), data, &regs);
    let (decoded, text) = decode(&dir);
    // The ground truth the plugin wrote when the trace unit stopped: the traced events of the
    // execution, and a gap where ViewInst became active again.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&truth_file).unwrap()).unwrap();
    let cpu0 = json["cpus"][0].clone();
    assert_eq!(cpu0["reason"], "stopped");
    let all: Vec<(String, u64, u64)> = cpu0["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                hex(e["from"].as_str().unwrap()),
                hex(e["to"].as_str().unwrap()),
            )
        })
        .collect();
    let truth: Vec<(String, u64, u64)> = all.iter().filter(|e| e.0 != "gap").cloned().collect();
    let want: Vec<(String, u64, u64)> = cpu.truth[cpu.truth.len().saturating_sub(truth.len())..]
        .iter()
        .map(|(k, f, t)| (k.to_string(), *f, *t))
        .collect();
    assert_eq!(
        cpu0["total"].as_u64().unwrap(),
        cpu.truth.len() as u64 + cpu.restarts,
        "{name}: truth total: every traced event, and a gap for every restart"
    );
    assert_eq!(
        all.len(),
        4096.min(cpu.truth.len() + cpu.restarts as usize),
        "truth depth"
    );
    assert!(
        truth == want,
        "{name}: the ground truth is not the execution: first difference at {}",
        first_difference_by(&truth, &want)
    );
    let truth_events = truth.len();
    Run {
        expected: cpu.expected,
        decoded,
        text,
        branches: cpu.branches,
        exceptions: cpu.exceptions,
        wrapped,
        truth_events,
        truth: cpu0,
        executed_truth: want,
        victlr_after,
        restarts: cpu.restarts,
        untraced_branches: cpu.untraced_branches,
        stops: cpu.view.map(|v| v.stops).unwrap_or_default(),
        events,
    }
}

/// `__tmc_etr_enable_hw` of `linux` for a flat buffer of `size` bytes at `dba`, after the
/// claim: RSZ, MODE, AXICTL, DBA, FFCR, TRG, CTL.
fn etr_enable(f: &mut Frame<'_>, dba: u64, size: u32) {
    f.write32(0xFB0, 0xC5AC_CE55);
    assert_ne!(f.read32(0x00C) & 4, 0, "TMCReady");
    f.write32(0x004, size / 4);
    f.write32(0x028, 0);
    let axictl = (f.read32(0x110) & !0xFBF) | (1 << 1) | (0xF << 8) | (0xF << 2);
    f.write32(0x110, axictl);
    f.write32(0x118, dba as u32);
    f.write32(0x11C, (dba >> 32) as u32);
    f.write32(0x304, 0x1 | 0x2 | 0x10 | 0x20 | 0x100);
    f.write32(0x01C, 0);
    f.write32(0x020, 1);
}

/// What the crash-data path of `linux` makes of the ETR at panic and after it:
/// `tmc_panic_sync_etr` (flush and stop unless FtStopped, TMCReady, then RSZ, STS, RRP, RWP and
/// DBA), then `tmc_prepare_crashdata` (the data from `RRP - DBA`, `RSZ` words when full, else
/// `RWP - RRP` bytes; a barrier packet over the first 16 bytes when full), read in order.
/// Returns the data and whether the buffer wrapped.
fn etr_crash_data(f: &mut Frame<'_>, mem: &Mem) -> (Vec<u8>, bool) {
    assert_eq!(f.read32(0x020) & 1, 1, "capture enabled");
    if f.read32(0x300) & 2 == 0 {
        let ffcr = f.read32(0x304) | (1 << 12);
        f.write32(0x304, ffcr);
        f.write32(0x304, ffcr | (1 << 6));
        assert!(
            (0..100).any(|_| f.read32(0x304) & (1 << 6) == 0),
            "flush completes"
        );
    }
    assert!((0..100).any(|_| f.read32(0x00C) & 4 != 0), "TMCReady");
    let pair = |f: &mut Frame<'_>, lo: u32, hi: u32| {
        u64::from(f.read32(lo)) | (u64::from(f.read32(hi)) << 32)
    };
    let size = u64::from(f.read32(0x004)) * 4;
    let sts = f.read32(0x00C);
    let rrp = pair(f, 0x014, 0x038);
    let rwp = pair(f, 0x018, 0x03C);
    let dba = pair(f, 0x118, 0x11C);
    f.write32(0x020, 0);
    assert_eq!(sts & (1 << 5), 0, "no memory error");
    let full = sts & 1 != 0;
    let offset = rrp - dba;
    let len = if full { size } else { rwp - rrp };
    let mut data: Vec<u8> = (0..len / 4)
        .flat_map(|i| {
            let a = dba + (offset + 4 * i) % size;
            mem.read_u32(a).unwrap().to_le_bytes()
        })
        .collect();
    if full {
        data[..16].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0x7F].repeat(4));
    }
    (data, full)
}

/// `*const Mem` that outlives the `Emu` in `run`.
struct MemRef(*const Mem);
// SAFETY: the `Mem` is behind a mutex and outlives every use in `run`.
unsafe impl Send for MemRef {}
// SAFETY: as above.
unsafe impl Sync for MemRef {}
impl GuestMem for MemRef {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        // SAFETY: see the type.
        unsafe { &*self.0 }.read_u32(paddr)
    }
    fn write_u32(&self, paddr: u64, value: u32) {
        // SAFETY: see the type.
        unsafe { &*self.0 }.write_u32(paddr, value)
    }
    fn read_u64(&self, paddr: u64) -> Option<u64> {
        // SAFETY: see the type.
        unsafe { &*self.0 }.read_u64(paddr)
    }
    fn writable(&self, paddr: u64, len: u64) -> bool {
        // SAFETY: see the type.
        unsafe { &*self.0 }.writable(paddr, len)
    }
}

fn first_difference_by<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

fn first_difference(a: &[Elem], b: &[Elem]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

fn assert_clean(r: &Run, name: &str) {
    for bad in ["ADDR_NACC", "I_BAD", "ERR", "UNSYNC"] {
        if let Some(line) = r
            .text
            .lines()
            .find(|l| l.contains(bad) && !l.contains("EO_TRACE"))
        {
            panic!("{name}: decoder reported {bad}: {line}");
        }
    }
}

#[test]
fn ten_thousand_branches_with_exceptions_decode_exactly() {
    let r = run("long", 12000, 1 << 20, 0x9E37_79B9_7F4A_7C15);
    assert!(!r.wrapped, "a 1 MiB ETF must hold this run");
    assert!(r.branches >= 10_000, "only {} branches", r.branches);
    assert!(r.exceptions >= 500, "only {} exceptions", r.exceptions);
    let d = first_difference(&r.decoded, &r.expected);
    assert!(
        r.decoded == r.expected,
        "decoded {} elements, executed {}; first difference at {d}: decoded {:x?}, executed {:x?}\n{}",
        r.decoded.len(),
        r.expected.len(),
        &r.decoded[d.saturating_sub(2)..(d + 3).min(r.decoded.len())],
        &r.expected[d.saturating_sub(2)..(d + 3).min(r.expected.len())],
        r.text.lines().filter(|l| l.contains("Idx:")).take(40).collect::<Vec<_>>().join("\n"),
    );
    assert_clean(&r, "long");
    assert!(r.truth_events > 0);
}

#[test]
fn a_wrapped_buffer_decodes_to_the_end_of_the_execution() {
    let r = run("wrapped", 6000, 4096, 0x1234_5678_9ABC_DEF1);
    assert!(r.wrapped, "a 4 KiB ETF must wrap");
    assert!(
        r.decoded.len() > 100,
        "decoded only {} elements",
        r.decoded.len()
    );
    // The decode starts at the first synchronisation after the oldest data and then follows
    // the execution to its end, exactly.
    let tail = &r.expected[r.expected.len() - r.decoded.len()..];
    let d = first_difference(&r.decoded, tail);
    assert!(
        r.decoded == tail,
        "decoded {} elements, not the end of the {} executed; first difference at {d}: decoded {:x?}, executed {:x?}",
        r.decoded.len(),
        r.expected.len(),
        &r.decoded[d.saturating_sub(2)..(d + 3).min(r.decoded.len())],
        &tail[d.saturating_sub(2)..(d + 3).min(tail.len())],
    );
}

fn assert_decodes_exactly(r: &Run, name: &str) {
    let d = first_difference(&r.decoded, &r.expected);
    assert!(
        r.decoded == r.expected,
        "{name}: decoded {} elements, executed {}; first difference at {d}: decoded {:x?}, executed {:x?}\n{}",
        r.decoded.len(),
        r.expected.len(),
        &r.decoded[d.saturating_sub(2)..(d + 3).min(r.decoded.len())],
        &r.expected[d.saturating_sub(2)..(d + 3).min(r.expected.len())],
        r.text.lines().filter(|l| l.contains("Idx:")).take(60).collect::<Vec<_>>().join("\n"),
    );
    assert_clean(r, name);
}

/// The hardware stop of the panic dump: a stop point where the crash path begins. The trace
/// ends exactly there (the stop point is traced, nothing after it), it equals the execution
/// and the plugin's truth up to that moment, `TRCVICTLR.SSSTATUS` reads stopped once the unit
/// is idle, and the truth says where ViewInst stopped.
fn stop_point(name: &'static str, stop: u64, seed: u64) -> Run {
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            start: vec![],
            stop: vec![stop],
            started: true,
            acatr: ACATR_KERNEL,
            ..ViewSetup::default()
        }),
        crash_after: Some(3000),
        mark: Some(CRASH),
        ..Setup::new(name, 6000, 1 << 20, seed)
    });
    assert!(!r.wrapped);
    assert_decodes_exactly(&r, name);
    // The mark at the crash function's entry is logged once, when the CPU first enters it.
    let marked = format!("cpu 0: mark {CRASH:#x} reached [counters: ");
    assert_eq!(
        r.events.iter().filter(|e| e.starts_with(&marked)).count(),
        1,
        "{:?}",
        r.events
    );
    assert_eq!(
        r.stops,
        vec![stop],
        "{name}: the execution passed the stop point once"
    );
    assert!(
        r.branches > 2000 && r.untraced_branches > 1000,
        "{name}: the CPU ran on after the stop point ({} branches, {} untraced)",
        r.branches,
        r.untraced_branches
    );
    assert_eq!(r.restarts, 0);
    let v = &r.truth["viewinst"];
    assert_eq!(v["start_stop"], true);
    assert_eq!(v["ssstatus"], false);
    assert_eq!(v["stopped_at"], format!("{stop:#x}"));
    assert_eq!(v["total_at_stop"], r.truth["total"]);
    assert_eq!(v["ended_by"], "stop-point");
    // The log says when the stop point was reached, with the counters of that moment.
    let reached = format!("etm 0: stop point {stop:#x} reached [counters: accesses tmc=");
    assert_eq!(
        r.events.iter().filter(|e| e.starts_with(&reached)).count(),
        1,
        "{:?}",
        r.events
    );
    assert_eq!(r.victlr_after & (1 << 9), 0, "SSSTATUS: stopped");
    assert_eq!(
        r.victlr_after & !(1 << 9),
        0x01 | (0xB << 16),
        "TRCVICTLR otherwise as programmed"
    );
    r
}

#[test]
fn a_stop_point_at_a_function_entry_ends_the_trace_there() {
    let r = stop_point("stop_entry", CRASH, 0x5EED_0001);
    // The last traced branch enters the crash function (the call, or the return from an
    // interrupt taken just before its first instruction); nothing of the function is a range.
    let last = r.executed_truth.last().unwrap();
    assert_eq!(last.2, CRASH, "{last:x?}");
    let Some(&Elem::Range { end, taken, .. }) = r.decoded.last() else {
        panic!("no range decoded")
    };
    assert!(
        taken && (end == CRASH_CALL + 4 || end == VECTORS + 0x280 + 0x10),
        "{end:#x}"
    );
}

#[test]
fn the_drivers_stop_points_end_the_trace_at_the_first_crash_entry_reached() {
    // What the kernel driver programs for the crash path's entries (several stop points, one
    // comparator each, TRCACATR for a kernel at EL1): the trace ends at the one that runs.
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            stop: vec![CODE + 0x40_0000, CRASH, CODE + 0x50_0000],
            started: true,
            acatr: ACATR_KERNEL,
            by_driver: true,
            ..ViewSetup::default()
        }),
        crash_after: Some(3000),
        ..Setup::new("driver_stops", 6000, 1 << 20, 0x5EED_0009)
    });
    assert_decodes_exactly(&r, "driver_stops");
    assert_eq!(r.stops, vec![CRASH]);
    assert_eq!(r.truth["viewinst"]["ended_by"], "stop-point");
    assert_eq!(r.executed_truth.last().unwrap().2, CRASH);
    assert_eq!(r.victlr_after & (1 << 9), 0, "SSSTATUS: stopped");
}

#[test]
fn a_stop_point_inside_a_block_is_exact_to_the_instruction() {
    // The stop point is the instruction after the entry: the branch that ends the same block
    // (QEMU runs the function's first three instructions as one block) is not traced.
    let r = stop_point("stop_mid_block", CRASH + 4, 0x5EED_0002);
    let last = r.executed_truth.last().unwrap();
    assert_eq!(last.2, CRASH, "{last:x?}");
    assert!(
        !r.decoded
            .iter()
            .any(|e| matches!(e, Elem::Range { end, .. } if *end == CRASH + 0xC)),
        "the call after the stop point is not traced"
    );
}

#[test]
fn a_stop_point_on_a_branch_traces_that_branch() {
    // The stop point is itself a P0 instruction (the call at CRASH + 8): it is traced, and
    // nothing after it.
    let r = stop_point("stop_branch", CRASH + 8, 0x5EED_0003);
    let last = r.executed_truth.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1, last.2),
        ("taken", CRASH + 8, CODE + 0x200)
    );
    assert_eq!(
        r.decoded.last(),
        Some(&Elem::Range {
            start: CRASH,
            end: CRASH + 0xC,
            n: 3,
            taken: true
        })
    );
}

#[test]
fn a_start_stop_pair_traces_exactly_the_windows_in_between() {
    // Start at a conditional branch that ends a block but not its first instruction, stop at a
    // load inside the main loop's first block (a load that may fault: a faulting load has not
    // executed, so it stops the logic only when it completes). The logic starts stopped.
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            start: vec![CODE + 0x104],
            stop: vec![CODE + 0x04],
            started: false,
            acatr: ACATR_KERNEL,
            ..ViewSetup::default()
        }),
        ..Setup::new("window", 8000, 1 << 20, 0x5EED_0004)
    });
    assert!(!r.wrapped);
    assert_decodes_exactly(&r, "window");
    assert!(r.restarts >= 20, "only {} windows", r.restarts + 1);
    assert!(r.untraced_branches > 1000, "{}", r.untraced_branches);
    assert!(
        r.stops.len() as u64 >= r.restarts,
        "every window was closed by the stop point"
    );
    // Every traced range lies after a start point of its window: the first range of each
    // window starts at the start point (or at an exception vector inside the window).
    assert!(
        r.decoded
            .iter()
            .any(|e| matches!(e, Elem::Range { start, .. } if *start == CODE + 0x104)),
        "a window begins at the start point"
    );
    assert_eq!(r.truth["viewinst"]["start_stop"], true);
}

#[test]
fn a_stop_comparator_excluded_at_el1_never_stops_kernel_trace() {
    // TRCACATR.EXLEVEL_NS with NS EL1 set: the comparator does not match kernel code.
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            start: vec![],
            stop: vec![CRASH],
            started: true,
            acatr: ACATR_KERNEL | (0x2 << 12),
            ..ViewSetup::default()
        }),
        crash_after: Some(1000),
        ..Setup::new("stop_not_el1", 3000, 1 << 20, 0x5EED_0005)
    });
    assert_decodes_exactly(&r, "stop_not_el1");
    assert!(r.stops.is_empty());
    assert_eq!(r.untraced_branches, 0);
    assert_eq!(r.truth["viewinst"]["stopped_at"], serde_json::Value::Null);
    assert_eq!(r.truth["viewinst"]["ended_by"], "disable");
    assert_ne!(r.victlr_after & (1 << 9), 0, "SSSTATUS: still started");
}

#[test]
fn the_start_stop_logic_stopped_without_a_start_point_traces_nothing() {
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            started: false,
            ..ViewSetup::default()
        }),
        ..Setup::new("ss_stopped", 2000, 1 << 20, 0x5EED_0006)
    });
    assert!(r.expected.is_empty());
    assert!(
        r.decoded.is_empty(),
        "{:x?}",
        &r.decoded[..r.decoded.len().min(4)]
    );
    assert_eq!(r.truth_events, 0);
    assert!(r.untraced_branches > 1000);
    assert_eq!(r.victlr_after & (1 << 9), 0);
}

#[test]
fn with_no_start_stop_programming_everything_is_traced_and_ssstatus_reads_started() {
    let r = run("default_ss", 3000, 1 << 20, 0x5EED_0007);
    assert_decodes_exactly(&r, "default_ss");
    assert_eq!(r.untraced_branches, 0);
    assert_eq!(r.restarts, 0);
    assert_ne!(r.victlr_after & (1 << 9), 0, "SSSTATUS: started");
    assert_eq!(r.truth["viewinst"]["start_stop"], false);
    assert_eq!(r.truth["viewinst"]["ended_by"], "disable");
}

#[test]
fn an_include_range_that_cuts_blocks_traces_exactly_the_instructions_inside() {
    // From func_a's conditional branch (not its first instruction) to func_b's call (not its
    // last): both bounds fall inside blocks.
    let r = run_setup(Setup {
        view: Some(ViewSetup {
            include: vec![(CODE + 0x104, CODE + 0x204)],
            started: true,
            acatr: ACATR_KERNEL,
            ..ViewSetup::default()
        }),
        ..Setup::new("include", 6000, 1 << 20, 0x5EED_0008)
    });
    assert_decodes_exactly(&r, "include");
    assert!(r.restarts >= 20, "{}", r.restarts);
    assert!(r.untraced_branches > 1000, "{}", r.untraced_branches);
    for e in &r.decoded {
        if let Elem::Range { start, end, .. } = *e {
            assert!(
                start >= CODE + 0x104 && end <= CODE + 0x208,
                "{start:#x}..{end:#x}"
            );
        }
    }
}

/// The ETR: trace in a flat buffer in guest memory that wrapped many times, read as the
/// crash-data path reads it (from `RRP`, the oldest data, with the barrier packet), decodes to
/// the end of the execution without a gap, and the plugin's `tmc.bin` is that buffer.
#[test]
fn an_etr_buffer_that_wrapped_decodes_to_the_end_of_the_execution() {
    let r = run_setup(Setup {
        etr: Some((0x5800_0000, 8192)),
        ..Setup::new("etr_wrapped", 8000, 4096, 0x5EED_0009)
    });
    assert!(r.wrapped, "an 8 KiB ETR buffer must wrap");
    assert!(
        r.decoded.len() > 200,
        "decoded only {} elements",
        r.decoded.len()
    );
    let tail = &r.expected[r.expected.len() - r.decoded.len()..];
    let d = first_difference(&r.decoded, tail);
    assert!(
        r.decoded == tail,
        "decoded {} elements, not the end of the {} executed; first difference at {d}: decoded {:x?}, executed {:x?}",
        r.decoded.len(),
        r.expected.len(),
        &r.decoded[d.saturating_sub(2)..(d + 3).min(r.decoded.len())],
        &tail[d.saturating_sub(2)..(d + 3).min(tail.len())],
    );
    assert_clean(&r, "etr_wrapped");
}

/// An ETR buffer that did not wrap holds the whole execution from the enable.
#[test]
fn an_etr_buffer_holds_the_whole_execution_with_the_hardware_stop() {
    let r = run_setup(Setup {
        etr: Some((0x5800_0000, 1 << 20)),
        view: Some(ViewSetup {
            stop: vec![CRASH],
            started: true,
            acatr: ACATR_KERNEL,
            ..ViewSetup::default()
        }),
        crash_after: Some(2000),
        ..Setup::new("etr_stop", 4000, 4096, 0x5EED_000A)
    });
    assert!(!r.wrapped);
    assert_decodes_exactly(&r, "etr_stop");
    assert_eq!(r.truth["viewinst"]["ended_by"], "stop-point");
    assert!(r.untraced_branches > 500);
}

//! The emulated machine: the components behind the window and one execution tracker per vCPU.
//!
//! Locking: the components are behind one lock, taken by register accesses and by trace that
//! reaches the funnel. Each vCPU's tracker has its own lock, taken by that vCPU's callbacks and,
//! with the component lock already held, by accesses that stop or flush its trace unit (the
//! panicking CPU stops every ETM). A vCPU never takes the component lock while holding its
//! tracker's, so the two orders cannot deadlock. The instrumentation decision has a lock of its
//! own, taken with the component lock held (a session starting) or with none (a vCPU reaching
//! the idle threshold); only the counters' lock is taken under it.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;

use crate::a64::StoredRegs;
use crate::bus::{self, Component, GuestMem, Target};
use crate::config::Config;
use crate::cpu_debug::CpuDebug;
use crate::encoder::el_of;
use crate::etm::Etm;
use crate::etr::Etr;
use crate::funnel::Funnel;
use crate::instrumentation::{self, Instrumentation, LIGHT_AFTER_IDLE_BLOCKS};
use crate::tmc::{Tmc, TmcKind};
use crate::tracker::{self, TbInfo, Tracker, TrackerStats, VectorBases};
use crate::truth::Truth;

/// The TMC behind the window, in its configuration.
enum Sink {
    /// ETB or ETF: trace RAM of its own.
    Ram(Box<Tmc>),
    /// ETR: a buffer in guest memory.
    Etr(Box<Etr>),
}

impl Sink {
    fn component(&mut self) -> &mut dyn Component {
        match self {
            Sink::Ram(t) => t.as_mut(),
            Sink::Etr(e) => e.as_mut(),
        }
    }

    fn accepting(&mut self) -> bool {
        match self {
            Sink::Ram(t) => t.accepting(),
            Sink::Etr(e) => e.accepting(),
        }
    }

    fn push_trace(&mut self, id: u8, bytes: &[u8]) -> usize {
        match self {
            Sink::Ram(t) => t.push_trace(id, bytes),
            Sink::Etr(e) => e.push_trace(id, bytes),
        }
    }

    /// What the trace memory holds, oldest byte first, and whether it wrapped.
    fn held(&mut self) -> (Vec<u8>, bool) {
        match self {
            Sink::Ram(t) => {
                use cspd_model::tmc::{RRP, RWP, STS};
                let rsz = t.rsz_words().max(1);
                let full = t.peek(STS) & 1 != 0;
                let rwp = t.peek(RWP) as usize / 4 % rsz;
                let (start, n) = if full {
                    (rwp, rsz)
                } else {
                    let rrp = t.peek(RRP) as usize / 4 % rsz;
                    (rrp, (rwp + rsz - rrp) % rsz)
                };
                let ram = t.ram();
                let bytes = (0..n)
                    .filter_map(|i| ram.get((start + i) % rsz))
                    .flat_map(|w| w.to_le_bytes())
                    .collect();
                (bytes, full)
            }
            Sink::Etr(e) => e.held(),
        }
    }
}

/// Whether block `next` is where a vCPU restarted after a power-down, block `p` being the one it
/// ran before: `p` ended with a call to the firmware (`HVC` or `SMC`, PSCI's conduit) that did not
/// return to its next instruction, and `next` runs with the MMU off (a physical address: the
/// kernel's secondary entry, or its resume entry). A vCPU that PSCI `CPU_OFF` turned off and
/// `CPU_ON` started again, or that a power-down `CPU_SUSPEND` lost; QEMU's PSCI returns from
/// every other call. The plugin cannot read `x0`, so this is what it sees of `CPU_OFF`.
fn restarted_by_firmware(p: &TbInfo, next: &TbInfo) -> bool {
    ends_with_firmware_call(p) && next.start != p.end && next.start >> 63 == 0
}

/// Whether block `p` ends with a call to the firmware (`HVC` or `SMC`).
fn ends_with_firmware_call(p: &TbInfo) -> bool {
    const HVC_SMC_MASK: u32 = 0xFFE0_001E;
    const HVC_SMC: u32 = 0xD400_0002;
    p.last == crate::a64::Kind::Call && p.words.last().is_some_and(|&w| w & HVC_SMC_MASK == HVC_SMC)
}

/// Trace bytes are handed to the funnel once this many are waiting.
const PUSH_CHUNK: usize = 64;

struct Devices {
    tmc: Sink,
    funnel: Funnel,
    etms: Vec<Etm>,
    dbgs: Vec<CpuDebug>,
}

/// The ELR watch of a vCPU: which register holds `ELR_EL1`, and whether the next stored word is
/// it (the second half of a store pair).
const WATCH_NONE: u32 = 0;
const WATCH_NEXT_STORE: u32 = 0x100;

/// A vCPU's state: the block it ran last, its trace session and tracker.
///
/// Aligned to 128 bytes (two cache lines, what adjacent-line prefetchers pair) so that no two
/// vCPUs share a line: each vCPU's thread writes its own `last_pc`, `prev` and `idle_blocks` on
/// every block it runs, and sharing would bounce the line between the vCPUs' host CPUs.
#[repr(align(128))]
struct Vcpu {
    last_pc: AtomicU64,
    prev: AtomicPtr<TbInfo>,
    tracing: AtomicBool,
    trace_id: AtomicU8,
    elr_watch: AtomicU32,
    tracker: Mutex<Tracker>,
    /// Blocks this vCPU executed while no trace session was active, since the last session
    /// started.
    idle_blocks: AtomicU64,
}

/// Register accesses by component kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessCounts {
    /// To the TMC.
    pub tmc: u64,
    /// To the funnel.
    pub funnel: u64,
    /// To the ETMs.
    pub etm: u64,
    /// To the CPU debug interfaces.
    pub debug: u64,
}

/// The most CPUs whose trace bytes are counted apart.
pub const COUNTED_CPUS: usize = 8;

/// Counts for the exit line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmuStats {
    /// Register reads and writes.
    pub mmio: u64,
    /// Register reads and writes by component kind.
    pub accesses: AccessCounts,
    /// Trace bytes that reached the TMC, by source CPU (the first [`COUNTED_CPUS`]).
    pub trace_bytes_by_cpu: [u64; COUNTED_CPUS],
    /// Data cache clean instructions (`DC CVAC`, `DC CIVAC`) each vCPU executed since the TMC
    /// last stopped capture (the first [`COUNTED_CPUS`]).
    pub dc_clean_since_tmc_stop: [u64; COUNTED_CPUS],
    /// Trace bytes that reached the TMC.
    pub trace_bytes: u64,
    /// Trace bytes dropped because the path was closed.
    pub dropped_bytes: u64,
    /// Of them, those dropped after the TMC last took a byte (a CPU that went on tracing after
    /// the sink was stopped for good).
    pub dropped_after_last_taken: u64,
    /// Trace sessions (ETM enables).
    pub sessions: u64,
    /// Per-vCPU tracker counts, summed.
    pub tracker: TrackerStats,
}

impl EmuStats {
    /// The counters the log lines of the panic path's milestones carry (stop point reached,
    /// ETM stopped, TMC stopped, exit), for a benchmark to take differences of.
    pub fn counters(&self, cpus: usize) -> String {
        let a = &self.accesses;
        let by_cpu: Vec<String> = self
            .trace_bytes_by_cpu
            .iter()
            .take(cpus.min(COUNTED_CPUS))
            .map(u64::to_string)
            .collect();
        format!(
            "[counters: accesses tmc={} funnel={} etm={} debug={}; trace bytes {} by cpu {}]",
            a.tmc,
            a.funnel,
            a.etm,
            a.debug,
            self.trace_bytes,
            by_cpu.join(",")
        )
    }
}

/// The emulated CoreSight components and the trace of the vCPUs.
pub struct Emu {
    cfg: Config,
    cpus: usize,
    mem: Arc<dyn GuestMem>,
    devices: Mutex<Devices>,
    vcpus: Box<[Vcpu]>,
    vectors: VectorBases,
    /// Each CPU's ground truth as its trace unit last stopped, and why it stopped; written to
    /// the truth file when QEMU exits (formatting it at every stop cost the guest a second per
    /// stop with a 2 MiB sink).
    truths: Mutex<Vec<Option<(Truth, &'static str)>>>,
    stats: Mutex<EmuStats>,
    active: AtomicU32,
    /// What happened that a test harness checks, for the plugin's log.
    events: Mutex<Vec<String>>,
    /// The PC staged in each CPU's `EDPCSR`.
    staged_pc: Box<[AtomicU64]>,
    /// The TMC had stopped capture at the last access.
    tmc_stopped: AtomicBool,
    /// Capture stops seen so far (the `tmc_stops=` copies are numbered by them).
    tmc_stops: AtomicU32,
    /// The `mark=` address was reached.
    marked: AtomicBool,
    /// Trace bytes the sink took, all CPUs (what a covering ground truth measures age in).
    sink_bytes: AtomicU64,
    /// The instrumentation decision, taken under this lock so that a vCPU reaching the idle
    /// threshold and a session starting on another cannot leave it light with a session active.
    switch: Mutex<instrumentation::Switch>,
    /// The switch's instrumentation is light (read on every block without the lock).
    light: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock is already fatal to QEMU; the data is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Emu {
    /// Builds the machine for `vcpus` vCPUs (the ETMs and debug interfaces of `cfg.cpus` of
    /// them) and stages every register in the window.
    pub fn new(cfg: Config, vcpus: usize, mem: Box<dyn GuestMem>) -> Result<Self, String> {
        let cpus = cfg.cpus.unwrap_or(vcpus).min(bus::MAX_CPUS);
        if cpus == 0 {
            return Err("no CPUs to emulate".into());
        }
        let mem: Arc<dyn GuestMem> = Arc::from(mem);
        let tmc = match cfg.tmc_kind {
            TmcKind::Etr => Sink::Etr(Box::new(Etr::new(
                Arc::clone(&mem),
                cfg.window..cfg.window + bus::WINDOW_SIZE,
                cfg.faults.tmc,
            )?)),
            kind => Sink::Ram(Box::new(Tmc::new(kind, cfg.tmc_size, cfg.faults.tmc)?)),
        };
        let devices = Devices {
            tmc,
            funnel: Funnel::new(cpus),
            etms: (0..cpus)
                .map(|c| Etm::new(c, cfg.faults.etm_of(c)))
                .collect(),
            dbgs: (0..cpus)
                .map(|c| CpuDebug::new(c, cfg.faults.debug_of(c)))
                .collect(),
        };
        let vcpus = (0..vcpus.max(cpus))
            .map(|_| Vcpu {
                last_pc: AtomicU64::new(0),
                prev: AtomicPtr::new(std::ptr::null_mut()),
                tracing: AtomicBool::new(false),
                trace_id: AtomicU8::new(0),
                elr_watch: AtomicU32::new(WATCH_NONE),
                tracker: Mutex::new(Tracker::new()),
                idle_blocks: AtomicU64::new(0),
            })
            .collect();
        let emu = Self {
            cpus,
            mem,
            devices: Mutex::new(devices),
            vcpus,
            vectors: VectorBases::default(),
            truths: Mutex::new(vec![None; cpus]),
            stats: Mutex::new(EmuStats::default()),
            active: AtomicU32::new(0),
            events: Mutex::new(Vec::new()),
            staged_pc: (0..cpus).map(|_| AtomicU64::new(0)).collect(),
            tmc_stopped: AtomicBool::new(false),
            tmc_stops: AtomicU32::new(0),
            marked: AtomicBool::new(false),
            sink_bytes: AtomicU64::new(0),
            switch: Mutex::new(instrumentation::Switch::new()),
            light: AtomicBool::new(false),
            cfg,
        };
        {
            let mut d = lock(&emu.devices);
            for t in emu.targets() {
                emu.stage(&mut d, t);
            }
        }
        Ok(emu)
    }

    /// Returns the configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Returns the number of CPUs with an ETM and a debug interface.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Returns the guest physical range of the window.
    pub fn window(&self) -> std::ops::Range<u64> {
        self.cfg.window..self.cfg.window + bus::WINDOW_SIZE
    }

    /// Returns how many trace sessions were opened since start.
    pub fn sessions_started(&self) -> u64 {
        lock(&self.stats).sessions
    }

    /// Returns how many vCPUs are tracing now.
    pub fn active_sessions(&self) -> u32 {
        self.active.load(Ordering::Relaxed)
    }

    /// Returns the instrumentation QEMU's translated blocks should have now (see
    /// [`crate::instrumentation`]): light once no trace session has been active for
    /// [`LIGHT_AFTER_IDLE_BLOCKS`] blocks of a vCPU after one was, full again when a trace unit
    /// is enabled. Cheap enough to ask after every block.
    pub fn instrumentation(&self) -> Instrumentation {
        if self.light.load(Ordering::Relaxed) {
            Instrumentation::Light
        } else {
            Instrumentation::Full
        }
    }

    /// Returns how many times [`Emu::instrumentation`] changed since start (each change is a
    /// flush of QEMU's translated code).
    pub fn instrumentation_switches(&self) -> u64 {
        lock(&self.switch).switches()
    }

    /// Takes the instrumentation decision again, for the machine's state now.
    fn follow_sessions(&self) {
        let mut switch = lock(&self.switch);
        let idle = self
            .vcpus
            .iter()
            .map(|v| v.idle_blocks.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let started = lock(&self.stats).sessions;
        if let Some(mode) = switch.follow(self.active.load(Ordering::Relaxed), started, idle) {
            self.light
                .store(mode == Instrumentation::Light, Ordering::Relaxed);
        }
    }

    fn targets(&self) -> impl Iterator<Item = Target> {
        let n = self.cpus;
        [Target::Tmc, Target::Funnel]
            .into_iter()
            .chain((0..n).map(Target::Etm))
            .chain((0..n).map(Target::Debug))
    }

    fn component(d: &mut Devices, t: Target) -> Option<&mut dyn Component> {
        Some(match t {
            Target::Tmc => d.tmc.component(),
            Target::Funnel => &mut d.funnel,
            Target::Etm(n) => d.etms.get_mut(n)?,
            Target::Debug(n) => d.dbgs.get_mut(n)?,
        })
    }

    /// Writes every register of `t` into the window.
    fn stage(&self, d: &mut Devices, t: Target) {
        if let Target::Debug(n) = t {
            if let (Some(dbg), Some(v)) = (d.dbgs.get_mut(n), self.vcpus.get(n)) {
                let pc = v.last_pc.load(Ordering::Relaxed);
                dbg.set_sample(pc, el_of(pc), true);
                if let Some(s) = self.staged_pc.get(n) {
                    s.store(pc, Ordering::Relaxed);
                }
            }
        }
        let base = self.cfg.window + bus::frame_of(t);
        let Some(c) = Self::component(d, t) else {
            return;
        };
        for &off in c.staged() {
            let v = c.peek(off);
            self.mem.write_u32(base + u64::from(off), v);
        }
    }

    // ---- execution -------------------------------------------------------------------------

    /// vCPU `vcpu` starts block `tb`.
    pub fn tb_exec(&self, vcpu: usize, tb: &'static TbInfo) {
        let Some(v) = self.vcpus.get(vcpu) else {
            return;
        };
        v.last_pc.store(tb.start, Ordering::Relaxed);
        // Only this vCPU's thread writes `prev`: a load and a store, not a locked swap.
        let prev = v.prev.load(Ordering::Relaxed);
        v.prev
            .store(std::ptr::from_ref(tb).cast_mut(), Ordering::Relaxed);
        // SAFETY: `prev` is null or was stored from a `&'static TbInfo` above.
        let prev: Option<&'static TbInfo> = unsafe { prev.as_ref() };
        if let Some(p) = prev {
            if restarted_by_firmware(p, tb) {
                self.power_cycle(vcpu, p.last_addr, tb.start);
                return;
            }
            tracker::learn(p, tb.start, &self.vectors);
        }
        if self.active.load(Ordering::Relaxed) == 0
            && v.idle_blocks.fetch_add(1, Ordering::Relaxed) + 1 == LIGHT_AFTER_IDLE_BLOCKS
        {
            // This vCPU has run long enough with no trace session: light, unless it is the
            // boot before the first session.
            self.follow_sessions();
        }
        if !v.tracing.load(Ordering::Relaxed) {
            return;
        }
        let (mut bytes, stop, late, planted) = {
            let mut t = lock(&v.tracker);
            let before = t.stopped_at();
            t.exec(prev, tb, &self.vectors);
            let after = t.stopped_at();
            let stop = after.filter(|_| after != before);
            let planted = t.take_planted();
            // A unit whose trace stopped writes out the atoms it held back for a packet and
            // drains what it holds at once, as a trace unit does when its trace goes inactive:
            // its last bytes enter the sink at the stop, not at the next flush.
            let stopped = after.is_some();
            let bytes = if stop.is_some() {
                Some(t.flush()).filter(|b| !b.is_empty())
            } else {
                (t.pending_bytes() >= PUSH_CHUNK || (stopped && t.pending_bytes() > 0))
                    .then(|| t.take_bytes())
            };
            if let Some(b) = bytes.as_ref() {
                // Where these bytes will sit in the sink's input (another CPU's bytes may land
                // first, which only makes the record keep a little more).
                t.handed_to_sink(self.sink_bytes.load(Ordering::Relaxed) + b.len() as u64);
            }
            let late = (stop.is_none() && stopped).then_some(after).flatten();
            (bytes, stop, late, planted)
        };
        self.log_planted(vcpu, planted);
        // The counters once a stopped unit's last bytes are in the sink, taken under the devices
        // lock that every hand-over to the sink takes: another CPU's bytes counted there entered
        // the sink before them, any other after.
        if let Some(at) = stop {
            let c = self.route_counted(vcpu, bytes.take());
            self.event(format!("etm {vcpu}: stop point {at:#x} reached {c}"));
        } else if let Some(at) = late {
            if let Some(b) = bytes.take() {
                let n = b.len();
                let c = self.route_counted(vcpu, Some(b));
                self.event(format!(
                    "etm {vcpu}: {n} trace bytes after its stop point {at:#x} {c}"
                ));
            }
        }
        if self.cfg.mark == Some(tb.start) && !self.marked.swap(true, Ordering::Relaxed) {
            let c = lock(&self.stats).counters(self.cpus);
            self.event(format!("cpu {vcpu}: mark {:#x} reached {c}", tb.start));
        }
        if let Some(bytes) = bytes {
            let mut d = lock(&self.devices);
            self.route(&mut d, vcpu, &bytes);
        }
    }

    /// Hands `bytes` of vCPU `cpu`'s unit to the sink, when there are some, and returns the
    /// counters with them in, taken before any other CPU's bytes can follow.
    fn route_counted(&self, cpu: usize, bytes: Option<Vec<u8>>) -> String {
        let d = bytes.map(|b| {
            let mut d = lock(&self.devices);
            self.route(&mut d, cpu, &b);
            d
        });
        let c = lock(&self.stats).counters(self.cpus);
        drop(d);
        c
    }

    /// vCPU `vcpu` went idle (QEMU's idle callback: a wait for interrupt, or a halt). When the
    /// last block it started ended with a call to the firmware (`HVC` or `SMC`, PSCI's conduit),
    /// the call did not return: QEMU's PSCI halts a vCPU that `CPU_OFF` turned off (a CPU taken
    /// offline, or stopped by a crash). A call that returns runs another block before any wait,
    /// so no other call ends there. Its debug logic then says the core is off (`EDPRSR.PU`
    /// clear) until the vCPU restarts ([`Self::power_cycle`]).
    ///
    /// Under light instrumentation no block is seen, so nothing is concluded then.
    pub fn vcpu_idle(&self, vcpu: usize) {
        if self.light.load(Ordering::Relaxed) {
            return;
        }
        let Some(v) = self.vcpus.get(vcpu) else {
            return;
        };
        // SAFETY: `prev` is null or was stored from a `&'static TbInfo` (`tb_exec`).
        let Some(p) = (unsafe { v.prev.load(Ordering::Relaxed).as_ref() }) else {
            return;
        };
        if !ends_with_firmware_call(p) {
            return;
        }
        let mut d = lock(&self.devices);
        let Some(g) = d.dbgs.get_mut(vcpu) else {
            return;
        };
        if !g.powered() {
            return;
        }
        g.power_off();
        self.stage(&mut d, Target::Debug(vcpu));
        drop(d);
        let c = lock(&self.stats).counters(self.cpus);
        self.event(format!(
            "cpu {vcpu}: powered off: the firmware call at {:#x} did not return and the vCPU \
             halted; its debug logic reads EDPRSR.PU clear {c}",
            p.last_addr
        ));
    }

    /// vCPU `cpu` came back from a power-down: the firmware call at `call` did not return, the
    /// vCPU restarted at `entry`. Its trace unit and debug logic share its power domain: both
    /// are at their reset values, a session the unit was tracing for ends there.
    fn power_cycle(&self, cpu: usize, call: u64, entry: u64) {
        let mut d = lock(&self.devices);
        if self
            .vcpus
            .get(cpu)
            .is_some_and(|v| v.tracing.load(Ordering::Relaxed))
        {
            self.stop_trace(&mut d, cpu, "powered down while tracing");
        }
        if let Some(e) = d.etms.get_mut(cpu) {
            *e = Etm::new(cpu, e.faults());
        }
        if let Some(g) = d.dbgs.get_mut(cpu) {
            g.power_cycle();
        }
        self.stage(&mut d, Target::Etm(cpu));
        self.stage(&mut d, Target::Debug(cpu));
        drop(d);
        let c = lock(&self.stats).counters(self.cpus);
        self.event(format!(
            "cpu {cpu}: powered down and up: the firmware call at {call:#x} did not return, the \
             vCPU restarted at {entry:#x} (MMU off); its ETM and debug registers are at their \
             reset values {c}"
        ));
    }

    /// vCPU `vcpu` executes a data cache clean to the point of coherency (`DC CVAC` or
    /// `DC CIVAC`).
    pub fn dc_clean(&self, vcpu: usize) {
        if let Some(n) = lock(&self.stats).dc_clean_since_tmc_stop.get_mut(vcpu) {
            *n += 1;
        }
    }

    /// vCPU `vcpu` is about to run `mrs x<reg>, elr_el1`.
    pub fn mrs_elr(&self, vcpu: usize, reg: u8) {
        let Some(v) = self.vcpus.get(vcpu) else {
            return;
        };
        if !v.tracing.load(Ordering::Relaxed) {
            return;
        }
        if lock(&v.tracker).waiting_for_elr() {
            v.elr_watch.store(u32::from(reg) + 1, Ordering::Relaxed);
        }
    }

    /// Returns whether stores of vCPU `vcpu` must be shown to [`Emu::stored`].
    #[inline]
    pub fn watching_stores(&self, vcpu: usize) -> bool {
        self.vcpus
            .get(vcpu)
            .is_some_and(|v| v.elr_watch.load(Ordering::Relaxed) != WATCH_NONE)
    }

    /// vCPU `vcpu` stored `regs` (this access at guest physical `paddr`) while a register
    /// holding `ELR_EL1` is watched.
    pub fn stored(&self, vcpu: usize, regs: Option<StoredRegs>, paddr: u64) {
        let Some(v) = self.vcpus.get(vcpu) else {
            return;
        };
        let w = v.elr_watch.load(Ordering::Relaxed);
        let hit = if w == WATCH_NEXT_STORE {
            true
        } else {
            match regs {
                Some(r) if u32::from(r.rt) + 1 == w => true,
                Some(StoredRegs { rt2: Some(r2), .. }) if u32::from(r2) + 1 == w => {
                    // The pair's second access stores it.
                    v.elr_watch.store(WATCH_NEXT_STORE, Ordering::Relaxed);
                    return;
                }
                _ => false,
            }
        };
        if !hit {
            return;
        }
        v.elr_watch.store(WATCH_NONE, Ordering::Relaxed);
        if let Some(elr) = self.mem.read_u64(paddr) {
            let planted = {
                let mut t = lock(&v.tracker);
                t.elr_stored(elr, &self.vectors);
                t.take_planted()
            };
            self.log_planted(vcpu, planted);
        }
    }

    /// Logs the tracker mistakes planted on `vcpu` (test-only `fault=tracker-*`).
    fn log_planted(&self, vcpu: usize, planted: Vec<String>) {
        for m in planted {
            self.event(format!("etm {vcpu}: tracker fault planted: {m}"));
        }
    }

    /// Sends trace bytes of CPU `cpu`'s ETM through the funnel to the TMC.
    fn route(&self, d: &mut Devices, cpu: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let id = self
            .vcpus
            .get(cpu)
            .map_or(0, |v| v.trace_id.load(Ordering::Relaxed));
        let taken = if d.funnel.port_enabled(cpu) && d.tmc.accepting() {
            d.tmc.push_trace(id, bytes)
        } else {
            0
        };
        self.sink_bytes.fetch_add(taken as u64, Ordering::Relaxed);
        let mut s = lock(&self.stats);
        s.trace_bytes += taken as u64;
        if let Some(n) = s.trace_bytes_by_cpu.get_mut(cpu) {
            *n += taken as u64;
        }
        let dropped = (bytes.len() - taken.min(bytes.len())) as u64;
        s.dropped_bytes += dropped;
        if taken > 0 {
            s.dropped_after_last_taken = 0;
        }
        s.dropped_after_last_taken += dropped;
    }

    // ---- registers -------------------------------------------------------------------------

    /// A guest access of `size` bytes at `paddr` in the window, by vCPU `vcpu`, after it
    /// happened. Returns `false` when `paddr` is not in the window.
    pub fn mmio(&self, vcpu: usize, paddr: u64, size: u32, store: bool) -> bool {
        if !self.window().contains(&paddr) {
            return false;
        }
        let woff = paddr - self.cfg.window;
        let Some((target, off)) = bus::decode(woff, self.cpus) else {
            return true;
        };
        {
            let mut s = lock(&self.stats);
            s.mmio += 1;
            let a = &mut s.accesses;
            match target {
                Target::Tmc => a.tmc += 1,
                Target::Funnel => a.funnel += 1,
                Target::Etm(_) => a.etm += 1,
                Target::Debug(_) => a.debug += 1,
            }
        }
        let mut d = lock(&self.devices);
        let word = off & !3;
        let words: &[u32] = if size == 8 && word & 7 == 0 {
            &[0, 4]
        } else {
            &[0]
        };
        for &step in words {
            let o = word + step;
            if store {
                let Some(value) = self
                    .mem
                    .read_u32(self.cfg.window + bus::frame_of(target) + u64::from(o))
                else {
                    continue;
                };
                self.write(&mut d, vcpu, target, o, value);
            } else {
                if let (Target::Debug(n), 0x0A0) = (target, o) {
                    let pc = self
                        .staged_pc
                        .get(n)
                        .map_or(0, |s| s.load(Ordering::Relaxed));
                    self.event(format!(
                        "debug {n}: EDPCSR read by cpu {vcpu}, sample {pc:#x}"
                    ));
                }
                if let Some(c) = Self::component(&mut d, target) {
                    c.read(o);
                }
            }
        }
        self.stage(&mut d, target);
        if target == Target::Tmc {
            self.watch_tmc(&mut d);
        }
        true
    }

    fn event(&self, e: String) {
        lock(&self.events).push(e);
    }

    /// Returns the events since the last call (ETM enables and stops, `EDPCSR` samples, TMC
    /// stops), for the log.
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.events))
    }

    /// When capture has just stopped, writes the trace memory as a drain reads it (oldest word
    /// first): the RAM of an ETB/ETF, the buffer in guest memory of an ETR.
    fn watch_tmc(&self, d: &mut Devices) {
        use cspd_model::tmc::{CTL, FFSR, STS};
        if let Sink::Etr(e) = &mut d.tmc {
            for ev in e.take_events() {
                self.event(ev);
            }
        }
        let c = d.tmc.component();
        let stopped =
            c.peek(CTL) & 1 != 0 && c.peek(STS) & (1 << 2) != 0 && c.peek(FFSR) & (1 << 1) != 0;
        if self.tmc_stopped.swap(stopped, Ordering::Relaxed) || !stopped {
            return;
        }
        let (bytes, full) = d.tmc.held();
        let mut e = format!("tmc stopped: {} bytes held, full {full}", bytes.len());
        let counters = {
            let mut s = lock(&self.stats);
            s.dc_clean_since_tmc_stop = [0; COUNTED_CPUS];
            s.counters(self.cpus)
        };
        if let Sink::Etr(etr) = &d.tmc {
            e.push_str(&format!(
                " (etr: DBA {:#x}, RSZ {:#x} words)",
                etr.dba(),
                etr.rsz_words()
            ));
        }
        let n = self.tmc_stops.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(path) = self.cfg.tmc_dump.as_deref() {
            // `<tmc_dump>.held` keeps the newest stop that held trace while later stops hold
            // none (perf gives no AUX record for an empty drain): a rename, not a copy.
            let mut held = path.as_os_str().to_owned();
            held.push(".held");
            if bytes.is_empty() {
                if fs::metadata(path).is_ok_and(|m| m.len() > 0) {
                    if let Err(err) = fs::rename(path, &held) {
                        e.push_str(&format!(", the last stop's trace not kept: {err}"));
                    }
                }
            } else if let Err(err) = fs::remove_file(&held) {
                if err.kind() != std::io::ErrorKind::NotFound {
                    e.push_str(&format!(
                        ", {} not removed: {err}",
                        Path::new(&held).display()
                    ));
                }
            }
            match fs::write(path, &bytes) {
                Ok(()) => e.push_str(&format!(", written to {}", path.display())),
                Err(err) => e.push_str(&format!(", not written to {}: {err}", path.display())),
            }
            if n <= self.cfg.tmc_stops {
                let mut kept = path.as_os_str().to_owned();
                kept.push(format!(".{n}"));
                if let Err(err) = fs::write(&kept, &bytes) {
                    e.push_str(&format!(
                        ", not kept as {}: {err}",
                        Path::new(&kept).display()
                    ));
                }
            }
        }
        e.push(' ');
        e.push_str(&counters);
        self.event(e);
    }

    fn write(&self, d: &mut Devices, _vcpu: usize, target: Target, off: u32, value: u32) {
        use cspd_model::tmc::{CTL, FFCR};
        match target {
            Target::Tmc => {
                // A flush (or disabling capture) first collects what the trace units hold.
                if (off == FFCR && value & (1 << 6) != 0) || (off == CTL && value & 1 == 0) {
                    self.flush_all(d);
                }
                d.tmc.component().write(off, value);
            }
            Target::Etm(n) => {
                let was = d.etms.get(n).is_some_and(Etm::enabled);
                if let Some(e) = d.etms.get_mut(n) {
                    e.write(off, value);
                }
                let now = d.etms.get(n).and_then(Etm::program);
                match (was, now) {
                    (false, Some(p)) => self.start_trace(n, p),
                    (true, None) => self.stop_trace(d, n, "stopped"),
                    _ => {}
                }
            }
            _ => {
                if let Some(c) = Self::component(d, target) {
                    c.write(off, value);
                }
            }
        }
    }

    fn start_trace(&self, cpu: usize, prog: crate::etm::TraceProgram) {
        let Some(v) = self.vcpus.get(cpu) else {
            return;
        };
        let mut e = format!(
            "etm {cpu}: enabled, trace id {:#x}, TRCCONFIGR {:#x}, EL excluded (NS) {:#x}",
            prog.trace_id, prog.configr, prog.exclude_el_ns
        );
        if let Some(ss) = prog.start_stop.as_ref() {
            let list = |c: &[crate::etm::AddrComparator]| -> String {
                c.iter()
                    .map(|c| format!("{}:{:#x}", c.index, c.addr))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            e.push_str(&format!(
                ", ViewInst start [{}] stop [{}] SSSTATUS {}",
                list(&ss.start),
                list(&ss.stop),
                u8::from(prog.started)
            ));
        } else if !prog.started {
            e.push_str(", ViewInst start/stop logic stopped (SSSTATUS 0) with no start point");
        }
        match prog.event {
            crate::etm::ViewEvent::True => {}
            crate::etm::ViewEvent::False => e.push_str(", ViewInst event FALSE: nothing traced"),
            crate::etm::ViewEvent::NotEmulated(ev) => e.push_str(&format!(
                ", ViewInst event {ev:#x} not emulated (only resources that select nothing are): \
                 treated as TRUE"
            )),
        }
        if !prog.include.is_empty() || !prog.exclude.is_empty() {
            let list = |r: &[crate::etm::AddrRange]| -> String {
                r.iter()
                    .map(|r| format!("{:#x}-{:#x}", r.lo, r.hi))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            e.push_str(&format!(
                ", ViewInst include [{}] exclude [{}]",
                list(&prog.include),
                list(&prog.exclude)
            ));
        }
        self.event(e);
        v.trace_id.store(prog.trace_id, Ordering::Relaxed);
        lock(&v.tracker).start(
            prog,
            self.cfg.truth_depth,
            self.cfg.truth_bytes,
            self.cfg.faults.tracker,
        );
        v.tracing.store(true, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
        lock(&self.stats).sessions += 1;
        // The idle stretch starts again when this session (and any other) has ended.
        for v in self.vcpus.iter() {
            v.idle_blocks.store(0, Ordering::Relaxed);
        }
        self.follow_sessions();
    }

    fn stop_trace(&self, d: &mut Devices, cpu: usize, reason: &'static str) {
        let Some(v) = self.vcpus.get(cpu) else {
            return;
        };
        v.tracing.store(false, Ordering::Relaxed);
        v.elr_watch.store(WATCH_NONE, Ordering::Relaxed);
        let (stopped, stats, planted) = {
            let mut t = lock(&v.tracker);
            let planted = t.take_planted();
            (t.stop(&self.vectors), t.stats(), planted)
        };
        self.log_planted(cpu, planted);
        let Some((bytes, truth)) = stopped else {
            return;
        };
        let _ = self
            .active
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.route(d, cpu, &bytes);
        // Once idle, `TRCVICTLR.SSSTATUS` reads the state the start/stop logic was left in.
        if let Some(e) = d.etms.get_mut(cpu) {
            e.set_ssstatus(truth.ssstatus());
        }
        let stop = match truth.stop() {
            Some((a, _)) => format!(", ViewInst stopped at {a:#x}"),
            None => String::new(),
        };
        let counters = lock(&self.stats).counters(self.cpus);
        self.event(format!(
            "etm {cpu}: {reason}, {} trace bytes flushed, {} events in the truth{stop} {counters}",
            bytes.len(),
            truth.events().len()
        ));
        {
            let mut s = lock(&self.stats);
            s.tracker.blocks += stats.blocks;
            s.tracker.elr_resolved += stats.elr_resolved;
            s.tracker.elr_lost += stats.elr_lost;
            s.tracker.gaps += stats.gaps;
        }
        if let Some(slot) = lock(&self.truths).get_mut(cpu) {
            *slot = Some((truth, reason));
        }
    }

    /// Pushes every trace unit's buffered bytes to the funnel (a flush request).
    fn flush_all(&self, d: &mut Devices) {
        for cpu in 0..self.cpus {
            let Some(v) = self.vcpus.get(cpu) else {
                continue;
            };
            if !v.tracing.load(Ordering::Relaxed) {
                continue;
            }
            let bytes = lock(&v.tracker).flush();
            self.route(d, cpu, &bytes);
        }
    }

    /// Writes the ground truth: as each trace unit last stopped to the truth file, and as it is
    /// at exit (open sessions included) to `<truth>.exit`.
    pub fn exit(&self) -> EmuStats {
        let stopped: Vec<Option<String>> = lock(&self.truths)
            .iter()
            .enumerate()
            .map(|(cpu, t)| t.as_ref().map(|(t, reason)| t.to_json(cpu, reason)))
            .collect();
        let mut all = stopped.clone();
        for (cpu, slot) in all.iter_mut().enumerate() {
            if let Some(v) = self.vcpus.get(cpu) {
                if let Some(t) = lock(&v.tracker).truth() {
                    *slot = Some(t.to_json(cpu, "exit"));
                }
            }
        }
        if let Some(path) = self.cfg.truth.as_deref() {
            let _ = write_truth(path, &stopped);
            let mut p = path.as_os_str().to_owned();
            p.push(".exit");
            let _ = write_truth(Path::new(&p), &all);
        }
        let mut s = *lock(&self.stats);
        for v in self.vcpus.iter() {
            let t = lock(&v.tracker);
            if t.tracing() {
                let st = t.stats();
                s.tracker.blocks += st.blocks;
                s.tracker.elr_resolved += st.elr_resolved;
                s.tracker.elr_lost += st.elr_lost;
                s.tracker.gaps += st.gaps;
            }
        }
        s
    }

    /// Returns what the TMC's trace memory holds, oldest byte first, and whether it wrapped
    /// (for tests).
    pub fn tmc_held(&self) -> (Vec<u8>, bool) {
        lock(&self.devices).tmc.held()
    }
}

/// Writes the truths of every CPU as one JSON document, atomically (write then rename), when
/// QEMU exits (a reader only needs it afterwards; not synced: the kernel keeps what was written).
fn write_truth(path: &Path, truths: &[Option<String>]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    {
        let mut f = fs::File::create(tmp)?;
        write!(f, "{{\"cpus\": [")?;
        let mut first = true;
        for t in truths.iter().flatten() {
            if !first {
                write!(f, ",")?;
            }
            first = false;
            write!(f, "\n{t}")?;
        }
        writeln!(f, "\n]}}")?;
    }
    fs::rename(tmp, path)
}

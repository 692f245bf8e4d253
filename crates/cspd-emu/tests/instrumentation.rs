//! When the plugin's instrumentation goes light and full again (`cspd_emu::instrumentation`),
//! driven as the guest drives it: trace units enabled and disabled through their registers with
//! the driver's own sequences (`cspd-hw`), blocks executed in between as QEMU reports them.
//!
//! Each switch flushes all of QEMU's translated code, so perf's sessions (a trace unit disabled
//! and enabled at every context switch of the traced task and at every AUX buffer update) must
//! cause none, while the end of the panic dump must still lead to light instrumentation for the
//! capture kernel, once, and an enable after it to full instrumentation again.

use std::collections::HashMap;
use std::sync::Mutex;

use cspd_emu::bus;
use cspd_emu::config::Config;
use cspd_emu::instrumentation::{Instrumentation, LIGHT_AFTER_IDLE_BLOCKS};
use cspd_emu::tracker::TbInfo;
use cspd_emu::{Emu, GuestMem};
use cspd_hw::access::RawFrame;
use cspd_hw::etm4x::{Etm4x, Interface, Timeout, TraceConfig};

const WINDOW: u64 = bus::DEFAULT_WINDOW_BASE;
const CODE: u64 = 0xFFFF_8000_1000_0000;
const NOP: u32 = 0xD503_201F;
const T: u64 = LIGHT_AFTER_IDLE_BLOCKS;

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
        paddr >= 0x4000_0000 && paddr + len <= 0x8000_0000
    }
}

/// One component's frame as vCPU `vcpu` reaches it: a read returns the staged word, then the
/// plugin's hook runs; a write lands in the window, then the hook runs.
struct Frame<'a> {
    emu: &'a Emu,
    mem: &'a Mem,
    base: u64,
    vcpu: usize,
}

impl RawFrame for Frame<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        let pa = self.base + u64::from(offset);
        let v = self.mem.read_u32(pa).unwrap();
        assert!(self.emu.mmio(self.vcpu, pa, 4, false));
        v
    }
    fn write32(&mut self, offset: u32, value: u32) {
        let pa = self.base + u64::from(offset);
        self.mem.write_u32(pa, value);
        assert!(self.emu.mmio(self.vcpu, pa, 4, true));
    }
    fn delay_us(&mut self, _us: u32) {}
}

/// A two-CPU machine with the ETF enabled as the sink and both funnel ports open, as perf (and
/// the panic dump's drivers) leave them, and a loop of two blocks for the vCPUs to run.
struct Machine {
    emu: Emu,
    mem: &'static Mem,
    blocks: [&'static TbInfo; 2],
}

impl Machine {
    fn new() -> Self {
        let mem: &'static Mem = Box::leak(Box::default());
        let cfg = Config::parse(["cpus=2", "tmc=etf", "tmc_size=65536"]).unwrap();
        let emu = Emu::new(cfg, 2, Box::new(MemRef(mem))).unwrap();
        // Five NOPs and a branch to the other block, 0x40 apart.
        let block = |start: u64, to: u64| -> &'static TbInfo {
            let mut words = vec![NOP; 5];
            let off = (to.wrapping_sub(start + 20) as i64 / 4) as u32;
            words.push(0x1400_0000 | (off & 0x03FF_FFFF));
            Box::leak(Box::new(TbInfo::new(start, &words).unwrap()))
        };
        let m = Machine {
            emu,
            mem,
            blocks: [block(CODE, CODE + 0x40), block(CODE + 0x40, CODE)],
        };
        cspd_hw::tmc::enable_circular(&mut m.frame(0, bus::TMC_OFFSET), 0).unwrap();
        let mut f = m.frame(0, bus::FUNNEL_OFFSET);
        f.write32(0xFB0, 0xC5AC_CE55);
        f.write32(0x000, 0x303);
        m
    }

    fn frame(&self, vcpu: usize, off: u64) -> Frame<'_> {
        Frame {
            emu: &self.emu,
            mem: self.mem,
            base: WINDOW + off,
            vcpu,
        }
    }

    fn etm(&self, cpu: usize) -> Frame<'_> {
        self.frame(cpu, bus::ETM_OFFSET + cpu as u64 * bus::FRAME)
    }

    /// vCPU `cpu` executes `n` blocks.
    fn run(&self, cpu: usize, n: u64) {
        for i in 0..n {
            self.emu.tb_exec(cpu, self.blocks[(i % 2) as usize]);
        }
    }

    /// CPU `cpu` enables its own trace unit with the driver's sequence and default programming.
    fn enable(&self, cpu: usize) {
        let mut f = self.etm(cpu);
        let mut etm = Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT);
        let ids = etm.read_ids().unwrap();
        let tc = TraceConfig::default_for(&ids, 0x10 + cpu as u8, false).unwrap();
        let before = self.emu.active_sessions();
        etm.enable(&tc).unwrap();
        assert_eq!(
            self.emu.active_sessions(),
            before + 1,
            "CPU {cpu}: a session"
        );
    }

    /// CPU `cpu` disables its own trace unit with the driver's sequence.
    fn disable(&self, cpu: usize) {
        let before = self.emu.active_sessions();
        let mut f = self.etm(cpu);
        Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT)
            .disable()
            .unwrap();
        assert_eq!(
            self.emu.active_sessions() + 1,
            before,
            "CPU {cpu}: session over"
        );
    }

    /// The panic path stops and saves CPU `cpu`'s trace unit (from the panicking CPU 0).
    fn panic_stop(&self, cpu: usize) {
        let mut f = self.frame(0, bus::ETM_OFFSET + cpu as u64 * bus::FRAME);
        let save = Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT).panic_save(cpu as u32);
        assert!(save.regs_valid(), "{save:?}");
    }

    #[track_caller]
    fn assert_mode(&self, mode: Instrumentation, switches: u64, when: &str) {
        assert_eq!(
            (
                self.emu.instrumentation(),
                self.emu.instrumentation_switches()
            ),
            (mode, switches),
            "{when}"
        );
    }
}

/// The emulator owns its guest memory as a box; the machine keeps a reference to it.
struct MemRef(&'static Mem);

impl GuestMem for MemRef {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        self.0.read_u32(paddr)
    }
    fn write_u32(&self, paddr: u64, value: u32) {
        self.0.write_u32(paddr, value)
    }
    fn read_u64(&self, paddr: u64) -> Option<u64> {
        self.0.read_u64(paddr)
    }
    fn writable(&self, paddr: u64, len: u64) -> bool {
        self.0.writable(paddr, len)
    }
}

/// `perf record --per-thread` of a busy task for a second: its CPU's trace unit is enabled when
/// the task is switched in and disabled when it is switched out, every few milliseconds, and
/// disabled and enabled again at AUX buffer updates; the task moves to the other CPU for a while,
/// and the CPU it leaves mostly waits for interrupts. A gap of 100 000 blocks is about 4 ms of a
/// vCPU at 25 million blocks a second; the gaps of one vCPU add up to more than the threshold,
/// which must count one gap, not their sum.
#[test]
fn perf_sessions_with_short_gaps_never_switch_the_instrumentation() {
    const CYCLES: u64 = 200;
    const GAP: u64 = 100_000;
    const _: () = assert!(GAP < T / 100);
    let m = Machine::new();
    // Blocks each vCPU ran with no session active, in all.
    let mut idle = [0u64; 2];
    // Boot, before perf.
    m.run(0, 5_000);
    m.run(1, 5_000);
    m.assert_mode(Instrumentation::Full, 0, "boot");
    for i in 0..CYCLES {
        let (cpu, other) = if (90..100).contains(&i) {
            (1, 0)
        } else {
            (0, 1)
        };
        m.enable(cpu);
        m.assert_mode(Instrumentation::Full, 0, &format!("cycle {i}: enabled"));
        // The task's slice, traced, while the other CPU runs something else.
        m.run(cpu, 1_000);
        m.run(other, 1_000);
        if i % 10 == 9 {
            // An AUX buffer update: off for a few microseconds.
            m.disable(cpu);
            m.run(cpu, 50);
            idle[cpu] += 50;
            m.assert_mode(Instrumentation::Full, 0, &format!("cycle {i}: AUX update"));
            m.enable(cpu);
            m.run(cpu, 500);
        }
        m.disable(cpu);
        m.assert_mode(Instrumentation::Full, 0, &format!("cycle {i}: disabled"));
        // Switched out: other tasks run, nothing is traced.
        m.run(cpu, GAP);
        m.run(other, GAP / 10);
        idle[cpu] += GAP;
        idle[other] += GAP / 10;
        m.assert_mode(
            Instrumentation::Full,
            0,
            &format!("cycle {i}: after the gap"),
        );
    }
    assert!(idle[0] > T, "CPU 0 ran {} idle blocks in all", idle[0]);
    assert_eq!(m.emu.active_sessions(), 0);
    assert_eq!(
        m.emu.sessions_started(),
        CYCLES + CYCLES / 10,
        "every enable was a session"
    );
    m.assert_mode(Instrumentation::Full, 0, "after the perf sessions");
}

/// A boot longer than the threshold (no session yet: full), traced CPUs, the panic path
/// stopping every trace unit, then the capture kernel: full until one vCPU has run the threshold
/// with no session (another vCPU's blocks do not add to it), light exactly once from there
/// whatever runs or is read after it, and full again when a trace unit is enabled.
#[test]
fn after_the_dump_the_instrumentation_goes_light_once_and_an_enable_brings_it_back() {
    let m = Machine::new();
    m.run(0, T + 1);
    m.run(1, 1_000);
    m.assert_mode(Instrumentation::Full, 0, "a long boot before any session");
    m.enable(0);
    m.enable(1);
    m.run(0, 2_000);
    m.run(1, 2_000);
    m.panic_stop(1);
    m.panic_stop(0);
    assert_eq!(m.emu.active_sessions(), 0);
    m.assert_mode(
        Instrumentation::Full,
        0,
        "the trace units stopped by the panic path",
    );
    // The rest of the panic path and the capture kernel's boot.
    m.run(1, T / 2);
    m.run(0, T - 1);
    m.assert_mode(Instrumentation::Full, 0, "one block short of the threshold");
    m.run(0, 1);
    m.assert_mode(Instrumentation::Light, 1, "the threshold reached");
    // Blocks already translated with callbacks, the other vCPU reaching the threshold too, and
    // the capture kernel's drivers probing the trace units: still light, no second switch.
    m.run(1, T / 2);
    m.run(0, 10_000);
    for cpu in 0..2 {
        let mut f = m.etm(cpu);
        Etm4x::new(&mut f, Interface::Mmio, Timeout::DEFAULT)
            .read_ids()
            .unwrap();
    }
    m.assert_mode(Instrumentation::Light, 1, "after the threshold");
    // A trace unit enabled again: full at once, and full while its trace runs and after.
    m.enable(1);
    m.assert_mode(Instrumentation::Full, 2, "an enable after light");
    m.run(1, 1_000);
    m.disable(1);
    m.run(1, 1_000);
    m.assert_mode(Instrumentation::Full, 2, "a short gap after that session");
}

/// A vCPU that PSCI turned off and on again: its last block ends with the `HVC` that never
/// returned, the next one runs at a physical address (the kernel's secondary entry, MMU off).
/// Its trace unit and debug logic come back at their reset values (OS locks set, the unit
/// disabled, `TRCPDSR.STICKYPD` and `EDPRSR.SPD` set) and its session is over; the other vCPU's
/// unit keeps tracing. An `HVC` that returns, and an `SVC` taken to the vectors, are no power
/// cycle.
#[test]
fn a_vcpu_restarted_by_the_firmware_comes_back_with_its_units_reset() {
    const HVC: u32 = 0xD400_0002;
    const SVC: u32 = 0xD400_0001;
    let m = Machine::new();
    let call = |at: u64, insn: u32| -> &'static TbInfo {
        Box::leak(Box::new(TbInfo::new(at, &[NOP, insn]).unwrap()))
    };
    let at = |at: u64| -> &'static TbInfo {
        Box::leak(Box::new(TbInfo::new(at, &[NOP, NOP, 0x1400_0000]).unwrap()))
    };
    m.run(0, 100);
    m.run(1, 100);
    m.enable(0);
    m.enable(1);
    m.run(1, 100);
    // A PSCI call that returns, and a system call: the vCPU goes on, its unit traces.
    m.emu.tb_exec(1, call(CODE + 0x100, HVC));
    m.emu.tb_exec(1, at(CODE + 0x108));
    m.emu.tb_exec(1, call(CODE + 0x200, SVC));
    m.emu.tb_exec(1, at(CODE + 0x4000));
    m.run(1, 10);
    assert_eq!(m.emu.active_sessions(), 2);
    let _ = m.emu.take_events();
    // CPU_OFF, then CPU_ON from the other CPU: vCPU 1 starts at the physical entry.
    m.emu.tb_exec(1, call(CODE + 0x300, HVC));
    m.run(0, 100);
    m.emu.tb_exec(1, at(0x4008_1000));
    let events = m.emu.take_events();
    assert!(
        events.iter().any(|e| e.starts_with(
            "cpu 1: powered down and up: the firmware call at 0xffff800010000304 did not \
             return, the vCPU restarted at 0x40081000"
        )),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("etm 1: powered down while tracing")),
        "{events:?}"
    );
    assert_eq!(
        m.emu.active_sessions(),
        1,
        "vCPU 1's session ended with its power"
    );
    let mut etm1 = m.etm(1);
    assert_eq!(etm1.read32(0x004) & 1, 0, "TRCPRGCTLR.EN clear");
    assert_ne!(etm1.read32(0x304) & 0b10, 0, "TRCOSLSR.OSLK set");
    assert_ne!(etm1.read32(0x314) & 0b10, 0, "TRCPDSR.STICKYPD set");
    let mut dbg1 = m.frame(0, bus::DEBUG_OFFSET + bus::FRAME);
    let edprsr = dbg1.read32(0x314);
    assert_eq!(
        edprsr & 0b10_0011,
        0b10_0011,
        "EDPRSR {edprsr:#x}: PU, SPD, OSLK"
    );
    // vCPU 0 still traces; vCPU 1's unit can be enabled again.
    let mut etm0 = m.etm(0);
    assert_eq!(etm0.read32(0x004) & 1, 1, "vCPU 0's unit still enabled");
    m.enable(1);
    m.run(1, 100);
    m.disable(1);
    m.disable(0);
}

/// A vCPU that PSCI `CPU_OFF` halted: its last block ends with the `HVC` and it goes idle. Its
/// debug logic reads powered off (`EDPRSR.PU` clear) and the sample registers do not answer
/// until it restarts; a vCPU that idles after an ordinary block (`WFI`), or after an `HVC` that
/// returned and ran on, stays powered.
#[test]
fn a_vcpu_the_firmware_halted_reads_powered_off_until_it_restarts() {
    const HVC: u32 = 0xD400_0002;
    const WFI: u32 = 0xD503_207F;
    let m = Machine::new();
    let block = |at: u64, last: u32| -> &'static TbInfo {
        Box::leak(Box::new(TbInfo::new(at, &[NOP, last]).unwrap()))
    };
    let edprsr = |vcpu: usize| {
        m.frame(0, bus::DEBUG_OFFSET + vcpu as u64 * bus::FRAME)
            .read32(0x314)
    };
    m.run(0, 100);
    m.run(1, 100);
    // Waits for interrupts, and an HVC that returned: powered.
    m.emu.tb_exec(1, block(CODE + 0x100, WFI));
    m.emu.vcpu_idle(1);
    m.emu.tb_exec(1, block(CODE + 0x200, HVC));
    m.emu.tb_exec(1, block(CODE + 0x208, WFI));
    m.emu.vcpu_idle(1);
    assert_eq!(edprsr(1) & 1, 1, "EDPRSR.PU after WFI");
    assert!(m
        .emu
        .take_events()
        .iter()
        .all(|e| !e.contains("powered off")));
    // CPU_OFF: the HVC does not return, the vCPU halts.
    m.emu.tb_exec(1, block(CODE + 0x300, HVC));
    m.emu.vcpu_idle(1);
    let events = m.emu.take_events();
    assert!(
        events.iter().any(|e| e.starts_with(
            "cpu 1: powered off: the firmware call at 0xffff800010000304 did not return and the \
             vCPU halted"
        )),
        "{events:?}"
    );
    assert_eq!(edprsr(1) & 1, 0, "EDPRSR.PU while off");
    assert_eq!(edprsr(0) & 1, 1, "vCPU 0 is still on");
    // Idle again (a spurious wake-up): said once.
    m.emu.vcpu_idle(1);
    assert!(m.emu.take_events().is_empty());
    // CPU_ON: it restarts at the physical entry, powered.
    m.emu.tb_exec(1, block(0x4008_1000, NOP));
    assert_eq!(edprsr(1) & 1, 1, "EDPRSR.PU after the restart");
}

//! Cost of sampling one CPU at panic: register accesses, delays and host time per sample, for
//! each condition a CPU can be in, against the register-level model.
//!
//! Run with `cargo bench -p cspd-hw --bench cpu_debug`.

use cspd_hw::cpu_debug::read_arch;
use cspd_hw::cpu_debug::sample_cpu;
use cspd_hw::cpu_debug::Outcome;
use cspd_hw::cpu_debug::MAX_ACCESSES_PER_SAMPLE;
use cspd_hw::cpu_debug::MAX_DELAYS_PER_SAMPLE;
use cspd_hw::cpu_debug::POWER_UP_DELAY_US;
use cspd_model::cpu_debug::CpuDebugConfig;
use cspd_model::cpu_debug::CpuDebugModel;
use cspd_model::cpu_debug::CpuState;
use cspd_model::cpu_debug::PowerMode;
use std::hint::black_box;
use std::time::Instant;

fn case(name: &str, cfg: CpuDebugConfig, pc64: bool, state: CpuState) {
    let mut m = CpuDebugModel::new(cfg);
    m.set_cpu_state(state);
    let arch = match read_arch(&mut m, pc64) {
        Ok(a) => a,
        Err(e) => {
            println!("{name:<28} probe fails: {e}");
            return;
        }
    };
    // One sample on a fresh model gives the access pattern of the panic path.
    let mut fresh = CpuDebugModel::new(cfg);
    fresh.set_cpu_state(state);
    let s = sample_cpu(&mut fresh, 0, &arch, MAX_DELAYS_PER_SAMPLE);
    let accesses = fresh.accesses();
    let delays = fresh.delays();
    let waited_ms = fresh.delayed_us() as f64 / 1000.0;

    // Host time of the sequence itself (model included), over many samples.
    let iters: u32 = if delays > 0 { 20_000 } else { 200_000 };
    let start = Instant::now();
    for _ in 0..iters {
        let mut mm = CpuDebugModel::new(cfg);
        mm.set_cpu_state(state);
        black_box(sample_cpu(
            &mut mm,
            0,
            black_box(&arch),
            MAX_DELAYS_PER_SAMPLE,
        ));
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(iters);
    let outcome = match s.outcome {
        Outcome::Sampled => "sampled",
        other => other.reason(),
    };
    println!(
        "{name:<28} accesses {accesses:>3}  delays {delays:>2} (~{waited_ms:>4.1} ms on hardware)  \
         {ns:>7.0} ns/sample on host  -> {outcome}"
    );
}

fn main() {
    let kernel = CpuState::aarch64_el1(0xFFFF_8000_0812_3454);
    println!(
        "CPU debug sample per CPU (bound: {MAX_ACCESSES_PER_SAMPLE} accesses, \
         {MAX_DELAYS_PER_SAMPLE} delays of {POWER_UP_DELAY_US} us)"
    );

    case("v8 powered", CpuDebugConfig::v8(), true, kernel);

    let mut c = CpuDebugConfig::v8();
    c.os_locked = true;
    case("v8 powered, OS lock set", c, true, kernel);

    let mut c = CpuDebugConfig::v8();
    c.core_on = false;
    c.power = PowerMode::OnRequest { delay: 3 };
    case("v8 powered down, wakes", c, true, kernel);

    let mut c = CpuDebugConfig::v8();
    c.core_on = false;
    c.power = PowerMode::Ignores;
    case("v8 never powers up", c, true, kernel);

    let mut c = CpuDebugConfig::v8();
    c.double_locked = true;
    case("v8 double-locked", c, true, kernel);

    let mut c = CpuDebugConfig::v8();
    c.prohibited = true;
    case("v8 prohibited", c, true, kernel);

    case(
        "v7 Thumb, 32-bit kernel",
        CpuDebugConfig::v7(),
        false,
        CpuState::aarch32_el1(0xC010_2046, true),
    );

    case(
        "not implemented",
        CpuDebugConfig::not_implemented(),
        true,
        kernel,
    );
}

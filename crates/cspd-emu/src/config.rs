//! The plugin's arguments: `key=value` words, as QEMU passes them.

use std::path::PathBuf;

use crate::bus;
use crate::cpu_debug::CpuDebugFaults;
use crate::etm::EtmFaults;
use crate::tmc::{TmcFaults, TmcKind};
use crate::tracker::TrackerFaults;

/// Faults to inject, by component.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// The TMC's.
    pub tmc: TmcFaults,
    /// Each CPU's ETM's, by CPU.
    pub etm: Vec<(usize, EtmFaults)>,
    /// Each CPU's debug interface's, by CPU.
    pub debug: Vec<(usize, CpuDebugFaults)>,
    /// Mistakes of the execution tracker itself, on every CPU (test-only: they make the trace
    /// and the ground truth wrong alike, for the independent judge to catch).
    pub tracker: TrackerFaults,
}

impl Faults {
    /// Returns the faults of CPU `cpu`'s ETM.
    pub fn etm_of(&self, cpu: usize) -> EtmFaults {
        self.etm
            .iter()
            .find(|(c, _)| *c == cpu)
            .map(|(_, f)| *f)
            .unwrap_or_default()
    }

    /// Returns the faults of CPU `cpu`'s debug interface.
    pub fn debug_of(&self, cpu: usize) -> CpuDebugFaults {
        self.debug
            .iter()
            .find(|(c, _)| *c == cpu)
            .map(|(_, f)| *f)
            .unwrap_or_default()
    }
}

/// The configuration of the emulated components.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file that backs guest RAM (`ram=`).
    pub ram: Option<PathBuf>,
    /// Guest physical address of the first byte of that file (`ram_base=`, default 0x40000000).
    pub ram_base: u64,
    /// Guest physical address of the register window (`window=`).
    pub window: u64,
    /// Number of CPUs with an ETM and a debug interface (`cpus=`, default: every vCPU).
    pub cpus: Option<usize>,
    /// ETF, ETB or ETR (`tmc=etf|etb|etr`, default ETF).
    pub tmc_kind: TmcKind,
    /// Trace RAM size in bytes (`tmc_size=`, default 64 KiB; an ETR's buffer is in guest memory,
    /// sized by the driver through `RSZ`).
    pub tmc_size: usize,
    /// Where the ground truth goes (`truth=`); `None` keeps none.
    pub truth: Option<PathBuf>,
    /// How many events of each vCPU the ground truth keeps at least (`truth_depth=`, default
    /// 4096).
    pub truth_depth: usize,
    /// Sink input, in bytes, whose events the ground truth keeps beyond `truth_depth`
    /// (`truth_bytes=`, default 0: none): sized to the sink's buffer, the truth reaches back to
    /// the oldest trace the sink holds.
    pub truth_bytes: u64,
    /// Where the plugin logs (`log=`); `None` logs through QEMU.
    pub log: Option<PathBuf>,
    /// Where the TMC's trace RAM goes, oldest word first, each time capture stops
    /// (`tmc_dump=`); `None` writes none. While the newest stops held nothing, `<tmc_dump>.held`
    /// is the newest stop that held trace.
    pub tmc_dump: Option<PathBuf>,
    /// How many of the first stops also keep their trace memory as `<tmc_dump>.N` (N from 1;
    /// `tmc_stops=`, default 0), for a run that reads the sink before its last stop (the device
    /// file).
    pub tmc_stops: u32,
    /// Faults (`fault=NAME`, `fault=NAME@CPU` or `fault=NAME@all`, repeatable).
    pub faults: Faults,
    /// An address whose first execution by a traced vCPU is logged with the counters
    /// (`mark=ADDR`), for a benchmark to measure from there (a function's entry, as a crash
    /// path's when no stop point marks it).
    pub mark: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            ram: None,
            ram_base: 0x4000_0000,
            window: bus::DEFAULT_WINDOW_BASE,
            cpus: None,
            tmc_kind: TmcKind::Etf,
            tmc_size: 64 * 1024,
            truth: None,
            truth_depth: 4096,
            truth_bytes: 0,
            log: None,
            tmc_dump: None,
            tmc_stops: 0,
            faults: Faults::default(),
            mark: None,
        }
    }
}

/// The fault names `fault=` takes.
pub const FAULT_NAMES: [&str; 12] = [
    "tmc-never-ready",
    "tmc-flush-stuck",
    "tmc-rrd-stuck",
    "tmc-rrd-never-empty",
    "tracker-elr-off",
    "tracker-indirect-as-exception",
    "tracker-cond-misread",
    "debug-power-off@CPU",
    "debug-ignore-corepurq@CPU",
    "debug-double-lock@CPU",
    "etm-os-lock@CPU",
    "etm-never-idle@CPU",
];

fn number(key: &str, v: &str) -> Result<u64, String> {
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map_err(|_| format!("{key}={v}: not a number"))
}

fn size(key: &str, v: &str) -> Result<usize, String> {
    let (digits, mult) = match v.as_bytes().last() {
        Some(b'K' | b'k') => (&v[..v.len() - 1], 1024),
        Some(b'M' | b'm') => (&v[..v.len() - 1], 1024 * 1024),
        _ => (v, 1),
    };
    let n = number(key, digits)?;
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{key}={v}: too large"))
}

impl Config {
    /// Parses the plugin's arguments.
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut c = Self::default();
        for arg in args {
            let (key, v) = arg
                .split_once('=')
                .ok_or_else(|| format!("argument '{arg}' is not key=value"))?;
            match key {
                "ram" => c.ram = Some(PathBuf::from(v)),
                "ram_base" => c.ram_base = number(key, v)?,
                "window" => {
                    c.window = number(key, v)?;
                    if c.window & 0xFFF != 0 {
                        return Err(format!("window={v}: not 4 KiB aligned"));
                    }
                }
                "cpus" => {
                    let n = size(key, v)?;
                    if n == 0 || n > bus::MAX_CPUS {
                        return Err(format!("cpus={v}: must be 1..={}", bus::MAX_CPUS));
                    }
                    c.cpus = Some(n);
                }
                "tmc" => {
                    c.tmc_kind = match v {
                        "etf" => TmcKind::Etf,
                        "etb" => TmcKind::Etb,
                        "etr" => TmcKind::Etr,
                        _ => return Err(format!("tmc={v}: must be etf, etb or etr")),
                    }
                }
                "tmc_size" => c.tmc_size = size(key, v)?,
                "truth" => c.truth = Some(PathBuf::from(v)),
                "truth_depth" => {
                    c.truth_depth = size(key, v)?;
                    if c.truth_depth == 0 || c.truth_depth > 1 << 20 {
                        return Err(format!("truth_depth={v}: must be 1..=1048576"));
                    }
                }
                "truth_bytes" => {
                    let n = size(key, v)?;
                    if n > 1 << 30 {
                        return Err(format!("truth_bytes={v}: must be at most 1 GiB"));
                    }
                    c.truth_bytes = n as u64;
                }
                "log" => c.log = Some(PathBuf::from(v)),
                "tmc_dump" => c.tmc_dump = Some(PathBuf::from(v)),
                "tmc_stops" => {
                    c.tmc_stops = u32::try_from(number(key, v)?)
                        .ok()
                        .filter(|&n| n <= 64)
                        .ok_or_else(|| format!("tmc_stops={v}: must be 0..=64"))?;
                }
                "fault" => c.fault(v)?,
                "mark" => c.mark = Some(number(key, v)?),
                _ => return Err(format!("unknown argument '{key}' (in '{arg}')")),
            }
        }
        Ok(c)
    }

    fn fault(&mut self, v: &str) -> Result<(), String> {
        // `NAME@all`: the fault on every CPU the machine can have.
        if let Some(name) = v.strip_suffix("@all") {
            if !FAULT_NAMES
                .iter()
                .any(|f| f.strip_suffix("@CPU") == Some(name))
            {
                return Err(format!(
                    "fault={v}: @all applies to the per-CPU faults ({})",
                    FAULT_NAMES
                        .iter()
                        .filter_map(|f| f.strip_suffix("@CPU"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for cpu in 0..bus::MAX_CPUS {
                self.fault(&format!("{name}@{cpu}"))?;
            }
            return Ok(());
        }
        let (name, cpu) = match v.split_once('@') {
            Some((n, c)) => {
                let cpu = usize::try_from(number("fault", c)?)
                    .ok()
                    .filter(|&c| c < bus::MAX_CPUS)
                    .ok_or_else(|| format!("fault={v}: CPU out of range"))?;
                (n, Some(cpu))
            }
            None => (v, None),
        };
        let need_cpu = || cpu.ok_or_else(|| format!("fault={v}: name the CPU, as {name}@N"));
        let f = &mut self.faults;
        match name {
            "tmc-never-ready" => f.tmc.never_ready = true,
            "tmc-flush-stuck" => f.tmc.flush_stuck = true,
            "tmc-rrd-stuck" => f.tmc.rrd_stuck = true,
            "tmc-rrd-never-empty" => f.tmc.rrd_never_empty = true,
            "tracker-elr-off" => f.tracker.elr_off = true,
            "tracker-indirect-as-exception" => f.tracker.indirect_as_exception = true,
            "tracker-cond-misread" => f.tracker.cond_misread = true,
            "etm-os-lock" | "etm-never-idle" => {
                let c = need_cpu()?;
                let mut e = self.faults.etm_of(c);
                if name == "etm-os-lock" {
                    e.os_lock_stuck = true;
                } else {
                    e.never_idle = true;
                }
                self.faults.etm.retain(|(x, _)| *x != c);
                self.faults.etm.push((c, e));
            }
            "debug-power-off" | "debug-ignore-corepurq" | "debug-double-lock" => {
                let c = need_cpu()?;
                let mut d = self.faults.debug_of(c);
                match name {
                    "debug-power-off" => d.power_stays_off = true,
                    "debug-ignore-corepurq" => d.ignores_corepurq = true,
                    _ => d.double_lock = true,
                }
                self.faults.debug.retain(|(x, _)| *x != c);
                self.faults.debug.push((c, d));
            }
            _ => {
                return Err(format!(
                    "fault={v}: unknown fault (known: {})",
                    FAULT_NAMES.join(", ")
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_cpu_fault_applies_to_one_cpu_or_all() {
        let c = Config::parse(["fault=debug-power-off@1"]).unwrap();
        assert!(c.faults.debug_of(1).power_stays_off);
        assert!(!c.faults.debug_of(0).power_stays_off);
        let c = Config::parse(["fault=debug-power-off@all", "fault=debug-double-lock@3"]).unwrap();
        for cpu in 0..bus::MAX_CPUS {
            assert!(c.faults.debug_of(cpu).power_stays_off, "CPU {cpu}");
        }
        assert!(c.faults.debug_of(3).double_lock);
        assert!(!c.faults.debug_of(2).double_lock);
        let e = Config::parse(["fault=tmc-never-ready@all"]).unwrap_err();
        assert!(e.contains("@all applies to the per-CPU faults"), "{e}");
        assert!(Config::parse(["fault=debug-power-off@x"]).is_err());
    }

    #[test]
    fn tracker_faults() {
        let c = Config::parse(["fault=tracker-elr-off", "fault=tracker-cond-misread"]).unwrap();
        assert!(c.faults.tracker.elr_off && c.faults.tracker.cond_misread);
        assert!(!c.faults.tracker.indirect_as_exception);
        assert!(Config::parse(["fault=tracker-elr-off@all"]).is_err());
    }

    #[test]
    fn tmc_stops() {
        assert_eq!(Config::parse([]).unwrap().tmc_stops, 0);
        assert_eq!(Config::parse(["tmc_stops=3"]).unwrap().tmc_stops, 3);
        let e = Config::parse(["tmc_stops=65"]).unwrap_err();
        assert!(e.contains("tmc_stops=65: must be 0..=64"), "{e}");
    }

    #[test]
    fn truth_bytes() {
        assert_eq!(
            Config::parse(["truth_bytes=1M"]).unwrap().truth_bytes,
            1 << 20
        );
        assert_eq!(Config::parse([]).unwrap().truth_bytes, 0);
        let e = Config::parse(["truth_bytes=2048M"]).unwrap_err();
        assert!(
            e.contains("truth_bytes=2048M: must be at most 1 GiB"),
            "{e}"
        );
    }
}

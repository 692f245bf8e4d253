//! Behaviour of the ETMv4 register-level model itself.

use cspd_model::access::RawFrame;
use cspd_model::access::CS_UNLOCK_KEY;
use cspd_model::etm4x::Etm4xFaults;
use cspd_model::etm4x::Etm4xModel;
use cspd_model::etm4x::ModelIds;
use cspd_model::etm4x::ModelInterface;

const TRCPRGCTLR: u32 = 0x004;
const TRCSTATR: u32 = 0x00C;
const TRCCONFIGR: u32 = 0x010;
const TRCTRACEIDR: u32 = 0x040;
const TRCIDR0: u32 = 0x1E0;
const TRCOSLAR: u32 = 0x300;
const TRCOSLSR: u32 = 0x304;
const TRCPDSR: u32 = 0x314;
const LAR: u32 = 0xFB0;
const LSR: u32 = 0xFB4;
const TRCAUTHSTATUS: u32 = 0xFB8;
const TRCDEVARCH: u32 = 0xFBC;

fn unlocked() -> Etm4xModel {
    let mut m = Etm4xModel::cortex_a53();
    m.write32(LAR, CS_UNLOCK_KEY);
    m.write32(TRCOSLAR, 0);
    m
}

#[test]
fn reset_state_is_os_locked_and_software_locked() {
    let mut m = Etm4xModel::cortex_a53();
    assert_eq!(m.read32(TRCOSLSR) & 0b1010, 0b1010, "OSLM=0b010, OSLK set");
    assert_eq!(m.read32(LSR), 0b11, "SLI and SLK");
    // Trace registers are unreadable while the OS lock is set; management ones are not.
    assert_eq!(m.read32(TRCIDR0), 0);
    assert_eq!(m.stats().blocked, 1);
    assert_eq!(m.read32(TRCDEVARCH), 0x4770_4A13);
    assert_eq!(m.read32(TRCAUTHSTATUS), 0xCC);
    // Writes are ignored under the software lock, even to TRCOSLAR.
    m.write32(TRCOSLAR, 0);
    assert!(m.os_locked());
    assert_eq!(m.stats().sw_locked_writes, 1);
    m.write32(LAR, CS_UNLOCK_KEY);
    assert_eq!(m.read32(LSR), 0b01);
    m.write32(TRCOSLAR, 0);
    assert!(!m.os_locked());
    assert_eq!(m.read32(TRCIDR0), 0x2800_0EA1);
    // A wrong key locks again.
    m.write32(LAR, 0x1234);
    assert!(m.sw_locked());
}

#[test]
fn status_follows_enable_after_the_configured_number_of_accesses() {
    for latency in [0u32, 1, 4, 9] {
        let mut m = unlocked();
        m.set_latency(latency);
        m.write32(TRCPRGCTLR, 1);
        let mut reads = 0;
        while m.read32(TRCSTATR) & 1 != 0 {
            reads += 1;
            assert!(reads < 100);
        }
        assert_eq!(reads, latency.saturating_sub(1), "latency {latency}");
        m.write32(TRCPRGCTLR, 0);
        let mut reads = 0;
        while m.read32(TRCSTATR) & 0b11 != 0b11 {
            reads += 1;
            assert!(reads < 100);
        }
        assert_eq!(reads, latency.saturating_sub(1), "latency {latency}");
    }
}

#[test]
fn registers_store_read_back_and_refuse_writes_while_running() {
    let mut m = unlocked();
    m.write32(TRCCONFIGR, 0x10C1);
    m.write32(TRCTRACEIDR, 0x22);
    assert_eq!(m.read32(TRCCONFIGR), 0x10C1);
    assert_eq!(m.read32(TRCTRACEIDR), 0x22);
    // ID registers are read-only.
    m.write32(TRCIDR0, 0);
    assert_eq!(m.read32(TRCIDR0), 0x2800_0EA1);
    m.set_latency(1);
    m.write32(TRCPRGCTLR, 1);
    assert_eq!(m.read32(TRCSTATR) & 1, 0);
    m.write32(TRCCONFIGR, 0);
    assert_eq!(m.read32(TRCCONFIGR), 0x10C1);
    assert_eq!(m.stats().busy_writes, 1);
}

#[test]
fn faults_show_as_the_hardware_would() {
    let mut m = unlocked();
    m.set_faults(Etm4xFaults {
        stuck_busy: true,
        ..Etm4xFaults::default()
    });
    m.write32(TRCPRGCTLR, 1);
    for _ in 0..10 {
        m.read32(TRCSTATR);
    }
    m.write32(TRCPRGCTLR, 0);
    for _ in 0..100 {
        assert_eq!(m.read32(TRCSTATR) & 1, 0, "never idle");
    }

    let mut m = Etm4xModel::cortex_a57();
    m.set_faults(Etm4xFaults {
        os_lock_stuck: true,
        ..Etm4xFaults::default()
    });
    m.write32(LAR, CS_UNLOCK_KEY);
    m.write32(TRCOSLAR, 0);
    assert!(m.os_locked());

    let mut m = unlocked();
    assert_eq!(
        m.read32(TRCPDSR) & 0b11,
        0b11,
        "powered, sticky power-down from reset"
    );
    assert_eq!(
        m.read32(TRCPDSR) & 0b11,
        0b01,
        "sticky bit cleared by the read"
    );
    m.set_faults(Etm4xFaults {
        powered_down: true,
        ..Etm4xFaults::default()
    });
    assert_eq!(m.read32(TRCPDSR) & 1, 0);
    assert_eq!(m.read32(TRCIDR0), 0);
    assert_eq!(m.read32(TRCDEVARCH), 0x4770_4A13);
}

#[test]
fn sysreg_interface_has_no_software_lock() {
    let mut m = Etm4xModel::new(ModelIds::CORTEX_A53, ModelInterface::SysReg);
    assert_eq!(m.read32(LSR), 0);
    assert_eq!(m.read32(TRCPDSR), 0);
    m.write32(TRCOSLAR, 0);
    assert!(!m.os_locked());
    assert_eq!(m.read32(TRCIDR0 + 4), 0x4100_F403);
}

#[test]
fn id_values_are_those_of_the_juno_snapshot() {
    let dir = cspd_testdata::opencsd_dir().join("juno-ret-stck");
    // device_6 is cpu_0 (Cortex-A53), device_10 is cpu_4 (Cortex-A57).
    for (file, ids) in [
        ("device_6.ini", ModelIds::CORTEX_A53),
        ("device_10.ini", ModelIds::CORTEX_A57),
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            cspd_testdata::missing(&format!("{} not readable", dir.join(file).display()));
            return;
        };
        let mut seen = 0;
        for line in text.lines() {
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let Some(name) = name.split('(').next() else {
                continue;
            };
            let Ok(v) = u32::from_str_radix(value.trim().trim_start_matches("0x"), 16) else {
                continue;
            };
            let want = match name {
                "TRCAUTHSTATUS" => ids.authstatus,
                n if n.starts_with("TRCIDR") => {
                    let i: usize = n[6..].parse().unwrap();
                    ids.idr[i]
                }
                _ => continue,
            };
            assert_eq!(v, want, "{file}: {name}");
            seen += 1;
        }
        assert_eq!(seen, 10, "{file}: TRCIDR0/1/2/8..13 and TRCAUTHSTATUS");
    }
}

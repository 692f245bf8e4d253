//! The generated ETMv4 stream, written into an OpenCSD snapshot, must decode with
//! `trc_pkt_lister` to exactly the instruction ranges the generator walked.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use cspd_hw::etm4x::Etm4x;
use cspd_hw::etm4x::Etm4xIds;
use cspd_hw::etm4x::Interface;
use cspd_hw::etm4x::SavedState;
use cspd_hw::etm4x::Timeout;
use cspd_hw::etm4x::TraceConfig;
use cspd_model::etm4x::Etm4xModel;
use cspd_model::etm4x_gen::generate;
use cspd_model::etm4x_gen::generate_with;
use cspd_model::etm4x_gen::BranchKind;
use cspd_model::etm4x_gen::CodeImage;
use cspd_model::etm4x_gen::Decision;
use cspd_model::etm4x_gen::ExecRange;
use cspd_model::etm4x_gen::GenConfig;
use cspd_model::etm4x_gen::StopReason;

// --- A small A64 assembler for the instructions the tests need. ---

const NOP: u32 = 0xD503_201F;

fn add_x0_1() -> u32 {
    0x9100_0400
}
fn cmp_x0_x1() -> u32 {
    0xEB01_001F
}
fn b(from: u64, to: u64) -> u32 {
    let off = (to.wrapping_sub(from) as i64) / 4;
    0x1400_0000 | (off as u32 & 0x03FF_FFFF)
}
fn bl(from: u64, to: u64) -> u32 {
    0x8000_0000 | b(from, to)
}
fn b_cond(from: u64, to: u64, cond: u32) -> u32 {
    let off = (to.wrapping_sub(from) as i64) / 4;
    0x5400_0000 | ((off as u32 & 0x7_FFFF) << 5) | cond
}
fn cbnz_x(from: u64, to: u64, rt: u32) -> u32 {
    let off = (to.wrapping_sub(from) as i64) / 4;
    0xB500_0000 | ((off as u32 & 0x7_FFFF) << 5) | rt
}
fn cbz_w(from: u64, to: u64, rt: u32) -> u32 {
    let off = (to.wrapping_sub(from) as i64) / 4;
    0x3400_0000 | ((off as u32 & 0x7_FFFF) << 5) | rt
}
fn tbz(from: u64, to: u64, rt: u32, bit: u32) -> u32 {
    let off = (to.wrapping_sub(from) as i64) / 4;
    0x3600_0000 | ((bit & 0x1F) << 19) | ((off as u32 & 0x3FFF) << 5) | rt
}
fn br(rn: u32) -> u32 {
    0xD61F_0000 | (rn << 5)
}
fn blr(rn: u32) -> u32 {
    0xD63F_0000 | (rn << 5)
}
const RET: u32 = 0xD65F_03C0;

/// A program with a main loop, two functions, direct, conditional and indirect branches.
///
/// Returns the code and the targets the indirect branches may go to.
fn program(base: u64) -> (Vec<u8>, [u64; 2], [u64; 2]) {
    let mut w = vec![NOP; 0x400 / 4];
    let mut put = |off: u64, insn: u32| w[(off / 4) as usize] = insn;
    let a = |off: u64| base + off;
    // main:
    put(0x00, add_x0_1());
    put(0x04, cmp_x0_x1());
    put(0x08, b_cond(a(0x08), a(0x28), 0x0)); // b.eq
    put(0x0C, bl(a(0x0C), a(0x100)));
    put(0x10, cbnz_x(a(0x10), a(0x00), 2));
    put(0x14, tbz(a(0x14), a(0x20), 3, 5));
    put(0x18, blr(8));
    put(0x1C, b(a(0x1C), a(0x00)));
    put(0x20, br(9));
    put(0x24, NOP);
    put(0x28, b_cond(a(0x28), a(0x00), 0xB)); // b.lt
    put(0x2C, b(a(0x2C), a(0x00)));
    put(0x40, add_x0_1());
    put(0x44, cbz_w(a(0x44), a(0x50), 4));
    put(0x48, NOP);
    put(0x4C, NOP);
    put(0x50, b(a(0x50), a(0x300)));
    // func_a:
    put(0x100, add_x0_1());
    put(0x104, b_cond(a(0x104), a(0x10C), 0x1)); // b.ne
    put(0x108, NOP);
    put(0x10C, RET);
    // func_b:
    put(0x200, add_x0_1());
    put(0x204, bl(a(0x204), a(0x100)));
    put(0x208, RET);
    // far block: jumps back through a long branch.
    put(0x300, NOP);
    put(0x304, b(a(0x304), a(0x00)));
    let bytes = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    (bytes, [a(0x200), a(0x100)], [a(0x00), a(0x40)])
}

/// A deterministic xorshift generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// --- Snapshot writing and decoding. ---

fn formatted(data: &[u8], id: u8) -> Vec<u8> {
    // CoreSight formatter frames: 16 bytes, even bytes carry an ID change (bit 0 set) or data
    // bits 7:1 (bit 0 clear, data bit 0 in the auxiliary byte 15), odd bytes carry data.
    // Every frame starts with the source ID, so each holds 14 data bytes. Padding goes to
    // the null ID 0.
    let mut out = Vec::new();
    for chunk in data.chunks(14) {
        let mut f = [0u8; 16];
        f[0] = (id << 1) | 1;
        let mut aux = 0u8;
        let mut pos = 1;
        for &d in chunk {
            if pos % 2 == 1 {
                f[pos] = d;
            } else {
                f[pos] = d & 0xFE;
                aux |= (d & 1) << (pos / 2);
            }
            pos += 1;
        }
        if pos < 15 {
            if pos % 2 == 0 {
                // Switch to the null ID at once; the rest of the frame is its data.
                f[pos] = 1;
            } else {
                // The last data byte sits in an even slot: put the ID change there with the
                // auxiliary bit set ("after the next byte") and move the byte behind it.
                let p = pos - 1;
                f[pos] = f[p] | ((aux >> (p / 2)) & 1);
                f[p] = 1;
                aux |= 1 << (p / 2);
            }
        }
        f[15] = aux;
        out.extend_from_slice(&f);
    }
    out
}

fn trc_pkt_lister() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("trc_pkt_lister"))
        .find(|p| p.is_file())
}

/// Drives the model through the shared hardware logic to get the registers a real unit
/// would report, as the panic path saves them.
fn etm_registers(cfg: &GenConfig, trace_id: u8) -> SavedState {
    let mut model = Etm4xModel::cortex_a53();
    let mut etm = Etm4x::new(&mut model, Interface::Mmio, Timeout::DEFAULT);
    let ids: Etm4xIds = etm.read_ids().expect("ids");
    let mut tc = TraceConfig::default_for(&ids, trace_id, cfg.timestamp.is_some()).unwrap();
    tc.configr = cfg.trcconfigr();
    etm.enable(&tc).expect("enable");
    let saved = etm.panic_save(0);
    assert!(saved.regs_valid());
    saved
}

fn device_ini(s: &SavedState) -> String {
    let mut t = String::new();
    writeln!(
        t,
        "[device]\nname=ETM_0\nclass=trace_source\ntype=ETM4\n\n[regs]"
    )
    .unwrap();
    writeln!(t, "TRCCONFIGR(0x004)=0x{:08X}", s.trcconfigr).unwrap();
    writeln!(t, "TRCTRACEIDR(0x010)=0x{:08X}", s.trctraceidr).unwrap();
    writeln!(t, "TRCAUTHSTATUS(0x3EE)=0x{:08X}", s.authstatus).unwrap();
    writeln!(t, "TRCIDR0(0x078)=0x{:08X}", s.idr[0]).unwrap();
    writeln!(t, "TRCIDR1(0x079)=0x{:08X}", s.idr[1]).unwrap();
    writeln!(t, "TRCIDR2(0x07A)=0x{:08X}", s.idr[2]).unwrap();
    for n in 8..=13 {
        writeln!(t, "TRCIDR{n}(0x{:03X})=0x{:08X}", 0x60 + n - 8, s.idr[n]).unwrap();
    }
    t
}

fn write_snapshot(
    dir: &Path,
    code_base: u64,
    code: &[u8],
    trace: &[u8],
    format: &str,
    s: &SavedState,
) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("snapshot.ini"),
        "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu_0.ini\ndevice1=device_1.ini\n\n[trace]\nmetadata=trace.ini\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("cpu_0.ini"),
        format!(
            "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n\n[regs]\nPC(size:64)=0x{code_base:X}\nSP(size:64)=0\nSCTLR_EL1=0x1007\nCPSR=0x1C5\n\n[dump1]\nfile=code.bin\naddress=0x{code_base:X}\nlength=0x{:X}\n",
            code.len()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("device_1.ini"), device_ini(s)).unwrap();
    std::fs::write(
        dir.join("trace.ini"),
        format!(
            "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=trace.bin\nformat={format}\n\n[source_buffers]\nETM_0=ETB_0\n\n[core_trace_sources]\ncpu_0=ETM_0\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("code.bin"), code).unwrap();
    std::fs::write(dir.join("trace.bin"), trace).unwrap();
}

/// A decoded instruction range: start, end, instruction count, E (taken) or N.
type Decoded = (u64, u64, u32, bool);

fn decode(dir: &Path) -> (Vec<Decoded>, String) {
    let bin = trc_pkt_lister().expect("checked by caller");
    let out = Command::new(bin)
        .arg("-ss_dir")
        .arg(dir)
        .arg("-decode")
        .arg("-logstdout")
        .output()
        .expect("run trc_pkt_lister");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut ranges = Vec::new();
    for line in text.lines() {
        let Some(rest) = line
            .split("OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=")
            .nth(1)
        else {
            continue;
        };
        let (start, rest) = rest.split_once(":[").unwrap();
        let (end, rest) = rest.split_once(']').unwrap();
        let n = rest
            .split("num_i(")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap();
        let after_isa = rest.split("(ISA=A64) ").nth(1).unwrap();
        let taken = after_isa.starts_with('E');
        ranges.push((
            u64::from_str_radix(start.trim_start_matches("0x"), 16).unwrap(),
            u64::from_str_radix(end.trim_start_matches("0x"), 16).unwrap(),
            n.parse().unwrap(),
            taken,
        ));
    }
    (ranges, text)
}

fn expected(ranges: &[ExecRange]) -> Vec<Decoded> {
    ranges
        .iter()
        .map(|r| (r.start, r.end, r.insns, r.taken))
        .collect()
}

fn check_decode(
    name: &str,
    base: u64,
    code: &[u8],
    stream: &[u8],
    cfg: &GenConfig,
    ranges: &[ExecRange],
) -> bool {
    if trc_pkt_lister().is_none() {
        cspd_testdata::missing(&format!(
            "{name}: trc_pkt_lister not found in PATH (Debian package libopencsd-bin)"
        ));
        return false;
    }
    let saved = etm_registers(cfg, 0x10);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("etm4x_decode");
    for format in ["source_data", "coresight"] {
        let dir = root.join(format!("{name}-{format}"));
        let trace = if format == "coresight" {
            formatted(stream, 0x10)
        } else {
            stream.to_vec()
        };
        write_snapshot(&dir, base, code, &trace, format, &saved);
        let (decoded, text) = decode(&dir);
        let want = expected(ranges);
        if decoded != want {
            let first = decoded
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(decoded.len().min(want.len()));
            panic!(
                "{name} ({format}): decoded {} ranges, generated {}; first difference at {first}: \
                 decoded {:x?} generated {:x?}\n{}",
                decoded.len(),
                want.len(),
                decoded.get(first),
                want.get(first),
                text.lines().take(80).collect::<Vec<_>>().join("\n")
            );
        }
        for bad in ["ADDR_NACC", "I_BAD", "ERR"] {
            assert!(
                !text.contains(bad),
                "{name} ({format}): decoder reported {bad}\n{text}"
            );
        }
    }
    true
}

// --- Tests. ---

#[test]
fn known_short_path_walks_as_expected() {
    let base = 0xFFFF_0000_1000_0000;
    let (code, _, _) = program(base);
    let image = CodeImage { base, bytes: &code };
    let d = [
        Decision::NotTaken,         // b.eq @0x08
        Decision::Taken,            // b.ne @0x104 in func_a
        Decision::Taken,            // ret @0x10C -> 0x10
        Decision::NotTaken,         // cbnz @0x10
        Decision::NotTaken,         // tbz @0x14
        Decision::To(base + 0x200), // blr @0x18
        Decision::NotTaken,         // b.ne @0x104
        Decision::Taken,            // ret -> 0x208
        Decision::Taken,            // ret -> 0x1C
    ];
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    let sum = generate(&image, base, &d, &GenConfig::kernel(), &mut buf, |r| {
        got.push(r)
    })
    .unwrap();
    assert_eq!(sum.stop, StopReason::DecisionsExhausted);
    assert_eq!(sum.decisions_used, d.len());
    let a = |o: u64| base + o;
    let want: Vec<(u64, u64, bool)> = vec![
        (a(0x00), a(0x0C), false),
        (a(0x0C), a(0x10), true),
        (a(0x100), a(0x108), true),
        (a(0x10C), a(0x110), true),
        (a(0x10), a(0x14), false),
        (a(0x14), a(0x18), false),
        (a(0x18), a(0x1C), true),
        (a(0x200), a(0x208), true),
        (a(0x100), a(0x108), false),
        (a(0x108), a(0x110), true),
        (a(0x208), a(0x20C), true),
        (a(0x1C), a(0x20), true),
        (a(0x00), a(0x0C), false),
    ];
    let got3: Vec<_> = got.iter().map(|r| (r.start, r.end, r.taken)).collect();
    // The last b.eq at 0x08 needed a tenth decision: the walk stopped there.
    assert_eq!(got3, want[..want.len() - 1].to_vec());
    assert_eq!(
        got.iter().map(|r| u64::from(r.insns)).sum::<u64>(),
        sum.insns
    );
    // The stream starts with A-sync, Trace Info and Trace On, and ends with an atom packet.
    assert_eq!(&buf[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]);
    assert_eq!(&buf[12..15], &[0x01, 0x01, 0x00]);
    assert_eq!(buf[15], 0x04);
    assert_eq!(buf[16], 0x85);
    check_decode(
        "short",
        base,
        &code,
        &buf[..sum.bytes],
        &GenConfig::kernel(),
        &got,
    );
}

fn random_walk(
    seed: u64,
    cfg: &GenConfig,
    decisions: usize,
) -> (u64, Vec<u8>, Vec<u8>, Vec<ExecRange>) {
    let base = 0xFFFF_8000_0808_0000;
    let (code, blr_targets, br_targets) = program(base);
    let image = CodeImage { base, bytes: &code };
    let mut rng = Rng(seed);
    let mut left = decisions;
    let mut ranges = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let sum = generate_with(
        &image,
        base,
        |site| {
            if left == 0 {
                return None;
            }
            left -= 1;
            let r = rng.next();
            Some(match site.kind {
                BranchKind::Conditional if r & 1 == 0 => Decision::Taken,
                BranchKind::Conditional => Decision::NotTaken,
                BranchKind::IndirectLink => Decision::To(blr_targets[(r as usize >> 3) % 2]),
                BranchKind::Indirect => Decision::To(br_targets[(r as usize >> 3) % 2]),
                _ => Decision::Taken,
            })
        },
        cfg,
        &mut buf,
        |r| ranges.push(r),
    )
    .unwrap();
    assert_eq!(sum.stop, StopReason::DecisionsExhausted);
    assert_eq!(sum.ranges as usize, ranges.len());
    buf.truncate(sum.bytes);
    (base, code, buf, ranges)
}

#[test]
fn random_paths_through_hand_assembled_code_decode_exactly() {
    let mut cfg = GenConfig::kernel();
    cfg.sync_period = 256;
    let (base, code, stream, ranges) = random_walk(0x1234_5678, &cfg, 3000);
    assert!(ranges.len() > 3000, "only {} ranges", ranges.len());
    let kinds: HashSet<_> = ranges
        .iter()
        .map(|r| format!("{:?}{}", r.kind, r.taken))
        .collect();
    for k in [
        "Conditionaltrue",
        "Conditionalfalse",
        "Directtrue",
        "DirectLinktrue",
        "Indirecttrue",
        "IndirectLinktrue",
        "Returntrue",
    ] {
        assert!(kinds.contains(k), "path has no {k}");
    }
    check_decode("random", base, &code, &stream, &cfg, &ranges);
}

#[test]
fn timestamps_vmid_and_no_context_decode_exactly() {
    let mut cfg = GenConfig::kernel();
    cfg.context_id = None;
    cfg.vmid = Some(5);
    cfg.el = 2;
    cfg.timestamp = Some(0x1_0000_0000_0123);
    cfg.timestamp_step = 0x1_0001;
    cfg.timestamp_every = 7;
    cfg.sync_period = 1000;
    let (base, code, stream, ranges) = random_walk(0xDEAD_BEEF, &cfg, 1500);
    check_decode("ts", base, &code, &stream, &cfg, &ranges);
}

/// The real Juno kernel image from OpenCSD's `juno-ret-stck` snapshot, when present.
fn juno_kernel() -> Option<(u64, Vec<u8>)> {
    let dir = cspd_testdata::opencsd_dir().join("juno-ret-stck");
    let bytes = std::fs::read(dir.join("kernel_dump.bin")).ok()?;
    Some((0xFFFF_0000_0808_0000, bytes))
}

#[test]
fn random_paths_through_real_kernel_code_decode_exactly() {
    let Some((base, code)) = juno_kernel() else {
        cspd_testdata::missing("juno-ret-stck/kernel_dump.bin is not readable");
        return;
    };
    let image = CodeImage { base, bytes: &code };
    // Function entries seen in the snapshot's own trace.
    let starts = [
        0xFFFF_0000_0814_92C8u64,
        0xFFFF_0000_0808_1528,
        0xFFFF_0000_080D_3C78,
        0xFFFF_0000_0812_0A78,
        0xFFFF_0000_0814_A2C0,
        0xFFFF_0000_0814_8508,
    ];
    let mut total = 0;
    for (i, &start) in starts.iter().enumerate() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ start);
        let mut left = 400usize;
        let mut ranges = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut cfg = GenConfig::kernel();
        cfg.sync_period = 512;
        let sum = generate_with(
            &image,
            start,
            |site| {
                if left == 0 {
                    return None;
                }
                left -= 1;
                let r = rng.next();
                Some(match site.kind {
                    BranchKind::Conditional if r.checked_rem(3) == Some(0) => Decision::Taken,
                    BranchKind::Conditional => Decision::NotTaken,
                    // Return to the caller on the path, else restart at a known function.
                    BranchKind::Return if site.return_to.is_some() => Decision::Taken,
                    _ => Decision::To(start),
                })
            },
            &cfg,
            &mut buf,
            |r| ranges.push(r),
        )
        .unwrap();
        buf.truncate(sum.bytes);
        eprintln!(
            "kernel path {i}: {} ranges, {} insns, stop {:x?}",
            ranges.len(),
            sum.insns,
            sum.stop
        );
        total += ranges.len();
        check_decode(&format!("kernel{i}"), base, &code, &buf, &cfg, &ranges);
    }
    assert!(total > 500, "paths too short: {total} ranges");
}

#[test]
fn a_flipped_atom_changes_the_decode() {
    if trc_pkt_lister().is_none() {
        cspd_testdata::missing("trc_pkt_lister not found in PATH (Debian package libopencsd-bin)");
        return;
    }
    let cfg = GenConfig::kernel();
    let (base, code, mut stream, ranges) = random_walk(42, &cfg, 40);
    // The first packet after the start-up address is an atom packet.
    let first_atom = 12 + 3 + 1 + 1 + 8 + 1 + 4;
    assert!(matches!(stream[first_atom], 0xF6..=0xFF | 0xD8..=0xDB));
    stream[first_atom] ^= 1;
    let saved = etm_registers(&cfg, 0x10);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("etm4x_decode/flipped");
    write_snapshot(&dir, base, &code, &stream, "source_data", &saved);
    let (decoded, _) = decode(&dir);
    assert_ne!(decoded, expected(&ranges));
}

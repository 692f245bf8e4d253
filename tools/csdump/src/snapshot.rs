//! Writing an OpenCSD snapshot directory (the CoreSight Access Library / DS-5 format that
//! `trc_pkt_lister` and OpenCSD's snapshot reader take).
//!
//! Layout: `snapshot.ini` lists the devices; `etm_<cpu>.ini` holds a trace unit's registers
//! (register name and number, as OpenCSD's reader wants them); `cpu_<cpu>.ini` a core and the
//! memory images of kernel text; `trace.ini` binds the trace buffers to the sources; each
//! sink's trace is `cstrace.bin` (or `cstrace-<i>-<name>.bin`). Trace is copied straight from
//! the input, never gathered in memory.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::path::Path;
use std::path::PathBuf;

use cspd_hw::access::AUTHSTATUS;
use cspd_hw::etm4x;
use cspd_hw::Register;

use crate::capture::Capture;
use crate::capture::Etm;
use crate::capture::MemImage;
use crate::elf::Vmlinux;
use crate::output::cstrace_name;

/// Core type written when the input names none (OpenCSD's generic ARMv8-A profile).
pub const DEFAULT_CORE_TYPE: &str = "ARMv8-A";

/// A vmlinux given on the command line: its bytes and what was read from them.
pub struct VmlinuxImage<'a> {
    /// The whole file.
    pub bytes: &'a [u8],
    /// Sections and symbols.
    pub elf: Vmlinux,
}

/// What [`write_snapshot`] wrote.
#[derive(Debug, Default)]
pub struct SnapshotOutput {
    /// Files written, in order.
    pub files: Vec<PathBuf>,
    /// Bytes of memory images written or copied.
    pub memory_bytes: u64,
    /// Notes for the user.
    pub notes: Vec<String>,
}

fn io_err(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The register number (byte offset / 4) of register `R`, as OpenCSD names registers.
fn regno<R: Register>() -> u32 {
    u32::try_from(R::OFFSET >> 2).unwrap_or(u32::MAX)
}

/// ETMv4 register names and their register numbers (byte offset / 4), as OpenCSD reads them.
fn etm_regs(e: &Etm) -> Vec<(String, u32, u32)> {
    let s = &e.state;
    let mut v = vec![
        (
            "TRCCONFIGR".to_string(),
            regno::<etm4x::regs::TRCCONFIGR>(),
            s.trcconfigr,
        ),
        (
            "TRCTRACEIDR".to_string(),
            regno::<etm4x::regs::TRCTRACEIDR>(),
            s.trctraceidr,
        ),
        (
            "TRCAUTHSTATUS".to_string(),
            regno::<AUTHSTATUS>(),
            s.authstatus,
        ),
    ];
    for (n, val) in s.idr.iter().enumerate() {
        if let Some(off) = etm4x::trcidr_offset(n) {
            v.push((format!("TRCIDR{n}"), off >> 2, *val));
        }
    }
    v
}

/// Copies `len` bytes at `offset` of `src` into `dst`, in blocks.
fn copy_range(src: &Path, offset: u64, len: u64, dst: &Path) -> io::Result<u64> {
    let mut f = File::open(src).map_err(|e| io_err(src, e))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| io_err(src, e))?;
    if !f.metadata().map_err(|e| io_err(src, e))?.is_file() {
        return Err(io_err(src, io::Error::other("not a regular file")));
    }
    let mut out = crate::output::AtomicFile::create(dst)?;
    let n = io::copy(&mut f.take(len), &mut out).map_err(|e| io_err(dst, e))?;
    out.commit()?;
    Ok(n)
}

/// Writes the snapshot of `capture` into `dir` (created if needed).
///
/// Memory images: the executable sections of `vmlinux` at their runtime addresses when given,
/// else the memory images of a snapshot input. Without an ETMv4 source the buffers are still
/// written, with no source bound to them.
pub fn write_snapshot(
    capture: &Capture<'_>,
    dir: &Path,
    vmlinux: Option<&VmlinuxImage<'_>>,
) -> io::Result<SnapshotOutput> {
    write_snapshot_with(capture, dir, vmlinux, &[])
}

/// Like [`write_snapshot`], with more memory images: `(address, bytes)` pairs, such as module
/// text read from the vmcore.
pub fn write_snapshot_with(
    capture: &Capture<'_>,
    dir: &Path,
    vmlinux: Option<&VmlinuxImage<'_>>,
    extra: &[(u64, Vec<u8>)],
) -> io::Result<SnapshotOutput> {
    crate::output::create_dir(dir)?;
    let mut out = SnapshotOutput::default();
    let write = |out: &mut SnapshotOutput, name: &str, text: &str| -> io::Result<()> {
        let path = dir.join(name);
        crate::output::write(&path, text.as_bytes())?;
        out.files.push(path);
        Ok(())
    };

    // Memory images, as (file name, address, length).
    let mut dumps: Vec<(String, u64, u64)> = Vec::new();
    if let Some(v) = vmlinux {
        let reloc = capture.kernel_relocation(&v.elf);
        let mut from_core = 0usize;
        for (i, s) in v.elf.exec.iter().enumerate() {
            let name = format!("kernel_text_{i}.bin");
            let path = dir.join(&name);
            let start = usize::try_from(s.offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(s.size).unwrap_or(usize::MAX));
            let Some(built) = v.bytes.get(start..end) else {
                continue;
            };
            // The text as the kernel ran it (alternatives, jump labels and static calls patched
            // in), from the vmcore, when it holds the kernel image.
            let ran = capture.runtime_text(s.addr.wrapping_add(reloc), s.size);
            let bytes = match ran.as_deref() {
                Some(b) if b.len() == built.len() => {
                    from_core += 1;
                    b
                }
                _ => built,
            };
            crate::output::write(&path, bytes)?;
            out.files.push(path);
            out.memory_bytes += s.size;
            dumps.push((name, s.addr.wrapping_add(reloc), s.size));
        }
        if dumps.is_empty() {
            out.notes
                .push("vmlinux has no executable section: no memory image".into());
        } else if from_core == 0 {
            out.notes.push(
                "kernel text from vmlinux, as built: code the kernel patched at run time \
                 (alternatives, jump labels) may decode wrongly; a vmcore gives the text as it ran"
                    .into(),
            );
        }
    } else {
        for (i, m) in capture.memory.iter().enumerate() {
            let MemImage {
                address,
                path,
                offset,
                length,
            } = m;
            let name = format!("mem_{i}.bin");
            let n = copy_range(path, *offset, *length, &dir.join(&name))?;
            out.files.push(dir.join(&name));
            out.memory_bytes += n;
            dumps.push((name, *address, n));
        }
    }

    for (i, (address, bytes)) in extra.iter().enumerate() {
        let name = format!("kernel_mem_{i}.bin");
        let path = dir.join(&name);
        crate::output::write(&path, bytes)?;
        out.files.push(path);
        out.memory_bytes += bytes.len() as u64;
        dumps.push((name, *address, bytes.len() as u64));
    }

    // Trace buffers.
    let nsinks = capture.sinks.len();
    let mut buffers = Vec::new();
    for (i, s) in capture.sinks.iter().enumerate() {
        let file = cstrace_name(i, nsinks, &s.name);
        let path = dir.join(&file);
        crate::output::write(&path, s.frames())?;
        out.files.push(path);
        buffers.push((format!("ETB_{i}"), file, !s.frames().is_empty()));
    }
    // Every source goes to the first buffer that holds trace.
    let bound = buffers
        .iter()
        .find(|b| b.2)
        .or(buffers.first())
        .map(|b| b.0.clone());
    if nsinks > 1 {
        out.notes.push(format!(
            "{nsinks} trace buffers: sources are bound to {}",
            bound.as_deref().unwrap_or("-")
        ));
    }

    let mut device_list = Vec::new();
    for (k, e) in capture.etms.iter().enumerate() {
        let cpu = e.state.cpu;
        let core_type = capture
            .core_types
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(DEFAULT_CORE_TYPE, |(_, t)| t.as_str());
        let mut core = format!(
            "[device]\nname=cpu_{cpu}\nclass=core\ntype={core_type}\n\n[regs]\nPC(size:64)=0x{:X}\nSP(size:64)=0\nSCTLR_EL1=0x1007\nCPSR=0x1C5\n",
            capture.text_addr()
        );
        // OpenCSD keeps one memory map for all cores: the images go with the first core only.
        for (i, (file, addr, len)) in dumps.iter().enumerate().filter(|_| k == 0) {
            let _ = write!(
                core,
                "\n[dump{}]\nfile={file}\naddress=0x{addr:X}\nlength=0x{len:X}\n",
                i + 1
            );
        }
        let core_file = format!("cpu_{cpu}.ini");
        write(&mut out, &core_file, &core)?;
        device_list.push(core_file);
        let mut dev =
            format!("[device]\nname=ETM_{cpu}\nclass=trace_source\ntype=ETM4\n\n[regs]\n");
        for (name, num, val) in etm_regs(e) {
            let _ = writeln!(dev, "{name}(0x{num:03X})=0x{val:08X}");
        }
        let etm_file = format!("etm_{cpu}.ini");
        write(&mut out, &etm_file, &dev)?;
        device_list.push(etm_file);
    }

    let mut snap = String::from("[snapshot]\nversion=1.0\n\n[device_list]\n");
    for (i, f) in device_list.iter().enumerate() {
        let _ = writeln!(snap, "device{i}={f}");
    }
    snap.push_str("\n[trace]\nmetadata=trace.ini\n");
    write(&mut out, "snapshot.ini", &snap)?;

    let mut trace = String::from("[trace_buffers]\nbuffers=");
    trace.push_str(
        &buffers
            .iter()
            .enumerate()
            .map(|(i, _)| format!("buffer{i}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    trace.push('\n');
    for (i, (name, file, _)) in buffers.iter().enumerate() {
        let _ = write!(
            trace,
            "\n[buffer{i}]\nname={name}\nfile={file}\nformat=coresight\n"
        );
    }
    trace.push_str("\n[source_buffers]\n");
    if let Some(b) = &bound {
        for e in &capture.etms {
            let _ = writeln!(trace, "ETM_{}={b}", e.state.cpu);
        }
    }
    trace.push_str("\n[core_trace_sources]\n");
    for e in &capture.etms {
        let cpu = e.state.cpu;
        let _ = writeln!(trace, "cpu_{cpu}=ETM_{cpu}");
    }
    write(&mut out, "trace.ini", &trace)?;
    Ok(out)
}

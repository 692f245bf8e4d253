//! csdump: turns a coresight-panic-dump into files and reports.

use std::fs::File;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use clap::Subcommand;
use csdump::capture::Capture;
use csdump::extract::extract;
use csdump::extract::ExtractOptions;
use csdump::info::analyze;
use csdump::info::render_text;
use csdump::info::Summary;
use csdump::region::locate;

const EXIT_HELP: &str = "\
Exit status:
  0  the dump is complete and every check passed
  1  fatal error: no region found, unreadable input or container header, output not written
  2  the dump was read and output written, but something is damaged (a record failed a check,
     or the commit record is missing or corrupt); see the warnings and summary.json

Input: an ELF64 vmcore (a copy of kdump's /proc/vmcore, or QEMU's dump-guest-memory file) or a
raw image (the region itself, e.g. read from /dev/mem after a warm reboot, or a memory image
that holds it). In a vmcore the region is found through the CSPD_REGION_PADDR/CSPD_REGION_SIZE
keys of the VMCOREINFO note, else by scanning every PT_LOAD's page starts for the container
magic; the output says which.";

/// Reads a coresight-panic-dump from a vmcore or a region file.
#[derive(Debug, Parser)]
#[command(name = "csdump", version, about, after_help = EXIT_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes each record's data to its own file, plus summary.json, in an output directory.
    ///
    /// Files: `<index>-<kind>-<name>.bin` (a record's data, `length` bytes), panic.txt (the
    /// panic message), vmcoreinfo.txt (when the input has one), summary.json (container header,
    /// every record with its status and checks, identity, panic, commit state, how the region
    /// was found). A damaged record is reported and the others are still written.
    #[command(after_help = EXIT_HELP)]
    Extract {
        /// The vmcore or region file.
        input: PathBuf,
        /// Output directory (created if needed).
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: PathBuf,
        /// Also write the data of damaged records whose header is readable, as
        /// `<index>-<kind>-<name>.corrupt.bin`.
        #[arg(long)]
        salvage: bool,
    },
    /// Prints a summary of the dump: how it was found, kernel, panic, records, commit.
    #[command(after_help = EXIT_HELP)]
    Info {
        /// The vmcore or region file.
        input: PathBuf,
        /// Prints the summary as JSON (the same document as summary.json).
        #[arg(long)]
        json: bool,
    },
    /// Writes perf's files: cstrace.bin, metadata.bin and perf.data.
    ///
    /// cstrace.bin is each sink's trace as drained (barrier included; `cstrace-<i>-<name>.bin`
    /// when there are several sinks); metadata.bin is perf's `cs_etm` auxtrace info (global
    /// header and one ETMv4 block per CPU, from the saved registers); perf.data holds the
    /// `cs_etm` event, that metadata, the trace and a kernel map at the dump's `_text`, so that
    /// `perf script --vmlinux vmlinux --itrace=i1i` decodes it. INPUT may also be an OpenCSD
    /// snapshot directory.
    #[command(after_help = EXIT_HELP)]
    Perf {
        /// The vmcore, region file or snapshot directory.
        input: PathBuf,
        /// Output directory (created if needed).
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: PathBuf,
    },
    /// Writes an OpenCSD snapshot directory (for trc_pkt_lister and other OpenCSD tools).
    ///
    /// snapshot.ini, one device file per ETM with its registers, one core file per CPU with
    /// the memory images of the kernel text (from --vmlinux, relocated by the dump's KASLR
    /// offset; or those of a snapshot input), trace.ini binding the buffers to the sources.
    #[command(after_help = EXIT_HELP)]
    Snapshot {
        /// The vmcore, region file or snapshot directory.
        input: PathBuf,
        /// Output directory (created if needed).
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: PathBuf,
        /// vmlinux of the kernel that wrote the dump: its text becomes the memory images.
        #[arg(long, value_name = "FILE")]
        vmlinux: Option<PathBuf>,
    },
    /// Prints, per CPU (panic CPU first), the CPU debug sample and the last branches and
    /// functions executed before the panic, decoded in process with OpenCSD's library.
    #[command(after_help = EXIT_HELP)]
    Report {
        /// The vmcore, region file or snapshot directory.
        input: PathBuf,
        /// vmlinux of the kernel that wrote the dump: instruction decode and symbols.
        #[arg(long, value_name = "FILE")]
        vmlinux: Option<PathBuf>,
        /// Prints the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also writes an HTML page with a per-CPU timeline.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// How many branches and functions to show per CPU.
        #[arg(long, default_value_t = 16)]
        last: usize,
    },
}

/// An input file mapped into memory.
struct Input {
    map: Option<memmap2::Mmap>,
}

impl Input {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
        let len = file
            .metadata()
            .with_context(|| format!("{}: cannot stat", path.display()))?
            .len();
        if len == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only and private to this process; csdump reads dump files
        // that nothing else writes while it runs. A file truncated underneath it would raise
        // SIGBUS, not memory unsafety in safe code reading a `&[u8]` it bounds-checks.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("{}: cannot map", path.display()))?;
        Ok(Self { map: Some(map) })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

fn warn(report: &Summary) {
    for w in &report.input_warnings {
        eprintln!("csdump: warning: {}: {w}", report.input);
    }
    for p in &report.problems {
        match p.file_offset {
            Some(fo) if Some(fo) != p.offset.map(|o| o as u64) => eprintln!(
                "csdump: warning: {}: region {} (file offset {fo:#x})",
                report.input, p.message
            ),
            Some(_) => eprintln!("csdump: warning: {}: {}", report.input, p.message),
            None => eprintln!("csdump: warning: {}: region {}", report.input, p.message),
        }
    }
}

/// Opens `input` (a dump file or a snapshot directory) and runs `f` on its capture.
///
/// Returns `f`'s result and whether the input was clean (no damaged record, no warning).
fn with_capture<R>(
    input: &Path,
    f: impl FnOnce(&Capture<'_>) -> anyhow::Result<R>,
) -> anyhow::Result<(R, bool)> {
    let name = input.display().to_string();
    if input.is_dir() {
        let capture = Capture::from_snapshot_dir(input)?;
        for w in &capture.warnings {
            eprintln!("csdump: warning: {name}: {w}");
        }
        let clean = capture.warnings.is_empty();
        return Ok((f(&capture)?, clean));
    }
    let file = Input::open(input)?;
    let located = locate(file.bytes()).with_context(|| name.clone())?;
    let report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
    warn(&report);
    let capture = Capture::from_dump(&located).with_context(|| name.clone())?;
    for w in &capture.warnings {
        eprintln!("csdump: warning: {name}: {w}");
    }
    let clean = report.clean && capture.warnings.is_empty();
    Ok((f(&capture)?, clean))
}

fn read_vmlinux(path: &Path) -> anyhow::Result<Input> {
    Input::open(path)
}

/// Parses a vmlinux opened with [`read_vmlinux`]; errors name the file.
fn vmlinux_image<'a>(
    vm: Option<&'a Input>,
    path: Option<&Path>,
) -> anyhow::Result<Option<csdump::snapshot::VmlinuxImage<'a>>> {
    match (vm, path) {
        (Some(v), Some(p)) => Ok(Some(csdump::snapshot::VmlinuxImage {
            bytes: v.bytes(),
            elf: csdump::elf::Vmlinux::parse(v.bytes()).with_context(|| p.display().to_string())?,
        })),
        _ => Ok(None),
    }
}

fn run(cli: Cli) -> anyhow::Result<bool> {
    match cli.command {
        Command::Perf { input, output } => {
            let (out, clean) = with_capture(&input, |c| Ok(csdump::perf::write_perf(c, &output)?))?;
            for s in &out.skipped {
                eprintln!("csdump: warning: not written: {s}");
            }
            for f in &out.files {
                println!("wrote {}", f.display());
            }
            println!("{} trace bytes in perf.data", out.trace_bytes);
            Ok(clean && out.skipped.is_empty())
        }
        Command::Snapshot {
            input,
            output,
            vmlinux,
        } => {
            let vm = vmlinux.as_deref().map(read_vmlinux).transpose()?;
            let image = vmlinux_image(vm.as_ref(), vmlinux.as_deref())?;
            let (out, clean) = with_capture(&input, |c| {
                Ok(csdump::snapshot::write_snapshot(
                    c,
                    &output,
                    image.as_ref(),
                )?)
            })?;
            for n in &out.notes {
                eprintln!("csdump: note: {n}");
            }
            println!(
                "wrote {} files to {} ({} bytes of memory images)",
                out.files.len(),
                output.display(),
                out.memory_bytes
            );
            Ok(clean)
        }
        Command::Report {
            input,
            vmlinux,
            json,
            html,
            last,
        } => {
            let vm = vmlinux.as_deref().map(read_vmlinux).transpose()?;
            let image = vmlinux_image(vm.as_ref(), vmlinux.as_deref())?;
            let opts = csdump::report::Options { last };
            let (rep, clean) = with_capture(&input, |c| {
                Ok(csdump::report::build(c, image.as_ref(), &opts))
            })?;
            for n in &rep.notes {
                eprintln!("csdump: note: {n}");
            }
            for e in &rep.decoder_errors {
                eprintln!("csdump: note: decoder: {e}");
            }
            for w in &rep.warnings {
                eprintln!("csdump: warning: {w}");
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                print!("{}", csdump::report::render_text(&rep));
            }
            if let Some(h) = html {
                std::fs::write(&h, csdump::report::render_html(&rep))
                    .with_context(|| h.display().to_string())?;
                eprintln!("csdump: wrote {}", h.display());
            }
            Ok(clean && rep.warnings.is_empty())
        }
        Command::Info { input, json } => {
            let file = Input::open(&input)?;
            let name = input.display().to_string();
            let located = locate(file.bytes()).with_context(|| name.clone())?;
            let report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
            warn(&report);
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render_text(&report));
            }
            Ok(report.clean)
        }
        Command::Extract {
            input,
            output,
            salvage,
        } => {
            let file = Input::open(&input)?;
            let name = input.display().to_string();
            let located = locate(file.bytes()).with_context(|| name.clone())?;
            let mut report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
            warn(&report);
            let written = extract(&located, &mut report, &output, ExtractOptions { salvage })?;
            print!("{}", render_text(&report));
            println!("wrote {} files to {}", written.len(), output.display());
            Ok(report.clean)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("csdump: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

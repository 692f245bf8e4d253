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
use csdump::region::locate_path;
use csdump::region::Located;

const EXIT_HELP: &str = "\
Exit status (the same for every command):
  0  complete and clean: the dump was read, every check passed, all output was written
  1  fatal: nothing useful was written (no region found, unreadable input or container header,
     an output file that cannot be written, a vmlinux whose build ID is not the dump's)
  2  usage error: the command line is wrong (nothing was read)
  3  output written, but the dump is damaged or partial (a record failed a check, the commit
     record is missing, a drain ended early, a source skipped, trace decoded in part), or the
     vmcore file is (truncated, a flattened stream cut short), even when the region survived;
     the warnings say what, and summary.json for extract
Notes do not change the status: a missing --vmlinux, a vmcore without VMCOREINFO (QEMU's
dump-guest-memory writes none; the scan finds the region), an STM source in a snapshot. Output files are written whole or
not at all (under a temporary name, renamed when complete); SIGTERM and SIGINT remove the
temporary files of an unfinished run.

Input: a vmcore as kdump saves it -- makedumpfile's flattened format (-F, Debian's kdump-tools:
/var/crash/<stamp>/dump.<stamp>, also gzip'ed), its kdump-compressed format (-c/-l/-p/-z, any
dump level: Fedora's and RHEL's /var/crash/<host>-<date>/vmcore), an ELF64 vmcore (a copy of
/proc/vmcore, QEMU's dump-guest-memory) -- or a raw image (the region itself, e.g. a copy of
/dev/coresight_panic_dump after a warm reboot, with the trace buffers the next boot attached
behind it, or a memory image that holds it). In a vmcore the region is the
capture kernel's device dump coresight_panic_dump when there is one, else the one the
CSPD_REGION_PADDR/CSPD_REGION_SIZE keys of VMCOREINFO name (checked against its container
header), else found by scanning the vmcore's page starts for the container magic; the output
says which, and which format it read. A TMC-ETR's buffer left in reserved memory is read from
the trace buffer attached to the previous dump, the capture kernel's device dump
coresight_tracedata@ADDRESS, or the vmcore's memory, and unwrapped as its record says. A sink
that a kdump capture kernel drained after a crash whose panic path did not run (plain kdump,
crash_kexec_post_notifiers off) is read from its device dump coresight_capture:<sink> and
joined with the region's records; the output says which path wrote each record.";

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
    /// Files: `<index>-<kind>-<name>.bin` (a record's data, `length` bytes), for a TMC-ETR's
    /// record also `<index>-sink-<name>.trace.bin` (its trace as the decoders take it: copied
    /// in the record, or read where the ETR left it, unwrapped, the barrier packet first when
    /// it starts inside the stream), panic.txt (the panic message), vmcoreinfo.txt (when the
    /// input has one), summary.json (container header, every record with its status and
    /// checks, an ETR's trace and where it came from, identity, panic, commit state, how the
    /// region was found). A damaged record is reported and the others are still written.
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
        /// Directory of the kernel's loadable modules (`.ko` files, searched recursively):
        /// perf.data maps each module whose .ko has the build ID the module ran with, so that
        /// perf decodes and names its code.
        #[arg(long, value_name = "DIR")]
        modules: Option<PathBuf>,
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
        /// Its build ID must be the dump's.
        #[arg(long, value_name = "FILE")]
        vmlinux: Option<PathBuf>,
        /// Use --vmlinux even when its build ID is not the dump's.
        #[arg(long, requires = "vmlinux")]
        force: bool,
    },
    /// Prints, per CPU (panic CPU first), the CPU debug sample and the last branches and
    /// functions executed before the panic, decoded in process with OpenCSD's library.
    #[command(after_help = EXIT_HELP)]
    #[command(group(clap::ArgGroup::new("image").args(["vmlinux", "modules"]).multiple(true)))]
    Report {
        /// The vmcore, region file or snapshot directory.
        input: PathBuf,
        /// vmlinux of the kernel that wrote the dump: instruction decode and symbols. Its
        /// build ID must be the dump's (the identity record names it).
        #[arg(long, value_name = "FILE")]
        vmlinux: Option<PathBuf>,
        /// Use --vmlinux (and a module's .ko) even when its build ID is not the dump's.
        #[arg(long, requires = "image")]
        force: bool,
        /// Directory of the kernel's loadable modules (`.ko` files, searched recursively,
        /// e.g. /usr/lib/debug/lib/modules/RELEASE or the kernel build tree): code in a module
        /// is named by its functions; without it, as module+offset. Each .ko must have the
        /// build ID the module ran with.
        #[arg(long, value_name = "DIR")]
        modules: Option<PathBuf>,
        /// Prints the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also writes an HTML page with a per-CPU timeline.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// How many branches and functions to show per CPU.
        #[arg(long, default_value_t = 16)]
        last: usize,
        /// For a region file, which holds no kernel text: read the text the kernel ran from
        /// this vmcore of another boot of the same kernel at the same KASLR offset (a memory
        /// dump taken after the warm reboot); refused when its VMCOREINFO names another kernel
        /// or place.
        #[arg(long, value_name = "VMCOREFILE", requires = "vmlinux")]
        text_from: Option<PathBuf>,
    },
    #[command(
        about = "Serves the decoded pre-panic trace to GDB: each CPU a thread, replayed with \
                 `record btrace bts`",
        long_about = csdump::gdb::HELP,
        after_help = EXIT_HELP
    )]
    Gdb(csdump::gdb::Args),
}

/// An input file mapped into memory.
struct Input {
    map: Option<memmap2::Mmap>,
}

impl Input {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let name = path.display();
        let file = File::open(path).with_context(|| format!("{name}: cannot open"))?;
        let meta = file
            .metadata()
            .with_context(|| format!("{name}: cannot stat"))?;
        if !meta.is_file() {
            anyhow::bail!("{name}: not a regular file");
        }
        if meta.len() == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only and private to this process; csdump reads dump files
        // that nothing else writes while it runs. A file truncated underneath it would raise
        // SIGBUS, not memory unsafety in safe code reading a `&[u8]` it bounds-checks.
        let map =
            unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("{name}: cannot map"))?;
        Ok(Self { map: Some(map) })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// What a command achieved: whether the dump was clean and complete.
enum Done {
    Clean,
    Damaged,
}

impl From<bool> for Done {
    fn from(clean: bool) -> Self {
        if clean {
            Self::Clean
        } else {
            Self::Damaged
        }
    }
}

/// Finds the region in `input`, and says at once how the input was read (so that what is
/// wrong with it is said even when the region then fails to parse).
fn locate_input(input: &Path) -> anyhow::Result<Located<'static>> {
    let name = input.display().to_string();
    let located = locate_path(input).with_context(|| name.clone())?;
    if let Some(f) = &located.format {
        eprintln!("csdump: note: {name}: read as {f}");
    }
    for n in &located.notes {
        eprintln!("csdump: note: {name}: {n}");
    }
    for w in &located.warnings {
        eprintln!("csdump: warning: {name}: {w}");
    }
    Ok(located)
}

fn warn(report: &Summary) {
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

/// The `.ko` files to name module code with: `--modules DIR`, and whether `--force` takes one of
/// another build.
#[derive(Clone, Copy)]
struct ModulesDir<'p> {
    dir: Option<&'p Path>,
    force: bool,
}

/// Opens `input` (a dump file or a snapshot directory) and runs `f` on its capture, its
/// modules' `.ko` files read from `modules`.
///
/// Returns `f`'s result and whether the input was clean (no damaged record, no warning).
fn with_capture<R>(
    input: &Path,
    modules: ModulesDir<'_>,
    f: impl FnOnce(&Capture<'_>) -> anyhow::Result<R>,
) -> anyhow::Result<(R, bool)> {
    let name = input.display().to_string();
    let note = |c: &Capture<'_>| {
        for n in &c.notes {
            eprintln!("csdump: note: {name}: {n}");
        }
        for w in &c.warnings {
            eprintln!("csdump: warning: {name}: {w}");
        }
    };
    let load = |c: &mut Capture<'_>| -> anyhow::Result<()> {
        if let Some(dir) = modules.dir {
            c.load_modules(dir, modules.force)
                .map_err(|e| anyhow::anyhow!("--modules: {e}"))?;
            for n in &c.module_symbols.notes {
                eprintln!("csdump: note: {n}");
            }
        }
        Ok(())
    };
    if input.is_dir() {
        let mut capture = Capture::from_snapshot_dir(input)?;
        note(&capture);
        load(&mut capture)?;
        let clean = capture.warnings.is_empty();
        return Ok((f(&capture)?, clean));
    }
    let located = locate_input(input)?;
    let report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
    warn(&report);
    let mut capture = Capture::from_dump(&located).with_context(|| name.clone())?;
    note(&capture);
    load(&mut capture)?;
    let clean = report.clean && capture.warnings.is_empty();
    Ok((f(&capture)?, clean))
}

/// A vmlinux given on the command line, mapped.
struct VmlinuxFile {
    path: PathBuf,
    input: Input,
}

fn read_vmlinux(path: Option<&Path>) -> anyhow::Result<Option<VmlinuxFile>> {
    path.map(|p| {
        Ok(VmlinuxFile {
            path: p.to_path_buf(),
            input: Input::open(p)?,
        })
    })
    .transpose()
}

/// Parses a vmlinux and checks its build ID against the dump's identity (unless `force`);
/// errors name the file.
fn vmlinux_image<'a>(
    vm: Option<&'a VmlinuxFile>,
    capture: &Capture<'_>,
    force: bool,
) -> anyhow::Result<Option<csdump::snapshot::VmlinuxImage<'a>>> {
    let Some(v) = vm else {
        return Ok(None);
    };
    let name = v.path.display();
    let elf = csdump::elf::Vmlinux::parse(v.input.bytes()).with_context(|| name.to_string())?;
    match csdump::elf::check_build_id(
        &elf,
        &capture.kernel.build_id,
        capture.kernel.release.as_deref(),
    ) {
        Ok(None) => {}
        Ok(Some(note)) => eprintln!("csdump: note: {name}: {note}"),
        Err(e) if force => eprintln!("csdump: note: {name}: {e} (used anyway: --force)"),
        Err(e) => anyhow::bail!("{name}: {e}"),
    }
    Ok(Some(csdump::snapshot::VmlinuxImage {
        bytes: v.input.bytes(),
        elf,
    }))
}

/// Checks that `text` (--text-from) is a vmcore of the capture's kernel at the same place: its
/// VMCOREINFO's `BUILD-ID`, `KERNELOFFSET` and `NUMBER(kimage_voffset)` are the dump's.
fn check_text_vmcore(
    text: &csdump::vmcore::Vmcore,
    capture: &Capture<'_>,
    name: &str,
) -> anyhow::Result<()> {
    let info = text
        .vmcoreinfo()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name}: --text-from: no VMCOREINFO, so no way to tell which kernel it holds"
            )
        })?;
    let key = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(str::trim)
            .map(str::to_string)
    };
    // KERNELOFFSET is written with "%lx", NUMBER(kimage_voffset) with "0x%llx".
    let hex = |k: &str| {
        key(k).and_then(|v| u64::from_str_radix(v.strip_prefix("0x").unwrap_or(&v), 16).ok())
    };
    let k = &capture.kernel;
    let id: String = k.build_id.iter().map(|b| format!("{b:02x}")).collect();
    match key("BUILD-ID=") {
        Some(b) if !(id.is_empty() || b.starts_with(&id) || id.starts_with(&b)) => {
            anyhow::bail!("{name}: --text-from holds kernel build {b}, the dump's is {id}")
        }
        _ => {}
    }
    let off = hex("KERNELOFFSET=").unwrap_or(0);
    if off != k.kaslr_offset {
        anyhow::bail!(
            "{name}: --text-from's kernel is at KASLR offset {off:#x}, the dump's at {:#x}: its \
             text is not where the dump's kernel ran",
            k.kaslr_offset
        );
    }
    match (hex("NUMBER(kimage_voffset)="), k.kimage_voffset) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (a, b) => anyhow::bail!(
            "{name}: --text-from's kimage_voffset is {a:#x?}, the dump's {b:#x?}: the kernel image \
             is not at the same physical address"
        ),
    }
}

fn run(cli: Cli) -> anyhow::Result<Done> {
    match cli.command {
        Command::Perf {
            input,
            output,
            modules,
        } => {
            let dir = ModulesDir {
                dir: modules.as_deref(),
                force: false,
            };
            let (out, clean) =
                with_capture(&input, dir, |c| Ok(csdump::perf::write_perf(c, &output)?))?;
            for s in &out.skipped {
                eprintln!("csdump: warning: not written: {s}");
            }
            for f in &out.files {
                println!("wrote {}", f.display());
            }
            println!("{} trace bytes in perf.data", out.trace_bytes);
            Ok((clean && out.skipped.is_empty()).into())
        }
        Command::Snapshot {
            input,
            output,
            vmlinux,
            force,
        } => {
            let vm = read_vmlinux(vmlinux.as_deref())?;
            let none = ModulesDir {
                dir: None,
                force: false,
            };
            let (out, clean) = with_capture(&input, none, |c| {
                let image = vmlinux_image(vm.as_ref(), c, force)?;
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
            Ok(clean.into())
        }
        Command::Report {
            input,
            vmlinux,
            force,
            modules,
            json,
            html,
            last,
            text_from,
        } => {
            let vm = read_vmlinux(vmlinux.as_deref())?;
            let text = text_from
                .as_deref()
                .map(|p| {
                    csdump::vmcore::Vmcore::open(p)
                        .with_context(|| format!("{}: --text-from", p.display()))
                        .map(|v| (v, p.display().to_string()))
                })
                .transpose()?;
            let dir = ModulesDir {
                dir: modules.as_deref(),
                force,
            };
            let (rep, clean) = with_capture(&input, dir, |c| {
                let image = vmlinux_image(vm.as_ref(), c, force)?;
                if let Some((v, name)) = &text {
                    check_text_vmcore(v, c, name)?;
                }
                let opts = csdump::report::Options {
                    last,
                    text_from: text.as_ref().map(|(v, name)| csdump::report::TextSource {
                        vmcore: v,
                        name: name.clone(),
                    }),
                };
                Ok(csdump::report::build(c, image.as_ref(), &opts))
            })?;
            for n in &rep.notes {
                eprintln!("csdump: note: {n}");
            }
            if rep.decoder_error_count > 0 {
                eprintln!(
                    "csdump: note: the decoder logged {} error(s) (a packet cut at the start of a \
                     wrapped buffer is usual); the first:",
                    rep.decoder_error_count
                );
            }
            for e in rep.decoder_errors.iter().take(8) {
                eprintln!("csdump: note: decoder: {e}");
            }
            for w in &rep.warnings {
                eprintln!("csdump: warning: {w}");
            }
            // The page first: a report printed and then an error would say two things.
            if let Some(h) = &html {
                csdump::output::write(h, csdump::report::render_html(&rep).as_bytes())?;
                eprintln!("csdump: wrote {}", h.display());
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                print!("{}", csdump::report::render_text(&rep));
            }
            Ok((clean && rep.warnings.is_empty()).into())
        }
        Command::Gdb(args) => {
            let vm = read_vmlinux(args.vmlinux.as_deref())?;
            let dir = ModulesDir {
                dir: args.modules.as_deref(),
                force: args.force,
            };
            let (_, clean) = with_capture(&args.input, dir, |c| {
                let image = vmlinux_image(vm.as_ref(), c, args.force)?;
                Ok(csdump::gdb::run(
                    c,
                    image.as_ref(),
                    &args.options(),
                    &mut std::io::stderr(),
                )?)
            })?;
            Ok(clean.into())
        }
        Command::Info { input, json } => {
            let name = input.display().to_string();
            let located = locate_input(&input)?;
            let report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
            warn(&report);
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render_text(&report));
            }
            Ok(report.clean.into())
        }
        Command::Extract {
            input,
            output,
            salvage,
        } => {
            let name = input.display().to_string();
            let located = locate_input(&input)?;
            let mut report = analyze(&name, &located).with_context(|| format!("{name}: region"))?;
            warn(&report);
            let written = extract(&located, &mut report, &output, ExtractOptions { salvage })?;
            print!("{}", render_text(&report));
            println!("wrote {} files to {}", written.len(), output.display());
            Ok(report.clean.into())
        }
    }
}

/// Exit status: fatal.
const EXIT_FATAL: u8 = 1;
/// Exit status: output written, the dump damaged or partial.
const EXIT_DAMAGED: u8 = 3;

/// On SIGTERM, SIGINT or SIGHUP: remove the temporary output files of this run and exit with
/// 128 + the signal's number, as a shell reports a process killed by it.
fn on_signals() {
    use signal_hook::consts::SIGHUP;
    use signal_hook::consts::SIGINT;
    use signal_hook::consts::SIGTERM;
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            csdump::output::remove_pending_and_exit(128 + sig);
        }
    });
}

fn main() -> ExitCode {
    // clap exits 2 on a usage error, 0 for --help and --version.
    let cli = Cli::parse();
    on_signals();
    match run(cli) {
        Ok(Done::Clean) => ExitCode::SUCCESS,
        Ok(Done::Damaged) => ExitCode::from(EXIT_DAMAGED),
        Err(e) => {
            eprintln!("csdump: error: {e:#}");
            ExitCode::from(EXIT_FATAL)
        }
    }
}

//! csdump: turns a coresight-panic-dump into files and reports.

use std::fs::File;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use clap::Subcommand;
use csdump::extract::extract;
use csdump::extract::ExtractOptions;
use csdump::region::locate;
use csdump::report::analyze;
use csdump::report::render_text;
use csdump::report::Report;

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

fn warn(report: &Report) {
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

fn run(cli: Cli) -> anyhow::Result<bool> {
    match cli.command {
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

//! Writing a dump out as files: one per record, `summary.json`, and the decoded panic message.

use std::io;
use std::path::Path;

use crate::info::record_file_name;
use crate::info::Summary;
use crate::region::Located;

/// Name of the machine-readable summary in the output directory.
pub const SUMMARY_FILE: &str = "summary.json";
/// Name of the panic message file in the output directory.
pub const PANIC_FILE: &str = "panic.txt";
/// Name of the vmcoreinfo copy in the output directory.
pub const VMCOREINFO_FILE: &str = "vmcoreinfo.txt";

/// Why output could not be written: the file and the reason.
pub type ExtractError = crate::output::OutputError;

fn write(path: &Path, bytes: &[u8]) -> Result<(), ExtractError> {
    crate::output::write(path, bytes)
}

/// Options of [`extract`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractOptions {
    /// Also write the data of records that failed a check but whose header is readable, as
    /// `<index>-<kind>-<name>.corrupt.bin`.
    pub salvage: bool,
}

/// Writes every record of `report` to `dir` (created if needed), then `summary.json`.
///
/// Returns the names of the files written, in order. `report` is updated with the names of
/// salvaged files.
pub fn extract(
    located: &Located<'_>,
    report: &mut Summary,
    dir: &Path,
    opts: ExtractOptions,
) -> Result<Vec<String>, ExtractError> {
    crate::output::create_dir(dir)?;
    let region = &located.bytes;
    let mut written = Vec::new();
    for rec in &mut report.records {
        let kind = rec.record_kind;
        if rec.file.is_none() && opts.salvage && rec.salvageable {
            rec.file = Some(record_file_name(rec.index, kind, rec.name.as_bytes(), true));
        }
        let Some(name) = &rec.file else {
            continue;
        };
        let start = rec.data_offset.min(region.len());
        let end = start.saturating_add(rec.length as usize).min(region.len());
        let data = region.get(start..end).unwrap_or(&[]);
        write(&dir.join(name), data)?;
        written.push(name.clone());
        // An ETR's trace, as the decoders take it.
        if let Some(file) = rec.trace.as_ref().and_then(|t| t.file.clone()) {
            if let Ok((h, copied)) = cspd_format::etr::EtrRecord::parse(data) {
                if let Ok(Some(t)) = crate::capture::etr_trace(located, &h, copied) {
                    write(&dir.join(&file), &t.bytes)?;
                    written.push(file);
                }
            }
        }
    }
    if let Some(p) = &report.panic {
        let mut text = p.message.clone();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        write(&dir.join(PANIC_FILE), text.as_bytes())?;
        written.push(PANIC_FILE.into());
    }
    if let Some(info) = &located.vmcoreinfo {
        write(&dir.join(VMCOREINFO_FILE), info.as_bytes())?;
        written.push(VMCOREINFO_FILE.into());
    }
    let json = serde_json::to_vec_pretty(report).map_err(|e| ExtractError {
        path: dir.join(SUMMARY_FILE),
        err: io::Error::other(e),
    })?;
    write(&dir.join(SUMMARY_FILE), &json)?;
    written.push(SUMMARY_FILE.into());
    Ok(written)
}

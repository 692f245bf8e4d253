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

/// Writes an ETR record's trace, as the decoders take it, when `rec` has one.
fn write_etr_trace(
    located: &Located<'_>,
    rec: &crate::info::RecordInfo,
    data: &[u8],
    dir: &Path,
    written: &mut Vec<String>,
) -> Result<(), ExtractError> {
    let Some(file) = rec.trace.as_ref().and_then(|t| t.file.clone()) else {
        return Ok(());
    };
    if let Ok((h, copied)) = cspd_format::etr::EtrRecord::parse(data) {
        if let Ok(Some(t)) = crate::capture::etr_trace(located, &h, copied) {
            write(&dir.join(&file), &t.bytes)?;
            written.push(file);
        }
    }
    Ok(())
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
        write_etr_trace(located, rec, data, dir, &mut written)?;
    }
    // The capture kernel's records that are used, from their own containers.
    for (cap, dump) in report.captures.iter().zip(&located.captures) {
        for rec in &cap.records {
            let Some(name) = &rec.file else {
                continue;
            };
            let start = rec.data_offset.min(dump.bytes.len());
            let end = start
                .saturating_add(rec.length as usize)
                .min(dump.bytes.len());
            let data = dump.bytes.get(start..end).unwrap_or(&[]);
            write(&dir.join(name), data)?;
            written.push(name.clone());
            write_etr_trace(located, rec, data, dir, &mut written)?;
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

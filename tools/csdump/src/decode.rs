//! Decoding trace through OpenCSD: csdump writes a snapshot, runs Debian's `trc_pkt_lister`
//! (libopencsd-bin) on it with `-decode_only`, and reads the generic trace elements it prints.
//!
//! Only the last elements of each trace ID are kept (a bounded ring), so a large buffer is
//! decoded in constant memory.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::io::BufRead;
use std::io::BufReader;
use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// What a decoded trace element says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Element {
    /// Instructions `start..end` were executed; the last one (at `end - last_size`) is a
    /// branch that was taken (`taken`) or not.
    Range {
        /// First instruction.
        start: u64,
        /// Address after the last instruction.
        end: u64,
        /// Number of instructions.
        count: u32,
        /// Size of the last instruction.
        last_size: u32,
        /// Whether the last instruction (a branch) was taken.
        taken: bool,
        /// Branch type of the last instruction as OpenCSD names it (`BR`, `iBR A64:ret`…).
        branch: String,
    },
    /// The decoder reached `addr` but has no memory image there.
    NoAccess {
        /// The address.
        addr: u64,
    },
    /// An exception; `ret` is its preferred return address, when given.
    Exception {
        /// Preferred return address.
        ret: Option<u64>,
        /// OpenCSD's description.
        text: String,
    },
    /// Return from an exception.
    ExceptionReturn,
    /// The trace lost synchronisation or started.
    NoSync,
    /// A trace-on (after a gap in the trace).
    TraceOn,
}

impl Element {
    /// Returns the first address the element executed or reached, if any.
    pub fn addr(&self) -> Option<u64> {
        match self {
            Self::Range { start, .. } => Some(*start),
            Self::NoAccess { addr } => Some(*addr),
            Self::Exception { ret, .. } => *ret,
            _ => None,
        }
    }
}

/// Elements kept per trace ID.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// Last elements, oldest first, by trace ID.
    pub by_id: BTreeMap<u8, VecDeque<Element>>,
    /// Elements seen in total, by trace ID.
    pub totals: BTreeMap<u8, u64>,
    /// Error lines printed by the decoder.
    pub errors: Vec<String>,
}

fn hex_after(s: &str, key: &str) -> Option<u64> {
    let rest = &s[s.find(key)? + key.len()..];
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("0x").unwrap_or(rest);
    let end = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(rest.len());
    u64::from_str_radix(&rest[..end], 16).ok()
}

fn num_in(s: &str, key: &str) -> Option<u32> {
    let rest = &s[s.find(key)? + key.len()..];
    let end = rest.find(')')?;
    rest[..end].parse().ok()
}

/// Parses one line of `trc_pkt_lister` output into a trace ID and an element.
pub fn parse_line(line: &str) -> Option<(u8, Element)> {
    let rest = line.strip_prefix("Idx:")?;
    let (_, rest) = rest.split_once("; ID:")?;
    let (id, rest) = rest.split_once(';')?;
    let id = u8::from_str_radix(id.trim(), 16).ok()?;
    let rest = rest.trim_start();
    let body = rest.strip_prefix("OCSD_GEN_TRC_ELEM_")?;
    let el = if let Some(b) = body.strip_prefix("INSTR_RANGE(") {
        let start = hex_after(b, "exec range=")?;
        let end = hex_after(b, ":[")?;
        let tail = &b[b.find("(ISA=")?..];
        let tail = &tail[tail.find(')')? + 1..];
        let tail = tail.trim().trim_end_matches(')').trim();
        let (flag, branch) = tail.split_once(' ').unwrap_or((tail, ""));
        Element::Range {
            start,
            end,
            count: num_in(b, "num_i(").unwrap_or(0),
            last_size: num_in(b, "last_sz(").unwrap_or(4),
            taken: flag == "E",
            branch: branch.trim().to_string(),
        }
    } else if let Some(b) = body.strip_prefix("ADDR_NACC(") {
        Element::NoAccess {
            addr: hex_after(b, "")?,
        }
    } else if let Some(b) = body.strip_prefix("EXCEPTION(") {
        Element::Exception {
            ret: hex_after(b, "ret addr:"),
            text: b.trim_end_matches(')').trim().to_string(),
        }
    } else if body.starts_with("EXCEPTION_RET") {
        Element::ExceptionReturn
    } else if body.starts_with("NO_SYNC") {
        Element::NoSync
    } else if body.starts_with("TRACE_ON") {
        Element::TraceOn
    } else {
        return None;
    };
    Some((id, el))
}

/// Reads `trc_pkt_lister` output, keeping the last `keep` elements of each trace ID.
pub fn parse_output<R: BufRead>(r: R, keep: usize) -> io::Result<Decoded> {
    let mut d = Decoded::default();
    for line in r.lines() {
        let line = line?;
        if let Some((id, el)) = parse_line(&line) {
            let q = d.by_id.entry(id).or_default();
            if q.len() == keep {
                q.pop_front();
            }
            if keep > 0 {
                q.push_back(el);
            }
            *d.totals.entry(id).or_default() += 1;
        } else if line.contains("OCSD_ERR") && d.errors.len() < 32 {
            d.errors.push(line.trim().to_string());
        }
    }
    Ok(d)
}

/// Runs `program` (`trc_pkt_lister`) on snapshot `dir`, buffer `source`, and parses its
/// output; the log goes to `log` (a file in a scratch directory).
pub fn run_trc_pkt_lister(
    program: &Path,
    dir: &Path,
    source: &str,
    log: &Path,
    keep: usize,
) -> io::Result<Decoded> {
    let out = Command::new(program)
        .arg("-ss_dir")
        .arg(dir)
        .arg("-src_name")
        .arg(source)
        .arg("-decode_only")
        .arg("-logfilename")
        .arg(log)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", program.display())))?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let f =
        File::open(log).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", log.display())))?;
    parse_output(BufReader::new(f), keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_elements() {
        let (id, e) = parse_line("Idx:4067; ID:14; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xffff0000081492e4:[0xffff000008149310] num_i(11) last_sz(4) (ISA=A64) E iBR A64:ret )").unwrap();
        assert_eq!(id, 0x14);
        assert_eq!(
            e,
            Element::Range {
                start: 0xffff0000081492e4,
                end: 0xffff000008149310,
                count: 11,
                last_size: 4,
                taken: true,
                branch: "iBR A64:ret".into()
            }
        );
        let (_, e) =
            parse_line("Idx:2473; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xffffffc000167268 )")
                .unwrap();
        assert_eq!(
            e,
            Element::NoAccess {
                addr: 0xffffffc000167268
            }
        );
        let (_, e) = parse_line("Idx:1; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x10:[0x14] num_i(1) last_sz(4) (ISA=A64) N BR  <cond>)").unwrap();
        assert!(matches!(e, Element::Range { taken: false, .. }));
        assert!(parse_line(
            "Idx:100; ID:14; [0xf9 0xd6 ];\tI_NOT_SYNC : I Stream not synchronised"
        )
        .is_none());
    }

    #[test]
    fn keeps_the_last() {
        let text = (0..10)
            .map(|i| format!("Idx:{i}; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x{i:x} )\n"))
            .collect::<String>();
        let d = parse_output(text.as_bytes(), 3).unwrap();
        let q = &d.by_id[&0x10];
        assert_eq!(
            q.iter().filter_map(Element::addr).collect::<Vec<_>>(),
            [7, 8, 9]
        );
        assert_eq!(d.totals[&0x10], 10);
    }
}

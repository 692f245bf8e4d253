//! Where the stub's trace comes from: every decoded element of each trace ID, oldest first,
//! handed to a callback as OpenCSD's library decodes it (in process, streaming). This is the one
//! adapter between the stub and csdump's decoder.

use std::borrow::Cow;

use cspd_hw::tmc::CS_FRAME_LEN;

use crate::capture::Capture;
use crate::capture::Origin;
use crate::decode::decode_each;
use crate::decode::CodeImages;
use crate::decode::DecodeError;
use crate::decode::Element;
use crate::decode::Flow;
use crate::snapshot::VmlinuxImage;

/// What the decode said besides its elements.
#[derive(Debug, Default)]
pub struct DecodeNotes {
    /// How the trace was decoded, for the user.
    pub decoder: String,
    /// Errors the decoder reported (a packet cut at the start of a wrapped buffer is usual).
    pub errors: Vec<String>,
    /// Notes on the code it decoded against.
    pub notes: Vec<String>,
}

/// Bytes of trace in the sink the decoder reads (the first that holds trace).
pub fn trace_len(capture: &Capture<'_>) -> usize {
    capture
        .sinks
        .iter()
        .map(|s| s.frames().len())
        .find(|&n| n > 0)
        .unwrap_or(0)
}

/// `capture` with only the last `tail` bytes of that sink's trace (whole frames): the decoder
/// synchronises at the first sync point in them.
pub fn with_tail<'c>(capture: &'c Capture<'_>, tail: usize) -> Capture<'c> {
    let mut c: Capture<'c> = capture.clone();
    let Some(i) = capture.sinks.iter().position(|s| !s.frames().is_empty()) else {
        return c;
    };
    let frames = capture.sinks[i].frames();
    let tail = tail.min(frames.len()) / CS_FRAME_LEN * CS_FRAME_LEN;
    if let Some(s) = c.sinks.get_mut(i) {
        s.trace = Cow::Borrowed(&frames[frames.len() - tail..]);
    }
    c
}

/// Decodes the trace of `capture` and calls `f` with each element and the trace ID of the
/// source that emitted it, in trace order.
pub fn each_element(
    capture: &Capture<'_>,
    vmlinux: Option<&VmlinuxImage<'_>>,
    mut f: impl FnMut(u8, &Element),
) -> Result<DecodeNotes, String> {
    // A snapshot decodes against its own memory images; a dump against vmlinux's text (as the
    // vmcore holds it when it can), and module code read from the vmcore on demand.
    let image = match capture.origin {
        Origin::Snapshot(_) => None,
        Origin::Dump => vmlinux,
    };
    let mut memory = CodeImages::new(capture, image.map(|v| (v.bytes, &v.elf)));
    let summary = decode_each(capture, &mut memory, |id, e| {
        f(id, e);
        Flow::Continue
    })
    .map_err(|e| match e {
        DecodeError::Nothing(why) => why,
        e => e.to_string(),
    })?;
    let mut decoder = crate::decode::decoder_name();
    let (pages, bytes) = memory.paged();
    if pages > 0 {
        decoder.push_str(&format!(
            "; code outside vmlinux (modules) read from the vmcore: {pages} page(s), {} KiB",
            bytes / 1024
        ));
    }
    let mut notes = memory.notes;
    if let Some(f) = summary.fatal {
        notes.push(format!("trace decoded in part: {f}"));
    }
    Ok(DecodeNotes {
        decoder,
        errors: summary.errors,
        notes,
    })
}

//! The ground truth: each vCPU's last P0 elements and exceptions, as the execution showed them.
//!
//! It is recorded where the tracker decides what happened, before and apart from the packet
//! encoder, so that a decoder's reading of the trace can be compared with it.

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::encoder::ExceptionType;

/// What happened at one point of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A branch (direct, conditional, indirect or exception return) that was taken.
    Taken,
    /// A conditional branch that was not taken.
    NotTaken,
    /// A P0 element that is not a branch (`ISB`).
    Waypoint,
    /// An exception: `from` is the preferred return address, `to` the vector.
    Exception(ExceptionType),
    /// Trace stopped being continuous (a filter, an unexplained discontinuity, lost state): `to`
    /// is where it resumed.
    Gap,
}

/// One element of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The instruction (branch or waypoint), or the preferred return address of an exception.
    pub from: u64,
    /// Where execution went next.
    pub to: u64,
}

/// The last events of one vCPU, oldest first, and where its ViewInst start/stop logic stopped
/// it.
#[derive(Clone, Debug)]
pub struct Truth {
    depth: usize,
    events: VecDeque<Event>,
    total: u64,
    /// Start or stop comparators were programmed.
    start_stop: bool,
    /// The state of the start/stop logic: at the start of the session, then as left.
    ssstatus: bool,
    /// The last stop: the address of the stop point and [`Self::total`] once its own element
    /// (if it is a P0 instruction) was recorded.
    stop: Option<(u64, u64)>,
}

impl Truth {
    /// Returns an empty record that keeps the last `depth` events.
    pub fn new(depth: usize) -> Self {
        Self {
            depth: depth.max(1),
            events: VecDeque::with_capacity(depth.clamp(1, 1 << 16)),
            total: 0,
            start_stop: false,
            ssstatus: true,
            stop: None,
        }
    }

    /// Records whether start or stop comparators were programmed, and the state the start/stop
    /// logic starts in (`TRCVICTLR.SSSTATUS`).
    pub fn set_start_stop(&mut self, programmed: bool, started: bool) {
        self.start_stop = programmed;
        self.ssstatus = started;
    }

    /// Records the state the start/stop logic is in now.
    pub fn set_ssstatus(&mut self, started: bool) {
        self.ssstatus = started;
    }

    /// Returns the state of the start/stop logic (true: started).
    pub fn ssstatus(&self) -> bool {
        self.ssstatus
    }

    /// Records that the instruction at `addr` stopped the start/stop logic, after everything
    /// executed up to and including it was recorded.
    pub fn stopped_at(&mut self, addr: u64) {
        self.stop = Some((addr, self.total));
    }

    /// Returns the last stop point and how many events had been recorded then; `None` when the
    /// start/stop logic never stopped the trace.
    pub fn stop(&self) -> Option<(u64, u64)> {
        self.stop
    }

    /// Records `ev`.
    pub fn push(&mut self, ev: Event) {
        if self.events.len() == self.depth {
            self.events.pop_front();
        }
        self.events.push_back(ev);
        self.total = self.total.saturating_add(1);
    }

    /// Returns the kept events, oldest first.
    pub fn events(&self) -> impl ExactSizeIterator<Item = &Event> {
        self.events.iter()
    }

    /// Returns how many events were recorded in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Writes the record as a JSON object (`cpu`, `reason`, `total`, `viewinst`, `events`);
    /// tools/qemu-coresight/README.md describes the fields.
    pub fn to_json(&self, cpu: usize, reason: &str) -> String {
        let mut s = String::with_capacity(256 + self.events.len() * 64);
        let (stopped_at, total_at_stop) = match self.stop {
            Some((a, n)) => (format!("\"{a:#x}\""), n.to_string()),
            None => ("null".to_string(), "null".to_string()),
        };
        let ended_by = match (reason, self.stop) {
            (_, Some((_, n))) if !self.ssstatus && n == self.total => "stop-point",
            ("exit", _) => "exit",
            _ => "disable",
        };
        let _ = write!(
            s,
            "{{\"cpu\": {cpu}, \"reason\": \"{reason}\", \"total\": {}, \"viewinst\": \
             {{\"start_stop\": {}, \"ssstatus\": {}, \"stopped_at\": {stopped_at}, \
             \"total_at_stop\": {total_at_stop}, \"ended_by\": \"{ended_by}\"}}, \"events\": [",
            self.total, self.start_stop, self.ssstatus
        );
        for (i, e) in self.events.iter().enumerate() {
            let (kind, ty) = match e.kind {
                EventKind::Taken => ("taken", None),
                EventKind::NotTaken => ("not-taken", None),
                EventKind::Waypoint => ("waypoint", None),
                EventKind::Exception(t) => ("exception", Some(t.name())),
                EventKind::Gap => ("gap", None),
            };
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "\n  {{\"kind\": \"{kind}\", \"from\": \"{:#x}\", \"to\": \"{:#x}\"",
                e.from, e.to
            );
            if let Some(t) = ty {
                let _ = write!(s, ", \"type\": \"{t}\"");
            }
            s.push('}');
        }
        s.push_str("\n]}");
        s
    }
}

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

/// The last events of one vCPU, oldest first.
#[derive(Clone, Debug)]
pub struct Truth {
    depth: usize,
    events: VecDeque<Event>,
    total: u64,
}

impl Truth {
    /// Returns an empty record that keeps the last `depth` events.
    pub fn new(depth: usize) -> Self {
        Self {
            depth: depth.max(1),
            events: VecDeque::with_capacity(depth.clamp(1, 1 << 16)),
            total: 0,
        }
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

    /// Writes the record as a JSON object (`cpu`, `reason`, `total`, `events`).
    pub fn to_json(&self, cpu: usize, reason: &str) -> String {
        let mut s = String::with_capacity(64 + self.events.len() * 64);
        let _ = write!(
            s,
            "{{\"cpu\": {cpu}, \"reason\": \"{reason}\", \"total\": {}, \"events\": [",
            self.total
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

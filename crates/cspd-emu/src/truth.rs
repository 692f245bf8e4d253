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

/// The most events a record keeps whatever it covers (about 200 MB), so that a sink that takes
/// nothing cannot make it grow without bound.
pub const MAX_KEPT: usize = 1 << 23;

/// The last events of one vCPU, oldest first, and where its ViewInst start/stop logic stopped
/// it.
///
/// It keeps the last `depth` events and, when it covers the sink (`cover` bytes, see
/// [`Truth::covering`]), every older event whose trace bytes the sink may still hold: an event
/// goes only once `cover` more bytes reached the sink after the bytes that carried it. Sized to
/// the sink's buffer, the record then reaches back to the oldest trace in it, however long the
/// machine ran.
#[derive(Clone, Debug)]
pub struct Truth {
    depth: usize,
    events: VecDeque<Event>,
    total: u64,
    /// Bytes of sink input whose events are kept (0: only `depth` counts).
    cover: u64,
    /// Where this vCPU's bytes were handed to the sink: (events recorded then, the sink's input
    /// count after them), oldest first; only those not yet `cover` bytes old.
    handed: VecDeque<(u64, u64)>,
    /// Events before this index were handed to the sink `cover` bytes ago or more.
    overwritten_below: u64,
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
            cover: 0,
            handed: VecDeque::new(),
            overwritten_below: 0,
            start_stop: false,
            ssstatus: true,
            stop: None,
        }
    }

    /// Returns an empty record that keeps the last `depth` events and every event whose trace
    /// bytes were followed by fewer than `cover` bytes of sink input (see
    /// [`Truth::handed_to_sink`]), at most [`MAX_KEPT`].
    pub fn covering(depth: usize, cover: u64) -> Self {
        Self {
            cover,
            ..Self::new(depth)
        }
    }

    /// Records that the trace bytes of every event recorded so far were handed to the sink,
    /// whose input count (all CPUs) is `sink_bytes` after them.
    pub fn handed_to_sink(&mut self, sink_bytes: u64) {
        if self.cover == 0 {
            return;
        }
        self.handed.push_back((self.total, sink_bytes));
        while let Some(&(events, at)) = self.handed.front() {
            if at.saturating_add(self.cover) > sink_bytes && self.handed.len() <= MAX_KEPT {
                break;
            }
            self.overwritten_below = events;
            self.handed.pop_front();
        }
        self.trim();
    }

    /// Returns the sink input this record covers (0: it keeps only its depth).
    pub fn cover(&self) -> u64 {
        self.cover
    }

    fn trim(&mut self) {
        while self.events.len() > self.depth {
            let first = self.total - self.events.len() as u64;
            if self.cover != 0 && first >= self.overwritten_below && self.events.len() <= MAX_KEPT {
                break;
            }
            self.events.pop_front();
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
        self.events.push_back(ev);
        self.total = self.total.saturating_add(1);
        self.trim();
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
            "{{\"cpu\": {cpu}, \"reason\": \"{reason}\", \"total\": {}, \"depth\": {}, \
             \"cover_bytes\": {}, \"viewinst\": \
             {{\"start_stop\": {}, \"ssstatus\": {}, \"stopped_at\": {stopped_at}, \
             \"total_at_stop\": {total_at_stop}, \"ended_by\": \"{ended_by}\"}}, \"events\": [",
            self.total, self.depth, self.cover, self.start_stop, self.ssstatus
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(i: u64) -> Event {
        Event {
            kind: EventKind::Taken,
            from: i,
            to: i + 4,
        }
    }

    fn kept(t: &Truth) -> Vec<u64> {
        t.events().map(|e| e.from).collect()
    }

    #[test]
    fn a_plain_record_keeps_its_depth() {
        let mut t = Truth::new(3);
        for i in 0..10 {
            t.push(ev(i));
            t.handed_to_sink(i * 100);
        }
        assert_eq!(kept(&t), [7, 8, 9]);
        assert_eq!(t.total(), 10);
    }

    #[test]
    fn a_covering_record_keeps_what_the_sink_may_hold() {
        // 1000 bytes of cover, depth 2: events go only once 1000 more bytes followed theirs.
        let mut t = Truth::covering(2, 1000);
        for i in 0..10 {
            t.push(ev(i));
        }
        // Nothing handed to the sink yet: everything stays.
        assert_eq!(kept(&t).len(), 10);
        // Events 0..10 end at sink byte 400.
        t.handed_to_sink(400);
        for i in 10..20 {
            t.push(ev(i));
        }
        // Events 10..20 end at sink byte 1399: 0..10 are 999 bytes old, still kept.
        t.handed_to_sink(1399);
        assert_eq!(kept(&t).len(), 20);
        // One byte more (another CPU's): 0..10 are overwritten, 10..20 are not.
        t.push(ev(20));
        t.handed_to_sink(1400);
        assert_eq!(kept(&t), (10..21).collect::<Vec<_>>());
        // Far later: only the depth is left.
        t.push(ev(21));
        t.handed_to_sink(10_000);
        assert_eq!(kept(&t), [20, 21]);
        assert_eq!(t.total(), 22);
    }
}

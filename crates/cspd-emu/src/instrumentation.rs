//! How the plugin instruments QEMU's translated blocks, and when that changes.
//!
//! Full instrumentation gives every block an execution callback ([`crate::Emu::tb_exec`]: the
//! trace, the PC a CPU debug interface samples, the exception vectors learnt); light
//! instrumentation keeps only the memory callbacks, so the registers still work. Light is for
//! what runs after the trace is over: once the panic dump is done, a kdump capture kernel boots
//! at close to the speed it has without the plugin.
//!
//! Every change flushes all of QEMU's translated code (`qemu_plugin_reset`), so the change must
//! not follow each enable and disable of a trace unit: perf disables and enables them at every
//! context switch of a traced task (per-thread mode) and at every AUX buffer update, hundreds of
//! times a second. The instrumentation therefore goes light only after no trace session has been
//! active for [`LIGHT_AFTER_IDLE_BLOCKS`] blocks of one vCPU's execution, and full again as soon
//! as a session starts.

/// How translated blocks are instrumented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instrumentation {
    /// Every block has an execution callback, on top of what light instrumentation has.
    Full,
    /// Callbacks on the loads and stores that may reach the register window and on the data
    /// cache cleans only: the registers work, but nothing is traced and no PC is kept for a
    /// debug interface to sample.
    Light,
}

/// Blocks one vCPU executes while no trace session is active anywhere before the
/// instrumentation goes light (2^24, about 16.8 million).
///
/// Counted in blocks of guest execution, not in time: a vCPU that waits for an interrupt runs no
/// blocks, so an idle guest neither moves towards light nor loses anything by staying full.
///
/// In guest time (under TCG, the host's): the emulator's part of an execution callback costs
/// about 20 ns (`Emu::tb_exec` on a vCPU with no session, release build), and TCG's own work on
/// a block is about as much again (the plugin doubles the time of a boot, `make bench`). A busy
/// vCPU under full instrumentation thus runs at most some 50 million blocks a second, more
/// likely 20 to 25: the threshold is at least a third of a second of one vCPU's uninterrupted
/// execution with no session, more likely 0.7 s.
///
/// Against perf: a one-second `perf record` of a busy task in per-thread mode, switched out
/// every few milliseconds (HZ=250, a CFS slice or a few), has its trace unit disabled for
/// gaps of a few milliseconds each, a few hundred of them: at 50 million blocks a second a
/// 4 ms gap is 200 000 blocks, an eightieth of the threshold. An AUX buffer update leaves the
/// unit off for microseconds. None of them flushes anything; a gap would have to last a third
/// of a second of busy execution before the blocks were flushed, and then at most once until
/// the next session (and once for it): two flushes per 2^24 blocks executed at the very most.
///
/// After a panic: the kdump capture kernel runs 2^24 blocks fully instrumented before going
/// light, which costs it the callbacks of those blocks, some 0.3 to 0.5 s (20 to 30 ns each),
/// against the tens of seconds it takes to boot and save the dump.
pub const LIGHT_AFTER_IDLE_BLOCKS: u64 = 1 << 24;

/// The instrumentation the machine's state calls for.
///
/// `active_sessions`: trace units tracing now; `sessions_started`: trace sessions opened since
/// start; `idle_blocks`: the most blocks a vCPU executed since the last session started (since
/// start if none did), counted only while no session was active.
///
/// Light only once a session has been opened and closed (before the first one the execution
/// callbacks learn the exception vectors and keep the PC a debug interface samples), and only
/// after [`LIGHT_AFTER_IDLE_BLOCKS`] idle blocks; full whenever a session is active.
pub fn wanted(active_sessions: u32, sessions_started: u64, idle_blocks: u64) -> Instrumentation {
    if active_sessions == 0 && sessions_started > 0 && idle_blocks >= LIGHT_AFTER_IDLE_BLOCKS {
        Instrumentation::Light
    } else {
        Instrumentation::Full
    }
}

/// The instrumentation in force and how many times it changed: [`wanted`] applied at each step
/// where it may change (a session starting, a vCPU reaching the threshold).
#[derive(Debug)]
pub struct Switch {
    mode: Instrumentation,
    switches: u64,
}

impl Default for Switch {
    fn default() -> Self {
        Self::new()
    }
}

impl Switch {
    /// Full instrumentation, not switched yet (what a plugin starts with).
    pub const fn new() -> Self {
        Self {
            mode: Instrumentation::Full,
            switches: 0,
        }
    }

    /// Returns the instrumentation in force.
    pub fn mode(&self) -> Instrumentation {
        self.mode
    }

    /// Returns how many times the instrumentation changed.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Applies [`wanted`] for the machine's state; returns the new instrumentation when it
    /// changed (each change is one flush of QEMU's translated code).
    pub fn follow(
        &mut self,
        active_sessions: u32,
        sessions_started: u64,
        idle_blocks: u64,
    ) -> Option<Instrumentation> {
        let want = wanted(active_sessions, sessions_started, idle_blocks);
        if want == self.mode {
            return None;
        }
        self.mode = want;
        self.switches += 1;
        Some(want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = LIGHT_AFTER_IDLE_BLOCKS;

    #[test]
    fn light_only_after_a_session_and_a_sustained_idle_stretch() {
        // Before any session: full, however long the guest runs.
        assert_eq!(wanted(0, 0, 0), Instrumentation::Full);
        assert_eq!(wanted(0, 0, u64::MAX), Instrumentation::Full);
        // A session active: full.
        assert_eq!(wanted(1, 1, 0), Instrumentation::Full);
        assert_eq!(wanted(1, 5, u64::MAX), Instrumentation::Full);
        // Sessions over: full until the stretch is long enough.
        assert_eq!(wanted(0, 1, 0), Instrumentation::Full);
        assert_eq!(wanted(0, 300, T - 1), Instrumentation::Full);
        assert_eq!(wanted(0, 1, T), Instrumentation::Light);
        assert_eq!(wanted(0, 300, u64::MAX), Instrumentation::Light);
    }

    #[test]
    fn the_switch_counts_changes_not_steps() {
        let mut s = Switch::new();
        assert_eq!(s.mode(), Instrumentation::Full);
        // Hundreds of short sessions, each gap well under the threshold.
        for n in 1..=300 {
            assert_eq!(s.follow(1, n, 0), None);
            assert_eq!(s.follow(0, n, T / 80), None);
        }
        assert_eq!(s.switches(), 0);
        assert_eq!(s.follow(0, 300, T), Some(Instrumentation::Light));
        assert_eq!(s.follow(0, 300, T + 1), None);
        assert_eq!(s.follow(0, 300, 2 * T), None);
        assert_eq!((s.mode(), s.switches()), (Instrumentation::Light, 1));
        assert_eq!(s.follow(1, 301, 0), Some(Instrumentation::Full));
        assert_eq!((s.mode(), s.switches()), (Instrumentation::Full, 2));
    }
}

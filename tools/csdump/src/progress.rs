//! A progress bar for long reads (a full scan of a vmcore, rearranging a flattened dump): shown
//! on stderr only when stderr is a terminal, and only once the work has taken a second.

use std::io::IsTerminal;
use std::time::Duration;
use std::time::Instant;

use indicatif::ProgressBar;
use indicatif::ProgressDrawTarget;
use indicatif::ProgressStyle;

/// How long work runs before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A progress bar that stays hidden until the work is long, and on a terminal.
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    tty: bool,
    shown: std::cell::Cell<bool>,
}

impl Progress {
    /// Starts a bar over `total` bytes, labelled `what`.
    pub fn new(total: u64, what: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg}: {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        ) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Self {
            bar,
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            shown: std::cell::Cell::new(false),
        }
    }

    /// A bar that never shows.
    pub fn hidden() -> Self {
        Self {
            bar: ProgressBar::hidden(),
            start: Instant::now(),
            tty: false,
            shown: std::cell::Cell::new(false),
        }
    }

    /// Sets the position, in bytes.
    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
        if self.tty && !self.shown.get() && self.start.elapsed() >= SHOW_AFTER {
            self.shown.set(true);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

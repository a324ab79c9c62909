//! Progress on stderr for the commands that take seconds (`demo`, `layer`, `bench`): drawn only
//! when stderr is a terminal, so that a pipe, a file or a test sees nothing, and cleared when
//! the work is done, before the results go to stdout.

use std::borrow::Cow;
use std::io::{self, IsTerminal};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of steps with the current step's name; hidden unless stderr is a terminal.
pub struct Progress(ProgressBar);

impl Progress {
    /// `steps` steps of `command` (e.g. `demo`).
    pub fn new(command: &'static str, steps: u64) -> Progress {
        if !io::stderr().is_terminal() {
            return Progress(ProgressBar::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        // The template is a constant; should it ever not parse, a plain bar will do.
        let style = ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:24}] {pos}/{len} {elapsed:>3} {wide_msg}",
        )
        .map_or_else(
            |_| ProgressStyle::default_bar(),
            |s| s.progress_chars("=> "),
        );
        bar.set_style(style);
        bar.set_prefix(command);
        // A single step can take seconds (the demo's largest interpreter run): the spinner and
        // the clock show the command is alive meanwhile.
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress(bar)
    }

    /// Names the step about to run.
    pub fn start(&self, step: impl Into<Cow<'static, str>>) {
        self.0.set_message(step);
    }

    /// Counts a step as done.
    pub fn done(&self) {
        self.0.inc(1);
    }
}

/// Says on a terminal's stderr that this build times code with debug assertions on (the
/// README's `checked` profile, or a debug build): they make the copy routines the kernels call
/// markedly slower, which a reader of the times should know. `bench --json` says it in a field
/// of its own.
pub fn note_debug_timings() {
    if cfg!(debug_assertions) && io::stderr().is_terminal() {
        crate::failure::eprint_line(
            "note: this build has debug assertions on, which slow the kernels down; \
             `cargo run --release` times a release build",
        );
    }
}

impl Drop for Progress {
    /// Clears the bar, on success and on error alike, so that only results and the one error
    /// line stay on the screen.
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

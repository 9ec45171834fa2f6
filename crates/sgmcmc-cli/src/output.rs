//! Standard output that never panics: `println!` panics when stdout is a closed pipe
//! (`sgmcmc run … | head -1`) or a full disk, which would end a run before its summary is
//! written. [`outln!`] and [`out!`] write through [`write`], which keeps the first failure
//! and drops later output; the command carries on, and `main` reports the failure at the end
//! ([`failure`]).

use std::io::{self, Write};
use std::sync::Mutex;

/// The first failed write to stdout, if any.
static FAILURE: Mutex<Option<io::Error>> = Mutex::new(None);

/// Writes to stdout unless an earlier write failed; a failure is kept, not raised.
pub fn write(args: std::fmt::Arguments) {
    let mut failure = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    if failure.is_some() {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        *failure = Some(e);
    }
}

/// The first failed write to stdout (after a final flush), if any.
pub fn failure() -> Option<io::Error> {
    write(format_args!(""));
    FAILURE.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// `println!` through [`write`].
macro_rules! outln {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

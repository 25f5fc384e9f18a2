//! Standard output for binaries that ends quietly when the reader goes
//! away: `ward-demo | head` must not panic. `println!` panics when stdout
//! is a closed pipe; [`outln!`](crate::outln) drops output instead, so the
//! program runs on (a server keeps serving) and exits with its own code.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Write `args` and a newline to stdout; once the reader has gone away
/// (broken pipe) every later write is dropped. Other write errors are
/// reported once on stderr.
pub fn println(args: std::fmt::Arguments<'_>) {
    print(format_args!("{args}\n"));
}

/// Write `args` to stdout (see [`println()`]).
pub fn print(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("cannot write to stdout: {e}");
        }
    }
}

/// `println!` that ends quietly on a closed pipe (see [`println()`]).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::println(format_args!($($arg)*))
    };
}

/// `print!` that ends quietly on a closed pipe (see [`print()`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}

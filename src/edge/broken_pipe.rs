//! How a printing command ends when its reader goes away (`infscale simulate | head`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe is an error, and `println!` turns that error
//! into a panic (exit 101, a backtrace on stderr). The commands that print a table or a report
//! and then exit take the default action back instead: the process ends quietly at the first
//! write nobody reads, with the status a shell reports as 141, as `cat` and `grep` do. The
//! long-running servers (`serve`, `activator`) keep Rust's default; their sockets never raise
//! the signal in any case (the standard library sends with MSG_NOSIGNAL).

/// Restores SIGPIPE's default action for this process.
#[cfg(unix)]
pub fn end_quietly() {
    // SAFETY: setting a signal's disposition to SIG_DFL installs no handler and touches no
    // memory; it is called once, before any thread or runtime starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Elsewhere a closed stdout is an error like any other.
#[cfg(not(unix))]
pub fn end_quietly() {}

//! Which upstream failures mean the upstream never read the request, so it may be sent again
//! on a fresh connection.
//!
//! A model server may close a keep-alive connection the moment a response ends while still
//! advertising keep-alive (llama.cpp's llama-server does after every streamed response). A
//! request sent on that pooled connection a millisecond later lands on a socket the server no
//! longer reads: the connection ends before a byte of the answer. hyper retries such a request
//! only when it had not yet written it; once written, the client sees "connection closed before
//! message completed" and a proxy that passes that on fails one stream in a few hundred. nginx
//! sends it again on another connection, and so does the activator, once, when the connection
//! ended or was reset with no response head and either the request never reached the socket, or
//! the connection had already carried an answer (it was pooled) and ended within
//! [`CROSSING`] of the request's write: the server's close was on its way when the request
//! left. A connection that fails later, or before it ever answered, is a server that took the
//! request and died with it; that request is not sent again. (Whether a connection was pooled is
//! told by whether it has answered, not by when it was opened: a request waiting for a connection
//! can be handed one opened after it was sent that has already answered another.)
//!
//! Within that window a request whose method is not idempotent (a completion's POST) goes again
//! only with proof the upstream never read it: the connection was reset (a server that closes
//! with our bytes unread, or before they come, has its kernel answer them with a reset; one
//! that read the whole request and then dropped the connection sends a plain end, and used to
//! get the completion a second time 9 times in 10), or nothing reached its socket since its
//! last answer. The socket side of that proof is in [`super::written`].

use hyper_util::client::legacy::connect::Connected;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest after a request's write that a pooled connection's end still counts as a close
/// that crossed it: a round trip and the scheduling around it on a busy node (50 ms was passed
/// on a loaded 2-core machine), far below any model's time to answer a request it did read.
pub const CROSSING: Duration = Duration::from_millis(250);

/// Whether an upstream connection has answered a request yet, and whether it ended with
/// nothing written to it since its last answer's bytes, carried in its [`Connected`] extras (so
/// in the extensions of every response it brings, and in the errors it fails with).
#[derive(Debug, Clone, Default)]
pub struct Answered(Arc<Flags>);

#[derive(Debug, Default)]
pub struct Flags {
    answered: AtomicBool,
    ended_unwritten: AtomicBool,
}

impl Answered {
    /// The connection ended with not a byte written to its socket since it last read one: a
    /// request it failed had never reached the upstream (its signal of being written came
    /// from another connection's write on the thread, see [`super::written`]).
    pub fn ended_unwritten(&self) {
        self.0.ended_unwritten.store(true, Ordering::Relaxed);
    }
}

/// Notes that the connection that brought `response` has answered.
pub fn note_answer<B>(response: &http::Response<B>) {
    if let Some(a) = response.extensions().get::<Answered>() {
        if !a.0.answered.load(Ordering::Relaxed) {
            a.0.answered.store(true, Ordering::Relaxed);
        }
    }
}

/// The connection info an upstream connection reports, with its [`Answered`] flag.
pub fn connected(base: Connected, answered: &Answered) -> Connected {
    base.extra(answered.clone())
}

/// Whether `error` (no response head received; the request written to the socket at
/// `written`, or never) says the upstream never read the request. A request written to a
/// pooled connection that ended within [`CROSSING`] is taken as unread only when its method is
/// `idempotent`, when not a byte reached this connection's socket after its last answer (the
/// request's written signal came from another connection's write), or when the connection was
/// reset: an upstream that closes its socket with our
/// bytes unread (or arriving after its close) answers them with a reset, while one that read
/// the whole request and then dropped the connection ends it plainly. A completion (POST) the
/// upstream may have read is never sent twice.
pub fn never_read(
    error: &hyper_util::client::legacy::Error,
    written: Option<Instant>,
    idempotent: bool,
) -> bool {
    if error.is_connect() || !closed_under(error) {
        return false;
    }
    let Some(written) = written else {
        return true;
    };
    let (pooled, unwritten) = error.connect_info().map_or((false, false), |info| {
        let mut extensions = http::Extensions::new();
        info.get_extras(&mut extensions);
        extensions.get::<Answered>().map_or((false, false), |a| {
            (
                a.0.answered.load(Ordering::Relaxed),
                a.0.ended_unwritten.load(Ordering::Relaxed),
            )
        })
    });
    pooled && written.elapsed() <= CROSSING && (idempotent || unwritten || reset_under(error))
}

/// Whether the error chain says the upstream reset the connection (or it was reset under a
/// write), as its kernel does when bytes arrive that it will never read.
fn reset_under(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(io.kind(), ConnectionReset | BrokenPipe) {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

/// Whether the error chain says the connection ended (or was reset) rather than a timeout, a
/// malformed answer or a local fault.
fn closed_under(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return true;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_or_an_early_end_is_a_close_and_a_timeout_is_not() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(closed_under(&reset));
        let timeout = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert!(!closed_under(&timeout));
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("send failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = Outer(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(closed_under(&wrapped));
    }
}

//! Where a listener's connections come from, and the pause after a failed `accept`.
//!
//! An accept can fail for the process (out of descriptors: EMFILE, ENFILE) or for one connection
//! (ECONNABORTED: the client left before it was taken). Retrying at once spins a core while the
//! cause lasts; returning the error ends the listener. So a failed accept waits, starting at the
//! listener's `accept_backoff` and doubling while accepts keep failing, up to [`BACKOFF_MAX`],
//! and the first accept that succeeds starts the pause over.
//!
//! [`Accept`] is what the listener needs of a socket, so the accept path is tested with a
//! channel of made-up outcomes under tokio's paused clock.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// The longest pause between failed accepts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A source of connections.
pub trait Accept {
    type Io: AsyncRead + AsyncWrite + Unpin;

    /// The next connection and its client's address, or why none could be taken.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, SocketAddr)>>;
}

impl Accept for TcpListener {
    type Io = TcpStream;

    /// Every accepted socket gets `TCP_NODELAY`: answers are small and go at once.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        TcpListener::poll_accept(self, cx).map_ok(|(stream, peer)| {
            let _ = stream.set_nodelay(true);
            (stream, peer)
        })
    }
}

/// The pause after failed accepts: `base`, doubled each failure in a row, at most
/// [`BACKOFF_MAX`] (or `base`, if longer).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    base: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(base: Duration) -> Backoff {
        Backoff { base, next: base }
    }

    /// The pause after this failure.
    pub fn failed(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX.max(self.base));
        now
    }

    /// An accept succeeded: the next failure waits `base` again.
    pub fn succeeded(&mut self) {
        self.next = self.base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_to_its_bound_and_starts_over() {
        let mut b = Backoff::new(Duration::from_millis(100));
        let pauses: Vec<u64> = (0..6).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(100));
        // A base above the bound is the bound.
        let mut long = Backoff::new(Duration::from_secs(3));
        assert_eq!(
            (long.failed(), long.failed()),
            (Duration::from_secs(3), Duration::from_secs(3))
        );
    }
}

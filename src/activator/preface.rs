//! Which HTTP a new client connection speaks, told by peeking at its first bytes without
//! consuming them: the HTTP/2 connection preface (RFC 9113, section 3.4) means h2c with prior
//! knowledge, anything else HTTP/1.1. hyper-util's `auto` builder reads those bytes instead and
//! replays them as a short first read, after which hyper grows every HTTP/1 connection's read
//! buffer from 8 to 16 KiB: the largest share of a held request's memory
//! (scripts/profile-activator.sh, part 3).

use crate::edge::listener::Conn;
use std::time::Duration;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    Http1,
    Http2,
}

/// Waits until the first bytes tell the protocol, peeking again every `poll` while only a part of
/// the preface is in; `None` when the client closes first. The caller bounds the wait (a client
/// that sends nothing is the slow-loris case; the connection's first-byte deadline ends it too).
pub async fn speaks(stream: &mut Conn, poll: Duration) -> std::io::Result<Option<Speaks>> {
    let mut first = [0u8; PREFACE.len()];
    loop {
        let n = stream.peek(&mut first).await?;
        match judge(&first[..n]) {
            Judged::Closed => return Ok(None),
            Judged::Is(speaks) => return Ok(Some(speaks)),
            // Only a part of the preface so far. Peeking again would return the same bytes at
            // once, so wait a little for the rest (h2 clients send the preface in one write).
            Judged::NeedMore => tokio::time::sleep(poll).await,
        }
    }
}

/// What the first bytes of a connection say.
#[derive(Debug, PartialEq, Eq)]
pub enum Judged {
    Closed,
    NeedMore,
    Is(Speaks),
}

/// Judges the first bytes of a connection (at most the preface's length are looked at).
pub fn judge(first: &[u8]) -> Judged {
    if first.is_empty() {
        Judged::Closed
    } else if first != &PREFACE[..first.len().min(PREFACE.len())] {
        Judged::Is(Speaks::Http1)
    } else if first.len() >= PREFACE.len() {
        Judged::Is(Speaks::Http2)
    } else {
        Judged::NeedMore
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_the_protocol() {
        assert_eq!(judge(b""), Judged::Closed);
        assert_eq!(judge(b"POST /v1/completions"), Judged::Is(Speaks::Http1));
        // "P" is shared by POST, PUT and the preface: one byte cannot tell.
        assert_eq!(judge(b"P"), Judged::NeedMore);
        assert_eq!(judge(b"PU"), Judged::Is(Speaks::Http1));
        assert_eq!(judge(b"PRI * HTTP/2.0\r\n"), Judged::NeedMore);
        assert_eq!(judge(PREFACE), Judged::Is(Speaks::Http2));
    }
}

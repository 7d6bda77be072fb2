//! The listener's bounds asserted on tokio's paused clock: connections are in-memory pipes fed
//! to the listener by a channel, so every deadline is read off the test clock, never the wall
//! one. One test takes a real TCP connection through the accept path.

use super::*;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Connections, or failed accepts, as the test sends them.
struct Fake(mpsc::UnboundedReceiver<io::Result<(DuplexStream, SocketAddr)>>);

impl Accept for Fake {
    type Io = DuplexStream;

    fn poll_accept(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(DuplexStream, SocketAddr)>> {
        match self.0.poll_recv(cx) {
            Poll::Ready(Some(accepted)) => Poll::Ready(accepted),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

type Connect = mpsc::UnboundedSender<io::Result<(DuplexStream, SocketAddr)>>;

const SECOND: Duration = Duration::from_secs(1);

fn bounds() -> Bounds {
    Bounds {
        max_connections: 2,
        max_per_client: None,
        first_byte: 5 * SECOND,
        head_timeout: 5 * SECOND,
        idle: Some(30 * SECOND),
        idle_on_writes: false,
        write_stall: Some(10 * SECOND),
        first_request: None,
        max_age: None,
        accept_backoff: Duration::from_millis(100),
    }
}

fn listener(bounds: Bounds) -> (Listener<Fake>, Connect) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Listener::new(Fake(rx), bounds, "test"), tx)
}

/// A client from `ip` connects; its end of the pipe, which holds 16 bytes in flight.
fn connect(tx: &Connect, ip: [u8; 4]) -> DuplexStream {
    let (client, server) = tokio::io::duplex(16);
    let peer = SocketAddr::from((ip, 40_000));
    tx.send(Ok((server, peer))).unwrap();
    client
}

const HOME: [u8; 4] = [10, 0, 0, 1];

/// The server's end of a new connection from a client that has sent one byte.
async fn spoken(l: &mut Listener<Fake>, tx: &Connect) -> (Conn<DuplexStream>, DuplexStream) {
    let mut client = connect(tx, HOME);
    let mut server = l.accept().await;
    client.write_all(b"x").await.unwrap();
    let mut one = [0u8; 1];
    server.read_exact(&mut one).await.unwrap();
    (server, client)
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_is_closed_at_the_first_byte_deadline() {
    let (mut l, tx) = listener(bounds());
    let _client = connect(&tx, HOME);
    let mut server = l.accept().await;
    let start = Instant::now();
    let err = server.read(&mut [0u8; 8]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), 5 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_connection_is_closed_after_the_idle_span_since_its_last_byte() {
    let (mut l, tx) = listener(bounds());
    let (mut server, mut client) = spoken(&mut l, &tx).await;
    let start = Instant::now();
    // Another byte at 20 s: the idle span starts again.
    tokio::spawn(async move {
        tokio::time::sleep(20 * SECOND).await;
        client.write_all(b"y").await.unwrap();
        std::future::pending::<()>().await;
    });
    let mut buf = [0u8; 8];
    assert_eq!(server.read(&mut buf).await.unwrap(), 1);
    assert_eq!(start.elapsed(), 20 * SECOND);
    let err = server.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), 50 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn without_an_idle_limit_a_spoken_connection_stays_open() {
    let (mut l, tx) = listener(Bounds {
        idle: None,
        ..bounds()
    });
    let (mut server, _client) = spoken(&mut l, &tx).await;
    let read = tokio::time::timeout(3600 * SECOND, server.read(&mut [0u8; 8])).await;
    assert!(read.is_err(), "closed: {read:?}");
}

/// A client sending a byte every 10 s (answered pings, a dribbled preface) with no request
/// beginning is closed at `first_request`, however alive its bytes keep it; one the server
/// called useful is not.
#[tokio::test(start_paused = true)]
async fn bytes_without_a_request_do_not_keep_a_connection() {
    for marked in [false, true] {
        let (mut l, tx) = listener(Bounds {
            first_request: Some(60 * SECOND),
            ..bounds()
        });
        let mut client = connect(&tx, HOME);
        let mut server = l.accept().await;
        if marked {
            server.useful().now();
        }
        let start = Instant::now();
        let dribble = tokio::spawn(async move {
            for _ in 0..20 {
                if client.write_all(b"P").await.is_err() {
                    break;
                }
                tokio::time::sleep(10 * SECOND).await;
            }
            client
        });
        let mut buf = [0u8; 8];
        let outcome = loop {
            match server.read(&mut buf).await {
                Ok(0) => break None,
                Ok(_) => continue,
                Err(e) => break Some(e.kind()),
            }
        };
        assert_eq!(outcome, Some(io::ErrorKind::TimedOut));
        if marked {
            // Only its idle span ends it: 30 s after its last byte (at 190 s).
            assert_eq!(start.elapsed(), 220 * SECOND);
        } else {
            assert_eq!(start.elapsed(), 60 * SECOND);
        }
        drop(server);
        let _ = dribble.await;
    }
}

/// The server writes every 10 s for 100 s to a client that reads and says nothing: with
/// `idle_on_writes` the stream stays open; without, it is closed 30 s after the client's byte.
#[tokio::test(start_paused = true)]
async fn a_stream_to_a_silent_client_is_idle_only_when_nothing_moves() {
    for idle_on_writes in [true, false] {
        let (mut l, tx) = listener(Bounds {
            idle_on_writes,
            ..bounds()
        });
        let (server, mut client) = spoken(&mut l, &tx).await;
        let start = Instant::now();
        let drain = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while client.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        });
        let (mut rd, mut wr) = tokio::io::split(server);
        let writer = tokio::spawn(async move {
            for _ in 0..10 {
                if wr.write_all(b"event\n").await.is_err() {
                    break;
                }
                tokio::time::sleep(10 * SECOND).await;
            }
            wr
        });
        let read = tokio::time::timeout(100 * SECOND, rd.read(&mut [0u8; 8])).await;
        if idle_on_writes {
            assert!(read.is_err(), "the stream was cut: {read:?}");
        } else {
            let err = read.expect("still open after 100 s").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert_eq!(start.elapsed(), 30 * SECOND);
        }
        drop(rd.unsplit(writer.await.unwrap()));
        drain.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_the_client_takes_nothing_of_fails_after_the_stall_limit() {
    let (mut l, tx) = listener(bounds());
    let (mut server, mut client) = spoken(&mut l, &tx).await;
    // The pipe holds 16 bytes; the client reads 16 every 9 s, under the stall limit: the
    // last of 64 bytes is in the pipe at 27 s.
    let start = Instant::now();
    let reader = tokio::spawn(async move {
        let mut got = 0;
        let mut buf = [0u8; 16];
        while got < 64 {
            tokio::time::sleep(9 * SECOND).await;
            got += client.read(&mut buf).await.unwrap();
        }
        client
    });
    server.write_all(&[b'a'; 64]).await.unwrap();
    assert_eq!(start.elapsed(), 27 * SECOND);
    // The client takes the last 16 bytes at 36 s, then reads nothing more: the next write
    // fails 10 s after it stopped moving.
    let _client = reader.await.unwrap();
    let start = Instant::now();
    let err = server.write_all(&[b'b'; 64]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), 10 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn at_the_cap_a_silent_connection_gives_way_and_a_newcomer_to_speakers_is_closed() {
    let (mut l, tx) = listener(bounds());
    let _silent = connect(&tx, HOME);
    let mut silent = l.accept().await;
    let (_speaker, _speaker_client) = spoken(&mut l, &tx).await;
    // A third at the cap of two: the silent one gives way.
    let mut third_client = connect(&tx, HOME);
    let mut third = l.accept().await;
    let err = silent.read(&mut [0u8; 1]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
    drop(silent);
    // The third speaks: every open one has, and a fourth is closed as it is accepted.
    third_client.write_all(b"x").await.unwrap();
    assert_eq!(third.read(&mut [0u8; 1]).await.unwrap(), 1);
    let mut fourth = connect(&tx, HOME);
    assert!(tokio::time::timeout(SECOND, l.accept()).await.is_err());
    assert_eq!(
        fourth.read(&mut [0u8; 1]).await.unwrap(),
        0,
        "the fourth is closed"
    );
    assert_eq!(l.open_connections().count(), 2);
    // One closes: the next is taken.
    drop(third);
    let _fifth_client = connect(&tx, HOME);
    let _fifth = l.accept().await;
}

#[tokio::test(start_paused = true)]
async fn one_address_gets_at_most_its_share() {
    let (mut l, tx) = listener(Bounds {
        max_connections: 10,
        max_per_client: Some(2),
        ..bounds()
    });
    let _a = (connect(&tx, HOME), l.accept().await);
    let _b = (connect(&tx, HOME), l.accept().await);
    let mut third = connect(&tx, HOME);
    assert!(tokio::time::timeout(SECOND, l.accept()).await.is_err());
    assert_eq!(
        third.read(&mut [0u8; 1]).await.unwrap(),
        0,
        "the third is closed"
    );
    let _other = connect(&tx, [10, 0, 0, 2]);
    assert_eq!(
        l.accept().await.peer().ip(),
        std::net::IpAddr::from([10, 0, 0, 2])
    );
}

/// Failed accepts pause the listener 100 ms, then twice as long each time, up to a second;
/// one accept that succeeds starts the pause over.
#[tokio::test(start_paused = true)]
async fn failed_accepts_back_off_within_a_bound() {
    let (mut l, tx) = listener(bounds());
    let start = Instant::now();
    for _ in 0..6 {
        tx.send(Err(io::Error::from_raw_os_error(24))).unwrap(); // EMFILE
    }
    let _client = connect(&tx, HOME);
    let _server = l.accept().await;
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100 + 200 + 400 + 800 + 1000 + 1000)
    );
    let start = Instant::now();
    for _ in 0..2 {
        tx.send(Err(io::ErrorKind::ConnectionAborted.into()))
            .unwrap();
    }
    let _client = connect(&tx, HOME);
    let _server = l.accept().await;
    assert_eq!(start.elapsed(), Duration::from_millis(100 + 200));
}

/// A request head begun and never finished ends the connection at the head timeout, although
/// the first byte came and the idle span (none here) never runs out.
#[tokio::test(start_paused = true)]
async fn a_request_head_must_be_whole_within_the_head_timeout() {
    let b = Bounds {
        idle: None,
        ..bounds()
    };
    let (mut l, tx) = listener(b);
    let mut client = connect(&tx, HOME);
    let server = l.accept().await;
    // More than the pipe holds: the client writes as the server reads, then waits.
    tokio::spawn(async move {
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: a\r\n")
            .await
            .unwrap();
        std::future::pending::<()>().await;
    });
    let service = hyper::service::service_fn(|_req| async {
        Ok::<_, std::convert::Infallible>(hyper::Response::new(
            http_body_util::Empty::<bytes::Bytes>::new(),
        ))
    });
    let start = Instant::now();
    let served = b
        .http1()
        .serve_connection(hyper_util::rt::TokioIo::new(server), service)
        .await;
    assert!(served.is_err(), "{served:?}");
    assert_eq!(start.elapsed(), 5 * SECOND);
}

/// The accept path on a real socket: the connection comes with its client's address and
/// carries bytes both ways; a peek sees bytes without taking them.
#[tokio::test]
async fn a_tcp_connection_is_accepted_and_served() {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let mut l = Listener::new(tcp, bounds(), "test");
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut server = l.accept().await;
    assert_eq!(server.peer(), client.local_addr().unwrap());
    client.write_all(b"ping").await.unwrap();
    let mut peeked = [0u8; 4];
    let mut seen = 0;
    while seen < 4 {
        seen = server.peek(&mut peeked).await.unwrap();
    }
    let mut read = [0u8; 4];
    server.read_exact(&mut read).await.unwrap();
    assert_eq!((&peeked, &read), (b"ping", b"ping"));
    server.write_all(b"pong").await.unwrap();
    client.read_exact(&mut read).await.unwrap();
    assert_eq!(&read, b"pong");
}

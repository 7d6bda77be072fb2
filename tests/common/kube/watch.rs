//! The API stand-in's watch: the store's changes after a resource version, as chunked JSON
//! events, held open for a while and then ended, as the API server ends a watch.

use super::store::{Cluster, Key};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a watch is held open before it ends (and the watcher watches again).
const WATCH_FOR: Duration = Duration::from_secs(5);

fn chunk(stream: &mut TcpStream, v: &serde_json::Value) -> bool {
    let line = format!("{v}\n");
    stream
        .write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes())
        .is_ok()
}

/// Streams every change after resource version `from` that `wanted` selects, for
/// [`WATCH_FOR`] or until the server stops; then ends the watch.
pub fn watch(
    cluster: &Cluster,
    stream: &mut TcpStream,
    from: u64,
    wanted: &dyn Fn(&Key, &serde_json::Value) -> bool,
    stop: &AtomicBool,
) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    let mut sent = from;
    let end = Instant::now() + WATCH_FOR;
    while Instant::now() < end && !stop.load(Ordering::SeqCst) {
        let s = cluster.wait_past(cluster.state(), sent, Duration::from_millis(100));
        let due: Vec<serde_json::Value> = s
            .events
            .iter()
            .filter(|(rv, _, k, v)| *rv > sent && wanted(k, v))
            .map(|(_, kind, _, v)| serde_json::json!({"type": kind, "object": v}))
            .collect();
        sent = s.rv.max(sent);
        drop(s);
        for event in due {
            if !chunk(stream, &event) {
                return;
            }
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

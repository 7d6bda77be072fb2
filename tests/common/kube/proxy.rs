//! The API stand-in's pod proxy (`pods/NAME:PORT/proxy/PATH`), which `serve` scrapes through
//! when it runs outside the cluster.

use super::store::{Cluster, Key};
use crate::common::http::respond;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The pod proxy: `pods/NAME:PORT/proxy/PATH` is a GET of `http://POD_IP:PORT/PATH`, its
/// status and body passed back; 503 when the pod does not answer.
pub fn proxy(cluster: &Cluster, stream: &mut TcpStream, key: &Key, tail: &str) {
    let (name, port) = key.name.split_once(':').unwrap_or((&key.name, "80"));
    let pod = Key {
        name: name.to_owned(),
        ..key.clone()
    };
    let ip = cluster
        .state()
        .objects
        .get(&pod)
        .and_then(|p| p["status"]["podIP"].as_str().map(str::to_owned));
    let tail = if tail.is_empty() { "/" } else { tail };
    match ip.and_then(|ip| get(&format!("{ip}:{port}"), tail)) {
        Some((code, body)) => respond(stream, code, "text/plain", &body),
        None => respond(stream, 503, "text/plain", b"pod unreachable\n"),
    }
}

/// A blocking GET of `http://addr/path`.
fn get(addr: &str, path: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).ok()?;
    let end = all.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let code = String::from_utf8_lossy(&all[..end])
        .split(' ')
        .nth(1)?
        .parse()
        .ok()?;
    Some((code, all[end..].to_vec()))
}

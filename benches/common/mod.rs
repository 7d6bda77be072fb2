//! Helpers the process-level benchmarks share: a free loopback port to hand a child process,
//! and its resident memory read from /proc. Not every benchmark uses both.

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Resident set size of a process, MB (0 when /proc cannot tell).
#[allow(dead_code)]
pub fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

//! Helpers the process-level benchmarks share: a free loopback port to hand a child process,
//! and its resident memory and CPU time read from /proc. Not every benchmark uses all.

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

/// CPU time a process has used so far (user + system), seconds; 0 when /proc cannot tell.
#[allow(dead_code)]
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state; utime and stime
    // are the 14th and 15th fields of the whole line, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |i: usize| {
        rest.split_whitespace()
            .nth(i)
            .and_then(|v| v.parse::<f64>().ok())
    };
    match (field(11), field(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => 0.0,
    }
}

/// `infscale serve` as a child process, killed when dropped.
#[allow(dead_code)]
pub struct Scaler(pub std::process::Child);

impl Drop for Scaler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `infscale serve` without Kubernetes on 127.0.0.1:`port` with these static targets.
#[allow(dead_code)]
pub fn start_scaler(statics: &[String], port: u16) -> Scaler {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_infscale"));
    cmd.args([
        "serve",
        "--no-kube",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-listen",
        "none",
    ]);
    for s in statics {
        cmd.arg("--static-target").arg(s);
    }
    cmd.env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Scaler(cmd.spawn().expect("start infscale serve"))
}

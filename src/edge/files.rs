//! Text files infscale reads (traces, scenario and GPU YAML, state files, the activator's routes, TLS PEM files), bounded.
//!
//! `std::fs::read_to_string` trusts the file: pointed at `/dev/zero` or a pipe that never ends it
//! reads until memory runs out. Here a file is read in chunks up to a cap
//! ([`crate::limits::MAX_TRACE_FILE_BYTES`], [`crate::limits::MAX_CONFIG_FILE_BYTES`]); a regular
//! file known to be larger is refused before a byte is read, and a NUL byte (a binary file, a
//! device) stops the read at once.

use anyhow::{bail, Context};
use std::io::Read;
use std::path::Path;

/// Bytes read at a time.
const CHUNK: usize = 64 << 10;

/// The file at `path` as UTF-8 text of at most `cap` bytes; every error names the file.
pub fn read_text(path: &Path, cap: u64) -> anyhow::Result<String> {
    let name = path.display();
    let mut file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
    if let Ok(meta) = file.metadata() {
        if meta.is_file() && meta.len() > cap {
            bail!(
                "{name}: {} bytes, larger than the {cap}-byte cap for this file",
                meta.len()
            );
        }
    }
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("{name}: cannot read")),
        };
        let read = &chunk[..n];
        if let Some(at) = memchr::memchr(0, read) {
            bail!(
                "{name}: not a text file (a NUL byte at offset {})",
                bytes.len() + at
            );
        }
        if (bytes.len() + n) as u64 > cap {
            bail!("{name}: larger than the {cap}-byte cap for this file");
        }
        bytes.extend_from_slice(read);
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{name}: not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("infscale-files-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn text_within_the_cap_is_read() {
        let p = temp("ok", b"time_s,prompt_tokens,output_tokens\n1,2,3\n");
        assert_eq!(read_text(&p, 100).unwrap().lines().count(), 2);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn too_large_binary_and_not_utf8_are_refused_naming_the_file() {
        let p = temp("big", &[b'x'; 200]);
        let e = read_text(&p, 100).unwrap_err().to_string();
        assert!(
            e.contains("infscale-files") && e.contains("100-byte cap"),
            "{e}"
        );
        let p2 = temp("nul", b"abc\0def");
        let e = read_text(&p2, 100).unwrap_err().to_string();
        assert!(e.contains("NUL byte at offset 3"), "{e}");
        let p3 = temp("latin1", b"caf\xe9\n");
        let e = read_text(&p3, 100).unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text (at byte 3)"), "{e}");
        for p in [p, p2, p3] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_device_that_never_ends_is_stopped_at_once() {
        let e = read_text(Path::new("/dev/zero"), 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero: not a text file"), "{e}");
    }
}

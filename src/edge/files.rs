//! Text files infscale reads (traces, scenario and GPU YAML, state files, the activator's routes, TLS PEM files), bounded,
//! and the state files it writes, whole or not at all.
//!
//! `std::fs::read_to_string` trusts the file: pointed at `/dev/zero` or a pipe that never ends it
//! reads until memory runs out. Here a file is read in chunks up to a cap
//! ([`infscale_core::limits::MAX_TRACE_FILE_BYTES`], [`infscale_core::limits::MAX_CONFIG_FILE_BYTES`]); a regular
//! file known to be larger is refused before a byte is read, and a NUL byte (a binary file)
//! stops the read at once. Only regular files are read (a symlink to one is one): a FIFO, a
//! socket or a device is refused at once, before it is opened (opening a FIFO waits for a writer
//! that may never come, and reading a device may never end). No infscale command documents
//! reading a file argument from `/dev/stdin` or `-`, so nothing is lost.

use anyhow::{bail, Context};
use std::io::Read;
use std::path::Path;

/// Bytes read at a time.
const CHUNK: usize = 64 << 10;

/// Writes `bytes` to `path` whole or not at all: to a temporary file beside it first, then
/// renamed over it, so a reader (or a crash) never sees half a file; errors name the file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))
}

/// The file at `path` as UTF-8 text of at most `cap` bytes; every error names the file.
pub fn read_text(path: &Path, cap: u64) -> anyhow::Result<String> {
    let name = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("{name}: cannot read"))?;
    refuse_unless_regular(path, &meta)?;
    let mut file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
    // Looked at again on the open file: the path may have been swapped since.
    let meta = file
        .metadata()
        .with_context(|| format!("{name}: cannot read"))?;
    refuse_unless_regular(path, &meta)?;
    if meta.len() > cap {
        bail!(
            "{name}: {} bytes, larger than the {cap}-byte cap for this file",
            meta.len()
        );
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

/// An error naming `path` unless `meta` is a regular file's.
fn refuse_unless_regular(path: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = kind_of(meta);
    bail!(
        "{}: not a text file ({kind}; infscale reads only regular files)",
        path.display()
    )
}

/// What a non-regular file is, in words.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    "a special file"
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
    fn a_device_that_never_ends_is_refused_at_once() {
        let e = read_text(Path::new("/dev/zero"), 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero: not a text file (a character device;"),
            "{e}"
        );
    }

    /// A FIFO with no writer used to hang the read forever (opening it waits for one).
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once_naming_it() {
        let dir = std::env::temp_dir().join(format!("infscale-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("routes.yaml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_text(&path, 1 << 20).map_err(|e| e.to_string()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        // Unblock a hung open (old code) so the thread ends either way.
        if got.is_err() {
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let e = got.expect("the read returned within 5 s").unwrap_err();
        assert!(
            e.contains(&fifo.display().to_string()) && e.contains("FIFO"),
            "{e}"
        );
    }

    #[test]
    fn a_directory_is_refused_naming_it() {
        let e = read_text(&std::env::temp_dir(), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a text file (a directory;"), "{e}");
    }
}

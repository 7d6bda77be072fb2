//! One binary, two names: the image ships `infscale` once and `infscale-sim` as a link to it, so
//! `infscale` called by the name `infscale-sim` must answer exactly as the `infscale-sim` target.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("run binary")
}

/// `infscale` under the name `infscale-sim` in a fresh directory: a hard link where the file
/// system allows it, else a copy (what matters is argv[0], not the inode).
fn infscale_named_sim() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("infscale-sim-alias-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let link = dir.join(format!("infscale-sim{}", std::env::consts::EXE_SUFFIX));
    let original = Path::new(env!("CARGO_BIN_EXE_infscale"));
    if std::fs::hard_link(original, &link).is_err() {
        std::fs::copy(original, &link).expect("copy infscale");
    }
    (dir, link)
}

#[test]
fn infscale_called_infscale_sim_is_the_tuning_cli() {
    let (dir, alias) = infscale_named_sim();
    let sim = Path::new(env!("CARGO_BIN_EXE_infscale-sim"));
    for args in [
        &["simulate", "--help"][..],
        &["--help"],
        &["tune", "--help"],
    ] {
        let want = run(sim, args);
        let got = run(&alias, args);
        assert_eq!(got.status.code(), Some(0), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&got.stdout),
            String::from_utf8_lossy(&want.stdout),
            "{args:?}"
        );
    }
    // Only the tuning subcommands: `serve` is not one of them under this name.
    let serve = run(&alias, &["serve", "--help"]);
    assert_eq!(serve.status.code(), Some(2));
    // Under its own name the same file is the full CLI.
    let full = run(
        Path::new(env!("CARGO_BIN_EXE_infscale")),
        &["serve", "--help"],
    );
    assert_eq!(full.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(dir);
}

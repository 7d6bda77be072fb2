//! The routes file, read again when it changes: a route added, changed or removed takes effect
//! without a restart, and no held request is dropped on the way (a changed or removed route is
//! retired, [`super::table`], and keeps what it holds until released or timed out).
//!
//! The file is read every `--routes-reload-seconds` and compared with the text in use; a
//! ConfigMap mounted as a volume changes by the kubelet swapping a symlink, which a read sees.
//! A file that no longer parses, or whose routes cannot start, changes nothing: the error is
//! logged (once per text) and counted (`infscale_activator_routes_reloads_total{result="error"}`),
//! and the routes in use stay.

use super::routes::{parse_in, Context};
use super::table::Routing;
use super::telemetry::Telemetry;
use crate::edge::files::read_text;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where the routes file is, how to read it, and how often.
#[derive(Debug, Clone)]
pub struct Reload {
    pub path: PathBuf,
    pub ctx: Context,
    pub every: Duration,
}

/// Reads the file every `every`; applies a changed text. `applied` is the text in use.
pub async fn follow(
    reload: Reload,
    routing: Arc<Routing>,
    telemetry: Arc<Telemetry>,
    mut applied: String,
) {
    let name = reload.path.display().to_string();
    // The last read error and the last refused text, each reported once.
    let mut unreadable: Option<String> = None;
    let mut refused: Option<String> = None;
    let mut tick = tokio::time::interval(reload.every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let path = reload.path.clone();
        let read = tokio::task::spawn_blocking(move || {
            read_text(&path, infscale_core::limits::MAX_CONFIG_FILE_BYTES)
        })
        .await;
        let text = match read {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let why = format!("{e:#}");
                if unreadable.as_ref() != Some(&why) {
                    tracing::error!(file = %name, error = %why, "cannot read the routes file; the routes in use stay");
                    telemetry.reloaded(false);
                    unreadable = Some(why);
                }
                continue;
            }
            Err(_) => continue,
        };
        unreadable = None;
        if text == applied || refused.as_ref() == Some(&text) {
            continue;
        }
        let outcome = parse_in(&name, &text, &reload.ctx).and_then(|routes| {
            let n = routes.len();
            routing.set_file(routes).map(|()| n)
        });
        match outcome {
            Ok(n) => {
                tracing::info!(file = %name, routes = n, "routes file reloaded");
                telemetry.reloaded(true);
                applied = text;
                refused = None;
            }
            Err(e) => {
                tracing::error!(file = %name, error = %e, "the changed routes file is refused; the routes in use stay");
                telemetry.reloaded(false);
                refused = Some(text);
            }
        }
    }
}

//! The process's limit on open files, raised at start-up.
//!
//! Every connection and pooled socket is a descriptor. Many platforms start a process with a
//! soft limit of 1,024 under a much higher hard limit, and a proxy or scaler that serves
//! hundreds of connections and scrapes as many pods reaches the soft one first. A process may
//! raise its soft limit up to the hard one without privilege, so `serve` and `activator` do at
//! start-up; the listeners' caps ([`super::listener`]) still bound what a peer can take.

/// The soft limit before and after (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Raised {
    pub from: Option<u64>,
    pub to: Option<u64>,
}

/// Raises the soft limit on open files to the hard limit, where the platform allows (on macOS,
/// whose kernel refuses an unlimited soft limit, to 10,240 when the hard one is higher).
#[cfg(unix)]
pub fn raise_open_files() -> Result<Raised, String> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let (soft, hard) = (now.current, now.maximum);
    if soft == hard {
        return Ok(Raised {
            from: soft,
            to: soft,
        });
    }
    let set = |to: Option<u64>| {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: to,
                maximum: hard,
            },
        )
        .map(|()| Raised { from: soft, to })
    };
    set(hard)
        .or_else(|e| {
            let fallback = Some(hard.unwrap_or(u64::MAX).min(10_240));
            if fallback > soft {
                set(fallback)
            } else {
                Err(e)
            }
        })
        .map_err(|e| format!("cannot raise the open-file limit from {soft:?} to {hard:?}: {e}"))
}

/// Elsewhere nothing is changed.
#[cfg(not(unix))]
pub fn raise_open_files() -> Result<Raised, String> {
    Ok(Raised::default())
}

/// [`raise_open_files`], logged: what the limit is now, or why it could not be raised. Returns
/// the soft limit now, when it is known and finite.
pub fn raise_and_log() -> Option<u64> {
    match raise_open_files() {
        Ok(r) if r.from != r.to => {
            tracing::info!(from = ?r.from, to = ?r.to, "raised the open-file limit");
            r.to
        }
        Ok(r) => {
            tracing::debug!(limit = ?r.to, "the open-file limit is at its hard limit");
            r.to
        }
        Err(e) => {
            tracing::warn!(error = %e, "the open-file limit stays as it is");
            None
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let r = raise_open_files().unwrap();
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(now.current, r.to);
        assert!(r.to >= r.from || r.to.is_none());
    }
}

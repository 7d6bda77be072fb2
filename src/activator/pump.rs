//! An upstream answer carried to its client by a task of its own, so that each answer is bounded
//! in time on both sides whatever the client's protocol does.
//!
//! An answer body handed straight to hyper is polled only when the client can take bytes. An
//! HTTP/2 stream whose flow-control window stays at zero is never polled again: no write is
//! pending on the socket (other streams and pings still pass), so the connection's stall limit
//! never fires, the upstream's silence is never noticed either, and the upstream connection and
//! the request's place in the counts stay taken for as long as the client likes (64 such streams
//! took every release slot at a wake). Here a task reads the upstream and hands each frame on
//! through a one-frame channel: an upstream silent for `upstream_idle` ends the answer with an
//! error, and a client that takes nothing for `client_stall` has its upstream dropped (the
//! answer, if it is ever read again, ends with an error, never cut short as if complete).

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// The error a body of the activator may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body every answer of the activator has: upstream bodies carried, and its own.
pub type ProxyBody = http_body_util::combinators::BoxBody<Bytes, BoxError>;

/// Starts carrying `incoming` to the returned body; `keep` (the request's place in the counts)
/// lives until the answer ends or is given up.
pub fn carry<K: Send + 'static>(
    mut incoming: Incoming,
    keep: K,
    upstream_idle: Duration,
    client_stall: Duration,
) -> ProxyBody {
    let hint = incoming.size_hint();
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, BoxError>>(1);
    let cut = Arc::new(AtomicBool::new(false));
    let given_up = cut.clone();
    tokio::spawn(async move {
        let _keep = keep;
        loop {
            let frame = match tokio::time::timeout(upstream_idle, incoming.frame()).await {
                Ok(None) => return,
                Ok(Some(frame)) => frame.map_err(BoxError::from),
                Err(_) => Err(format!("the upstream sent nothing for {upstream_idle:?}").into()),
            };
            let failed = frame.is_err();
            match tokio::time::timeout(client_stall, tx.send(frame)).await {
                Ok(Ok(())) if !failed => {}
                Ok(_) => return,
                Err(_) => {
                    given_up.store(true, Ordering::Release);
                    return;
                }
            }
        }
    });
    Carried { rx, cut, hint }.boxed()
}

/// The client's side of a carried answer.
struct Carried {
    rx: mpsc::Receiver<Result<Frame<Bytes>, BoxError>>,
    cut: Arc<AtomicBool>,
    hint: SizeHint,
}

impl Body for Carried {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(None) if self.cut.load(Ordering::Acquire) => Poll::Ready(Some(Err(
                "the client took nothing of its answer for too long".into(),
            ))),
            polled => polled,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

//! The path task against stand-ins, in paused time: a session whose writes the API refuses, and
//! loopback Services that count the probes they are sent and answer what a hostile one would.

use super::*;
use crate::serve::metadata::ServeMode;
use crate::serve::telemetry::Telemetry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn mode(url: Option<String>) -> ServeMode {
    ServeMode {
        namespace: "llm".into(),
        service: "chat".into(),
        url,
        service_port: None,
        activator_port: None,
        max_held: None,
        hold_timeout_s: None,
        settle_s: 30.0,
        scaled_object: "chat".into(),
        trigger: "0123456789ab".into(),
        counts_host: "chat".into(),
    }
}

/// A writer whose sessions answer each write with what `answer` says for the write's number
/// (0 first), and count the writes.
struct Standin {
    writes: Arc<AtomicUsize>,
    answer: Arc<dyn Fn(usize) -> Result<Wrote, WriteError> + Send + Sync>,
}

struct StandinSession {
    writes: Arc<AtomicUsize>,
    answer: Arc<dyn Fn(usize) -> Result<Wrote, WriteError> + Send + Sync>,
}

impl PathWriter for Standin {
    fn session(
        &self,
        _mode: &ServeMode,
        _activator: Option<crate::serve::activators::Members>,
    ) -> Box<dyn PathSession> {
        Box::new(StandinSession {
            writes: self.writes.clone(),
            answer: self.answer.clone(),
        })
    }
}

impl PathSession for StandinSession {
    fn write(&mut self, _in_path: bool) -> BoxFuture<'_, Result<Wrote, WriteError>> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        let answer = (self.answer)(n);
        Box::pin(async move { answer })
    }
}

/// What the API stand-in says to a PATCH it refuses, as kube shows it.
fn forbidden() -> WriteError {
    WriteError::other(
        "writing EndpointSlice chat-infscale: ApiError: endpointslices is forbidden: Forbidden \
         (Status { status: \"Failure\", message: \"endpointslices is forbidden\", reason: \
         \"Forbidden\", code: 403 })",
    )
}

fn started(
    writer: Standin,
    url: Option<String>,
    probes: &Arc<Probes>,
    telemetry: &Arc<Telemetry>,
) -> PathHandle {
    let labels = vec![
        ("namespace".to_owned(), "llm".to_owned()),
        ("scaledobject".to_owned(), "chat".to_owned()),
    ];
    start(
        Arc::new(writer),
        mode(url),
        None,
        probes.clone(),
        PathSeries::new(telemetry, labels),
    )
}

/// Log lines, as the scaler's log shows them.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn matching(&self, what: &str) -> Vec<String> {
        let text = self
            .0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        text.lines()
            .filter(|l| l.contains(what))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn refused_writes_back_off_to_minutes_counted_and_logged_once_a_minute() {
    let lines = Lines::default();
    let sink = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _log = tracing::subscriber::set_default(subscriber);
    let (probes, telemetry) = (Arc::new(Probes::default()), Arc::new(Telemetry::new()));
    let writes = Arc::new(AtomicUsize::new(0));
    let handle = started(
        Standin {
            writes: writes.clone(),
            answer: Arc::new(|_| Err(forbidden())),
        },
        None,
        &probes,
        &telemetry,
    );
    let mut never_answering = true;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        never_answering &= !handle.is_answering();
    }
    let n = writes.load(Ordering::SeqCst);
    eprintln!("{n} writes in 10 minutes");
    // Every 500 ms, as before: 1,200 writes (each a few API calls) in 10 minutes.
    assert!((8..15).contains(&n), "{n} writes in 10 minutes");
    assert!(
        never_answering,
        "a refused write left the target free to idle"
    );
    let page = telemetry.render();
    let counted = format!(
        "infscale_serve_path_write_failures_total{{namespace=\"llm\",scaledobject=\"chat\",reason=\"forbidden\"}} {n}"
    );
    assert!(page.contains(&counted), "{counted} not in\n{page}");
    let logged = lines.matching("cannot put the activator in the Service's path");
    // The first failure, then at most one line a minute.
    assert!((2..=11).contains(&logged.len()), "{logged:#?}");
    assert!(logged[0].contains("failures=1"), "{}", logged[0]);
    assert!(logged[0].contains("forbidden"), "{}", logged[0]);
    drop(handle);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        !telemetry
            .render()
            .contains("infscale_serve_path_write_failures_total{"),
        "the series outlived its trigger"
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_that_fails_twice_then_succeeds_is_written_within_two_seconds() {
    let (probes, telemetry) = (Arc::new(Probes::default()), Arc::new(Telemetry::new()));
    let writes = Arc::new(AtomicUsize::new(0));
    let handle = started(
        Standin {
            writes: writes.clone(),
            answer: Arc::new(|n| {
                if n < 2 {
                    Err(WriteError::other(
                        "etcdserver: request timed out (code: 500 })",
                    ))
                } else {
                    Ok(Wrote::Done(None))
                }
            }),
        },
        None,
        &probes,
        &telemetry,
    );
    handle.want(false);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        writes.load(Ordering::SeqCst),
        3,
        "0 s, 0.5 s, then about 1 s later"
    );
    // Written: the next is the resync, not a retry.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(writes.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_service_url_refused_by_the_api_is_the_routes_error_at_once() {
    let (probes, telemetry) = (Arc::new(Probes::default()), Arc::new(Telemetry::new()));
    let handle = started(
        Standin {
            writes: Arc::new(AtomicUsize::new(0)),
            answer: Arc::new(|_| {
                Err(WriteError::metadata(
                    "serviceUrl",
                    "10.0.0.9 is not Service chat's ClusterIP (10.96.0.7)",
                ))
            }),
        },
        Some("http://10.0.0.9".into()),
        &probes,
        &telemetry,
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let why = handle.route_missing().unwrap_or_default();
    assert!(why.contains("serviceUrl"), "{why:?}");
    assert!(!handle.is_answering());
}

/// A loopback Service stand-in at `ip`: counts requests and answers each with `answer`.
async fn service(ip: &str, answer: &'static str) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, seen)
}

const NOT_THE_ACTIVATOR: &str =
    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

#[tokio::test(start_paused = true)]
async fn a_redirect_from_the_service_is_never_followed_nor_an_answer() {
    let (probes, telemetry) = (Arc::new(Probes::default()), Arc::new(Telemetry::new()));
    let (elsewhere, followed) = service("127.0.0.3", NOT_THE_ACTIVATOR).await;
    let redirect: &'static str = Box::leak(
        format!(
            "HTTP/1.1 302 Found\r\nlocation: http://{elsewhere}/latest/meta-data/iam/security-credentials/\r\n\
             x-infscale-activator: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        .into_boxed_str(),
    );
    let (svc, asked) = service("127.0.0.2", redirect).await;
    let url = format!("http://{svc}");
    let handle = started(
        Standin {
            writes: Arc::new(AtomicUsize::new(0)),
            answer: Arc::new(move |_| Ok(Wrote::Done(Some(url.clone())))),
        },
        None,
        &probes,
        &telemetry,
    );
    let mut ever = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ever |= handle.is_answering();
    }
    assert!(asked.load(Ordering::SeqCst) >= 8, "the Service was probed");
    assert_eq!(
        followed.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    assert!(!ever, "a redirect counted as the activator's answer");
}

#[tokio::test(start_paused = true)]
async fn probes_are_paced_per_trigger_and_across_twenty_triggers() {
    let (svc, asked) = service("127.0.0.2", NOT_THE_ACTIVATOR).await;
    let url = format!("http://{svc}");
    let telemetry = Arc::new(Telemetry::new());
    let one = |probes: &Arc<Probes>| {
        let url = url.clone();
        started(
            Standin {
                writes: Arc::new(AtomicUsize::new(0)),
                answer: Arc::new(move |_| Ok(Wrote::Done(Some(url.clone())))),
            },
            None,
            probes,
            &telemetry,
        )
    };
    // One trigger whose probes nothing answers, for 60 s: 16 a second before (960).
    let handle = one(&Arc::new(Probes::default()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(handle);
    let alone = asked.swap(0, Ordering::SeqCst);
    let most = PROBES_PER_TRY + 60 * PROBES_PER_SECOND as usize;
    assert!(
        (8..=most).contains(&alone),
        "{alone} probes in 60 s, over {most}"
    );
    // Twenty triggers at the one Service: 300 a second before (18,000 in 60 s).
    let probes = Arc::new(Probes::default());
    let handles: Vec<PathHandle> = (0..20).map(|_| one(&probes)).collect();
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(handles);
    let twenty = asked.load(Ordering::SeqCst);
    eprintln!("probes in 60 s: {alone} from one trigger, {twenty} from twenty");
    let most = (TOTAL_PROBES_PER_SECOND * 61) as usize;
    assert!(
        (20..=most).contains(&twenty),
        "{twenty} probes in 60 s, over {most}"
    );
}

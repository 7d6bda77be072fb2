use super::*;
use crate::serve::budget::MIN_BYTES;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An activator stand-in on loopback: `/queue/watch` answers `watch` (head and body as given,
/// the connection then held open), `/queue` answers `queue`.
async fn activator(watch: Vec<u8>, queue: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for _ in 0..200 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (watch, queue) = (watch.clone(), queue.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if s.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let answer = if head.starts_with(b"GET /queue/watch") {
                    watch
                } else {
                    queue
                };
                let _ = s.write_all(&answer).await;
                if answer.windows(17).any(|w| w == b"connection: close") {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            });
        }
    });
    format!("http://{addr}")
}

fn source(url: String) -> Source {
    Source {
        url,
        host: "chat".to_owned(),
        require_route: false,
    }
}

/// What the follower publishes first past `Unknown`, within 10 s.
async fn first_reading(url: String, budget: MemoryBudget) -> Counts {
    let (mut rx, task) = follow(
        reqwest::Client::new(),
        source(url),
        Arc::new(Notify::new()),
        Limits::default(),
        budget,
    );
    let got = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if !matches!(*rx.borrow_and_update(), Counts::Unknown) {
                return rx.borrow().clone();
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    task.abort();
    got
}

/// A budget whose pool another body holds whole.
fn full_budget() -> (MemoryBudget, crate::serve::budget::Charge) {
    let budget = MemoryBudget::new(MIN_BYTES, 64);
    let mut hog = budget.charge(0);
    hog.hold(budget.pool_left()).unwrap();
    (budget, hog)
}

const EVENTS: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";

#[tokio::test]
async fn a_watch_line_past_what_the_budget_has_left_fails_naming_the_budget() {
    let (budget, _hog) = full_budget();
    // 200 KiB of one event line that never ends: under the 1 MiB line cap, over the budget.
    let mut watch = EVENTS.to_vec();
    watch.extend_from_slice(b"data: {\"chat\": ");
    watch.resize(watch.len() + (200 << 10), b' ');
    let url = activator(watch, Vec::new()).await;
    match first_reading(url.clone(), budget.clone()).await {
        Counts::Failed(why) => {
            assert!(why.contains("scrape memory budget"), "{why}");
            assert!(why.contains(&url), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_small_event_reads_while_the_budget_is_full() {
    let (budget, _hog) = full_budget();
    let mut watch = EVENTS.to_vec();
    watch.extend_from_slice(b"data: {\"chat\":{\"Concurrency\":3,\"RequestCount\":5}}\n\n");
    let url = activator(watch, Vec::new()).await;
    match first_reading(url, budget).await {
        Counts::Seen(c) => assert_eq!(c.concurrency, 3),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_queue_document_declared_past_what_could_ever_fit_is_refused_unread() {
    let budget = MemoryBudget::new(MIN_BYTES, 64);
    let watch =
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec();
    let most = budget.most(ACTIVATOR_FREE_BYTES);
    let queue = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        most + 1
    )
    .into_bytes();
    let url = activator(watch, queue).await;
    match first_reading(url, budget).await {
        Counts::Failed(why) => {
            assert!(why.contains("scrape memory budget"), "{why}");
            assert!(
                why.contains(&format!("{} bytes refused", most + 1)),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
}

//! The encoder against the decoder: round trips, every way of cutting a stream into chunks, the
//! forms a server other than the activator may send, and input that must fail without a panic.

use super::*;
use crate::observe::counts::HostCounts;
use proptest::prelude::*;

fn one(host: &str, held: u64) -> QueueCounts {
    QueueCounts::from([(
        host.to_owned(),
        HostCounts {
            concurrency: held + 1,
            request_count: 100 + held,
            held: Some(held),
        },
    )])
}

/// Every result of feeding `chunks` in order.
fn decode(max: usize, chunks: &[&[u8]]) -> Vec<Result<QueueCounts, WireError>> {
    let mut d = Decoder::new(max);
    chunks
        .iter()
        .flat_map(|c| d.feed(c).collect::<Vec<_>>())
        .collect()
}

#[test]
fn an_event_is_one_data_line_and_a_blank_line() {
    assert_eq!(
        &event(&one("chat", 2))[..],
        b"data: {\"chat\":{\"Concurrency\":3,\"RequestCount\":102,\"Held\":2}}\n\n"
    );
    assert_eq!(&event(&QueueCounts::new())[..], b"data: {}\n\n");
    // A newline in a host stays escaped inside the one line.
    let odd = event(&one("a\nb", 0));
    assert_eq!(odd.iter().filter(|b| **b == b'\n').count(), 2);
    assert_eq!(decode(1 << 10, &[&odd]), vec![Ok(one("a\nb", 0))]);
}

#[test]
fn every_split_of_a_stream_decodes_the_same() {
    let mut stream = Vec::new();
    stream.extend_from_slice(&event(&one("chat", 0)));
    stream.extend_from_slice(KEEP_ALIVE);
    stream.extend_from_slice(&event(&one("chat", 1)));
    stream.extend_from_slice(&event(&one("code", 7)));
    let want = vec![Ok(one("chat", 0)), Ok(one("chat", 1)), Ok(one("code", 7))];
    for cut in 0..=stream.len() {
        let (a, b) = stream.split_at(cut);
        assert_eq!(decode(1 << 10, &[a, b]), want, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(decode(1 << 10, &bytes), want);
}

#[test]
fn other_servers_forms_are_read() {
    let crlf = b"data:{\"chat\":{\"Concurrency\":1,\"RequestCount\":5}}\r\n\r\n";
    let [Ok(c)] = &decode(1 << 10, &[crlf])[..] else {
        panic!("one event expected")
    };
    assert_eq!(c["chat"].concurrency, 1);
    assert_eq!(c["chat"].held, None);
    // Comments, other fields, a BOM-free `event:` line, and data split over lines.
    let fields = b": hello\nevent: counts\nid: 7\nretry: 100\ndata: {\"chat\":\ndata: {\"Concurrency\":2,\"RequestCount\":3}}\n\n";
    let decoded = decode(1 << 10, &[fields]);
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].as_ref().map(|c| c["chat"].concurrency), Ok(2));
    // Blank lines and events without data are no events.
    assert_eq!(
        decode(1 << 10, &[b"\n\n\r\n:\n\nid: 1\n\ndata:\n\n"]),
        vec![]
    );
}

#[test]
fn data_that_is_not_counts_is_an_error_and_reading_goes_on() {
    let stream = [&b"data: {\"chat\": 1}\n\n"[..], &event(&one("chat", 4))].concat();
    let decoded = decode(1 << 10, &[&stream]);
    assert!(matches!(decoded[0], Err(WireError::NotCounts(_))));
    assert_eq!(decoded[1], Ok(one("chat", 4)));
    assert_eq!(
        counts(b"[1, 2]").map_err(|e| e.to_string().contains("not the /queue JSON")),
        Err(true)
    );
}

#[test]
fn oversize_lines_and_events_fail_the_stream() {
    let long = [b'x'; 65];
    let mut d = Decoder::new(64);
    assert_eq!(d.feed(&long[..40]).count(), 0);
    assert_eq!(
        d.feed(&long[40..]).collect::<Vec<_>>(),
        vec![Err(WireError::LineTooLong(64))]
    );
    // Every later feed fails too, whatever it holds.
    let later: Vec<_> = d.feed(&event(&QueueCounts::new())).collect();
    assert_eq!(later, vec![Err(WireError::LineTooLong(64))]);

    // Short lines whose data adds up past the cap.
    let lines = b"data: 0123456789\n".repeat(10);
    assert_eq!(
        decode(64, &[&lines]),
        vec![Err(WireError::EventTooLong(64))]
    );
    // At the cap exactly is fine.
    let exact = event(&QueueCounts::new());
    assert_eq!(decode(8, &[&exact]), vec![Ok(QueueCounts::new())]);
}

fn host_counts() -> impl Strategy<Value = HostCounts> {
    (any::<u64>(), any::<u64>(), any::<Option<u64>>()).prop_map(|(c, r, h)| HostCounts {
        concurrency: c,
        request_count: r,
        held: h,
    })
}

fn queue_counts() -> impl Strategy<Value = QueueCounts> {
    prop::collection::btree_map(any::<String>(), host_counts(), 0..4)
}

/// The encoded events, keep-alives between them, as one stream, in other servers' forms when
/// `crlf` or `tight` (no space after `data:`).
fn stream_of(docs: &[(QueueCounts, bool)], crlf: bool, tight: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (counts, keep_alive) in docs {
        let mut e = event(counts).to_vec();
        if tight {
            e.remove(5);
        }
        if crlf {
            e = e
                .split(|b| *b == b'\n')
                .collect::<Vec<_>>()
                .join(&b"\r\n"[..]);
        }
        out.extend_from_slice(&e);
        if *keep_alive {
            out.extend_from_slice(KEEP_ALIVE);
        }
    }
    out
}

proptest! {
    #[test]
    fn any_counts_in_any_chunks_round_trip(
        docs in prop::collection::vec((queue_counts(), any::<bool>()), 0..5),
        crlf in any::<bool>(),
        tight in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let stream = stream_of(&docs, crlf, tight);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        at.push(0);
        at.push(stream.len());
        at.sort_unstable();
        let chunks: Vec<&[u8]> = at.windows(2).map(|w| &stream[w[0]..w[1]]).collect();
        let want: Vec<_> = docs.iter().map(|(c, _)| Ok(c.clone())).collect();
        prop_assert_eq!(decode(1 << 16, &chunks), want);
    }

    #[test]
    fn any_bytes_decode_without_a_panic_and_buffer_within_the_cap(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..8),
        max in 1usize..128,
    ) {
        let mut d = Decoder::new(max);
        for chunk in &chunks {
            let _ = d.feed(chunk).count();
            prop_assert!(d.line.len() <= max && d.data.len() <= max);
        }
    }
}

#[test]
fn a_documents_values_are_never_quoted_in_the_error() {
    let doc = br#"{"chat": {"Concurrency": "SECRET", "RequestCount": 1}}"#;
    let e = counts(doc).unwrap_err().to_string();
    assert!(!e.contains("SECRET"), "{e}");
    assert_eq!(
        e,
        "counts are not the /queue JSON: JSON of another shape (a value of the wrong type), at \
         line 1 column 33"
    );
    let e = counts(b"<html>SECRET</html>").unwrap_err().to_string();
    assert!(!e.contains("SECRET") && e.contains("not JSON"), "{e}");
}

use super::*;
use bytes::Bytes;
use http_body_util::{Full as FullBody, StreamBody};
use hyper::body::Frame;

const MIB: usize = 1 << 20;

/// A chunked body (no declared length) of `chunks` pieces of `size` bytes.
fn chunked(
    chunks: usize,
    size: usize,
) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, std::convert::Infallible>>> {
    let piece = Bytes::from(vec![b'#'; size]);
    StreamBody::new(futures::stream::iter(
        (0..chunks).map(move |_| Ok(Frame::data(piece.clone()))),
    ))
}

#[test]
fn the_default_splits_into_a_share_per_scrape_slot_and_a_pool() {
    let b = MemoryBudget::new(64 * MIB, 64);
    assert_eq!(b.page_share(), 512 << 10);
    assert_eq!(b.pool_left(), 32 * MIB);
    assert_eq!(b.most(b.page_share()), 32 * MIB + (512 << 10));
    assert_eq!(b.total(), 64 * MIB);
}

#[test]
fn a_charge_within_its_allowance_draws_nothing_and_gives_back_what_it_drew() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let mut c = b.charge(b.page_share());
    c.hold(b.page_share()).unwrap();
    assert_eq!(b.pool_left(), 4 * MIB);
    c.hold(b.page_share() + MIB).unwrap();
    assert_eq!(b.pool_left(), 3 * MIB);
    c.hold(10).unwrap();
    assert_eq!(b.pool_left(), 4 * MIB);
    c.hold(3 * MIB).unwrap();
    drop(c);
    assert_eq!(b.pool_left(), 4 * MIB);
}

#[test]
fn a_full_pool_refuses_the_body_past_its_share_but_not_a_page_within_one() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let mut hog = b.charge(b.page_share());
    hog.hold(b.page_share() + 4 * MIB).unwrap();
    let mut big = b.charge(b.page_share());
    let err = big.hold(b.page_share() + 1).unwrap_err();
    assert_eq!(err.total, 8 * MIB);
    assert!(err.to_string().contains("scrape memory budget"), "{err}");
    let mut small = b.charge(b.page_share());
    small.hold(b.page_share()).unwrap();
    drop(hog);
    big.hold(b.page_share() + 1).unwrap();
}

#[tokio::test]
async fn a_declared_length_past_what_could_ever_fit_is_refused_unread() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let mut c = b.charge(b.page_share());
    let body = FullBody::new(Bytes::from(vec![b'#'; 6 * MIB]));
    match read_charged(body, 16 * MIB, &mut c).await {
        Err(ReadError::NeverFits { declared, most }) => {
            assert_eq!(declared, 6 * MIB as u64);
            assert_eq!(most, 5 * MIB);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b.pool_left(), 4 * MIB);
}

#[tokio::test]
async fn a_declared_length_is_charged_before_the_first_byte() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let mut hog = b.charge(0);
    hog.hold(3 * MIB).unwrap();
    let mut c = b.charge(b.page_share());
    let body = FullBody::new(Bytes::from(vec![b'#'; 3 * MIB]));
    assert!(matches!(
        read_charged(body, 16 * MIB, &mut c).await,
        Err(ReadError::Budget(_))
    ));
}

#[tokio::test]
async fn a_chunked_body_is_charged_as_it_grows_and_stops_at_the_budget() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let mut c = b.charge(b.page_share());
    // 16 MiB announced nowhere: refused once its buffer would pass 5 MiB.
    let got = read_charged(chunked(256, 64 << 10), 16 * MIB, &mut c).await;
    assert!(matches!(got, Err(ReadError::Budget(_))), "{got:?}");
    drop(c);
    assert_eq!(b.pool_left(), 4 * MIB);
    // The same pages within the budget read whole, the charge covering the buffer.
    let mut c = b.charge(b.page_share());
    let page = read_charged(chunked(32, 64 << 10), 16 * MIB, &mut c)
        .await
        .unwrap();
    assert_eq!(page.len(), 2 * MIB);
    assert!(4 * MIB - b.pool_left() + b.page_share() >= page.capacity());
}

#[tokio::test]
async fn the_page_cap_still_holds_within_the_budget() {
    let b = MemoryBudget::new(64 * MIB, 1);
    let mut c = b.charge(b.page_share());
    let got = read_charged(chunked(3, MIB), 2 * MIB, &mut c).await;
    assert!(matches!(got, Err(ReadError::TooLarge)), "{got:?}");
}

#[tokio::test(start_paused = true)]
async fn a_read_given_up_midway_gives_its_bytes_back() {
    let b = MemoryBudget::new(8 * MIB, 4);
    let piece = Bytes::from(vec![b'#'; 64 << 10]);
    // 2 MiB, then a pod that stops sending.
    let stalls = futures::StreamExt::chain(
        futures::stream::iter((0..32).map(move |_| Ok(Frame::data(piece.clone())))),
        futures::stream::pending::<Result<Frame<Bytes>, std::convert::Infallible>>(),
    );
    let mut c = b.charge(b.page_share());
    let read = read_charged(StreamBody::new(stalls), 16 * MIB, &mut c);
    let gave_up = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
    assert!(gave_up.is_err());
    assert!(b.pool_left() < 4 * MIB);
    drop(c);
    assert_eq!(b.pool_left(), 4 * MIB);
}

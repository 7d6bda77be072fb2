//! One memory budget for the bodies `serve` reads from peers a tenant controls: model pods'
//! `/metrics` pages and activators' counts.
//!
//! The pods (and their `metricsPort` and `metricsPath`) are the tenant's, so each page may be as
//! large as `--max-page-bytes` allows, and 64 of them in flight are a gigabyte: a size cap per
//! page bounds nothing in total. The budget ([`MemoryBudget`], `--scrape-memory-bytes`) is split
//! once, at start-up:
//!
//! - half of it in equal shares, one per scrape slot (`--max-concurrent-scrapes`): a page within
//!   its share is never refused for want of memory, however hostile the other pods are, so a
//!   normal page (10 KB to a few hundred KB) always reads;
//! - the other half is a pool every body draws on for the bytes past its free allowance (a page's
//!   share, or an activator read's small allowance); a body that would pass what the pool has
//!   left fails at once, naming the budget, and frees what it held, never waits (bodies that
//!   wait for each other's bytes would hold the budget between them).
//!
//! A body is charged for the buffer that holds it (its capacity, before the buffer grows), as
//! its bytes arrive; a declared `Content-Length` is charged before the first byte is read, and
//! one larger than a body could ever hold is refused without reading it.

use bytes::Buf;
use http_body_util::BodyExt;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The smallest allowed budget: a page share of at least a few KB at the default concurrency.
pub const MIN_BYTES: usize = 1 << 20;
/// The largest allowed budget (its permits are counted in `u32` pieces).
pub const MAX_BYTES: usize = u32::MAX as usize;
/// What an activator read holds before it draws on the pool: a counts document for a few
/// hundred hosts. Activator reads have no scrape slot, so no share of their own.
pub const ACTIVATOR_FREE_BYTES: usize = 16 << 10;

/// The budget, shared by every collector and activator follower.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    pool: Arc<Semaphore>,
    pool_bytes: usize,
    page_share: usize,
    total: usize,
}

/// A body would pass what the budget has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{wanted} bytes do not fit the scrape memory budget ({total} bytes over every pod and activator, --scrape-memory-bytes; other bodies hold the rest)")]
pub struct Full {
    /// What the body would have held.
    pub wanted: usize,
    /// The whole budget.
    pub total: usize,
}

impl MemoryBudget {
    /// `total` bytes, half of them in shares for `scrape_slots` scrapes in flight.
    pub fn new(total: usize, scrape_slots: usize) -> MemoryBudget {
        let total = total.min(MAX_BYTES);
        let page_share = total / 2 / scrape_slots.max(1);
        let pool_bytes = total - page_share * scrape_slots.max(1);
        MemoryBudget {
            pool: Arc::new(Semaphore::new(pool_bytes)),
            pool_bytes,
            page_share,
            total,
        }
    }

    /// The whole budget, bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// What a page holds within its scrape slot's share, without drawing on the pool.
    pub fn page_share(&self) -> usize {
        self.page_share
    }

    /// The most a body with `free` bytes of allowance can ever hold: its allowance and the
    /// whole pool.
    pub fn most(&self, free: usize) -> usize {
        free.saturating_add(self.pool_bytes)
    }

    /// A new, empty charge for one body, with `free` bytes of allowance.
    pub fn charge(&self, free: usize) -> Charge {
        Charge {
            budget: self.clone(),
            free,
            drawn: 0,
        }
    }

    /// Bytes of the pool not held now.
    pub fn pool_left(&self) -> usize {
        self.pool.available_permits()
    }
}

/// What one body holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: MemoryBudget,
    free: usize,
    /// Bytes drawn from the pool.
    drawn: usize,
}

impl Charge {
    /// The body now holds `bytes` in all (more or fewer than before): draws on the pool for
    /// what passes the allowance, or gives back what it no longer needs. On `Err` nothing more
    /// is drawn.
    pub fn hold(&mut self, bytes: usize) -> Result<(), Full> {
        let want = bytes.saturating_sub(self.free);
        if want < self.drawn {
            self.budget.pool.add_permits(self.drawn - want);
            self.drawn = want;
            return Ok(());
        }
        let more = want - self.drawn;
        if more == 0 {
            return Ok(());
        }
        let full = Full {
            wanted: bytes,
            total: self.budget.total,
        };
        let more32 = u32::try_from(more).map_err(|_| full)?;
        let permit = self
            .budget
            .pool
            .try_acquire_many(more32)
            .map_err(|_| full)?;
        permit.forget();
        self.drawn = want;
        Ok(())
    }

    /// The most this body can ever hold.
    pub fn most(&self) -> usize {
        self.budget.most(self.free)
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.drawn > 0 {
            self.budget.pool.add_permits(self.drawn);
        }
    }
}

/// Why a charged body was not read whole.
#[derive(Debug)]
pub enum ReadError<E> {
    /// The body broke.
    Body(E),
    /// Past `max` bytes (from its declared length, or as its bytes arrived).
    TooLarge,
    /// Its declared length is more than any body may hold of the budget.
    NeverFits { declared: u64, most: usize },
    /// The budget has no room for it now.
    Budget(Full),
}

/// A body read whole within `max` bytes, its buffer charged to `charge` before it grows. The
/// charge still holds the buffer's bytes when this returns: drop it with the buffer.
pub async fn read_charged<B: hyper::body::Body>(
    body: B,
    max: usize,
    charge: &mut Charge,
) -> Result<Vec<u8>, ReadError<B::Error>> {
    let declared = body.size_hint().lower();
    if declared > max as u64 {
        return Err(ReadError::TooLarge);
    }
    if declared > charge.most() as u64 {
        return Err(ReadError::NeverFits {
            declared,
            most: charge.most(),
        });
    }
    // Within `max`, so within usize.
    let declared = declared as usize;
    charge.hold(declared).map_err(ReadError::Budget)?;
    let mut out = Vec::with_capacity(declared);
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let Ok(mut data) = frame.map_err(ReadError::Body)?.into_data() else {
            continue;
        };
        let needed = out.len() + data.remaining();
        if needed > max {
            return Err(ReadError::TooLarge);
        }
        if needed > out.capacity() {
            // Double as a vector does (fewer, larger steps), but never past `max`.
            let grown = needed.max(out.capacity().saturating_mul(2).min(max));
            charge.hold(grown).map_err(ReadError::Budget)?;
            out.reserve_exact(grown - out.len());
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            out.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

//! The bounded queue in front of the text-to-SQL runs. A run holds a blocking thread and
//! several engine sequences, so only `running` run at once; the next `waiting` requests wait
//! for a slot in arrival order (tokio's semaphore hands released permits to waiters first, in
//! the order they asked), each until its own deadline. Only a full queue refuses, so a burst is
//! served instead of bounced.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::status::ServiceError;

#[derive(Debug)]
pub struct RunQueue {
    slots: Arc<Semaphore>,
    running: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// Leaves the waiting count however the wait ends.
struct WaitingPlace<'a>(&'a AtomicUsize);

impl Drop for WaitingPlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl RunQueue {
    pub fn new(running: usize, max_waiting: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(running)),
            running,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// Runs holding a slot now.
    pub fn running(&self) -> usize {
        self.running - self.slots.available_permits()
    }

    /// Requests waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// A running slot, at once or after the requests that asked before; RESOURCE_EXHAUSTED
    /// when `max_waiting` requests are already waiting, DEADLINE_EXCEEDED when `deadline`
    /// passes first, UNAVAILABLE when the server stops first.
    pub async fn enter(
        &self,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, ServiceError> {
        // Never succeeds while others wait: released permits go to waiters first.
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _place = WaitingPlace(&self.waiting);
        if ahead >= self.max_waiting {
            return Err(ServiceError::ResourceExhausted {
                reason: format!(
                    "{} text-to-SQL requests are running and {ahead} are waiting (the queue's limit)",
                    self.running
                ),
            });
        }
        tokio::select! {
            permit = self.slots.clone().acquire_owned() => {
                permit.map_err(|_| ServiceError::Unavailable { reason: "the server is stopping".into() })
            }
            _ = tokio::time::sleep_until(deadline.into()) => Err(ServiceError::DeadlineExceeded),
            _ = shutdown.cancelled() => Err(ServiceError::Unavailable {
                reason: "the server shut down before the request's turn came".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn waits_in_arrival_order_and_refuses_only_when_full() {
        let queue = Arc::new(RunQueue::new(1, 2));
        let shutdown = CancellationToken::new();
        let far = Instant::now() + Duration::from_secs(60);
        let first = queue.enter(far, &shutdown).await.expect("a free slot");
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut waiters = Vec::new();
        for i in 0..2 {
            let (own_queue, shutdown, order_tx) =
                (queue.clone(), shutdown.clone(), order_tx.clone());
            waiters.push(tokio::spawn(async move {
                let permit = own_queue.enter(far, &shutdown).await.expect("queued");
                order_tx.send(i).expect("receiver alive");
                drop(permit);
            }));
            while queue.waiting() != i + 1 {
                tokio::task::yield_now().await;
            }
        }
        let full = queue.enter(far, &shutdown).await.expect_err("queue full");
        assert_eq!(full.code(), tonic::Code::ResourceExhausted, "{full}");
        drop(first);
        for w in waiters {
            w.await.expect("waiter");
        }
        assert_eq!(order_rx.recv().await, Some(0));
        assert_eq!(order_rx.recv().await, Some(1));
        assert_eq!((queue.running(), queue.waiting()), (0, 0));
    }

    #[tokio::test]
    async fn a_wait_ends_at_the_deadline_or_at_shutdown() {
        let queue = RunQueue::new(1, 4);
        let shutdown = CancellationToken::new();
        let _held = queue
            .enter(Instant::now() + Duration::from_secs(60), &shutdown)
            .await
            .expect("a free slot");
        let expired = queue
            .enter(Instant::now() + Duration::from_millis(20), &shutdown)
            .await
            .expect_err("no slot before the deadline");
        assert_eq!(expired.code(), tonic::Code::DeadlineExceeded);
        shutdown.cancel();
        let stopped = queue
            .enter(Instant::now() + Duration::from_secs(60), &shutdown)
            .await
            .expect_err("stopping");
        assert_eq!(stopped.code(), tonic::Code::Unavailable);
        assert_eq!(queue.waiting(), 0);
    }
}

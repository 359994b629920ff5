//! Server-sent events from a gRPC message stream: a task reads the stream and hands each
//! message's events to the response body through a bounded channel. When the client goes away
//! the body and the channel close, the task drops the gRPC stream, and the work behind it is
//! cancelled (the engine at its next step, a text-to-SQL run at its next model call).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::services::ResponseStream;

/// Events buffered between the reading task and the response body.
const BUFFER: usize = 64;

/// Comments sent while nothing else is, so that proxies keep an idle stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What one endpoint sends for its stream's messages.
pub trait Relay: Send + 'static {
    type Message: Send + 'static;
    /// The events of one message.
    fn message(&mut self, message: Self::Message) -> Vec<Event>;
    /// The events of a failure; the stream ends after them.
    fn error(&mut self, status: tonic::Status) -> Vec<Event>;
    /// The events after the last message or the failure.
    fn end(self) -> Vec<Event>;
}

pub type EventStream = Sse<KeepAliveStream<ReceiverStream<Result<Event, Infallible>>>>;

/// Answers with `stream`'s events as they come.
pub fn respond<R: Relay>(stream: ResponseStream<R::Message>, relay: R) -> EventStream {
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(forward(stream, relay, tx));
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

async fn forward<R: Relay>(
    mut stream: ResponseStream<R::Message>,
    mut relay: R,
    tx: mpsc::Sender<Result<Event, Infallible>>,
) {
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            // The client went away: returning drops the gRPC stream, which cancels the work.
            _ = tx.closed() => return,
        };
        let (events, last) = match next {
            None => break,
            Some(Ok(message)) => (relay.message(message), false),
            Some(Err(status)) => (relay.error(status), true),
        };
        for event in events {
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        if last {
            break;
        }
    }
    for event in relay.end() {
        if tx.send(Ok(event)).await.is_err() {
            return;
        }
    }
}

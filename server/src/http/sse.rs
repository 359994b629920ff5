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

/// Relays a stream of gRPC event messages, each a `oneof` of stages: every message becomes one
/// event named after its set field (in the proto's snake_case: `pre_sql`, `round`, `answer`)
/// whose data is that field's message in JSON; a failure is an `error` event with the body a
/// plain request would have got.
pub struct OneofRelay<M>(std::marker::PhantomData<fn(M)>);

impl<M> Default for OneofRelay<M> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

/// A JSON body as one event's data.
pub fn event(name: &str, body: &impl serde::Serialize) -> Event {
    let data = serde_json::to_string(body).unwrap_or_else(|e| {
        tracing::error!(error = %e, "an event did not serialize");
        "{}".to_owned()
    });
    Event::default().event(name).data(data)
}

/// `lowerCamelCase` (the proto3 JSON name of a field) back to the proto's `snake_case`.
fn snake_case(json_name: &str) -> String {
    let mut out = String::with_capacity(json_name.len() + 4);
    for c in json_name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl<M: serde::Serialize + Send + 'static> Relay for OneofRelay<M> {
    type Message = M;

    fn message(&mut self, message: M) -> Vec<Event> {
        let json = match serde_json::to_value(&message) {
            Ok(serde_json::Value::Object(fields)) => fields,
            Ok(other) => {
                tracing::error!(json = %other, "a stream message is not an object");
                return Vec::new();
            }
            Err(e) => {
                tracing::error!(error = %e, "a stream message did not serialize");
                return Vec::new();
            }
        };
        // A oneof message has at most one field set; an empty one has nothing to say.
        json.into_iter()
            .filter(|(_, body)| !body.is_null())
            .map(|(name, body)| event(&snake_case(&name), &body))
            .collect()
    }

    fn error(&mut self, status: tonic::Status) -> Vec<Event> {
        vec![event("error", &super::ApiError::from(status).body())]
    }

    fn end(self) -> Vec<Event> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_return_to_the_protos_field_names() {
        assert_eq!(snake_case("preSql"), "pre_sql");
        assert_eq!(snake_case("linkedTables"), "linked_tables");
        assert_eq!(snake_case("answer"), "answer");
    }
}

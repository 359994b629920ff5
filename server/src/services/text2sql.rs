//! `quorum.v1.Text2Sql`: the two-round pipeline over a registered database. The pipeline is
//! synchronous, so each run holds a blocking thread; a per-request cancellation token reaches
//! every model call, so a caller that leaves or a passed deadline frees the engines promptly.

use std::sync::Arc;

use quorum_proto::v1 as pb;
use quorum_proto::v1::text2_sql_server::Text2Sql;
use quorum_sql::pipeline::{Pipeline, PipelineAnswer, PipelineEvent};
use quorum_sql::run_error::RunError;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status};
use tracing::Instrument;

use super::subtasks::Subtasks;
use super::{ResponseStream, join_run, stream_run};
use crate::auth::Right;
use crate::auth::quota::RunSlot;
use crate::convert;
use crate::databases::Database;
use crate::models::ModelRegistry;
use crate::note_retrieval::{NoteRanker, notes_for, with_notes};
use crate::notes::Note;
use crate::pipeline_models::{BertSentenceEmbedder, CallScope};
use crate::rpc::RpcContext;
use crate::state::{Admission, AppState};
use crate::status::ServiceError;

#[derive(Debug, Clone)]
pub struct Text2SqlService {
    pub state: Arc<AppState>,
}

/// A validated request, ready to run.
struct Prepared {
    pipeline: Pipeline,
    db: Database,
    question: String,
    /// The database's notes told to this question, then the request's own evidence.
    evidence: Option<String>,
    notes: Vec<Note>,
    cancel: CancellationToken,
    admission: Admission,
    permit: OwnedSemaphorePermit,
    /// The run counted against the caller's quota.
    run_slot: RunSlot,
}

type RunHandle = JoinHandle<Result<PipelineAnswer, RunError>>;

impl Text2SqlService {
    /// The answer as sent: its evidence, and among its settings the generators' and the
    /// selector's models and adapters.
    fn response(&self, answer: &PipelineAnswer, notes: &[Note]) -> pb::Text2SqlResponse {
        self.state.metrics.record_answer(answer);
        let mut response = convert::answer_response(answer);
        response.notes_used = notes
            .iter()
            .map(|n| pb::Note {
                id: n.id,
                text: n.text.clone(),
            })
            .collect();
        if let (Ok(runtime), Some(models)) =
            (self.state.pipeline_runtime(), self.state.loaded_models())
        {
            let served = runtime.served_settings(models);
            response.settings.extend(
                served
                    .into_iter()
                    .map(|(name, value)| pb::Setting { name, value }),
            );
        }
        response
    }

    fn subtasks(&self) -> Subtasks {
        Subtasks {
            state: self.state.clone(),
        }
    }

    /// The notes `question` is told, chosen off the async workers when the embedder ranks them.
    async fn notes_for(
        &self,
        question: &str,
        db_id: &str,
        evidence_filter: bool,
        models: &ModelRegistry,
    ) -> Result<Vec<Note>, ServiceError> {
        let stored = self.state.databases.notes.list(db_id);
        let embedder = models
            .embedder
            .clone()
            .map(|model| BertSentenceEmbedder { model });
        let state = self.state.clone();
        let question = question.to_owned();
        tokio::task::spawn_blocking(move || {
            let ranker = embedder.as_ref().map(|e| NoteRanker {
                embedder: e,
                cache: &state.note_embeddings,
            });
            notes_for(&question, &stored, evidence_filter, ranker)
        })
        .await
        .map_err(ServiceError::internal)?
        .map_err(|e| ServiceError::internal(format!("ranking the database's notes: {e}")))
    }

    /// Validates the request, then waits for a run slot.
    async fn prepare(
        &self,
        ctx: &RpcContext,
        req: pb::Text2SqlRequest,
    ) -> Result<Prepared, ServiceError> {
        let (admission, models) = self.state.admit()?;
        if req.question.trim().is_empty() {
            return Err(ServiceError::invalid("question", "must not be empty"));
        }
        if req.db_id.is_empty() {
            return Err(ServiceError::invalid("db_id", "must not be empty"));
        }
        ctx.note_question(&req.question);
        let db = ctx.database(Right::Ask, &req.db_id).await?;
        let run_slot = ctx.caller.start_run()?;
        // Notes another replica added since are read first.
        self.state.sync_databases().await;
        let runtime = self.state.pipeline_runtime()?;
        let config = convert::pipeline_config(&runtime.base, req.options.as_ref())?;
        let notes = self
            .notes_for(&req.question, &req.db_id, config.evidence_filter, &models)
            .await?;
        let evidence = with_notes(&notes, req.evidence.as_deref());
        let queued_at = std::time::Instant::now();
        let permit = self
            .state
            .text2sql_queue
            .enter(ctx.deadline, &self.state.cancel_all)
            .await?;
        self.state
            .metrics
            .record_stage("queue", queued_at.elapsed());
        // A child token: cancelled by this request's own end or by the server's grace period.
        let cancel = self.state.cancel_all.child_token();
        let scope = CallScope {
            runtime: tokio::runtime::Handle::current(),
            cancel: cancel.clone(),
            deadline: ctx.deadline,
        };
        let pipeline = runtime.pipeline(config, &models, scope)?;
        Ok(Prepared {
            pipeline,
            db,
            question: req.question,
            evidence,
            notes,
            cancel,
            admission,
            permit,
            run_slot,
        })
    }

    /// Starts the run on a blocking thread, reporting stage events to `events` when given.
    fn spawn(
        prepared: Prepared,
        events: Option<mpsc::UnboundedSender<PipelineEvent>>,
        ctx: &RpcContext,
    ) -> (RunHandle, CancellationToken) {
        let cancel = prepared.cancel.clone();
        let span = ctx.span.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            // Held until the run really ends, so that shutdown waits for it.
            let _admission = prepared.admission;
            let _permit = prepared.permit;
            let _run_slot = prepared.run_slot;
            let mut on_event = |e: PipelineEvent| {
                if let Some(tx) = &events {
                    let _ = tx.send(e);
                }
            };
            prepared.pipeline.run_with_events(
                &prepared.question,
                prepared.evidence.as_deref(),
                &prepared.db.handle,
                &mut on_event,
            )
        });
        (handle, cancel)
    }

    async fn finish(
        &self,
        ctx: &RpcContext,
        handle: RunHandle,
    ) -> Result<PipelineAnswer, ServiceError> {
        join_run(&self.state, ctx, handle).await
    }

    async fn stream(
        self,
        ctx: RpcContext,
        handle: RunHandle,
        mut events: mpsc::UnboundedReceiver<PipelineEvent>,
        tx: mpsc::Sender<Result<pb::Text2SqlEvent, Status>>,
        (cancel, notes): (CancellationToken, Vec<Note>),
    ) {
        // Dropping the guard on any exit (client gone included) stops the run's model calls.
        let _guard = cancel.drop_guard();
        let code = self.pump(&ctx, handle, &mut events, &tx, &notes).await;
        ctx.finish(code);
    }

    /// Sends stage events as they happen, then the answer or the error.
    async fn pump(
        &self,
        ctx: &RpcContext,
        handle: RunHandle,
        events: &mut mpsc::UnboundedReceiver<PipelineEvent>,
        tx: &mpsc::Sender<Result<pb::Text2SqlEvent, Status>>,
        notes: &[Note],
    ) -> Code {
        stream_run(
            ctx,
            self.finish(ctx, handle),
            events,
            tx,
            |event| convert::event_message(&event),
            |answer| {
                note_answer(ctx, &answer);
                let event = pb::text2_sql_event::Event::Answer(self.response(&answer, notes));
                pb::Text2SqlEvent { event: Some(event) }
            },
        )
        .await
    }
}

/// The audit trail's view of an answer: the SQL that ran and the rows it returned.
fn note_answer(ctx: &RpcContext, answer: &PipelineAnswer) {
    let rows = answer.preview.as_ref().map(|p| p.total_rows as u64);
    ctx.note_answer(&answer.sql, rows);
}

#[tonic::async_trait]
impl Text2Sql for Text2SqlService {
    type GenerateStreamStream = ResponseStream<pb::Text2SqlEvent>;
    type DebugStreamStream = ResponseStream<pb::DebugEvent>;
    type OptimizeStreamStream = ResponseStream<pb::OptimizeEvent>;

    async fn link_schema(
        &self,
        request: Request<pb::LinkSchemaRequest>,
    ) -> Result<Response<pb::LinkSchemaResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/LinkSchema", &request);
        let result = self
            .subtasks()
            .link_schema(&ctx, request.into_inner())
            .instrument(ctx.span.clone())
            .await;
        ctx.complete(result)
    }

    async fn debug(
        &self,
        request: Request<pb::DebugRequest>,
    ) -> Result<Response<pb::DebugResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/Debug", &request);
        let result = self
            .subtasks()
            .debug(&ctx, request.into_inner())
            .instrument(ctx.span.clone())
            .await;
        ctx.complete(result)
    }

    async fn debug_stream(
        &self,
        request: Request<pb::DebugRequest>,
    ) -> Result<Response<Self::DebugStreamStream>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/DebugStream", &request);
        let span = ctx.span.clone();
        let stream = self
            .subtasks()
            .debug_stream(ctx.clone(), request.into_inner())
            .instrument(span)
            .await;
        match stream {
            Ok(stream) => Ok(ctx.respond(stream)),
            Err(e) => Err(ctx.fail(e)),
        }
    }

    async fn optimize(
        &self,
        request: Request<pb::OptimizeRequest>,
    ) -> Result<Response<pb::OptimizeResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/Optimize", &request);
        let result = self
            .subtasks()
            .optimize(&ctx, request.into_inner())
            .instrument(ctx.span.clone())
            .await;
        ctx.complete(result)
    }

    async fn optimize_stream(
        &self,
        request: Request<pb::OptimizeRequest>,
    ) -> Result<Response<Self::OptimizeStreamStream>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/OptimizeStream", &request);
        let span = ctx.span.clone();
        let stream = self
            .subtasks()
            .optimize_stream(ctx.clone(), request.into_inner())
            .instrument(span)
            .await;
        match stream {
            Ok(stream) => Ok(ctx.respond(stream)),
            Err(e) => Err(ctx.fail(e)),
        }
    }

    async fn explain(
        &self,
        request: Request<pb::ExplainRequest>,
    ) -> Result<Response<pb::ExplainResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/Explain", &request);
        let result = self
            .subtasks()
            .explain(&ctx, request.into_inner())
            .instrument(ctx.span.clone())
            .await;
        ctx.complete(result)
    }

    async fn generate(
        &self,
        request: Request<pb::Text2SqlRequest>,
    ) -> Result<Response<pb::Text2SqlResponse>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/Generate", &request);
        let result = async {
            let prepared = self.prepare(&ctx, request.into_inner()).await?;
            let notes = prepared.notes.clone();
            let (handle, cancel) = Self::spawn(prepared, None, &ctx);
            // If the client goes away, tonic drops this future and the guard cancels the run.
            let _guard = cancel.drop_guard();
            self.finish(&ctx, handle).await.map(|a| (a, notes))
        }
        .instrument(ctx.span.clone())
        .await;
        if let Ok((answer, _)) = &result {
            note_answer(&ctx, answer);
        }
        ctx.complete(result.map(|(answer, notes)| self.response(&answer, &notes)))
    }

    async fn generate_stream(
        &self,
        request: Request<pb::Text2SqlRequest>,
    ) -> Result<Response<Self::GenerateStreamStream>, Status> {
        let ctx = RpcContext::begin(&self.state, "Text2Sql/GenerateStream", &request);
        let prepared = self
            .prepare(&ctx, request.into_inner())
            .instrument(ctx.span.clone())
            .await;
        let prepared = prepared.map_err(|e| ctx.fail(e))?;
        let notes = prepared.notes.clone();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (handle, cancel) = Self::spawn(prepared, Some(events_tx), &ctx);
        // Events are few (one per stage and candidate): a small buffer suffices.
        let (tx, rx) = mpsc::channel(16);
        let task = self
            .clone()
            .stream(ctx.clone(), handle, events_rx, tx, (cancel, notes));
        tokio::spawn(task.instrument(ctx.span.clone()));
        Ok(ctx.respond(Box::pin(ReceiverStream::new(rx)) as Self::GenerateStreamStream))
    }
}

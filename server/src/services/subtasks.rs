//! The sub-task RPCs of `quorum.v1.Text2Sql` (LinkSchema, Debug, Optimize, Explain). Each runs
//! one of the sql crate's synchronous sub-task functions on a blocking thread under the same
//! admission, run queue, deadline and cancellation as a text-to-SQL run: a sub-task is a few
//! model calls and some SQL executions, the same kind of work.

use std::sync::Arc;
use std::time::Instant;

use quorum_proto::v1 as pb;
use quorum_sql::model::Sampling;
use quorum_sql::run_error::RunError;
use quorum_sql::sandbox::Limits;
use quorum_sql::subtask::Asker;
use quorum_sql::subtask::debug::{DebugQuestion, DebugRound, debug_sql};
use quorum_sql::subtask::explain::{check_consistency, explain_sql};
use quorum_sql::subtask::link::{LinkQuestion, link_schema};
use quorum_sql::subtask::optimize::{OptimizeQuestion, Rewrite, optimize_sql};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tracing::Instrument;

use super::{ResponseStream, join_run, stream_run};
use crate::auth::Right;
use crate::auth::quota::RunSlot;
use crate::convert;
use crate::databases::Database;
use crate::pipeline_models::{CallScope, EngineGenerator, EngineSelector};
use crate::rpc::RpcContext;
use crate::state::{Admission, AppState};
use crate::status::ServiceError;

/// Timing pairs one Optimize request may ask for: each runs both queries.
const MAX_TIMING_PAIRS: u32 = 100;

/// What a sub-task runs with: the models bound to the request's scope and the database.
pub struct SubtaskContext {
    pub generator: EngineGenerator,
    pub generator_name: String,
    pub selector: Option<EngineSelector>,
    pub db: Database,
    pub limits: Limits,
    pub max_new_tokens: usize,
}

impl SubtaskContext {
    pub fn asker(&self) -> Asker<'_> {
        Asker {
            generator: &self.generator,
            name: &self.generator_name,
            max_new_tokens: self.max_new_tokens,
        }
    }
}

/// A validated sub-task request holding its run slot.
struct Prepared {
    context: SubtaskContext,
    cancel: CancellationToken,
    admission: Admission,
    permit: OwnedSemaphorePermit,
    /// The run counted against the caller's quota.
    run_slot: RunSlot,
}

type Work<T> = Box<dyn FnOnce(&SubtaskContext) -> Result<T, RunError> + Send>;

/// Runs the sub-task RPCs.
#[derive(Debug, Clone)]
pub struct Subtasks {
    pub state: Arc<AppState>,
}

impl Subtasks {
    /// Checks the database and the generator, then waits for a run slot.
    async fn prepare(
        &self,
        ctx: &RpcContext,
        db_id: &str,
        generator: Option<&str>,
    ) -> Result<Prepared, ServiceError> {
        let (admission, models) = self.state.admit()?;
        if db_id.is_empty() {
            return Err(ServiceError::invalid("db_id", "must not be empty"));
        }
        let db = ctx.database(Right::Ask, db_id).await?;
        let run_slot = ctx.caller.start_run()?;
        let runtime = self.state.pipeline_runtime()?;
        let generator_name = runtime.subtask_generator(generator)?;
        let permit = self
            .state
            .text2sql_queue
            .enter(ctx.deadline, &self.state.cancel_all)
            .await?;
        let cancel = self.state.cancel_all.child_token();
        let scope = CallScope {
            runtime: tokio::runtime::Handle::current(),
            cancel: cancel.clone(),
            deadline: ctx.deadline,
        };
        // The server's answer budget (`[pipeline] max_new_tokens`), which every configured
        // generator carries.
        let max_new_tokens = runtime
            .base
            .generators
            .first()
            .map_or(Sampling::default().max_new_tokens, |g| {
                g.sampling.max_new_tokens
            });
        let context = SubtaskContext {
            generator: runtime.generator(&models, scope.clone()),
            generator_name,
            selector: runtime.selector(&models, scope),
            db,
            limits: runtime.base.limits,
            max_new_tokens,
        };
        Ok(Prepared {
            context,
            cancel,
            admission,
            permit,
            run_slot,
        })
    }

    fn spawn<T: Send + 'static>(
        prepared: Prepared,
        ctx: &RpcContext,
        work: Work<T>,
    ) -> (JoinHandle<Result<T, RunError>>, CancellationToken) {
        let cancel = prepared.cancel.clone();
        let span = ctx.span.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            let _admission = prepared.admission;
            let _permit = prepared.permit;
            let _run_slot = prepared.run_slot;
            work(&prepared.context)
        });
        (handle, cancel)
    }

    async fn finish<T>(
        &self,
        ctx: &RpcContext,
        handle: JoinHandle<Result<T, RunError>>,
    ) -> Result<T, ServiceError> {
        join_run(&self.state, ctx, handle).await
    }

    /// A unary sub-task: prepare, run, answer.
    async fn unary<T: Send + 'static>(
        &self,
        ctx: &RpcContext,
        db_id: &str,
        generator: Option<&str>,
        work: Work<T>,
    ) -> Result<T, ServiceError> {
        let prepared = self.prepare(ctx, db_id, generator).await?;
        let (handle, cancel) = Self::spawn(prepared, ctx, work);
        // A caller that leaves drops this future; the guard then cancels the model calls.
        let _guard = cancel.drop_guard();
        self.finish(ctx, handle).await
    }

    /// A streaming sub-task: the work reports progress messages to `events`' sender; the last
    /// message is the answer.
    async fn streaming<T, M>(
        &self,
        ctx: RpcContext,
        db_id: &str,
        generator: Option<&str>,
        work: Work<T>,
        mut events: mpsc::UnboundedReceiver<M>,
        answer: impl FnOnce(T) -> M + Send + 'static,
    ) -> Result<ResponseStream<M>, ServiceError>
    where
        T: Send + 'static,
        M: Send + 'static,
    {
        let prepared = self.prepare(&ctx, db_id, generator).await?;
        let (handle, cancel) = Self::spawn(prepared, &ctx, work);
        let (tx, rx) = mpsc::channel::<Result<M, Status>>(16);
        let this = self.clone();
        let task = async move {
            let _guard = cancel.drop_guard();
            let code = stream_run(
                &ctx,
                this.finish(&ctx, handle),
                &mut events,
                &tx,
                Some,
                answer,
            )
            .await;
            ctx.finish(code);
        };
        let span = tracing::Span::current();
        tokio::spawn(task.instrument(span));
        Ok(Box::pin(ReceiverStream::new(rx)) as ResponseStream<M>)
    }

    pub async fn link_schema(
        &self,
        ctx: &RpcContext,
        req: pb::LinkSchemaRequest,
    ) -> Result<pb::LinkSchemaResponse, ServiceError> {
        require_text("question", &req.question)?;
        let method = convert::link_method(req.method)?;
        let foreign_keys = req.foreign_keys.unwrap_or(true);
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let work: Work<_> = Box::new(move |c: &SubtaskContext| {
            let started = Instant::now();
            let q = LinkQuestion {
                question: &req.question,
                evidence: req.evidence.as_deref().filter(|e| !e.is_empty()),
                method,
                foreign_keys,
            };
            let answer = link_schema(&c.asker(), &c.db.handle.schema, &q)?;
            Ok(convert::link_response(
                &answer,
                method,
                foreign_keys,
                &c.generator_name,
                elapsed_ms(started),
            ))
        });
        self.unary(ctx, &db_id, generator.as_deref(), work).await
    }

    /// The Debug work; `on_round` sees each round as it finishes.
    fn debug_work(
        req: pb::DebugRequest,
        on_round: Option<mpsc::UnboundedSender<pb::DebugEvent>>,
    ) -> Result<Work<pb::DebugResponse>, ServiceError> {
        let strategy = debug_question(&req)?.strategy;
        Ok(Box::new(move |c: &SubtaskContext| {
            let started = Instant::now();
            let q = debug_question(&req).expect("validated before the work started");
            let mut index = 0;
            let mut report = |round: &DebugRound| {
                if let Some(tx) = &on_round {
                    let event = pb::debug_event::Event::Round(convert::debug_round(index, round));
                    let _ = tx.send(pb::DebugEvent { event: Some(event) });
                }
                index += 1;
            };
            let answer = debug_sql(&c.asker(), &c.db.handle, &q, c.limits, &mut report)?;
            Ok(convert::debug_response(
                &answer,
                strategy,
                &c.generator_name,
                elapsed_ms(started),
            ))
        }))
    }

    pub async fn debug(
        &self,
        ctx: &RpcContext,
        req: pb::DebugRequest,
    ) -> Result<pb::DebugResponse, ServiceError> {
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let work = Self::debug_work(req, None)?;
        self.unary(ctx, &db_id, generator.as_deref(), work).await
    }

    pub async fn debug_stream(
        &self,
        ctx: RpcContext,
        req: pb::DebugRequest,
    ) -> Result<ResponseStream<pb::DebugEvent>, ServiceError> {
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let (tx, events) = mpsc::unbounded_channel();
        let work = Self::debug_work(req, Some(tx))?;
        self.streaming(ctx, &db_id, generator.as_deref(), work, events, |answer| {
            pb::DebugEvent {
                event: Some(pb::debug_event::Event::Answer(answer)),
            }
        })
        .await
    }

    /// The Optimize work; `on_rewrite` sees each rewrite as it is measured.
    fn optimize_work(
        req: pb::OptimizeRequest,
        on_rewrite: Option<mpsc::UnboundedSender<pb::OptimizeEvent>>,
    ) -> Result<Work<pb::OptimizeResponse>, ServiceError> {
        let method = optimize_question(&req)?.method;
        Ok(Box::new(move |c: &SubtaskContext| {
            let started = Instant::now();
            let q = optimize_question(&req).expect("validated before the work started");
            let mut report = |rewrite: &Rewrite| {
                if let Some(tx) = &on_rewrite {
                    let event = pb::optimize_event::Event::Rewrite(convert::rewrite(rewrite));
                    let _ = tx.send(pb::OptimizeEvent { event: Some(event) });
                }
            };
            let answer = optimize_sql(&c.asker(), &c.db.handle, &q, c.limits, &mut report)?;
            Ok(convert::optimize_response(
                &answer,
                method,
                &c.generator_name,
                elapsed_ms(started),
            ))
        }))
    }

    pub async fn optimize(
        &self,
        ctx: &RpcContext,
        req: pb::OptimizeRequest,
    ) -> Result<pb::OptimizeResponse, ServiceError> {
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let work = Self::optimize_work(req, None)?;
        self.unary(ctx, &db_id, generator.as_deref(), work).await
    }

    pub async fn optimize_stream(
        &self,
        ctx: RpcContext,
        req: pb::OptimizeRequest,
    ) -> Result<ResponseStream<pb::OptimizeEvent>, ServiceError> {
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let (tx, events) = mpsc::unbounded_channel();
        let work = Self::optimize_work(req, Some(tx))?;
        self.streaming(ctx, &db_id, generator.as_deref(), work, events, |answer| {
            pb::OptimizeEvent {
                event: Some(pb::optimize_event::Event::Answer(answer)),
            }
        })
        .await
    }

    pub async fn explain(
        &self,
        ctx: &RpcContext,
        req: pb::ExplainRequest,
    ) -> Result<pb::ExplainResponse, ServiceError> {
        require_text("sql", &req.sql)?;
        let (db_id, generator) = (req.db_id.clone(), req.generator.clone());
        let question = req.question.clone().filter(|q| !q.trim().is_empty());
        // Models still loading are UNAVAILABLE (from `prepare`); loaded without a judge, the
        // check cannot be made here at all.
        let no_judge = self
            .state
            .loaded_models()
            .is_some_and(|m| m.selector().is_none());
        if question.is_some() && no_judge {
            return Err(ServiceError::FailedPrecondition {
                what: "the consistency check (a model with the selector role)".into(),
            });
        }
        let threshold = match req.threshold {
            Some(t) if !(0.0..=1.0).contains(&t) => {
                return Err(ServiceError::invalid(
                    "threshold",
                    "must be between 0 and 1",
                ));
            }
            Some(t) => t,
            None => f64::from(self.state.pipeline_runtime()?.base.consistency.threshold),
        };
        let work: Work<_> = Box::new(move |c: &SubtaskContext| {
            let started = Instant::now();
            let explanation = explain_sql(&c.asker(), c.db.handle.dialect(), &req.sql)?;
            let consistency = match &question {
                Some(question) => {
                    let judge = c.selector.as_ref().ok_or_else(|| RunError::Invalid {
                        field: "question",
                        reason: "the consistency check needs a model with the selector role".into(),
                    })?;
                    Some(check_consistency(
                        judge,
                        question,
                        &explanation.text,
                        threshold,
                    )?)
                }
                None => None,
            };
            Ok(pb::ExplainResponse {
                explanation: explanation.text,
                consistency: consistency.as_ref().map(convert::consistency),
                tokens_generated: explanation.tokens_generated as u32,
                generator: c.generator_name.clone(),
                elapsed_ms: elapsed_ms(started),
            })
        });
        self.unary(ctx, &db_id, generator.as_deref(), work).await
    }
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// A Debug request as the sql crate takes it, checked.
fn debug_question(req: &pb::DebugRequest) -> Result<DebugQuestion<'_>, ServiceError> {
    require_text("question", &req.question)?;
    let q = DebugQuestion {
        question: &req.question,
        evidence: req.evidence.as_deref().filter(|e| !e.is_empty()),
        sql: &req.sql,
        reference_sql: req
            .reference_sql
            .as_deref()
            .filter(|s| !s.trim().is_empty()),
        reported_error: req.error.as_deref().filter(|e| !e.trim().is_empty()),
        strategy: convert::debug_strategy(req.strategy)?,
        rounds: req.rounds.unwrap_or(1) as usize,
    };
    q.check()?;
    Ok(q)
}

/// An Optimize request as the sql crate takes it, checked.
fn optimize_question(req: &pb::OptimizeRequest) -> Result<OptimizeQuestion<'_>, ServiceError> {
    let timing_pairs = req.timing_pairs.unwrap_or(10);
    if !(1..=MAX_TIMING_PAIRS).contains(&timing_pairs) {
        return Err(ServiceError::invalid(
            "timing_pairs",
            format!("must be between 1 and {MAX_TIMING_PAIRS}"),
        ));
    }
    let q = OptimizeQuestion {
        question: req.question.as_deref(),
        sql: &req.sql,
        method: convert::optimize_method(req.method)?,
        rewrites: req.rewrites.unwrap_or(1) as usize,
        timing_pairs: timing_pairs as usize,
        min_speedup: req.min_speedup.unwrap_or(1.1),
    };
    q.check()?;
    Ok(q)
}

fn require_text(field: &str, value: &str) -> Result<(), ServiceError> {
    if value.trim().is_empty() {
        return Err(ServiceError::invalid(field, "must not be empty"));
    }
    Ok(())
}

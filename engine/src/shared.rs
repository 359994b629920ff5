//! What the handle and the engine thread share: the commands the handle sends, and the
//! counters both update.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Mutex, MutexGuard, RwLock};

use tokio::sync::mpsc::UnboundedSender;

use crate::engine_error::EngineError;
use crate::ids::RequestId;
use crate::logits_constraint::LogitsConstraint;
use crate::request::{EngineEvent, GenerateRequest};
use crate::stats::EngineStats;

pub(crate) enum Command {
    Add {
        id: RequestId,
        choice: u32,
        /// Boxed: a request is much larger than the other commands.
        request: Box<GenerateRequest>,
        /// This choice's own grammar state, when the request has a grammar.
        constraint: Option<Box<dyn LogitsConstraint>>,
        tx: UnboundedSender<EngineEvent>,
    },
    /// Makes a parsed adapter available to requests; answered once it is (or is not).
    LoadAdapter {
        adapter: Box<quorum_weights::LoraAdapter>,
        reply: SyncSender<Result<(), EngineError>>,
    },
    /// Removes an adapter that no request uses.
    UnloadAdapter {
        name: String,
        reply: SyncSender<Result<(), EngineError>>,
    },
    Shutdown,
}

/// State shared by the handle and the engine thread.
pub(crate) struct Shared {
    pub(crate) stats: Mutex<EngineStats>,
    /// Sequences submitted and not yet finished; admission compares it with `limit`.
    pub(crate) pending: AtomicUsize,
    pub(crate) limit: usize,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) next_id: AtomicU64,
    /// The adapters requests may name now, in the model's order; written by the engine
    /// thread when it loads or unloads one, read at submit.
    pub(crate) adapters: RwLock<Vec<String>>,
}

impl Shared {
    pub(crate) fn stats(&self) -> MutexGuard<'_, EngineStats> {
        // A poisoned lock only means a panic elsewhere mid-update; the numbers are still usable.
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn adapters(&self) -> Vec<String> {
        self.adapters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_adapters(&self, names: Vec<String>) {
        *self.adapters.write().unwrap_or_else(|p| p.into_inner()) = names;
    }

    pub(crate) fn release(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::AcqRel);
    }
}

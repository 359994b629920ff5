//! The only place where generated proto types meet domain types: requests are validated into
//! domain values here (naming the offending field), and domain results become messages.

mod inference;
mod schema;
mod subtasks;
mod text2sql;

pub use inference::{chat_messages, finish_reason, grammar, sampling_params, usage};
pub use schema::{database_summary, describe_response, value};
pub use subtasks::{
    consistency, debug_response, debug_round, debug_strategy, link_method, link_response,
    optimize_method, optimize_response, rewrite,
};
pub use text2sql::{answer_response, event_message, knobs, options, pipeline_config, preview};

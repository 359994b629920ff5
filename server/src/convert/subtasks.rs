//! The sub-task RPCs' messages (LinkSchema, Debug, Optimize, Explain) to and from the sql
//! crate's sub-task types.

use quorum_proto::v1 as pb;
use quorum_sql::subtask::debug::{DebugAnswer, DebugRound, DebugStrategy, Diagnosis};
use quorum_sql::subtask::explain::Consistency;
use quorum_sql::subtask::link::{LinkAnswer, LinkMethod};
use quorum_sql::subtask::optimize::{OptimizeAnswer, OptimizeMethod, Rewrite, RewriteVerdict};

use crate::status::ServiceError;

fn known<T: TryFrom<i32>>(field: &str, value: i32) -> Result<T, ServiceError> {
    T::try_from(value).map_err(|_| ServiceError::invalid(field, format!("unknown value {value}")))
}

pub fn link_method(value: i32) -> Result<LinkMethod, ServiceError> {
    Ok(match known::<pb::LinkMethod>("method", value)? {
        pb::LinkMethod::Unspecified | pb::LinkMethod::PreSql => LinkMethod::PreSql,
        pb::LinkMethod::ZeroShot => LinkMethod::ZeroShot,
        pb::LinkMethod::FewShot => LinkMethod::FewShot,
        pb::LinkMethod::FewShotPreSql => LinkMethod::FewShotPreSql,
    })
}

fn link_method_message(method: LinkMethod) -> pb::LinkMethod {
    match method {
        LinkMethod::ZeroShot => pb::LinkMethod::ZeroShot,
        LinkMethod::FewShot => pb::LinkMethod::FewShot,
        LinkMethod::PreSql => pb::LinkMethod::PreSql,
        LinkMethod::FewShotPreSql => pb::LinkMethod::FewShotPreSql,
    }
}

pub fn link_response(
    answer: &LinkAnswer,
    method: LinkMethod,
    foreign_keys: bool,
    generator: &str,
    elapsed_ms: f64,
) -> pb::LinkSchemaResponse {
    pb::LinkSchemaResponse {
        tables: answer
            .tables
            .iter()
            .map(|t| pb::LinkedTable {
                name: t.name.clone(),
                columns: t.columns.clone(),
            })
            .collect(),
        method: link_method_message(method) as i32,
        foreign_keys,
        listed: answer.listed.clone(),
        unknown_names: answer.unknown_names.clone(),
        pre_sql: answer.pre_sql.clone(),
        pre_sql_parsed: answer.pre_sql_parsed,
        tokens_generated: answer.tokens_generated as u32,
        generator: generator.to_owned(),
        elapsed_ms,
    }
}

pub fn debug_strategy(value: i32) -> Result<DebugStrategy, ServiceError> {
    Ok(match known::<pb::DebugStrategy>("strategy", value)? {
        pb::DebugStrategy::Regenerate => DebugStrategy::Regenerate,
        pb::DebugStrategy::WrongSql => DebugStrategy::WrongSql,
        pb::DebugStrategy::SystemError => DebugStrategy::SystemError,
        pb::DebugStrategy::AllErrors => DebugStrategy::AllErrors,
        pb::DebugStrategy::Unspecified | pb::DebugStrategy::WithComments => DebugStrategy::Comments,
    })
}

fn debug_strategy_message(strategy: DebugStrategy) -> pb::DebugStrategy {
    match strategy {
        DebugStrategy::Regenerate => pb::DebugStrategy::Regenerate,
        DebugStrategy::WrongSql => pb::DebugStrategy::WrongSql,
        DebugStrategy::SystemError => pb::DebugStrategy::SystemError,
        DebugStrategy::AllErrors => pb::DebugStrategy::AllErrors,
        DebugStrategy::Comments => pb::DebugStrategy::WithComments,
    }
}

fn diagnosis(d: &Diagnosis) -> pb::Diagnosis {
    pb::Diagnosis {
        kind: d.name(),
        message: match d {
            Diagnosis::SystemError { message } => message.clone(),
            _ => String::new(),
        },
    }
}

pub fn debug_round(index: usize, round: &DebugRound) -> pb::DebugRound {
    pb::DebugRound {
        round: index as u32 + 1,
        sql: round.sql.clone(),
        diagnosis: Some(diagnosis(&round.diagnosis)),
        tokens_generated: round.tokens_generated as u32,
    }
}

pub fn debug_response(
    answer: &DebugAnswer,
    strategy: DebugStrategy,
    generator: &str,
    elapsed_ms: f64,
) -> pb::DebugResponse {
    pb::DebugResponse {
        sql: answer.sql.clone(),
        fixed: answer.fixed,
        initial: Some(diagnosis(&answer.initial)),
        rounds: answer
            .rounds
            .iter()
            .enumerate()
            .map(|(i, r)| debug_round(i, r))
            .collect(),
        strategy: debug_strategy_message(strategy) as i32,
        generator: generator.to_owned(),
        elapsed_ms,
    }
}

pub fn optimize_method(value: i32) -> Result<OptimizeMethod, ServiceError> {
    Ok(match known::<pb::OptimizeMethod>("method", value)? {
        pb::OptimizeMethod::WithSql => OptimizeMethod::WithSql,
        pb::OptimizeMethod::WithContext => OptimizeMethod::WithContext,
        pb::OptimizeMethod::FewShot => OptimizeMethod::FewShot,
        pb::OptimizeMethod::Unspecified | pb::OptimizeMethod::FewShotComments => {
            OptimizeMethod::FewShotComments
        }
        pb::OptimizeMethod::Direct => OptimizeMethod::Direct,
    })
}

fn optimize_method_message(method: OptimizeMethod) -> pb::OptimizeMethod {
    match method {
        OptimizeMethod::WithSql => pb::OptimizeMethod::WithSql,
        OptimizeMethod::WithContext => pb::OptimizeMethod::WithContext,
        OptimizeMethod::FewShot => pb::OptimizeMethod::FewShot,
        OptimizeMethod::FewShotComments => pb::OptimizeMethod::FewShotComments,
        OptimizeMethod::Direct => pb::OptimizeMethod::Direct,
    }
}

pub fn rewrite(r: &Rewrite) -> pb::Rewrite {
    let (verdict, message) = match &r.verdict {
        RewriteVerdict::Kept => ("kept", String::new()),
        RewriteVerdict::NotFaster => ("not_faster", String::new()),
        RewriteVerdict::Unchanged => ("unchanged", String::new()),
        RewriteVerdict::DifferentResult => ("different_result", String::new()),
        RewriteVerdict::Failed { message } => ("failed", message.clone()),
    };
    pb::Rewrite {
        sql: r.sql.clone(),
        verdict: verdict.to_owned(),
        message,
        speedup: r.speedup,
        original_ms: r.original_ms,
        rewrite_ms: r.rewrite_ms,
        timing_pairs: r.timing_pairs as u32,
        faster_pairs: r.faster_pairs as u32,
        tokens_generated: r.tokens_generated as u32,
    }
}

pub fn optimize_response(
    answer: &OptimizeAnswer,
    method: OptimizeMethod,
    generator: &str,
    elapsed_ms: f64,
) -> pb::OptimizeResponse {
    pb::OptimizeResponse {
        sql: answer.sql.clone(),
        chosen: answer.chosen.map(|i| i as u32),
        rewrites: answer.rewrites.iter().map(rewrite).collect(),
        original_ms: answer.original_ms,
        method: optimize_method_message(method) as i32,
        generator: generator.to_owned(),
        elapsed_ms,
    }
}

pub fn consistency(c: &Consistency) -> pb::Consistency {
    pb::Consistency {
        p_same: c.p_same,
        p_same_by_order: c.p_same_by_order.to_vec(),
        consistent: c.consistent,
        threshold: c.threshold,
    }
}

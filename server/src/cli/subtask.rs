//! `quorum link`, `quorum debug`, `quorum optimize`, `quorum explain`: small gRPC clients for
//! the sub-task RPCs of Text2Sql, like `quorum ask` for Generate. Each waits until the server
//! is ready, makes one call and prints the answer with its evidence.

use anyhow::{Context, Result};
use quorum_proto::v1 as pb;

use super::ask::ClientArgs;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LinkMethodArg {
    ZeroShot,
    FewShot,
    PreSql,
    FewShotPreSql,
}

#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "concert_singer")]
    pub db: String,
    #[arg(long, value_enum, default_value = "pre-sql")]
    pub method: LinkMethodArg,
    /// Leave the foreign keys out of the prompt.
    #[arg(long)]
    pub no_foreign_keys: bool,
    /// A configured generator (default: the first without an adapter).
    #[arg(long)]
    pub generator: Option<String>,
    pub question: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum DebugStrategyArg {
    Regenerate,
    WrongSql,
    SystemError,
    AllErrors,
    WithComments,
}

#[derive(clap::Args, Debug)]
pub struct DebugArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "concert_singer")]
    pub db: String,
    /// The SQL to fix.
    #[arg(long)]
    pub sql: String,
    /// A SQL whose result is the right one; debugging then stops at the first correct SQL.
    #[arg(long)]
    pub reference_sql: Option<String>,
    /// An error seen for the SQL elsewhere.
    #[arg(long)]
    pub error: Option<String>,
    #[arg(long, value_enum, default_value = "with-comments")]
    pub strategy: DebugStrategyArg,
    /// Rounds, 1 to 3.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    #[arg(long)]
    pub generator: Option<String>,
    /// The question the SQL should answer.
    pub question: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OptimizeMethodArg {
    WithSql,
    WithContext,
    FewShot,
    FewShotComments,
    Direct,
}

#[derive(clap::Args, Debug)]
pub struct OptimizeArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "concert_singer")]
    pub db: String,
    /// The question the SQL answers (every method but with-sql needs it).
    #[arg(long)]
    pub question: Option<String>,
    #[arg(long, value_enum, default_value = "few-shot-comments")]
    pub method: OptimizeMethodArg,
    /// Rewrites to ask for, 1 to 8.
    #[arg(long, default_value_t = 1)]
    pub rewrites: u32,
    /// Timing pairs per rewrite.
    #[arg(long, default_value_t = 10)]
    pub timing_pairs: u32,
    /// How many times faster a rewrite must be to be kept.
    #[arg(long, default_value_t = 1.1)]
    pub min_speedup: f64,
    #[arg(long)]
    pub generator: Option<String>,
    /// The SQL to speed up.
    pub sql: String,
}

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[arg(long, default_value = "concert_singer")]
    pub db: String,
    /// The user's question, to check the explanation against.
    #[arg(long)]
    pub question: Option<String>,
    /// The judge's p_same at and above which the two count as the same question (default:
    /// the server's).
    #[arg(long)]
    pub threshold: Option<f64>,
    #[arg(long)]
    pub generator: Option<String>,
    /// The SQL to explain.
    pub sql: String,
}

async fn client(
    args: &ClientArgs,
) -> Result<pb::text2_sql_client::Text2SqlClient<quorum_server::client::AuthChannel>> {
    Ok(pb::text2_sql_client::Text2SqlClient::new(
        args.connect().await?,
    ))
}

pub async fn link(args: LinkArgs) -> Result<()> {
    let method = match args.method {
        LinkMethodArg::ZeroShot => pb::LinkMethod::ZeroShot,
        LinkMethodArg::FewShot => pb::LinkMethod::FewShot,
        LinkMethodArg::PreSql => pb::LinkMethod::PreSql,
        LinkMethodArg::FewShotPreSql => pb::LinkMethod::FewShotPreSql,
    };
    let r = client(&args.client)
        .await?
        .link_schema(pb::LinkSchemaRequest {
            question: args.question,
            db_id: args.db,
            evidence: None,
            method: method as i32,
            foreign_keys: Some(!args.no_foreign_keys),
            generator: args.generator,
        })
        .await
        .context("Text2Sql.LinkSchema")?
        .into_inner();
    for (rank, table) in r.tables.iter().enumerate() {
        if table.columns.is_empty() {
            println!("{:>2}. {}", rank + 1, table.name);
        } else {
            println!(
                "{:>2}. {} ({})",
                rank + 1,
                table.name,
                table.columns.join(", ")
            );
        }
    }
    if let Some(listed) = &r.listed {
        println!("listed:  {listed}");
    }
    if !r.unknown_names.is_empty() {
        println!("unknown: {}", r.unknown_names.join(", "));
    }
    if let Some(sql) = &r.pre_sql {
        println!("presql:  {sql}");
    }
    println!(
        "model:   {} ({} tokens, {:.1} s)",
        r.generator,
        r.tokens_generated,
        r.elapsed_ms / 1e3
    );
    Ok(())
}

fn diagnosis(d: Option<&pb::Diagnosis>) -> String {
    match d {
        Some(d) if d.message.is_empty() => d.kind.clone(),
        Some(d) => format!("{}: {}", d.kind, d.message),
        None => "?".into(),
    }
}

pub async fn debug(args: DebugArgs) -> Result<()> {
    let strategy = match args.strategy {
        DebugStrategyArg::Regenerate => pb::DebugStrategy::Regenerate,
        DebugStrategyArg::WrongSql => pb::DebugStrategy::WrongSql,
        DebugStrategyArg::SystemError => pb::DebugStrategy::SystemError,
        DebugStrategyArg::AllErrors => pb::DebugStrategy::AllErrors,
        DebugStrategyArg::WithComments => pb::DebugStrategy::WithComments,
    };
    let mut stream = client(&args.client)
        .await?
        .debug_stream(pb::DebugRequest {
            question: args.question,
            db_id: args.db,
            evidence: None,
            sql: args.sql.clone(),
            reference_sql: args.reference_sql,
            error: args.error,
            strategy: strategy as i32,
            rounds: Some(args.rounds),
            generator: args.generator,
        })
        .await
        .context("Text2Sql.DebugStream")?
        .into_inner();
    println!("given:    {}", args.sql);
    while let Some(event) = stream.message().await.context("Text2Sql.DebugStream")? {
        match event.event {
            Some(pb::debug_event::Event::Round(r)) => {
                println!("round {}:  {}", r.round, r.sql);
                println!("          {}", diagnosis(r.diagnosis.as_ref()));
            }
            Some(pb::debug_event::Event::Answer(a)) => {
                println!("initial:  {}", diagnosis(a.initial.as_ref()));
                println!("answer:   {}", a.sql);
                println!("fixed:    {}", a.fixed);
                println!("model:    {} ({:.1} s)", a.generator, a.elapsed_ms / 1e3);
            }
            None => {}
        }
    }
    Ok(())
}

pub async fn optimize(args: OptimizeArgs) -> Result<()> {
    let method = match args.method {
        OptimizeMethodArg::WithSql => pb::OptimizeMethod::WithSql,
        OptimizeMethodArg::WithContext => pb::OptimizeMethod::WithContext,
        OptimizeMethodArg::FewShot => pb::OptimizeMethod::FewShot,
        OptimizeMethodArg::FewShotComments => pb::OptimizeMethod::FewShotComments,
        OptimizeMethodArg::Direct => pb::OptimizeMethod::Direct,
    };
    let mut stream = client(&args.client)
        .await?
        .optimize_stream(pb::OptimizeRequest {
            sql: args.sql.clone(),
            db_id: args.db,
            question: args.question,
            method: method as i32,
            rewrites: Some(args.rewrites),
            timing_pairs: Some(args.timing_pairs),
            min_speedup: Some(args.min_speedup),
            generator: args.generator,
        })
        .await
        .context("Text2Sql.OptimizeStream")?
        .into_inner();
    println!("original: {}", args.sql);
    while let Some(event) = stream.message().await.context("Text2Sql.OptimizeStream")? {
        match event.event {
            Some(pb::optimize_event::Event::Rewrite(r)) => {
                let timing = match (r.speedup, r.original_ms, r.rewrite_ms) {
                    (Some(s), Some(o), Some(w)) => {
                        format!(" {s:.2}× ({o:.3} ms → {w:.3} ms, {} pairs)", r.timing_pairs)
                    }
                    _ => String::new(),
                };
                let message = if r.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", r.message)
                };
                println!(
                    "rewrite:  {}\n          {}{timing}{message}",
                    r.sql, r.verdict
                );
            }
            Some(pb::optimize_event::Event::Answer(a)) => {
                println!("answer:   {}", a.sql);
                println!("model:    {} ({:.1} s)", a.generator, a.elapsed_ms / 1e3);
            }
            None => {}
        }
    }
    Ok(())
}

pub async fn explain(args: ExplainArgs) -> Result<()> {
    let r = client(&args.client)
        .await?
        .explain(pb::ExplainRequest {
            sql: args.sql,
            db_id: args.db,
            question: args.question,
            generator: args.generator,
            threshold: args.threshold,
        })
        .await
        .context("Text2Sql.Explain")?
        .into_inner();
    println!("explanation: {}", r.explanation);
    if let Some(c) = &r.consistency {
        println!(
            "consistent:  {} (p_same {:.2} against {:.2}; by order {:.2} / {:.2})",
            c.consistent,
            c.p_same,
            c.threshold,
            c.p_same_by_order.first().copied().unwrap_or(f64::NAN),
            c.p_same_by_order.get(1).copied().unwrap_or(f64::NAN)
        );
    }
    println!("model:       {} ({:.1} s)", r.generator, r.elapsed_ms / 1e3);
    Ok(())
}

//! Schema linking: which tables, columns and stored values a question is about, and which words
//! of it name the schema.
//!
//! Before the first prompt, a large schema is cut down to the tables the question is about
//! ([`schema_filter`]); the question's words are matched against the database's stored text
//! values ([`value_index`]) and, by meaning, against table and column names ([`term_hints`]).
//! After the preliminary SQL, the tables it reads become the linked schema of the second round
//! ([`tables`]). For retrieving demonstrations, the words that name the schema are found
//! ([`relevance`], in the Poincaré ball of [`poincare`]) and masked ([`mask`]), and a query's
//! shape is reduced to its skeleton ([`skeleton`]).
//!
//! Nothing here imports the pipeline: the pipeline calls into this wing.

pub mod mask;
pub mod poincare;
pub mod relevance;
pub mod schema_filter;
pub mod skeleton;
pub mod tables;
pub mod term_hints;
pub mod value_index;

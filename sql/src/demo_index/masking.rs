//! How the questions of the pool and the asked question are de-semanticized. Both sides of a
//! retrieval must be masked the same way, so the index records its mode.

use serde::{Deserialize, Serialize};

use crate::linking::mask::{mask_question, schema_value_probe};
use crate::linking::relevance::{RelevanceParams, relevance_mask};
use crate::model::ContextEncoder;
use crate::model::ModelCallError;
use crate::schema::Schema;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskingMode {
    /// DAIL-SQL / PET-SQL: n-gram matching against names and sampled cell values; no model.
    #[default]
    Lexical,
    /// The de-semanticization paper's relevance probe ([`crate::linking::relevance`]): a masked language
    /// model pass per question word (0.56 s per question on average with MiniLM on 2 CPU cores:
    /// 2000 Spider train questions in 18.8 minutes).
    Relevance,
}

impl MaskingMode {
    pub fn label(self) -> &'static str {
        match self {
            Self::Lexical => "lexical",
            Self::Relevance => "relevance",
        }
    }

    /// Masks `question` against `schema`. The relevance mode needs `encoder`.
    pub fn mask(
        self,
        question: &str,
        schema: &Schema,
        encoder: Option<&dyn ContextEncoder>,
    ) -> Result<String, ModelCallError> {
        match self {
            Self::Lexical => {
                // Values are probed among the sampled cells already in the schema: no database
                // queries, fast enough for 7000 train questions.
                let mut probe = schema_value_probe(schema);
                Ok(mask_question(question, schema, &mut probe))
            }
            Self::Relevance => {
                let encoder = encoder.ok_or_else(|| ModelCallError::UnknownModel {
                    name: "a context encoder for relevance masking".into(),
                })?;
                Ok(
                    relevance_mask(question, schema, encoder, RelevanceParams::default())?
                        .masked_question,
                )
            }
        }
    }
}

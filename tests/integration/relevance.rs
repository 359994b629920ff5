//! The de-semanticization paper's relevance probe with the real MiniLM on Spider schemas: the words
//! that name the schema or its values are masked, the words that state the intent are kept.

use candle_core::{DType, Device};
use quorum_models::BertEmbedder;
use quorum_sql::linking::relevance::{RelevanceParams, relevance_mask};
use quorum_sql::model::ModelCallError;
use quorum_sql::model::{ContextEncoder, WordStates};
use quorum_sql::schema::{IntrospectOptions, Schema};
use quorum_tests::{MINILM, model_path, spider_dir};
use quorum_weights::load_checkpoint;

struct MiniLm(BertEmbedder);

impl ContextEncoder for MiniLm {
    fn word_states(
        &self,
        groups: &[Vec<String>],
        masks: &[Option<(usize, usize)>],
    ) -> Result<Vec<WordStates>, ModelCallError> {
        self.0
            .word_states(groups, masks)
            .map_err(|e| ModelCallError::Failed {
                name: "minilm".into(),
                message: e.to_string(),
            })
    }
}

fn schema(db: &str) -> Schema {
    let path = spider_dir().join(format!("database/{db}/{db}.sqlite"));
    Schema::from_sqlite(&path, db, IntrospectOptions::default()).unwrap()
}

#[test]
fn minilm_probe_masks_schema_words_and_keeps_the_intent() {
    let ckpt = load_checkpoint(&model_path(MINILM), &Device::Cpu, DType::F32).unwrap();
    let encoder = MiniLm(BertEmbedder::load(ckpt, &Device::Cpu).unwrap());
    let cases = [
        (
            "concert_singer",
            "What are the names of the singers who are not French?",
            "What are the names of the <mask> who are not <mask>?",
        ),
        (
            "concert_singer",
            "How many singers are from each country?",
            "How many <mask> are from each <mask>?",
        ),
        (
            "pets_1",
            "Find the average weight for each pet type.",
            "Find the average <mask> for each <mask> type.",
        ),
        (
            "world_1",
            "What is the total population of countries in Asia?",
            "What is the total <mask> of <mask> in <unk>?",
        ),
    ];
    for (db, question, want) in cases {
        let r =
            relevance_mask(question, &schema(db), &encoder, RelevanceParams::default()).unwrap();
        let detail: Vec<String> = r
            .words
            .iter()
            .map(|w| format!("{} {:.2}/{:.3}/{:.1}", w.word, w.shift, w.matching, w.pos))
            .collect();
        assert_eq!(r.masked_question, want, "{question}: {detail:?}");
        // The probe measures something: the shifts are relative to the largest, which is 1.
        let top = r.words.iter().map(|w| w.shift).fold(0f64, f64::max);
        assert_eq!(top, 1.0, "{detail:?}");
        assert!(r.words.iter().any(|w| w.shift < 0.9), "{detail:?}");
    }
}

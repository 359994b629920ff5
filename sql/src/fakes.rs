//! Scripted stand-ins for the models, for the tests of the pipeline, retrieval and the
//! sub-tasks: a generator that maps each request to a fixed
//! completion through a closure, a bag-of-words embedder, and a selector with fixed scores.
//! Each records its calls so tests can check batching and when a model was asked at all.

use std::sync::Mutex;

use crate::fingerprint::Fnv64;
use crate::model::{Embedder, Generation, GenerationRequest, Generator, ModelCallError, Selector};

type Script = dyn Fn(&GenerationRequest) -> Result<String, ModelCallError> + Send + Sync;

pub(crate) struct ScriptedGenerator {
    script: Box<Script>,
    pub batches: Mutex<Vec<Vec<GenerationRequest>>>,
}

impl ScriptedGenerator {
    pub(crate) fn new(
        script: impl Fn(&GenerationRequest) -> Result<String, ModelCallError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            script: Box::new(script),
            batches: Mutex::new(Vec::new()),
        }
    }

    /// Every request so far, in order, with the batch it came in.
    pub(crate) fn batches(&self) -> Vec<Vec<GenerationRequest>> {
        self.batches.lock().expect("not poisoned").clone()
    }
}

impl Generator for ScriptedGenerator {
    fn generate_batch(
        &self,
        requests: &[GenerationRequest],
    ) -> Vec<Result<Generation, ModelCallError>> {
        self.batches
            .lock()
            .expect("not poisoned")
            .push(requests.to_vec());
        requests
            .iter()
            .map(|r| {
                (self.script)(r).map(|text| Generation {
                    tokens_generated: text.split_whitespace().count(),
                    constrained: r.grammar.is_some(),
                    text,
                    prompt_tokens: 0,
                    cached_tokens: 0,
                    elapsed_ms: 0.0,
                })
            })
            .collect()
    }
}

/// Hashes lower-cased words into 64 buckets: questions sharing words are close, which is all
/// retrieval tests need.
#[derive(Default)]
pub(crate) struct BagOfWords {
    pub calls: Mutex<usize>,
}

pub(crate) const BAG_DIM: usize = 64;

impl BagOfWords {
    pub(crate) fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0.0; BAG_DIM];
        for word in text
            .split(|c: char| !c.is_alphanumeric() && c != '<' && c != '>')
            .filter(|w| !w.is_empty())
        {
            let mut h = Fnv64::default();
            h.write(word.to_lowercase().as_bytes());
            v[(h.finish() % BAG_DIM as u64) as usize] += 1.0;
        }
        v
    }

    pub(crate) fn calls(&self) -> usize {
        *self.calls.lock().expect("not poisoned")
    }
}

impl Embedder for BagOfWords {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
        *self.calls.lock().expect("not poisoned") += 1;
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

/// Returns fixed scores for labels (by position); records each prompt it saw.
pub(crate) struct FixedSelector {
    scores: Result<Vec<f32>, ModelCallError>,
    pub prompts: Mutex<Vec<String>>,
}

impl FixedSelector {
    pub(crate) fn new(scores: Result<Vec<f32>, ModelCallError>) -> Self {
        Self {
            scores,
            prompts: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn prompts(&self) -> Vec<String> {
        self.prompts.lock().expect("not poisoned").clone()
    }
}

impl Selector for FixedSelector {
    fn choose(&self, prompt: &str, labels: &[String]) -> Result<Vec<f32>, ModelCallError> {
        self.prompts
            .lock()
            .expect("not poisoned")
            .push(prompt.to_owned());
        self.scores
            .clone()
            .map(|s| s.into_iter().take(labels.len()).collect())
    }
}

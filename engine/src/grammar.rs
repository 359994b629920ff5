//! Grammar-constrained decoding: a request may bring a grammar (Lark, a regular expression or a
//! JSON schema) and every token it generates must keep the text inside that grammar.
//!
//! llguidance does the work: it compiles the grammar, and after each token computes the set of
//! tokens that keep the text a prefix of some sentence of the grammar, with its lexer reading
//! across token boundaries. This module adapts it to the engine: the model's tokenizer becomes
//! llguidance's token environment (each token's bytes, from the tokenizer's own JSON), compiled
//! grammars are cached by their text (a pipeline sends the same database grammar many times),
//! and [`GrammarConstraint`] is the sampler's [`LogitsConstraint`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};

use crate::logits_constraint::LogitsConstraint;

/// Earley items llguidance may create while computing one token mask (its default is 50,000,
/// about 2.5 ms). A mask walks the whole vocabulary trie, and SQL's vocabulary has tokens made
/// of many one-character lexemes (`((((`, `'),(`) that each start a new parser row; the default
/// gave up on ordinary SQL states. At about 20,000 items per millisecond this bounds a mask at
/// roughly 20 ms; typical masks stay near a millisecond.
const MASK_MAX_ITEMS: usize = 400_000;

/// Compiled grammars kept per model. A text-to-SQL server sees one grammar per database (and
/// per linked sub-schema); beyond this many the cache starts over rather than tracking use.
const GRAMMAR_CACHE_ENTRIES: usize = 256;

/// The language a grammar is written in, as clients of structured-output APIs spell them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GrammarSpec {
    /// llguidance's Lark dialect (an Earley grammar with regex terminals).
    Lark(String),
    /// A regular expression the whole output must match.
    Regex(String),
    /// A JSON schema (its JSON text) the output must be an instance of.
    JsonSchema(String),
}

impl GrammarSpec {
    fn to_top_level(&self) -> Result<TopLevelGrammar, GrammarError> {
        Ok(match self {
            GrammarSpec::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            GrammarSpec::Regex(rx) => TopLevelGrammar::from_regex(rx),
            GrammarSpec::JsonSchema(text) => {
                let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    GrammarError::Invalid(format!("the JSON schema is not JSON: {e}"))
                })?;
                TopLevelGrammar::from_json_schema(value)
            }
        })
    }
}

/// A grammar for one request, with the part of the answer the prompt already wrote (the
/// pipeline starts SQL answers with ```` ```sql\nSELECT ````): the constraint reads it before the
/// first generated token, so the grammar describes the whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grammar {
    pub spec: GrammarSpec,
    pub written: String,
}

impl Grammar {
    pub fn new(spec: GrammarSpec) -> Self {
        Self {
            spec,
            written: String::new(),
        }
    }

    pub fn after(mut self, written: impl Into<String>) -> Self {
        self.written = written.into();
        self
    }
}

/// Why a grammar could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// The grammar does not compile, or the text already written does not fit it.
    #[error("invalid grammar: {0}")]
    Invalid(String),
    /// The model's tokenizer cannot be described to the grammar engine.
    #[error("this model cannot be constrained: {0}")]
    Unsupported(String),
}

/// Where a text leaves a grammar, as [`GrammarCompiler::check`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarRejection {
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    /// A token the grammar does not allow after the text before it.
    #[error("rejected after {upto:?}: {why}")]
    Token { upto: String, why: String },
    #[error("the text ends before the grammar allows")]
    Unfinished,
    /// The grammar engine could not tell.
    #[error("{0}")]
    Matcher(String),
}

/// The model's tokenizer as llguidance sees it: each token's bytes, and tokenization through
/// the real tokenizer (used for the already-written text).
struct ModelTokEnv {
    trie: TokTrie,
    tokenizer: Arc<tokenizers::Tokenizer>,
}

impl TokenizerEnv for ModelTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        let text = String::from_utf8_lossy(s);
        match self.tokenizer.encode(text.as_ref(), false) {
            Ok(enc) => enc.get_ids().to_vec(),
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// Compiles grammars for one tokenizer and hands out a fresh constraint per sequence.
pub struct GrammarCompiler {
    factory: ParserFactory,
    eos_ids: Arc<[u32]>,
    /// Compiled grammar (with its written text read) → a matcher in that start state.
    cache: Mutex<HashMap<Grammar, Matcher>>,
}

impl std::fmt::Debug for GrammarCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarCompiler")
            .field(
                "vocab_size",
                &self.factory.tok_env().tok_trie().vocab_size(),
            )
            .finish()
    }
}

impl GrammarCompiler {
    /// For a model: `vocab_size` is the width of its logits rows (often larger than the
    /// tokenizer's vocabulary; the extra ids have no bytes and are never allowed).
    pub fn for_tokenizer(
        tokenizer: Arc<tokenizers::Tokenizer>,
        vocab_size: usize,
        eos_ids: &[u32],
    ) -> Result<Self, GrammarError> {
        let unsupported = |e: String| GrammarError::Unsupported(e);
        let json = tokenizer
            .to_string(false)
            .map_err(|e| unsupported(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| unsupported(e.to_string()))?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&json)
            .map_err(|e| unsupported(e.to_string()))?;
        let vocab_size = vocab_size.max(words.len());
        words.resize(vocab_size, Vec::new());
        let eos = *eos_ids
            .first()
            .ok_or_else(|| unsupported("the model has no end-of-sequence token".into()))?;
        let info = TokRxInfo::new(
            u32::try_from(vocab_size).map_err(|e| unsupported(e.to_string()))?,
            eos,
        );
        let env: TokEnv = Arc::new(ModelTokEnv {
            trie: TokTrie::from(&info, &words),
            tokenizer,
        });
        Self::with_env(env, eos_ids)
    }

    /// Each byte is a token: the grammar then accepts exactly the texts it describes, whatever
    /// a model's tokenizer would make of them. For checking texts against a grammar.
    pub fn for_bytes() -> Result<Self, GrammarError> {
        let env = ApproximateTokEnv::single_byte_env();
        let eos = env.tok_trie().eos_token();
        Self::with_env(env, &[eos])
    }

    fn with_env(env: TokEnv, eos_ids: &[u32]) -> Result<Self, GrammarError> {
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| GrammarError::Unsupported(e.to_string()))?;
        // Grammar warnings and errors reach the caller as values; nothing is printed.
        factory.quiet();
        factory.limits_mut().step_max_items = MASK_MAX_ITEMS;
        Ok(Self {
            factory,
            eos_ids: eos_ids.into(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// A matcher for `grammar`, in the state after its written text.
    fn start_matcher(&self, grammar: &Grammar) -> Result<Matcher, GrammarError> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = cache.get(grammar) {
            return Ok(m.deep_clone());
        }
        drop(cache);
        let top = grammar.spec.to_top_level()?;
        let parser = self
            .factory
            .create_parser(top)
            .map_err(|e| GrammarError::Invalid(e.to_string()))?;
        let mut matcher = Matcher::new(Ok(parser));
        if !grammar.written.is_empty() {
            let tokens = self
                .factory
                .tok_env()
                .tokenize_bytes(grammar.written.as_bytes());
            matcher.consume_tokens(&tokens).map_err(|e| {
                GrammarError::Invalid(format!(
                    "the answer's start {:?} does not fit the grammar: {e}",
                    grammar.written
                ))
            })?;
        }
        if let Some(e) = matcher.get_error() {
            return Err(GrammarError::Invalid(e));
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= GRAMMAR_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(grammar.clone(), matcher.deep_clone());
        Ok(matcher)
    }

    /// A constraint for one sequence. Fails on a grammar that does not compile, so a request
    /// with a bad grammar is refused at submit.
    pub fn constraint(&self, grammar: &Grammar) -> Result<GrammarConstraint, GrammarError> {
        Ok(GrammarConstraint {
            matcher: self.start_matcher(grammar)?,
            eos_ids: self.eos_ids.clone(),
            failure: None,
            mask_times: Vec::new(),
        })
    }

    /// Whether `text` (after the grammar's written text) is a whole sentence of the grammar;
    /// `Err` says where it leaves it. Meaningful with [`GrammarCompiler::for_bytes`].
    pub fn check(&self, grammar: &Grammar, text: &str) -> Result<(), GrammarRejection> {
        let mut matcher = self.start_matcher(grammar)?;
        let tokens = self.factory.tok_env().tokenize_bytes(text.as_bytes());
        for (i, &t) in tokens.iter().enumerate() {
            if let Err(e) = matcher.consume_token(t) {
                let upto = self.factory.tok_env().tok_trie().decode_str(&tokens[..i]);
                // llguidance appends a dump of its state; the first line says what failed.
                let e = e.to_string();
                let why = e.lines().next().unwrap_or_default();
                return Err(GrammarRejection::Token {
                    upto,
                    why: why.to_owned(),
                });
            }
        }
        match matcher.is_accepting() {
            Ok(true) => Ok(()),
            Ok(false) => Err(GrammarRejection::Unfinished),
            Err(e) => Err(GrammarRejection::Matcher(e.to_string())),
        }
    }
}

/// The grammar state of one sequence.
pub struct GrammarConstraint {
    matcher: Matcher,
    eos_ids: Arc<[u32]>,
    /// Set when llguidance failed mid-generation (a parser limit, an internal error): the
    /// sequence then continues unconstrained rather than failing, and says so.
    failure: Option<String>,
    /// How long each mask took, for the cost figures.
    mask_times: Vec<Duration>,
}

impl std::fmt::Debug for GrammarConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarConstraint")
            .field("failure", &self.failure)
            .finish()
    }
}

impl GrammarConstraint {
    /// The time each mask took so far.
    pub fn mask_times(&self) -> &[Duration] {
        &self.mask_times
    }

    /// Whether the text so far is a whole sentence of the grammar.
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }

    fn allow_only_eos(&self, logits: &mut [f32]) {
        for (i, l) in logits.iter_mut().enumerate() {
            if !self.eos_ids.iter().any(|&e| e as usize == i) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

impl LogitsConstraint for GrammarConstraint {
    fn mask(&mut self, _generated: &[u32], logits: &mut [f32]) {
        if self.failure.is_some() {
            return;
        }
        let started = Instant::now();
        if self.matcher.is_stopped() && !self.matcher.is_error() {
            // The grammar is complete: only ending is left.
            self.allow_only_eos(logits);
            self.mask_times.push(started.elapsed());
            return;
        }
        match self.matcher.compute_mask() {
            Ok(allowed) => {
                let ends = self
                    .eos_ids
                    .iter()
                    .any(|&e| (e as usize) < allowed.len() && allowed.is_allowed(e));
                // The grammar engine knows one end token; where it may end, every end token of
                // the model may, with its logit unchanged.
                let eos_logits: Vec<(usize, f32)> = self
                    .eos_ids
                    .iter()
                    .filter_map(|&e| logits.get(e as usize).map(|l| (e as usize, *l)))
                    .collect();
                for (i, l) in logits.iter_mut().enumerate() {
                    if !(i < allowed.len() && allowed.get(i)) {
                        *l = f32::NEG_INFINITY;
                    }
                }
                if ends {
                    for (i, l) in eos_logits {
                        logits[i] = l;
                    }
                }
            }
            Err(e) => self.failure = Some(e.to_string()),
        }
        self.mask_times.push(started.elapsed());
    }

    fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    fn commit(&mut self, token: u32) {
        if self.failure.is_some() || self.eos_ids.contains(&token) {
            return;
        }
        if let Err(e) = self.matcher.consume_token(token) {
            self.failure = Some(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lark(text: &str) -> Grammar {
        Grammar::new(GrammarSpec::Lark(text.into()))
    }

    #[test]
    fn byte_checks_accept_exactly_the_language() {
        let c = GrammarCompiler::for_bytes().expect("compiler");
        let g = lark("start: \"select\"i NUM (\",\" NUM)*\nNUM: /[0-9]+/\n%ignore /[ ]+/\n");
        assert_eq!(c.check(&g, "SELECT 1, 22"), Ok(()));
        assert!(c.check(&g, "SELECT 1,").is_err());
        assert!(c.check(&g, "SELECT x").is_err());
        let after = g.clone().after("select ");
        assert_eq!(c.check(&after, "3"), Ok(()));
    }

    #[test]
    fn a_malformed_grammar_is_invalid() {
        let c = GrammarCompiler::for_bytes().expect("compiler");
        let err = c.constraint(&lark("start: (")).expect_err("must fail");
        assert!(matches!(err, GrammarError::Invalid(_)), "{err}");
        let err = c
            .constraint(&Grammar::new(GrammarSpec::JsonSchema("{not json".into())))
            .expect_err("must fail");
        assert!(matches!(err, GrammarError::Invalid(_)), "{err}");
        let err = c
            .constraint(&lark("start: \"a\"").after("b"))
            .expect_err("written text outside the grammar");
        assert!(err.to_string().contains("does not fit"), "{err}");
    }

    #[test]
    fn the_mask_allows_only_continuations_and_eos_at_the_end() {
        let c = GrammarCompiler::for_bytes().expect("compiler");
        let mut k = c
            .constraint(&Grammar::new(GrammarSpec::Regex("ab".into())))
            .expect("compiles");
        let vocab = 262; // 256 bytes and the test environment's special tokens
        let eos = vocab as u32 - 1;
        let mut logits = vec![0.0f32; vocab];
        k.mask(&[], &mut logits);
        let allowed: Vec<usize> = (0..vocab).filter(|&i| logits[i].is_finite()).collect();
        assert_eq!(allowed, vec![b'a' as usize]);
        k.commit(u32::from(b'a'));
        k.commit(u32::from(b'b'));
        let mut logits = vec![0.0f32; vocab];
        k.mask(&[], &mut logits);
        let allowed: Vec<usize> = (0..vocab).filter(|&i| logits[i].is_finite()).collect();
        assert_eq!(allowed, vec![eos as usize]);
        assert!(k.is_accepting());
        assert_eq!(k.mask_times().len(), 2);
    }

    #[test]
    fn a_token_outside_the_grammar_turns_the_constraint_off_and_says_why() {
        let c = GrammarCompiler::for_bytes().expect("compiler");
        let mut k = c
            .constraint(&Grammar::new(GrammarSpec::Regex("ab".into())))
            .expect("compiles");
        k.commit(u32::from(b'z'));
        assert!(k.failure().is_some());
        let mut logits = vec![0.0f32; 8];
        k.mask(&[], &mut logits);
        assert!(logits.iter().all(|l| l.is_finite()));
    }
}

//! Draft tokens for speculative decoding by prompt lookup: no draft model, only the text the
//! output is likely to repeat.
//!
//! A SQL answer copies a lot: table and column names from the schema in its prompt, most of
//! an earlier candidate of the same question, the failing query a revision prompt quotes. So
//! the last few tokens of a sequence often occur earlier in a reference (a hint the caller
//! passes, then the sequence's own prompt and output), and the tokens that followed them there
//! are a good guess at what comes next. The model checks every guess in one forward pass and
//! keeps the ones it would have produced itself, so the output does not change.

/// Longest n-gram matched: longer matches are rarer but their continuations are surer.
const MAX_NGRAM: usize = 3;
/// Shortest n-gram matched in the hint. A single token (`,`, ` FROM`) recurs everywhere and
/// predicts little.
const MIN_HINT_NGRAM: usize = 2;
/// Shortest n-gram matched in the sequence itself: its prompt is mostly schema and question,
/// which an answer follows for fewer tokens than it follows a hint (on the default pipeline,
/// about 18% of drafts from two-token matches there were kept, 33% from three-token ones and
/// 55-60% from the hint's; docs/RESULTS.md).
const MIN_SEQUENCE_NGRAM: usize = 3;

/// A request's speculative decoding: where drafts come from and how many one step may check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftSource {
    /// Tokens the output is likely to repeat, searched before the sequence itself.
    pub hint: Vec<u32>,
    /// Draft tokens checked per step at most.
    pub max_draft: usize,
}

impl DraftSource {
    /// Drafts for a sequence whose prompt and output so far are `tokens`.
    pub fn propose(&self, tokens: &[u32], max_draft: usize) -> Vec<u32> {
        propose(tokens, &self.hint, max_draft.min(self.max_draft))
    }
}

/// Up to `max_draft` tokens that may follow `tokens` (a sequence's prompt and output so far),
/// taken from the latest earlier place where the sequence's last n tokens occur: in `hint`
/// (longer n first), then in `tokens` itself. Empty when nothing matches.
pub fn propose(tokens: &[u32], hint: &[u32], max_draft: usize) -> Vec<u32> {
    if max_draft == 0 {
        return Vec::new();
    }
    let hint_matches = (MIN_HINT_NGRAM..=MAX_NGRAM)
        .rev()
        .map(|n| (n, hint, hint.len()));
    // In the sequence, any occurrence but the tail itself.
    let own_matches = (MIN_SEQUENCE_NGRAM..=MAX_NGRAM)
        .rev()
        .map(|n| (n, tokens, tokens.len().saturating_sub(1)));
    for (n, source, searched) in hint_matches.chain(own_matches) {
        if tokens.len() < n {
            continue;
        }
        let tail = &tokens[tokens.len() - n..];
        if let Some(draft) = continuation(&source[..searched], source, tail, max_draft) {
            return draft;
        }
    }
    Vec::new()
}

/// The tokens after the latest occurrence of `tail` that starts in `searched`, read from
/// `source` (so a continuation may run past `searched`), when at least one follows.
fn continuation(searched: &[u32], source: &[u32], tail: &[u32], max: usize) -> Option<Vec<u32>> {
    let n = tail.len();
    (0..searched.len().saturating_sub(n - 1))
        .rev()
        .filter(|&at| at + n < source.len())
        .find(|&at| &source[at..at + n] == tail)
        .map(|at| source[at + n..(at + n + max).min(source.len())].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_is_read_first_and_longer_matches_win() {
        // Sequence ends in 7 8; the hint continues 7 8 with 9 10 11.
        let tokens = [1, 7, 8, 2, 3, 7, 8];
        assert_eq!(propose(&tokens, &[5, 7, 8, 9, 10, 11], 2), vec![9, 10]);
        // Without a hint, a two-token match in the sequence itself is not enough...
        assert!(propose(&tokens, &[], 8).is_empty());
        // ...a three-token one is: 3 7 8 recurs, followed by 4 5.
        let tokens = [3, 7, 8, 4, 5, 3, 7, 8];
        assert_eq!(propose(&tokens, &[], 8), vec![4, 5, 3, 7, 8]);
        // A trigram match beats a later bigram one.
        let tokens = [4, 5, 6, 20, 9, 5, 6, 30, 4, 5, 6];
        assert_eq!(propose(&tokens, &[], 1), vec![20]);
    }

    #[test]
    fn the_latest_occurrence_is_used() {
        let hint = [1, 2, 3, 1, 2, 4, 1, 2];
        assert_eq!(propose(&[9, 1, 2], &hint, 3), vec![4, 1, 2]);
        let tokens = [1, 2, 3, 9, 1, 2, 3, 4, 1, 2, 3];
        assert_eq!(propose(&tokens, &[], 3), vec![4, 1, 2]);
    }

    #[test]
    fn no_match_no_single_token_match_and_no_room_give_nothing() {
        assert!(propose(&[1, 2, 3, 4], &[9, 9], 4).is_empty());
        // Only the last token recurs: one token predicts too little.
        assert!(propose(&[5, 1], &[7, 1, 6], 4).is_empty());
        assert!(propose(&[1, 2, 1, 2], &[], 0).is_empty());
        assert!(propose(&[1], &[1, 2], 4).is_empty());
        // The tail at the very end of the hint has nothing after it.
        assert!(propose(&[3, 1, 2], &[1, 2], 4).is_empty());
    }
}

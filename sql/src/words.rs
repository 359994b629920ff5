//! Words of questions and schema names as the matchers compare them: tokens with their
//! offsets, singular forms of plurals, schema names split into words, English function words.
//!
//! One home for these, because every rule that meets a question word with a table or column
//! name (masking, linking, relevance, unused joins, grouping keys, the schema filter) must
//! split and singularize both sides the same way, or a plural on one side misses the other.

/// English function words: on their own they name no table, column or cell, so masking neither
/// matches them inside names nor probes them as values, and relevance and term hints skip them.
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how",
    "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most", "my", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "s", "same", "she", "should", "so", "some", "such", "t", "than", "that", "the", "their",
    "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "whose", "why", "will", "with", "you", "your", "yours", "also", "each", "every",
    "us",
];

/// One question token: a run of letters and digits (a decimal number keeps its point) or a
/// single other character.
#[derive(Debug)]
pub(crate) struct Token<'q> {
    pub start: usize,
    pub text: &'q str,
    pub lemma: String,
    pub is_word: bool,
}

pub(crate) fn tokenize(question: &str) -> Vec<Token<'_>> {
    let chars: Vec<(usize, char)> = question.char_indices().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        if c.is_alphanumeric() {
            while j < chars.len() {
                let d = chars[j].1;
                let decimal_point = d == '.'
                    && chars[j - 1].1.is_ascii_digit()
                    && chars.get(j + 1).is_some_and(|n| n.1.is_ascii_digit());
                if d.is_alphanumeric() || decimal_point {
                    j += 1;
                } else {
                    break;
                }
            }
        }
        let end = chars.get(j).map_or(question.len(), |(at, _)| *at);
        let text = &question[start..end];
        tokens.push(Token {
            start,
            text,
            lemma: singular(&text.to_lowercase()),
            is_word: c.is_alphanumeric(),
        });
        i = j;
    }
    tokens
}

/// A plural's singular, roughly: enough for question words to meet schema names, which are
/// mostly singular nouns ("singers" → `singer`, "countries" → `country`, "boxes" → `box`).
pub(crate) fn singular(word: &str) -> String {
    let len = word.chars().count();
    if !word.is_ascii() || len < 3 {
        return word.to_owned();
    }
    if len == 3 {
        // "ids" → "id", but not "has", "yes", "bus", "his".
        let bytes = word.as_bytes();
        return if bytes[2] == b's' && !b"aeiosu".contains(&bytes[1]) {
            word[..2].to_owned()
        } else {
            word.to_owned()
        };
    }
    if let Some(stem) = word.strip_suffix("ies")
        && len > 4
    {
        return format!("{stem}y");
    }
    for suffix in ["sses", "xes", "ches", "shes", "zzes"] {
        if word.ends_with(suffix) {
            return word[..word.len() - 2].to_owned();
        }
    }
    if word.ends_with("ss") || word.ends_with("us") || word.ends_with("is") {
        return word.to_owned();
    }
    word.strip_suffix('s').unwrap_or(word).to_owned()
}

/// Whether a lower-case `word` is one of [`FUNCTION_WORDS`].
pub fn is_function_word(word: &str) -> bool {
    FUNCTION_WORDS.contains(&word)
}

pub(crate) fn is_number(word: &str) -> bool {
    word.parse::<f64>().is_ok()
}

/// A schema name as singular words: `Song_release_year` → `song release year`,
/// `PetType` → `pet type`, `StuID` → `stu id`.
pub(crate) fn name_words(name: &str) -> String {
    split_name(name)
        .iter()
        .map(|w| singular(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A name (or any text) as lower-case words, split at every character that is not a letter or
/// digit and where camel case starts a word: `CustomerOrders` and `customer_orders` both give
/// `customer`, `orders`; `HTMLFile` gives `html`, `file`.
pub(crate) fn split_name(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut spaced = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            spaced.push(' ');
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1);
        let lower_to_upper = c.is_uppercase() && prev.is_some_and(char::is_lowercase);
        let acronym_end = c.is_uppercase()
            && prev.is_some_and(char::is_uppercase)
            && next.is_some_and(|n| n.is_lowercase());
        if lower_to_upper || acronym_end {
            spaced.push(' ');
        }
        spaced.push(c);
    }
    spaced
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether `phrase` occurs in `name` as whole words.
pub(crate) fn contains_phrase(name: &str, phrase: &str) -> bool {
    let padded_name = format!(" {name} ");
    padded_name.contains(&format!(" {phrase} "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_singulars() {
        assert_eq!(name_words("Song_release_year"), "song release year");
        assert_eq!(name_words("PetType"), "pet type");
        assert_eq!(name_words("StuID"), "stu id");
        assert_eq!(name_words("HTMLFile"), "html file");
        assert_eq!(name_words("singer_in_concert"), "singer in concert");
        assert_eq!(split_name("CustomerOrders"), ["customer", "orders"]);
        assert_eq!(split_name("How many singers?"), ["how", "many", "singers"]);
        let singulars = [
            ("singers", "singer"),
            ("countries", "country"),
            ("classes", "class"),
            ("boxes", "box"),
            ("status", "status"),
            ("has", "has"),
            ("ids", "id"),
            ("yes", "yes"),
            ("pets", "pet"),
        ];
        for (word, one) in singulars {
            assert_eq!(singular(word), one, "{word}");
        }
    }

    #[test]
    fn tokenizer_keeps_offsets_and_decimals() {
        let tokens = tokenize("Age>2.5, ok.");
        let texts: Vec<&str> = tokens.iter().map(|t| t.text).collect();
        assert_eq!(texts, ["Age", ">", "2.5", ",", "ok", "."]);
        assert_eq!(tokens[2].start, 4);
        assert!(tokenize("").is_empty());
    }
}

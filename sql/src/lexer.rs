//! The one SQL scanner the text-level passes share (schema repair, skeletons, DISTINCT
//! stripping): lexemes with byte spans, never an error.
//!
//! sqlparser's tokenizer refuses what a model often writes (an unterminated string, a stray
//! quote), and these passes must still work on such text: a repair on a half-broken query is
//! the point. So the scanner is forgiving: an unterminated quote runs to the end, any other
//! character is a one-character symbol, and the lexemes always cover the text but whitespace.

/// What a lexeme is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LexKind {
    /// A run of letters, digits, `_` and `$` that does not start with a digit: a keyword or a
    /// name.
    Word,
    /// A digit (or `.` then a digit) and the letters, digits and dots after it.
    Number,
    /// A run in quotes: `'…'` and `"…"` (a doubled quote inside is an escape), `` `…` `` and
    /// `[…]`. The opening character says which.
    Quoted(char),
    /// `-- …` to the end of the line, or `/* … */`.
    Comment,
    /// An operator or punctuation: one character, or one of the two-character operators.
    Symbol,
}

/// One lexeme: its kind and its byte range in the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lexeme {
    pub kind: LexKind,
    pub start: usize,
    pub end: usize,
}

impl Lexeme {
    /// The lexeme's text in `sql`.
    pub fn text<'s>(&self, sql: &'s str) -> &'s str {
        &sql[self.start..self.end]
    }

    /// A quoted lexeme's text without its quotes (an unterminated one without its opening
    /// quote); other lexemes' text as is.
    pub fn unquoted<'s>(&self, sql: &'s str) -> &'s str {
        let text = self.text(sql);
        let LexKind::Quoted(open) = self.kind else {
            return text;
        };
        let close = closing(open);
        let inner = &text[open.len_utf8()..];
        inner.strip_suffix(close).unwrap_or(inner)
    }
}

const TWO_CHAR_SYMBOLS: [&str; 6] = [">=", "<=", "!=", "<>", "==", "||"];

fn closing(open: char) -> char {
    if open == '[' { ']' } else { open }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Scans `sql` into lexemes, in order; whitespace separates them and is not a lexeme.
pub(crate) fn lex(sql: &str) -> Vec<Lexeme> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = sql[i..].chars().next() {
        let rest = &sql[i..];
        let (kind, len) = if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        } else if rest.starts_with("--") {
            (LexKind::Comment, rest.find('\n').unwrap_or(rest.len()))
        } else if rest.starts_with("/*") {
            (
                LexKind::Comment,
                rest.find("*/").map_or(rest.len(), |e| e + 2),
            )
        } else if matches!(c, '\'' | '"' | '`' | '[') {
            (LexKind::Quoted(c), quoted_len(rest, c))
        } else if c.is_ascii_digit()
            || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit()))
        {
            let len = rest[1..]
                .find(|d: char| !(d.is_ascii_alphanumeric() || d == '.'))
                .map_or(rest.len(), |e| e + 1);
            (LexKind::Number, len)
        } else if is_word_char(c) {
            let len = rest.find(|d: char| !is_word_char(d)).unwrap_or(rest.len());
            (LexKind::Word, len)
        } else {
            let two = TWO_CHAR_SYMBOLS.iter().find(|s| rest.starts_with(**s));
            (LexKind::Symbol, two.map_or(c.len_utf8(), |s| s.len()))
        };
        out.push(Lexeme {
            kind,
            start: i,
            end: i + len,
        });
        i += len;
    }
    out
}

/// Byte length of the quoted run at the start of `s`, quotes included. A doubled closing quote
/// inside `'…'`, `"…"` or `` `…` `` is an escape; an unterminated run takes the rest of `s`.
fn quoted_len(s: &str, open: char) -> usize {
    let close = closing(open);
    let mut i = open.len_utf8();
    while let Some(end) = s[i..].find(close) {
        let after = i + end + close.len_utf8();
        if close != ']' && s[after..].starts_with(close) {
            i = after + close.len_utf8();
            continue;
        }
        return after;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(LexKind, &str)> {
        lex(sql).iter().map(|l| (l.kind, l.text(sql))).collect()
    }

    #[test]
    fn words_numbers_quotes_comments_and_symbols() {
        use LexKind::*;
        assert_eq!(
            kinds("SELECT t1.name, 1.5e3 FROM `a b` WHERE x>='it''s' -- done\n|| [c] /* n */ ;"),
            vec![
                (Word, "SELECT"),
                (Word, "t1"),
                (Symbol, "."),
                (Word, "name"),
                (Symbol, ","),
                (Number, "1.5e3"),
                (Word, "FROM"),
                (Quoted('`'), "`a b`"),
                (Word, "WHERE"),
                (Word, "x"),
                (Symbol, ">="),
                (Quoted('\''), "'it''s'"),
                (Comment, "-- done"),
                (Symbol, "||"),
                (Quoted('['), "[c]"),
                (Comment, "/* n */"),
                (Symbol, ";"),
            ]
        );
    }

    #[test]
    fn unterminated_runs_end_the_text_and_only_blanks_fall_between_lexemes() {
        let sql = "SELECT \"abc FROM t WHERE y = 'é";
        let lexemes = lex(sql);
        let last = lexemes.last().expect("lexemes");
        assert_eq!(last.kind, LexKind::Quoted('"'));
        assert_eq!(last.end, sql.len());
        assert_eq!(last.unquoted(sql), "abc FROM t WHERE y = 'é");
        for text in [sql, "a\t,b  -- x\n  c/*", "  ", "", "x = 'a''b' ||y"] {
            let mut at = 0;
            for l in lex(text) {
                assert!(
                    text[at..l.start].chars().all(char::is_whitespace),
                    "{text:?}"
                );
                assert!(l.end > l.start);
                at = l.end;
            }
            assert!(text[at..].chars().all(char::is_whitespace), "{text:?}");
        }
    }

    #[test]
    fn unquoted_strips_quotes_and_keeps_escapes() {
        let sql = "\"a\"\"b\" [x y] 'o'";
        let texts: Vec<&str> = lex(sql).iter().map(|l| l.unquoted(sql)).collect();
        assert_eq!(texts, vec!["a\"\"b", "x y", "o"]);
    }

    #[test]
    fn multibyte_text_keeps_char_boundaries() {
        let sql = "SELECT nom FROM café WHERE x = «y» AND ü>1";
        let lexemes = lex(sql);
        assert!(lexemes.iter().any(|l| l.text(sql) == "café"));
        assert!(lexemes.iter().any(|l| l.text(sql) == "«"));
        assert!(lexemes.iter().any(|l| l.text(sql) == "ü"));
    }
}

//! The one SQL scanner the text-level passes share (schema repair, skeletons, DISTINCT
//! stripping, and PostgreSQL's function guard): lexemes with byte spans, never an error.
//!
//! sqlparser's tokenizer refuses what a model often writes (an unterminated string, a stray
//! quote), and these passes must still work on such text: a repair on a half-broken query is
//! the point. So the scanner is forgiving: an unterminated quote runs to the end, any other
//! character is a one-character symbol, and the lexemes always cover the text but whitespace.

/// What a lexeme is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexKind {
    /// A run of letters, digits, `_` and `$` that does not start with a digit: a keyword or a
    /// name.
    Word,
    /// A digit (or `.` then a digit) and the letters, digits and dots after it.
    Number,
    /// A run in quotes: `'…'` and `"…"` (a doubled quote inside is an escape), `` `…` `` and
    /// `[…]` (SQLite only); PostgreSQL's `E'…'` (backslash escapes; the lexeme starts at the
    /// `E`) and `$tag$…$tag$` (as `Quoted('$')`). The opening character says which.
    Quoted(char),
    /// `-- …` to the end of the line, or `/* … */`.
    Comment,
    /// An operator or punctuation: one character, or one of the two-character operators.
    Symbol,
}

/// One lexeme: its kind and its byte range in the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lexeme {
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
        if open == '$' {
            let tag_len = text[1..].find('$').map_or(text.len(), |e| e + 2);
            let inner = &text[tag_len.min(text.len())..];
            return inner
                .strip_suffix(&text[..tag_len.min(text.len())])
                .unwrap_or(inner);
        }
        let text = match text.strip_prefix(['E', 'e']) {
            Some(rest) if open == '\'' => rest,
            _ => text,
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

/// Whose quoting rules the scan follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// SQLite's (and what models write for it): `'…'`, `"…"`, `` `…` `` and `[…]`.
    Sqlite,
    /// PostgreSQL's: `'…'`, `"…"`, `E'…'` with backslash escapes and `$tag$…$tag$`; brackets
    /// and backticks are symbols (`ARRAY[…]` is code).
    Postgres,
    /// MySQL's and MariaDB's: `'…'` and `"…"` with backslash escapes, `` `…` `` names, `#`
    /// comments to the end of the line; brackets are symbols.
    MySql,
}

/// Scans `sql` into lexemes with SQLite's quoting ([`lex_with`]).
pub fn lex(sql: &str) -> Vec<Lexeme> {
    lex_with(sql, Quoting::Sqlite)
}

/// Scans `sql` into lexemes, in order; whitespace separates them and is not a lexeme.
pub fn lex_with(sql: &str, quoting: Quoting) -> Vec<Lexeme> {
    let postgres = quoting == Quoting::Postgres;
    let mysql = quoting == Quoting::MySql;
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = sql[i..].chars().next() {
        let rest = &sql[i..];
        let (kind, len) = if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        } else if rest.starts_with("--") || (mysql && c == '#') {
            (LexKind::Comment, rest.find('\n').unwrap_or(rest.len()))
        } else if rest.starts_with("/*") {
            (
                LexKind::Comment,
                rest.find("*/").map_or(rest.len(), |e| e + 2),
            )
        } else if postgres && matches!(c, 'E' | 'e') && rest[1..].starts_with('\'') {
            (
                LexKind::Quoted('\''),
                1 + escaped_quoted_len(&rest[1..], '\''),
            )
        } else if postgres && c == '$' && dollar_tag_len(rest).is_some() {
            (LexKind::Quoted('$'), dollar_quoted_len(rest))
        } else if mysql && matches!(c, '\'' | '"') {
            (LexKind::Quoted(c), escaped_quoted_len(rest, c))
        } else if matches!(c, '\'' | '"')
            || (c == '`' && quoting != Quoting::Postgres)
            || (c == '[' && quoting == Quoting::Sqlite)
        {
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

/// Byte length of a run quoted by `quote` in which a backslash escapes the next character and
/// a doubled quote is a quote (PostgreSQL's `E'…'`, MySQL's strings).
fn escaped_quoted_len(s: &str, quote: char) -> usize {
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            c if c == quote && chars.peek().is_some_and(|&(_, n)| n == quote) => {
                chars.next();
            }
            c if c == quote => return i + quote.len_utf8(),
            _ => {}
        }
    }
    s.len()
}

/// The length of a dollar-quote tag (`$$` or `$name$`) at the start of `s`, if one is there: a
/// `$` then an optional identifier that does not start with a digit, then `$` (`$1` is a
/// parameter).
fn dollar_tag_len(s: &str) -> Option<usize> {
    let end = s[1..].find('$')? + 1;
    let tag = &s[1..end];
    let identifier = tag.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !tag.starts_with(|c: char| c.is_ascii_digit());
    identifier.then_some(end + 1)
}

/// Byte length of the dollar-quoted run at the start of `s`, to its closing tag or the end.
fn dollar_quoted_len(s: &str) -> usize {
    let tag_len = dollar_tag_len(s).expect("called at a dollar tag");
    let tag = &s[..tag_len];
    s[tag_len..]
        .find(tag)
        .map_or(s.len(), |close| tag_len + close + tag_len)
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

    #[test]
    fn postgres_quoting_knows_escape_strings_dollar_quotes_and_brackets_as_code() {
        use LexKind::*;
        let sql = r"SELECT E'a\'b', $f$x'y$f$, ARRAY[1] FROM t WHERE c = $1";
        let kinds: Vec<(LexKind, &str)> = lex_with(sql, Quoting::Postgres)
            .iter()
            .map(|l| (l.kind, l.text(sql)))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Word, "SELECT"),
                (Quoted('\''), r"E'a\'b'"),
                (Symbol, ","),
                (Quoted('$'), "$f$x'y$f$"),
                (Symbol, ","),
                (Word, "ARRAY"),
                (Symbol, "["),
                (Number, "1"),
                (Symbol, "]"),
                (Word, "FROM"),
                (Word, "t"),
                (Word, "WHERE"),
                (Word, "c"),
                (Symbol, "="),
                (Word, "$1"),
            ]
        );
        let lexemes = lex_with(sql, Quoting::Postgres);
        assert_eq!(lexemes[1].unquoted(sql), r"a\'b");
        assert_eq!(lexemes[3].unquoted(sql), "x'y");
        // SQLite's scan of the same text treats the bracket as a quoted name.
        assert!(lex(sql).iter().any(|l| l.kind == Quoted('[')));
    }

    #[test]
    fn mysql_quoting_knows_backslash_escapes_backtick_names_and_hash_comments() {
        use LexKind::*;
        let sql = "SELECT 'a\\'b', \"c\\\"d\", `my col` FROM t # SLEEP(1)\nWHERE x = [1]";
        let kinds: Vec<(LexKind, &str)> = lex_with(sql, Quoting::MySql)
            .iter()
            .map(|l| (l.kind, l.text(sql)))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Word, "SELECT"),
                (Quoted('\''), "'a\\'b'"),
                (Symbol, ","),
                (Quoted('"'), "\"c\\\"d\""),
                (Symbol, ","),
                (Quoted('`'), "`my col`"),
                (Word, "FROM"),
                (Word, "t"),
                (Comment, "# SLEEP(1)"),
                (Word, "WHERE"),
                (Word, "x"),
                (Symbol, "="),
                (Symbol, "["),
                (Number, "1"),
                (Symbol, "]"),
            ]
        );
        // SQLite's scan ends the first string at the escaped quote.
        assert_ne!(lex(sql)[1].text(sql), "'a\\'b'");
    }
}

//! Which statements of a question's evidence (and its database's notes) the prompts are told.
//!
//! Analysts write glossaries: many definitions ("TAC = total active customers who joined
//! recently"), recipes ("To get the success rate per customer, join ..."), and rules ("Always
//! join sales with cars first"). A question uses one or two of them; the others are not
//! neutral, because a small model applies what it is told, so an unasked ratio's formula ends
//! up in a query that never asked for it. The evidence is cut into statements, each is
//! classified, and a statement is told when the question calls for it:
//!
//! - a **definition** (`TERM = …`, `ACRONYM: …`, `ACRONYM (spelled out) = …`, a sentence that
//!   starts with an acronym) when the question uses its term: the acronym (any case from three
//!   letters, or with a plural `s`), its spelled-out name, the words of a short term ("Last 30
//!   days"), or the noun phrase the definition opens with ("Total Active Customers");
//! - a **purpose** ("To get X, …") when the question shares at least half of X's content words;
//! - a **rule** (anything else) always;
//! - a definition that a told statement names, always (a recipe that uses an acronym needs it).
//!
//! Evidence with nothing to set aside is returned as written, so prompts without a glossary are
//! unchanged. The rules are syntactic and name no domain: they read how glossaries are written.

use crate::words::{is_function_word, tokenize};

/// The evidence as the prompts are told it, and what was left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilteredEvidence {
    /// The statements told, in their order; `None` when nothing is left.
    pub told: Option<String>,
    /// The statements set aside, in their order.
    pub set_aside: Vec<String>,
}

/// What a statement is, for deciding whether to tell it.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Defines these terms: acronyms (matched as tokens) and phrases (matched by their words).
    Definition {
        acronyms: Vec<String>,
        phrases: Vec<String>,
    },
    /// Says how to get what its goal names.
    Purpose { goal: String },
    /// Anything else: told to every question.
    Rule,
}

#[derive(Debug, Clone, PartialEq)]
struct Statement {
    text: String,
    kind: Kind,
}

/// Words at the start of a sentence that begin a new statement even inside a line without a
/// period ("... sum the amounts To analyze stock performance, ...").
const OPENERS: &[&str] = &[
    "To ", "If ", "Always ", "When ", "Never ", "Do not ", "Note ",
];

/// Verbs a purpose opens with; they say nothing about what it is for.
const PURPOSE_VERBS: &[&str] = &[
    "get",
    "calculate",
    "compute",
    "determine",
    "find",
    "identify",
    "analyze",
    "analyse",
    "assess",
    "examine",
    "discover",
    "obtain",
    "measure",
    "evaluate",
    "know",
    "see",
    "check",
    "show",
    "return",
    "list",
    "retrieve",
    "understand",
    "track",
    "per",
    "specific",
    "certain",
    "given",
    "particular",
    "respective",
    "relevant",
];

/// Where the noun phrase a definition opens with ends.
const PHRASE_ENDS: &[&str] = &[
    " who ",
    " which ",
    " that ",
    " where ",
    " with ",
    " based ",
    " for ",
    " in ",
    " over ",
    " within ",
    " from ",
    " by ",
    " divided ",
    " is ",
    " are ",
];

/// Words of a defined term at most: past this a head before `=` is a sentence, not a term.
const MAX_TERM_WORDS: usize = 5;

/// Cuts `evidence` down to what `question` calls for.
pub fn filter_evidence(question: &str, evidence: &str) -> FilteredEvidence {
    let statements = statements(evidence);
    if statements.is_empty() {
        return FilteredEvidence::default();
    }
    let told = told(question, &statements);
    if told.iter().all(|&t| t) {
        return FilteredEvidence {
            told: Some(evidence.trim().to_owned()),
            set_aside: Vec::new(),
        };
    }
    let mut kept = Vec::new();
    let mut set_aside = Vec::new();
    for (statement, told) in statements.into_iter().zip(told) {
        if told {
            kept.push(statement.text);
        } else {
            set_aside.push(statement.text);
        }
    }
    FilteredEvidence {
        told: (!kept.is_empty()).then(|| kept.join("\n")),
        set_aside,
    }
}

/// Whether `question` is told anything of `text` (a database note): a note of definitions the
/// question does not use says nothing to it.
pub fn tells_anything(question: &str, text: &str) -> bool {
    let statements = statements(text);
    told(question, &statements).into_iter().any(|t| t)
}

/// Which statements to tell: the ones the question calls for, then the definitions that those
/// name, until nothing more is added.
fn told(question: &str, statements: &[Statement]) -> Vec<bool> {
    let asked = Asked::new(question);
    let mut told: Vec<bool> = statements.iter().map(|s| asked.calls_for(s)).collect();
    loop {
        let mut added = false;
        for i in 0..statements.len() {
            if told[i] {
                continue;
            }
            let Kind::Definition { acronyms, .. } = &statements[i].kind else {
                continue;
            };
            let named = statements
                .iter()
                .zip(&told)
                .any(|(s, &t)| t && acronyms.iter().any(|a| names_acronym(&s.text, a)));
            if named {
                told[i] = true;
                added = true;
            }
        }
        if !added {
            return told;
        }
    }
}

/// The question's words as the statements are matched against them.
struct Asked {
    /// Tokens as written, for acronyms.
    tokens: Vec<String>,
    /// Singular lower-case words.
    lemmas: Vec<String>,
}

impl Asked {
    fn new(question: &str) -> Self {
        let words: Vec<_> = tokenize(question)
            .into_iter()
            .filter(|t| t.is_word)
            .collect();
        Self {
            tokens: words.iter().map(|t| t.text.to_owned()).collect(),
            lemmas: words.into_iter().map(|t| t.lemma).collect(),
        }
    }

    fn calls_for(&self, statement: &Statement) -> bool {
        match &statement.kind {
            Kind::Rule => true,
            Kind::Definition { acronyms, phrases } => {
                acronyms.iter().any(|a| self.uses_acronym(a))
                    || phrases.iter().any(|p| self.uses_phrase(p))
            }
            Kind::Purpose { goal } => {
                let goal = content_lemmas(goal);
                let shared = goal.iter().filter(|w| self.lemmas.contains(w)).count();
                !goal.is_empty() && 2 * shared >= goal.len()
            }
        }
    }

    /// The acronym as a token: exactly, with a plural `s`, or in any case from three letters
    /// ("cpur" is still CPUR; "ar" is too often something else).
    fn uses_acronym(&self, acronym: &str) -> bool {
        self.tokens.iter().any(|t| {
            let bare = t.strip_suffix('s').filter(|b| b.len() >= 2).unwrap_or(t);
            t == acronym
                || bare == acronym
                || (acronym.len() >= 3
                    && (t.eq_ignore_ascii_case(acronym) || bare.eq_ignore_ascii_case(acronym)))
        })
    }

    /// Every content word of the phrase is a word of the question.
    fn uses_phrase(&self, phrase: &str) -> bool {
        let words = content_lemmas(phrase);
        !words.is_empty() && words.iter().all(|w| self.lemmas.contains(w))
    }
}

/// Whether `text` names `acronym` as a token.
fn names_acronym(text: &str, acronym: &str) -> bool {
    tokenize(text).iter().any(|t| t.text == acronym)
}

/// Singular lower-case words of `text`, without function words and purpose verbs.
fn content_lemmas(text: &str) -> Vec<String> {
    let mut lemmas: Vec<String> = tokenize(text)
        .into_iter()
        .filter(|t| t.is_word)
        .map(|t| t.lemma)
        .filter(|w| !is_function_word(w) && !PURPOSE_VERBS.contains(&w.as_str()))
        .collect();
    lemmas.dedup();
    lemmas
}

/// An acronym: letters and digits, a capital first, at least two capitals, no SQL keyword
/// (`ID`, `ILIKE` name no business term).
fn is_acronym(word: &str) -> bool {
    let capitals = word.chars().filter(char::is_ascii_uppercase).count();
    word.len() >= 2
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.starts_with(|c: char| c.is_ascii_uppercase())
        && capitals >= 2
        && 2 * capitals >= word.chars().filter(char::is_ascii_alphabetic).count()
        && !is_sql_word(word)
}

fn is_sql_word(word: &str) -> bool {
    let upper = word.to_ascii_uppercase();
    upper == "CTE" || sqlparser::keywords::ALL_KEYWORDS.contains(&upper.as_str())
}

/// The statements of `evidence`: lines cut at sentence ends and where a new statement starts
/// without a period; a sentence that opens nothing new continues the statement before it.
fn statements(evidence: &str) -> Vec<Statement> {
    let mut statements: Vec<Statement> = Vec::new();
    for line in evidence.lines() {
        let mut first = true;
        for piece in pieces(line) {
            let kind = classify(&piece);
            let opens = first || kind != Kind::Rule || starts_with_opener(&piece);
            first = false;
            match statements.last_mut() {
                Some(last) if !opens => {
                    last.text.push(' ');
                    last.text.push_str(&piece);
                }
                _ => statements.push(Statement { text: piece, kind }),
            }
        }
    }
    statements
}

fn starts_with_opener(text: &str) -> bool {
    OPENERS.iter().any(|o| text.starts_with(o))
}

/// A line cut into sentences, and cut again before an opener or a definition's head that
/// follows a word with no punctuation between.
fn pieces(line: &str) -> Vec<String> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut cuts = vec![0];
    for (i, &(at, c)) in chars.iter().enumerate() {
        if c != ' ' || i == 0 {
            continue;
        }
        let rest = &line[at + 1..];
        if !rest.starts_with(|n: char| n.is_uppercase()) {
            continue;
        }
        let prev = chars[i - 1].1;
        // "To find the ASP = ...": a head after a function word is the sentence's object.
        let prev_word = line[..at].rsplit(' ').next().unwrap_or("");
        if is_function_word(&prev_word.to_lowercase()) {
            continue;
        }
        let sentence_end =
            matches!(prev, '.' | ';' | '?' | '!') && !ends_with_abbreviation(&line[..at]);
        // Only a head with its `=` or `:` starts a statement mid-sentence: an acronym before a
        // lowercase word ("the average PASI score") is how sentences use terms.
        let run_on = (prev.is_alphanumeric() || prev == ')' || prev == '\'')
            && (starts_with_opener(rest) || term_head(rest).is_some());
        if sentence_end || run_on {
            cuts.push(at + 1);
        }
    }
    cuts.push(line.len());
    cuts.windows(2)
        .map(|w| line[w[0]..w[1]].trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn ends_with_abbreviation(text: &str) -> bool {
    let lower = text.to_lowercase();
    ["e.g.", "i.e.", "eg.", "etc.", "vs."]
        .iter()
        .any(|a| lower.ends_with(a))
}

fn classify(text: &str) -> Kind {
    if let Some(goal) = text.strip_prefix("To ")
        && goal.starts_with(|c: char| c.is_lowercase())
    {
        // "To find the ASP = Average Sale Price ...": a definition in a purpose's words.
        let object = goal
            .split_once(' ')
            .map(|(_, rest)| rest.trim_start_matches("the ").trim_start_matches("a "));
        if let Some(definition) = object.and_then(term_head) {
            return definition;
        }
        let goal = goal.split([',', ';']).next().unwrap_or(goal);
        let goal: Vec<&str> = goal.split_whitespace().take(10).collect();
        return Kind::Purpose {
            goal: goal.join(" "),
        };
    }
    definition_head(text).unwrap_or(Kind::Rule)
}

/// The terms a definition at the start of `text` defines, if it starts with one.
fn definition_head(text: &str) -> Option<Kind> {
    if let Some(kind) = term_head(text) {
        return Some(kind);
    }
    let words: Vec<&str> = text.split(' ').collect();
    // "For DDD, divide ..." and "PI calculates ...": an acronym opens the sentence.
    if let [first, second, ..] = words.as_slice() {
        if *first == "For"
            && let Some(acronym) = second.strip_suffix(',')
            && is_acronym(acronym)
        {
            return Some(definition(vec![acronym.to_owned()], Vec::new(), ""));
        }
        if is_acronym(first) && second.starts_with(|c: char| c.is_lowercase()) {
            return Some(definition(vec![(*first).to_owned()], Vec::new(), ""));
        }
    }
    // "The Defined Daily Dose (DDD) is ...": a name and its acronym open the sentence.
    let named = words.iter().take(MAX_TERM_WORDS + 2).position(|w| {
        w.strip_prefix('(')
            .and_then(|w| w.trim_end_matches([',', '.']).strip_suffix(')'))
            .is_some_and(is_acronym)
    })?;
    let acronym = words[named].trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let name = words[..named].join(" ");
    Some(definition(vec![acronym.to_owned()], vec![name], ""))
}

/// `TERM [(spelled out)] = body` or `ACRONYM [(spelled out)]: body` at the start of `text`.
fn term_head(text: &str) -> Option<Kind> {
    let separator = text.find(['=', ':'])?;
    let (head, body) = (&text[..separator], &text[separator + 1..]);
    let colon = text[separator..].starts_with(':');
    let (term, spelled) = match head.find('(') {
        Some(open) => {
            let close = head
                .rfind(')')
                .filter(|&c| c > open && head[c + 1..].trim().is_empty())?;
            (head[..open].trim(), Some(head[open + 1..close].trim()))
        }
        None => (head.trim(), None),
    };
    let term_words: Vec<&str> = term.split_whitespace().collect();
    if term_words.is_empty()
        || term_words.len() > MAX_TERM_WORDS
        || !term_words.iter().all(|w| {
            w.chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '\'')
        })
        || !term.starts_with(|c: char| c.is_uppercase())
    {
        return None;
    }
    let mut acronyms = Vec::new();
    let mut phrases = Vec::new();
    match term_words.as_slice() {
        [one] if is_acronym(one) => acronyms.push((*one).to_owned()),
        // A colon after words ("Note: ...") labels a sentence; it defines no term. Nor does
        // code: a term's `=` stands apart (`Last 7 days = ...`, not `status=1`).
        _ if colon || !head.ends_with(char::is_whitespace) => return None,
        _ => phrases.push(term.to_owned()),
    }
    // "Net Profit Margin (NPM) = ...": the acronym in parentheses.
    match spelled {
        Some(inner) if is_acronym(inner) => acronyms.push(inner.to_owned()),
        Some(inner) if !inner.is_empty() => phrases.push(inner.to_owned()),
        _ => {}
    }
    Some(definition(acronyms, phrases, body))
}

/// A definition of these terms; an acronym's definition also stands for the noun phrase its
/// body opens with ("TAC = Total Active Customers who ..." answers "total active customers").
fn definition(acronyms: Vec<String>, mut phrases: Vec<String>, body: &str) -> Kind {
    if !acronyms.is_empty() {
        let padded = format!(" {} ", body.trim());
        let end = PHRASE_ENDS
            .iter()
            .filter_map(|e| padded.find(e))
            .chain(padded.find([',', '.', ';', ':', '(', '/', '*']))
            .min()
            .unwrap_or(padded.len());
        let lead = padded[..end].trim();
        let words = content_lemmas(lead).len();
        if (2..=MAX_TERM_WORDS).contains(&words) {
            phrases.push(lead.to_owned());
        }
    }
    Kind::Definition { acronyms, phrases }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's glossary, written the way analysts write them: run-on, mixed forms.
    const GLOSSARY: &str = "OLR = overdue loan rate, the share of loans returned after their due date \
        To get the loans per member, join members and loans, group by member ID \
        BPM (Books Per Member) = number of loans divided by number of members. \
        Always join loans with books before using the loans table.\n\
        Last 7 days = CURRENT_DATE - INTERVAL '7 days' to CURRENT_DATE. \
        ARL: Average Reading Length in days, from checkout to return.";

    fn told(question: &str) -> FilteredEvidence {
        filter_evidence(question, GLOSSARY)
    }

    #[test]
    fn statements_are_cut_at_sentences_and_run_on_heads() {
        let texts: Vec<String> = statements(GLOSSARY).into_iter().map(|s| s.text).collect();
        assert_eq!(texts.len(), 6, "{texts:#?}");
        assert!(texts[0].starts_with("OLR = ") && texts[0].ends_with("due date"));
        assert!(texts[1].starts_with("To get the loans per member"));
        assert!(texts[2].starts_with("BPM (Books Per Member)"));
        assert!(texts[3].starts_with("Always join"));
        assert!(texts[4].starts_with("Last 7 days"));
        assert!(texts[5].starts_with("ARL:"));
    }

    #[test]
    fn statements_are_classified() {
        let kinds: Vec<Kind> = statements(GLOSSARY).into_iter().map(|s| s.kind).collect();
        assert!(matches!(&kinds[0], Kind::Definition { acronyms, phrases }
            if acronyms == &["OLR"] && phrases == &["overdue loan rate"]));
        assert!(matches!(&kinds[1], Kind::Purpose { goal } if goal == "get the loans per member"));
        assert!(matches!(&kinds[2], Kind::Definition { acronyms, phrases }
            if acronyms == &["BPM"] && phrases.contains(&"Books Per Member".to_owned())));
        assert_eq!(kinds[3], Kind::Rule);
        assert!(matches!(&kinds[4], Kind::Definition { acronyms, phrases }
            if acronyms.is_empty() && phrases == &["Last 7 days"]));
        assert!(matches!(&kinds[5], Kind::Definition { acronyms, .. } if acronyms == &["ARL"]));
    }

    #[test]
    fn a_definition_is_told_when_the_question_uses_its_term() {
        let e = told("What is the OLR of each branch?");
        let told = e.told.unwrap();
        assert!(told.contains("OLR = overdue loan rate"));
        assert!(told.contains("Always join loans"), "rules are always told");
        assert!(!told.contains("BPM") && !told.contains("ARL") && !told.contains("Last 7"));
        assert_eq!(e.set_aside.len(), 4, "{:#?}", e.set_aside);
    }

    #[test]
    fn terms_match_in_any_case_plural_or_spelled_out() {
        for q in [
            "List the olr by branch",
            "Which branches have the highest OLRs?",
            "What is the overdue loan rate of each branch?",
        ] {
            assert!(told(q).told.unwrap().contains("OLR ="), "{q}");
        }
        assert!(
            told("What are the books per member?")
                .told
                .unwrap()
                .contains("BPM (")
        );
        assert!(
            told("How many loans in the last 7 days?")
                .told
                .unwrap()
                .contains("Last 7 days =")
        );
        assert!(
            !told("How many loans in the last 9 days?")
                .told
                .unwrap()
                .contains("Last 7 days")
        );
    }

    #[test]
    fn a_purpose_is_told_when_the_question_shares_half_its_goal() {
        let told_for = |q: &str| {
            told(q)
                .told
                .unwrap()
                .contains("To get the loans per member")
        };
        assert!(told_for("How many loans does each member have?"));
        assert!(!told_for("Which books were never borrowed?"));
    }

    #[test]
    fn a_definition_named_by_a_told_statement_is_told() {
        let glossary = "To rank branches by OLR, order by it descending\nOLR = overdue loans / loans\nXYZ = something else";
        let e = filter_evidence("Rank the branches", glossary);
        let told = e.told.unwrap();
        assert!(told.contains("OLR = overdue"), "{told}");
        assert_eq!(e.set_aside, ["XYZ = something else"]);
    }

    #[test]
    fn evidence_with_nothing_to_set_aside_is_returned_as_written() {
        let evidence = "singer refers to the singer table; age is in years";
        let e = filter_evidence("How old is the oldest singer?", evidence);
        assert_eq!(e.told.as_deref(), Some(evidence));
        assert!(e.set_aside.is_empty());
        assert_eq!(filter_evidence("q", "  \n "), FilteredEvidence::default());
    }

    #[test]
    fn labels_sql_words_and_identifiers_define_nothing() {
        for rule in [
            "Note: amounts are in cents",
            "ILIKE matches without case",
            "Filter status=1 for settled loans",
            "Use the books table first",
        ] {
            assert_eq!(classify(rule), Kind::Rule, "{rule}");
        }
    }

    #[test]
    fn a_definition_worded_as_a_purpose_is_a_definition() {
        let kind = classify("To find the OLR = overdue loans / loans");
        assert!(matches!(&kind, Kind::Definition { acronyms, .. } if acronyms == &["OLR"]));
        assert_eq!(
            statements("To find the OLR = overdue loans / loans").len(),
            1
        );
    }

    #[test]
    fn an_acronym_inside_a_sentence_cuts_nothing() {
        let glossary =
            "XYZ = the average QRS score at the end minus the average QRS score at the start";
        assert_eq!(statements(glossary).len(), 1);
    }

    #[test]
    fn a_name_with_its_acronym_opening_a_sentence_defines_it() {
        let kind = classify("The Overdue Loan Rate (OLR) is the share of late returns.");
        assert!(matches!(&kind, Kind::Definition { acronyms, phrases }
            if acronyms == &["OLR"] && phrases == &["The Overdue Loan Rate"]));
        assert!(
            told("What is the overdue loan rate?")
                .told
                .unwrap()
                .contains("OLR =")
        );
    }

    #[test]
    fn a_continuation_sentence_stays_with_its_definition() {
        let glossary = "OLR = overdue loans / loans. This counts only closed loans.\nXYZ = other";
        let e = filter_evidence("What is the XYZ?", glossary);
        assert_eq!(
            e.set_aside,
            ["OLR = overdue loans / loans. This counts only closed loans."]
        );
    }

    proptest::proptest! {
        /// Whatever the text, every word of it is either told or set aside, none twice.
        #[test]
        fn every_word_is_told_or_set_aside(
            question in "[A-Za-z ]{0,30}",
            evidence in "[A-Za-z0-9 =:().,;'\n-]{0,300}",
        ) {
            let filtered = filter_evidence(&question, &evidence);
            let mut kept: Vec<&str> = filtered
                .told
                .iter()
                .chain(&filtered.set_aside)
                .flat_map(|s| s.split_whitespace())
                .collect();
            let mut given: Vec<&str> = evidence.split_whitespace().collect();
            kept.sort_unstable();
            given.sort_unstable();
            proptest::prop_assert_eq!(kept, given);
        }
    }

    #[test]
    fn notes_of_unasked_definitions_tell_nothing() {
        assert!(!tells_anything(
            "How many books?",
            "OLR = overdue loan rate"
        ));
        assert!(tells_anything(
            "What is the OLR?",
            "OLR = overdue loan rate"
        ));
        assert!(tells_anything("How many books?", "Amounts are in cents."));
    }
}

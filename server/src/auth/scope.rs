//! Which databases a token reaches: database ids or patterns, where `*` stands for any run of
//! characters and `?` for one. A pattern is matched against the id the server registered, after
//! the id a request names has been resolved, so a request cannot reach a database by writing
//! its name differently (case, quotes, a path): those names resolve to nothing.

use crate::db_id::validate_db_id;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseScope {
    patterns: Vec<String>,
}

impl DatabaseScope {
    /// Every database, present and future.
    pub fn everything() -> Self {
        Self {
            patterns: vec!["*".to_owned()],
        }
    }

    /// No database at all.
    pub fn nothing() -> Self {
        Self {
            patterns: Vec::new(),
        }
    }

    /// Validates each pattern: an id's alphabet (letters, digits, `_`, `-`) plus `*` and `?`.
    pub fn parse(patterns: &[String]) -> Result<Self, String> {
        if patterns.is_empty() {
            return Err("lists no databases (write `[\"*\"]` for all of them)".into());
        }
        for p in patterns {
            let literal: String = p.chars().filter(|c| !matches!(c, '*' | '?')).collect();
            let ok = literal.is_empty() && !p.is_empty() || validate_db_id(&literal).is_ok();
            if !ok || p.len() > 64 {
                return Err(format!(
                    "`{p}` is not a database id or pattern (letters, digits, `_`, `-`, with \
                     `*` and `?` as wildcards)"
                ));
            }
        }
        Ok(Self {
            patterns: patterns.to_vec(),
        })
    }

    pub fn allows(&self, db_id: &str) -> bool {
        self.patterns.iter().any(|p| wildcard_match(p, db_id))
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// `*` and `?` globbing over ASCII ids, case-sensitive as the registry's ids are; iterative
/// with one backtrack point, so no pattern costs more than length × length steps.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(patterns: &[&str]) -> DatabaseScope {
        DatabaseScope::parse(&patterns.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>())
            .expect("valid")
    }

    #[test]
    fn patterns_match_whole_ids_case_sensitively() {
        let s = scope(&["sales", "hr_*", "team?-db"]);
        assert!(s.allows("sales"));
        assert!(!s.allows("Sales"));
        assert!(!s.allows("sales2"));
        assert!(!s.allows("presales"));
        assert!(s.allows("hr_"));
        assert!(s.allows("hr_payroll"));
        assert!(!s.allows("HR_payroll"));
        assert!(s.allows("team1-db"));
        assert!(!s.allows("team12-db"));
        assert!(DatabaseScope::everything().allows("anything"));
        assert!(scope(&["*a*b"]).allows("xxaxxb"));
        assert!(!scope(&["*a*b"]).allows("xxaxxbc"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            vec![],
            vec!["../x".to_owned()],
            vec!["a b".to_owned()],
            vec![String::new()],
        ] {
            assert!(DatabaseScope::parse(&bad).is_err(), "{bad:?}");
        }
    }
}

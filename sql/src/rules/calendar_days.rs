//! Dates read as a calendar reads them, on the database servers.
//!
//! Two habits of generated queries that give a server's date arithmetic a meaning nobody asked
//! for:
//!
//! - **A window of whole days that starts at this very moment.** "Sales in the past 30 days"
//!   is written `sale_date >= NOW() - INTERVAL '30 days'`: the window opens at the current time
//!   of day, 30 days back, so the first of those days counts only in part, and on a `DATE`
//!   column (midnight, to the comparison) not at all. People count days from midnight, and
//!   analysts write `CURRENT_DATE - INTERVAL '30 days'`. A lower bound `NOW()` (or
//!   `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP`) minus an interval of days, weeks, months or years
//!   becomes `CURRENT_DATE` minus that interval, inclusive. Intervals of hours or less, upper
//!   bounds, and any other use of the current time are left alone: "the last 24 hours" means
//!   the clock.
//! - **Sunday as day 7.** PostgreSQL's and DuckDB's `EXTRACT(DOW ...)` number Sunday 0 and
//!   Saturday 6; ISO's `ISODOW` numbers Monday 1 to Sunday 7. A query that compares `DOW` with
//!   7 ("weekends are `IN (6, 7)`") can never match Sunday, so it was written in ISO's
//!   numbering: that comparison reads `ISODOW`.
//!
//! SQLite has neither `NOW()` nor `EXTRACT`, so nothing here applies to it.

use std::ops::ControlFlow;

use sqlparser::ast::{BinaryOperator, DateTimeField, Expr, Interval, Value, VisitMut, VisitorMut};
use sqlparser::parser::Parser;

use crate::dialect::Dialect;

/// `sql` with its windows of whole days starting at midnight and its `DOW` compared with 7
/// read as `ISODOW`; `None` when neither appears (or the query does not parse).
pub fn calendar_days(sql: &str, dialect: Dialect) -> Option<String> {
    if dialect == Dialect::Sqlite {
        return None;
    }
    let parser = dialect.parser();
    let mut statements = Parser::parse_sql(parser.as_ref(), sql).ok()?;
    let today = Parser::new(parser.as_ref())
        .try_with_sql("CURRENT_DATE")
        .ok()?
        .parse_expr()
        .ok()?;
    let mut rewriter = CalendarDays {
        today,
        weekdays: dialect != Dialect::MySql,
        changed: false,
    };
    let _ = statements.visit(&mut rewriter);
    rewriter.changed.then(|| {
        statements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

struct CalendarDays {
    /// `CURRENT_DATE` as this dialect's parser reads it.
    today: Expr,
    /// Whether `EXTRACT(DOW ...)` numbers Sunday 0 (MySQL has no `DOW` field).
    weekdays: bool,
    changed: bool,
}

impl VisitorMut for CalendarDays {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::BinaryOp { left, op, right } => {
                let lower_bound_on_right = matches!(op, BinaryOperator::GtEq | BinaryOperator::Gt);
                let lower_bound_on_left = matches!(op, BinaryOperator::LtEq | BinaryOperator::Lt);
                if lower_bound_on_right && self.start_at_midnight(right) {
                    *op = BinaryOperator::GtEq;
                } else if lower_bound_on_left && self.start_at_midnight(left) {
                    *op = BinaryOperator::LtEq;
                } else if matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
                    if is_seven(right) {
                        self.read_as_iso(left);
                    } else if is_seven(left) {
                        self.read_as_iso(right);
                    }
                }
            }
            Expr::Between {
                expr: subject,
                low,
                high,
                negated: false,
            } => {
                self.start_at_midnight(low);
                if is_seven(low) || is_seven(high) {
                    self.read_as_iso(subject);
                }
            }
            Expr::InList { expr, list, .. } if list.iter().any(is_seven) => {
                self.read_as_iso(expr);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl CalendarDays {
    /// Replaces the current time in `bound`, when it is "now minus whole days", by
    /// `CURRENT_DATE`; whether it did.
    fn start_at_midnight(&mut self, bound: &mut Expr) -> bool {
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } = unnest_mut(bound)
        else {
            return false;
        };
        if !is_now(left) || !is_whole_days(right) {
            return false;
        }
        **left = self.today.clone();
        self.changed = true;
        true
    }

    /// `EXTRACT(DOW FROM x)` as `EXTRACT(ISODOW FROM x)`.
    fn read_as_iso(&mut self, subject: &mut Expr) {
        if !self.weekdays {
            return;
        }
        if let Expr::Extract { field, .. } = unnest_mut(subject)
            && *field == DateTimeField::Dow
        {
            *field = DateTimeField::Isodow;
            self.changed = true;
        }
    }
}

fn unnest_mut(expr: &mut Expr) -> &mut Expr {
    match expr {
        Expr::Nested(inner) => unnest_mut(inner),
        other => other,
    }
}

fn unnest(expr: &Expr) -> &Expr {
    match expr {
        Expr::Nested(inner) => unnest(inner),
        other => other,
    }
}

/// `NOW()`, `CURRENT_TIMESTAMP` or `LOCALTIMESTAMP`: the current time of day included.
fn is_now(expr: &Expr) -> bool {
    let Expr::Function(function) = unnest(expr) else {
        return false;
    };
    let name = function.name.to_string().to_uppercase();
    matches!(
        name.as_str(),
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIMESTAMP" | "TRANSACTION_TIMESTAMP"
    )
}

/// An interval counted in days or longer units only: `'30 days'`, `'1 month'`, `INTERVAL 3
/// WEEK`, `'1 year 2 months'`.
fn is_whole_days(expr: &Expr) -> bool {
    let Expr::Interval(Interval {
        value,
        leading_field,
        last_field: None,
        ..
    }) = unnest(expr)
    else {
        return false;
    };
    let Some(text) = literal_text(value) else {
        return false;
    };
    match leading_field {
        Some(field) => is_day_or_longer(&field.to_string()) && text.parse::<f64>().is_ok(),
        None => {
            let words: Vec<&str> = text.split_whitespace().collect();
            !words.is_empty()
                && words.len().is_multiple_of(2)
                && words
                    .chunks(2)
                    .all(|pair| pair[0].parse::<u32>().is_ok() && is_day_or_longer(pair[1]))
        }
    }
}

fn is_day_or_longer(unit: &str) -> bool {
    matches!(
        unit.to_lowercase().trim_end_matches('s'),
        "day" | "week" | "month" | "mon" | "quarter" | "year"
    )
}

fn literal_text(expr: &Expr) -> Option<String> {
    let Expr::Value(value) = unnest(expr) else {
        return None;
    };
    match &value.value {
        Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => Some(text.clone()),
        Value::Number(number, _) => Some(number.to_string()),
        _ => None,
    }
}

fn is_seven(expr: &Expr) -> bool {
    let Expr::Value(value) = unnest(expr) else {
        return false;
    };
    matches!(&value.value, Value::Number(number, _) if number == "7")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(sql: &str) -> Option<String> {
        calendar_days(sql, Dialect::Postgres)
    }

    #[test]
    fn a_window_of_days_from_now_starts_at_midnight() {
        assert_eq!(
            pg("SELECT COUNT(*) FROM sales WHERE sale_date >= NOW() - INTERVAL '30 days'")
                .as_deref(),
            Some("SELECT COUNT(*) FROM sales WHERE sale_date >= CURRENT_DATE - INTERVAL '30 days'")
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE t.d > CURRENT_TIMESTAMP - INTERVAL '1 month'").as_deref(),
            Some("SELECT 1 FROM t WHERE t.d >= CURRENT_DATE - INTERVAL '1 month'")
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE (NOW() - INTERVAL '3 weeks') <= d AND d < NOW()").as_deref(),
            Some("SELECT 1 FROM t WHERE (CURRENT_DATE - INTERVAL '3 weeks') <= d AND d < NOW()")
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE d BETWEEN NOW() - INTERVAL '7 days' AND NOW()").as_deref(),
            Some("SELECT 1 FROM t WHERE d BETWEEN CURRENT_DATE - INTERVAL '7 days' AND NOW()")
        );
    }

    #[test]
    fn the_clock_and_upper_bounds_are_left_alone() {
        assert_eq!(
            pg("SELECT 1 FROM t WHERE d >= NOW() - INTERVAL '24 hours'"),
            None
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE d >= NOW() - INTERVAL '1 day 2 hours'"),
            None
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE d < NOW() - INTERVAL '30 days'"),
            None
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE d >= CURRENT_DATE - INTERVAL '30 days'"),
            None
        );
        assert_eq!(
            calendar_days(
                "SELECT 1 FROM t WHERE d >= date('now', '-30 days')",
                Dialect::Sqlite
            ),
            None
        );
    }

    #[test]
    fn mysql_intervals_are_read_by_their_unit() {
        assert_eq!(
            calendar_days(
                "SELECT 1 FROM t WHERE d >= NOW() - INTERVAL 30 DAY",
                Dialect::MySql
            )
            .as_deref(),
            Some("SELECT 1 FROM t WHERE d >= CURRENT_DATE - INTERVAL 30 DAY")
        );
        assert_eq!(
            calendar_days(
                "SELECT 1 FROM t WHERE d >= NOW() - INTERVAL 2 HOUR",
                Dialect::MySql
            ),
            None
        );
    }

    #[test]
    fn sunday_as_seven_is_read_in_iso_numbering() {
        assert_eq!(
            pg("SELECT COUNT(*) FROM t WHERE EXTRACT(DOW FROM d) IN (6, 7)").as_deref(),
            Some("SELECT COUNT(*) FROM t WHERE EXTRACT(ISODOW FROM d) IN (6, 7)")
        );
        assert_eq!(
            pg("SELECT SUM(CASE WHEN EXTRACT(DOW FROM d) = 7 THEN 1 ELSE 0 END) FROM t").as_deref(),
            Some("SELECT SUM(CASE WHEN EXTRACT(ISODOW FROM d) = 7 THEN 1 ELSE 0 END) FROM t")
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE EXTRACT(DOW FROM d) IN (0, 6)"),
            None
        );
        assert_eq!(
            pg("SELECT 1 FROM t WHERE EXTRACT(ISODOW FROM d) IN (6, 7)"),
            None
        );
        assert_eq!(pg("SELECT 1 FROM t WHERE x IN (6, 7)"), None);
    }
}

//! What a database id may be.

/// Ids become parts of log lines and metric labels, so they are kept to a safe alphabet.
pub fn validate_db_id(db_id: &str) -> Result<(), String> {
    if db_id.is_empty() || db_id.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if !db_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err("may contain only letters, digits, `_` and `-`".into());
    }
    Ok(())
}

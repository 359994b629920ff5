//! What a token may do. Rights are independent except `admin`, which holds them all: a token
//! that registers databases for a team need not be able to ask of them, and one that asks need
//! not be able to change what the models answer.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Right {
    /// Text-to-SQL and its sub-tasks (whose SQL runs read-only), the models, embeddings, and
    /// listing and describing the databases in scope.
    Ask,
    /// Registering databases (in scope) and their notes.
    Register,
    /// Loading and unloading LoRA adapters.
    Adapters,
    /// Everything above.
    Admin,
}

impl Right {
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Register => "register",
            Self::Adapters => "adapters",
            Self::Admin => "admin",
        }
    }
}

/// The rights a token holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rights(Vec<Right>);

impl Rights {
    pub fn new(rights: impl IntoIterator<Item = Right>) -> Self {
        let mut list: Vec<Right> = Vec::new();
        for r in rights {
            if !list.contains(&r) {
                list.push(r);
            }
        }
        Self(list)
    }

    pub fn all() -> Self {
        Self(vec![Right::Admin])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn has(&self, right: Right) -> bool {
        self.0.contains(&Right::Admin) || self.0.contains(&right)
    }

    /// Whether any right at all is held: listing and describing databases needs one.
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|r| r.name()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_holds_every_right_and_the_others_only_their_own() {
        let admin = Rights::all();
        for r in [Right::Ask, Right::Register, Right::Adapters, Right::Admin] {
            assert!(admin.has(r));
        }
        let ask = Rights::new([Right::Ask, Right::Ask]);
        assert_eq!(ask.names(), ["ask"]);
        assert!(ask.has(Right::Ask));
        assert!(!ask.has(Right::Register));
        assert!(!ask.has(Right::Adapters));
        assert!(!ask.has(Right::Admin));
        assert!(!Rights::default().any());
    }
}

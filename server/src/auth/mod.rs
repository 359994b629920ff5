//! Who may do what: bearer tokens (one in `server.auth_token`, or several in a tokens file
//! with names, database scopes, rights and quotas), the caller every request carries, and the
//! limit on failed attempts.

pub mod authenticator;
pub mod caller;
pub mod failures;
pub mod grant;
pub mod quota;
pub mod right;
pub mod scope;
pub mod tokens_file;

pub use authenticator::Authenticator;
pub use caller::{Caller, Surface};
pub use right::Right;

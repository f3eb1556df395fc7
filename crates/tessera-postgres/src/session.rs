//! One connection to PostgreSQL with its prepared statements, and which errors are worth
//! retrying (the connection's, not the statement's).

use postgres::{Client, NoTls, Statement, Transaction};
use std::collections::HashMap;

/// Most prepared statements one connection keeps (each table has two).
pub(crate) const STATEMENTS_CACHED_MAX: usize = 1024;

/// A connection and its statement cache; dropped and made anew after a connection error.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) statements: Statements,
}

impl Session {
    pub(crate) fn connect(url: &str) -> Result<Session, postgres::Error> {
        Ok(Session { client: Client::connect(url, NoTls)?, statements: Statements::default() })
    }
}

/// Statements prepared on one connection, by their text. Prepared statements belong to the
/// connection, not to the transaction that prepared them.
#[derive(Default)]
pub(crate) struct Statements {
    prepared: HashMap<String, Statement>,
}

impl Statements {
    /// The prepared statement for `sql`, prepared once per connection.
    pub(crate) fn get(&mut self, tx: &mut Transaction<'_>, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        if self.prepared.len() >= STATEMENTS_CACHED_MAX {
            self.prepared.clear();
        }
        let statement = tx.prepare(sql)?;
        self.prepared.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Forgets every statement (a table's shape changed: its statements name other columns).
    pub(crate) fn clear(&mut self) {
        self.prepared.clear();
    }
}

/// Whether `error` is the connection's (closed, refused, the server shutting down or not
/// accepting yet): the work is retried on a new connection. Anything else is the
/// statement's, and retrying would fail the same way.
pub(crate) fn is_transient(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        let code = code.code();
        // Class 08: connection exception; 57P01..57P03: shutdown, crash, cannot connect now.
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    // No SQLSTATE: the socket's error (refused, reset) is the connection's.
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

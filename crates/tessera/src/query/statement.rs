//! A whole query in the text syntax: a predicate, an order, a limit and an offset.

use super::{Expr, OrderKey};
use std::fmt;

/// A parsed query: `[PREDICATE] [order by KEY, …] [limit N] [offset M]`. Parse it with
/// [`Statement::parse`]; run it with `Collection::query` or `Collection::query_text`.
///
/// ```
/// use tessera::query::Statement;
/// let text = r#"tags contains "red" and price < 10 order by price desc nulls last limit 5 offset 10"#;
/// let query = Statement::parse(text).unwrap();
/// assert_eq!(query.to_string(), text);
/// assert_eq!(Statement::parse(&query.to_string()).unwrap(), query);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Statement {
    /// The predicate; `None` matches every record.
    pub predicate: Option<Expr>,
    /// The order keys, most significant first; ties end in primary-key order.
    pub order_by: Vec<OrderKey>,
    /// At most this many results, if set.
    pub limit: Option<usize>,
    /// Results skipped before the first one returned.
    pub offset: usize,
}

impl fmt::Display for Statement {
    /// The query in the text syntax, which parses back to an equal statement.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut clauses: Vec<String> = Vec::new();
        if let Some(predicate) = &self.predicate {
            clauses.push(predicate.to_string());
        }
        if !self.order_by.is_empty() {
            let keys: Vec<String> = self.order_by.iter().map(ToString::to_string).collect();
            clauses.push(format!("order by {}", keys.join(", ")));
        }
        if let Some(limit) = self.limit {
            clauses.push(format!("limit {limit}"));
        }
        if self.offset > 0 {
            clauses.push(format!("offset {}", self.offset));
        }
        f.write_str(&clauses.join(" "))
    }
}

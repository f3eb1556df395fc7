//! The order of query results: which fields, in which direction, and where NULLs go.
//!
//! **SQL's rule on NULL.** A NULL (a missing field or JSON `null`) sorts as if it were larger
//! than every value: last in an ascending order, first in a descending one, unless the key
//! says otherwise with [`Nulls`]. Ties are broken by primary key, ascending.

use std::fmt;

/// A sort direction.
///
/// ```
/// use tessera::query::{Nulls, Order};
/// assert_eq!(Order::Asc.default_nulls(), Nulls::Last);
/// assert_eq!(Order::Desc.default_nulls(), Nulls::First);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Smallest first; NULL last unless [`Nulls::First`] is asked for.
    Asc,
    /// Largest first; NULL first unless [`Nulls::Last`] is asked for.
    Desc,
}

impl Order {
    /// Where NULLs go when the order does not say: SQL's rule, as if NULL were larger than
    /// every value.
    ///
    /// ```
    /// use tessera::query::{Nulls, Order};
    /// assert_eq!(Order::Asc.default_nulls(), Nulls::Last);
    /// assert_eq!(Order::Desc.default_nulls(), Nulls::First);
    /// ```
    pub fn default_nulls(self) -> Nulls {
        match self {
            Order::Asc => Nulls::Last,
            Order::Desc => Nulls::First,
        }
    }
}

/// Where NULL values (missing or null) go in an order.
///
/// ```
/// use tessera::query::{Nulls, Order, OrderKey};
/// let key = OrderKey::new("price", Order::Asc).nulls(Nulls::First);
/// assert_eq!(key.to_string(), "price asc nulls first");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nulls {
    /// Before every value.
    First,
    /// After every value.
    Last,
}

/// One key of an `order by`: a field's dotted path, a direction, and where NULLs go.
///
/// ```
/// use tessera::query::{Nulls, Order, OrderKey};
/// let key = OrderKey::new("address.city", Order::Desc);
/// assert_eq!(key.nulls, Nulls::First, "SQL's default for a descending key");
/// assert_eq!(key.to_string(), "address.city desc");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderKey {
    /// The field's dotted path.
    pub path: String,
    /// The direction.
    pub order: Order,
    /// Where NULLs go.
    pub nulls: Nulls,
}

impl OrderKey {
    /// A key on `path` in direction `order`, with NULLs where SQL puts them
    /// ([`Order::default_nulls`]).
    ///
    /// ```
    /// use tessera::query::{Nulls, Order, OrderKey};
    /// let key = OrderKey::new("price", Order::Asc);
    /// assert_eq!((key.path.as_str(), key.order, key.nulls), ("price", Order::Asc, Nulls::Last));
    /// ```
    pub fn new(path: impl Into<String>, order: Order) -> OrderKey {
        OrderKey { path: path.into(), order, nulls: order.default_nulls() }
    }

    /// The key with NULLs put where `nulls` says.
    ///
    /// ```
    /// use tessera::query::{Nulls, Order, OrderKey};
    /// let key = OrderKey::new("price", Order::Desc).nulls(Nulls::Last);
    /// assert_eq!(key.to_string(), "price desc nulls last");
    /// ```
    pub fn nulls(mut self, nulls: Nulls) -> OrderKey {
        self.nulls = nulls;
        self
    }

    /// Whether the key sorts largest first.
    ///
    /// ```
    /// use tessera::query::{Order, OrderKey};
    /// assert!(OrderKey::new("price", Order::Desc).is_descending());
    /// assert!(!OrderKey::new("price", Order::Asc).is_descending());
    /// ```
    pub fn is_descending(&self) -> bool {
        self.order == Order::Desc
    }

    /// Whether NULLs sort after every value.
    ///
    /// ```
    /// use tessera::query::{Nulls, Order, OrderKey};
    /// assert!(OrderKey::new("price", Order::Asc).is_nulls_last());
    /// assert!(!OrderKey::new("price", Order::Asc).nulls(Nulls::First).is_nulls_last());
    /// ```
    pub fn is_nulls_last(&self) -> bool {
        self.nulls == Nulls::Last
    }
}

impl fmt::Display for OrderKey {
    /// The key in the text syntax, with `nulls first|last` only where it is not the default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::write_path(f, &self.path)?;
        f.write_str(match self.order {
            Order::Asc => " asc",
            Order::Desc => " desc",
        })?;
        if self.nulls != self.order.default_nulls() {
            f.write_str(match self.nulls {
                Nulls::First => " nulls first",
                Nulls::Last => " nulls last",
            })?;
        }
        Ok(())
    }
}

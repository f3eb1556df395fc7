//! Query expressions: a predicate language with SQL's three-valued logic, built in Rust or
//! parsed from text, evaluated directly on a record's stored binary bytes.
//!
//! ```
//! use tessera::query::{field, Expr, Truth};
//! let query = field("priority").gt(2500).and(field("tag").starts_with("a"));
//! assert_eq!(query, Expr::parse(r#"priority > 2500 and tag starts_with "a""#).unwrap());
//!
//! let record = tessera::value::from_json(br#"{"priority": 3000, "tag": "alpha"}"#).unwrap();
//! let root = tessera::value::Doc::from_untrusted(&record).unwrap().root();
//! assert_eq!(query.eval(root), Truth::True);
//! // A comparison with a missing field is unknown, and only TRUE matches.
//! assert_eq!(field("missing").gt(1).eval(root), Truth::Unknown);
//! assert_eq!((!field("missing").gt(1)).eval(root), Truth::Unknown);
//! assert_eq!(field("missing").is_null().eval(root), Truth::True);
//! ```
//!
//! **Semantics.** A field is read by its dotted path; a missing field and JSON `null` are both
//! NULL. A comparison, string test, membership test or arithmetic with a NULL operand is
//! UNKNOWN (arithmetic yields NULL); `is_null` is never UNKNOWN. `not`, `and` and `or` follow
//! Kleene's logic (FALSE wins an `and`, TRUE wins an `or`, otherwise UNKNOWN wins). Numbers
//! compare by value whether stored as integers or floats; strings compare by bytes; comparing
//! values of different kinds (a number with a string) is UNKNOWN at run time, and a type error
//! when the query is checked against a schema.

mod eval;
mod limits;
mod order;
mod parse;
mod statement;

pub(crate) use eval::lookup;
pub use limits::EXPR_DEPTH_MAX;
pub(crate) use limits::check_query_depth;
pub use order::{Nulls, Order, OrderKey};
pub use parse::{ORDER_KEYS_MAX, ParseError, QUERY_LEN_MAX};
pub use statement::Statement;

/// `docs/query.md`, compiled as documentation only under `cargo test --doc`, so that its
/// Rust examples run as doctests (its query, explain and error examples run in
/// `tests/query_doc.rs`).
#[cfg(doctest)]
#[doc = include_str!("../../../../docs/query.md")]
pub struct QueryGuide;

use std::fmt;

/// A query's truth value under three-valued logic.
///
/// ```
/// use tessera::query::{field, Truth};
/// let bytes = tessera::value::from_json(br#"{"age": 30}"#).unwrap();
/// let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
/// assert_eq!(field("age").gt(18).eval(root), Truth::True);
/// assert_eq!(field("age").gt(40).eval(root), Truth::False);
/// assert_eq!(field("height").gt(1).eval(root), Truth::Unknown);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Truth {
    /// The predicate holds: the record matches.
    True,
    /// The predicate does not hold.
    False,
    /// The predicate involves NULL: the record does not match, and `not` keeps it unknown.
    Unknown,
}

impl std::ops::Not for Truth {
    type Output = Truth;

    /// Kleene negation: UNKNOWN stays UNKNOWN.
    fn not(self) -> Truth {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
        }
    }
}

impl Truth {
    /// Kleene conjunction.
    ///
    /// ```
    /// use tessera::query::Truth;
    /// assert_eq!(Truth::Unknown.and(Truth::False), Truth::False);
    /// assert_eq!(Truth::Unknown.and(Truth::True), Truth::Unknown);
    /// assert_eq!(Truth::True.and(Truth::True), Truth::True);
    /// ```
    pub fn and(self, other: Truth) -> Truth {
        match (self, other) {
            (Truth::False, _) | (_, Truth::False) => Truth::False,
            (Truth::True, Truth::True) => Truth::True,
            _ => Truth::Unknown,
        }
    }

    /// Kleene disjunction.
    ///
    /// ```
    /// use tessera::query::Truth;
    /// assert_eq!(Truth::Unknown.or(Truth::True), Truth::True);
    /// assert_eq!(Truth::Unknown.or(Truth::False), Truth::Unknown);
    /// assert_eq!(Truth::False.or(Truth::False), Truth::False);
    /// ```
    pub fn or(self, other: Truth) -> Truth {
        match (self, other) {
            (Truth::True, _) | (_, Truth::True) => Truth::True,
            (Truth::False, Truth::False) => Truth::False,
            _ => Truth::Unknown,
        }
    }

    fn from_bool(value: bool) -> Truth {
        if value { Truth::True } else { Truth::False }
    }
}

/// A constant in a query.
///
/// ```
/// use tessera::query::{field, Expr, Literal};
/// assert_eq!(Literal::from(7u8), Literal::Int(7));
/// assert_eq!(Literal::from(u64::MAX), Literal::UInt(u64::MAX));
/// assert_eq!(Literal::from("x"), Literal::Str("x".into()));
/// assert_eq!(field("n").eq(2.5), Expr::parse("n == 2.5").unwrap());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// An integer above `i64::MAX` (smaller ones are always [`Literal::Int`]).
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

macro_rules! literal_from {
    ($($type:ty => $variant:ident $(as $cast:ty)?),*) => {$(
        impl From<$type> for Literal {
            fn from(value: $type) -> Literal {
                Literal::$variant(value $(as $cast)?)
            }
        }
    )*};
}
literal_from!(bool => Bool, i64 => Int, i32 => Int as i64, u32 => Int as i64, i16 => Int as i64, u8 => Int as i64, f64 => Float, f32 => Float as f64, String => Str);

impl From<u64> for Literal {
    /// An [`Literal::Int`] when it fits one, else a [`Literal::UInt`]: every `u64` exactly.
    fn from(value: u64) -> Literal {
        i64::try_from(value).map_or(Literal::UInt(value), Literal::Int)
    }
}

impl From<&str> for Literal {
    fn from(value: &str) -> Literal {
        Literal::Str(value.to_owned())
    }
}

/// A comparison operator.
///
/// ```
/// use tessera::query::{field, CompareOp, Expr};
/// let Expr::Compare(_, op, _) = field("age").ge(18) else { unreachable!() };
/// assert_eq!(op, CompareOp::Ge);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    /// The operator with its operands swapped: `a < b` is `b > a`.
    ///
    /// ```
    /// use tessera::query::CompareOp;
    /// assert_eq!(CompareOp::Lt.flipped(), CompareOp::Gt);
    /// assert_eq!(CompareOp::Eq.flipped(), CompareOp::Eq);
    /// ```
    pub fn flipped(self) -> CompareOp {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            other => other,
        }
    }
}

/// An arithmetic operator (Dflat's `+ - %`).
///
/// ```
/// use tessera::query::{field, ArithOp, Expr};
/// let query = (field("a") + 1).gt(2);
/// let Expr::Compare(sum, _, _) = &query else { unreachable!() };
/// assert!(matches!(&**sum, Expr::Arith(_, ArithOp::Add, _)));
/// assert_eq!((field("a") % 2).eq(0), Expr::parse("a % 2 == 0").unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `%` (remainder; NULL when dividing by zero)
    Rem,
}

/// A string test (`contains`, which applies to strings and arrays, is [`Expr::Contains`]).
///
/// ```
/// use tessera::query::{field, Expr, StringOp};
/// assert!(matches!(field("tag").starts_with("a"), Expr::Str(_, StringOp::StartsWith, _)));
/// assert!(matches!(field("tag").ends_with("z"), Expr::Str(_, StringOp::EndsWith, _)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StringOp {
    /// `starts with`
    StartsWith,
    /// `ends with`
    EndsWith,
}

/// A query expression. Build it with [`field`] and the methods below, or parse it with
/// [`Expr::parse`].
///
/// ```
/// use tessera::query::{field, Expr};
/// let built = field("priority").gt(2500).and(!field("tag").is_null());
/// assert_eq!(built, Expr::parse("priority > 2500 and not tag is null").unwrap());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A field's value, by dotted path (`pos.x`).
    Field(FieldPath),
    /// A constant.
    Literal(Literal),
    /// Arithmetic on two values.
    Arith(Box<Expr>, ArithOp, Box<Expr>),
    /// A comparison.
    Compare(Box<Expr>, CompareOp, Box<Expr>),
    /// `value between low and high` (inclusive).
    Between(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `value in (…)`, or `not in` when the flag is set.
    In(Box<Expr>, Vec<Literal>, bool),
    /// `value is null`, or `is not null` when the flag is set.
    IsNull(Box<Expr>, bool),
    /// A string test against a constant.
    Str(Box<Expr>, StringOp, String),
    /// `value contains constant`: on a string, whether the constant (a string) occurs in it;
    /// on an array, whether an element equals the constant (UNKNOWN when none does and an
    /// element is NULL or of another kind, as SQL's `= ANY`). UNKNOWN on NULL or anything else.
    Contains(Box<Expr>, Literal),
    /// `field is Variant`: the field holds that variant of an externally tagged enum.
    Variant(FieldPath, String),
    /// Kleene `and`.
    And(Box<Expr>, Box<Expr>),
    /// Kleene `or`.
    Or(Box<Expr>, Box<Expr>),
    /// Kleene `not`.
    Not(Box<Expr>),
}

/// A dotted field path, with each step's key pre-resolved for fast lookups in records that
/// share a shape. It dereferences to the path's text.
///
/// ```
/// use tessera::query::FieldPath;
/// let path = FieldPath::new("pos.x");
/// assert_eq!(&*path, "pos.x");
/// ```
pub struct FieldPath {
    /// Borrowed for a typed field's path (a `'static` name from the derive), so that building
    /// a query from [`Field`]s allocates no path text.
    text: std::borrow::Cow<'static, str>,
    /// The steps' ids in the first shared-key table the path met (a collection's), so that
    /// records opened with that table are read by integer ids alone.
    resolved: std::sync::OnceLock<ResolvedSteps>,
    /// The steps as cached keys, for records opened with another table or none; made on
    /// first use.
    by_name: std::sync::OnceLock<Box<[tessera_value::DictKey]>>,
}

/// A path's steps resolved in one shared-key table.
#[derive(Debug)]
struct ResolvedSteps {
    /// The table's [`tessera_value::SharedKeys::identity`].
    table: u64,
    /// Each step's id, or `u32::MAX` for a name the table lacks (looked up by name).
    ids: Box<[u32]>,
    /// Where a one-step path's field was last found in a record (records of one collection
    /// share a layout): tried first, before a search.
    rank: std::sync::atomic::AtomicU32,
}

impl FieldPath {
    /// The path `text` (steps separated by `.`).
    ///
    /// ```
    /// use tessera::query::FieldPath;
    /// let path = FieldPath::new("pos.x");
    /// assert_eq!(&*path, "pos.x");
    /// let bytes = tessera::value::from_json(br#"{"pos": {"x": 1.5}}"#).unwrap();
    /// let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(path.lookup(root).and_then(|x| x.as_f64()), Some(1.5));
    /// ```
    pub fn new(text: &str) -> Self {
        FieldPath::from_text(std::borrow::Cow::Owned(text.to_owned()))
    }

    fn from_text(text: std::borrow::Cow<'static, str>) -> Self {
        FieldPath { text, resolved: std::sync::OnceLock::new(), by_name: std::sync::OnceLock::new() }
    }

    /// The value at this path in `record`; `None` when a step is missing.
    ///
    /// ```
    /// use tessera::query::FieldPath;
    /// let bytes = tessera::value::from_json(br#"{"user": {"name": "ada"}}"#).unwrap();
    /// let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(FieldPath::new("user.name").lookup(root).and_then(|v| v.as_str()), Some("ada"));
    /// assert!(FieldPath::new("user.age").lookup(root).is_none());
    /// ```
    #[inline(always)]
    pub fn lookup<'a>(&self, record: tessera_value::Value<'a>) -> Option<tessera_value::Value<'a>> {
        // The common case inline: a one-step path already resolved in the record's table.
        if let (Some(shared), Some(resolved)) = (record.doc().shared_keys(), self.resolved.get())
            && resolved.table == shared.identity()
            && let [id] = *resolved.ids
        {
            use std::sync::atomic::Ordering::Relaxed;
            let rank = resolved.rank.load(Relaxed);
            let mut hint = rank as usize;
            let found = record.as_dict()?.get_field_hinted(id, &self.text, &mut hint);
            if hint != rank as usize {
                resolved.rank.store(u32::try_from(hint).unwrap_or(0), Relaxed);
            }
            return found;
        }
        self.lookup_general(record)
    }

    /// [`FieldPath::lookup`] for the first lookup, a path of several steps, or a record of
    /// another table or none: kept out of line.
    #[inline(never)]
    fn lookup_general<'a>(&self, record: tessera_value::Value<'a>) -> Option<tessera_value::Value<'a>> {
        if let Some(shared) = record.doc().shared_keys() {
            let resolved = self.resolved.get_or_init(|| ResolvedSteps {
                table: shared.identity(),
                ids: self.text.split('.').map(|step| shared.id(step).unwrap_or(u32::MAX)).collect(),
                rank: std::sync::atomic::AtomicU32::new(0),
            });
            if resolved.table == shared.identity() {
                // Same table: an id below the document's shared count names the step.
                if let [id] = *resolved.ids {
                    return record.as_dict()?.get_field(id, &self.text);
                }
                let mut current = record;
                for (step, &id) in self.text.split('.').zip(resolved.ids.iter()) {
                    current = current.as_dict()?.get_field(id, step)?;
                }
                return Some(current);
            }
        }
        let steps = self.by_name.get_or_init(|| self.text.split('.').map(tessera_value::DictKey::new).collect());
        let mut current = record;
        for step in steps.iter() {
            current = current.as_dict()?.get_key(step)?;
        }
        Some(current)
    }
}

impl std::ops::Deref for FieldPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl Clone for FieldPath {
    fn clone(&self) -> Self {
        FieldPath::from_text(self.text.clone())
    }
}

impl PartialEq for FieldPath {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The field at a dotted path, to build a query from.
///
/// ```
/// use tessera::query::{field, Expr};
/// assert_eq!(field("pos.x").lt(0), Expr::parse("pos.x < 0").unwrap());
/// ```
pub fn field(path: &str) -> Expr {
    Expr::Field(FieldPath::new(path))
}

impl Expr {
    fn compare(self, op: CompareOp, other: impl Into<Expr>) -> Expr {
        Expr::Compare(Box::new(self), op, Box::new(other.into()))
    }

    /// `self == other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").eq(1), Expr::parse("a == 1").unwrap());
    /// assert_eq!(field("a").eq(field("b")), Expr::parse("a == b").unwrap());
    /// ```
    pub fn eq(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Eq, other)
    }
    /// `self != other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").ne("x"), Expr::parse(r#"a != "x""#).unwrap());
    /// ```
    pub fn ne(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Ne, other)
    }
    /// `self < other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").lt(1), Expr::parse("a < 1").unwrap());
    /// ```
    pub fn lt(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Lt, other)
    }
    /// `self <= other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").le(1), Expr::parse("a <= 1").unwrap());
    /// ```
    pub fn le(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Le, other)
    }
    /// `self > other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").gt(1), Expr::parse("a > 1").unwrap());
    /// ```
    pub fn gt(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Gt, other)
    }
    /// `self >= other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").ge(1), Expr::parse("a >= 1").unwrap());
    /// ```
    pub fn ge(self, other: impl Into<Expr>) -> Expr {
        self.compare(CompareOp::Ge, other)
    }
    /// `low <= self <= high`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").between(1, 9), Expr::parse("a between 1 and 9").unwrap());
    /// ```
    pub fn between(self, low: impl Into<Expr>, high: impl Into<Expr>) -> Expr {
        Expr::Between(Box::new(self), Box::new(low.into()), Box::new(high.into()))
    }
    /// `self in (values…)`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").is_in([1, 2]), Expr::parse("a in (1, 2)").unwrap());
    /// ```
    pub fn is_in(self, values: impl IntoIterator<Item = impl Into<Literal>>) -> Expr {
        Expr::In(Box::new(self), values.into_iter().map(Into::into).collect(), false)
    }
    /// `self not in (values…)`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").not_in(["x"]), Expr::parse(r#"a not in ("x")"#).unwrap());
    /// ```
    pub fn not_in(self, values: impl IntoIterator<Item = impl Into<Literal>>) -> Expr {
        Expr::In(Box::new(self), values.into_iter().map(Into::into).collect(), true)
    }
    /// `self is null` (missing or null)
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").is_null(), Expr::parse("a is null").unwrap());
    /// ```
    pub fn is_null(self) -> Expr {
        Expr::IsNull(Box::new(self), false)
    }
    /// `self is not null`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").is_not_null(), Expr::parse("a is not null").unwrap());
    /// ```
    pub fn is_not_null(self) -> Expr {
        Expr::IsNull(Box::new(self), true)
    }
    /// `self starts with prefix`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("tag").starts_with("a"), Expr::parse(r#"tag starts with "a""#).unwrap());
    /// ```
    pub fn starts_with(self, prefix: &str) -> Expr {
        Expr::Str(Box::new(self), StringOp::StartsWith, prefix.to_owned())
    }
    /// `self ends with suffix`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("tag").ends_with("z"), Expr::parse(r#"tag ends with "z""#).unwrap());
    /// ```
    pub fn ends_with(self, suffix: &str) -> Expr {
        Expr::Str(Box::new(self), StringOp::EndsWith, suffix.to_owned())
    }
    /// `self contains value`: a substring of a string, or an element of an array.
    ///
    /// ```
    /// use tessera::query::{field, Expr, Truth};
    /// assert_eq!(field("tags").contains("red"), Expr::parse(r#"tags contains "red""#).unwrap());
    /// let record = tessera::value::from_json(br#"{"tags": ["red", "blue"], "name": "bored", "sizes": [1, 2]}"#).unwrap();
    /// let root = tessera::value::Doc::from_untrusted(&record).unwrap().root();
    /// assert_eq!(field("tags").contains("red").eval(root), Truth::True);
    /// assert_eq!(field("name").contains("red").eval(root), Truth::True);
    /// assert_eq!(field("sizes").contains(3).eval(root), Truth::False);
    /// assert_eq!(field("missing").contains(3).eval(root), Truth::Unknown);
    /// ```
    pub fn contains(self, value: impl Into<Literal>) -> Expr {
        Expr::Contains(Box::new(self), value.into())
    }
    /// The field holds enum variant `variant` (a string, or a dict whose one key is it). On
    /// anything but a field the test is FALSE.
    ///
    /// ```
    /// use tessera::query::{field, Expr, Truth};
    /// assert_eq!(field("content").is_variant("Image"), Expr::parse("content is Image").unwrap());
    /// let bytes = tessera::value::from_json(br#"{"content": {"Image": {"images": []}}}"#).unwrap();
    /// let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(field("content").is_variant("Image").eval(root), Truth::True);
    /// assert_eq!(field("content").is_variant("Text").eval(root), Truth::False);
    /// ```
    pub fn is_variant(self, variant: &str) -> Expr {
        match &self {
            Expr::Field(path) => Expr::Variant(path.clone(), variant.to_owned()),
            _ => Expr::Literal(Literal::Bool(false)),
        }
    }
    /// Kleene `self and other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").eq(1).and(field("b").eq(2)), Expr::parse("a == 1 and b == 2").unwrap());
    /// ```
    pub fn and(self, other: Expr) -> Expr {
        Expr::And(Box::new(self), Box::new(other))
    }
    /// Kleene `self or other`
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// assert_eq!(field("a").eq(1).or(field("b").eq(2)), Expr::parse("a == 1 or b == 2").unwrap());
    /// ```
    pub fn or(self, other: Expr) -> Expr {
        Expr::Or(Box::new(self), Box::new(other))
    }
}

macro_rules! arithmetic_operator {
    ($($trait:ident $method:ident => $op:ident),*) => {$(
        impl<T: Into<Expr>> std::ops::$trait<T> for Expr {
            type Output = Expr;

            /// Arithmetic in a query: NULL if an operand is NULL or not a number, on overflow,
            /// or (for `%`) when dividing by zero.
            fn $method(self, other: T) -> Expr {
                Expr::Arith(Box::new(self), ArithOp::$op, Box::new(other.into()))
            }
        }
    )*};
}
arithmetic_operator!(Add add => Add, Sub sub => Sub, Rem rem => Rem);

impl std::ops::Not for Expr {
    type Output = Expr;

    /// Kleene `not`.
    fn not(self) -> Expr {
        Expr::Not(Box::new(self))
    }
}

impl<T: Into<Literal>> From<T> for Expr {
    fn from(value: T) -> Expr {
        Expr::Literal(value.into())
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Null => f.write_str("null"),
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::UInt(u) => write!(f, "{u}"),
            Literal::Float(x) if x.fract() == 0.0 && x.is_finite() => write!(f, "{x:.1}"),
            Literal::Float(x) if x.is_finite() => write!(f, "{x}"),
            // The text syntax has no such number: marked so that it does not parse (`inf`
            // would be read as a field).
            Literal::Float(x) => write!(f, "<{x}>"),
            Literal::Str(s) => write_quoted(f, s),
        }
    }
}

/// Writes `text` as a string literal of the text syntax: double-quoted, with `\"`, `\\`,
/// `\n` and `\t` escapes and every other character as it is, so that it parses back.
fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in text.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            other => write!(f, "{other}")?,
        }
    }
    f.write_str("\"")
}

/// A string displayed as a literal of the text syntax.
struct Quoted<'a>(&'a str);

/// Writes a field path as the text syntax names it, or, for one it cannot name (see
/// [`parse::is_plain_path`]), as `<field "…">`, which does not parse: never as text that
/// parses as another query.
pub(crate) fn write_path(f: &mut fmt::Formatter<'_>, path: &str) -> fmt::Result {
    if parse::is_plain_path(path) { f.write_str(path) } else { write!(f, "<field {}>", Quoted(path)) }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_quoted(f, self.0)
    }
}

/// Binding strength of each form in the text syntax, loosest first: a sub-expression weaker
/// than its position needs is printed in parentheses (see [`Expr::parse`]'s grammar: `or` <
/// `and` < `not` < one comparison < `+ - %`, left-associative < a field or literal).
mod strength {
    pub const OR: u8 = 1;
    pub const AND: u8 = 2;
    pub const NOT: u8 = 3;
    pub const PREDICATE: u8 = 4;
    pub const SUM: u8 = 5;
    pub const ATOM: u8 = 6;
}

impl Expr {
    /// The operands of the expression's top-level `and`s, flattened (the expression itself if
    /// it is not an `and`).
    ///
    /// ```
    /// use tessera::query::field;
    /// let query = field("a").eq(1).and(field("b").eq(2).and(field("c").eq(3)));
    /// assert_eq!(query.conjuncts().len(), 3);
    /// ```
    pub fn conjuncts(&self) -> Vec<&Expr> {
        fn collect<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
            match expr {
                Expr::And(a, b) => {
                    collect(a, out);
                    collect(b, out);
                }
                other => out.push(other),
            }
        }
        let mut out = Vec::new();
        collect(self, &mut out);
        out
    }

    fn strength(&self) -> u8 {
        match self {
            Expr::Or(..) => strength::OR,
            Expr::And(..) => strength::AND,
            Expr::Not(_) => strength::NOT,
            Expr::Compare(..)
            | Expr::Between(..)
            | Expr::In(..)
            | Expr::IsNull(..)
            | Expr::Str(..)
            | Expr::Contains(..)
            | Expr::Variant(..) => strength::PREDICATE,
            Expr::Arith(..) => strength::SUM,
            Expr::Field(_) | Expr::Literal(_) => strength::ATOM,
        }
    }

    /// Writes the expression where the grammar needs at least `strength`, in parentheses if
    /// it binds more loosely.
    fn write_at(&self, f: &mut fmt::Formatter<'_>, strength: u8) -> fmt::Result {
        if self.strength() < strength {
            f.write_str("(")?;
            self.write_bare(f)?;
            f.write_str(")")
        } else {
            self.write_bare(f)
        }
    }

    fn write_bare(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use strength::*;
        let compare = |op: &CompareOp| match op {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        };
        match self {
            Expr::Field(path) => write_path(f, path),
            Expr::Literal(literal) => write!(f, "{literal}"),
            Expr::Arith(a, op, b) => {
                a.write_at(f, SUM)?;
                f.write_str(match op {
                    ArithOp::Add => " + ",
                    ArithOp::Sub => " - ",
                    ArithOp::Rem => " % ",
                })?;
                b.write_at(f, ATOM)
            }
            Expr::Compare(a, op, b) => {
                a.write_at(f, SUM)?;
                write!(f, " {} ", compare(op))?;
                b.write_at(f, SUM)
            }
            Expr::Between(a, low, high) => {
                a.write_at(f, SUM)?;
                f.write_str(" between ")?;
                low.write_at(f, SUM)?;
                f.write_str(" and ")?;
                high.write_at(f, SUM)
            }
            Expr::In(a, list, negated) => {
                a.write_at(f, SUM)?;
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(f, " {}in ({})", if *negated { "not " } else { "" }, items.join(", "))
            }
            Expr::IsNull(a, negated) => {
                a.write_at(f, SUM)?;
                write!(f, " is {}null", if *negated { "not " } else { "" })
            }
            Expr::Str(a, op, text) => {
                a.write_at(f, SUM)?;
                let word = match op {
                    StringOp::StartsWith => "starts with",
                    StringOp::EndsWith => "ends with",
                };
                write!(f, " {word} {}", Quoted(text))
            }
            Expr::Contains(a, literal) => {
                a.write_at(f, SUM)?;
                write!(f, " contains {literal}")
            }
            Expr::Variant(path, variant) => {
                write_path(f, path)?;
                if parse::is_plain_path(variant) && !variant.contains('.') {
                    write!(f, " is {variant}")
                } else {
                    // `is Null` would read as the NULL test, `is a-b` not at all.
                    write!(f, " is <variant {}>", Quoted(variant))
                }
            }
            Expr::And(a, b) => {
                a.write_at(f, AND)?;
                f.write_str(" and ")?;
                b.write_at(f, NOT)
            }
            Expr::Or(a, b) => {
                a.write_at(f, OR)?;
                f.write_str(" or ")?;
                b.write_at(f, AND)
            }
            Expr::Not(a) => {
                f.write_str("not ")?;
                a.write_at(f, NOT)
            }
        }
    }
}

impl fmt::Display for Expr {
    /// The query in the text syntax [`Expr::parse`] reads, with parentheses only where the
    /// grammar needs them, so that printing never nests deeper than the parsed text did. What
    /// the text syntax cannot express (a field named `null` or `first-name`, a variant named
    /// `Null`, an infinite float) is printed in angle brackets, `<field "null">`, which
    /// `Expr::parse` refuses: printed text never parses as another query.
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// let query = field("a").eq(1).or(field("b").eq(2)).and(!field("c").is_null());
    /// assert_eq!(query.to_string(), "(a == 1 or b == 2) and not c is null");
    /// assert_eq!(Expr::parse(&query.to_string()).unwrap(), query);
    /// // What the text cannot name is marked, never printed as another query:
    /// let unnamed = field("null").eq(1).and(field("status").is_variant("Null"));
    /// assert_eq!(unnamed.to_string(), r#"<field "null"> == 1 and status is <variant "Null">"#);
    /// assert!(Expr::parse(&unnamed.to_string()).is_err());
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_at(f, strength::OR)
    }
}

/// A query that cannot run against a collection: it does not parse, names a field the record
/// does not have, compares values of different types, or orders by a field that has no order.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, tessera::collection::Record)]
/// struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let tasks = db.collection::<Task>()?;
/// let error = tasks.query_text("colour == 1").unwrap_err();
/// assert!(matches!(error, tessera::Error::Query(tessera::query::QueryError::UnknownField { ref path }) if path == "colour"), "{error}");
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The text does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The record has no field at this path.
    #[error("unknown field `{path}`")]
    UnknownField {
        /// The dotted path.
        path: String,
    },
    /// An operand has the wrong type, e.g. `age > "x"`.
    #[error("type mismatch in `{expr}`: expected {expected}, found {found}")]
    TypeMismatch {
        /// The offending sub-expression.
        expr: String,
        /// What the operator or field needs.
        expected: String,
        /// What it got.
        found: String,
    },
    /// `field is Variant` with a variant the enum does not have.
    #[error("enum field `{path}` has no variant `{variant}`")]
    UnknownVariant {
        /// The enum field.
        path: String,
        /// The variant named.
        variant: String,
    },
    /// An order with more keys than [`ORDER_KEYS_MAX`].
    #[error("an order has {count} keys; at most {count_max} are allowed")]
    TooManyOrderKeys {
        /// The keys given.
        count: usize,
        /// [`ORDER_KEYS_MAX`].
        count_max: usize,
    },
    /// Ordering by a struct, list or map.
    #[error("cannot order by `{path}`: it is a struct, list or map")]
    Unorderable {
        /// The field.
        path: String,
    },
}

/// Most steps a typed field's path may have: `Person::address().city()` has two.
///
/// ```
/// use tessera::query::{Field, FIELD_STEPS_MAX};
/// let deep: Field<i32> = Field::<()>::new("a").child::<()>("b").child("c");
/// assert_eq!(deep.path(), "a.b.c");
/// assert!(3 <= FIELD_STEPS_MAX);
/// ```
pub const FIELD_STEPS_MAX: usize = 8;

/// A record field with its Rust type, for queries that are type-checked by the compiler.
/// `#[derive(Record)]` generates one per field (`BenchDoc::priority()`), and `#[derive(Embed)]`
/// on a struct generates a trait (`AddressFields` for `Address`) whose methods reach the
/// struct's fields through a field of its type (`Person::address().city()`).
///
/// ```
/// use tessera::query::{Field, field};
/// let priority: Field<i32> = Field::new("priority");
/// assert_eq!(priority.gt(2500), field("priority").gt(2500));
/// // priority.gt("x") does not compile: a string is not an argument for an i32 field.
/// let city: Field<String> = Field::<()>::new("address").child("city");
/// assert_eq!(city.path(), "address.city");
/// ```
pub struct Field<T> {
    /// The path's steps (a step may itself be dotted), `'static` names from the derive, so
    /// that a typed field is `Copy` and a one-step path allocates no text.
    steps: [&'static str; FIELD_STEPS_MAX],
    step_count: usize,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T> Clone for Field<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Field<T> {}

impl<T> fmt::Debug for Field<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Field({})", self.path())
    }
}

/// A value that can be compared with a field of type `T` in a typed query.
///
/// ```
/// use tessera::query::{Literal, QueryArg};
/// assert_eq!(QueryArg::<i64>::into_literal(5u8), Literal::Int(5));
/// assert_eq!(QueryArg::<String>::into_literal("x"), Literal::Str("x".into()));
/// assert_eq!(QueryArg::<Option<bool>>::into_literal(true), Literal::Bool(true));
/// ```
pub trait QueryArg<T> {
    /// The value as a query constant.
    ///
    /// ```
    /// use tessera::query::{Literal, QueryArg};
    /// assert_eq!(QueryArg::<f64>::into_literal(2i32), Literal::Int(2));
    /// assert_eq!(QueryArg::<f64>::into_literal(0.5f32), Literal::Float(0.5));
    /// assert_eq!(QueryArg::<u64>::into_literal(7u64), Literal::Int(7));
    /// assert_eq!(QueryArg::<u64>::into_literal(u64::MAX), Literal::UInt(u64::MAX));
    /// ```
    fn into_literal(self) -> Literal;
}

/// A number as a query constant: integers exactly, floats as floats.
trait NumericLiteral {
    fn numeric_literal(self) -> Literal;
}
macro_rules! integer_literal {
    ($($type:ty),*) => {$(
        impl NumericLiteral for $type {
            fn numeric_literal(self) -> Literal {
                Literal::Int(i64::from(self))
            }
        }
    )*};
}
integer_literal!(i8, i16, i32, i64, u8, u16, u32);
impl NumericLiteral for u64 {
    /// Exactly: an `Int` when it fits one, else a `UInt`.
    fn numeric_literal(self) -> Literal {
        Literal::from(self)
    }
}
impl NumericLiteral for usize {
    fn numeric_literal(self) -> Literal {
        Literal::from(self as u64)
    }
}
impl NumericLiteral for isize {
    fn numeric_literal(self) -> Literal {
        Literal::Int(self as i64)
    }
}
impl NumericLiteral for f32 {
    fn numeric_literal(self) -> Literal {
        Literal::Float(f64::from(self))
    }
}
impl NumericLiteral for f64 {
    fn numeric_literal(self) -> Literal {
        Literal::Float(self)
    }
}

macro_rules! numeric_args {
    ($($field:ty),*) => {$(
        numeric_args!(@each $field: i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);
    )*};
    (@each $field:ty: $($arg:ty),*) => {$(
        impl QueryArg<$field> for $arg {
            fn into_literal(self) -> Literal {
                self.numeric_literal()
            }
        }
    )*};
}
numeric_args!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

impl QueryArg<String> for &str {
    fn into_literal(self) -> Literal {
        Literal::Str(self.to_owned())
    }
}
impl QueryArg<String> for String {
    fn into_literal(self) -> Literal {
        Literal::Str(self)
    }
}
/// A `Box<str>` field is stored as a string, and compared with one.
impl QueryArg<Box<str>> for &str {
    fn into_literal(self) -> Literal {
        Literal::Str(self.to_owned())
    }
}
impl QueryArg<Box<str>> for String {
    fn into_literal(self) -> Literal {
        Literal::Str(self)
    }
}
impl QueryArg<Box<str>> for Box<str> {
    fn into_literal(self) -> Literal {
        Literal::Str(self.into())
    }
}
/// A `char` field is stored as a one-character string, and compared with one.
impl QueryArg<char> for char {
    fn into_literal(self) -> Literal {
        Literal::Str(self.to_string())
    }
}
impl QueryArg<bool> for bool {
    fn into_literal(self) -> Literal {
        Literal::Bool(self)
    }
}
impl<T, A: QueryArg<T>> QueryArg<Option<T>> for A {
    fn into_literal(self) -> Literal {
        QueryArg::<T>::into_literal(self)
    }
}

/// Field types the string tests apply to.
///
/// ```
/// use tessera::query::{field, Field};
/// let tag: Field<Option<String>> = Field::new("tag");
/// assert_eq!(tag.starts_with("a"), field("tag").starts_with("a"));
/// // Field::<i32>::new("n").starts_with("a") does not compile: i32 is not Textual.
/// ```
pub trait Textual {}
impl Textual for String {}
impl Textual for Box<str> {}
impl<T: Textual> Textual for Option<T> {}

impl<T> Field<T> {
    /// The field at `path` (dotted for nested fields).
    ///
    /// ```
    /// use tessera::query::Field;
    /// const PRIORITY: Field<i32> = Field::new("priority");
    /// assert_eq!(PRIORITY.path(), "priority");
    /// ```
    pub const fn new(path: &'static str) -> Self {
        let mut steps = [""; FIELD_STEPS_MAX];
        steps[0] = path;
        Field { steps, step_count: 1, _type: std::marker::PhantomData }
    }

    /// The field `name` inside this one (a struct), of type `U`: what the methods that
    /// `#[derive(Embed)]` generates return.
    ///
    /// # Panics
    ///
    /// When the path would have more than [`FIELD_STEPS_MAX`] steps (a programming error:
    /// typed nesting that deep does not occur in a record type of reasonable size).
    ///
    /// ```
    /// use tessera::query::Field;
    /// let city: Field<String> = Field::<()>::new("address").child("city");
    /// assert_eq!(city.path(), "address.city");
    /// ```
    pub fn child<U>(self, name: &'static str) -> Field<U> {
        assert!(self.step_count < FIELD_STEPS_MAX, "a typed field path has at most {FIELD_STEPS_MAX} steps");
        let mut steps = self.steps;
        steps[self.step_count] = name;
        Field { steps, step_count: self.step_count + 1, _type: std::marker::PhantomData }
    }

    /// The field's dotted path.
    ///
    /// ```
    /// use tessera::query::Field;
    /// assert_eq!(Field::<i32>::new("pos.x").path(), "pos.x");
    /// ```
    pub fn path(&self) -> std::borrow::Cow<'static, str> {
        match &self.steps[..self.step_count] {
            [one] => std::borrow::Cow::Borrowed(one),
            steps => std::borrow::Cow::Owned(steps.join(".")),
        }
    }

    fn expr(self) -> Expr {
        Expr::Field(FieldPath::from_text(self.path()))
    }

    /// `self == value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<String>::new("title").eq("a"), field("title").eq("a"));
    /// ```
    pub fn eq(self, value: impl QueryArg<T>) -> Expr {
        self.expr().eq(Expr::Literal(value.into_literal()))
    }
    /// `self != value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<i32>::new("n").ne(1), field("n").ne(1));
    /// ```
    pub fn ne(self, value: impl QueryArg<T>) -> Expr {
        self.expr().ne(Expr::Literal(value.into_literal()))
    }
    /// `self < value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<i32>::new("n").lt(1), field("n").lt(1));
    /// ```
    pub fn lt(self, value: impl QueryArg<T>) -> Expr {
        self.expr().lt(Expr::Literal(value.into_literal()))
    }
    /// `self <= value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<f64>::new("x").le(0.5), field("x").le(0.5));
    /// ```
    pub fn le(self, value: impl QueryArg<T>) -> Expr {
        self.expr().le(Expr::Literal(value.into_literal()))
    }
    /// `self > value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<i32>::new("n").gt(1), field("n").gt(1));
    /// ```
    pub fn gt(self, value: impl QueryArg<T>) -> Expr {
        self.expr().gt(Expr::Literal(value.into_literal()))
    }
    /// `self >= value`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<u32>::new("n").ge(1u32), field("n").ge(1));
    /// ```
    pub fn ge(self, value: impl QueryArg<T>) -> Expr {
        self.expr().ge(Expr::Literal(value.into_literal()))
    }
    /// `low <= self <= high`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<i32>::new("n").between(1, 5), field("n").between(1, 5));
    /// ```
    pub fn between(self, low: impl QueryArg<T>, high: impl QueryArg<T>) -> Expr {
        self.expr().between(Expr::Literal(low.into_literal()), Expr::Literal(high.into_literal()))
    }
    /// `self in (values…)`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<String>::new("tag").is_in(["a", "b"]), field("tag").is_in(["a", "b"]));
    /// ```
    pub fn is_in<A: QueryArg<T>>(self, values: impl IntoIterator<Item = A>) -> Expr {
        Expr::In(Box::new(self.expr()), values.into_iter().map(QueryArg::into_literal).collect(), false)
    }
    /// `self not in (values…)`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<i32>::new("n").not_in([3]), field("n").not_in([3]));
    /// ```
    pub fn not_in<A: QueryArg<T>>(self, values: impl IntoIterator<Item = A>) -> Expr {
        Expr::In(Box::new(self.expr()), values.into_iter().map(QueryArg::into_literal).collect(), true)
    }
    /// `self is null` (missing or null)
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<Option<String>>::new("note").is_null(), field("note").is_null());
    /// ```
    pub fn is_null(self) -> Expr {
        self.expr().is_null()
    }
    /// `self is not null`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<Option<String>>::new("note").is_not_null(), field("note").is_not_null());
    /// ```
    pub fn is_not_null(self) -> Expr {
        self.expr().is_not_null()
    }
    /// The field holds enum variant `variant`.
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// #[derive(serde::Serialize)]
    /// enum Content { Text(String), Image(Vec<String>) }
    /// assert_eq!(Field::<Content>::new("content").is_variant("Image"), field("content").is_variant("Image"));
    /// ```
    pub fn is_variant(self, variant: &str) -> Expr {
        self.expr().is_variant(variant)
    }
}

impl<T: Textual> Field<T> {
    /// `self starts with prefix`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<String>::new("tag").starts_with("a"), field("tag").starts_with("a"));
    /// ```
    pub fn starts_with(self, prefix: &str) -> Expr {
        self.expr().starts_with(prefix)
    }
    /// `self ends with suffix`
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<String>::new("tag").ends_with("z"), field("tag").ends_with("z"));
    /// ```
    pub fn ends_with(self, suffix: &str) -> Expr {
        self.expr().ends_with(suffix)
    }
    /// `self contains part`: `part` occurs in the string.
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// assert_eq!(Field::<String>::new("title").contains("ab"), field("title").contains("ab"));
    /// ```
    pub fn contains(self, part: &str) -> Expr {
        self.expr().contains(part)
    }
}

impl<E> Field<Vec<E>> {
    /// `self contains element`: an element of the array equals `element`.
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// let tags: Field<Vec<String>> = Field::new("tags");
    /// assert_eq!(tags.contains("red"), field("tags").contains("red"));
    /// // tags.contains(3) does not compile: 3 is not an argument for a String element.
    /// ```
    pub fn contains(self, element: impl QueryArg<E>) -> Expr {
        Expr::Contains(Box::new(self.expr()), element.into_literal())
    }
}

impl<E> Field<Option<Vec<E>>> {
    /// `self contains element` on an optional array (UNKNOWN when it is NULL).
    ///
    /// ```
    /// use tessera::query::{field, Field};
    /// let scores: Field<Option<Vec<i64>>> = Field::new("scores");
    /// assert_eq!(scores.contains(3), field("scores").contains(3));
    /// ```
    pub fn contains(self, element: impl QueryArg<E>) -> Expr {
        Expr::Contains(Box::new(self.expr()), element.into_literal())
    }
}

impl<T> From<Field<T>> for Expr {
    fn from(value: Field<T>) -> Expr {
        value.expr()
    }
}

#[cfg(test)]
mod field_path_tests {
    use super::FieldPath;
    use tessera_value::{Doc, Encoder, SharedKeys};

    /// `{"a": a, "pos": {"x": x}, "local": 9}`, with `local` kept out of the shared table.
    fn record(keys: &SharedKeys, a: i64, x: i64) -> Vec<u8> {
        let mut enc = Encoder::with_shared_keys(keys);
        enc.begin_dict().unwrap();
        for (name, value) in [("a", a), ("local", 9)] {
            enc.key(name).unwrap();
            enc.push_i64(value).unwrap();
        }
        enc.key("pos").unwrap();
        enc.begin_dict().unwrap();
        enc.key("x").unwrap();
        enc.push_i64(x).unwrap();
        enc.end_dict().unwrap();
        enc.end_dict().unwrap();
        enc.finish().unwrap()
    }

    fn table(names: &[&str]) -> SharedKeys {
        let mut keys = SharedKeys::new();
        for name in names {
            keys.add(name).unwrap();
        }
        keys
    }

    #[test]
    fn a_path_reads_right_through_tables_that_number_keys_differently() {
        // The path resolves its ids in the first table it meets; records of another table
        // (other ids for the same names), or of none, must still read by name.
        let first = table(&["a", "pos", "x"]);
        let second = table(&["x", "pos", "a", "unused"]);
        let (one, two) = (record(&first, 1, 10), record(&second, 2, 20));
        let plain = tessera_value::from_json(br#"{"a": 3, "local": 9, "pos": {"x": 30}}"#).unwrap();
        let docs = [
            Doc::from_untrusted_with_keys(&one, &first).unwrap(),
            Doc::from_untrusted_with_keys(&two, &second).unwrap(),
            Doc::from_untrusted(&plain).unwrap(),
        ];
        let (a, x, local, missing) = (FieldPath::new("a"), FieldPath::new("pos.x"), FieldPath::new("local"), FieldPath::new("pos.y"));
        for _ in 0..2 {
            for (doc, (want_a, want_x)) in docs.iter().zip([(1, 10), (2, 20), (3, 30)]) {
                assert_eq!(a.lookup(doc.root()).and_then(|v| v.as_i64()), Some(want_a));
                assert_eq!(x.lookup(doc.root()).and_then(|v| v.as_i64()), Some(want_x));
                assert_eq!(local.lookup(doc.root()).and_then(|v| v.as_i64()), Some(9));
                assert!(missing.lookup(doc.root()).is_none());
            }
        }
        // A clone of a table is another table: it may number new keys differently.
        let mut grown = first.clone();
        grown.add("local").unwrap();
        let three = record(&grown, 4, 40);
        let doc = Doc::from_untrusted_with_keys(&three, &grown).unwrap();
        assert_eq!((a.lookup(doc.root()).and_then(|v| v.as_i64()), local.lookup(doc.root()).and_then(|v| v.as_i64())), (Some(4), Some(9)));
    }
}

//! Evaluation of an expression on a record, read in place from its binary bytes.

use super::{ArithOp, CompareOp, Expr, Literal, StringOp, Truth};
use std::cmp::Ordering;
use tessera_value::{Kind, Value};

/// A value an expression produces. Containers and binary data are `Other`: they can be tested
/// for NULL but not compared.
#[derive(Debug, Clone, PartialEq)]
enum Operand<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer above `i64::MAX`.
    UInt(u64),
    Float(f64),
    Str(&'a str),
    Other,
}

fn from_value(value: Value<'_>) -> Operand<'_> {
    match value.kind() {
        Kind::Null => Operand::Null,
        Kind::Bool => Operand::Bool(value.as_bool().unwrap_or(false)),
        Kind::Int => Operand::Int(value.as_i64().unwrap_or(0)),
        Kind::UInt => Operand::UInt(value.as_u64().unwrap_or(0)),
        Kind::Float => Operand::Float(value.as_f64().unwrap_or(f64::NAN)),
        Kind::String => Operand::Str(value.as_str().unwrap_or("")),
        Kind::Binary | Kind::Array | Kind::Dict => Operand::Other,
    }
}

fn from_literal(literal: &Literal) -> Operand<'_> {
    match literal {
        Literal::Null => Operand::Null,
        Literal::Bool(b) => Operand::Bool(*b),
        Literal::Int(i) => Operand::Int(*i),
        Literal::UInt(u) => Operand::UInt(*u),
        Literal::Float(x) => Operand::Float(*x),
        Literal::Str(s) => Operand::Str(s),
    }
}

impl Operand<'_> {
    /// The exact value of an integer operand.
    fn integer(&self) -> Option<i128> {
        match self {
            Operand::Int(int) => Some(i128::from(*int)),
            Operand::UInt(uint) => Some(i128::from(*uint)),
            _ => None,
        }
    }

    fn is_number(&self) -> bool {
        matches!(self, Operand::Int(_) | Operand::UInt(_) | Operand::Float(_))
    }
}

/// The operand of an exact integer result: NULL beyond `i64` and `u64` (the values a record
/// can hold), rather than a wrong number.
fn integer_operand<'a>(value: i128) -> Operand<'a> {
    match (i64::try_from(value), u64::try_from(value)) {
        (Ok(int), _) => Operand::Int(int),
        (_, Ok(uint)) => Operand::UInt(uint),
        _ => Operand::Null,
    }
}

/// Where the integer `int` sits against the float `float`, exactly (no rounding of `int` to
/// an `f64`); `None` for NaN.
fn order_integer_float(int: i128, float: f64) -> Option<Ordering> {
    // Beyond ±2^65 a float is past every integer a record or a literal can hold.
    const BEYOND: f64 = 36_893_488_147_419_103_232.0; // 2^65
    if float.is_nan() {
        return None;
    }
    if float >= BEYOND {
        return Some(Ordering::Less);
    }
    if float <= -BEYOND {
        return Some(Ordering::Greater);
    }
    // `floor` is an integer within ±2^65: exact in i128.
    let floor = float.floor();
    Some(match int.cmp(&(floor as i128)) {
        Ordering::Equal if float == floor => Ordering::Equal,
        Ordering::Equal => Ordering::Less, // int == floor < float
        other => other,
    })
}

/// Orders two non-NULL operands of comparable kinds; `None` for kinds that do not compare.
/// Numbers compare by their exact values, whatever their kinds: `u64::MAX - 1 < u64::MAX`,
/// `2^53 + 1 > 2^53 as a float`, and `3 == 3.0`.
fn order(a: &Operand<'_>, b: &Operand<'_>) -> Option<Ordering> {
    match (a, b) {
        (Operand::Int(x), Operand::Int(y)) => Some(x.cmp(y)),
        (Operand::Float(x), Operand::Float(y)) => x.partial_cmp(y),
        (Operand::Str(x), Operand::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Operand::Bool(x), Operand::Bool(y)) => Some(x.cmp(y)),
        _ => match (a.integer(), b.integer(), a, b) {
            (Some(x), Some(y), _, _) => Some(x.cmp(&y)),
            (Some(x), None, _, Operand::Float(y)) => order_integer_float(x, *y),
            (None, Some(y), Operand::Float(x), _) => order_integer_float(y, *x).map(Ordering::reverse),
            _ => None,
        },
    }
}

fn compare(a: &Operand<'_>, op: CompareOp, b: &Operand<'_>) -> Truth {
    if matches!(a, Operand::Null) || matches!(b, Operand::Null) {
        return Truth::Unknown;
    }
    let Some(ordering) = order(a, b) else {
        // NaN against a number: every comparison is false except `!=`.
        let numbers = a.is_number() && b.is_number();
        return if numbers { Truth::from_bool(op == CompareOp::Ne) } else { Truth::Unknown };
    };
    Truth::from_bool(holds(op, ordering))
}

/// Whether `op` holds between two operands that compare as `ordering`.
#[inline]
fn holds(op: CompareOp, ordering: Ordering) -> bool {
    match op {
        CompareOp::Eq => ordering == Ordering::Equal,
        CompareOp::Ne => ordering != Ordering::Equal,
        CompareOp::Lt => ordering == Ordering::Less,
        CompareOp::Le => ordering != Ordering::Greater,
        CompareOp::Gt => ordering == Ordering::Greater,
        CompareOp::Ge => ordering != Ordering::Less,
    }
}

/// `field op literal` for a field's value (`None` when the field is missing): the common
/// pairs (an integer field against an integer, a string against a string) are compared
/// straight from the slot, everything else as [`compare`] does.
#[inline(always)]
fn compare_field(value: Option<Value<'_>>, op: CompareOp, literal: &Literal) -> Truth {
    let Some(value) = value else { return Truth::Unknown };
    match literal {
        Literal::Int(literal) => {
            if let Some(int) = value.as_i64() {
                return Truth::from_bool(holds(op, int.cmp(literal)));
            }
        }
        Literal::Str(literal) => {
            if let Some(text) = value.as_str() {
                return Truth::from_bool(holds(op, text.as_bytes().cmp(literal.as_bytes())));
            }
        }
        _ => {}
    }
    compare_values(value, op, literal)
}

/// [`compare_field`] for the pairs it does not compare straight from the slot: out of line.
#[inline(never)]
fn compare_values(value: Value<'_>, op: CompareOp, literal: &Literal) -> Truth {
    compare(&from_value(value), op, &from_literal(literal))
}

fn arithmetic<'a>(a: Operand<'a>, op: ArithOp, b: Operand<'a>) -> Operand<'a> {
    if let (Some(x), Some(y)) = (a.integer(), b.integer()) {
        let result = match op {
            ArithOp::Add => x.checked_add(y),
            ArithOp::Sub => x.checked_sub(y),
            ArithOp::Rem => x.checked_rem(y),
        };
        // A result beyond i64 and u64, or a zero divisor, gives NULL rather than a wrong number.
        return result.map_or(Operand::Null, integer_operand);
    }
    let as_float = |operand: &Operand<'_>| match operand {
        Operand::Float(x) => Some(*x),
        other => other.integer().map(|int| int as f64),
    };
    match (as_float(&a), as_float(&b)) {
        (Some(x), Some(y)) => float_arithmetic(x, op, y),
        _ => Operand::Null,
    }
}

fn float_arithmetic<'a>(x: f64, op: ArithOp, y: f64) -> Operand<'a> {
    match op {
        ArithOp::Add => Operand::Float(x + y),
        ArithOp::Sub => Operand::Float(x - y),
        ArithOp::Rem if y == 0.0 => Operand::Null,
        ArithOp::Rem => Operand::Float(x % y),
    }
}

impl Expr {
    /// The truth of this predicate for `record`. Only [`Truth::True`] matches.
    ///
    /// ```
    /// use tessera::query::{field, Truth};
    /// let bytes = tessera::value::from_json(br#"{"tags": ["a"], "n": null}"#).unwrap();
    /// let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(field("tags").contains("a").eval(root), Truth::True);
    /// assert_eq!(field("n").eq(1).eval(root), Truth::Unknown);
    /// assert_eq!(field("n").is_null().eval(root), Truth::True);
    /// ```
    pub fn eval(&self, record: Value<'_>) -> Truth {
        match self {
            Expr::Compare(a, op, b) => match (&**a, &**b) {
                // The common shape, `field op literal`, without the operand recursion.
                (Expr::Field(path), Expr::Literal(literal)) => compare_field(path.lookup(record), *op, literal),
                _ => compare(&a.operand(record), *op, &b.operand(record)),
            },
            Expr::Between(a, low, high) => {
                let value = a.operand(record);
                compare(&value, CompareOp::Ge, &low.operand(record)).and(compare(&value, CompareOp::Le, &high.operand(record)))
            }
            Expr::In(a, list, negated) => {
                let value = a.operand(record);
                if value == Operand::Null {
                    return Truth::Unknown;
                }
                let mut truth = Truth::False;
                for literal in list {
                    truth = truth.or(compare(&value, CompareOp::Eq, &from_literal(literal)));
                }
                if *negated { !truth } else { truth }
            }
            Expr::IsNull(a, negated) => Truth::from_bool((a.operand(record) == Operand::Null) != *negated),
            Expr::Str(a, op, text) => match a.operand(record) {
                Operand::Str(value) => Truth::from_bool(match op {
                    StringOp::StartsWith => value.starts_with(text.as_str()),
                    StringOp::EndsWith => value.ends_with(text.as_str()),
                }),
                _ => Truth::Unknown,
            },
            Expr::Contains(a, literal) => contains(a, literal, record),
            Expr::Variant(path, variant) => match path.lookup(record) {
                None => Truth::Unknown,
                Some(value) if value.kind() == Kind::Null => Truth::Unknown,
                Some(value) => Truth::from_bool(match (value.as_str(), value.as_dict()) {
                    (Some(name), _) => name == variant,
                    (None, Some(dict)) => dict.len() == 1 && dict.entry(0).is_some_and(|(key, _)| key == variant),
                    _ => false,
                }),
            },
            Expr::And(a, b) => {
                let left = a.eval(record);
                if left == Truth::False {
                    return Truth::False;
                }
                left.and(b.eval(record))
            }
            Expr::Or(a, b) => {
                let left = a.eval(record);
                if left == Truth::True {
                    return Truth::True;
                }
                left.or(b.eval(record))
            }
            Expr::Not(a) => !a.eval(record),
            // A value used as a predicate: a boolean is its own truth; anything else is unknown.
            Expr::Field(_) | Expr::Literal(_) | Expr::Arith(..) => match self.operand(record) {
                Operand::Bool(b) => Truth::from_bool(b),
                _ => Truth::Unknown,
            },
        }
    }

    fn operand<'a>(&'a self, record: Value<'a>) -> Operand<'a> {
        match self {
            Expr::Field(path) => path.lookup(record).map_or(Operand::Null, from_value),
            Expr::Literal(literal) => from_literal(literal),
            Expr::Arith(a, op, b) => arithmetic(a.operand(record), *op, b.operand(record)),
            predicate => match predicate.eval(record) {
                Truth::True => Operand::Bool(true),
                Truth::False => Operand::Bool(false),
                Truth::Unknown => Operand::Null,
            },
        }
    }
}

/// `value contains literal`: a substring test on a string, a membership test on an array
/// (SQL's `literal = ANY(array)`: TRUE if an element equals it, else UNKNOWN if an element
/// compares as UNKNOWN, else FALSE); UNKNOWN on NULL and on anything else.
fn contains(value: &Expr, literal: &Literal, record: Value<'_>) -> Truth {
    let wanted = from_literal(literal);
    if wanted == Operand::Null {
        return Truth::Unknown;
    }
    let found = match value {
        Expr::Field(path) => path.lookup(record),
        _ => None,
    };
    if let Some(array) = found.and_then(|found| found.as_array()) {
        let mut truth = Truth::False;
        for element in array.iter() {
            truth = truth.or(compare(&from_value(element), CompareOp::Eq, &wanted));
            if truth == Truth::True {
                break;
            }
        }
        return truth;
    }
    match (value.operand(record), &wanted) {
        (Operand::Str(text), Operand::Str(part)) => Truth::from_bool(text.contains(part)),
        _ => Truth::Unknown,
    }
}

/// The value at a dotted field path; `None` when a step is missing.
pub(crate) fn lookup<'a>(record: Value<'a>, path: &str) -> Option<Value<'a>> {
    let mut current = record;
    for step in path.split('.') {
        current = current.get(step)?;
    }
    Some(current)
}

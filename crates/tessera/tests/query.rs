//! Query expressions against a naive oracle: random records and random expressions, evaluated
//! on the binary bytes and, independently, on serde_json's view of the same record. Three-valued
//! logic included. Also: the text syntax round-trips, and parse errors point at the column.

use proptest::prelude::*;
use serde_json::{Value as Json, json};
use tessera::query::{ArithOp, CompareOp, Expr, Literal, StringOp, Truth, field};

// ------------------------------------------------------------------------------ the oracle

#[derive(Debug, Clone, PartialEq)]
enum V {
    Null,
    Bool(bool),
    /// Any integer a record or a literal holds: within i64 or u64.
    Int(i128),
    Float(f64),
    Str(String),
    Other,
}

fn json_value(record: &Json, path: &str) -> V {
    let mut current = record;
    for step in path.split('.') {
        match current.get(step) {
            Some(next) => current = next,
            None => return V::Null,
        }
    }
    scalar(current)
}

fn scalar(current: &Json) -> V {
    match current {
        Json::Null => V::Null,
        Json::Bool(b) => V::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => V::Int(i.into()),
            (_, Some(u)) => V::Int(u.into()),
            _ => V::Float(n.as_f64().unwrap()),
        },
        Json::String(s) => V::Str(s.clone()),
        _ => V::Other,
    }
}

fn literal(l: &Literal) -> V {
    match l {
        Literal::Null => V::Null,
        Literal::Bool(b) => V::Bool(*b),
        Literal::Int(i) => V::Int((*i).into()),
        Literal::UInt(u) => V::Int((*u).into()),
        Literal::Float(f) => V::Float(*f),
        Literal::Str(s) => V::Str(s.clone()),
    }
}

fn as_f64(v: &V) -> Option<f64> {
    match v {
        V::Int(i) => Some(*i as f64),
        V::Float(f) => Some(*f),
        _ => None,
    }
}

/// An integer's place against a float, exactly: rounding is monotonic, so where the integer
/// rounds to another float it sits on that side; where it rounds to this float, the float is
/// an integer (or the integer is exact in f64), and the two compare as integers.
fn int_against_float(int: i128, float: f64) -> Option<std::cmp::Ordering> {
    let rounded = int as f64;
    if float.is_nan() {
        return None;
    }
    if rounded != float {
        return rounded.partial_cmp(&float);
    }
    Some(int.cmp(&(float as i128)))
}

/// A result of integer arithmetic: NULL beyond i64 and u64.
fn int_result(value: Option<i128>) -> V {
    match value {
        Some(v) if (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&v) => V::Int(v),
        _ => V::Null,
    }
}

/// `Some(true/false)` or `None` for unknown.
fn cmp(a: &V, op: CompareOp, b: &V) -> Option<bool> {
    use std::cmp::Ordering::*;
    let ordering = match (a, b) {
        (V::Null, _) | (_, V::Null) => return None,
        (V::Int(x), V::Int(y)) => x.cmp(y),
        (V::Str(x), V::Str(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        (V::Int(x), V::Float(y)) => match int_against_float(*x, *y) {
            Some(o) => o,
            None => return Some(op == CompareOp::Ne),
        },
        (V::Float(x), V::Int(y)) => match int_against_float(*y, *x) {
            Some(o) => o.reverse(),
            None => return Some(op == CompareOp::Ne),
        },
        _ => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) => match x.partial_cmp(&y) {
                Some(o) => o,
                None => return Some(op == CompareOp::Ne),
            },
            _ => return None,
        },
    };
    Some(match op {
        CompareOp::Eq => ordering == Equal,
        CompareOp::Ne => ordering != Equal,
        CompareOp::Lt => ordering == Less,
        CompareOp::Le => ordering != Greater,
        CompareOp::Gt => ordering == Greater,
        CompareOp::Ge => ordering != Less,
    })
}

fn kleene_and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn kleene_or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn value(e: &Expr, r: &Json) -> V {
    match e {
        Expr::Field(p) => json_value(r, p),
        Expr::Literal(l) => literal(l),
        Expr::Arith(a, op, b) => match (value(a, r), value(b, r)) {
            (V::Int(x), V::Int(y)) => match op {
                ArithOp::Add => int_result(x.checked_add(y)),
                ArithOp::Sub => int_result(x.checked_sub(y)),
                ArithOp::Rem => int_result(x.checked_rem(y)),
            },
            (x, y) => match (as_f64(&x), as_f64(&y)) {
                (Some(x), Some(y)) => match op {
                    ArithOp::Add => V::Float(x + y),
                    ArithOp::Sub => V::Float(x - y),
                    ArithOp::Rem if y == 0.0 => V::Null,
                    ArithOp::Rem => V::Float(x % y),
                },
                _ => V::Null,
            },
        },
        predicate => match truth(predicate, r) {
            Some(b) => V::Bool(b),
            None => V::Null,
        },
    }
}

fn truth(e: &Expr, r: &Json) -> Option<bool> {
    match e {
        Expr::Compare(a, op, b) => cmp(&value(a, r), *op, &value(b, r)),
        Expr::Between(a, lo, hi) => {
            let v = value(a, r);
            kleene_and(cmp(&v, CompareOp::Ge, &value(lo, r)), cmp(&v, CompareOp::Le, &value(hi, r)))
        }
        Expr::In(a, list, negated) => {
            let v = value(a, r);
            if v == V::Null {
                return None;
            }
            // Not a short-circuit on `None`: UNKNOWN must not stop a later TRUE.
            let mut found = Some(false);
            for l in list {
                found = kleene_or(found, cmp(&v, CompareOp::Eq, &literal(l)));
            }
            if *negated { found.map(|b| !b) } else { found }
        }
        Expr::IsNull(a, negated) => Some((value(a, r) == V::Null) != *negated),
        Expr::Str(a, op, text) => match value(a, r) {
            V::Str(s) => Some(match op {
                StringOp::StartsWith => s.starts_with(text.as_str()),
                StringOp::EndsWith => s.ends_with(text.as_str()),
            }),
            _ => None,
        },
        Expr::Contains(a, l) => {
            let wanted = literal(l);
            if wanted == V::Null {
                return None;
            }
            let array = match &**a {
                Expr::Field(p) => p.split('.').try_fold(r, |current, step| current.get(step)).and_then(Json::as_array),
                _ => None,
            };
            if let Some(array) = array {
                // SQL's `= ANY`: TRUE wins, then UNKNOWN, then FALSE.
                let mut found = Some(false);
                for element in array {
                    found = kleene_or(found, cmp(&scalar(element), CompareOp::Eq, &wanted));
                }
                return found;
            }
            match (value(a, r), wanted) {
                (V::Str(s), V::Str(part)) => Some(s.contains(part.as_str())),
                _ => None,
            }
        }
        Expr::Variant(path, variant) => {
            let mut current = r;
            for step in path.split('.') {
                current = current.get(step)?;
            }
            match current {
                Json::Null => None,
                Json::String(s) => Some(s == variant),
                Json::Object(map) => Some(map.len() == 1 && map.contains_key(variant)),
                _ => Some(false),
            }
        }
        Expr::And(a, b) => kleene_and(truth(a, r), truth(b, r)),
        Expr::Or(a, b) => kleene_or(truth(a, r), truth(b, r)),
        Expr::Not(a) => truth(a, r).map(|b| !b),
        other => match value(other, r) {
            V::Bool(b) => Some(b),
            _ => None,
        },
    }
}

fn to_truth(t: Option<bool>) -> Truth {
    match t {
        Some(true) => Truth::True,
        Some(false) => Truth::False,
        None => Truth::Unknown,
    }
}

// ------------------------------------------------------------------------------ strategies

fn record() -> impl Strategy<Value = Json> {
    let number = prop_oneof![
        4 => (-5i64..5).prop_map(Json::from),
        4 => (-5.0f64..5.0).prop_map(|f| json!((f * 2.0).round() / 2.0)),
        // The edges where an f64 cannot tell integers apart.
        2 => prop::sample::select(vec![
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(u64::MAX - 1),
            json!((1u64 << 63) + 1),
            json!((1i64 << 53) + 1),
            json!(9007199254740992.0),
            json!(18446744073709551616.0),
            json!(9223372036854775808.0),
        ]),
    ];
    let text = prop::sample::select(vec!["", "a", "ab", "ba", "abc", "b"]).prop_map(Json::from);
    let maybe = |s: BoxedStrategy<Json>| prop_oneof![3 => s.prop_map(Some), 1 => Just(Some(Json::Null)), 1 => Just(None)];
    (
        maybe(number.clone().boxed()),
        maybe(number.clone().boxed()),
        maybe(text.boxed()),
        maybe(prop_oneof![Just(json!("X")), Just(json!({"Y": 1})), Just(json!({"Y": 1, "Z": 2})), Just(json!(3))].boxed()),
        maybe(number.prop_map(|n| json!({ "x": n })).boxed()),
        maybe(any::<bool>().prop_map(Json::from).boxed()),
        maybe(
            prop::collection::vec(prop_oneof![(-2i64..3).prop_map(Json::from), Just(json!("a")), Just(json!("b")), Just(Json::Null)], 0..4)
                .prop_map(Json::from)
                .boxed(),
        ),
    )
        .prop_map(|(a, b, s, e, n, t, l)| {
            let mut map = serde_json::Map::new();
            for (key, v) in [("a", a), ("b", b), ("s", s), ("e", e), ("n", n), ("t", t), ("l", l)] {
                if let Some(v) = v {
                    map.insert(key.into(), v);
                }
            }
            Json::Object(map)
        })
}

fn literal_strategy() -> impl Strategy<Value = Literal> {
    prop_oneof![
        (-5i64..5).prop_map(Literal::Int),
        prop::sample::select(vec![
            Literal::Int(i64::MAX),
            Literal::Int((1 << 53) + 1),
            Literal::UInt(u64::MAX),
            Literal::UInt(u64::MAX - 1),
            Literal::Float(9007199254740992.0),
            Literal::Float(18446744073709551616.0),
        ]),
        (-10i32..10).prop_map(|h| Literal::Float(h as f64 / 2.0)),
        prop::sample::select(vec!["", "a", "ab", "b"]).prop_map(Literal::from),
        any::<bool>().prop_map(Literal::Bool),
        Just(Literal::Null),
    ]
}

fn value_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        prop::sample::select(vec!["a", "b", "s", "n.x", "t", "e", "l", "missing"]).prop_map(field),
        literal_strategy().prop_map(Expr::Literal),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| {
        (inner.clone(), prop::sample::select(vec![ArithOp::Add, ArithOp::Sub, ArithOp::Rem]), inner)
            .prop_map(|(a, op, b)| Expr::Arith(Box::new(a), op, Box::new(b)))
    })
}

fn predicate() -> impl Strategy<Value = Expr> {
    let compare = prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge]);
    let leaf = prop_oneof![
        (value_expr(), compare, value_expr()).prop_map(|(a, op, b)| Expr::Compare(Box::new(a), op, Box::new(b))),
        (value_expr(), value_expr(), value_expr()).prop_map(|(a, lo, hi)| a.between(lo, hi)),
        (value_expr(), prop::collection::vec(literal_strategy(), 1..4), any::<bool>()).prop_map(|(a, l, n)| Expr::In(Box::new(a), l, n)),
        (value_expr(), any::<bool>()).prop_map(|(a, n)| Expr::IsNull(Box::new(a), n)),
        (value_expr(), prop::sample::select(vec![StringOp::StartsWith, StringOp::EndsWith]), prop::sample::select(vec!["", "a", "b"]))
            .prop_map(|(a, op, t)| Expr::Str(Box::new(a), op, t.into())),
        (value_expr(), literal_strategy()).prop_map(|(a, l)| a.contains(l)),
        prop::sample::select(vec!["X", "Y", "Z"]).prop_map(|v| field("e").is_variant(v)),
        value_expr(),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.and(b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.or(b)),
            inner.prop_map(|e| !e),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn evaluation_on_binary_bytes_matches_the_oracle(expr in predicate(), records in prop::collection::vec(record(), 1..6)) {
        for record in &records {
            let bytes = tessera::value::to_vec(record).unwrap();
            let root = tessera::value::Doc::from_untrusted(&bytes).unwrap().root();
            prop_assert_eq!(expr.eval(root), to_truth(truth(&expr, record)), "{} on {}", expr, record);
        }
    }

    #[test]
    fn the_text_syntax_round_trips(expr in predicate()) {
        let text = expr.to_string();
        prop_assert_eq!(Expr::parse(&text).unwrap(), expr, "{}", text);
    }
}

#[test]
fn three_valued_logic_tables() {
    use Truth::*;
    let all = [True, False, Unknown];
    for a in all {
        for b in all {
            let and = match (a, b) {
                (False, _) | (_, False) => False,
                (True, True) => True,
                _ => Unknown,
            };
            assert_eq!(a.and(b), and);
            assert_eq!(a.or(b), !(!a).and(!b), "De Morgan holds in Kleene logic");
        }
    }
    assert_eq!(!Unknown, Unknown);
}

#[test]
fn parse_errors_name_the_column() {
    for (text, column) in [
        ("priority >", 11),
        ("priority > 1 and", 17),
        ("priority = ", 12),
        ("priority == 1 and name =", 25),
        ("(a > 1", 7),
        ("a > 1)", 6),
        ("tag starts_with 3", 17),
        ("a between 1 2", 13),
        ("a not 1", 7),
        (r#"s == "unterminated"#, 6),
        ("a is not X", 10),
        ("a..b > 1", 1),
        ("a > 1 $", 7),
    ] {
        let error = Expr::parse(text).expect_err(text);
        assert_eq!(error.column, column, "{text}: {error}");
    }
    let deep = format!("{}a{}", "(".repeat(500), ")".repeat(500));
    assert!(Expr::parse(&deep).is_err(), "nesting is bounded");
}

#[test]
fn dflat_style_queries_read_naturally() {
    let query = Expr::parse(r#"priority > 2500 and tag starts_with "a""#).unwrap();
    assert_eq!(query, field("priority").gt(2500).and(field("tag").starts_with("a")));
    let query = Expr::parse(r#"content is Image or (priority + 1) % 2 == 0 and color in ("Red", "Blue")"#).unwrap();
    assert_eq!(
        query,
        field("content").is_variant("Image").or(((field("priority") + 1) % 2).eq(0).and(field("color").is_in(["Red", "Blue"])))
    );
}

#[test]
fn printed_queries_parse_back_with_any_string_contents() {
    // Found by the `query` fuzz target: strings were printed with Rust's escapes (`\u{1d}`),
    // which the text syntax does not have.
    for text in ["A\u{1d}A", "quote \" and backslash \\", "tab\tnew\nline", "é\u{0}\u{7f}"] {
        for expr in [tessera::query::field("t").eq(text), tessera::query::field("t").contains(text)] {
            let printed = expr.to_string();
            assert_eq!(tessera::query::Expr::parse(&printed).unwrap(), expr, "{printed}");
        }
    }
}

#[test]
fn a_number_beyond_f64_is_an_error_not_infinity() {
    // Found by the `query` fuzz target: `6E6061` parsed as infinity, printed as `inf`, a field.
    let error = tessera::query::Expr::parse("x < 6E6061").unwrap_err();
    assert_eq!(error.column, 5);
    assert!(error.message.contains("out of range"), "{}", error.message);
    assert!(tessera::query::Expr::parse("x < 1.5e308").is_ok());
}

#[test]
fn an_integer_literal_is_exact_or_out_of_range() {
    // Found by a review of the Python builder: `-9223372036854775809` was "number too large"
    // while `18446744073709551617` was silently rounded to the float 2**64.
    use tessera::query::{Expr, Literal};
    let constant = |text: &str| {
        let expr = Expr::parse(&format!("x < {text}"))?;
        let Expr::Compare(_, _, right) = &expr else { panic!("{expr:?}") };
        let Expr::Literal(literal) = right.as_ref() else { panic!("{expr:?}") };
        Ok::<Literal, tessera::query::ParseError>(literal.clone())
    };
    assert_eq!(constant("-9223372036854775808").unwrap(), Literal::Int(i64::MIN));
    assert_eq!(constant("18446744073709551615").unwrap(), Literal::UInt(u64::MAX));
    // Beyond i64 and u64, a float that holds the integer exactly.
    assert_eq!(constant("1180591620717411303424").unwrap(), Literal::Float(2f64.powi(70)));
    assert_eq!(constant("-18446744073709551616").unwrap(), Literal::Float(-(2f64.powi(64))));
    assert_eq!(constant("-9223372036854777856").unwrap(), Literal::Float(-(2f64.powi(63) + 2048.0)));
    // Otherwise out of range, saying so, where the number starts.
    for (text, column) in
        [("-9223372036854775809", 6), ("-18446744073709551615", 6), ("18446744073709551617", 5), ("-18446744073709551617", 6)]
    {
        let error = constant(text).expect_err(text);
        assert!(error.message.contains("out of range"), "{text}: {}", error.message);
        assert!(error.message.contains(text.trim_start_matches('-')), "{text}: {}", error.message);
        assert_eq!(error.column, column, "{text}: {error}");
    }
}

#[test]
fn float_arguments_of_typed_queries_stay_floats() {
    // `numeric_literal!` matched a `ty` fragment against the tokens `f32`/`f64`, which never
    // matches: every float argument went through `as i64` (`le(1.5)` ran as `<= 1`).
    #[derive(tessera::collection::Record)]
    struct Reading {
        #[record(key)]
        id: u32,
        x: f64,
        small: f32,
    }
    assert_eq!(Reading::x().le(1.5), tessera::query::field("x").le(tessera::query::Literal::Float(1.5)));
    assert_eq!(Reading::small().gt(0.25f32).to_string(), "small > 0.25");
    assert_eq!(Reading::x().eq(-0.5).to_string(), "x == -0.5");
    assert_eq!(Reading::x().ge(2).to_string(), "x >= 2", "integers stay integers");
}

#[test]
fn keywords_are_case_insensitive_and_fields_are_not() {
    let lower = Expr::parse(r#"a > 1 and not (b is null or s starts with "x") and t in (true, null)"#).unwrap();
    for text in [
        r#"a > 1 AND NOT (b IS NULL OR s STARTS WITH "x") AND t IN (TRUE, NULL)"#,
        r#"a > 1 And Not (b Is Null Or s Starts_With "x") and t In (True, Null)"#,
    ] {
        assert_eq!(Expr::parse(text).unwrap(), lower, "{text}");
    }
    assert_eq!(Expr::parse("Price > 1").unwrap(), field("Price").gt(1), "field names keep their case");
    assert_ne!(Expr::parse("Price > 1").unwrap(), field("price").gt(1));
    // Words that are keywords only in a clause's position may still name fields.
    for name in ["order", "by", "limit", "offset", "asc", "desc", "nulls", "first", "last", "exists", "starts", "with", "ends"] {
        assert_eq!(Expr::parse(&format!("{name} == 1")).unwrap(), field(name).eq(1), "{name}");
        let statement = tessera::query::Statement::parse(&format!("{name} - 1 > 0 order by {name} limit 1")).unwrap();
        assert_eq!(statement.predicate, Some((field(name) - 1).gt(0)), "{name}");
        assert_eq!(statement.order_by[0].path, name);
    }
}

#[test]
fn the_text_forms_of_string_tests_membership_and_existence() {
    let pairs = [
        (r#"s starts with "a""#, field("s").starts_with("a")),
        (r#"s starts_with "a""#, field("s").starts_with("a")),
        (r#"s ends with "a""#, field("s").ends_with("a")),
        (r#"s ends_with "a""#, field("s").ends_with("a")),
        (r#"s contains "a""#, field("s").contains("a")),
        ("tags contains 3", field("tags").contains(3)),
        ("exists s", field("s").is_not_null()),
        ("s exists", field("s").is_not_null()),
        ("not exists s", !field("s").is_not_null()),
        ("s is not null", field("s").is_not_null()),
        ("a = 1", field("a").eq(1)),
        ("a <> 1", field("a").ne(1)),
        ("a not between 1 and 2", !field("a").between(1, 2)),
        (r#"s not contains "a""#, !field("s").contains("a")),
        (r#"s not starts with "a""#, !field("s").starts_with("a")),
    ];
    for (text, expr) in pairs {
        assert_eq!(Expr::parse(text).unwrap(), expr, "{text}");
    }
}

#[test]
fn parse_errors_say_what_was_expected_after_what() {
    for (text, message) in [
        ("price > 2 and name =", "expected a value after `=` at column 21"),
        ("price >", "expected a value after `>` at column 8"),
        ("price > )", "expected a value after `>`, found `)` at column 9"),
        ("a between 1 2", "expected `and` in `between … and …` after `1`, found `2` at column 13"),
        ("s starts with 3", "expected a string after `with`, found `3` at column 15"),
        ("a is", "expected `null`, `not null` or an enum variant after `is` at column 5"),
        ("a in (1,", "expected a value after `,` at column 9"),
        ("", "expected a predicate, found an empty query at column 1"),
        ("a == 1 b", "expected `and`, `or` or the end of the predicate after `1`, found `b` at column 8"),
        ("a = 1 = 2", "expected `and`, `or` or the end of the predicate after `1`, found `=` at column 7"),
    ] {
        assert_eq!(Expr::parse(text).unwrap_err().to_string(), message, "{text}");
    }
}

fn order_key() -> impl Strategy<Value = tessera::query::OrderKey> {
    use tessera::query::{Nulls, Order, OrderKey};
    (
        prop::sample::select(vec!["a", "b", "n.x", "order", "first"]),
        prop::sample::select(vec![Order::Asc, Order::Desc]),
        prop::option::of(prop::sample::select(vec![Nulls::First, Nulls::Last])),
    )
        .prop_map(|(path, order, nulls)| {
            let key = OrderKey::new(path, order);
            match nulls {
                Some(nulls) => key.nulls(nulls),
                None => key,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn whole_query_texts_round_trip(
        predicate in prop::option::of(predicate()),
        order_by in prop::collection::vec(order_key(), 0..4),
        limit in prop::option::of(0usize..100),
        offset in prop_oneof![Just(0usize), 1usize..50],
    ) {
        let statement = tessera::query::Statement { predicate, order_by, limit, offset };
        let text = statement.to_string();
        prop_assert_eq!(tessera::query::Statement::parse(&text).unwrap(), statement.clone(), "{}", text);
        // Keywords in upper case read the same.
        let upper = text.replace(" order by ", " ORDER BY ").replace("order by ", "ORDER BY ").replace(" desc", " DESC").replace(" limit ", " LIMIT ");
        prop_assert_eq!(tessera::query::Statement::parse(&upper).unwrap(), statement, "{}", upper);
    }
}

#[test]
fn the_query_limits_hold_at_their_boundaries() {
    use tessera::query::{ORDER_KEYS_MAX, QUERY_LEN_MAX, Statement};
    let keys = |count: usize| (0..count).map(|index| format!("f{index}")).collect::<Vec<_>>().join(", ");
    assert_eq!(Statement::parse(&format!("order by {}", keys(ORDER_KEYS_MAX))).unwrap().order_by.len(), ORDER_KEYS_MAX);
    let error = Statement::parse(&format!("order by {}", keys(ORDER_KEYS_MAX + 1))).unwrap_err();
    assert!(error.message.contains("more than 16 keys"), "{error}");
    let padded = |len: usize| format!("a == 1{}", " ".repeat(len - 6));
    assert!(Statement::parse(&padded(QUERY_LEN_MAX)).is_ok());
    assert!(Statement::parse(&padded(QUERY_LEN_MAX + 1)).unwrap_err().message.contains("longer than"));
    assert_eq!(Statement::parse(&format!("limit {}", u32::MAX)).unwrap().limit, Some(u32::MAX as usize));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// A local stand-in for the `query` fuzz target: token soups in which the keywords, in
    /// any case, meet fields, literals and symbols often. Every text parses to a statement
    /// that prints and parses back the same, or fails with a column inside the text.
    #[test]
    fn token_soups_parse_back_or_fail_inside_the_text(tokens in prop::collection::vec(prop::sample::select(vec![
        "a", "b.c", "order", "ORDER", "by", "By", "limit", "offset", "asc", "DESC", "nulls", "first", "Last", "and", "OR", "not",
        "is", "NULL", "null", "in", "between", "starts", "with", "ends", "contains", "exists", "true", "False", "Red",
        "1", "-", "2.5", "\"x\"", "\"\"", "==", "=", "!=", "<>", "<", ">=", "+", "%", "(", ")", ",",
    ]), 0..12)) {
        let text = tokens.join(" ");
        let columns = text.chars().count() + 1;
        match tessera::query::Statement::parse(&text) {
            Ok(statement) => {
                let printed = statement.to_string();
                prop_assert_eq!(tessera::query::Statement::parse(&printed).unwrap(), statement, "{} printed as {}", text, printed);
            }
            Err(error) => prop_assert!(error.column >= 1 && error.column <= columns, "column {} of {:?}: {}", error.column, text, error),
        }
        match Expr::parse(&text) {
            Ok(expr) => prop_assert_eq!(Expr::parse(&expr.to_string()).unwrap(), expr, "{}", text),
            Err(error) => prop_assert!(error.column >= 1 && error.column <= columns, "column {} of {:?}", error.column, text),
        }
    }
}

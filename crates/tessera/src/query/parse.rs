//! The text syntax of queries, for the CLI and for bindings: a lexer, and a recursive-descent
//! parser whose nesting is bounded. `docs/query.md` has the grammar in EBNF; in short:
//!
//! ```text
//! query     := [expr] ["order" "by" key ("," key)*] ["limit" INT] ["offset" INT]
//! key       := FIELD ["asc"|"desc"] ["nulls" ("first"|"last")]
//! expr      := and ("or" and)*
//! and       := not ("and" not)*
//! not       := "not" not | "exists" FIELD | predicate
//! predicate := sum [ ("=="|"="|"!="|"<>"|"<"|"<="|">"|">=") sum
//!                  | ["not"] "between" sum "and" sum
//!                  | ["not"] "in" "(" literal ("," literal)* ")"
//!                  | "is" ["not"] "null" | "is" VARIANT | "exists"
//!                  | ["not"] ("starts" "with"|"starts_with"|"ends" "with"|"ends_with") STRING
//!                  | ["not"] "contains" literal ]
//! sum       := atom (("+"|"-"|"%") atom)*
//! atom      := literal | FIELD | "(" expr ")"
//! literal   := NUMBER | "-" NUMBER | STRING | "true" | "false" | "null"
//! ```
//!
//! A field is a dotted path of identifiers (`pos.x`), case-sensitive; keywords are not
//! (`AND`, `Is Null`). Strings are double-quoted with `\"`, `\\`, `\n` and `\t` escapes;
//! every other character, control characters included, stands for itself. An integer literal
//! is exact: from `-2**63` to `2**64-1` an integer, beyond that a float only when a float
//! holds it exactly (`2**70`, `-(2**64)`), and otherwise an error saying it is out of range
//! (`-9223372036854775809`, `18446744073709551617`): it is never rounded. A float literal is
//! rounded to the nearest `f64`, but one beyond its range (`1e400`) or one not zero that would
//! round to zero (`1e-400`) is an error too.
//! Errors carry the 1-based column and say what was expected after what.

use super::order::{Nulls, Order, OrderKey};
use super::{ArithOp, CompareOp, Expr, Literal, Statement, StringOp};

/// Longest query text accepted, in bytes.
///
/// ```
/// use tessera::query::{Expr, QUERY_LEN_MAX};
/// let long = format!("name == \"{}\"", "x".repeat(QUERY_LEN_MAX));
/// assert!(Expr::parse(&long).is_err());
/// ```
pub const QUERY_LEN_MAX: usize = 64 * 1024;
/// Deepest nesting of parentheses and `not`s the parser follows.
const NESTING_MAX: usize = 128;
/// Most keys an `order by` may have.
///
/// ```
/// use tessera::query::{Statement, ORDER_KEYS_MAX};
/// let keys: Vec<String> = (0..=ORDER_KEYS_MAX).map(|i| format!("f{i}")).collect();
/// assert!(Statement::parse(&format!("a == 1 order by {}", keys.join(", "))).is_err());
/// assert!(Statement::parse(&format!("a == 1 order by {}", keys[..ORDER_KEYS_MAX].join(", "))).is_ok());
/// ```
pub const ORDER_KEYS_MAX: usize = 16;

/// A query that does not parse: where and why.
///
/// ```
/// use tessera::query::Expr;
/// let error = Expr::parse("price > 2 and name =").unwrap_err();
/// assert_eq!(error.to_string(), "expected a value after `=` at column 21");
/// assert_eq!(error.column, 21);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at column {column}")]
pub struct ParseError {
    /// 1-based column (in characters) of the problem.
    pub column: usize,
    /// What was expected, and what was found.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    /// An integer above `i64::MAX`, up to `u64::MAX`.
    UInt(u64),
    Float(f64),
    Symbol(&'static str),
}

/// A token and the byte range of its text.
#[derive(Debug, Clone)]
struct Spanned {
    token: Token,
    start: usize,
    end: usize,
}

struct Lexer<'t> {
    text: &'t str,
    tokens: Vec<Spanned>,
}

/// Longest first: `<=` before `<`.
const SYMBOLS: [&str; 15] = ["==", "!=", "<>", "<=", ">=", "<", ">", "=", "+", "-", "%", "(", ")", ",", "!"];

fn column(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].chars().count() + 1
}

impl<'t> Lexer<'t> {
    fn error(&self, byte: usize, message: impl Into<String>) -> ParseError {
        ParseError { column: column(self.text, byte), message: message.into() }
    }

    fn push(&mut self, token: Token, start: usize, end: usize) {
        self.tokens.push(Spanned { token, start, end });
    }

    fn run(mut self) -> Result<Vec<Spanned>, ParseError> {
        let bytes = self.text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let byte = bytes[pos];
            if byte.is_ascii_whitespace() {
                pos += 1;
            } else if byte == b'"' {
                let (text, end) = self.string(pos)?;
                self.push(Token::Str(text), pos, end);
                pos = end;
            } else if byte.is_ascii_digit() {
                let start = pos;
                while pos < bytes.len()
                    && (bytes[pos].is_ascii_digit()
                        || matches!(bytes[pos], b'.' | b'e' | b'E')
                        || (matches!(bytes[pos], b'+' | b'-') && matches!(bytes[pos - 1], b'e' | b'E')))
                {
                    pos += 1;
                }
                let token = self.number(start, pos)?;
                self.push(token, start, pos);
            } else if byte.is_ascii_alphabetic() || byte == b'_' {
                let start = pos;
                while pos < bytes.len() && (bytes[pos].is_ascii_alphanumeric() || matches!(bytes[pos], b'_' | b'.')) {
                    pos += 1;
                }
                self.push(Token::Ident(self.text[start..pos].to_owned()), start, pos);
            } else {
                let symbol = SYMBOLS.iter().find(|symbol| self.text[pos..].starts_with(**symbol)).ok_or_else(|| {
                    let found = self.text[pos..].chars().next().unwrap_or(' ');
                    self.error(pos, format!("unexpected character {found:?}"))
                })?;
                if *symbol == "!" {
                    return Err(self.error(pos, "unexpected `!` (did you mean `!=` or `not`?)"));
                }
                self.push(Token::Symbol(symbol), pos, pos + symbol.len());
                pos += symbol.len();
            }
        }
        Ok(self.tokens)
    }

    fn number(&self, start: usize, end: usize) -> Result<Token, ParseError> {
        let number = &self.text[start..end];
        match number.parse::<i64>() {
            Ok(int) => Ok(Token::Int(int)),
            Err(_) if number.bytes().all(|byte| byte.is_ascii_digit()) && number.parse::<u64>().is_ok() => {
                Ok(Token::UInt(number.parse::<u64>().expect("checked")))
            }
            Err(_) => match number.parse::<f64>() {
                // An integer beyond u64 is a float literal only when a float holds it exactly
                // (2**70): rounding it would compare with another number than the one written.
                Ok(float) if number.bytes().all(|byte| byte.is_ascii_digit()) && !is_exact(float, number) => {
                    Err(self.error(start, integer_out_of_range(number)))
                }
                // A nonzero literal below f64's range would silently become zero (`x == 1e-400`
                // matching 0).
                Ok(float) if float == 0.0 && is_nonzero(number) => Err(self.error(start, format!("number {number:?} is out of range"))),
                Ok(float) if float.is_finite() => Ok(Token::Float(float)),
                // A literal beyond f64's range would silently become infinity.
                Ok(_) => Err(self.error(start, format!("number {number:?} is out of range"))),
                Err(_) => Err(self.error(start, format!("bad number {number:?}"))),
            },
        }
    }

    fn string(&self, start: usize) -> Result<(String, usize), ParseError> {
        let mut out = String::new();
        let mut chars = self.text[start + 1..].char_indices();
        while let Some((offset, character)) = chars.next() {
            match character {
                '"' => return Ok((out, start + 1 + offset + 1)),
                '\\' => match chars.next() {
                    Some((_, '"')) => out.push('"'),
                    Some((_, '\\')) => out.push('\\'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    _ => return Err(self.error(start + 1 + offset, "bad escape in string (expected \\\", \\\\, \\n or \\t)")),
                },
                other => out.push(other),
            }
        }
        Err(self.error(start, "unterminated string"))
    }
}

/// Words that are never field names, in any case. The clause words (`order`, `by`, `asc`,
/// `limit`, `exists`, `starts`, `with`, …) are keywords only where a field cannot stand, so
/// that fields may still have those names.
/// Whether `path` is written in the text syntax as it is: one identifier token (ASCII letters,
/// digits, `_` and `.`, starting with a letter or `_`, no empty step) that is no reserved
/// word. `Display` marks any other path so that the printed text does not parse as another
/// query (a field `null` would print as the literal, `first-name` as a subtraction).
pub(crate) fn is_plain_path(path: &str) -> bool {
    let starts = path.bytes().next().is_some_and(|byte| byte.is_ascii_alphabetic() || byte == b'_');
    starts
        && path.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.'))
        && !path.split('.').any(str::is_empty)
        && !is_reserved(path)
}

fn is_reserved(word: &str) -> bool {
    const RESERVED: [&str; 12] =
        ["and", "or", "not", "between", "in", "is", "null", "true", "false", "starts_with", "ends_with", "contains"];
    RESERVED.iter().any(|reserved| reserved.eq_ignore_ascii_case(word))
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<Spanned>,
    next: usize,
    depth: usize,
    /// Each `true`, `false` or `null` read as an operand, with its byte offset: a collection
    /// with a field of that name cannot tell which was meant (see
    /// [`Statement::parse_for_fields`]).
    literal_words: Vec<(String, usize)>,
    /// Each `FIELD is [not] null` read, as (the field's path, `null` as spelt, its byte
    /// offset): a field whose enum has a variant of that name cannot tell which was meant.
    null_tests: Vec<(String, String, usize)>,
}

impl Parser<'_> {
    fn error_at_next(&self, message: impl Into<String>) -> ParseError {
        let byte = self.tokens.get(self.next).map_or(self.text.len(), |spanned| spanned.start);
        ParseError { column: column(self.text, byte), message: message.into() }
    }

    /// "expected WHAT after `PREVIOUS`, found `NEXT`", at the next token (or the end).
    fn expected(&self, what: &str) -> ParseError {
        let after = match self.next.checked_sub(1).and_then(|previous| self.tokens.get(previous)) {
            Some(previous) => format!(" after `{}`", &self.text[previous.start..previous.end]),
            None => String::new(),
        };
        let found = match self.tokens.get(self.next) {
            Some(next) => format!(", found `{}`", &self.text[next.start..next.end]),
            None if self.next == 0 => ", found an empty query".to_owned(),
            None => String::new(),
        };
        self.error_at_next(format!("expected {what}{after}{found}"))
    }

    fn peek(&self) -> Option<&Token> {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Token> {
        self.tokens.get(self.next + ahead).map(|spanned| &spanned.token)
    }

    /// Whether the token `ahead` of the next one is the keyword `word` (in any case).
    fn is_word_at(&self, ahead: usize, word: &str) -> bool {
        matches!(self.peek_at(ahead), Some(Token::Ident(found)) if found.eq_ignore_ascii_case(word))
    }

    fn keyword(&mut self, word: &str) -> bool {
        if self.is_word_at(0, word) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    /// Two keywords in a row (`starts with`, `order by`), taken only together.
    fn keywords(&mut self, first: &str, second: &str) -> bool {
        if self.is_word_at(0, first) && self.is_word_at(1, second) {
            self.next += 2;
            true
        } else {
            false
        }
    }

    fn symbol(&mut self, symbol: &str) -> bool {
        if matches!(self.peek(), Some(Token::Symbol(found)) if *found == symbol) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn expect_symbol(&mut self, symbol: &str) -> Result<(), ParseError> {
        if self.symbol(symbol) { Ok(()) } else { Err(self.expected(&format!("`{symbol}`"))) }
    }

    fn nested<T>(&mut self, parse: impl FnOnce(&mut Self) -> Result<T, ParseError>) -> Result<T, ParseError> {
        if self.depth >= NESTING_MAX {
            return Err(self.error_at_next(format!("nesting deeper than {NESTING_MAX} levels")));
        }
        self.depth += 1;
        let result = parse(self);
        self.depth -= 1;
        result
    }

    // ---------------------------------------------------------------- the whole query

    fn statement(&mut self) -> Result<Statement, ParseError> {
        let clause_first = self.is_clause_start();
        let predicate = if clause_first || self.peek().is_none() { None } else { Some(self.or()?) };
        let mut statement = Statement { predicate, order_by: Vec::new(), limit: None, offset: 0 };
        if self.keywords("order", "by") {
            statement.order_by.push(self.order_key()?);
            while self.symbol(",") {
                if statement.order_by.len() == ORDER_KEYS_MAX {
                    return Err(self.error_at_next(format!("more than {ORDER_KEYS_MAX} keys in `order by`")));
                }
                statement.order_by.push(self.order_key()?);
            }
        }
        if self.keyword("limit") {
            statement.limit = Some(self.count("limit")?);
        }
        let offset_given = self.keyword("offset");
        if offset_given {
            statement.offset = self.count("offset")?;
        }
        if self.next != self.tokens.len() {
            return Err(self.expected(if offset_given {
                "the end of the query"
            } else if statement.limit.is_some() {
                "`offset` or the end of the query"
            } else if !statement.order_by.is_empty() {
                "`,`, `limit`, `offset` or the end of the query"
            } else if statement.predicate.is_some() {
                "`and`, `or`, `order by`, `limit`, `offset` or the end of the query"
            } else {
                "a predicate, `order by`, `limit` or `offset`"
            }));
        }
        Ok(statement)
    }

    /// Whether the query starts with a clause, not a predicate: `order by`, or `limit` or
    /// `offset` and a number (a field of that name cannot be followed by one). A negative
    /// number, an error, counts only where a predicate could not go on (`offset - 1 > 0` is
    /// a predicate on a field named `offset`).
    fn is_clause_start(&self) -> bool {
        // Any number: a count above `i64::MAX` is a `UInt`, and a fraction is refused by
        // `count` as not a whole number rather than read as a field named `limit`.
        let number = |token: Option<&Token>| matches!(token, Some(Token::Int(_) | Token::UInt(_) | Token::Float(_)));
        let count_follows = match self.peek_at(1) {
            token if number(token) => true,
            Some(Token::Symbol("-")) => number(self.peek_at(2)) && (self.peek_at(3).is_none() || self.is_word_at(3, "offset")),
            _ => false,
        };
        let count_clause = self.is_word_at(0, "limit") || self.is_word_at(0, "offset");
        (self.is_word_at(0, "order") && self.is_word_at(1, "by")) || (count_clause && count_follows)
    }

    fn order_key(&mut self) -> Result<OrderKey, ParseError> {
        let path = self.field_path("a field to order by")?;
        let order = if self.keyword("desc") {
            Order::Desc
        } else {
            self.keyword("asc");
            Order::Asc
        };
        let nulls = if self.keyword("nulls") {
            if self.keyword("first") {
                Nulls::First
            } else if self.keyword("last") {
                Nulls::Last
            } else {
                return Err(self.expected("`first` or `last`"));
            }
        } else {
            order.default_nulls()
        };
        Ok(OrderKey { path, order, nulls })
    }

    fn count(&mut self, clause: &str) -> Result<usize, ParseError> {
        let count = match self.peek() {
            Some(Token::Int(count)) => u64::try_from(*count).ok(),
            Some(Token::UInt(count)) => Some(*count),
            _ => None,
        };
        let Some(count) = count else { return Err(self.expected("a whole number (0 or more)")) };
        let count = usize::try_from(count).map_err(|_| self.error_at_next(format!("`{clause}` is too large")))?;
        self.next += 1;
        Ok(count)
    }

    /// A field's dotted path, where the grammar needs one.
    fn field_path(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek() {
            Some(Token::Ident(word)) if !is_reserved(word) => {
                let word = word.clone();
                if word.split('.').any(str::is_empty) {
                    return Err(self.error_at_next(format!("bad field path `{word}` (a step is empty)")));
                }
                self.next += 1;
                Ok(word)
            }
            _ => Err(self.expected(what)),
        }
    }

    // ---------------------------------------------------------------- the predicate

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while self.keyword("or") {
            left = left.or(self.and()?);
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.not()?;
        while self.keyword("and") {
            left = left.and(self.not()?);
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.keyword("not") {
            return self.nested(|parser| Ok(!parser.not()?));
        }
        // `exists FIELD`; a field named `exists` is never followed by another field, but may be
        // by `starts with`, `ends with` or `order by` (two words that no field is followed by).
        let two_words = |first: &str, second: &str| self.is_word_at(1, first) && self.is_word_at(2, second);
        let clause_follows = two_words("starts", "with") || two_words("ends", "with") || two_words("order", "by");
        if self.is_word_at(0, "exists") && !clause_follows && matches!(self.peek_at(1), Some(Token::Ident(word)) if !is_reserved(word)) {
            self.next += 1;
            let path = self.field_path("a field after `exists`")?;
            return Ok(super::field(&path).is_not_null());
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr, ParseError> {
        let left = self.sum()?;
        let compare = [
            ("==", CompareOp::Eq),
            ("=", CompareOp::Eq),
            ("!=", CompareOp::Ne),
            ("<>", CompareOp::Ne),
            ("<=", CompareOp::Le),
            (">=", CompareOp::Ge),
            ("<", CompareOp::Lt),
            (">", CompareOp::Gt),
        ];
        for (symbol, op) in compare {
            if self.symbol(symbol) {
                return Ok(Expr::Compare(Box::new(left), op, Box::new(self.operand()?)));
            }
        }
        if self.keyword("is") {
            return self.is_test(left);
        }
        if self.keyword("exists") {
            return match left {
                Expr::Field(_) => Ok(left.is_not_null()),
                _ => Err(self.error_at_next("`exists` needs a field on its left")),
            };
        }
        let negated = self.keyword("not");
        if self.keyword("in") {
            self.expect_symbol("(")?;
            let mut list = vec![self.literal()?];
            while self.symbol(",") {
                list.push(self.literal()?);
            }
            self.expect_symbol(")")?;
            return Ok(Expr::In(Box::new(left), list, negated));
        }
        let test = self.negatable_test(left)?;
        match (test, negated) {
            (Ok(test), false) => Ok(test),
            (Ok(test), true) => Ok(!test),
            (Err(left), false) => Ok(left),
            (Err(_), true) => Err(self.expected("`in`, `between`, `contains`, `starts with` or `ends with`")),
        }
    }

    /// A value on the right of a comparison or in a range.
    fn operand(&mut self) -> Result<Expr, ParseError> {
        if self.peek().is_none() || self.at_predicate_end() {
            return Err(self.expected("a value"));
        }
        self.sum()
    }

    /// Whether the next token ends a predicate: a keyword, a `)` or a `,`.
    fn at_predicate_end(&self) -> bool {
        match self.peek() {
            Some(Token::Ident(word)) => is_reserved(word) && !["true", "false", "null"].iter().any(|v| v.eq_ignore_ascii_case(word)),
            Some(Token::Symbol(symbol)) => matches!(*symbol, ")" | ","),
            _ => false,
        }
    }

    /// `between`, `contains`, `starts with` and `ends with` on `left`, which a `not` may
    /// precede; `Err(left)` when none follows.
    fn negatable_test(&mut self, left: Expr) -> Result<Result<Expr, Expr>, ParseError> {
        if self.keyword("between") {
            let low = self.operand()?;
            if !self.keyword("and") {
                return Err(self.expected("`and` in `between … and …`"));
            }
            return Ok(Ok(left.between(low, self.operand()?)));
        }
        if self.keyword("contains") {
            let value = self.literal_after("a value")?;
            return Ok(Ok(Expr::Contains(Box::new(left), value)));
        }
        let string_op = if self.keyword("starts_with") || self.keywords("starts", "with") {
            StringOp::StartsWith
        } else if self.keyword("ends_with") || self.keywords("ends", "with") {
            StringOp::EndsWith
        } else {
            return Ok(Err(left));
        };
        match self.peek() {
            Some(Token::Str(text)) => {
                let text = text.clone();
                self.next += 1;
                Ok(Ok(Expr::Str(Box::new(left), string_op, text)))
            }
            _ => Err(self.expected("a string")),
        }
    }

    /// After `is`: `[not] null`, or an enum variant.
    fn is_test(&mut self, left: Expr) -> Result<Expr, ParseError> {
        let negated = self.keyword("not");
        if let (Expr::Field(path), Some(spanned)) = (&left, self.tokens.get(self.next))
            && self.is_word_at(0, "null")
        {
            self.null_tests.push((path.to_string(), self.text[spanned.start..spanned.end].to_owned(), spanned.start));
        }
        if self.keyword("null") {
            return Ok(Expr::IsNull(Box::new(left), negated));
        }
        let variant = match self.peek() {
            Some(Token::Ident(variant)) if !negated && !is_reserved(variant) && !variant.contains('.') => variant.clone(),
            _ if negated => return Err(self.expected("`null`")),
            _ => return Err(self.expected("`null`, `not null` or an enum variant")),
        };
        match &left {
            Expr::Field(path) => {
                self.next += 1;
                Ok(Expr::Variant(path.clone(), variant))
            }
            _ => Err(self.error_at_next("a variant test needs a field on its left")),
        }
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.atom()?;
        loop {
            let op = if self.symbol("+") {
                ArithOp::Add
            } else if self.symbol("-") {
                ArithOp::Sub
            } else if self.symbol("%") {
                ArithOp::Rem
            } else {
                return Ok(left);
            };
            left = Expr::Arith(Box::new(left), op, Box::new(self.atom()?));
        }
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        if self.symbol("(") {
            let inner = self.nested(|parser| parser.or())?;
            self.expect_symbol(")")?;
            return Ok(inner);
        }
        match self.peek() {
            Some(Token::Ident(word)) if is_literal_word(word) => {
                let start = self.tokens[self.next].start;
                self.literal_words.push((word.clone(), start));
                Ok(Expr::Literal(self.literal()?))
            }
            Some(Token::Ident(word)) if !is_reserved(word) => Ok(Expr::Field(super::FieldPath::new(&self.field_path("a field")?))),
            Some(Token::Str(_) | Token::Int(_) | Token::UInt(_) | Token::Float(_) | Token::Symbol("-")) => {
                Ok(Expr::Literal(self.literal()?))
            }
            _ => Err(self.expected("a field, a value or `(`")),
        }
    }

    /// A literal, or "expected WHAT after …".
    fn literal_after(&mut self, what: &str) -> Result<Literal, ParseError> {
        let is_literal = match self.peek() {
            Some(Token::Ident(word)) => is_literal_word(word),
            Some(Token::Str(_) | Token::Int(_) | Token::UInt(_) | Token::Float(_) | Token::Symbol("-")) => true,
            _ => false,
        };
        if !is_literal {
            return Err(self.expected(what));
        }
        self.literal()
    }

    fn literal(&mut self) -> Result<Literal, ParseError> {
        let negative = self.symbol("-");
        let literal = match self.peek() {
            Some(Token::Int(int)) => {
                Literal::Int(if negative { int.checked_neg().ok_or_else(|| self.error_at_next("number too large"))? } else { *int })
            }
            // `-9223372036854775808` is i64::MIN; a negative beyond i64 is a float literal when
            // a float holds it exactly (as an integer beyond u64 is), and out of range otherwise.
            Some(Token::UInt(uint)) if negative => match i64::try_from(i128::from(*uint).wrapping_neg()) {
                Ok(int) => Literal::Int(int),
                Err(_) if is_exact(*uint as f64, &uint.to_string()) => Literal::Float(-(*uint as f64)),
                Err(_) => return Err(self.error_at_next(integer_out_of_range(&format!("-{uint}")))),
            },
            Some(Token::UInt(uint)) => Literal::UInt(*uint),
            Some(Token::Float(float)) => Literal::Float(if negative { -float } else { *float }),
            Some(Token::Str(text)) if !negative => Literal::Str(text.clone()),
            Some(Token::Ident(word)) if !negative && word.eq_ignore_ascii_case("true") => Literal::Bool(true),
            Some(Token::Ident(word)) if !negative && word.eq_ignore_ascii_case("false") => Literal::Bool(false),
            Some(Token::Ident(word)) if !negative && word.eq_ignore_ascii_case("null") => Literal::Null,
            _ if negative => return Err(self.expected("a number")),
            _ => return Err(self.expected("a value")),
        };
        self.next += 1;
        Ok(literal)
    }
}

/// Whether `float` is exactly the integer written in decimal digits `digits`.
fn is_exact(float: f64, digits: &str) -> bool {
    let digits = digits.trim_start_matches('0');
    float.is_finite() && format!("{float:.0}") == if digits.is_empty() { "0" } else { digits }
}

/// Whether the number written as `number` (digits, a fraction, an exponent) is not zero: a
/// digit of its mantissa is not `0`.
fn is_nonzero(number: &str) -> bool {
    number.split(['e', 'E']).next().is_some_and(|mantissa| mantissa.bytes().any(|byte| matches!(byte, b'1'..=b'9')))
}

/// The error for an integer literal that neither an integer nor a float holds exactly.
fn integer_out_of_range(number: &str) -> String {
    format!(
        "number {number} is out of range: an integer literal is exact, from -2**63 to 2**64-1, \
         or beyond them an integer a float holds exactly (such as 2**70)"
    )
}

fn is_literal_word(word: &str) -> bool {
    ["true", "false", "null"].iter().any(|literal| literal.eq_ignore_ascii_case(word))
}

/// Lexes `text` into a parser, refusing text longer than [`QUERY_LEN_MAX`].
fn parser(text: &str) -> Result<Parser<'_>, ParseError> {
    if text.len() > QUERY_LEN_MAX {
        return Err(ParseError { column: 1, message: format!("query longer than {QUERY_LEN_MAX} bytes") });
    }
    let tokens = Lexer { text, tokens: Vec::new() }.run()?;
    Ok(Parser { text, tokens, next: 0, depth: 0, literal_words: Vec::new(), null_tests: Vec::new() })
}

/// Refuses an expression deeper than [`super::EXPR_DEPTH_MAX`]: a long chain of `and`s or
/// `or`s is deep without any parentheses.
fn check_depth(expr: &Expr) -> Result<(), ParseError> {
    if super::limits::within_depth(expr, super::EXPR_DEPTH_MAX) {
        return Ok(());
    }
    Err(ParseError { column: 1, message: format!("expression deeper than {} levels", super::EXPR_DEPTH_MAX) })
}

impl Expr {
    /// Parses a predicate in the text syntax (see the module documentation and
    /// `docs/query.md`); for a whole query with `order by` and `limit`, see
    /// [`Statement::parse`].
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// let parsed = Expr::parse(r#"priority > 2500 AND NOT (tag starts with "a" or tag IS NULL)"#).unwrap();
    /// assert_eq!(parsed, field("priority").gt(2500).and(!field("tag").starts_with("a").or(field("tag").is_null())));
    /// assert_eq!(Expr::parse("priority >").unwrap_err().column, 11);
    /// ```
    pub fn parse(text: &str) -> Result<Expr, ParseError> {
        let mut parser = parser(text)?;
        if parser.peek().is_none() {
            return Err(parser.expected("a predicate"));
        }
        let expr = parser.or()?;
        if parser.next != parser.tokens.len() {
            return Err(parser.expected("`and`, `or` or the end of the predicate"));
        }
        check_depth(&expr)?;
        Ok(expr)
    }
}

impl Statement {
    /// Parses a whole query: an optional predicate, then `order by`, `limit` and `offset`
    /// (see `docs/query.md`).
    ///
    /// ```
    /// use tessera::query::{field, Nulls, Order, OrderKey, Statement};
    /// let query = Statement::parse("age >= 18 ORDER BY city, age DESC NULLS LAST LIMIT 10 OFFSET 20").unwrap();
    /// assert_eq!(query.predicate, Some(field("age").ge(18)));
    /// assert_eq!(query.order_by, [OrderKey::new("city", Order::Asc), OrderKey::new("age", Order::Desc).nulls(Nulls::Last)]);
    /// assert_eq!((query.limit, query.offset), (Some(10), 20));
    /// assert_eq!(Statement::parse("order by name").unwrap().predicate, None);
    /// ```
    pub fn parse(text: &str) -> Result<Statement, ParseError> {
        Self::parse_for_fields(text, |_| false, |_, _| false)
    }

    /// [`Statement::parse`] for a collection whose top-level fields are those `is_field` says
    /// yes to: an operand `true`, `false` or `null` spelt as a field of the collection is named
    /// (`null == 1`, on a record with a field `null`) is an error at its column, since the text
    /// syntax reads it as the value, never the field, and the query would answer another
    /// question than the one asked. `x is null` reads no operand word and stays, unless
    /// `names_variant(path, word)` says the field `x` has an enum variant spelt `word` (`status
    /// is Null`, on an enum with a variant `Null`): the text reads the NULL test, and the
    /// variant test may have been meant, so that too is an error at its column.
    pub(crate) fn parse_for_fields(
        text: &str,
        is_field: impl Fn(&str) -> bool,
        names_variant: impl Fn(&str, &str) -> bool,
    ) -> Result<Statement, ParseError> {
        let mut parser = parser(text)?;
        let statement = parser.statement()?;
        if let Some((word, start)) = parser.literal_words.iter().find(|(word, _)| is_field(word)) {
            return Err(ParseError {
                column: column(text, *start),
                message: format!(
                    "`{word}` is read as a value, but the collection also has a field named `{word}`, which the text syntax \
                     cannot name (query that field with the typed API)"
                ),
            });
        }
        if let Some((path, word, start)) = parser.null_tests.iter().find(|(path, word, _)| names_variant(path, word)) {
            return Err(ParseError {
                column: column(text, *start),
                message: format!(
                    "`{path} is {word}` is read as the NULL test, but `{path}` also has an enum variant named `{word}`, which the \
                     text syntax cannot test with `is` (compare it as `{path} == \"{word}\"` if it carries no payload, or use \
                     the typed API's `is_variant`)"
                ),
            });
        }
        if let Some(predicate) = &statement.predicate {
            check_depth(predicate)?;
        }
        Ok(statement)
    }
}

//! The text syntax of queries, for the CLI and for bindings.
//!
//! ```text
//! expr      := or
//! or        := and ("or" and)*
//! and       := not ("and" not)*
//! not       := "not" not | predicate
//! predicate := sum [ ("=="|"!="|"<"|"<="|">"|">=") sum
//!                  | "between" sum "and" sum
//!                  | ["not"] "in" "(" literal ("," literal)* ")"
//!                  | "is" ["not"] "null" | "is" VARIANT
//!                  | ("starts_with"|"ends_with"|"contains") STRING ]
//! sum       := atom (("+"|"-"|"%") atom)*
//! atom      := literal | FIELD | "(" expr ")"
//! literal   := NUMBER | "-" NUMBER | STRING | "true" | "false" | "null"
//! ```
//!
//! A field is a dotted path of identifiers (`pos.x`); strings are double-quoted with `\"`,
//! `\\`, `\n` and `\t` escapes. Keywords are lower case. Errors carry the 1-based column.

use super::{ArithOp, CompareOp, Expr, Literal, StringOp};

/// Longest query text accepted, and deepest nesting.
const QUERY_LEN_MAX: usize = 64 * 1024;
const NESTING_MAX: usize = 128;

/// A query that does not parse: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query does not parse at column {column}: {message}")]
pub struct ParseError {
    /// 1-based column (in characters) of the problem.
    pub column: usize,
    /// What was expected or found.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    Float(f64),
    Symbol(&'static str),
}

struct Lexer<'t> {
    text: &'t str,
    tokens: Vec<(Token, usize)>,
}

const SYMBOLS: [&str; 14] = ["==", "!=", "<=", ">=", "<", ">", "+", "-", "%", "(", ")", ",", "=", "!"];

fn column(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].chars().count() + 1
}

impl<'t> Lexer<'t> {
    fn error(&self, byte: usize, message: impl Into<String>) -> ParseError {
        ParseError { column: column(self.text, byte), message: message.into() }
    }

    fn run(mut self) -> Result<Vec<(Token, usize)>, ParseError> {
        let bytes = self.text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let byte = bytes[pos];
            if byte.is_ascii_whitespace() {
                pos += 1;
            } else if byte == b'"' {
                let (text, end) = self.string(pos)?;
                self.tokens.push((Token::Str(text), pos));
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
                let number = &self.text[start..pos];
                let token = match number.parse::<i64>() {
                    Ok(int) => Token::Int(int),
                    Err(_) => match number.parse::<f64>() {
                        Ok(float) if float.is_finite() => Token::Float(float),
                        // A literal beyond f64's range would silently become infinity.
                        Ok(_) => return Err(self.error(start, format!("number {number:?} is out of range"))),
                        Err(_) => return Err(self.error(start, format!("bad number {number:?}"))),
                    },
                };
                self.tokens.push((token, start));
            } else if byte.is_ascii_alphabetic() || byte == b'_' {
                let start = pos;
                while pos < bytes.len() && (bytes[pos].is_ascii_alphanumeric() || matches!(bytes[pos], b'_' | b'.')) {
                    pos += 1;
                }
                self.tokens.push((Token::Ident(self.text[start..pos].to_owned()), start));
            } else {
                let symbol = SYMBOLS.iter().find(|symbol| self.text[pos..].starts_with(**symbol)).ok_or_else(|| {
                    let found = self.text[pos..].chars().next().unwrap_or(' ');
                    self.error(pos, format!("unexpected character {found:?}"))
                })?;
                if matches!(*symbol, "=" | "!") {
                    return Err(self.error(pos, format!("unexpected {symbol:?} (did you mean \"==\" or \"!=\"?)")));
                }
                self.tokens.push((Token::Symbol(symbol), pos));
                pos += symbol.len();
            }
        }
        Ok(self.tokens)
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
                    _ => return Err(self.error(start + 1 + offset, "bad escape in string")),
                },
                other => out.push(other),
            }
        }
        Err(self.error(start, "unterminated string"))
    }
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<(Token, usize)>,
    next: usize,
    depth: usize,
}

fn is_keyword(word: &str) -> bool {
    matches!(word, "and" | "or" | "not" | "between" | "in" | "is" | "null" | "true" | "false" | "starts_with" | "ends_with" | "contains")
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        let byte = self.tokens.get(self.next).map_or(self.text.len(), |(_, at)| *at);
        ParseError { column: column(self.text, byte), message: message.into() }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(token, _)| token)
    }

    fn keyword(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Ident(found)) if found == word) {
            self.next += 1;
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
        if self.symbol(symbol) {
            Ok(())
        } else {
            Err(self.error(format!("expected {symbol:?}")))
        }
    }

    fn nested<T>(&mut self, parse: impl FnOnce(&mut Self) -> Result<T, ParseError>) -> Result<T, ParseError> {
        if self.depth >= NESTING_MAX {
            return Err(self.error("nesting too deep"));
        }
        self.depth += 1;
        let result = parse(self);
        self.depth -= 1;
        result
    }

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
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr, ParseError> {
        let left = self.sum()?;
        let compare = [
            ("==", CompareOp::Eq),
            ("!=", CompareOp::Ne),
            ("<=", CompareOp::Le),
            (">=", CompareOp::Ge),
            ("<", CompareOp::Lt),
            (">", CompareOp::Gt),
        ];
        for (symbol, op) in compare {
            if self.symbol(symbol) {
                return Ok(Expr::Compare(Box::new(left), op, Box::new(self.sum()?)));
            }
        }
        if self.keyword("between") {
            let low = self.sum()?;
            if !self.keyword("and") {
                return Err(self.error("expected \"and\" in between"));
            }
            return Ok(left.between(low, self.sum()?));
        }
        let negated_in = self.keyword("not");
        if self.keyword("in") {
            self.expect_symbol("(")?;
            let mut list = vec![self.literal()?];
            while self.symbol(",") {
                list.push(self.literal()?);
            }
            self.expect_symbol(")")?;
            return Ok(Expr::In(Box::new(left), list, negated_in));
        }
        if negated_in {
            return Err(self.error("expected \"in\" after \"not\""));
        }
        if self.keyword("is") {
            let negated = self.keyword("not");
            if self.keyword("null") {
                return Ok(Expr::IsNull(Box::new(left), negated));
            }
            let Some(Token::Ident(variant)) = self.peek().cloned() else { return Err(self.error("expected \"null\" or an enum variant")) };
            if negated || is_keyword(&variant) {
                return Err(self.error("expected \"null\""));
            }
            self.next += 1;
            return match &left {
                Expr::Field(path) => Ok(Expr::Variant(path.clone(), variant)),
                _ => Err(self.error("a variant test needs a field on its left")),
            };
        }
        for (word, op) in [("starts_with", StringOp::StartsWith), ("ends_with", StringOp::EndsWith), ("contains", StringOp::Contains)] {
            if self.keyword(word) {
                let Some(Token::Str(text)) = self.peek().cloned() else {
                    return Err(self.error(format!("expected a string after {word:?}")));
                };
                self.next += 1;
                return Ok(Expr::Str(Box::new(left), op, text));
            }
        }
        Ok(left)
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
        match self.peek().cloned() {
            Some(Token::Ident(word)) if !is_keyword(&word) || matches!(word.as_str(), "true" | "false" | "null") => {
                if is_keyword(&word) {
                    return Ok(Expr::Literal(self.literal()?));
                }
                if word.split('.').any(str::is_empty) {
                    return Err(self.error(format!("bad field path {word:?}")));
                }
                self.next += 1;
                Ok(Expr::Field(super::FieldPath::new(&word)))
            }
            Some(Token::Str(_) | Token::Int(_) | Token::Float(_) | Token::Symbol("-")) => Ok(Expr::Literal(self.literal()?)),
            Some(_) => Err(self.error("expected a field, a value or \"(\"")),
            None => Err(self.error("unexpected end of query")),
        }
    }

    fn literal(&mut self) -> Result<Literal, ParseError> {
        let negative = self.symbol("-");
        let literal = match self.peek().cloned() {
            Some(Token::Int(int)) => {
                Literal::Int(if negative { int.checked_neg().ok_or_else(|| self.error("number too large"))? } else { int })
            }
            Some(Token::Float(float)) => Literal::Float(if negative { -float } else { float }),
            Some(Token::Str(text)) if !negative => Literal::Str(text),
            Some(Token::Ident(word)) if !negative && word == "true" => Literal::Bool(true),
            Some(Token::Ident(word)) if !negative && word == "false" => Literal::Bool(false),
            Some(Token::Ident(word)) if !negative && word == "null" => Literal::Null,
            _ => return Err(self.error("expected a value")),
        };
        self.next += 1;
        Ok(literal)
    }
}

impl Expr {
    /// Parses the text syntax (see the module documentation).
    ///
    /// ```
    /// use tessera::query::{field, Expr};
    /// let parsed = Expr::parse(r#"priority > 2500 and not (tag starts_with "a" or tag is null)"#).unwrap();
    /// assert_eq!(parsed, field("priority").gt(2500).and(!field("tag").starts_with("a").or(field("tag").is_null())));
    /// assert_eq!(Expr::parse("priority >").unwrap_err().column, 11);
    /// ```
    pub fn parse(text: &str) -> Result<Expr, ParseError> {
        if text.len() > QUERY_LEN_MAX {
            return Err(ParseError { column: 1, message: format!("query longer than {QUERY_LEN_MAX} bytes") });
        }
        let tokens = Lexer { text, tokens: Vec::new() }.run()?;
        let mut parser = Parser { text, tokens, next: 0, depth: 0 };
        let expr = parser.or()?;
        if parser.next != parser.tokens.len() {
            return Err(parser.error("unexpected text after the query"));
        }
        // A long chain of `and`s or `or`s is deep without any parentheses.
        if !super::limits::within_depth(&expr, super::EXPR_DEPTH_MAX) {
            return Err(ParseError { column: 1, message: format!("expression deeper than {} levels", super::EXPR_DEPTH_MAX) });
        }
        Ok(expr)
    }
}

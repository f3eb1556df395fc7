//! Key paths: `friends[0].name`, `[123].name`, `a.b[2][0]`.
//!
//! Grammar: a path is a sequence of steps. A key step is a run of characters other than `.`
//! and `[`; it follows the start of the path or a `.`. An index step is `[` decimal digits `]`.
//! The empty path names the value itself.

use crate::error::PathError;

/// One step of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// Longest path accepted, in steps.
pub(crate) const PATH_STEPS_MAX: usize = 256;

/// The steps of a path, parsed as they are taken (no allocation).
pub(crate) struct Steps<'p> {
    path: &'p str,
    pos: usize,
    /// At the start or after a '.', where a key must come.
    expect_key: bool,
    count: usize,
}

impl<'p> Steps<'p> {
    pub(crate) fn new(path: &'p str) -> Self {
        Steps { path, pos: 0, expect_key: true, count: 0 }
    }

    fn error(&mut self, column: usize, reason: &'static str) -> Option<Result<Step<'p>, PathError>> {
        self.pos = self.path.len(); // stop after an error
        Some(Err(PathError { column, reason }))
    }

    /// After a step: accept the end, `[`, or `.` followed by a key.
    fn after_step(&mut self) -> Result<(), PathError> {
        let bytes = self.path.as_bytes();
        self.expect_key = false;
        match bytes.get(self.pos) {
            None | Some(b'[') => Ok(()),
            Some(b'.') => {
                self.pos += 1;
                self.expect_key = true;
                if self.pos == bytes.len() {
                    return Err(PathError { column: self.pos + 1, reason: "expected a key after '.'" });
                }
                Ok(())
            }
            Some(_) => Err(PathError { column: self.pos + 1, reason: "expected '.' or '[' after ']'" }),
        }
    }
}

impl<'p> Iterator for Steps<'p> {
    type Item = Result<Step<'p>, PathError>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.path.as_bytes();
        if self.pos >= bytes.len() {
            return None;
        }
        if self.count >= PATH_STEPS_MAX {
            return self.error(self.pos + 1, "too many steps");
        }
        self.count += 1;
        match bytes[self.pos] {
            b'[' => {
                let digits_start = self.pos + 1;
                let mut end = digits_start;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                if end == digits_start || bytes.get(end) != Some(&b']') {
                    return self.error(end + 1, "expected digits and ']'");
                }
                let Ok(index) = self.path[digits_start..end].parse() else {
                    return self.error(digits_start + 1, "index too large");
                };
                self.pos = end + 1;
                match self.after_step() {
                    Ok(()) => Some(Ok(Step::Index(index))),
                    Err(error) => self.error(error.column, error.reason),
                }
            }
            b'.' => self.error(self.pos + 1, "empty key"),
            _ if self.expect_key => {
                let start = self.pos;
                while self.pos < bytes.len() && bytes[self.pos] != b'.' && bytes[self.pos] != b'[' {
                    self.pos += 1;
                }
                let key = &self.path[start..self.pos];
                if bytes.get(self.pos) == Some(&b'[') {
                    self.expect_key = false;
                    return Some(Ok(Step::Key(key)));
                }
                match self.after_step() {
                    Ok(()) => Some(Ok(Step::Key(key))),
                    Err(error) => self.error(error.column, error.reason),
                }
            }
            _ => self.error(self.pos + 1, "expected '.' or '['"),
        }
    }
}

/// All steps of a path, or the first error.
pub(crate) fn parse(path: &str) -> Result<Vec<Step<'_>>, PathError> {
    Steps::new(path).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Step::*;

    #[test]
    fn parses_keys_and_indexes() {
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("a").unwrap(), vec![Key("a")]);
        assert_eq!(parse("friends[0].name").unwrap(), vec![Key("friends"), Index(0), Key("name")]);
        assert_eq!(parse("[123].name").unwrap(), vec![Index(123), Key("name")]);
        assert_eq!(parse("a.b[2][0]").unwrap(), vec![Key("a"), Key("b"), Index(2), Index(0)]);
        assert_eq!(parse("ключ.ü").unwrap(), vec![Key("ключ"), Key("ü")]);
    }

    #[test]
    fn rejects_malformed_paths_with_a_column() {
        assert_eq!(parse("a..b").unwrap_err().column, 3);
        assert_eq!(parse(".a").unwrap_err().column, 1);
        assert_eq!(parse("a.").unwrap_err().column, 3);
        assert_eq!(parse("a[").unwrap_err().column, 3);
        assert_eq!(parse("a[x]").unwrap_err().column, 3);
        assert_eq!(parse("a[1]b").unwrap_err().column, 5);
        assert!(parse("[99999999999999999999999]").is_err());
        assert!(parse(&"[0]".repeat(PATH_STEPS_MAX + 1)).is_err());
    }
}

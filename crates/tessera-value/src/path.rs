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

pub(crate) fn parse(path: &str) -> Result<Vec<Step<'_>>, PathError> {
    let bytes = path.as_bytes();
    let mut steps = Vec::new();
    let mut pos = 0;
    let mut expect_key = true; // at the start or after '.'
    while pos < bytes.len() {
        if steps.len() >= PATH_STEPS_MAX {
            return Err(PathError { column: pos + 1, reason: "too many steps" });
        }
        match bytes[pos] {
            b'[' => {
                let digits_start = pos + 1;
                let mut end = digits_start;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                if end == digits_start || bytes.get(end) != Some(&b']') {
                    return Err(PathError { column: end + 1, reason: "expected digits and ']'" });
                }
                let index = path[digits_start..end].parse().map_err(|_| PathError { column: digits_start + 1, reason: "index too large" })?;
                steps.push(Step::Index(index));
                pos = end + 1;
                expect_key = false;
                match bytes.get(pos) {
                    None | Some(b'[') => {}
                    Some(b'.') => {
                        pos += 1;
                        expect_key = true;
                        if pos == bytes.len() {
                            return Err(PathError { column: pos + 1, reason: "expected a key after '.'" });
                        }
                    }
                    Some(_) => return Err(PathError { column: pos + 1, reason: "expected '.' or '[' after ']'" }),
                }
            }
            b'.' => return Err(PathError { column: pos + 1, reason: "empty key" }),
            _ if expect_key => {
                let start = pos;
                while pos < bytes.len() && bytes[pos] != b'.' && bytes[pos] != b'[' {
                    pos += 1;
                }
                steps.push(Step::Key(&path[start..pos]));
                expect_key = false;
                if bytes.get(pos) == Some(&b'.') {
                    pos += 1;
                    expect_key = true;
                    if pos == bytes.len() {
                        return Err(PathError { column: pos + 1, reason: "expected a key after '.'" });
                    }
                }
            }
            _ => return Err(PathError { column: pos + 1, reason: "expected '.' or '['" }),
        }
    }
    Ok(steps)
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

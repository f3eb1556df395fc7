//! JSON text to a document in one pass, with no intermediate tree (RFC 8259, strictly).
//!
//! The parser is iterative (an explicit stack of open containers, bounded by the depth limit)
//! and feeds the [`Encoder`] directly: string bytes go from the input into the output once.
//!
//! Decisions where RFC 8259 leaves room:
//! - Any JSON text is accepted at the top level, scalars included.
//! - A `\u` escape of a lone surrogate is an error ([`JsonErrorKind::LoneSurrogate`]), because
//!   the result must be UTF-8.
//! - An object that repeats a key keeps the last value (as serde_json and JavaScript do).
//! - Integers that fit i64 (or u64) stay integers; larger ones, and anything with a fraction or
//!   exponent, become doubles (stored as f32 when that is lossless). `-0` is the double -0.0.

use crate::encoder::Encoder;
use crate::error::{JsonError, JsonErrorKind};
use crate::layout::DEPTH_DEFAULT;
use crate::packed::PackedValue;
use crate::shared_keys::SharedKeys;

/// Options for [`from_json_with`].
///
/// ```
/// use tessera_value::{from_json_with, JsonErrorKind, JsonOptions};
/// let options = JsonOptions { depth_max: 2, ..JsonOptions::default() };
/// assert!(from_json_with(b"[[1]]", &options).is_ok());
/// assert_eq!(from_json_with(b"[[[1]]]", &options).unwrap_err().kind, JsonErrorKind::TooDeep);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct JsonOptions<'k> {
    /// Deepest nesting of arrays and objects accepted (at most 254).
    pub depth_max: u8,
    /// Shared keys to encode dict keys with.
    pub shared_keys: Option<&'k SharedKeys>,
}

impl Default for JsonOptions<'_> {
    fn default() -> Self {
        JsonOptions { depth_max: DEPTH_DEFAULT, shared_keys: None }
    }
}

/// Converts JSON text to a document.
///
/// ```
/// let bytes = tessera_value::from_json(br#"{"a": [1, 2.5, "x", null]}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// assert_eq!(doc.root().to_json(), r#"{"a":[1,2.5,"x",null]}"#);
///
/// let error = tessera_value::from_json(b"[1,\n 01]").unwrap_err();
/// assert_eq!((error.line, error.column), (2, 3));
/// ```
pub fn from_json(input: &[u8]) -> Result<Vec<u8>, JsonError> {
    from_json_with(input, &JsonOptions::default())
}

/// Converts JSON text to a document, with options.
///
/// ```
/// use tessera_value::{from_json_with, Doc, JsonOptions, SharedKeys};
/// let mut keys = SharedKeys::new();
/// keys.add("name").unwrap();
/// let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
/// let bytes = from_json_with(br#"{"name": "Ada"}"#, &options).unwrap();
/// assert_eq!(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root().get("name").unwrap().as_str(), Some("Ada"));
/// assert!(Doc::from_untrusted(&bytes).is_err()); // it needs the table
/// ```
pub fn from_json_with(input: &[u8], options: &JsonOptions<'_>) -> Result<Vec<u8>, JsonError> {
    let mut encoder = match options.shared_keys {
        Some(shared) => Encoder::with_shared_keys(shared),
        None => Encoder::new(),
    };
    encoder.reserve(input.len() / 4 * 3 + 64);
    let mut parser = Parser {
        input,
        pos: 0,
        encoder,
        scratch: Vec::new(),
        open: Vec::new(),
        numbers: Vec::new(),
        unsigned: Vec::new(),
        depth_max: options.depth_max.min(254),
    };
    parser.run()?;
    // The parser closed every container, so `finish` can only fail on the format's limits
    // (more than 2^32 keys or atoms).
    parser.encoder.finish().map_err(|_| JsonError::at(JsonErrorKind::TooLarge, input, input.len()))
}

struct Parser<'i, 'k> {
    input: &'i [u8],
    pos: usize,
    encoder: Encoder<'k>,
    scratch: Vec<u8>,
    /// Open containers, innermost last: true for an object.
    open: Vec<bool>,
    /// The numbers of the array being read by `number_run`.
    numbers: Vec<PackedValue>,
    /// Integers above `i64::MAX` among them, by index.
    unsigned: Vec<(usize, u64)>,
    depth_max: u8,
}

impl<'i, 'k> Parser<'i, 'k> {
    fn error(&self, kind: JsonErrorKind) -> JsonError {
        JsonError::at(kind, self.input, self.pos)
    }

    fn error_at(&self, kind: JsonErrorKind, pos: usize) -> JsonError {
        JsonError::at(kind, self.input, pos)
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    #[inline(always)]
    fn skip_whitespace(&mut self) {
        while let Some(&byte) = self.input.get(self.pos) {
            if !matches!(byte, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> JsonError {
        match self.peek() {
            None => self.error(JsonErrorKind::UnexpectedEnd),
            Some(byte) => self.error(JsonErrorKind::UnexpectedByte(byte)),
        }
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn run(&mut self) -> Result<(), JsonError> {
        'value: loop {
            self.skip_whitespace();
            let Some(byte) = self.peek() else { return Err(self.unexpected()) };
            match byte {
                b'{' | b'[' => {
                    let is_object = byte == b'{';
                    if self.open.len() >= self.depth_max as usize {
                        return Err(self.error(JsonErrorKind::TooDeep));
                    }
                    self.pos += 1;
                    self.skip_whitespace();
                    let closing = if is_object { b'}' } else { b']' };
                    if !is_object && matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
                        if !self.number_run()? {
                            self.open.push(false);
                            continue 'value;
                        }
                    } else {
                        let opened = if is_object { self.encoder.begin_dict() } else { self.encoder.begin_array() };
                        opened.map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                        if self.peek() == Some(closing) {
                            self.pos += 1;
                            let closed = if is_object { self.encoder.end_dict() } else { self.encoder.end_array() };
                            closed.map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                        } else {
                            self.open.push(is_object);
                            if is_object {
                                self.object_key()?;
                            }
                            continue 'value;
                        }
                    }
                }
                b'"' => {
                    self.pos += 1;
                    let bytes = self.string()?;
                    let slot = self.encoder.string_slot(bytes.as_bytes(self.input, &self.scratch));
                    self.place(slot)?;
                }
                b't' => self.literal(b"true", |e| e.push_bool(true))?,
                b'f' => self.literal(b"false", |e| e.push_bool(false))?,
                b'n' => self.literal(b"null", |e| e.push_null())?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return Err(self.unexpected()),
            }
            // After a value: close containers or move to the next element.
            loop {
                self.skip_whitespace();
                let Some(&is_object) = self.open.last() else {
                    if self.pos != self.input.len() {
                        return Err(self.error(JsonErrorKind::TrailingCharacters));
                    }
                    return Ok(());
                };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if is_object {
                            self.skip_whitespace();
                            self.object_key()?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if is_object => {
                        self.pos += 1;
                        self.open.pop();
                        self.encoder.end_dict().map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                    }
                    Some(b']') if !is_object => {
                        self.pos += 1;
                        self.open.pop();
                        self.encoder.end_array().map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                    }
                    _ => return Err(self.unexpected()),
                }
            }
        }
    }

    #[inline(always)]
    fn place(&mut self, slot: crate::encoder::Slot) -> Result<(), JsonError> {
        self.encoder.push_slot_unchecked(slot);
        Ok(())
    }

    /// Parses `"key" :` at the current position and hands the key to the encoder.
    fn object_key(&mut self) -> Result<(), JsonError> {
        if self.peek() != Some(b'"') {
            return Err(match self.peek() {
                None => self.error(JsonErrorKind::UnexpectedEnd),
                Some(_) => self.error(JsonErrorKind::KeyMustBeString),
            });
        }
        self.pos += 1;
        let key = self.string()?;
        let key = key.as_bytes(self.input, &self.scratch);
        // SAFETY: `string()` returns only spans it checked to be UTF-8: raw runs pass
        // `simdutf8` when they contain a byte >= 0x80, and escapes are decoded from `char`s.
        let key = unsafe { std::str::from_utf8_unchecked(key) };
        self.encoder.key_unchecked(key);
        self.skip_whitespace();
        self.expect(b':')
    }

    fn literal(
        &mut self,
        word: &'static [u8],
        push: impl FnOnce(&mut Encoder<'k>) -> Result<(), crate::EncodeError>,
    ) -> Result<(), JsonError> {
        let end = self.pos + word.len();
        if self.input.get(self.pos..end) != Some(word) {
            // Point at the first byte that differs.
            let mut at = self.pos;
            while at < end && self.input.get(at) == Some(&word[at - self.pos]) {
                at += 1;
            }
            let kind = match self.input.get(at) {
                None => JsonErrorKind::UnexpectedEnd,
                Some(&byte) => JsonErrorKind::UnexpectedByte(byte),
            };
            return Err(self.error_at(kind, at));
        }
        self.pos = end;
        push(&mut self.encoder).map_err(|_| self.error(JsonErrorKind::TooDeep))
    }

    /// Reads a string body (after the opening quote) up to and including the closing quote.
    #[inline]
    fn string(&mut self) -> Result<Span, JsonError> {
        let start = self.pos;
        let input = self.input;
        let (pos, has_high_bytes) = find_string_end(input, start);
        let high_bits = has_high_bytes as u64;
        match input.get(pos) {
            Some(b'"') => {
                if high_bits != 0 && simdutf8::basic::from_utf8(&input[start..pos]).is_err() {
                    return Err(self.utf8_error(start, pos));
                }
                self.pos = pos + 1;
                Ok(Span::Input(start, pos))
            }
            Some(b'\\') => self.escaped_string(start, pos, high_bits != 0),
            Some(_) => Err(self.error_at(JsonErrorKind::ControlCharacter, pos)),
            None => Err(self.error_at(JsonErrorKind::UnexpectedEnd, pos)),
        }
    }

    fn utf8_error(&self, start: usize, end: usize) -> JsonError {
        let valid = match std::str::from_utf8(&self.input[start..end]) {
            Ok(_) => end - start,
            Err(error) => error.valid_up_to(),
        };
        self.error_at(JsonErrorKind::InvalidUtf8, start + valid)
    }

    /// The slow path: a string with escapes, decoded into `scratch`.
    fn escaped_string(&mut self, start: usize, first_escape: usize, mut needs_check: bool) -> Result<Span, JsonError> {
        self.scratch.clear();
        let input = self.input;
        let mut run_start = start;
        let mut pos = first_escape;
        loop {
            match input.get(pos) {
                None => return Err(self.error_at(JsonErrorKind::UnexpectedEnd, pos)),
                Some(&byte @ (b'"' | b'\\')) => {
                    if needs_check && simdutf8::basic::from_utf8(&input[run_start..pos]).is_err() {
                        return Err(self.utf8_error(run_start, pos));
                    }
                    needs_check = false;
                    self.scratch.extend_from_slice(&input[run_start..pos]);
                    if byte == b'"' {
                        self.pos = pos + 1;
                        return Ok(Span::Scratch);
                    }
                    pos = self.escape(pos)?;
                    run_start = pos;
                }
                Some(0..=0x1F) => return Err(self.error_at(JsonErrorKind::ControlCharacter, pos)),
                Some(&byte) => {
                    needs_check |= byte >= 0x80;
                    pos += 1;
                }
            }
        }
    }

    /// Decodes the escape at `pos` (a backslash) into `scratch`; returns the position after it.
    fn escape(&mut self, pos: usize) -> Result<usize, JsonError> {
        let Some(&kind) = self.input.get(pos + 1) else {
            return Err(self.error_at(JsonErrorKind::UnexpectedEnd, pos + 1));
        };
        let simple = match kind {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode_escape(pos),
            _ => return Err(self.error_at(JsonErrorKind::InvalidEscape, pos)),
        };
        self.scratch.push(simple);
        Ok(pos + 2)
    }

    fn hex4(&self, pos: usize) -> Result<u32, JsonError> {
        let mut value = 0u32;
        for offset in 0..4 {
            let Some(&byte) = self.input.get(pos + offset) else {
                return Err(self.error_at(JsonErrorKind::UnexpectedEnd, pos + offset));
            };
            let digit = (byte as char).to_digit(16).ok_or_else(|| self.error_at(JsonErrorKind::InvalidEscape, pos + offset))?;
            value = value * 16 + digit;
        }
        Ok(value)
    }

    fn unicode_escape(&mut self, pos: usize) -> Result<usize, JsonError> {
        let first = self.hex4(pos + 2)?;
        let (code, next) = match first {
            0xD800..=0xDBFF => {
                if self.input.get(pos + 6..pos + 8) != Some(b"\\u") {
                    return Err(self.error_at(JsonErrorKind::LoneSurrogate, pos));
                }
                let second = self.hex4(pos + 8)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error_at(JsonErrorKind::LoneSurrogate, pos));
                }
                (0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00), pos + 12)
            }
            0xDC00..=0xDFFF => return Err(self.error_at(JsonErrorKind::LoneSurrogate, pos)),
            _ => (first, pos + 6),
        };
        let character = char::from_u32(code).ok_or_else(|| self.error_at(JsonErrorKind::LoneSurrogate, pos))?;
        let mut buffer = [0u8; 4];
        self.scratch.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes());
        Ok(next)
    }

    /// Parses the number at the current position.
    #[inline]
    fn parse_number(&mut self) -> Result<Number, JsonError> {
        let input = self.input;
        let start = self.pos;
        let mut pos = start;
        let negative = input[pos] == b'-';
        if negative {
            pos += 1;
        }
        let digits_start = pos;
        // The decimal significand (wrapping: it is only used when it has at most 19 digits,
        // which a u64 always holds), and the power of ten it is scaled by.
        let mut significand: u64 = 0;
        let integer_digits = match input.get(pos) {
            Some(b'0') => {
                pos += 1;
                0 // a lone zero: no significant digit
            }
            Some(b'1'..=b'9') => {
                while let Some(&digit @ b'0'..=b'9') = input.get(pos) {
                    significand = significand.wrapping_mul(10).wrapping_add((digit - b'0') as u64);
                    pos += 1;
                }
                pos - digits_start
            }
            _ => return Err(self.error_at(JsonErrorKind::InvalidNumber, pos)),
        };
        let mut integer_overflow = false;
        if integer_digits > FAST_DIGITS_MAX {
            // Twenty digits may still fit a u64; more never do.
            match std::str::from_utf8(&input[digits_start..pos]).ok().and_then(|text| text.parse::<u64>().ok()) {
                Some(value) => significand = value,
                None => integer_overflow = true,
            }
        }
        let mut overflow = integer_overflow;
        let mut is_float = false;
        let mut exponent: i64 = 0;
        if input.get(pos) == Some(&b'.') {
            pos += 1;
            let fraction_start = pos;
            while let Some(&digit @ b'0'..=b'9') = input.get(pos) {
                significand = significand.wrapping_mul(10).wrapping_add((digit - b'0') as u64);
                pos += 1;
            }
            let fraction_digits = pos - fraction_start;
            if fraction_digits == 0 {
                return Err(self.error_at(JsonErrorKind::InvalidNumber, pos));
            }
            // Leading zeros of a fraction after "0." count here too: conservative, and exact.
            overflow |= integer_digits + fraction_digits > FAST_DIGITS_MAX;
            exponent = -(fraction_digits.min(1 << 20) as i64);
            is_float = true;
        }
        if matches!(input.get(pos), Some(b'e' | b'E')) {
            pos += 1;
            let exponent_negative = input.get(pos) == Some(&b'-');
            if matches!(input.get(pos), Some(b'+' | b'-')) {
                pos += 1;
            }
            let exponent_start = pos;
            let mut written: i64 = 0;
            while let Some(&digit @ b'0'..=b'9') = input.get(pos) {
                written = (written * 10 + (digit - b'0') as i64).min(1 << 20);
                pos += 1;
            }
            if pos == exponent_start {
                return Err(self.error_at(JsonErrorKind::InvalidNumber, pos));
            }
            exponent += if exponent_negative { -written } else { written };
            is_float = true;
        }
        // A digit right after a leading zero ("01") is not JSON.
        if input[digits_start] == b'0' && matches!(input.get(digits_start + 1), Some(b'0'..=b'9')) {
            return Err(self.error_at(JsonErrorKind::InvalidNumber, digits_start + 1));
        }
        self.pos = pos;
        // `-0` is the double -0.0; an overflowing integer becomes a double.
        let is_integer = !(is_float || integer_overflow || (negative && significand == 0));
        if is_integer {
            if !negative {
                return Ok(match i64::try_from(significand) {
                    Ok(value) => Number::Int(value),
                    Err(_) => Number::UInt(significand),
                });
            } else if significand <= 1u64 << 63 {
                return Ok(Number::Int((significand as i64).wrapping_neg()));
            }
        } else if let Some(value) = (!overflow).then(|| fast_float(significand, exponent)).flatten() {
            return Ok(Number::Float(if negative { -value } else { value }));
        }
        self.parse_float(start, pos).map(Number::Float)
    }

    /// Parses a number and places it in the innermost container.
    fn number(&mut self) -> Result<(), JsonError> {
        let slot = match self.parse_number()? {
            Number::Int(value) => self.encoder.int_slot(value),
            Number::UInt(value) => self.encoder.uint_slot(value),
            Number::Float(value) => self.encoder.float_slot(value),
        };
        self.place(slot)
    }

    /// After `[`, at a number: reads the array's numbers into a packed vector. Returns true if
    /// the whole array was numbers of one class (it is then placed, `]` consumed); false if
    /// something else came first: the array is then open in the encoder with the numbers read
    /// so far, and the parser is at the start of the next element.
    fn number_run(&mut self) -> Result<bool, JsonError> {
        let mut values = std::mem::take(&mut self.numbers);
        values.clear();
        let mut packable = true;
        let closed = loop {
            match self.parse_number()? {
                Number::Int(value) => values.push(PackedValue::Int(value)),
                Number::Float(value) => values.push(PackedValue::Float(value)),
                Number::UInt(value) => {
                    // Beyond i64: no packed type holds it; keep it exactly as a float slot would not.
                    packable = false;
                    values.push(PackedValue::Int(0));
                    self.unsigned.push((values.len() - 1, value));
                }
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
                        break false;
                    }
                }
                Some(b']') => {
                    self.pos += 1;
                    break true;
                }
                _ => {
                    self.numbers = values;
                    self.unsigned.clear();
                    return Err(self.unexpected());
                }
            }
        };
        let packed = if closed && packable { self.encoder.numbers_slot(&values) } else { None };
        let result = match packed {
            Some(slot) => {
                self.place(slot)?;
                Ok(true)
            }
            None => {
                self.encoder.begin_array().map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                let unsigned_list = std::mem::take(&mut self.unsigned);
                let mut unsigned = unsigned_list.iter().peekable();
                for (index, &value) in values.iter().enumerate() {
                    let slot = match (unsigned.peek(), value) {
                        (Some(&&(at, big)), _) if at == index => {
                            unsigned.next();
                            self.encoder.uint_slot(big)
                        }
                        (_, PackedValue::Int(v)) => self.encoder.int_slot(v),
                        (_, PackedValue::Float(v)) => self.encoder.float_slot(v),
                    };
                    self.place(slot)?;
                }
                self.unsigned = unsigned_list;
                if closed {
                    self.encoder.end_array().map_err(|_| self.error(JsonErrorKind::TooDeep))?;
                }
                Ok(closed)
            }
        };
        self.unsigned.clear();
        self.numbers = values;
        result
    }

    /// The general, correctly rounded parse of the number text at `start..end`.
    #[cold]
    fn parse_float(&self, start: usize, end: usize) -> Result<f64, JsonError> {
        let text = std::str::from_utf8(&self.input[start..end]).map_err(|_| self.error_at(JsonErrorKind::InvalidNumber, start))?;
        let value: f64 = text.parse().map_err(|_| self.error_at(JsonErrorKind::InvalidNumber, start))?;
        // Rust's parse rounds a number beyond f64's range to infinity, which JSON cannot
        // write back (it would come out as null): refused, as serde_json refuses it.
        if value.is_infinite() {
            return Err(self.error_at(JsonErrorKind::TooLarge, start));
        }
        Ok(value)
    }
}

/// A parsed JSON number.
#[derive(Clone, Copy)]
enum Number {
    Int(i64),
    /// Above `i64::MAX`.
    UInt(u64),
    Float(f64),
}

/// Most significant digits the fast float path accumulates (10^19 < 2^64).
const FAST_DIGITS_MAX: usize = 19;

/// Powers of ten that binary64 represents exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/// `significand * 10^exponent`, correctly rounded, when one IEEE operation on two exact
/// operands gives it (Clinger's fast path: the significand below 2^53 and the power of ten
/// exact); `None` otherwise, for the general algorithm of `str::parse`.
#[inline(always)]
fn fast_float(significand: u64, exponent: i64) -> Option<f64> {
    if significand > 1 << 53 || !(-22..=22).contains(&exponent) {
        return None;
    }
    let significand = significand as f64;
    Some(if exponent < 0 {
        significand / EXACT_POWERS_OF_TEN[(-exponent) as usize]
    } else {
        significand * EXACT_POWERS_OF_TEN[exponent as usize]
    })
}

/// The first `"`, `\\` or control byte at or after `pos` (or the input's length), and whether a
/// byte >= 0x80 comes before it.
#[inline(always)]
fn find_string_end(input: &[u8], mut pos: usize) -> (usize, bool) {
    let mut high = false;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline, so these intrinsics are always
        // available. Every load reads 16 bytes at `pos`, and the loop runs only while
        // `pos + 16 <= input.len()`, so no load leaves the slice.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let control_max = _mm_set1_epi8(0x1F);
            while pos + 16 <= input.len() {
                let bytes = _mm_loadu_si128(input.as_ptr().add(pos) as *const __m128i);
                let specials = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
                    _mm_cmpeq_epi8(_mm_max_epu8(bytes, control_max), control_max),
                );
                let special_mask = _mm_movemask_epi8(specials) as u32;
                let high_mask = _mm_movemask_epi8(bytes) as u32;
                if special_mask != 0 {
                    let index = special_mask.trailing_zeros();
                    high |= high_mask & ((1u32 << index) - 1) != 0;
                    return (pos + index as usize, high);
                }
                high |= high_mask != 0;
                pos += 16;
            }
        }
    }
    while let Some(&byte) = input.get(pos) {
        if matches!(byte, b'"' | b'\\' | 0..=0x1F) {
            break;
        }
        high |= byte >= 0x80;
        pos += 1;
    }
    (pos, high)
}

/// Where a parsed string's bytes are: in the input, or decoded into the scratch buffer.
#[derive(Clone, Copy)]
enum Span {
    Input(usize, usize),
    Scratch,
}

impl Span {
    #[inline(always)]
    fn as_bytes<'s>(&self, input: &'s [u8], scratch: &'s [u8]) -> &'s [u8] {
        match *self {
            Span::Input(start, end) => &input[start..end],
            Span::Scratch => scratch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::find_string_end;

    /// The plain definition `find_string_end` must agree with.
    fn reference(input: &[u8], start: usize) -> (usize, bool) {
        let end = input[start..].iter().position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1F)).map_or(input.len(), |p| start + p);
        (end, input[start..end].iter().any(|&b| b >= 0x80))
    }

    #[test]
    fn string_end_matches_the_reference_at_every_offset() {
        // Under Miri (which emulates every SIMD instruction) a smaller sweep still crosses the
        // 16-byte boundaries.
        let (lengths, specials): (usize, &[u8]) = if cfg!(miri) { (20, &[b'"', 0x1F]) } else { (48, &[b'"', b'\\', 0x00, 0x1F, b'a']) };
        for len in 0..lengths {
            for special_at in 0..=len {
                for &special in specials {
                    for high_at in [None, Some(0), Some(special_at.saturating_sub(1)), Some(len.saturating_sub(1)), Some(special_at + 1)] {
                        let mut input = vec![b'x'; len + 2];
                        if special_at < input.len() {
                            input[special_at] = special;
                        }
                        if let Some(at) = high_at.filter(|&at| at < input.len() && at != special_at) {
                            input[at] = 0xC3;
                        }
                        for start in [0, 1, 3] {
                            if start <= input.len() {
                                assert_eq!(find_string_end(&input, start), reference(&input, start), "{input:?} from {start}");
                            }
                        }
                    }
                }
            }
        }
    }
}

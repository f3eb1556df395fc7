//! Order-preserving ("memcomparable") key encoding: the bytes of two encoded keys compare as
//! the keys themselves do, so LMDB's byte order sorts composite keys and serves ranges.
//!
//! - Unsigned integers: big-endian. Signed integers: big-endian with the sign bit flipped.
//!   `usize` and `isize` as `u64` and `i64`, whatever the platform's pointer width.
//! - Floats: the IEEE bits, all inverted for negatives and sign bit flipped for positives, so
//!   the order is `f64::total_cmp` (-0.0 before +0.0); every NaN is written as the positive
//!   quiet NaN, after +infinity.
//! - `bool`: one byte, 0 or 1.
//! - Strings (`str`, `String`, `Box<str>`) and bytes: each 0x00 written as 0x00 0xFF, then the
//!   terminator 0x00 0x01. A prefix sorts first, and the part is self-delimiting, so tuples
//!   compose.
//! - Tuples: their parts one after the other; fixed-width parts need no delimiter.
//!
//! A keyspace's keys should all have the same shape: parts carry no type tag.

/// A value that can be part of an order-preserving key.
///
/// ```
/// use tessera::store::key::{encode, KeyPart};
/// assert!(encode(&(-5i64, "b")) < encode(&(3i64, "a")));
/// assert!(encode(&"ab") < encode(&"abc"));
/// assert!(encode(&-1.5f64) < encode(&0.0f64));
/// ```
pub trait KeyPart {
    /// Appends this part's encoding.
    ///
    /// ```
    /// use tessera::store::key::KeyPart;
    /// let mut key = Vec::new();
    /// 7u16.encode_key(&mut key);
    /// "a".encode_key(&mut key);
    /// assert_eq!(key, [0x00, 0x07, b'a', 0x00, 0x01]);
    /// ```
    fn encode_key(&self, out: &mut Vec<u8>);

    /// Whether `encoded` starts with this part's encoding: if so, `encoded` is advanced past it
    /// (else left as it was). The parts tessera implements compare in place; this default
    /// encodes the part first.
    ///
    /// ```
    /// use tessera::store::key::{encode, KeyPart};
    /// let key = encode(&(7u16, "a\0b"));
    /// let mut rest = &key[..];
    /// assert!(7u16.strip_encoded(&mut rest) && "a\0b".strip_encoded(&mut rest) && rest.is_empty());
    /// let mut rest = &key[..];
    /// assert!(!8u16.strip_encoded(&mut rest) && rest == &key[..]);
    /// ```
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        let mut part = Vec::new();
        self.encode_key(&mut part);
        strip(encoded, &part)
    }
}

/// Advances `encoded` past `part` if it starts with it.
#[inline]
fn strip(encoded: &mut &[u8], part: &[u8]) -> bool {
    match encoded.strip_prefix(part) {
        Some(rest) => {
            *encoded = rest;
            true
        }
        None => false,
    }
}

/// Encodes a key.
///
/// ```
/// use tessera::store::key::encode;
/// assert!(encode(&-1i32) < encode(&0i32), "keys sort as their values");
/// assert!(encode(&("a", 2u8)) < encode(&("b", 1u8)));
/// assert_eq!(encode("ab"), [b'a', b'b', 0x00, 0x01]);
/// ```
pub fn encode<K: KeyPart + ?Sized>(key: &K) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    key.encode_key(&mut out);
    out
}

macro_rules! unsigned {
    ($($type:ty),*) => {$(
        impl KeyPart for $type {
            fn encode_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
            fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
                strip(encoded, &self.to_be_bytes())
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64, u128);

macro_rules! signed {
    ($($type:ty => $unsigned:ty),*) => {$(
        impl KeyPart for $type {
            fn encode_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.flipped().to_be_bytes());
            }
            fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
                strip(encoded, &self.flipped().to_be_bytes())
            }
        }
        impl Flipped for $type {
            type Unsigned = $unsigned;
            #[inline]
            fn flipped(&self) -> $unsigned {
                (*self as $unsigned) ^ (1 << (<$unsigned>::BITS - 1))
            }
        }
    )*};
}
/// A signed integer with its sign bit flipped, so that its big-endian bytes sort as it does.
trait Flipped {
    type Unsigned;
    fn flipped(&self) -> Self::Unsigned;
}

signed!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128);

/// As a `u64` on every platform: the schema describes a `usize` field as `u64`, so a key's
/// bytes do not depend on the pointer width of the machine that wrote them.
impl KeyPart for usize {
    fn encode_key(&self, out: &mut Vec<u8>) {
        (*self as u64).encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        (*self as u64).strip_encoded(encoded)
    }
}

/// As an `i64` on every platform (see `usize`).
impl KeyPart for isize {
    fn encode_key(&self, out: &mut Vec<u8>) {
        (*self as i64).encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        (*self as i64).strip_encoded(encoded)
    }
}

impl KeyPart for f64 {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&ordered_f64(*self));
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        strip(encoded, &ordered_f64(*self))
    }
}

/// `value`'s key bytes: every NaN as one, and the bits ordered as the values are.
fn ordered_f64(value: f64) -> [u8; 8] {
    let bits = if value.is_nan() { f64::NAN.to_bits() & !(1 << 63) } else { value.to_bits() };
    let ordered = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
    ordered.to_be_bytes()
}

impl KeyPart for f32 {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&ordered_f32(*self));
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        strip(encoded, &ordered_f32(*self))
    }
}

/// `value`'s key bytes (see [`ordered_f64`]).
fn ordered_f32(value: f32) -> [u8; 4] {
    let bits = if value.is_nan() { f32::NAN.to_bits() & !(1 << 31) } else { value.to_bits() };
    let ordered = if bits >> 31 == 1 { !bits } else { bits ^ (1 << 31) };
    ordered.to_be_bytes()
}

impl KeyPart for bool {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.push(*self as u8);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        strip(encoded, &[*self as u8])
    }
}

impl KeyPart for [u8] {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.reserve(self.len() + 2);
        // The runs between zero bytes are copied whole (most keys have no zero byte: one search
        // and one copy, instead of a push per byte); each zero is followed by 0xFF.
        let mut rest = self;
        while let Some(zero) = memchr::memchr(0, rest) {
            out.extend_from_slice(&rest[..=zero]);
            out.push(0xFF);
            rest = &rest[zero + 1..];
        }
        out.extend_from_slice(rest);
        out.extend_from_slice(&[0x00, 0x01]);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        // Most parts have no zero byte: then their encoding is their bytes and the terminator.
        let length = self.len();
        if let Some(head) = encoded.get(..length + 2)
            && head[length..] == [0x00, 0x01]
            && !self.contains(&0)
        {
            if head[..length] != *self {
                return false;
            }
            *encoded = &encoded[length + 2..];
            return true;
        }
        // Byte by byte, each zero followed by 0xFF, then the terminator.
        let mut at = 0;
        for &byte in self {
            if encoded.get(at) != Some(&byte) {
                return false;
            }
            at += 1;
            if byte == 0 {
                if encoded.get(at) != Some(&0xFF) {
                    return false;
                }
                at += 1;
            }
        }
        match encoded.get(at..at + 2) {
            Some([0x00, 0x01]) => {
                *encoded = &encoded[at + 2..];
                true
            }
            _ => false,
        }
    }
}

impl KeyPart for str {
    fn encode_key(&self, out: &mut Vec<u8>) {
        self.as_bytes().encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        self.as_bytes().strip_encoded(encoded)
    }
}

impl KeyPart for String {
    fn encode_key(&self, out: &mut Vec<u8>) {
        self.as_bytes().encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        self.as_bytes().strip_encoded(encoded)
    }
}

impl KeyPart for Box<str> {
    fn encode_key(&self, out: &mut Vec<u8>) {
        self.as_bytes().encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        self.as_bytes().strip_encoded(encoded)
    }
}

impl KeyPart for Vec<u8> {
    fn encode_key(&self, out: &mut Vec<u8>) {
        self.as_slice().encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        self.as_slice().strip_encoded(encoded)
    }
}

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn encode_key(&self, out: &mut Vec<u8>) {
        (**self).encode_key(out);
    }
    fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
        (**self).strip_encoded(encoded)
    }
}

/// Reads an escaped string or bytes part (as `[u8]::encode_key` writes it) from the start of
/// `encoded`; returns the bytes and the rest, or `None` if the part is malformed or unterminated.
///
/// ```
/// use tessera::store::key::{decode_bytes, encode};
/// let key = encode(&("a\0b", 7u8));
/// let (text, rest) = decode_bytes(&key).unwrap();
/// assert_eq!((text.as_slice(), rest), (&b"a\0b"[..], &[7u8][..]));
/// ```
pub fn decode_bytes(encoded: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut index = 0;
    while index < encoded.len() {
        let byte = encoded[index];
        if byte != 0 {
            out.push(byte);
            index += 1;
            continue;
        }
        match encoded.get(index + 1)? {
            0xFF => out.push(0),
            0x01 => return Some((out, &encoded[index + 2..])),
            _ => return None,
        }
        index += 2;
    }
    None
}

/// Bytes as lowercase hex, two digits each: how errors and reports show a key that is not text.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes every key whose first part starts with `prefix` begins with: the escaped prefix
/// without its terminator.
///
/// ```
/// use tessera::store::key::{encode, part_prefix};
/// let prefix = part_prefix(b"user:");
/// assert!(encode(&("user:42", 7u32)).starts_with(&prefix));
/// assert!(!encode(&("usex", 7u32)).starts_with(&prefix));
/// ```
pub fn part_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut out = encode(prefix);
    out.truncate(out.len() - 2);
    out
}

macro_rules! tuple {
    ($($name:ident)+) => {
        impl<$($name: KeyPart),+> KeyPart for ($($name,)+) {
            #[allow(non_snake_case)]
            fn encode_key(&self, out: &mut Vec<u8>) {
                let ($($name,)+) = self;
                $($name.encode_key(out);)+
            }
            #[allow(non_snake_case)]
            fn strip_encoded(&self, encoded: &mut &[u8]) -> bool {
                let ($($name,)+) = self;
                let mut rest = *encoded;
                $(if !$name.strip_encoded(&mut rest) { return false; })+
                *encoded = rest;
                true
            }
        }
    };
}
tuple!(A);
tuple!(A B);
tuple!(A B C);
tuple!(A B C D);
tuple!(A B C D E);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn same_order<T: KeyPart>(a: &T, b: &T, expected: Ordering) -> Result<(), TestCaseError> {
        prop_assert_eq!(encode(a).cmp(&encode(b)), expected);
        Ok(())
    }

    /// `strip_encoded` against its oracle: `encoded` starts with `encode(part)`.
    fn strips_as_encoded<T: KeyPart + ?Sized>(part: &T, encoded: &[u8]) -> Result<(), TestCaseError> {
        let mut rest = encoded;
        let expected = encoded.strip_prefix(encode(part).as_slice());
        prop_assert_eq!(part.strip_encoded(&mut rest), expected.is_some());
        prop_assert_eq!(rest, expected.unwrap_or(encoded));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Against its own encoding (with a tail), another part's, and bytes near both: zero
        /// bytes and the escape's 0x00, 0xFF and 0x01 are drawn often.
        #[test]
        fn strip_encoded_matches_exactly_the_encoding(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..12),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..12),
            tail in proptest::collection::vec(any::<u8>(), 0..3),
            n: i32, m: i32, x: f64,
        ) {
            let mut own = encode(a.as_slice());
            own.extend_from_slice(&tail);
            for encoded in [own, encode(b.as_slice()), b.clone(), [a.as_slice(), &[0, 1]].concat()] {
                strips_as_encoded(a.as_slice(), &encoded)?;
                strips_as_encoded(&(n, a.as_slice()), &[encode(&n), encoded.clone()].concat())?;
            }
            strips_as_encoded(&n, &encode(&m))?;
            strips_as_encoded(&n, &encode(&n))?;
            strips_as_encoded(&x, &encode(&x))?;
            strips_as_encoded(&(x, n), &encode(&(x, m)))?;
        }

        #[test]
        fn integers(a: i64, b: i64, c: u64, d: u64, e: i8, f: i8) {
            same_order(&a, &b, a.cmp(&b))?;
            same_order(&c, &d, c.cmp(&d))?;
            same_order(&e, &f, e.cmp(&f))?;
        }

        #[test]
        fn floats(a: f64, b: f64, c: f32, d: f32) {
            let canonical = |x: f64| if x.is_nan() { f64::NAN } else { x };
            same_order(&a, &b, canonical(a).total_cmp(&canonical(b)))?;
            let canonical = |x: f32| if x.is_nan() { f32::NAN } else { x };
            same_order(&c, &d, canonical(c).total_cmp(&canonical(d)))?;
        }

        #[test]
        fn strings_and_bytes(a in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..8),
                             b in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..8),
                             s: String, t: String) {
            same_order(&a, &b, a.cmp(&b))?;
            same_order(&s, &t, s.cmp(&t))?;
        }

        #[test]
        fn tuples(a: (String, i32, bool), b: (String, i32, bool), c: (Vec<u8>, f64), d: (Vec<u8>, f64)) {
            same_order(&a, &b, a.cmp(&b))?;
            let canonical = |x: f64| if x.is_nan() { f64::NAN } else { x };
            let expected = c.0.cmp(&d.0).then(canonical(c.1).total_cmp(&canonical(d.1)));
            same_order(&c, &d, expected)?;
        }
    }

    proptest! {
        #[test]
        fn escaped_parts_decode_back(bytes in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..16), tail: u32) {
            let key = encode(&(bytes.clone(), tail));
            let (decoded, rest) = decode_bytes(&key).unwrap();
            prop_assert_eq!(decoded, bytes.clone());
            prop_assert_eq!(rest, &tail.to_be_bytes()[..]);
            // Every key whose part starts with a prefix of `bytes` begins with part_prefix.
            for cut in 0..=bytes.len() {
                prop_assert!(key.starts_with(&part_prefix(&bytes[..cut])));
            }
        }
    }

    #[test]
    fn byte_parts_keep_their_stored_bytes() {
        // The stored form (docs/storage.md): each zero byte followed by 0xFF, then 00 01.
        assert_eq!(encode(&b"ab".to_vec()), [b'a', b'b', 0x00, 0x01]);
        assert_eq!(encode(&b"\0a\0\0".to_vec()), [0x00, 0xFF, b'a', 0x00, 0xFF, 0x00, 0xFF, 0x00, 0x01]);
        assert_eq!(encode(&Vec::<u8>::new()), [0x00, 0x01]);
        assert_eq!(encode(&"x\0"), [b'x', 0x00, 0xFF, 0x00, 0x01]);
    }

    #[test]
    fn special_values_sort_where_documented() {
        let order = [f64::NEG_INFINITY, -1.0, -0.0, 0.0, 1e-300, 1.0, f64::INFINITY, f64::NAN];
        for pair in order.windows(2) {
            assert!(encode(&pair[0]) < encode(&pair[1]), "{pair:?}");
        }
        assert_eq!(encode(&f64::NAN), encode(&-f64::NAN));
        assert!(encode(&"a") < encode(&"a\0"));
        assert!(encode(&("a", 2u8)) < encode(&("a\0", 1u8)));
        assert!(encode(&i64::MIN) < encode(&-1i64) && encode(&-1i64) < encode(&0i64));
    }
}

//! A record type's shape ([`TypeDesc`]), what is stored of it in the database, the
//! compatibility rule between two versions, and the type check of queries against it.

use crate::query::{CompareOp, Expr, Literal, QueryError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The shape of a record's field, as far as storage and queries care.
///
/// ```
/// use tessera::collection::{Describe, IntType, Record, TypeDesc};
/// #[derive(Record)]
/// struct Task { #[record(key)] id: u32, note: Option<String> }
/// let shape = Task::describe();
/// assert_eq!(shape.resolve("id"), Some(&TypeDesc::Integer(IntType::U32)));
/// assert_eq!(shape.resolve("note"), Some(&TypeDesc::Option(Box::new(TypeDesc::String))));
/// assert_eq!(shape.resolve("missing"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TypeDesc {
    /// `bool`
    Bool,
    /// An integer of any width: what a Python `int` or a JSON number declares, and what
    /// schemas stored before widths were recorded say of every integer field. Holds any `i64`
    /// or `u64`.
    Int,
    /// An integer of one Rust type: only values in its range fit (a dynamic write of 300 into
    /// a `u8` field is refused, naming the field).
    Integer(IntType),
    /// `f64`; also what a Python `float` or a JSON number declares, and what schemas stored
    /// before float widths were recorded say of `f32` fields.
    Float,
    /// `f32`: only values within its range fit (a dynamic write of `1e300` into an `f32`
    /// field is refused, naming the field; other values are stored rounded to the nearest
    /// `f32`, as a typed write stores them).
    Float32,
    /// `String` (and `char`).
    String,
    /// Raw bytes (`serde_bytes`-style); `Vec<u8>` is a list of integers.
    Bytes,
    /// `Option<T>`: may be missing or null.
    Option(Box<TypeDesc>),
    /// `Vec<T>`, or any sequence a `Describe` impl declares as a list.
    List(Box<TypeDesc>),
    /// A tuple struct or tuple variant of several fields: an array of exactly these elements,
    /// in order. (Schemas stored before element types were recorded say `List(Any)` of them.)
    Tuple(Vec<TypeDesc>),
    /// A map with string keys.
    Map(Box<TypeDesc>),
    /// A struct: its fields by name, in declaration order.
    Struct(Vec<(String, TypeDesc)>),
    /// An enum (externally tagged, serde's default): each variant and its payload, if any.
    Enum(Vec<(String, Option<TypeDesc>)>),
    /// Anything else: stored and returned, but not type-checked in queries.
    Any,
}

/// Types that can be stored in a record and described for queries. Implemented for the
/// standard scalar and container types; `#[derive(Embed)]` implements it for nested structs
/// and enums, `#[derive(Record)]` for records.
///
/// ```
/// use tessera::collection::{Describe, IntType, TypeDesc};
/// assert_eq!(<Option<i32>>::describe(), TypeDesc::Option(Box::new(TypeDesc::Integer(IntType::I32))));
/// ```
pub trait Describe {
    /// The type's shape.
    fn describe() -> TypeDesc;
}

/// Describes a type with `describe`, or as [`TypeDesc::Any`] where the type occurs inside its
/// own description (a recursive type such as `enum Tree { Leaf(u32), Node(Vec<Tree>) }`,
/// whose description would otherwise never end): what `#[derive(Embed)]` generates calls it
/// with the type's name. The recursive part is then stored and read as the codec does, and
/// not type-checked in queries.
///
/// ```
/// use tessera::collection::{describe_once, TypeDesc};
/// fn tree() -> TypeDesc {
///     describe_once("Tree", || TypeDesc::List(Box::new(tree())))
/// }
/// assert_eq!(tree(), TypeDesc::List(Box::new(TypeDesc::Any)));
/// ```
pub fn describe_once(type_name: &'static str, describe: impl FnOnce() -> TypeDesc) -> TypeDesc {
    thread_local! {
        /// The types being described on this thread, outermost first.
        static DESCRIBING: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// Takes the type off the stack however `describe` ends.
    struct Described;
    impl Drop for Described {
        fn drop(&mut self) {
            DESCRIBING.with(|describing| describing.borrow_mut().pop());
        }
    }
    if DESCRIBING.with(|describing| describing.borrow().contains(&type_name)) {
        return TypeDesc::Any;
    }
    DESCRIBING.with(|describing| describing.borrow_mut().push(type_name));
    let _described = Described;
    describe()
}

macro_rules! describe_as {
    ($desc:ident: $($type:ty),*) => {$(
        impl Describe for $type {
            fn describe() -> TypeDesc {
                TypeDesc::$desc
            }
        }
    )*};
}
/// The Rust integer types a [`TypeDesc::Integer`] field may have (`isize` and `usize` are
/// described as 64-bit).
///
/// ```
/// use tessera::collection::{Describe, IntType, TypeDesc};
/// assert_eq!(u8::describe(), TypeDesc::Integer(IntType::U8));
/// assert!(IntType::U8.contains(255) && !IntType::U8.contains(300));
/// assert!(IntType::I64.holds_every(IntType::U32) && !IntType::U64.holds_every(IntType::I8));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntType {
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64` (and `isize`)
    I64,
    /// `u8`
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64` (and `usize`)
    U64,
}

impl IntType {
    /// The smallest and largest value of the type.
    ///
    /// ```
    /// use tessera::collection::IntType;
    /// assert_eq!(IntType::U8.range(), (0, 255));
    /// assert_eq!(IntType::I16.range(), (-32_768, 32_767));
    /// ```
    pub fn range(self) -> (i128, i128) {
        match self {
            IntType::I8 => (i8::MIN.into(), i8::MAX.into()),
            IntType::I16 => (i16::MIN.into(), i16::MAX.into()),
            IntType::I32 => (i32::MIN.into(), i32::MAX.into()),
            IntType::I64 => (i64::MIN.into(), i64::MAX.into()),
            IntType::U8 => (0, u8::MAX.into()),
            IntType::U16 => (0, u16::MAX.into()),
            IntType::U32 => (0, u32::MAX.into()),
            IntType::U64 => (0, u64::MAX.into()),
        }
    }

    /// Whether `value` is in the type's range.
    ///
    /// ```
    /// use tessera::collection::IntType;
    /// assert!(IntType::U8.contains(255));
    /// assert!(!IntType::U8.contains(-1));
    /// ```
    pub fn contains(self, value: i128) -> bool {
        let (min, max) = self.range();
        (min..=max).contains(&value)
    }

    /// Whether every value of `other` is a value of this type (a change from `other` to
    /// `self` keeps every stored value readable).
    ///
    /// ```
    /// use tessera::collection::IntType;
    /// assert!(IntType::I64.holds_every(IntType::U32), "a widening keeps every value");
    /// assert!(!IntType::U32.holds_every(IntType::I8), "negative values would not fit");
    /// ```
    pub fn holds_every(self, other: IntType) -> bool {
        let ((min, max), (other_min, other_max)) = (self.range(), other.range());
        min <= other_min && other_max <= max
    }

    /// The Rust type's name.
    ///
    /// ```
    /// use tessera::collection::IntType;
    /// assert_eq!(IntType::U64.name(), "u64");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            IntType::I8 => "i8",
            IntType::I16 => "i16",
            IntType::I32 => "i32",
            IntType::I64 => "i64",
            IntType::U8 => "u8",
            IntType::U16 => "u16",
            IntType::U32 => "u32",
            IntType::U64 => "u64",
        }
    }
}

macro_rules! describe_int {
    ($($type:ty => $int:ident),*) => {$(
        impl Describe for $type {
            fn describe() -> TypeDesc {
                TypeDesc::Integer(IntType::$int)
            }
        }
    )*};
}
describe_int!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, isize => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, usize => U64);
describe_as!(Float: f64);
describe_as!(Float32: f32);
describe_as!(String: String, char, Box<str>);
describe_as!(Bool: bool);

impl<T: Describe> Describe for Option<T> {
    fn describe() -> TypeDesc {
        TypeDesc::Option(Box::new(T::describe()))
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe() -> TypeDesc {
        TypeDesc::List(Box::new(T::describe()))
    }
}

impl<T: Describe> Describe for Box<T> {
    fn describe() -> TypeDesc {
        T::describe()
    }
}

impl<T: Describe, S> Describe for HashMap<String, T, S> {
    fn describe() -> TypeDesc {
        TypeDesc::Map(Box::new(T::describe()))
    }
}

impl<T: Describe> Describe for BTreeMap<String, T> {
    fn describe() -> TypeDesc {
        TypeDesc::Map(Box::new(T::describe()))
    }
}

/// Whether `desc` is how schemas stored before tuple element types were recorded describe a
/// tuple struct or tuple variant: `List(Any)`, or `Any` before that.
fn is_untyped_tuple(desc: &TypeDesc) -> bool {
    match desc {
        TypeDesc::Any => true,
        TypeDesc::List(element) => **element == TypeDesc::Any,
        _ => false,
    }
}

/// The class of values a field holds, for type-checking comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Bool,
    Number,
    String,
    /// An enum: compared by variant name with strings.
    Enum,
    /// A struct, list, map or bytes: only null tests apply.
    Container,
    /// Not described: anything goes.
    Any,
    Null,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Bool => "a boolean",
            Class::Number => "a number",
            Class::String => "a string",
            Class::Enum => "an enum",
            Class::Container => "a struct, list or map",
            Class::Any => "anything",
            Class::Null => "null",
        }
    }

    fn of(desc: &TypeDesc) -> Class {
        match desc {
            TypeDesc::Bool => Class::Bool,
            TypeDesc::Int | TypeDesc::Integer(_) | TypeDesc::Float | TypeDesc::Float32 => Class::Number,
            TypeDesc::String => Class::String,
            TypeDesc::Enum(_) => Class::Enum,
            TypeDesc::Option(inner) => Class::of(inner),
            TypeDesc::Any => Class::Any,
            TypeDesc::Bytes | TypeDesc::List(_) | TypeDesc::Tuple(_) | TypeDesc::Map(_) | TypeDesc::Struct(_) => Class::Container,
        }
    }

    fn of_literal(literal: &Literal) -> Class {
        match literal {
            Literal::Null => Class::Null,
            Literal::Bool(_) => Class::Bool,
            Literal::Int(_) | Literal::UInt(_) | Literal::Float(_) => Class::Number,
            Literal::Str(_) => Class::String,
        }
    }

    /// Whether values of the two classes can be compared.
    fn compatible(self, other: Class) -> bool {
        match (self, other) {
            (Class::Any, _) | (_, Class::Any) | (Class::Null, _) | (_, Class::Null) => true,
            (Class::Enum, Class::String) | (Class::String, Class::Enum) => true,
            (Class::Container, _) | (_, Class::Container) => false,
            (a, b) => a == b,
        }
    }
}

impl TypeDesc {
    /// The type at a dotted path; a step may also name an enum variant (`content.Image`).
    ///
    /// ```
    /// use tessera::collection::{Describe, Embed, IntType, Record, TypeDesc};
    /// #[derive(Embed)]
    /// struct Place { x: f64 }
    /// #[derive(Record)]
    /// struct Shop { #[record(key)] id: u16, place: Place }
    /// assert_eq!(Shop::describe().resolve("place.x"), Some(&TypeDesc::Float));
    /// assert_eq!(Shop::describe().resolve("id"), Some(&TypeDesc::Integer(IntType::U16)));
    /// ```
    pub fn resolve(&self, path: &str) -> Option<&TypeDesc> {
        let mut current = self;
        for step in path.split('.') {
            current = current.step(step)?;
        }
        Some(current)
    }

    fn step(&self, name: &str) -> Option<&TypeDesc> {
        match self {
            TypeDesc::Option(inner) => inner.step(name),
            TypeDesc::Struct(fields) => fields.iter().find(|(field, _)| field == name).map(|(_, desc)| desc),
            TypeDesc::Enum(variants) => variants.iter().find(|(variant, _)| variant == name).and_then(|(_, payload)| payload.as_ref()),
            TypeDesc::Map(inner) => Some(inner),
            TypeDesc::Any => Some(self),
            _ => None,
        }
    }

    /// Whether two shapes are the same but for what [`TypeDesc::Int`] leaves open: it agrees
    /// with an integer of any width (a Python `int` reads a Rust `u8` field).
    ///
    /// ```
    /// use tessera::collection::{IntType, TypeDesc};
    /// let python = TypeDesc::List(Box::new(TypeDesc::Int));
    /// assert!(python.agrees_with(&TypeDesc::List(Box::new(TypeDesc::Integer(IntType::U8)))));
    /// assert!(!python.agrees_with(&TypeDesc::List(Box::new(TypeDesc::Float))));
    /// assert!(!TypeDesc::Integer(IntType::I8).agrees_with(&TypeDesc::Integer(IntType::I64)));
    /// ```
    pub fn agrees_with(&self, other: &TypeDesc) -> bool {
        let all = |a: &[(String, TypeDesc)], b: &[(String, TypeDesc)]| {
            a.len() == b.len() && a.iter().zip(b).all(|((name_a, a), (name_b, b))| name_a == name_b && a.agrees_with(b))
        };
        match (self, other) {
            (TypeDesc::Int, TypeDesc::Integer(_)) | (TypeDesc::Integer(_), TypeDesc::Int) => true,
            (TypeDesc::Float, TypeDesc::Float32) | (TypeDesc::Float32, TypeDesc::Float) => true,
            (TypeDesc::Option(a), TypeDesc::Option(b)) | (TypeDesc::List(a), TypeDesc::List(b)) | (TypeDesc::Map(a), TypeDesc::Map(b)) => {
                a.agrees_with(b)
            }
            (TypeDesc::Struct(a), TypeDesc::Struct(b)) => all(a, b),
            (TypeDesc::Tuple(a), TypeDesc::Tuple(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.agrees_with(b)),
            (TypeDesc::Enum(a), TypeDesc::Enum(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|((name_a, a), (name_b, b))| {
                        name_a == name_b
                            && match (a, b) {
                                (Some(a), Some(b)) => a.agrees_with(b),
                                (None, None) => true,
                                _ => false,
                            }
                    })
            }
            (a, b) => a == b,
        }
    }

    /// The numbers that records written under `old` may hold and `self` could only read
    /// rounded, as (path, the float type): an integer field that became a float, or an `f64`
    /// field that became `f32`. [`TypeDesc::incompatibility`] lets these through because a
    /// schema stored before float widths were recorded says `Float` of `f32` fields too, and
    /// because small integers convert exactly; opening checks the stored values instead
    /// ([`lossy_number`]). A path step `[]` is every element of a list, `*` every value of a
    /// map.
    pub(crate) fn narrowed_numbers(&self, old: &TypeDesc, path: &str, out: &mut Vec<(String, FloatType)>) {
        let at = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
        match (old, self) {
            (TypeDesc::Option(old), TypeDesc::Option(new)) => new.narrowed_numbers(old, path, out),
            (old, TypeDesc::Option(new)) => new.narrowed_numbers(old, path, out),
            (TypeDesc::Int | TypeDesc::Integer(_), TypeDesc::Float) => out.push((path.to_owned(), FloatType::F64)),
            (TypeDesc::Int | TypeDesc::Integer(_) | TypeDesc::Float, TypeDesc::Float32) => out.push((path.to_owned(), FloatType::F32)),
            (TypeDesc::List(old), TypeDesc::List(new)) => new.narrowed_numbers(old, &at("[]"), out),
            (TypeDesc::Map(old), TypeDesc::Map(new)) => new.narrowed_numbers(old, &at("*"), out),
            (TypeDesc::Tuple(old), TypeDesc::Tuple(new)) => {
                for (index, (old, new)) in old.iter().zip(new).enumerate() {
                    new.narrowed_numbers(old, &at(&format!("[{index}]")), out);
                }
            }
            // Element types learned (see `incompatibility`): what an older type stored in them
            // is not known, so every `f32` element is checked.
            (old, TypeDesc::Tuple(_)) if is_untyped_tuple(old) => self.f32_paths(path, out),
            (TypeDesc::Struct(old_fields), TypeDesc::Struct(new_fields)) => {
                for (name, new_desc) in new_fields {
                    match old_fields.iter().find(|(old_name, _)| old_name == name) {
                        Some((_, old_desc)) => new_desc.narrowed_numbers(old_desc, &at(name), out),
                        None => new_desc.f32_paths(&at(name), out),
                    }
                }
            }
            (TypeDesc::Enum(old_variants), TypeDesc::Enum(new_variants)) => {
                for (name, new_payload) in new_variants {
                    if let (Some(new), Some((_, Some(old)))) = (new_payload, old_variants.iter().find(|(old_name, _)| old_name == name)) {
                        new.narrowed_numbers(old, &at(name), out);
                    }
                }
            }
            _ => {}
        }
    }

    /// The `f32` numbers of a field that the old shape does not have, as
    /// [`TypeDesc::narrowed_numbers`] lists them. Records may still hold values of a field a
    /// type once declared and a later one removed (they are not rewritten), and reading a
    /// stored `f64` as an `f32` rounds it; other numbers read exactly or fail with a typed error.
    fn f32_paths(&self, path: &str, out: &mut Vec<(String, FloatType)>) {
        let at = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
        match self {
            TypeDesc::Float32 => out.push((path.to_owned(), FloatType::F32)),
            TypeDesc::Option(inner) => inner.f32_paths(path, out),
            TypeDesc::List(element) => element.f32_paths(&at("[]"), out),
            TypeDesc::Tuple(elements) => {
                elements.iter().enumerate().for_each(|(index, element)| element.f32_paths(&at(&format!("[{index}]")), out))
            }
            TypeDesc::Map(element) => element.f32_paths(&at("*"), out),
            TypeDesc::Struct(fields) => fields.iter().for_each(|(name, desc)| desc.f32_paths(&at(name), out)),
            TypeDesc::Enum(variants) => variants
                .iter()
                .filter_map(|(name, payload)| Some((name, payload.as_ref()?)))
                .for_each(|(name, desc)| desc.f32_paths(&at(name), out)),
            _ => {}
        }
    }

    /// Whether the field at this type may be missing in stored records.
    fn is_optional(&self) -> bool {
        matches!(self, TypeDesc::Option(_) | TypeDesc::Any)
    }

    /// Why records written under `old` may not decode as `self`, if they may not.
    /// The path (below `path`) of the first object key in `value` that this shape has no field
    /// of, if any: inside structs, options, lists, maps and enum payloads; `Any` is not looked
    /// into. A value that is not shaped as this one is left to the decode that follows.
    pub(crate) fn unknown_field(&self, value: tessera_value::Value<'_>, path: &str) -> Option<String> {
        let at = |step: &str| if path.is_empty() { step.to_owned() } else { format!("{path}.{step}") };
        match self {
            TypeDesc::Option(inner) => inner.unknown_field(value, path),
            TypeDesc::List(element) => {
                value.as_array()?.iter().enumerate().find_map(|(index, item)| element.unknown_field(item, &format!("{path}[{index}]")))
            }
            TypeDesc::Tuple(elements) => value
                .as_array()?
                .iter()
                .zip(elements)
                .enumerate()
                .find_map(|(index, (item, element))| element.unknown_field(item, &format!("{path}[{index}]"))),
            TypeDesc::Map(element) => value.as_dict()?.iter().find_map(|(name, item)| element.unknown_field(item, &at(name))),
            TypeDesc::Struct(fields) => {
                value.as_dict()?.iter().find_map(|(name, item)| match fields.iter().find(|(field, _)| field == name) {
                    Some((_, shape)) => shape.unknown_field(item, &at(name)),
                    None => Some(at(name)),
                })
            }
            TypeDesc::Enum(variants) => {
                let dict = value.as_dict()?;
                let (name, payload) = dict.iter().next()?;
                let (_, Some(shape)) = variants.iter().find(|(variant, _)| variant == name)? else { return None };
                shape.unknown_field(payload, &at(name))
            }
            _ => None,
        }
    }

    /// Whether this is a struct with a top-level field named `name`.
    pub(crate) fn has_field(&self, name: &str) -> bool {
        matches!(self, TypeDesc::Struct(fields) if fields.iter().any(|(field, _)| field == name))
    }

    pub(crate) fn incompatibility(&self, old: &TypeDesc, path: &str) -> Option<String> {
        let at = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
        match (old, self) {
            (_, TypeDesc::Any) => None,
            (TypeDesc::Option(old), TypeDesc::Option(new)) => new.incompatibility(old, path),
            // A required field may become optional; not the other way round.
            (old, TypeDesc::Option(new)) => new.incompatibility(old, path),
            (TypeDesc::Int | TypeDesc::Integer(_) | TypeDesc::Float32, TypeDesc::Float) => None,
            (TypeDesc::Int | TypeDesc::Integer(_), TypeDesc::Float32) => None,
            // A width learned: schemas stored before float widths were recorded say `Float` of
            // `f32` fields too (a stored value beyond `f32`'s range is a typed error where it
            // is read).
            (TypeDesc::Float, TypeDesc::Float32) => None,
            // A width learned or forgotten: stored values were integers either way (a value
            // out of a new width's range is a typed error where it is read).
            (TypeDesc::Int, TypeDesc::Integer(_)) | (TypeDesc::Integer(_), TypeDesc::Int) => None,
            // A shape learned: schemas stored before tuple structs and tuple variants were
            // described as lists say `Any` of them (their values were arrays all along; a stored
            // value of another kind is a typed error where it is read, as it was).
            (TypeDesc::Any, TypeDesc::List(element)) if **element == TypeDesc::Any => None,
            // Element types learned: schemas stored before they were recorded say `List(Any)`
            // (or `Any`) of a tuple struct or tuple variant. Its `f32` elements are checked
            // against the stored values when the collection opens (`narrowed_numbers`).
            (old, TypeDesc::Tuple(_)) if is_untyped_tuple(old) => None,
            (TypeDesc::Tuple(old), TypeDesc::Tuple(new)) if old.len() != new.len() => {
                Some(format!("tuple `{path}` changed from {} to {} elements", old.len(), new.len()))
            }
            (TypeDesc::Tuple(old), TypeDesc::Tuple(new)) => {
                old.iter().zip(new).enumerate().find_map(|(index, (old, new))| new.incompatibility(old, &at(&format!("[{index}]"))))
            }
            (TypeDesc::Integer(old), TypeDesc::Integer(new)) if new.holds_every(*old) => None,
            (TypeDesc::Integer(old), TypeDesc::Integer(new)) => {
                Some(format!("field `{path}` narrowed from {} to {}: stored values may not fit", old.name(), new.name()))
            }
            (TypeDesc::List(old), TypeDesc::List(new)) | (TypeDesc::Map(old), TypeDesc::Map(new)) => new.incompatibility(old, path),
            (TypeDesc::Struct(old_fields), TypeDesc::Struct(new_fields)) => {
                for (name, new_desc) in new_fields {
                    match old_fields.iter().find(|(old_name, _)| old_name == name) {
                        Some((_, old_desc)) => {
                            if let Some(reason) = new_desc.incompatibility(old_desc, &at(name)) {
                                return Some(reason);
                            }
                        }
                        None if new_desc.is_optional() => {}
                        None => return Some(format!("new field `{}` is not optional, and stored records lack it", at(name))),
                    }
                }
                None
            }
            (TypeDesc::Enum(old_variants), TypeDesc::Enum(new_variants)) => {
                for (name, old_payload) in old_variants {
                    let Some((_, new_payload)) = new_variants.iter().find(|(new_name, _)| new_name == name) else {
                        return Some(format!("enum variant `{}` was removed", at(name)));
                    };
                    match (old_payload, new_payload) {
                        (None, None) => {}
                        (Some(old), Some(new)) => {
                            if let Some(reason) = new.incompatibility(old, &at(name)) {
                                return Some(reason);
                            }
                        }
                        _ => return Some(format!("enum variant `{}` changed between unit and payload", at(name))),
                    }
                }
                None
            }
            (old, new) if old == new => None,
            (old, new) => Some(format!("field `{path}` changed type from {old:?} to {new:?}")),
        }
    }

    /// Type-checks a query predicate against this record shape.
    pub(crate) fn check_predicate(&self, expr: &Expr) -> Result<(), QueryError> {
        match expr {
            Expr::And(a, b) | Expr::Or(a, b) => {
                self.check_predicate(a)?;
                self.check_predicate(b)
            }
            Expr::Not(a) => self.check_predicate(a),
            Expr::Compare(a, op, b) => {
                let left = self.check_operand(a)?;
                let right = self.check_operand(b)?;
                let ordered = !matches!(op, CompareOp::Eq | CompareOp::Ne);
                self.require_comparable(expr, left, right, ordered)?;
                match (&**a, &**b) {
                    (value, Expr::Literal(literal)) | (Expr::Literal(literal), value) => self.check_variant_literal(expr, value, literal),
                    _ => Ok(()),
                }
            }
            Expr::Between(a, low, high) => {
                let value = self.check_operand(a)?;
                self.require_comparable(expr, value, self.check_operand(low)?, true)?;
                self.require_comparable(expr, value, self.check_operand(high)?, true)
            }
            Expr::In(a, list, _) => {
                let value = self.check_operand(a)?;
                list.iter().try_for_each(|literal| self.require_comparable(expr, value, Class::of_literal(literal), false))?;
                list.iter().try_for_each(|literal| self.check_variant_literal(expr, a, literal))
            }
            Expr::IsNull(a, _) => self.check_operand(a).map(drop),
            Expr::Str(a, _, _) => match self.check_operand(a)? {
                Class::String | Class::Any | Class::Null => Ok(()),
                found => Err(mismatch(expr, "a string", found)),
            },
            Expr::Contains(a, literal) => self.check_contains(expr, a, literal),
            Expr::Variant(path, variant) => {
                let desc = self.resolve(path).ok_or_else(|| QueryError::UnknownField { path: path.to_string() })?;
                match strip_option(desc) {
                    TypeDesc::Enum(variants) if variants.iter().any(|(name, _)| name == variant) => Ok(()),
                    TypeDesc::Enum(_) => Err(QueryError::UnknownVariant { path: path.to_string(), variant: variant.clone() }),
                    TypeDesc::Any => Ok(()),
                    _ => Err(mismatch(expr, "an enum", Class::of(desc))),
                }
            }
            Expr::Field(_) | Expr::Literal(_) | Expr::Arith(..) => match self.check_operand(expr)? {
                Class::Bool | Class::Any | Class::Null => Ok(()),
                found => Err(mismatch(expr, "a boolean", found)),
            },
        }
    }

    /// An enum field compared with a string: the string must name a unit variant, which is
    /// stored as its name. A variant that carries a payload is stored as `{"Variant":
    /// payload}`, never a string, and a name that is no variant is never stored at all, so the
    /// comparison could never be TRUE: a typed error (pointing at `is Variant`, or
    /// `UnknownVariant`), never a silent empty result.
    fn check_variant_literal(&self, expr: &Expr, value: &Expr, literal: &Literal) -> Result<(), QueryError> {
        let Expr::Field(path) = value else { return Ok(()) };
        match self.resolve(path) {
            Some(desc) => check_variant_literal_of(expr, path, desc, literal),
            None => Ok(()),
        }
    }

    /// `value contains literal`: a string with a string, or an array with a value its
    /// elements compare with.
    fn check_contains(&self, expr: &Expr, value: &Expr, literal: &Literal) -> Result<(), QueryError> {
        if let Expr::Field(path) = value {
            let desc = self.resolve(path).ok_or_else(|| QueryError::UnknownField { path: path.to_string() })?;
            match strip_option(desc) {
                TypeDesc::List(element) => {
                    self.require_comparable(expr, Class::of(element), Class::of_literal(literal), false)?;
                    return check_variant_literal_of(expr, path, element, literal);
                }
                // A tuple is an array too: the literal must compare with one of its elements.
                TypeDesc::Tuple(elements) => {
                    let found = Class::of_literal(literal);
                    let mut comparable = elements.iter().filter(|element| Class::of(element).compatible(found)).peekable();
                    if comparable.peek().is_none() {
                        return Err(mismatch(expr, "a value one of the tuple's elements compares with", found));
                    }
                    // Valid if it is valid for some element it may equal.
                    let mut first_error = None;
                    for element in comparable {
                        match check_variant_literal_of(expr, path, element, literal) {
                            Ok(()) => return Ok(()),
                            Err(error) => first_error = first_error.or(Some(error)),
                        }
                    }
                    return Err(first_error.expect("at least one comparable element"));
                }
                _ => {}
            }
        }
        match self.check_operand(value)? {
            Class::String => self.require_comparable(expr, Class::String, Class::of_literal(literal), false),
            Class::Any | Class::Null => Ok(()),
            found => Err(mismatch(expr, "a string or an array", found)),
        }
    }

    fn require_comparable(&self, expr: &Expr, left: Class, right: Class, ordered: bool) -> Result<(), QueryError> {
        if !left.compatible(right) {
            return Err(mismatch(expr, left.name(), right));
        }
        if ordered && (left == Class::Enum || right == Class::Enum) {
            return Err(mismatch(expr, "a number or string (enums compare only with == and !=)", Class::Enum));
        }
        Ok(())
    }

    fn check_operand(&self, expr: &Expr) -> Result<Class, QueryError> {
        match expr {
            Expr::Field(path) => self.resolve(path).map(Class::of).ok_or_else(|| QueryError::UnknownField { path: path.to_string() }),
            Expr::Literal(literal) => Ok(Class::of_literal(literal)),
            Expr::Arith(a, _, b) => {
                for side in [a, b] {
                    match self.check_operand(side)? {
                        Class::Number | Class::Any | Class::Null => {}
                        found => return Err(mismatch(expr, "a number", found)),
                    }
                }
                Ok(Class::Number)
            }
            predicate => self.check_predicate(predicate).map(|()| Class::Bool),
        }
    }

    /// Checks that a field can order results.
    pub(crate) fn check_order(&self, path: &str) -> Result<(), QueryError> {
        let desc = self.resolve(path).ok_or_else(|| QueryError::UnknownField { path: path.to_owned() })?;
        match Class::of(desc) {
            Class::Container => Err(QueryError::Unorderable { path: path.to_owned() }),
            _ => Ok(()),
        }
    }
}

/// `TypeDesc::check_variant_literal` for a value of type `desc` at `path`.
fn check_variant_literal_of(expr: &Expr, path: &str, desc: &TypeDesc, literal: &Literal) -> Result<(), QueryError> {
    let Literal::Str(name) = literal else { return Ok(()) };
    let TypeDesc::Enum(variants) = strip_option(desc) else { return Ok(()) };
    match variants.iter().find(|(variant, _)| variant == name) {
        Some((_, None)) => return Ok(()),
        Some((_, Some(_))) => {}
        // No stored value is that string: `==` would match nothing and `!=` everything, as a
        // misspelt `is` is refused.
        None => return Err(QueryError::UnknownVariant { path: path.to_owned(), variant: name.clone() }),
    }
    Err(QueryError::TypeMismatch {
        expr: expr.to_string(),
        expected: format!("`{path} is {name}` (variant `{name}` carries a payload, which is not a string)"),
        found: "a string".to_owned(),
    })
}

/// `desc` without its `Option` wrappers: the type a value there has when it is not null.
pub(crate) fn strip_option(desc: &TypeDesc) -> &TypeDesc {
    match desc {
        TypeDesc::Option(inner) => strip_option(inner),
        other => other,
    }
}

fn mismatch(expr: &Expr, expected: &str, found: Class) -> QueryError {
    QueryError::TypeMismatch { expr: expr.to_string(), expected: expected.to_owned(), found: found.name().to_owned() }
}

/// One index of a record type, as `#[derive(Record)]` declares it.
///
/// ```
/// use tessera::collection::{IndexDef, Record};
/// #[derive(Record)]
/// struct User { #[record(key)] id: u32, #[record(unique)] email: String, #[record(index)] age: u8 }
/// assert_eq!(User::INDEXES, &[IndexDef { path: "email", unique: true }, IndexDef { path: "age", unique: false }][..]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexDef {
    /// Dotted path of the indexed field.
    pub path: &'static str,
    /// Whether two records may not share a non-null value.
    pub unique: bool,
}

/// An index as the database records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredIndex {
    pub(crate) path: String,
    pub(crate) unique: bool,
    /// The index's prefix byte in the collection's index keyspace.
    pub(crate) id: u8,
    /// Built for every record (new indexes build in the background).
    pub(crate) ready: bool,
    /// Why the last background build stopped, if it did and none has finished since: kept in
    /// the schema so that another process (`tessera info`) can say why an index is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failure: Option<String>,
}

/// What the database records of a collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredSchema {
    pub(crate) version: u32,
    pub(crate) key_fields: Vec<String>,
    pub(crate) shape: TypeDesc,
    pub(crate) indexes: Vec<StoredIndex>,
    /// How each key field is encoded in the primary key (see [`super::KeyKind`]): recorded
    /// when a dynamic collection creates the collection; empty for one a record type made
    /// (a dynamic handle then learns the widths from stored keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) key_kinds: Vec<super::KeyKind>,
}

impl StoredSchema {
    /// An index id not in use.
    pub(crate) fn free_index_id(&self) -> Option<u8> {
        (0..=u8::MAX).find(|id| self.indexes.iter().all(|index| index.id != *id))
    }
}

/// The float type a stored number must fit exactly ([`TypeDesc::narrowed_numbers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloatType {
    F32,
    F64,
}

impl FloatType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FloatType::F32 => "f32",
            FloatType::F64 => "f64",
        }
    }
}

/// The first number at `path` in `record` (see [`TypeDesc::narrowed_numbers`] for the steps)
/// that `float` cannot hold exactly, as text; `None` if every one fits (NaN and the
/// infinities do).
pub(crate) fn lossy_number(record: tessera_value::Value<'_>, path: &str, float: FloatType) -> Option<String> {
    let (step, rest) = match path.split_once('.') {
        Some((step, rest)) => (step, Some(rest)),
        None => (path, None),
    };
    let mut found = None;
    let mut visit = |value: tessera_value::Value<'_>| {
        if found.is_none() {
            found = match rest {
                Some(rest) => lossy_number(value, rest, float),
                None => lossy_leaf(value, float),
            };
        }
    };
    match step {
        "" => visit(record),
        "[]" => record.as_array().into_iter().flat_map(|array| array.iter()).for_each(visit),
        "*" => record.as_dict().into_iter().flat_map(|dict| dict.iter().map(|(_, value)| value).collect::<Vec<_>>()).for_each(visit),
        // A tuple's element (`[0]`); a bracketed step is never a field name a struct declares.
        step if step.starts_with('[') => {
            let index = step.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).and_then(|index| index.parse::<usize>().ok());
            if let Some(value) = index.and_then(|index| record.as_array()?.get(index)) {
                visit(value);
            }
        }
        name => {
            if let Some(value) = record.as_dict().and_then(|dict| dict.get(name)) {
                visit(value);
            }
        }
    }
    found
}

fn lossy_leaf(value: tessera_value::Value<'_>, float: FloatType) -> Option<String> {
    (!holds_exactly(value, float)).then(|| format!("{}, which {} cannot hold exactly", value.to_json(), float.name()))
}

/// Whether `float` holds the number `value` exactly: an integer only if converting it loses
/// nothing, a float as `f64` always and as `f32` only if narrowing loses nothing (NaN and the
/// infinities are kept). Not a number: true (nothing to round). One rule for schema changes
/// ([`lossy_number`]), dynamic writes into float fields and float keys of dynamic collections.
pub(crate) fn holds_exactly(value: tessera_value::Value<'_>, float: FloatType) -> bool {
    use tessera_value::Kind;
    let fits = |number: f64| float == FloatType::F64 || number.is_nan() || f64::from(number as f32) == number;
    match value.kind() {
        Kind::Int => value.as_i64().is_some_and(|int| {
            let number = int as f64;
            number.abs() < 2f64.powi(63) && number as i64 == int && fits(number)
        }),
        Kind::UInt => value.as_u64().is_some_and(|uint| {
            let number = uint as f64;
            number < 2f64.powi(64) && number as u64 == uint && fits(number)
        }),
        Kind::Float => value.as_f64().is_some_and(fits),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuple_once_described_as_any_may_become_a_list_of_anything_but_no_other_shape() {
        let any_list = TypeDesc::List(Box::new(TypeDesc::Any));
        assert_eq!(any_list.incompatibility(&TypeDesc::Any, "pair"), None, "a shape learned: stored values were arrays");
        let int_list = TypeDesc::List(Box::new(TypeDesc::Int));
        assert!(int_list.incompatibility(&TypeDesc::Any, "pair").is_some(), "element types were never checked");
        assert!(TypeDesc::String.incompatibility(&TypeDesc::Any, "pair").is_some());
    }

    #[test]
    fn a_tuple_learns_its_element_types_once_and_then_keeps_them() {
        let pair = |a: TypeDesc, b: TypeDesc| TypeDesc::Tuple(vec![a, b]);
        let any_list = TypeDesc::List(Box::new(TypeDesc::Any));
        let doubles = pair(TypeDesc::Float, TypeDesc::Float);
        // Learned from what older schemas said of a tuple; the f32 elements are then checked
        // against the stored values.
        assert_eq!(doubles.incompatibility(&any_list, "at"), None);
        assert_eq!(doubles.incompatibility(&TypeDesc::Any, "at"), None);
        let singles = pair(TypeDesc::Float32, TypeDesc::Integer(IntType::U8));
        let mut narrowed = Vec::new();
        singles.narrowed_numbers(&any_list, "at", &mut narrowed);
        assert_eq!(narrowed, [("at.[0]".to_owned(), FloatType::F32)]);
        // Once learned, a change is checked element by element.
        let reason = pair(TypeDesc::Float, TypeDesc::Integer(IntType::U8)).incompatibility(&pair(TypeDesc::Float, TypeDesc::String), "at");
        assert!(reason.is_some_and(|reason| reason.contains("at.[1]")));
        let reason = TypeDesc::Tuple(vec![TypeDesc::Float; 3]).incompatibility(&doubles, "at");
        assert!(reason.is_some_and(|reason| reason.contains("2 to 3 elements")));
        assert!(doubles.incompatibility(&TypeDesc::List(Box::new(TypeDesc::Float)), "at").is_some(), "a typed list is no tuple");
        let mut narrowed = Vec::new();
        pair(TypeDesc::Float32, TypeDesc::Float).narrowed_numbers(&doubles, "at", &mut narrowed);
        assert_eq!(narrowed, [("at.[0]".to_owned(), FloatType::F32)]);
        assert!(doubles.agrees_with(&pair(TypeDesc::Float, TypeDesc::Float32)), "widths are compared apart");
        assert!(!doubles.agrees_with(&TypeDesc::Tuple(vec![TypeDesc::Float])));
    }

    #[test]
    fn a_tuple_element_is_found_by_its_bracketed_index() {
        let bytes = tessera_value::from_json(br#"{"at": [0.1, 2.0]}"#).unwrap();
        let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
        assert!(lossy_number(doc.root(), "at.[0]", FloatType::F32).is_some_and(|found| found.starts_with("0.1")));
        assert_eq!(lossy_number(doc.root(), "at.[1]", FloatType::F32), None, "2.0 is an f32");
        assert_eq!(lossy_number(doc.root(), "at.[2]", FloatType::F32), None, "no such element");
    }

    #[test]
    fn has_field_names_top_level_fields_only() {
        let shape = TypeDesc::Struct(vec![
            ("null".into(), TypeDesc::Int),
            ("inner".into(), TypeDesc::Struct(vec![("true".into(), TypeDesc::Bool)])),
        ]);
        assert!(shape.has_field("null"));
        assert!(!shape.has_field("Null"), "field names are case-sensitive");
        assert!(!shape.has_field("true"), "a nested field is named by its path");
        assert!(!TypeDesc::Int.has_field("null"));
    }
}

//! Derives for tessera collections: `#[derive(Record)]` for a collection's record type and
//! `#[derive(Embed)]` for the structs and enums nested in it. See `tessera::collection`.

mod codec;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::quote;
use syn::{Data, DeriveInput, Error, Fields, LitInt, LitStr, parse_macro_input};

/// Implements `tessera::collection::Record` (and `Describe`, and the generated codec
/// `tessera::codec::{Encode, Decode}`) for a struct with named fields.
///
/// Attributes: on the struct, `#[record(name = "…", version = N, index = "path", unique =
/// "path")]` (`index` and `unique` repeat, and take dotted paths into nested fields); on a
/// field, `#[record(key)]` (several make a composite key, in declaration order),
/// `#[record(index)]`, `#[record(unique)]` or `#[record(index_elements)]` (a multi-entry index
/// on an array's elements, for `tags contains "x"`; the same as `index = "tags[]"` on the
/// struct). A path declared both `index` and `unique` has one index, unique. A unique index is
/// on a boolean, a number, a string or an enum without payloads: opening a collection with one
/// on a struct, a list, a tuple struct, a map, bytes or an enum with payloads is
/// `Error::SchemaMismatch` (its entries could not tell two such values apart). Fields and
/// variants are named as serde names them (a raw identifier `r#type` is `type`). Each field
/// also gets a typed query builder: `Type::field_name()`.
///
/// ```
/// use tessera::collection::{Embed, Record};
/// #[derive(Embed, Debug, PartialEq)]
/// struct Address { city: String }
/// #[derive(Record, Debug, PartialEq)]
/// #[record(name = "people", index = "address.city")]
/// struct Person {
///     #[record(key)]
///     id: u64,
///     #[record(unique)]
///     email: String,
///     #[record(index_elements)]
///     tags: Vec<String>,
///     address: Address,
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let people = db.collection::<Person>()?;
/// let ada = Person { id: 1, email: "ada@example.com".into(), tags: vec!["math".into()], address: Address { city: "London".into() } };
/// db.write(|tx| people.insert(tx, &ada))?;
/// assert_eq!(people.filter(Person::tags().contains("math")).count(&db)?, 1);
/// assert_eq!(people.filter_text(r#"address.city == "London""#)?.first(&db)?, Some(ada));
/// # Ok::<(), tessera::Error>(())
/// ```
///
/// A field marked `key` twice is refused (it would make a composite key of the field and
/// itself):
///
/// ```compile_fail
/// use tessera::collection::Record;
/// #[derive(Record)]
/// struct Tag { #[record(key, key)] id: u32 }
/// ```
#[proc_macro_derive(Record, attributes(record))]
pub fn derive_record(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    record(&input).unwrap_or_else(Error::into_compile_error).into()
}

/// Implements `tessera::collection::Describe` and the generated codec
/// (`tessera::codec::{Encode, Decode}`) for a struct or enum nested in a record, so that it is
/// stored without serde and queries on its fields are type-checked.
///
/// serde attributes that change names or shape (`rename`, `rename_all`, `flatten`, `skip`,
/// `default`, `tag`, `untagged`, …) are refused at compile time, on records too: tessera
/// stores serde's default layout, which its queries and indexes rely on.
///
/// On a struct with named fields and no generics it also generates a trait, `NameFields`
/// (`AddressFields` for `Address`), implemented for `Field<Address>` and
/// `Field<Option<Address>>`, with one method per field: `Person::address().city()` is the typed
/// field `address.city`. The trait must be in scope where it is used (it is in the struct's
/// module; elsewhere, import it).
///
/// ```
/// use tessera::collection::{Embed, Record};
/// #[derive(Embed, Debug, PartialEq)]
/// struct Address { city: String, zip: Option<String> }
/// #[derive(Embed, Debug, PartialEq)]
/// enum Contact { Email(String), Phone { number: String } }
/// #[derive(Record, Debug, PartialEq)]
/// struct Person { #[record(key)] id: u64, address: Address, contact: Contact }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let people = db.collection::<Person>()?;
/// let paris = Person { id: 1, address: Address { city: "Paris".into(), zip: None }, contact: Contact::Phone { number: "1".into() } };
/// db.write(|tx| people.insert(tx, &paris))?;
/// // AddressFields (generated) gives the typed nested field address.city:
/// assert_eq!(people.filter(Person::address().city().eq("Paris")).count(&db)?, 1);
/// assert_eq!(people.filter(Person::contact().is_variant("Phone")).count(&db)?, 1);
/// # Ok::<(), tessera::Error>(())
/// ```
///
/// A struct field named `is_null` or `is_not_null` is refused: `Field`'s own method of that name
/// would take the place of the generated one, and `Person::flags().is_null()` would test
/// `flags` for NULL instead of reading `flags.is_null`.
///
/// ```compile_fail
/// use tessera::collection::Embed;
/// #[derive(Embed)]
/// struct Flags { is_null: bool }
/// ```
#[proc_macro_derive(Embed)]
pub fn derive_embed(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    embed(&input).unwrap_or_else(Error::into_compile_error).into()
}

/// The name serde gives `ident`: without the `r#` of a raw identifier (`r#type` is `type`).
pub(crate) fn ident_name(ident: &syn::Ident) -> String {
    use syn::ext::IdentExt;
    ident.unraw().to_string()
}

/// The name serde gives a named field (see [`ident_name`]).
pub(crate) fn field_name(field: &syn::Field) -> String {
    field.ident.as_ref().map(ident_name).unwrap_or_default()
}

struct RecordAttrs {
    name: Option<String>,
    version: u32,
    indexes: Vec<(String, bool)>,
}

fn struct_attrs(input: &DeriveInput) -> syn::Result<RecordAttrs> {
    let mut attrs = RecordAttrs { name: None, version: 1, indexes: Vec::new() };
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("record")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                attrs.name = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("version") {
                attrs.version = meta.value()?.parse::<LitInt>()?.base10_parse()?;
            } else if meta.path.is_ident("index") {
                attrs.indexes.push((meta.value()?.parse::<LitStr>()?.value(), false));
            } else if meta.path.is_ident("unique") {
                attrs.indexes.push((meta.value()?.parse::<LitStr>()?.value(), true));
            } else {
                return Err(meta.error("expected `name`, `version`, `index` or `unique`"));
            }
            Ok(())
        })?;
    }
    Ok(attrs)
}

/// One index per path, in the order of first declaration: a path declared both `index` and
/// `unique` (on the field, on the struct, or both) has one unique index. Two definitions of
/// one path made the collection create only the first, so `#[record(index, unique)]` was not
/// unique while `#[record(unique, index)]` was.
fn merged_indexes(declared: Vec<(String, bool)>) -> Vec<(String, bool)> {
    let mut merged: Vec<(String, bool)> = Vec::new();
    for (path, unique) in declared {
        match merged.iter_mut().find(|(seen, _)| *seen == path) {
            Some((_, seen_unique)) => *seen_unique |= unique,
            None => merged.push((path, unique)),
        }
    }
    merged
}

fn named_fields(input: &DeriveInput) -> syn::Result<&syn::FieldsNamed> {
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => Ok(fields),
            _ => Err(Error::new_spanned(&input.ident, "a record is a struct with named fields")),
        },
        _ => Err(Error::new_spanned(&input.ident, "a record is a struct with named fields")),
    }
}

fn describe_fields(fields: &syn::FieldsNamed) -> Tokens {
    let entries = fields.named.iter().map(|field| {
        let name = field_name(field);
        let ty = &field.ty;
        quote! { (::std::string::String::from(#name), <#ty as ::tessera::collection::Describe>::describe()) }
    });
    quote! { ::tessera::collection::TypeDesc::Struct(::std::vec![#(#entries),*]) }
}

fn record(input: &DeriveInput) -> syn::Result<Tokens> {
    let attrs = struct_attrs(input)?;
    let fields = named_fields(input)?;
    let ident = &input.ident;
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    let mut indexes = attrs.indexes.clone();
    let mut keys = Vec::new();
    for field in &fields.named {
        let name = field_name(field);
        for attr in field.attrs.iter().filter(|a| a.path().is_ident("record")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("key") {
                    // Twice would make a composite key of the field and itself.
                    if keys.iter().any(|key: &&syn::Field| std::ptr::eq(*key, field)) {
                        return Err(meta.error(format!("field `{name}` is marked `key` twice")));
                    }
                    keys.push(field);
                } else if meta.path.is_ident("index") {
                    indexes.push((name.clone(), false));
                } else if meta.path.is_ident("unique") {
                    indexes.push((name.clone(), true));
                } else if meta.path.is_ident("index_elements") {
                    indexes.push((format!("{name}[]"), false));
                } else {
                    return Err(meta.error("expected `key`, `index`, `index_elements` or `unique`"));
                }
                Ok(())
            })?;
        }
    }
    if keys.is_empty() {
        return Err(Error::new(Span::call_site(), "a record needs a primary key: mark one or more fields `#[record(key)]`"));
    }
    let indexes = merged_indexes(indexes);
    let collection = attrs.name.unwrap_or_else(|| ident_name(ident));
    let version = attrs.version;
    let key_names: Vec<String> = keys.iter().map(|f| field_name(f)).collect();
    let key_idents: Vec<_> = keys.iter().map(|f| &f.ident).collect();
    let key_types: Vec<_> = keys.iter().map(|f| &f.ty).collect();
    let key_count = keys.len();
    let key_type = if keys.len() == 1 {
        quote! { #(#key_types)* }
    } else {
        quote! { (#(#key_types,)*) }
    };
    let key_value = if keys.len() == 1 {
        quote! { #(::std::clone::Clone::clone(&self.#key_idents))* }
    } else {
        quote! { (#(::std::clone::Clone::clone(&self.#key_idents),)*) }
    };
    let index_defs = indexes.iter().map(|(path, unique)| quote! { ::tessera::collection::IndexDef { path: #path, unique: #unique } });
    let describe = describe_fields(fields);
    let builders = fields.named.iter().map(|field| {
        let name = field_name(field);
        let fn_ident = &field.ident;
        let ty = &field.ty;
        let doc = format!("The field `{name}`, to build a typed query from.");
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub fn #fn_ident() -> ::tessera::query::Field<#ty> {
                ::tessera::query::Field::new(#name)
            }
        }
    });
    let (view_type, view_outside, view_inside) = codec::record_view(input, fields, &key_idents);
    let codec = codec::codec(input, view_inside)?;
    Ok(quote! {
        #view_outside
        #codec
        impl #impl_generics ::tessera::collection::Describe for #ident #type_generics #where_clause {
            // Guarded as an embedded type's is: a record that holds itself (`children:
            // Vec<Node>`) would describe itself without end.
            fn describe() -> ::tessera::collection::TypeDesc {
                ::tessera::collection::describe_once(::std::any::type_name::<Self>(), || #describe)
            }
        }
        impl #impl_generics ::tessera::collection::Record for #ident #type_generics #where_clause {
            type Key = #key_type;
            type View<'__t> = #view_type;
            const NAME: &'static str = #collection;
            const VERSION: u32 = #version;
            const KEY_FIELDS: &'static [&'static str] = &[#(#key_names),*];
            const INDEXES: &'static [::tessera::collection::IndexDef] = &[#(#index_defs),*];
            fn key(&self) -> Self::Key { #key_value }
            fn encode_key(&self, out: &mut ::std::vec::Vec<u8>) {
                #(::tessera::store::key::KeyPart::encode_key(&self.#key_idents, out);)*
            }
            fn has_key(&self, key: &[u8]) -> bool {
                let mut rest = key;
                #(
                    if !::tessera::store::key::KeyPart::strip_encoded(&self.#key_idents, &mut rest) {
                        return false;
                    }
                )*
                rest.is_empty()
            }
            fn encode_key_prefix(literals: &[::tessera::query::Literal], out: &mut ::std::vec::Vec<u8>) -> bool {
                if literals.len() > #key_count {
                    return false;
                }
                let mut literals = literals.iter();
                #(
                    let ::std::option::Option::Some(literal) = literals.next() else { return true };
                    if !<#key_types as ::tessera::collection::KeyLiteral>::encode_literal(literal, out) { return false; }
                )*
                true
            }
            fn display_key(key: &[u8]) -> ::std::option::Option<::std::string::String> {
                let quote = #key_count > 1;
                let mut rest = key;
                let mut parts: ::std::vec::Vec<::std::string::String> = ::std::vec::Vec::new();
                // A prefix of the key's parts (a range bound) shows the parts it has.
                #(
                    if parts.is_empty() || !rest.is_empty() {
                        let (part, next) = <#key_types as ::tessera::collection::KeyLiteral>::display_part(rest, quote)?;
                        parts.push(part);
                        rest = next;
                    }
                )*
                if !rest.is_empty() {
                    return ::std::option::Option::None;
                }
                ::std::option::Option::Some(if quote { ::std::format!("({})", parts.join(", ")) } else { parts.concat() })
            }
            fn encode_key_literals(literals: &[::tessera::query::Literal], out: &mut ::std::vec::Vec<u8>) -> bool {
                let mut literals = literals.iter();
                #(
                    let ::std::option::Option::Some(literal) = literals.next() else { return false };
                    if !<#key_types as ::tessera::collection::KeyLiteral>::encode_literal(literal, out) { return false; }
                )*
                true
            }
        }
        impl #impl_generics #ident #type_generics #where_clause {
            #(#builders)*
        }
    })
}

/// The type's generics with `P: Describe` for every type parameter `P`.
fn describe_generics(input: &DeriveInput) -> syn::Generics {
    let mut generics = input.generics.clone();
    for param in input.generics.type_params() {
        let name = &param.ident;
        generics.make_where_clause().predicates.push(syn::parse_quote! { #name: ::tessera::collection::Describe });
    }
    generics
}

/// How a tuple struct or tuple variant of several fields is described: the codec stores it as
/// an array of its fields in order, so it is a tuple of their types (a unique index on it is
/// refused when the collection opens, and a dynamic write of anything but an array of as many
/// elements, each of its type, is refused).
fn tuple_desc(fields: &syn::FieldsUnnamed) -> Tokens {
    let elements = fields.unnamed.iter().map(|field| {
        let ty = &field.ty;
        quote! { <#ty as ::tessera::collection::Describe>::describe() }
    });
    quote! { ::tessera::collection::TypeDesc::Tuple(::std::vec![#(#elements),*]) }
}

fn embed(input: &DeriveInput) -> syn::Result<Tokens> {
    let ident = &input.ident;
    let generics = describe_generics(input);
    let (impl_generics, type_generics, where_clause) = generics.split_for_impl();
    let describe = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => describe_fields(fields),
            Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                let ty = &fields.unnamed[0].ty;
                quote! { <#ty as ::tessera::collection::Describe>::describe() }
            }
            // Stored as an array of its fields.
            Fields::Unnamed(fields) => tuple_desc(fields),
            Fields::Unit => quote! { ::tessera::collection::TypeDesc::Any },
        },
        Data::Enum(data) => {
            let variants = data.variants.iter().map(|variant| {
                let name = ident_name(&variant.ident);
                let payload = match &variant.fields {
                    Fields::Unit => quote! { ::std::option::Option::None },
                    Fields::Named(fields) => {
                        let describe = describe_fields(fields);
                        quote! { ::std::option::Option::Some(#describe) }
                    }
                    Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                        let ty = &fields.unnamed[0].ty;
                        quote! { ::std::option::Option::Some(<#ty as ::tessera::collection::Describe>::describe()) }
                    }
                    Fields::Unnamed(fields) => {
                        let tuple = tuple_desc(fields);
                        quote! { ::std::option::Option::Some(#tuple) }
                    }
                };
                quote! { (::std::string::String::from(#name), #payload) }
            });
            quote! { ::tessera::collection::TypeDesc::Enum(::std::vec![#(#variants),*]) }
        }
        Data::Union(_) => return Err(Error::new_spanned(ident, "unions cannot be embedded")),
    };
    let codec = codec::codec(input, Tokens::new())?;
    let nested_fields = nested_fields(input)?;
    Ok(quote! {
        #codec
        impl #impl_generics ::tessera::collection::Describe for #ident #type_generics #where_clause {
            fn describe() -> ::tessera::collection::TypeDesc {
                ::tessera::collection::describe_once(::std::any::type_name::<Self>(), || #describe)
            }
        }
        #nested_fields
    })
}

/// Names of `Field`'s own methods that take no argument besides `self`: a method of the
/// generated trait with such a name is never called, because Rust picks the inherent method,
/// so `Person::address().is_null()` would silently be the IS NULL test of `address`.
const FIELD_METHODS_WITHOUT_ARGUMENTS: [&str; 2] = ["is_null", "is_not_null"];

/// The typed fields inside an embedded struct (see [`derive_embed`]): a trait named after the
/// struct, implemented for a field of the struct's type, optional or not. Nothing for an enum,
/// a tuple struct or a generic struct. A field whose accessor `Field`'s own method would hide
/// is a compile error.
fn nested_fields(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Struct(data) = &input.data else { return Ok(Tokens::new()) };
    let Fields::Named(fields) = &data.fields else { return Ok(Tokens::new()) };
    if !input.generics.params.is_empty() {
        return Ok(Tokens::new());
    }
    if let Some(hidden) = fields.named.iter().find(|field| FIELD_METHODS_WITHOUT_ARGUMENTS.contains(&field_name(field).as_str())) {
        let name = field_name(hidden);
        return Err(Error::new_spanned(
            &hidden.ident,
            format!(
                "an embedded struct's field cannot be named `{name}`: `Field::{name}` (the NULL test) would take the place of its \
                 typed query field, so `….{name}()` would test the struct for NULL instead of reading the field; rename the field"
            ),
        ));
    }
    let ident = &input.ident;
    let vis = &input.vis;
    let trait_ident = syn::Ident::new(&format!("{ident}Fields"), ident.span());
    let trait_doc = format!("Typed query fields inside `{ident}`, reached through a field of its type (generated by `#[derive(Embed)]`).");
    let signatures: Vec<Tokens> = fields
        .named
        .iter()
        .map(|field| {
            let name = field_name(field);
            let fn_ident = &field.ident;
            let ty = &field.ty;
            let doc = format!("The field `{name}` inside this one, to build a typed query from.");
            quote! {
                #[doc = #doc]
                fn #fn_ident(self) -> ::tessera::query::Field<#ty>
            }
        })
        .collect();
    let bodies = fields.named.iter().map(|field| {
        let name = field_name(field);
        quote! { { ::tessera::query::Field::child(self, #name) } }
    });
    let methods: Vec<Tokens> = signatures.iter().zip(bodies).map(|(signature, body)| quote! { #signature #body }).collect();
    Ok(quote! {
        #[doc = #trait_doc]
        #[allow(dead_code, private_interfaces, non_snake_case)]
        #vis trait #trait_ident {
            #(#signatures;)*
        }
        impl #trait_ident for ::tessera::query::Field<#ident> {
            #(#methods)*
        }
        impl #trait_ident for ::tessera::query::Field<::std::option::Option<#ident>> {
            #(#methods)*
        }
    })
}

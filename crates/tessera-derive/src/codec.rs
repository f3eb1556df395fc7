//! The generated codec: `Encode` and `Decode` impls that write and read tessera's binary format
//! directly, in serde's default layout, with field keys as pre-resolved shared-key ids.

use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::{Attribute, Data, DeriveInput, Error, Fields, Meta, Token};

/// serde attributes that change a type's stored names or shape. The codec writes serde's
/// default layout, so a type carrying one of them would be stored in one layout and queried in
/// another: refused at compile time.
const SHAPE_CHANGING_SERDE_ATTRIBUTES: &[&str] = &[
    "rename",
    "rename_all",
    "rename_all_fields",
    "flatten",
    "skip",
    "skip_serializing",
    "skip_deserializing",
    "skip_serializing_if",
    "default",
    "tag",
    "content",
    "untagged",
    "alias",
    "transparent",
    "from",
    "try_from",
    "into",
    "with",
    "serialize_with",
    "deserialize_with",
    "remote",
    "getter",
    "other",
    "variant_identifier",
    "field_identifier",
];

/// Refuses the serde attributes of [`SHAPE_CHANGING_SERDE_ATTRIBUTES`] on `attrs`.
fn refuse_shape_changing_serde(attrs: &[Attribute]) -> syn::Result<()> {
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let Meta::List(list) = &attr.meta else { continue };
        let metas = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
        for meta in metas {
            if let Some(name) = SHAPE_CHANGING_SERDE_ATTRIBUTES.iter().find(|name| meta.path().is_ident(name)) {
                return Err(Error::new_spanned(
                    meta.path(),
                    format!(
                        "tessera stores records in serde's default layout, which queries and indexes rely on; \
                         `#[serde({name})]` would store another layout, so it is not supported on a Record or Embed type"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks every serde attribute of the type, its fields and its variants.
fn refuse_serde_in(input: &DeriveInput) -> syn::Result<()> {
    refuse_shape_changing_serde(&input.attrs)?;
    let check_fields = |fields: &Fields| fields.iter().try_for_each(|field| refuse_shape_changing_serde(&field.attrs));
    match &input.data {
        Data::Struct(data) => check_fields(&data.fields),
        Data::Enum(data) => data.variants.iter().try_for_each(|variant| {
            refuse_shape_changing_serde(&variant.attrs)?;
            check_fields(&variant.fields)
        }),
        Data::Union(_) => Ok(()),
    }
}

/// Field names as a `static` list (one address, which `FieldIds` keys on).
fn names_static(ident: &syn::Ident, names: &[String]) -> Tokens {
    quote! { static #ident: ::tessera::codec::FieldNames = &[#(#names),*]; }
}

/// How one struct-like body (a struct, or a variant's payload) is written and read.
struct Body {
    /// `static` items the body needs.
    statics: Tokens,
    /// Pushes the body; the field bindings are in scope.
    encode: Tokens,
    /// Visits the body's field-name lists.
    visit: Tokens,
    /// Reads the body from `value` into the constructor `path`.
    decode: Tokens,
}

/// The body of `fields`, whose values are bound to `bindings` when encoding and built with
/// `constructor` when decoding. `names_ident` names its static field list.
fn body(fields: &Fields, bindings: &[syn::Ident], constructor: Tokens, names_ident: syn::Ident, what: &str) -> Body {
    let types: Vec<&syn::Type> = fields.iter().map(|field| &field.ty).collect();
    let visit = quote! { #(<#types as ::tessera::codec::Encode>::field_names(visit);)* };
    match fields {
        Fields::Named(named) => {
            let names: Vec<String> = named.named.iter().map(crate::field_name).collect();
            let idents: Vec<&syn::Ident> = named.named.iter().filter_map(|f| f.ident.as_ref()).collect();
            let indexes: Vec<usize> = (0..names.len()).collect();
            Body {
                statics: names_static(&names_ident, &names),
                encode: quote! {
                    let list = ids.get(#names_ident);
                    out.begin_dict()?;
                    #(
                        ::tessera::codec::write_field_key(out, list, #names_ident, #indexes)?;
                        ::tessera::codec::Encode::encode(#bindings, out, ids)?;
                    )*
                    out.end_dict()
                },
                visit: quote! { if visit(#names_ident) { #visit } },
                decode: quote! {
                    let dict = value.as_dict().ok_or_else(|| ::tessera::codec::FieldError::wrong_type(#what, value))?;
                    let list = ids.fields(#names_ident);
                    ::std::result::Result::Ok(#constructor {
                        #(#idents: ::tessera::codec::decode_field(&dict, list, #names_ident, #indexes, ids)?,)*
                    })
                },
            }
        }
        Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => Body {
            statics: Tokens::new(),
            encode: quote! { #(::tessera::codec::Encode::encode(#bindings, out, ids))* },
            visit,
            decode: quote! { ::std::result::Result::Ok(#constructor(::tessera::codec::Decode::decode(value, ids)?)) },
        },
        Fields::Unnamed(unnamed) => {
            let indexes: Vec<usize> = (0..unnamed.unnamed.len()).collect();
            let count = indexes.len();
            Body {
                statics: Tokens::new(),
                encode: quote! {
                    out.begin_array()?;
                    #(::tessera::codec::Encode::encode(#bindings, out, ids)?;)*
                    out.end_array()
                },
                visit,
                decode: quote! {
                    let array = value.as_array().filter(|array| array.len() == #count)
                        .ok_or_else(|| ::tessera::codec::FieldError::wrong_type(concat!("an array of ", #count, " elements"), value))?;
                    ::std::result::Result::Ok(#constructor(
                        #(::tessera::codec::Decode::decode(array.get(#indexes).expect("length checked"), ids)
                            .map_err(|error| error.in_element(#indexes))?,)*
                    ))
                },
            }
        }
        Fields::Unit => Body {
            statics: Tokens::new(),
            encode: quote! { out.push_null() },
            visit: Tokens::new(),
            // Stored as null, as serde writes a unit struct: anything else is another type, not
            // the unit struct read from it.
            decode: quote! {
                if value.is_null() {
                    ::std::result::Result::Ok(#constructor)
                } else {
                    ::std::result::Result::Err(::tessera::codec::FieldError::wrong_type("null (a unit struct)", value))
                }
            },
        },
    }
}

/// Bindings `__field0 …` for the fields of `fields`, and the pattern that binds them.
fn bindings(fields: &Fields) -> (Vec<syn::Ident>, Tokens) {
    let bindings: Vec<syn::Ident> = (0..fields.len()).map(|i| format_ident!("__field{}", i)).collect();
    let pattern = match fields {
        Fields::Named(named) => {
            let idents = named.named.iter().filter_map(|f| f.ident.as_ref());
            quote! { { #(#idents: #bindings),* } }
        }
        Fields::Unnamed(_) => quote! { ( #(#bindings),* ) },
        Fields::Unit => Tokens::new(),
    };
    (bindings, pattern)
}

/// The generated view of a record: `NameView<'t>` with one accessor per field (records with
/// type parameters get `PlainView`). Returns the view type and the items to place outside and
/// inside the codec's scope.
pub fn record_view(input: &DeriveInput, fields: &syn::FieldsNamed, key_idents: &[&Option<syn::Ident>]) -> (Tokens, Tokens, Tokens) {
    let ident = &input.ident;
    if input.generics.type_params().next().is_some() {
        return (quote! { ::tessera::collection::PlainView<'__t> }, Tokens::new(), Tokens::new());
    }
    let vis = &input.vis;
    let view = format_ident!("{}View", ident);
    let doc = format!("A stored `{ident}` read in place (see `tessera::collection::RecordRef`): one accessor per field.");
    let outside = quote! {
        #[doc = #doc]
        #[derive(Clone)]
        #vis struct #view<'__t> {
            parts: ::tessera::collection::ViewParts<'__t>,
        }
    };
    let accessors = fields.named.iter().enumerate().map(|(index, field)| {
        let name = field.ident.as_ref().expect("named field");
        let ty = &field.ty;
        let doc =
            format!("The field `{name}`, read in place: strings borrow from the database, scalars are copied, other types are decoded.");
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub fn #name(&self) -> ::tessera::Result<<#ty as ::tessera::codec::View<'__t>>::Out> {
                self.parts.field::<#ty>(FIELDS, #index)
            }
        }
    });
    let inside = quote! {
        impl<'__t> ::tessera::collection::RecordView<'__t> for #view<'__t> {
            fn from_parts(parts: ::tessera::collection::ViewParts<'__t>) -> Self {
                #view { parts }
            }
            fn parts(&self) -> &::tessera::collection::ViewParts<'__t> {
                &self.parts
            }
            const KEY_COMPARED: bool = true;
            fn has_key(&self, key: &[u8]) -> ::tessera::Result<bool> {
                let mut rest = key;
                #(
                    if !::tessera::store::key::KeyPart::strip_encoded(&self.#key_idents()?, &mut rest) {
                        return ::std::result::Result::Ok(false);
                    }
                )*
                ::std::result::Result::Ok(rest.is_empty())
            }
        }
        impl<'__t> #view<'__t> {
            #(#accessors)*
        }
    };
    (quote! { #view<'__t> }, outside, inside)
}

/// `Encode`, `Decode` and `View` impls for a struct or enum; `inside` is placed in the same
/// scope (it may use the `FIELDS` list of a struct).
pub fn codec(input: &DeriveInput, inside: Tokens) -> syn::Result<Tokens> {
    refuse_serde_in(input)?;
    if let Some(lifetime) = input.generics.lifetimes().next() {
        return Err(Error::new_spanned(lifetime, "tessera records and embedded types own their data: no lifetime parameters"));
    }
    let ident = &input.ident;
    let mut encode_generics = input.generics.clone();
    let mut decode_generics = input.generics.clone();
    for param in input.generics.type_params() {
        let name = &param.ident;
        encode_generics.make_where_clause().predicates.push(syn::parse_quote! { #name: ::tessera::codec::Encode });
        decode_generics.make_where_clause().predicates.push(syn::parse_quote! { #name: ::tessera::codec::DecodeOwned });
    }
    decode_generics.params.insert(0, syn::parse_quote! { '__de });
    let (impl_generics, type_generics, encode_where) = encode_generics.split_for_impl();
    let (decode_impl_generics, _, decode_where) = decode_generics.split_for_impl();
    // What a record stored without the field reads as: a newtype reads as its inner type does
    // (an `Option` inside reads `None`), a unit struct as itself, anything else is missing.
    // The schema check counts exactly these as optional when it lets a type gain a field.
    let missing = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => {
                let inner = &unnamed.unnamed[0].ty;
                quote! {
                    fn missing() -> ::std::option::Option<Self> {
                        <#inner as ::tessera::codec::Decode<'__de>>::missing().map(#ident)
                    }
                }
            }
            Fields::Unit => quote! {
                fn missing() -> ::std::option::Option<Self> {
                    ::std::option::Option::Some(#ident)
                }
            },
            _ => Tokens::new(),
        },
        _ => Tokens::new(),
    };
    // Whether a value is written as null, as its `missing` reads (see `Encode::encodes_null`):
    // an `Option` refuses `Some` of it, which would read back as `None`.
    let encodes_null = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => quote! {
                #[inline]
                fn encodes_null(&self) -> bool {
                    ::tessera::codec::Encode::encodes_null(&self.0)
                }
            },
            Fields::Unit => quote! {
                #[inline]
                fn encodes_null(&self) -> bool {
                    true
                }
            },
            _ => Tokens::new(),
        },
        _ => Tokens::new(),
    };
    let (statics, encode, visit, decode) = match &input.data {
        Data::Struct(data) => {
            let (bindings, pattern) = bindings(&data.fields);
            let body = body(&data.fields, &bindings, quote! { #ident }, format_ident!("FIELDS"), "a struct");
            let (encode, decode) = (body.encode, body.decode);
            (body.statics, quote! { let #ident #pattern = self; #encode }, body.visit, decode)
        }
        Data::Enum(data) => {
            let variant_names: Vec<String> = data.variants.iter().map(|v| crate::ident_name(&v.ident)).collect();
            let mut statics = names_static(&format_ident!("VARIANTS"), &variant_names);
            let (mut encode_arms, mut decode_arms, mut visits) = (Vec::new(), Vec::new(), Vec::new());
            for (index, variant) in data.variants.iter().enumerate() {
                let variant_ident = &variant.ident;
                let name = &variant_names[index];
                let (bindings, pattern) = bindings(&variant.fields);
                if let Fields::Unit = variant.fields {
                    encode_arms.push(quote! { #ident::#variant_ident => out.push_str(#name), });
                    // A payload other than null is not this variant's: an error at the
                    // variant, not an unknown variant.
                    decode_arms.push(quote! {
                        (#name, ::std::option::Option::None) => ::std::result::Result::Ok(#ident::#variant_ident),
                        (#name, ::std::option::Option::Some(payload)) if payload.is_null() => ::std::result::Result::Ok(#ident::#variant_ident),
                        (#name, ::std::option::Option::Some(payload)) => ::std::result::Result::Err(
                            ::tessera::codec::FieldError::wrong_type("null (a unit variant has no payload)", payload).in_field(#name),
                        ),
                    });
                    continue;
                }
                let names_ident = format_ident!("VARIANT_{}_FIELDS", index);
                let body = body(&variant.fields, &bindings, quote! { #ident::#variant_ident }, names_ident, "a variant's fields");
                statics.extend(body.statics);
                visits.push(body.visit);
                let (encode, decode) = (body.encode, body.decode);
                encode_arms.push(quote! {
                    #ident::#variant_ident #pattern => {
                        out.begin_dict()?;
                        ::tessera::codec::write_field_key(out, ids.get(VARIANTS), VARIANTS, #index)?;
                        { #encode }?;
                        out.end_dict()
                    }
                });
                // Stored as its bare name, the variant lacks its payload.
                decode_arms.push(quote! {
                    (#name, ::std::option::Option::Some(value)) => (|| -> ::std::result::Result<Self, ::tessera::codec::FieldError> { #decode })()
                        .map_err(|error| error.in_field(#name)),
                    (#name, ::std::option::Option::None) => ::std::result::Result::Err(::tessera::codec::FieldError::missing().in_field(#name)),
                });
            }
            let encode = quote! {
                match self { #(#encode_arms)* }
            };
            let visit = quote! { if visit(VARIANTS) { #(#visits)* } };
            let decode = quote! {
                match ::tessera::codec::variant_of(value)? {
                    #(#decode_arms)*
                    (name, _) => ::std::result::Result::Err(::tessera::codec::FieldError::unknown_variant(name)),
                }
            };
            (statics, encode, visit, decode)
        }
        Data::Union(_) => return Err(Error::new_spanned(ident, "unions cannot be stored")),
    };
    Ok(quote! {
        const _: () = {
            #statics
            impl #impl_generics ::tessera::codec::Encode for #ident #type_generics #encode_where {
                #[allow(unused_variables)]
                fn encode(
                    &self,
                    out: &mut ::tessera::value::Encoder<'_>,
                    ids: &::tessera::codec::FieldIds,
                ) -> ::std::result::Result<(), ::tessera::value::EncodeError> {
                    #encode
                }
                #[allow(unused_variables)]
                fn field_names(visit: &mut dyn FnMut(::tessera::codec::FieldNames) -> bool) {
                    #visit
                }
                #encodes_null
            }
            impl #decode_impl_generics ::tessera::codec::Decode<'__de> for #ident #type_generics #decode_where {
                #[allow(unused_variables)]
                fn decode(
                    value: ::tessera::value::Value<'__de>,
                    ids: &::tessera::codec::FieldIds,
                ) -> ::std::result::Result<Self, ::tessera::codec::FieldError> {
                    #decode
                }
                #missing
            }
            impl #decode_impl_generics ::tessera::codec::View<'__de> for #ident #type_generics #decode_where {
                type Out = Self;
                #[inline]
                fn view(
                    value: ::tessera::value::Value<'__de>,
                    ids: &::tessera::codec::FieldIds,
                ) -> ::std::result::Result<Self, ::tessera::codec::FieldError> {
                    <Self as ::tessera::codec::Decode<'__de>>::decode(value, ids)
                }
                fn view_missing() -> ::std::option::Option<Self> {
                    <Self as ::tessera::codec::Decode<'__de>>::missing()
                }
            }
            #inside
        };
    })
}

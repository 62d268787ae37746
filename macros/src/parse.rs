//! Parsing: the attribute's `key = value` list and the item it is put on,
//! without judging them (that is [`crate::validate`]'s job).

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Item, Token};

/// The attribute's arguments: `name = "resize", queue = "images", …`.
#[derive(Default)]
pub struct HandlerArgs {
    /// The options in the order written (duplicates and unknown keys kept).
    pub options: Vec<RawOption>,
}

/// One `key = value` option as written.
pub struct RawOption {
    /// The key; any identifier or keyword (`crate` is one).
    pub key: Ident,
    /// The value, parsed as an expression (a literal or a path in practice).
    pub value: Expr,
}

impl Parse for HandlerArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let options = Punctuated::<RawOption, Token![,]>::parse_terminated(input)?;
        Ok(HandlerArgs {
            options: options.into_iter().collect(),
        })
    }
}

impl Parse for RawOption {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        if !input.peek(Token![=]) {
            let key = key.unraw();
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key} = …`; handler options are written `key = value`"),
            ));
        }
        input.parse::<Token![=]>()?;
        let value = input.parse()?;
        Ok(RawOption { key, value })
    }
}

/// Parses the attribute's arguments.
pub fn parse_args(attr: TokenStream) -> syn::Result<HandlerArgs> {
    syn::parse2(attr)
}

/// Parses the item the attribute is on (any item; only functions pass
/// validation).
pub fn parse_item(item: TokenStream) -> syn::Result<Item> {
    syn::parse2(item)
}

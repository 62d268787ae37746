//! The item: a function whose signature a handler can have (the context by
//! value, an optional owned argument type, a `Result<(), …>` return).

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{FnArg, GenericArgument, Item, ItemFn, Path, PathArguments, ReturnType, Type};

use super::Errors;

/// The first tokens of a non-function item (its keyword and name), for
/// pointing at it without underlining its whole body.
pub(super) fn item_head(item: &Item) -> TokenStream {
    match item {
        Item::Struct(i) => head(&i.struct_token, &i.ident),
        Item::Enum(i) => head(&i.enum_token, &i.ident),
        Item::Union(i) => head(&i.union_token, &i.ident),
        Item::Const(i) => head(&i.const_token, &i.ident),
        Item::Static(i) => head(&i.static_token, &i.ident),
        Item::Mod(i) => head(&i.mod_token, &i.ident),
        Item::Trait(i) => head(&i.trait_token, &i.ident),
        Item::Type(i) => head(&i.type_token, &i.ident),
        Item::Impl(i) => i.impl_token.to_token_stream(),
        other => other.to_token_stream(),
    }
}

fn head(keyword: &impl ToTokens, ident: &syn::Ident) -> TokenStream {
    quote!(#keyword #ident)
}

/// Checks the signature; returns the argument type (`Some(None)` for a
/// context-only handler), or `None` when the parameters are wrong.
pub(super) fn check_signature(func: &ItemFn, errors: &mut Errors) -> Option<Option<Type>> {
    let sig = &func.sig;
    if let Some(unsafety) = &sig.unsafety {
        errors.spanned(unsafety, "handlers cannot be `unsafe`");
    }
    if !sig.generics.params.is_empty() {
        errors.spanned(&sig.generics, "handlers cannot be generic");
    } else if let Some(where_clause) = &sig.generics.where_clause {
        errors.spanned(where_clause, "handlers cannot be generic");
    }
    if let Some(variadic) = &sig.variadic {
        errors.spanned(variadic, "handlers cannot be variadic");
    }
    check_return(sig, errors);

    let mut params_ok = true;
    for input in &sig.inputs {
        if let FnArg::Receiver(receiver) = input {
            errors.spanned(receiver, "handlers cannot take `self`");
            params_ok = false;
        }
    }
    if !params_ok {
        return None;
    }
    let typed: Vec<&syn::PatType> = sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(t) => Some(t),
            FnArg::Receiver(_) => None,
        })
        .collect();
    const ARITY: &str = "a handler takes `(cx: JobContext, args: T)` or `(cx: JobContext)`";
    match typed.len() {
        0 => {
            errors.push(syn::Error::new(sig.paren_token.span.join(), ARITY));
            return None;
        }
        1 | 2 => {}
        _ => {
            let extra: Vec<_> = typed[2..].to_vec();
            errors.spanned(quote!(#(#extra),*), ARITY);
            return None;
        }
    }
    check_context(&typed[0].ty, errors);
    let args_ty = typed.get(1).map(|arg| (*arg.ty).clone());
    if let Some(ty) = &args_ty {
        check_args_type(ty, errors);
    }
    Some(args_ty)
}

/// The first parameter must be the context, taken by value.
fn check_context(ty: &Type, errors: &mut Errors) {
    const CONTEXT: &str = "the first parameter of a handler must be the job context, `cx: JobContext`";
    match ty {
        Type::Path(p) if p.qself.is_none() && last_segment_is(&p.path, "JobContext") => {
            let last = p.path.segments.last().expect("a path has a segment");
            if !last.arguments.is_none() {
                errors.spanned(&last.arguments, "`JobContext` takes no generic arguments");
            }
        }
        Type::Reference(r) if matches!(&*r.elem, Type::Path(p) if last_segment_is(&p.path, "JobContext")) => {
            errors.spanned(ty, "take the job context by value: `cx: JobContext`");
        }
        Type::Group(g) => check_context(&g.elem, errors),
        Type::Paren(p) => check_context(&p.elem, errors),
        _ => errors.spanned(ty, CONTEXT),
    }
}

/// The argument type must be an owned, nameable type (it is decoded with
/// `serde::de::DeserializeOwned`).
fn check_args_type(ty: &Type, errors: &mut Errors) {
    match ty {
        Type::Reference(_) => errors.spanned(
            ty,
            "handler arguments must be an owned type (e.g. `String`, not `&str`)",
        ),
        Type::ImplTrait(_) => errors.spanned(ty, "handler arguments cannot be `impl Trait`"),
        Type::Infer(_) => errors.spanned(ty, "handler arguments need a type"),
        _ => {}
    }
}

/// The return type must be written and be a `Result<(), …>`.
fn check_return(sig: &syn::Signature, errors: &mut Errors) {
    const RETURN: &str = "a handler must return `Result<(), HandlerError>`";
    let ty = match &sig.output {
        ReturnType::Default => {
            // Point from the name to the closing parenthesis.
            let mut tokens = sig.ident.to_token_stream();
            sig.paren_token.surround(&mut tokens, |t| sig.inputs.to_tokens(t));
            errors.spanned(tokens, RETURN);
            return;
        }
        ReturnType::Type(_, ty) => ty,
    };
    let Type::Path(p) = strip(ty) else {
        errors.spanned(ty, RETURN);
        return;
    };
    if p.qself.is_some() || !last_segment_is(&p.path, "Result") {
        errors.spanned(ty, RETURN);
        return;
    }
    let last = p.path.segments.last().expect("a path has a segment");
    if let PathArguments::AngleBracketed(args) = &last.arguments {
        match args.args.first() {
            Some(GenericArgument::Type(ok)) if is_unit(ok) => {}
            Some(other) => errors.spanned(other, RETURN),
            None => {}
        }
    }
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => strip(&g.elem),
        Type::Paren(p) => strip(&p.elem),
        other => other,
    }
}

fn is_unit(ty: &Type) -> bool {
    matches!(strip(ty), Type::Tuple(t) if t.elems.is_empty())
}

fn last_segment_is(path: &Path, name: &str) -> bool {
    path.segments.last().is_some_and(|s| s.ident == name)
}

//! Expansion: the function unchanged, a module of the same name with the
//! typed helpers and the runner, and the `inventory` submission.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{parse_quote, Attribute, Path, ReturnType};

use crate::validate::Handler;

/// Expands a checked handler.
pub fn expand(handler: &Handler) -> TokenStream {
    let Handler {
        krate,
        name,
        queue,
        max_attempts,
        func,
        args_ty,
        ..
    } = handler;
    let ident = &func.sig.ident;
    let vis = &func.vis;
    let cfgs: Vec<&Attribute> = func.attrs.iter().filter(|a| a.path().is_ident("cfg")).collect();
    // Paths written relative to the handler's module must still work one
    // module down.
    let inner = krate_in_child(krate);

    let unit: syn::Type = parse_quote!(());
    let ty = args_ty.as_ref().unwrap_or(&unit);
    // Errors about the argument type (missing serde impls) point at it, a
    // wrong error type at the return type, a non-`Send` future at the name.
    let ty_span = args_ty.as_ref().map_or_else(Span::call_site, |t| t.span());
    // (first, last) token spans of the return type: code spanned from the
    // first to the last underlines all of it.
    let (ret_first, ret_last) = match &func.sig.output {
        ReturnType::Type(_, t) => span_range(t),
        ReturnType::Default => (Span::call_site(), Span::call_site()),
    };

    let (args_param, decode) = decode_args(args_ty, &inner, ty_span);
    let call = call_handler(ident, args_ty, ret_first, ret_last);
    let (runner, run_variant) = runner(handler, &inner, &args_param, &decode, &call, ret_last);

    let set_attempts = max_attempts.map(|n| quote!(.max_attempts(#n)));
    let args_call = quote_spanned!(ty_span=> .args(args));
    let (mod_doc, job_doc, post_doc) = docs(handler);
    let submission = submission(handler, &cfgs, &run_variant);

    quote! {
        #func

        #(#cfgs)*
        #[doc = #mod_doc]
        #vis mod #ident {
            #![allow(unused_imports, dead_code, clippy::future_not_send)]
            use super::*;

            /// The job name.
            pub const NAME: &str = #name;
            /// The queue jobs are posted to.
            pub const QUEUE: &str = #queue;

            #[doc = #job_doc]
            pub fn job(args: &#ty) -> #inner::Result<#inner::NewJob> {
                let job = #inner::NewJob::new(NAME) #args_call?;
                ::core::result::Result::Ok(job #set_attempts)
            }

            #[doc = #post_doc]
            pub async fn post<B: #inner::Board>(board: &B, args: &#ty) -> #inner::Result<#inner::JobId> {
                board.post(QUEUE, job(args)?).await
            }

            #runner
        }

        #submission
    }
}

/// The runner's parameter name and the statement decoding the arguments
/// (none for a context-only handler).
fn decode_args(
    args_ty: &Option<syn::Type>,
    inner: &TokenStream,
    ty_span: Span,
) -> (TokenStream, TokenStream) {
    match args_ty {
        Some(ty) => {
            let decode_fn = quote_spanned!(ty_span=> #inner::__private::decode_args::<#ty>);
            (quote!(args), quote!(let args: #ty = #decode_fn(&cx, args)?;))
        }
        // A context-only handler ignores its payload (a job posted by
        // taskflow may carry one).
        None => (quote!(_args), TokenStream::new()),
    }
}

/// `super::f(cx, args)` (and `.await`) spanned over the return type, so
/// that a wrong error type is reported there.
fn call_handler(
    ident: &syn::Ident,
    args_ty: &Option<syn::Type>,
    ret_first: Span,
    ret_last: Span,
) -> TokenStream {
    let mut callee = ident.clone();
    callee.set_span(ret_first);
    let call_args = match args_ty {
        Some(_) => quote!(cx, args),
        None => quote!(cx),
    };
    let mut call_args = Group::new(Delimiter::Parenthesis, call_args);
    call_args.set_span(ret_last);
    quote_spanned!(ret_first=> super::#callee #call_args)
}

/// The `__run` function of the generated module and the `HandlerFn`
/// variant it fits (`Async`, `StartOnLoop` or `Blocking`).
fn runner(
    handler: &Handler,
    inner: &TokenStream,
    args_param: &TokenStream,
    decode: &TokenStream,
    call: &TokenStream,
    ret_last: Span,
) -> (TokenStream, TokenStream) {
    let func = &handler.func;
    let ident = &func.sig.ident;
    let result_ty = quote!(::core::result::Result<(), #inner::HandlerError>);
    if func.sig.asyncness.is_some() {
        let await_call = quote_spanned!(ret_last=> #call.await);
        let body = quote! {
            #decode
            let result: #result_ty = #await_call;
            result
        };
        let boxed = quote_spanned!(ident.span()=> ::std::boxed::Box::pin(async move { #body }));
        let runner = quote! {
            #[doc(hidden)]
            pub fn __run(
                cx: #inner::JobContext,
                #args_param: #inner::__private::rmpv::Value,
            ) -> ::core::pin::Pin<
                ::std::boxed::Box<
                    dyn ::core::future::Future<Output = #result_ty> + ::core::marker::Send + 'static,
                >,
            > {
                #boxed
            }
        };
        let variant = if handler.start_on_loop {
            quote!(StartOnLoop)
        } else {
            quote!(Async)
        };
        (runner, variant)
    } else {
        let runner = quote! {
            #[doc(hidden)]
            pub fn __run(cx: #inner::JobContext, #args_param: #inner::__private::rmpv::Value) -> #result_ty {
                #decode
                let result: #result_ty = #call;
                result
            }
        };
        (runner, quote!(Blocking))
    }
}

/// The doc comments of the generated module and of its `job` and `post`
/// helpers.
fn docs(handler: &Handler) -> (String, String, String) {
    let Handler {
        name,
        queue,
        max_attempts,
        args_ty,
        ..
    } = handler;
    let args_doc = match args_ty {
        Some(_) => "",
        None => " The handler takes no arguments: pass `&()`.",
    };
    let mod_doc = format!(
        "Typed helpers for the `{name}` job handler: [`NAME`], [`QUEUE`], [`job`] and [`post`] \
         (generated by `#[jobworker::handler]`)."
    );
    let job_doc = format!(
        "A `{name}` job with these arguments{}, ready to post.{args_doc}",
        if max_attempts.is_some() {
            " and the handler's `max_attempts`"
        } else {
            ""
        }
    );
    let post_doc = format!("Posts a `{name}` job to queue `{queue}`; returns its id.{args_doc}");
    (mod_doc, job_doc, post_doc)
}

/// The `inventory` submission of the handler's registry entry.
fn submission(handler: &Handler, cfgs: &[&Attribute], run_variant: &TokenStream) -> TokenStream {
    let Handler {
        krate,
        name,
        queue,
        timeout_ms,
        max_attempts,
        func,
        ..
    } = handler;
    let ident = &func.sig.ident;
    let timeout = match timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(::core::time::Duration::from_millis(#ms))),
        None => quote!(::core::option::Option::None),
    };
    let max_attempts = match max_attempts {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };

    quote! {
        #(#cfgs)*
        #krate::__private::inventory::submit! {
            #krate::HandlerEntry {
                name: #name,
                queue: #queue,
                timeout: #timeout,
                max_attempts: #max_attempts,
                file: ::core::file!(),
                line: ::core::line!(),
                run: #krate::HandlerFn::#run_variant(#ident::__run),
            }
        }
    }
}

/// `krate` as seen from the generated child module: a leading `self` becomes
/// `super`, a leading `super` gains another.
fn krate_in_child(krate: &Path) -> TokenStream {
    if krate.leading_colon.is_some() {
        return krate.to_token_stream();
    }
    let mut segments = krate.segments.iter();
    match segments.next() {
        Some(first) if first.ident == "self" => {
            let sup = syn::Ident::new("super", first.ident.span());
            quote!(#sup #(:: #segments)*)
        }
        Some(first) if first.ident == "super" => quote!(super :: #krate),
        _ => krate.to_token_stream(),
    }
}

/// The spans of the first and last tokens of `tokens`.
fn span_range(tokens: &impl ToTokens) -> (Span, Span) {
    let mut iter = tokens.to_token_stream().into_iter();
    let first = iter.next().map_or_else(Span::call_site, |t| t.span());
    let last = iter.last().map_or(first, |t| t.span());
    (first, last)
}

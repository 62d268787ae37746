//! Validation: turns the parsed attribute and item into a [`Handler`], or
//! into errors that point at the offending tokens (all of them at once).

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::{
    Expr, ExprLit, ExprUnary, FnArg, GenericArgument, Item, ItemFn, Lit, LitStr, Path, PathArguments,
    ReturnType, Type, UnOp,
};

use crate::parse::{HandlerArgs, RawOption};

/// The options a handler accepts, in the order the error message lists them.
const OPTIONS: [&str; 5] = ["name", "queue", "timeout", "max_attempts", "crate"];

/// Longest queue name accepted.
const MAX_QUEUE_LEN: usize = 200;

/// A checked handler, ready to expand.
pub struct Handler {
    /// Path of the runtime crate (`::jobworker` unless `crate = …`).
    pub krate: Path,
    /// The job name.
    pub name: String,
    /// The queue the typed `post` helper posts to.
    pub queue: String,
    /// The timeout in milliseconds, when set.
    pub timeout_ms: Option<u64>,
    /// Tries before the job is trashed, when set.
    pub max_attempts: Option<u32>,
    /// The function, unchanged.
    pub func: ItemFn,
    /// The argument type; `None` for a handler that takes only the context.
    pub args_ty: Option<Type>,
}

/// Errors collected so far; they are reported together.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn spanned(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// The collected errors; call only once one was pushed.
    fn into_error(self) -> syn::Error {
        self.0.expect("an error was pushed")
    }

    fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }
}

/// The options after the duplicate and unknown-key checks.
#[derive(Default)]
struct Options<'a> {
    name: Option<&'a RawOption>,
    queue: Option<&'a RawOption>,
    timeout: Option<&'a RawOption>,
    max_attempts: Option<&'a RawOption>,
    krate: Option<&'a RawOption>,
}

/// Checks the attribute (which may have failed to parse) and the item.
pub fn validate(args: syn::Result<HandlerArgs>, item: Item) -> syn::Result<Handler> {
    let mut errors = Errors::default();
    let args = args.unwrap_or_else(|e| {
        errors.push(e);
        HandlerArgs::default()
    });

    let options = sort_options(&args, &mut errors);
    let name = options
        .name
        .and_then(|o| string_option(o, &mut errors))
        .and_then(|s| check_name(s, &mut errors));
    let queue = options
        .queue
        .and_then(|o| string_option(o, &mut errors))
        .and_then(|s| check_queue(s, &mut errors));
    let timeout_ms = options.timeout.and_then(|o| timeout_option(o, &mut errors));
    let max_attempts = options
        .max_attempts
        .and_then(|o| max_attempts_option(o, &mut errors));
    let krate = options.krate.and_then(|o| crate_option(o, &mut errors));

    let func = match item {
        Item::Fn(func) => func,
        other => {
            errors.spanned(item_head(&other), "#[jobworker::handler] applies to functions");
            return Err(errors.into_error());
        }
    };
    let args_ty = check_signature(&func, &mut errors);

    let name = name.unwrap_or_else(|| func.sig.ident.unraw().to_string());
    let queue = queue.unwrap_or_else(|| "default".to_owned());
    let krate = krate.unwrap_or_else(|| syn::parse_quote!(::jobworker));
    errors.finish(Handler {
        krate,
        name,
        queue,
        timeout_ms,
        max_attempts,
        func,
        args_ty: args_ty.flatten(),
    })
}

/// Files each option under its key; reports unknown and repeated keys.
fn sort_options<'a>(args: &'a HandlerArgs, errors: &mut Errors) -> Options<'a> {
    let mut options = Options::default();
    for option in &args.options {
        let key = option.key.unraw().to_string();
        let slot = match key.as_str() {
            "name" => &mut options.name,
            "queue" => &mut options.queue,
            "timeout" => &mut options.timeout,
            "max_attempts" => &mut options.max_attempts,
            "crate" => &mut options.krate,
            _ => {
                errors.spanned(
                    &option.key,
                    format!(
                        "unknown handler option `{key}`; expected one of: {}",
                        OPTIONS.join(", ")
                    ),
                );
                continue;
            }
        };
        if slot.is_some() {
            errors.spanned(&option.key, format!("`{key}` is given twice"));
        } else {
            *slot = Some(option);
        }
    }
    options
}

/// The string literal of `option`, or an error.
fn string_option<'a>(option: &'a RawOption, errors: &mut Errors) -> Option<&'a LitStr> {
    match &option.value {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s),
        other => {
            errors.spanned(
                other,
                format!("`{}` must be a string literal", option.key.unraw()),
            );
            None
        }
    }
}

fn check_name(lit: &LitStr, errors: &mut Errors) -> Option<String> {
    let name = lit.value();
    if name.is_empty() {
        errors.spanned(lit, "`name` must not be empty");
        return None;
    }
    Some(name)
}

fn check_queue(lit: &LitStr, errors: &mut Errors) -> Option<String> {
    let queue = lit.value();
    let bad_char = queue
        .chars()
        .any(|c| matches!(c, '{' | '}' | ':') || c.is_whitespace());
    if queue.is_empty() || queue.chars().count() > MAX_QUEUE_LEN || bad_char {
        errors.spanned(
            lit,
            format!(
                "invalid queue {queue:?}: a queue name is 1 to {MAX_QUEUE_LEN} characters \
                 without `{{`, `}}`, `:` or whitespace"
            ),
        );
        return None;
    }
    Some(queue)
}

fn timeout_option(option: &RawOption, errors: &mut Errors) -> Option<u64> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = &option.value
    else {
        errors.spanned(
            &option.value,
            "`timeout` must be a string literal such as \"30s\"",
        );
        return None;
    };
    let text = lit.value();
    match parse_duration_ms(&text) {
        Some(0) => {
            errors.spanned(lit, "`timeout` must be greater than zero");
            None
        }
        Some(ms) => Some(ms),
        None => {
            errors.spanned(
                lit,
                format!("invalid timeout {text:?}: use e.g. \"30s\", \"500ms\", \"2m\", \"1h\" or \"1m30s\""),
            );
            None
        }
    }
}

/// Parses one or more `<integer><unit>` (units `ms`, `s`, `m`, `h`) into
/// milliseconds; `None` when malformed or too large.
pub fn parse_duration_ms(text: &str) -> Option<u64> {
    let mut rest = text;
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit_ms, unit_len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else {
            return None;
        };
        rest = &rest[unit_len..];
        total = total.checked_add(value.checked_mul(unit_ms)?)?;
    }
    Some(total)
}

fn max_attempts_option(option: &RawOption, errors: &mut Errors) -> Option<u32> {
    match &option.value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => match int.base10_parse::<u32>() {
            Ok(0) => {
                errors.spanned(int, "`max_attempts` must be at least 1");
                None
            }
            Ok(n) => Some(n),
            Err(_) => {
                errors.spanned(int, format!("`max_attempts` must be at most {}", u32::MAX));
                None
            }
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) if matches!(&**expr, Expr::Lit(ExprLit { lit: Lit::Int(_), .. })) => {
            errors.spanned(&option.value, "`max_attempts` must be at least 1");
            None
        }
        other => {
            errors.spanned(other, "`max_attempts` must be an integer literal");
            None
        }
    }
}

fn crate_option(option: &RawOption, errors: &mut Errors) -> Option<Path> {
    match &option.value {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => Some(p.path.clone()),
        other => {
            errors.spanned(
                other,
                "`crate` must be a path to the jobworker crate, e.g. `crate = ::jobworker`",
            );
            None
        }
    }
}

/// The first tokens of a non-function item (its keyword and name), for
/// pointing at it without underlining its whole body.
fn item_head(item: &Item) -> TokenStream {
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
fn check_signature(func: &ItemFn, errors: &mut Errors) -> Option<Option<Type>> {
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

#[cfg(test)]
mod tests {
    use super::parse_duration_ms;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("30s"), Some(30_000));
        assert_eq!(parse_duration_ms("500ms"), Some(500));
        assert_eq!(parse_duration_ms("2m"), Some(120_000));
        assert_eq!(parse_duration_ms("1h"), Some(3_600_000));
        assert_eq!(parse_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_duration_ms("1h2m3s4ms"), Some(3_723_004));
        assert_eq!(parse_duration_ms("0s"), Some(0));
        for bad in [
            "",
            "30",
            "s",
            "30 s",
            " 30s",
            "30parsecs",
            "1.5s",
            "-1s",
            "30S",
            "1d",
            "99999999999999999999h",
        ] {
            assert_eq!(parse_duration_ms(bad), None, "{bad:?}");
        }
    }
}

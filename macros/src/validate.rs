//! Validation: turns the parsed attribute and item into a [`Handler`], or
//! into errors that point at the offending tokens (all of them at once).

mod item;
mod options;

use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Item, ItemFn, Path, Type};

use crate::parse::{HandlerArgs, RawOption};
use item::{check_signature, item_head};
use options::{
    bool_option, check_name, check_queue, crate_option, max_attempts_option, string_option, timeout_option,
};

/// The options a handler accepts, in the order the error message lists them.
const OPTIONS: [&str; 6] = [
    "name",
    "queue",
    "timeout",
    "max_attempts",
    "start_on_loop",
    "crate",
];

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
    /// The first step runs on the worker loop's thread (async only).
    pub start_on_loop: bool,
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
    start_on_loop: Option<&'a RawOption>,
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
    let start_on_loop = options.start_on_loop.and_then(|o| bool_option(o, &mut errors));
    let krate = options.krate.and_then(|o| crate_option(o, &mut errors));

    let func = match item {
        Item::Fn(func) => func,
        other => {
            errors.spanned(item_head(&other), "#[jobworker::handler] applies to functions");
            return Err(errors.into_error());
        }
    };
    let args_ty = check_signature(&func, &mut errors);
    if let (Some(true), Some(option), None) = (start_on_loop, options.start_on_loop, &func.sig.asyncness) {
        errors.spanned(
            &option.key,
            "`start_on_loop` applies to `async fn` handlers; a plain `fn` runs on a blocking thread",
        );
    }

    let name = name.unwrap_or_else(|| func.sig.ident.unraw().to_string());
    let queue = queue.unwrap_or_else(|| "default".to_owned());
    let krate = krate.unwrap_or_else(|| syn::parse_quote!(::jobworker));
    errors.finish(Handler {
        krate,
        name,
        queue,
        timeout_ms,
        max_attempts,
        start_on_loop: start_on_loop.unwrap_or(false),
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
            "start_on_loop" => &mut options.start_on_loop,
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

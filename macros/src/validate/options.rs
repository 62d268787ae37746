//! The attribute's options: each checked and converted (a name, a queue, a
//! timeout in milliseconds, a number of attempts, a flag, the crate path).

use syn::ext::IdentExt;
use syn::{Expr, ExprLit, ExprUnary, Lit, LitStr, Path, UnOp};

use super::Errors;
use crate::parse::RawOption;

/// Longest queue name accepted.
const MAX_QUEUE_LEN: usize = 200;

/// The string literal of `option`, or an error.
pub(super) fn string_option<'a>(option: &'a RawOption, errors: &mut Errors) -> Option<&'a LitStr> {
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

/// The `true` or `false` of `option`, or an error.
pub(super) fn bool_option(option: &RawOption, errors: &mut Errors) -> Option<bool> {
    match &option.value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Some(b.value),
        other => {
            errors.spanned(
                other,
                format!("`{}` must be `true` or `false`", option.key.unraw()),
            );
            None
        }
    }
}

pub(super) fn check_name(lit: &LitStr, errors: &mut Errors) -> Option<String> {
    let name = lit.value();
    if name.is_empty() {
        errors.spanned(lit, "`name` must not be empty");
        return None;
    }
    Some(name)
}

pub(super) fn check_queue(lit: &LitStr, errors: &mut Errors) -> Option<String> {
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

pub(super) fn timeout_option(option: &RawOption, errors: &mut Errors) -> Option<u64> {
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

pub(super) fn max_attempts_option(option: &RawOption, errors: &mut Errors) -> Option<u32> {
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

pub(super) fn crate_option(option: &RawOption, errors: &mut Errors) -> Option<Path> {
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

//! How a step reports a disagreement: a [`Check`] fails with a message, and [`ensure!`] and
//! [`ensure_eq!`] return one early; and the reading of a tool's result.

use super::*;

pub(super) type Check<T> = Result<T, String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!("{}\n  actual:   {:?}\n  expected: {:?}", format!($($fmt)+), l, r));
        }
    }};
}

/// The output of a successful result.
pub(super) fn output<'v>(v: &'v Value, what: &str) -> Check<&'v Value> {
    ensure!(v["success"] == true, "{what}: expected success, got {v}");
    Ok(&v["output"])
}

/// Checks that a result failed with `kind`.
pub(super) fn failed(v: &Value, kind: &str, what: &str) -> Check<()> {
    ensure!(
        v["success"] == false && v["error"]["kind"] == kind,
        "{what}: expected error {kind}, got {v}"
    );
    Ok(())
}

pub(super) fn text(v: &Value, what: &str) -> Check<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{what}: expected a string, got {v}"))
}

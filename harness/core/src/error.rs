//! Errors, said the way kubechaos says them: with their causes.

use std::error::Error;

/// Text that does not follow its syntax (a duration, a selector, a target, a workload): what
/// is wrong and what was expected, for the user. It reads as the text it carries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

impl std::ops::Deref for SyntaxError {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// An error and its causes on one line, `what: why: deeper why`, the way the binary prints
/// them. A cause whose text the message already carries (many library errors print their
/// source in their own message too) is said once.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write /x")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the run failed: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_message_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        assert_eq!(chain(&Outer(io())), "cannot write /x: permission denied");
        assert_eq!(chain(&Repeats(io())), "the run failed: permission denied");
    }
}

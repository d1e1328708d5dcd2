//! Equality-based label selectors, as `kubectl -l` takes them: `a=b`, `a==b`, `a!=b`, `a`, `!a`,
//! joined by commas.

use crate::error::SyntaxError;
use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Requirement {
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value`.
    NotEquals(String, String),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
}

/// A parsed selector: every requirement must hold. The empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub(crate) Vec<Requirement>);

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Parse a selector.
pub fn parse(text: &str) -> Result<Selector, SyntaxError> {
    let mut reqs = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            if text.trim().is_empty() {
                break;
            }
            return Err(SyntaxError(format!("`{text}` has an empty requirement")));
        }
        let req = if let Some((k, v)) = part.split_once("!=") {
            Requirement::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = part.split_once("==") {
            Requirement::Equals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = part.split_once('=') {
            Requirement::Equals(k.trim().into(), v.trim().into())
        } else if let Some(k) = part.strip_prefix('!') {
            Requirement::NotExists(k.trim().into())
        } else {
            Requirement::Exists(part.into())
        };
        let (key, value) = match &req {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, Some(v)),
            Requirement::Exists(k) | Requirement::NotExists(k) => (k, None),
        };
        if !valid_key(key) {
            return Err(SyntaxError(format!("`{key}` is not a label key")));
        }
        if let Some(v) = value {
            if !valid_value(v) {
                return Err(SyntaxError(format!("`{v}` is not a label value")));
            }
        }
        reqs.push(req);
    }
    Ok(Selector(reqs))
}

impl Selector {
    /// Whether labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let labels: BTreeMap<String, String> = [
            ("component".to_string(), "kube-scheduler".to_string()),
            ("tier".into(), "control-plane".into()),
        ]
        .into();
        assert!(parse("component=kube-scheduler").unwrap().matches(&labels));
        assert!(parse("component==kube-scheduler,tier")
            .unwrap()
            .matches(&labels));
        assert!(!parse("component!=kube-scheduler").unwrap().matches(&labels));
        assert!(parse("!missing").unwrap().matches(&labels));
        assert!(parse("").unwrap().matches(&labels));
        assert!(parse("a=b,,c=d").is_err());
        assert!(parse("a=b c").is_err());
    }
}

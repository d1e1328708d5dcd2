//! A YAML document as a tree of nodes that know where they stand in the file.
//!
//! serde-saphyr parses (with its resource budget, so alias bombs and deep nesting end in an
//! error, not a hang); the scenario decoder then walks this tree and reports every problem it
//! finds with its line and column, instead of stopping at the first one.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A position in a file: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line; 0 when unknown.
    pub(crate) line: u32,
    /// 1-based column; 0 when unknown.
    pub(crate) col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A node of the document with its position.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Where the node starts.
    pub(crate) pos: Pos,
    /// What it holds.
    pub(crate) value: Value,
}

/// The value of a node.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// `~`, `null` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A number that is not an integer, or too large for one: no key takes one, so only its
    /// kind is kept (for the error that says what was expected).
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, keys in file order.
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// What kind of value this is, for error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "a number",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<Value>::deserialize(d)?;
        Ok(Node {
            pos: Pos {
                line: spanned.referenced.line() as u32,
                col: spanned.referenced.column() as u32,
            },
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v)
            .map(Value::Int)
            .unwrap_or(Value::Float(v as f64)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v)
            .map(Value::Int)
            .unwrap_or(Value::Float(v as f64)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v)
            .map(Value::Int)
            .unwrap_or(Value::Float(v as f64)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<Node, Node>()? {
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
}

/// Largest scenario file accepted, in bytes. Scenario files are a few kilobytes; anything near
/// this is not a scenario.
pub(crate) const MAX_FILE_BYTES: usize = 1 << 20;

/// Why a document could not be read as YAML at all.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    /// Where, when the parser knows.
    pub(crate) pos: Pos,
    /// What is wrong.
    pub(crate) message: String,
}

/// The parser's options: a strict budget (few aliases, shallow nesting).
fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_aliases = 100;
    budget.max_anchors = 100;
    budget.max_events = 100_000;
    budget.max_depth = 32;
    budget.max_nodes = 50_000;
    budget.max_total_scalar_bytes = MAX_FILE_BYTES;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Parse a document into a node tree under a strict budget: few aliases, shallow nesting. The
/// caller checks size and encoding first.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    serde_saphyr::from_str_with_options::<Node>(text, options()).map_err(syntax_error)
}

/// Parse every document of a stream (`---` between them), under the same budget.
pub(crate) fn parse_all(text: &str) -> Result<Vec<Node>, SyntaxError> {
    serde_saphyr::from_multiple_with_options::<Node>(text, options()).map_err(syntax_error)
}

fn syntax_error(err: serde_saphyr::Error) -> SyntaxError {
    {
        {
            let pos = err
                .location()
                .map(|l| Pos {
                    line: l.line() as u32,
                    col: l.column() as u32,
                })
                .unwrap_or(Pos { line: 1, col: 1 });
            let message = err.without_snippet().to_string();
            let mut message = message
                .lines()
                .next()
                .unwrap_or("not valid YAML")
                .trim()
                .to_owned();
            if message.contains("budget breached") {
                message = format!("the document is too large once its aliases are expanded or too deeply nested ({message}); a scenario file needs neither");
            }
            SyntaxError { pos, message }
        }
    }
}

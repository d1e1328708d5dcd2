//! Go/Kubernetes-style durations: `500ms`, `20s`, `2m`, `1m30s`, `1h`, `1.5s`.

use crate::error::SyntaxError;
use std::time::Duration;

/// Parse a Go-style duration. Units: `ms`, `s`, `m`, `h`; at least one number+unit pair,
/// no sign, no spaces. Precision is one millisecond.
pub fn parse(text: &str) -> Result<Duration, SyntaxError> {
    if text.is_empty() {
        return Err(SyntaxError("empty duration".into()));
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut total_ms: f64 = 0.0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number = &text[start..i];
        if number.is_empty() {
            return Err(SyntaxError(format!(
                "`{text}` is not a duration (a number must come before each unit)"
            )));
        }
        let value: f64 = number
            .parse()
            .map_err(|_| SyntaxError(format!("`{number}` in `{text}` is not a number")))?;
        let ustart = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let factor = match &text[ustart..i] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "" => return Err(SyntaxError(format!("`{text}` has no unit"))),
            other => return Err(SyntaxError(format!("`{other}` in `{text}` is not a unit"))),
        };
        total_ms += value * factor;
    }
    if !total_ms.is_finite() || total_ms > 100.0 * 24.0 * 3_600_000.0 {
        return Err(SyntaxError(format!(
            "`{text}` is too long (at most 100 days)"
        )));
    }
    Ok(Duration::from_millis(total_ms.round() as u64))
}

/// Format a duration the way people write it: `1m30s`, `500ms`, `12.4s`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        let s = ms as f64 / 1000.0;
        return if ms.is_multiple_of(1000) {
            format!("{}s", ms / 1000)
        } else {
            format!("{s:.1}s")
        };
    }
    let h = ms / 3_600_000;
    let m = (ms % 3_600_000) / 60_000;
    let s = (ms % 60_000) as f64 / 1000.0;
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0.0 {
        if s.fract() == 0.0 {
            out.push_str(&format!("{}s", s as u64));
        } else {
            out.push_str(&format!("{s:.1}s"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_contract_examples() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in ["", "20", "s", "-1s", "20 s", "1d", "1.2.3s", "99999999h"] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn human_round_trips() {
        for text in ["500ms", "20s", "2m", "1m30s", "1h", "12.4s"] {
            assert_eq!(human(parse(text).unwrap()), text);
        }
    }
}

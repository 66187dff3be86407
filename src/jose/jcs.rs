//! RFC 8785, the JSON Canonicalization Scheme: the bytes an Agent Card signature covers (spec
//! §8.4.1). Objects' members sorted by their names' UTF-16 code units, no whitespace, strings
//! escaped as ECMAScript's `JSON.stringify` does, numbers as ECMAScript's `Number.toString`.
//!
//! Written here (it is short) rather than taken from a crate: the ones on crates.io are
//! unmaintained or reparse through their own number types. The interop suite checks the
//! server's signatures against an independent implementation (Python `rfc8785`).
use std::fmt::Write;

use serde_json::Value;

/// The canonical form of `value`.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // JSON numbers are IEEE doubles in JCS (I-JSON): a u64 past 2^53 prints as the
        // double it rounds to, as ECMAScript would.
        Value::Number(n) => write_number(out, n.as_f64().unwrap_or(0.0)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            // UTF-16 code units, not UTF-8 bytes or code points: they differ above U+FFFF.
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// ECMAScript's QuoteJSONString: the two-character escapes, `\u00xx` (lowercase) for the other
/// controls, everything else as it is (UTF-8).
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript's Number::toString(x) for a finite double (serde_json holds no NaN or infinity).
fn write_number(out: &mut String, x: f64) {
    if x == 0.0 {
        out.push('0'); // -0 as well
        return;
    }
    if x < 0.0 {
        out.push('-');
    }
    // serde_json prints a double with Ryū: the shortest digits that read back as the same
    // double and, among those, the closest to it, which is what ECMAScript asks for. (Rust's
    // own `{:e}` is shortest but not always closest: 1424953923781206.3 for …206.2.) Its
    // layout is not ECMAScript's, so only its digits and their scale are kept.
    let text = serde_json::to_string(&x.abs()).unwrap_or_default();
    let (mantissa, exponent) = text.split_once(['e', 'E']).unwrap_or((&text, "0"));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{whole}{fraction}");
    let significant = all.trim_start_matches('0');
    // The value is 0.ALL × 10^(whole digits + exponent); leading zeros move the point.
    let scale = whole.len() as i32 - (all.len() - significant.len()) as i32;
    let digits = significant.trim_end_matches('0');
    let k = digits.len() as i32;
    // ECMAScript's n: the value is 0.digits × 10^n.
    let n = scale + exponent.parse::<i32>().unwrap_or(0);
    if k <= n && n <= 21 {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = n - 1;
        let _ = write!(out, "e{}{}", if e >= 0 { "+" } else { "-" }, e.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn number(x: f64) -> String {
        let mut out = String::new();
        write_number(&mut out, x);
        out
    }

    #[test]
    fn numbers_print_as_ecmascript_does() {
        // RFC 8785 Appendix B, by value.
        for (bits, expected) in [
            (0x0000000000000000_u64, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ] {
            assert_eq!(number(f64::from_bits(bits)), expected, "{bits:#018x}");
        }
        assert_eq!(number(1.0), "1");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(100.0), "100");
        assert_eq!(number(1e-7), "1e-7");
        assert_eq!(number(123.456), "123.456");
    }

    #[test]
    fn members_sort_by_utf16_and_strings_escape_as_ecmascript() {
        // RFC 8785 §3.2.3's sorting example: UTF-16 puts U+1F600 (a surrogate pair) before
        // U+FB33, which code point or UTF-8 order would not.
        let value = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis",
        });
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
            \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
            \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical(&value), expected);
        let strings = json!(["\u{1}\u{1f}\"\\/\u{7f}\u{2028}", "\u{8}\u{c}\n\r\t"]);
        assert_eq!(canonical(&strings), "[\"\\u0001\\u001f\\\"\\\\/\u{7f}\u{2028}\",\"\\b\\f\\n\\r\\t\"]");
        let nested = json!({"b": [1, {"z": null, "a": true}], "a": {"y": 1.5e300, "x": -0.0}});
        assert_eq!(canonical(&nested), "{\"a\":{\"x\":0,\"y\":1.5e+300},\"b\":[1,{\"a\":true,\"z\":null}]}");
    }
}

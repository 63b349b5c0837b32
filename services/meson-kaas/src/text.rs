//! Quoting for what the renderers write: YAML scalars, YAML literal blocks
//! and shell words. Every value that reaches a document goes through one of
//! these, so no value can end its field and start another.

/// A YAML double-quoted scalar (JSON's string syntax is a subset of it):
/// quotes, backslashes, newlines and every control character are escaped.
pub(crate) fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// A shell word: single-quoted, with `'` written as `'\''`.
pub(crate) fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The value of a YAML mapping key holding a whole file, `indent` spaces
/// deep: a literal block (`|`) when the text can be one, so that user-data
/// stays readable, otherwise a double-quoted scalar. A literal block can
/// hold it when it ends in exactly one newline, has no line starting with a
/// space or tab at its start, and holds only printable characters (tabs
/// allowed); each of its lines is then indented, so none can leave the block.
pub(crate) fn file_content(text: &str, indent: usize) -> String {
    let printable = text
        .chars()
        .all(|c| c == '\n' || c == '\t' || !(c.is_control() || c == '\u{feff}'));
    let literal_ok = printable
        && text.ends_with('\n')
        && !text.ends_with("\n\n")
        && !text.starts_with([' ', '\t', '\n'])
        && !text.contains('\r');
    if !literal_ok {
        return q(text);
    }
    let pad = " ".repeat(indent);
    let mut out = String::from("|\n");
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&pad);
            out.push_str(line);
            out.push('\n');
        }
    }
    // The caller ends its own line; drop ours.
    out.pop();
    out
}

/// Whether `s` is a DNS label as Kubernetes wants node names and meson
/// wants cluster names: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes.
pub(crate) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Whether `s` holds no control character (so it stays on one line).
pub(crate) fn is_one_line(s: &str) -> bool {
    !s.chars()
        .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_everything_that_could_break_out() {
        assert_eq!(q("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(q("\u{1}"), r#""\u0001""#);
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh("$(rm -rf /)"), "'$(rm -rf /)'");
    }

    #[test]
    fn literal_blocks_only_when_safe() {
        assert_eq!(file_content("a: 1\n\nb: 2\n", 4), "|\n    a: 1\n\n    b: 2");
        assert_eq!(file_content("no newline", 4), r#""no newline""#);
        assert_eq!(file_content(" leading\n", 4), r#"" leading\n""#);
        assert_eq!(file_content("two\n\n", 4), r#""two\n\n""#);
        assert_eq!(file_content("cr\r\n", 4), r#""cr\r\n""#);
        assert_eq!(file_content("bell\u{7}\n", 4), r#""bell\u0007\n""#);
    }

    #[test]
    fn dns_labels() {
        for ok in ["a", "test8", "1poolname", "a-b"] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64), "a\nb"] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}

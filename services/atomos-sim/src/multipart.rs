//! Just enough `multipart/form-data` parsing to read the one file of a cloud-init upload.
//!
//! The uploads are small and single-part, so a whole-body parser avoids
//! pulling a streaming multipart crate into the workspace.

/// A file field of a form.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FilePart {
    pub file_name: Option<String>,
    pub data: Vec<u8>,
}

/// Finds the part named `field` in a `multipart/form-data` body.
pub(crate) fn file_part(content_type: &str, body: &[u8], field: &str) -> Result<FilePart, String> {
    let boundary = boundary(content_type)?;
    let delimiter = format!("--{boundary}").into_bytes();
    let closing = [b"\r\n".as_slice(), &delimiter].concat();
    let mut pos =
        find(body, &delimiter, 0).ok_or("body does not contain the boundary")? + delimiter.len();
    loop {
        let rest = &body[pos..];
        if rest.starts_with(b"--") {
            return Err(format!("no part named {field:?}"));
        }
        let start = pos + if rest.starts_with(b"\r\n") { 2 } else { 0 };
        let headers_end = find(body, b"\r\n\r\n", start).ok_or("part without header end")?;
        let content_start = headers_end + 4;
        let content_end =
            find(body, &closing, content_start).ok_or("part without closing boundary")?;
        let headers = String::from_utf8_lossy(&body[start..headers_end]);
        if let Some((name, file_name)) = disposition(&headers)
            && name == field
        {
            return Ok(FilePart {
                file_name,
                data: body[content_start..content_end].to_vec(),
            });
        }
        pos = content_end + closing.len();
    }
}

fn boundary(content_type: &str) -> Result<String, String> {
    let mut params = content_type.split(';');
    let mime = params.next().unwrap_or_default().trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return Err(format!("expected multipart/form-data, got {mime:?}"));
    }
    params
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "multipart content type without boundary".to_owned())
}

/// `(name, filename)` of a part's `Content-Disposition: form-data; ...` header.
fn disposition(headers: &str) -> Option<(String, Option<String>)> {
    let line = headers.split("\r\n").find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(v)
    })?;
    let mut name = None;
    let mut file_name = None;
    for param in line.split(';').skip(1) {
        if let Some((k, v)) = param.split_once('=') {
            let v = v.trim().trim_matches('"').to_owned();
            match k.trim().to_ascii_lowercase().as_str() {
                "name" => name = Some(v),
                "filename" => file_name = Some(v),
                _ => {}
            }
        }
    }
    Some((name?, file_name))
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() || needle.is_empty() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CT: &str = "multipart/form-data; boundary=XyZ";

    fn body(parts: &[(&str, &str)]) -> Vec<u8> {
        let mut b = String::new();
        for (name, content) in parts {
            b.push_str(&format!(
                "--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"; \
                 filename=\"{name}-file\"\r\nContent-Type: text/plain\r\n\r\n{content}\r\n"
            ));
        }
        b.push_str("--XyZ--\r\n");
        b.into_bytes()
    }

    #[test]
    fn finds_the_named_part() {
        let b = body(&[("other", "x"), ("file", "#cloud-config\r\nusers: []\n")]);
        let part = file_part(CT, &b, "file").unwrap();
        assert_eq!(part.file_name.as_deref(), Some("file-file"));
        assert_eq!(part.data, b"#cloud-config\r\nusers: []\n");
    }

    #[test]
    fn empty_content_is_fine() {
        let part = file_part(CT, &body(&[("file", "")]), "file").unwrap();
        assert!(part.data.is_empty());
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        assert!(file_part("application/json", b"{}", "file").is_err());
        assert!(file_part("multipart/form-data", b"", "file").is_err());
        assert!(file_part(CT, b"", "file").is_err());
        assert!(file_part(CT, b"--XyZ", "file").is_err());
        assert!(file_part(CT, b"--XyZ\r\nContent-Disposition: form-data", "file").is_err());
        assert!(file_part(CT, &body(&[("other", "x")]), "file").is_err());
        let quoted = "multipart/form-data; boundary=\"XyZ\"";
        assert!(file_part(quoted, &body(&[("file", "x")]), "file").is_ok());
    }
}

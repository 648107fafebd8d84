//! The console's page, script and style, compiled into the binary (no
//! build step, no CDN, nothing fetched at run time). The page names them
//! by relative URLs, so it works behind a reverse proxy's sub-path.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");
const ICON: &str = include_str!("assets/icon.svg");

/// Every asset: its path and type, and its bytes.
pub(super) const ALL: [(&str, &str, &str); 4] = [
    ("/", "text/html; charset=utf-8", INDEX),
    ("/console.js", "text/javascript; charset=utf-8", SCRIPT),
    ("/console.css", "text/css; charset=utf-8", STYLE),
    ("/icon.svg", "image/svg+xml", ICON),
];

/// The asset at `path`, if it names one.
pub(super) fn get(path: &str) -> Option<Response<Full<Bytes>>> {
    let path = if path == "/index.html" { "/" } else { path };
    let &(_, kind, body) = ALL.iter().find(|(p, _, _)| *p == path)?;
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page loads only its own assets, by relative URLs, and holds no
    /// inline script or handler the policy would have to allow.
    #[test]
    fn the_page_names_its_assets_relatively_and_has_no_inline_script() {
        assert!(INDEX.contains(r#"src="console.js""#) && INDEX.contains(r#"href="console.css""#));
        assert!(!INDEX.contains("<script>") && !INDEX.contains(" onclick="));
        assert!(!INDEX.contains("http://") && !INDEX.contains("https://"));
        assert!(!SCRIPT.contains("innerHTML") && !SCRIPT.contains("eval("));
        // style-src 'self' refuses style attributes: classes only.
        assert!(!SCRIPT.contains("style:") && !SCRIPT.contains(".style.") && !INDEX.contains(" style="));
        assert!(get("/index.html").is_some() && get("/api/status").is_none());
    }
}

use super::*;
use axum::http::HeaderValue;

fn header(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
    h
}

#[test]
fn parses_basic_credentials() {
    // "alice:pa:ss" — the password may contain ':'.
    let h = header("Basic YWxpY2U6cGE6c3M=");
    assert_eq!(credentials(&h), Some(("alice".into(), "pa:ss".into())));
    assert_eq!(
        credentials(&header("basic YWxpY2U6cGE6c3M=")).map(|c| c.0),
        Some("alice".into())
    );
    assert_eq!(credentials(&header("Bearer abc")), None);
    assert_eq!(credentials(&header("Basic !!!")), None);
    assert_eq!(credentials(&header("Basic YWxpY2U=")), None); // no ':'
    assert_eq!(credentials(&HeaderMap::new()), None);
}

#[test]
fn finds_users_and_maps_unknown_to_a_real_hash() {
    let users = vec![
        User {
            name: "alice".into(),
            hash: "h1".into(),
        },
        User {
            name: "bob".into(),
            hash: "h2".into(),
        },
    ];
    let (i, known) = find_user(&users, "bob").unwrap();
    assert_eq!((i, bool::from(known)), (1, true));
    let (i, known) = find_user(&users, "mallory").unwrap();
    assert_eq!((i, bool::from(known)), (0, false));
    let (_, known) = find_user(&users, "alic").unwrap();
    assert!(!bool::from(known));
    assert!(find_user(&[], "alice").is_none());
}

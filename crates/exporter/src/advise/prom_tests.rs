use super::*;

fn env(json: &str) -> Envelope {
    serde_json::from_str(json).unwrap()
}

#[test]
fn vectors_and_scalars_decode() {
    let v = decode(
        "u",
        env(
            r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"namespace":"a"},"value":[1.5,"0.25"]},
                {"metric":{},"value":[1.5,"NaN"]}]}}"#,
        ),
    )
    .unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].labels["namespace"], "a");
    assert_eq!(v[0].value, 0.25);
    assert!(v[1].value.is_nan());
    let s = decode(
        "u",
        env(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#),
    )
    .unwrap();
    assert_eq!(s[0].value, 2.0);
    assert!(decode(
        "u",
        env(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
    )
    .is_err());
}

#[test]
fn urls_are_checked() {
    assert!(matches!(
        Prometheus::new("prometheus:9090"),
        Err(PromError::BadUrl(_))
    ));
    assert!(matches!(
        Prometheus::new("ftp://x"),
        Err(PromError::BadUrl(_))
    ));
    assert_eq!(
        Prometheus::new("http://p:9090/").unwrap().url(),
        "http://p:9090"
    );
}

#[tokio::test]
async fn a_closed_port_is_one_clear_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let p = Prometheus::new(&format!("http://127.0.0.1:{port}")).unwrap();
    let e = p.query("up").await.unwrap_err().to_string();
    assert!(
        e.starts_with("cannot reach Prometheus at http://127.0.0.1:"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

#[test]
fn long_bodies_are_cut() {
    let q = quote("x ".repeat(500).as_bytes());
    assert!(q.chars().count() <= BODY_QUOTE + 1 && q.ends_with('…'));
}

use super::*;
use crate::fleet::Template;
use std::io::Read;
use std::path::PathBuf;

fn get(fleet: Fleet, path: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let clock = Clock {
        origin: 0,
        interval: 15,
    };
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        answer(stream, &fleet, 2, clock).unwrap();
    });
    let mut client = TcpStream::connect(addr).unwrap();
    write!(client, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    client.read_to_string(&mut reply).unwrap();
    server.join().unwrap();
    reply
}

fn fleet() -> Fleet {
    let caps: Vec<(PathBuf, String)> = ["1", "2"]
        .iter()
        .map(|v| (PathBuf::from("t"), format!("g{{node=\"x\"}} {v}\n")))
        .collect();
    Fleet {
        templates: vec![Template::from_captures(&caps).unwrap()],
        phases: 1,
    }
}

#[test]
fn answers_a_scrape_with_the_node_renamed() {
    let reply = get(fleet(), "/metrics?node=1");
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(
        reply.ends_with("g{node=\"fleet-0-gpu-00001\"} 1\n"),
        "{reply}"
    );
    assert!(!reply.contains("scrape_samples_scraped"));
}

#[test]
fn refuses_a_node_outside_the_fleet() {
    assert!(get(fleet(), "/metrics?node=2").starts_with("HTTP/1.1 404"));
}

#[test]
fn reads_the_node_from_the_query() {
    assert_eq!(requested_node("GET /metrics?node=17 HTTP/1.1"), Some(17));
    assert_eq!(requested_node("GET /metrics?x=1&node=3 HTTP/1.1"), Some(3));
    assert_eq!(requested_node("GET /metrics HTTP/1.1"), None);
    assert_eq!(requested_node("GET /other?node=1 HTTP/1.1"), None);
}

use super::protocol::NodeReply;
use super::*;
use crate::model::{CallCost, GpuSample};

#[test]
fn carried_counts_never_go_backwards_across_deaths() {
    let mut c = CarriedCounts::<&str>::default();
    c.update(BTreeMap::from([("memory_info", 3)]));
    assert_eq!(c.totals()["memory_info"], 3);
    c.worker_died();
    c.update(BTreeMap::from([("memory_info", 1), ("power_usage", 2)]));
    assert_eq!(c.totals()["memory_info"], 4);
    assert_eq!(c.totals()["power_usage"], 2);
    c.worker_died();
    c.worker_died();
    assert_eq!(c.totals()["memory_info"], 4);
}

#[test]
fn call_books_carry_costs_and_errors_across_deaths() {
    let cost = |calls, cpu_ns| CallCost {
        calls,
        cpu_ns,
        wall_ns: cpu_ns * 2,
    };
    let mut b = CallBooks::default();
    b.update(
        &BTreeMap::from([("memory_info".into(), 1)]),
        &BTreeMap::from([("memory_info".into(), cost(10, 100))]),
    );
    b.worker_died();
    b.update(
        &BTreeMap::new(),
        &BTreeMap::from([("memory_info".into(), cost(2, 30))]),
    );
    assert_eq!(b.costs()["memory_info"], cost(12, 130));
    assert_eq!(b.errors()["memory_info"], 1);
}

#[test]
fn interned_names_are_shared_and_bounded() {
    let a = intern("gpm_sample");
    let b = intern(&String::from("gpm_sample"));
    assert!(std::ptr::eq(a, b));
}

#[test]
fn messages_round_trip_as_one_line() {
    let m = Message::Gpu {
        sample: Box::new(GpuSample {
            index: 1,
            uuid: "GPU-x\n\"y".into(),
            up: true,
            ..Default::default()
        }),
        errors: BTreeMap::from([("power_usage".into(), 2)]),
        costs: BTreeMap::from([(
            "power_usage".into(),
            CallCost {
                calls: 3,
                cpu_ns: 7,
                wall_ns: 9,
            },
        )]),
        failed: false,
    };
    let line = serde_json::to_string(&m).expect("serializes");
    assert!(!line.contains('\n'));
    match serde_json::from_str::<Message>(&line).expect("parses") {
        Message::Gpu {
            sample,
            errors,
            costs,
            ..
        } => {
            assert_eq!(sample.uuid, "GPU-x\n\"y");
            assert_eq!(errors["power_usage"], 2);
            assert_eq!(costs["power_usage"].wall_ns, 9);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_node_reply_round_trips() {
    let m = Message::Node(Box::new(NodeReply {
        device_count: Some(2),
        gpus: vec![GpuSample {
            index: 1,
            up: true,
            ..Default::default()
        }],
        stuck: vec![(0, 2.5)],
        ..Default::default()
    }));
    let line = serde_json::to_string(&m).expect("serializes");
    match serde_json::from_str::<Message>(&line).expect("parses") {
        Message::Node(r) => {
            assert_eq!(r.device_count, Some(2));
            assert_eq!(r.gpus[0].index, 1);
            assert_eq!(r.stuck, vec![(0, 2.5)]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

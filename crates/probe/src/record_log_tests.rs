use super::*;

fn shape(name: u64, gx: u32) -> KernelShape {
    KernelShape {
        name,
        grid: [gx, 1, 1],
        block: [128, 1, 1],
        dynamic_shared: 0,
        graph_node: 0,
        context: 0,
    }
}

#[test]
fn shapes_get_ids_once_and_times_are_deltas() {
    let mut log = RecordLog::new(1 << 20);
    let mut asked = 0;
    let mut name = |n: &str| {
        asked += 1;
        n.to_string()
    };
    log.kernel(shape(1, 8), || name("gemm a"), (1_000, 1_500), 400, 7);
    log.kernel(shape(2, 8), || name("ln"), (2_000, 2_100), 100, 7);
    log.kernel(shape(1, 8), || name("never asked"), (1_900, 2_400), 450, 9);
    log.note("T 5 6");
    assert_eq!(asked, 2);
    assert_eq!(
        log.take(),
        "S 0 8 1 1 128 1 1 0 gemm_a 0\nK 0 1000 500 400 7\n\
         S 1 8 1 1 128 1 1 0 ln 0\nK 1 1000 100 100 0\n\
         K 0 -100 500 450 2\nT 5 6\n"
    );
    assert_eq!(log.take(), "");
}

#[test]
fn the_log_stops_at_its_cap_and_says_so() {
    let mut log = RecordLog::new(200);
    for i in 0..100u64 {
        log.kernel(shape(1, 8), || "k".into(), (i * 10, i * 10 + 5), 5, 0);
        if i == 3 {
            let _ = log.take();
        }
    }
    log.note("T 1 2");
    let rest = log.take();
    assert!(rest.ends_with("X full\n"), "{rest}");
    assert!(rest.len() < 200);
    assert_eq!(log.take(), "");
}

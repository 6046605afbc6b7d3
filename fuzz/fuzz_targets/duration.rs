//! `parse_duration`: "1s", "500ms", "2m", "1h" — one non-negative decimal, one unit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_exporter::config::parse_duration;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(d) = parse_duration(s) else {
        return;
    };
    let t = s.trim();
    // Accepted text is digits and dots, then exactly one unit: no sign, exponent, NaN or inf.
    let unit_at = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or_else(|| panic!("accepted {s:?} without a unit"));
    let (num, unit) = t.split_at(unit_at);
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => panic!("accepted {s:?} with unit {unit:?}"),
    };
    assert!(
        !num.is_empty() && num.bytes().any(|b| b.is_ascii_digit()),
        "{s:?}"
    );
    let n: f64 = num.parse().expect("accepted number must parse");
    assert!(n.is_finite() && n >= 0.0, "accepted {s:?} as {n}");
    // The Duration is the number times the unit (to f64 precision), never NaN-derived or huge.
    let want = n * scale;
    let got = d.as_secs_f64();
    assert!(got.is_finite() && got >= 0.0, "{s:?} -> {d:?}");
    let tolerance = want.abs() * 1e-12 + 1e-9;
    assert!(
        (got - want).abs() <= tolerance,
        "{s:?} -> {d:?}, want {want} s"
    );
    // Surrounding whitespace never matters.
    assert_eq!(parse_duration(&format!(" {t}\t")), Ok(d));
});

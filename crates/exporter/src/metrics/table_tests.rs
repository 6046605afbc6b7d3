#[test]
fn family_names_are_unique() {
    let mut names = std::collections::HashSet::new();
    for f in super::ALL {
        assert!(names.insert(f.name), "{} twice", f.name);
    }
}

/// One sentence: a full stop ends it, and no other starts a new one inside it (a dot, a space
/// and a capital; "e.g. 0.5" is still one sentence).
fn is_one_sentence(s: &str) -> bool {
    let inner = s.strip_suffix('.').unwrap_or(s);
    s.ends_with('.')
        && !inner
            .match_indices(". ")
            .any(|(i, _)| inner[i + 2..].starts_with(|c: char| c.is_uppercase()))
}

#[test]
fn every_help_is_one_short_sentence() {
    let mut long = Vec::new();
    for f in super::ALL {
        if f.help.chars().count() > super::HELP_MAX || !is_one_sentence(f.help) {
            long.push(format!("{} ({} chars): {}", f.name, f.help.len(), f.help));
        }
    }
    // dcgm-compat's families keep DCGM's own wording, which has no full stops.
    for f in crate::metrics::dcgm::fields::ALL {
        if f.help.chars().count() > super::HELP_MAX {
            long.push(format!("{} ({} chars): {}", f.name, f.help.len(), f.help));
        }
    }
    assert!(
        long.is_empty(),
        "HELP over {} characters or not one sentence:\n{}",
        super::HELP_MAX,
        long.join("\n")
    );
}

#[test]
fn the_sentence_check_tells_one_from_two() {
    assert!(is_one_sentence("Power draw."));
    assert!(is_one_sentence("Fraction of the time, e.g. 0.5 s windows."));
    assert!(!is_one_sentence("Power draw. Read every 5 s."));
    assert!(!is_one_sentence("Power draw"));
}

#[test]
fn a_family_with_a_doc_says_more_there_than_in_its_help() {
    for f in super::ALL.iter().filter(|f| !f.doc.is_empty()) {
        assert!(
            f.doc.len() > f.help.len(),
            "{}: its doc is no longer than its HELP",
            f.name
        );
    }
}

#[test]
fn default_detail_keeps_every_family_the_shipped_rules_and_dashboards_read() {
    let on = super::served(super::Detail::Default);
    for f in [
        super::GPU_UTILIZATION,
        super::GPU_UP,
        super::GPU_CLOCK_EVENT_REASONS,
        super::GPU_ROW_REMAP_FAILURE,
        super::GPU_CONTAINER_IDLE,
        super::GPU_CONTAINER_ENERGY,
        super::GPU_ENERGY_UNATTRIBUTED,
        super::GPU_POD_ATTRIBUTED,
        super::GPU_COMPUTE_BUSY,
    ] {
        assert!(on[f.index], "{}", f.name);
    }
    // The mission's per-process memory, and energy, are served by default.
    assert!(on[super::GPU_PROCESS_MEMORY_USED.index]);
    assert!(on[super::GPU_ENERGY.index]);
    assert!(!on[super::GPU_PROCESS_SM_UTILIZATION.index]);
    assert!(super::served(super::Detail::Full).iter().all(|&b| b));
}

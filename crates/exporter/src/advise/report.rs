//! Renders the ranked advice as a text table, Markdown, a self-contained HTML page or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::recommend::{Action, Advice, Confidence};

const GIB: f64 = (1u64 << 30) as f64;

/// What the report was made from.
#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    pub prometheus: String,
    pub window: String,
    pub generated_at: String,
    pub price_per_gpu_hour: Option<f64>,
    /// Where the price came from: the flag or the cluster:gpu_hour_price:value rule.
    pub price_source: Option<String>,
}

#[derive(Serialize)]
struct Json<'a> {
    #[serde(flatten)]
    meta: &'a Meta,
    total_gpus_saved: f64,
    total_money_saved_per_month: Option<f64>,
    advice: &'a [Advice],
}

fn total_gpus(advice: &[Advice]) -> f64 {
    advice.iter().map(|a| a.gpus_saved).sum()
}

fn total_money(advice: &[Advice]) -> Option<f64> {
    advice.iter().map(|a| a.money_saved_per_month).sum()
}

pub fn json(advice: &[Advice], meta: &Meta) -> String {
    let doc = Json {
        meta,
        total_gpus_saved: total_gpus(advice),
        total_money_saved_per_month: total_money(advice),
        advice,
    };
    // Serializing plain structs of strings and numbers cannot fail; NaN would be `null`.
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn workload(a: &Advice) -> String {
    let k = &a.profile.key;
    let cluster = if k.cluster.is_empty() {
        String::new()
    } else {
        format!("{}/", k.cluster)
    };
    format!("{cluster}{}/{} {}", k.namespace, k.kind, k.name)
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn today(a: &Advice) -> String {
    let p = &a.profile;
    let mut s = format!(
        "{}, {:.1} replicas, {:.2} GPUs",
        p.key.sharing_mode, p.replicas, p.gpus_held
    );
    match p.sm_p95 {
        Some(x) if p.compute_coverage > 0.0 => {
            let _ = write!(s, ", p95 SM {}", pct(x));
        }
        _ => s.push_str(", no SM figure"),
    }
    if let Some(m) = p.mem_peak_bytes {
        let _ = write!(s, ", peak {:.1} GiB", m / GIB);
    }
    let _ = write!(s, ", idle {}", pct(p.idle_share()));
    s
}

fn confidence(a: &Advice) -> &'static str {
    match a.confidence {
        Some(Confidence::High) => "high",
        Some(Confidence::Medium) => "medium",
        Some(Confidence::Low) => "low",
        None => "-",
    }
}

fn gpus(a: &Advice) -> String {
    if a.gpus_saved > 0.0 {
        format!("{:.2}", a.gpus_saved)
    } else {
        "-".into()
    }
}

fn money(x: Option<f64>) -> String {
    match x {
        Some(v) if v > 0.0 => format!("{v:.0}"),
        Some(_) => "-".into(),
        None => "n/a".into(),
    }
}

fn header(meta: &Meta) -> String {
    let price = match (meta.price_per_gpu_hour, &meta.price_source) {
        (Some(p), Some(src)) => format!("{p:.2} per GPU-hour ({src})"),
        (Some(p), None) => format!("{p:.2} per GPU-hour"),
        _ => "no price (set --price-per-gpu-hour)".into(),
    };
    format!(
        "Prometheus {}, window {}, {}, price {}",
        meta.prometheus, meta.window, meta.generated_at, price
    )
}

fn totals(advice: &[Advice]) -> String {
    let n = advice
        .iter()
        .filter(|a| !matches!(a.action, Action::Keep | Action::Decline))
        .count();
    let money = match total_money(advice) {
        Some(m) => format!(", {m:.0} per month"),
        None => String::new(),
    };
    format!(
        "{n} of {} workloads can change: {:.2} GPUs saved{money}",
        advice.len(),
        total_gpus(advice)
    )
}

const COLUMNS: [&str; 7] = [
    "#",
    "workload",
    "today",
    "recommendation",
    "confidence",
    "GPUs saved",
    "money/month",
];

fn row(i: usize, a: &Advice) -> [String; 7] {
    [
        (i + 1).to_string(),
        workload(a),
        today(a),
        a.summary.clone(),
        confidence(a).into(),
        gpus(a),
        money(a.money_saved_per_month),
    ]
}

pub fn table(advice: &[Advice], meta: &Meta) -> String {
    let rows: Vec<[String; 7]> = advice.iter().enumerate().map(|(i, a)| row(i, a)).collect();
    let mut width = COLUMNS.map(|c| c.chars().count());
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
            // Numbers right-aligned, text left.
            if i == 0 || i >= 5 {
                let _ = write!(s, "{cell:>w$}  ");
            } else {
                let _ = write!(s, "{cell:<w$}  ");
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = format!("{}\n\n", header(meta));
    out += &line(&COLUMNS.map(String::from));
    out += &line(&width.map(|w| "-".repeat(w)));
    for r in &rows {
        out += &line(r);
    }
    let _ = writeln!(out, "\n{}\n", totals(advice));
    for (i, a) in advice.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>3}. {}: {}{}",
            i + 1,
            workload(a),
            a.reason,
            billing(a)
        );
    }
    out
}

/// What a bill could make of the workload's GPU time, when tessera saw any of it busy.
fn billing(a: &Advice) -> String {
    match a.profile.billing_coverage() {
        Some(c) => format!(
            " Billed: {:.2} GPUs ({} of its GPU time attributable).",
            a.profile.billed_gpus,
            pct(c)
        ),
        None => String::new(),
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

pub fn markdown(advice: &[Advice], meta: &Meta) -> String {
    let mut out = format!("## GPU sharing advice\n\n{}\n\n", header(meta));
    out +=
        "| # | workload | today | recommendation | why | confidence | GPUs saved | money/month |\n";
    out += "|--:|---|---|---|---|---|--:|--:|\n";
    for (i, a) in advice.iter().enumerate() {
        let r = row(i, a);
        let _ = writeln!(
            out,
            "| {} | {} | {} | **{}** | {} | {} | {} | {} |",
            r[0],
            md_cell(&r[1]),
            md_cell(&r[2]),
            md_cell(&r[3]),
            md_cell(&a.reason),
            r[4],
            r[5],
            r[6]
        );
    }
    let _ = writeln!(out, "\n{}", totals(advice));
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:22px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#b8c0d0;font-size:13px}
main{padding:20px 32px 40px}
.cards{display:flex;gap:16px;margin-bottom:20px;flex-wrap:wrap}
.card{background:#fff;border-radius:8px;padding:14px 18px;min-width:180px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
.card b{display:block;font-size:26px}
.card span{color:#5b6475;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08);border-radius:8px;overflow:hidden}
th{background:#e9ecf2;text-align:left;font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#4a5366;padding:9px 10px}
td{padding:9px 10px;border-top:1px solid #eceff4;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.w{font-weight:600;white-space:nowrap}
.today{color:#4a5366;font-size:13px}
.why{color:#5b6475;font-size:12px;margin-top:3px}
.tag{display:inline-block;border-radius:4px;padding:1px 7px;font-weight:600;font-size:13px}
.release{background:#fde2e1;color:#a1231c}.mig{background:#e0ecff;color:#1d4fa8}
.mps{background:#e6f6ea;color:#1d6b34}.time_slicing{background:#fff1d6;color:#8a5a00}
.keep{background:#eceff4;color:#4a5366}.decline{background:#f3f0ff;color:#5b3fa8}
.conf-high{color:#1d6b34}.conf-medium{color:#8a5a00}.conf-low{color:#a1231c}
footer{color:#7a8396;font-size:12px;margin-top:16px}
";

fn action_class(a: &Action) -> &'static str {
    match a {
        Action::Release => "release",
        Action::Mig { .. } => "mig",
        Action::Mps { .. } => "mps",
        Action::TimeSlicing { .. } => "time_slicing",
        Action::Keep => "keep",
        Action::Decline => "decline",
    }
}

/// One self-contained page: inline CSS, no scripts, no external assets.
pub fn html(advice: &[Advice], meta: &Meta) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>tessera: GPU sharing advice</title><style>",
    );
    out += STYLE;
    let _ = write!(
        out,
        "</style></head><body><header><h1>GPU sharing advice</h1><p>{}</p></header><main>",
        esc(&header(meta))
    );
    let changes = advice
        .iter()
        .filter(|a| !matches!(a.action, Action::Keep | Action::Decline))
        .count();
    let declined = advice
        .iter()
        .filter(|a| matches!(a.action, Action::Decline))
        .count();
    let _ = write!(
        out,
        "<div class=\"cards\"><div class=\"card\"><span>GPUs saved</span><b>{:.2}</b></div>\
         <div class=\"card\"><span>Per month</span><b>{}</b></div>\
         <div class=\"card\"><span>Workloads to change</span><b>{changes} of {}</b></div>\
         <div class=\"card\"><span>Declined (data cannot support)</span><b>{declined}</b></div></div>",
        total_gpus(advice),
        esc(&money(total_money(advice))),
        advice.len()
    );
    out += "<table><thead><tr><th>#</th><th>Workload</th><th>Today</th><th>Recommendation</th>\
            <th>Confidence</th><th>GPUs saved</th><th>Money / month</th></tr></thead><tbody>";
    for (i, a) in advice.iter().enumerate() {
        let r = row(i, a);
        let _ = write!(
            out,
            "<tr><td class=\"n\">{}</td><td class=\"w\">{}</td><td class=\"today\">{}</td>\
             <td><span class=\"tag {}\">{}</span><div class=\"why\">{}</div></td>\
             <td class=\"conf-{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            r[0],
            esc(&r[1]),
            esc(&r[2]),
            action_class(&a.action),
            esc(&r[3]),
            esc(&a.reason),
            r[4],
            r[4],
            r[5],
            esc(&r[6])
        );
    }
    let _ = writeln!(
        out,
        "</tbody></table><footer>{}. Rules, thresholds and sources: docs/advisor.md. \
         Generated by tessera advise.</footer></main></body></html>",
        esc(&totals(advice))
    );
    out
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;

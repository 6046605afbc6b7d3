//! The advisor's rules: a workload's profile in, one recommendation out. Pure: no I/O, no
//! Prometheus. Every threshold is a named constant, and docs/advisor.md gives each its source.

use serde::Serialize;

use super::gpus::{self, GpuModel, MigProfile};

const GIB: f64 = (1u64 << 30) as f64;
/// Hours in an average month (8,760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Less history than this and the advisor says nothing but "wait".
pub const MIN_HISTORY_S: f64 = 86_400.0;
/// Idle for at least this share of its allocated GPU-time: release it.
pub const RELEASE_IDLE_SHARE: f64 = 0.95;
/// ...provided idleness was decided for all but this share of the time.
pub const MAX_UNDECIDED_SHARE: f64 = 0.05;
/// Compute-based moves need a compute figure for at least this share of the replica-time.
pub const MIN_COMPUTE_COVERAGE: f64 = 0.90;
/// A replica whose p95 SM demand reaches half a GPU keeps its GPU (time-slicing two busy
/// processes cost 38 % of throughput on an A100).
pub const HEAVY_P95: f64 = 0.50;
/// Sizes must cover peak memory and p95 SM demand with this much to spare.
pub const HEADROOM: f64 = 1.20;
/// Time-slicing only for light replicas (p95 SM demand at most this)...
pub const TIME_SLICING_LIGHT_P95: f64 = 0.25;
/// ...whose p95 demands together stay under this share of the GPU...
pub const TIME_SLICING_MAX_SUM_P95: f64 = 0.50;
/// ...and never more than this many per GPU (beyond 2-4 replicas it degrades sharply).
pub const TIME_SLICING_MAX_REPLICAS: u32 = 4;
/// MPS clients per GPU at most.
pub const MPS_MAX_CLIENTS: u32 = 4;
/// MPS packs clients until their sized demand (p95, or p50 for a bursty workload) reaches this.
pub const MPS_MAX_SUM_DEMAND: f64 = 0.80;
/// Bursty: p95 SM demand at least this many times the median.
pub const BURSTY_RATIO: f64 = 2.0;
/// A move that saves less than this many GPUs is not worth a change.
pub const MIN_GPUS_SAVED: f64 = 0.10;

/// A workload as the exporter labels it, per sharing mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Default)]
pub struct WorkloadKey {
    pub cluster: String,
    pub namespace: String,
    pub kind: String,
    pub name: String,
    pub sharing_mode: String,
}

/// What the window's recording rules say about one workload (see alerts/tessera-advisor.yaml).
/// GPU figures are GPU-equivalents; SM demand is a share of a whole GPU's SM time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Profile {
    pub key: WorkloadKey,
    pub model: Option<String>,
    pub gpus_held: f64,
    pub replicas: f64,
    pub idle_gpus: f64,
    pub undecided_gpus: f64,
    pub mem_peak_bytes: Option<f64>,
    pub mem_p95_bytes: Option<f64>,
    pub sm_p50: Option<f64>,
    pub sm_p95: Option<f64>,
    pub compute_coverage: f64,
    /// GPU-equivalents billed to the workload from attributable figures (mean while it ran),
    /// and what may be its own: billed, by difference and unattributed (tessera.billing).
    pub billed_gpus: f64,
    pub accountable_gpus: f64,
    pub history_s: f64,
}

impl Profile {
    pub fn idle_share(&self) -> f64 {
        share(self.idle_gpus, self.gpus_held)
    }
    pub fn undecided_share(&self) -> f64 {
        share(self.undecided_gpus, self.gpus_held)
    }
    /// Share of what may be the workload's GPU time that a bill could attribute; `None` when
    /// tessera saw none of it busy.
    pub fn billing_coverage(&self) -> Option<f64> {
        (self.accountable_gpus > 0.0).then(|| share(self.billed_gpus, self.accountable_gpus))
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Release,
    Mig {
        mig_profile: &'static str,
    },
    Mps {
        clients: u32,
        active_thread_percentage: u32,
        pinned_memory_limit_gib: u32,
    },
    TimeSlicing {
        replicas: u32,
    },
    Keep,
    /// The data cannot support a recommendation.
    Decline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub profile: Profile,
    #[serde(flatten)]
    pub action: Action,
    pub summary: String,
    pub reason: String,
    pub confidence: Option<Confidence>,
    /// Mean GPUs freed over the window (weighted by how much of it the workload ran).
    pub gpus_saved: f64,
    pub money_saved_per_month: Option<f64>,
}

/// Settings of one run.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub window_s: f64,
    pub price_per_gpu_hour: Option<f64>,
}

/// Advice for every profile, best savings first, declines last.
pub fn advise_all(profiles: Vec<Profile>, policy: &Policy) -> Vec<Advice> {
    // History is counted against what the rules have seen at all: a cluster that loaded the
    // rules two days ago has two days, for every workload alike.
    let seen = profiles
        .iter()
        .map(|p| p.history_s)
        .fold(0.0_f64, f64::max)
        .min(policy.window_s);
    let mut out: Vec<Advice> = profiles
        .into_iter()
        .map(|p| advise(p, policy, seen))
        .collect();
    out.sort_by(|a, b| {
        let rank = |x: &Advice| matches!(x.action, Action::Decline);
        rank(a)
            .cmp(&rank(b))
            .then(b.gpus_saved.total_cmp(&a.gpus_saved))
            .then(a.profile.key.cmp(&b.profile.key))
    });
    out
}

/// One workload's advice. `seen_s`: the history the rules have for the whole cluster.
pub fn advise(p: Profile, policy: &Policy, seen_s: f64) -> Advice {
    let presence = if seen_s > 0.0 {
        (p.history_s / seen_s).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let history_score = (p.history_s / policy.window_s).clamp(0.0, 1.0);
    let (action, summary, reason, saved, score) = decide(&p, history_score);
    let gpus_saved = saved * presence;
    let confidence = score.map(|s| {
        if s >= 0.9 {
            Confidence::High
        } else if s >= 0.5 {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    });
    Advice {
        money_saved_per_month: policy
            .price_per_gpu_hour
            .map(|price| gpus_saved * price * HOURS_PER_MONTH),
        profile: p,
        action,
        summary,
        reason,
        confidence,
        gpus_saved,
    }
}

type Decision = (Action, String, String, f64, Option<f64>);

fn decline(summary: &str, reason: String) -> Decision {
    (Action::Decline, summary.to_owned(), reason, 0.0, None)
}

fn decide(p: &Profile, history_score: f64) -> Decision {
    if p.history_s < MIN_HISTORY_S {
        return decline(
            "no advice yet",
            format!(
                "only {:.0} h of history; the advisor needs {:.0} h",
                p.history_s / 3600.0,
                MIN_HISTORY_S / 3600.0
            ),
        );
    }
    if p.gpus_held <= 0.0 || p.replicas <= 0.0 {
        return decline("no advice", "it held no GPU over the window".into());
    }
    let idle = p.idle_share();
    let undecided = p.undecided_share();
    if idle >= RELEASE_IDLE_SHARE && undecided <= MAX_UNDECIDED_SHARE {
        return (
            Action::Release,
            "release".into(),
            format!(
                "idle {:.0} % of its allocated GPU-time (threshold {:.0} %)",
                idle * 100.0,
                RELEASE_IDLE_SHARE * 100.0
            ),
            p.gpus_held,
            Some(history_score * (1.0 - undecided)),
        );
    }
    let (p50, p95) = match (p.sm_p50, p.sm_p95) {
        (Some(a), Some(b)) if p.compute_coverage >= MIN_COMPUTE_COVERAGE => (a, b),
        _ => {
            return decline(
                "no compute-based advice",
                format!(
                    "a per-container compute figure exists for {:.0} % of its replica-time \
                     (needs {:.0} %): NVML cannot split a GPU on which several processes run \
                     kernels; the CUDA probe gives one",
                    p.compute_coverage * 100.0,
                    MIN_COMPUTE_COVERAGE * 100.0
                ),
            )
        }
    };
    let score = Some(history_score.min(p.compute_coverage));
    if p95 >= HEAVY_P95 {
        return (
            Action::Keep,
            "keep a whole GPU per replica".into(),
            format!(
                "p95 SM demand {:.0} % of a GPU: sharing it would slow it (two busy processes \
                 time-sliced lost 38 % on an A100)",
                p95 * 100.0
            ),
            0.0,
            score,
        );
    }
    let Some(peak) = p.mem_peak_bytes else {
        return decline("no advice", "no memory figure for its replicas".into());
    };
    let model_name = p.model.clone().unwrap_or_default();
    let Some(model) = gpus::lookup(&model_name) else {
        return decline(
            "no sizing",
            format!(
                "GPU model {model_name:?} is not in the profile table (H100 80GB, A100 80GB/40GB)"
            ),
        );
    };
    let per_replica_now = p.gpus_held / p.replicas;
    let mut best: Option<(Action, String, String, f64)> = None;
    for (action, summary, reason, cost) in candidates(model, peak, p50, p95) {
        let saved = p.gpus_held - p.replicas * cost.min(per_replica_now);
        // Candidates come best-isolated first; a later one must save clearly more.
        if best.as_ref().is_none_or(|b| saved > b.3 + 0.005) {
            best = Some((action, summary, reason, saved));
        }
    }
    match best {
        Some((action, summary, reason, saved)) if saved >= MIN_GPUS_SAVED => {
            (action, summary, reason, saved, score)
        }
        _ => (
            Action::Keep,
            "keep as is".into(),
            format!(
                "no sharing option saves {MIN_GPUS_SAVED} GPU or more (p95 SM {:.0} %, peak {:.1} GiB)",
                p95 * 100.0,
                peak / GIB
            ),
            0.0,
            score,
        ),
    }
}

/// The moves a replica of this size could make, each with its cost in GPUs per replica:
/// MIG first (isolation), then MPS, then time-slicing.
fn candidates(
    model: &GpuModel,
    peak: f64,
    p50: f64,
    p95: f64,
) -> Vec<(Action, String, String, f64)> {
    let mut out = Vec::new();
    let need_gib = peak * HEADROOM / GIB;
    let need_sm = p95 * HEADROOM;
    if let Some(prof) = smallest_mig_fit(model, need_gib, need_sm) {
        out.push((
            Action::Mig { mig_profile: prof.name },
            format!("MIG {}", prof.name),
            format!(
                "peak {:.1} GiB and p95 SM {:.0} % (+{:.0} %) fit a {} ({} GiB, {} of {} SMs) on {}; \
                 {} fit per GPU",
                peak / GIB,
                p95 * 100.0,
                (HEADROOM - 1.0) * 100.0,
                prof.name,
                prof.memory_gib,
                prof.sms,
                model.sms,
                model.name,
                prof.max_instances
            ),
            prof.gpu_fraction(),
        ));
    }
    let limit_gib = need_gib.ceil().max(1.0);
    let by_memory = (model.memory_gib / limit_gib).floor() as u32;
    let bursty = p95 >= BURSTY_RATIO * p50;
    let sized = (if bursty { p50 } else { p95 }) * HEADROOM;
    let by_compute = if sized > 0.0 {
        (MPS_MAX_SUM_DEMAND / sized).floor() as u32
    } else {
        MPS_MAX_CLIENTS
    };
    let clients = by_compute.min(by_memory).min(MPS_MAX_CLIENTS);
    if clients >= 2 {
        let pct = ((need_sm * 100.0 / 5.0).ceil() * 5.0).clamp(5.0, 100.0) as u32;
        out.push((
            Action::Mps {
                clients,
                active_thread_percentage: pct,
                pinned_memory_limit_gib: limit_gib as u32,
            },
            format!("MPS, {clients} per GPU, limits {pct} % threads / {limit_gib:.0} GiB"),
            format!(
                "{}p95 SM {:.0} %, median {:.0} %, peak {:.1} GiB: set \
                 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={pct} and a pinned memory limit of {limit_gib:.0} GiB \
                 per client (without limits one client can take most of the memory)",
                if bursty { "bursty, " } else { "" },
                p95 * 100.0,
                p50 * 100.0,
                peak / GIB
            ),
            1.0 / f64::from(clients),
        ));
    }
    if p95 <= TIME_SLICING_LIGHT_P95 {
        let by_compute = if p95 > 0.0 {
            (TIME_SLICING_MAX_SUM_P95 / p95).floor() as u32
        } else {
            TIME_SLICING_MAX_REPLICAS
        };
        let replicas = by_compute.min(by_memory).min(TIME_SLICING_MAX_REPLICAS);
        if replicas >= 2 {
            out.push((
                Action::TimeSlicing { replicas },
                format!("time-slicing, {replicas} per GPU"),
                format!(
                    "light (p95 SM {:.0} %, peak {:.1} GiB): {replicas} replicas stay under {:.0} % \
                     together and within memory",
                    p95 * 100.0,
                    peak / GIB,
                    TIME_SLICING_MAX_SUM_P95 * 100.0
                ),
                1.0 / f64::from(replicas),
            ));
        }
    }
    out
}

/// The cheapest profile (smallest share of a GPU) whose memory and SM share cover the need.
pub fn smallest_mig_fit(model: &GpuModel, need_gib: f64, need_sm_share: f64) -> Option<MigProfile> {
    model
        .profiles
        .iter()
        .filter(|p| p.gpu_fraction() < 1.0)
        .filter(|p| {
            p.memory_gib >= need_gib && f64::from(p.sms) / f64::from(model.sms) >= need_sm_share
        })
        .min_by(|a, b| a.gpu_fraction().total_cmp(&b.gpu_fraction()))
        .copied()
}

#[cfg(test)]
#[path = "recommend_tests.rs"]
mod tests;

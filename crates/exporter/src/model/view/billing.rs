//! What a bill can rest on: each pod's figure per device and the rule that gave it, and the
//! device-seconds attributed, left unattributed and disputed, accumulated across samples.
//!
//! Billing is by pod (namespace and workload roll up from there): a pod whose containers share
//! a device may have a figure (sole-active-pod) where none of its containers has one. Counters
//! carry the rule (`method`), so a bill can take the measured figures and list figures by
//! difference apart; a pod's unattributed seconds are device time that may have been its own
//! but that no rule could give anyone (withheld, disputed), which is what a bill line's
//! coverage is measured against.

use std::collections::{BTreeMap, HashMap};

use crate::model::compute::{DeviceSplit, SplitMethod};
use crate::model::view::{ContainerUse, DeviceAccount, PodUse};

type PodKey = (String, String, Option<String>);

fn key(p: &PodUse) -> PodKey {
    (p.namespace.clone(), p.pod.clone(), p.mig_uuid.clone())
}

/// What one device's previous sample accumulated.
#[derive(Default)]
pub struct Previous<'a> {
    pub pods: HashMap<PodKey, &'a PodUse>,
    pub account: Option<&'a DeviceAccount>,
}

impl<'a> Previous<'a> {
    pub fn of(pods: &'a [PodUse], accounts: &'a [DeviceAccount], mig: Option<&str>) -> Self {
        Previous {
            pods: pods
                .iter()
                .filter(|p| p.mig_uuid.as_deref() == mig)
                .map(|p| (key(p), p))
                .collect(),
            account: accounts.iter().find(|a| a.mig_uuid.as_deref() == mig),
        }
    }
}

/// The pods' figures and the device's account for this sample. `rows` are the device's
/// container rows, `unattributed` its measured activity given to no container, `dt` the
/// seconds since the previous sample.
pub fn account(
    split: &DeviceSplit,
    rows: &[ContainerUse],
    mig_uuid: Option<&str>,
    unattributed: Option<f64>,
    dt: f64,
    previous: &Previous<'_>,
) -> (Vec<PodUse>, DeviceAccount) {
    let mut acc = previous.account.cloned().unwrap_or_default();
    acc.mig_uuid = mig_uuid.map(str::to_owned);
    acc.busy_seconds += split.device_activity.unwrap_or(0.0).clamp(0.0, 1.0) * dt;
    if split.method == SplitMethod::Disputed {
        for r in &split.disputed {
            *acc.disputed_samples.entry(*r).or_default() += 1;
        }
    }
    let mut by_pod: BTreeMap<(&str, &str), Vec<&ContainerUse>> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.pod.namespace.is_empty()) {
        by_pod
            .entry((r.pod.namespace.as_str(), r.pod.pod.as_str()))
            .or_default()
            .push(r);
    }
    let mut pods = Vec::with_capacity(by_pod.len());
    for ((ns, pod), crow) in by_pod {
        let first = &crow[0].pod;
        let wide = split.wide.as_ref().filter(|w| w.is_pod(first));
        let (share, method) = match wide {
            Some(w) if w.container.is_none() => (Some(w.share), SplitMethod::SoleActivePod),
            _ => {
                let share = crow
                    .iter()
                    .map(|r| r.sm_utilization)
                    .sum::<Option<f64>>()
                    .map(|v| v.clamp(0.0, 1.0));
                let method = match (wide, split.method) {
                    (Some(_), m) => m,
                    (None, SplitMethod::ByDifference) => SplitMethod::Probe,
                    (None, m) => m,
                };
                (share, method)
            }
        };
        let mut row = PodUse {
            namespace: ns.to_owned(),
            pod: pod.to_owned(),
            workload_kind: first.workload_kind.clone(),
            workload: first.workload.clone(),
            mig_uuid: mig_uuid.map(str::to_owned),
            sharing_mode: crow[0].sharing_mode,
            share,
            method,
            attributed_seconds: BTreeMap::new(),
            unattributed_seconds: 0.0,
        };
        if let Some(before) = previous.pods.get(&key(&row)) {
            row.attributed_seconds = before.attributed_seconds.clone();
            row.unattributed_seconds = before.unattributed_seconds;
        }
        match share {
            Some(v) if v > 0.0 => {
                *row.attributed_seconds.entry(method).or_default() += v * dt;
                *acc.attributed_seconds.entry(method).or_default() += v * dt;
            }
            Some(_) => {}
            None => row.unattributed_seconds += unattributed.unwrap_or(0.0) * dt,
        }
        pods.push(row);
    }
    (pods, acc)
}

#[cfg(test)]
#[path = "billing_tests.rs"]
mod tests;

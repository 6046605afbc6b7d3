//! The series a bill is built from: each pod's figure per device and the seconds attributed,
//! left unattributed and disputed (`model::billing`).

use std::borrow::Cow;

use super::{table, Families, Labels, Value};
use crate::metrics::table::label;
use crate::model::sharing::SharingMode;
use crate::model::view::GpuView;

/// Labels of one device: the GPU, or one of its MIG instances (`mig` set).
/// The sharing mode of the GPU, or of its MIG instance `mig`.
fn mode_of(g: &GpuView, mig: Option<&str>) -> SharingMode {
    mig.and_then(|u| g.mig.iter().find(|m| m.uuid == u))
        .map_or(g.sharing_mode, |m| m.sharing_mode)
}

fn device_labels(node: &str, g: &GpuView, mig: Option<&str>, mode: SharingMode) -> Labels {
    vec![
        (label::NODE.into(), node.into()),
        (label::GPU.into(), g.index.to_string().into()),
        (label::UUID.into(), g.uuid.as_str().into()),
        (label::SHARING_MODE.into(), mode.as_label().into()),
        (label::MIG_UUID.into(), mig.unwrap_or_default().into()),
    ]
}

pub(super) fn billing_families(out: &mut Families, node: &str, g: &GpuView) {
    for a in &g.accounts {
        let mig = a.mig_uuid.as_deref();
        let l = out.share(device_labels(node, g, mig, mode_of(g, mig)));
        out.push_shared(&table::GPU_COMPUTE_BUSY, &l, None, a.busy_seconds);
        for (m, v) in &a.attributed_seconds {
            let own = Some((label::METHOD, m.as_label().to_owned()));
            out.push_shared(&table::GPU_COMPUTE_ATTRIBUTED, &l, own, *v);
        }
        for (r, n) in &a.disputed_samples {
            let own = Some((label::REASON_DISPUTE, r.as_label().to_owned()));
            out.push_shared(&table::GPU_COMPUTE_DISPUTED, &l, own, *n as f64);
        }
    }
    for p in &g.pods {
        let mut l = device_labels(node, g, p.mig_uuid.as_deref(), p.sharing_mode);
        l.extend(
            [
                (label::NAMESPACE, p.namespace.as_str()),
                (label::POD, p.pod.as_str()),
                (label::WORKLOAD_KIND, p.workload_kind.as_str()),
                (label::WORKLOAD, p.workload.as_str()),
            ]
            .map(|(k, v)| (Cow::Borrowed(k), Value::from(v))),
        );
        let l = out.share(l);
        if let Some(v) = p.share {
            out.push_shared(&table::GPU_POD_SM_UTILIZATION, &l, None, v);
        }
        for (m, v) in &p.attributed_seconds {
            let own = Some((label::METHOD, m.as_label().to_owned()));
            out.push_shared(&table::GPU_POD_ATTRIBUTED, &l, own, *v);
        }
        if p.share.is_none() || p.unattributed_seconds > 0.0 {
            out.push_shared(
                &table::GPU_POD_UNATTRIBUTED,
                &l,
                None,
                p.unattributed_seconds,
            );
        }
    }
}

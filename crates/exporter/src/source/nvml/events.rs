//! XID errors arrive as NVML events; waiting for them blocks, so they get a thread of their own
//! that only increments counters the sampler reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// What the watcher saw on one GPU. A GPU has an entry once its events are registered, so an
/// empty one means "watched, no XID yet" and a missing one "not watched".
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct XidLog {
    pub counts: BTreeMap<u32, u64>,
    /// The most recent XID, as dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS` reports it.
    pub last: Option<u32>,
}

pub type Counters = Arc<Mutex<HashMap<String, XidLog>>>;

pub struct XidWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long one wait may block: bounds how late the thread notices shutdown.
const WAIT_MS: u32 = 500;

impl XidWatcher {
    pub fn start(nvml: &'static Nvml, counters: Counters) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tessera-xid".into())
            .spawn(move || watch(nvml, counters, flag))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for XidWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Registers every GPU that supports XID events. A failed registration frees the whole set
/// (nvml-wrapper releases it), so the set is rebuilt without that GPU.
/// Returns the set and each registered device's UUID by raw handle: a GPU that just fell off
/// the bus (XID 79) no longer answers for its UUID, so it is learned up front.
fn register(
    nvml: &'static Nvml,
) -> Option<(nvml_wrapper::EventSet<'static>, HashMap<usize, String>)> {
    let count = nvml.device_count().unwrap_or(0);
    let mut candidates: Vec<u32> = (0..count)
        .filter(|&i| {
            nvml.device_by_index(i)
                .and_then(|d| d.supported_event_types())
                .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR))
        })
        .collect();
    'rebuild: while !candidates.is_empty() {
        let mut set = match nvml.create_event_set() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "XID events unavailable: cannot create an NVML event set");
                return None;
            }
        };
        let mut uuids = HashMap::new();
        for (pos, &index) in candidates.iter().enumerate() {
            let registered = nvml
                .device_by_index(index)
                .map_err(Into::into)
                .and_then(|d| {
                    let uuid = d.uuid().unwrap_or_else(|_| format!("index:{index}"));
                    // SAFETY: reading the raw handle value, used only as a map key.
                    uuids.insert(unsafe { d.handle() } as usize, uuid);
                    d.register_events(EventTypes::CRITICAL_XID_ERROR, set)
                });
            match registered {
                Ok(s) => set = s,
                Err(e) => {
                    tracing::info!(gpu = index, error = %e.error, "XID events not available on this GPU");
                    candidates.remove(pos);
                    continue 'rebuild;
                }
            }
        }
        return Some((set, uuids));
    }
    None
}

fn watch(nvml: &'static Nvml, counters: Counters, stop: Arc<AtomicBool>) {
    let Some((set, uuids)) = register(nvml) else {
        return;
    };
    if let Ok(mut c) = counters.lock() {
        for uuid in uuids.values() {
            c.entry(uuid.clone()).or_default();
        }
    }
    while !stop.load(Ordering::Relaxed) {
        match set.wait(WAIT_MS) {
            Ok(event) => {
                let Some(XidError::Value(xid)) = event.event_data else {
                    continue;
                };
                // SAFETY: reading the raw handle value, used only as a map key.
                let handle = unsafe { event.device.handle() } as usize;
                let Some(uuid) = uuids.get(&handle).cloned() else {
                    continue;
                };
                let xid = u32::try_from(xid).unwrap_or(u32::MAX);
                tracing::warn!(%uuid, xid, "XID error");
                if let Ok(mut c) = counters.lock() {
                    let log = c.entry(uuid).or_default();
                    *log.counts.entry(xid).or_default() += 1;
                    log.last = Some(xid);
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(e) => {
                tracing::warn!(error = %e, "waiting for XID events failed; retrying");
                std::thread::sleep(std::time::Duration::from_millis(u64::from(WAIT_MS)));
            }
        }
    }
}

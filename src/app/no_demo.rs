//! A build without the `demo` feature (the release image): `--demo` was refused while the
//! settings were resolved, so there is never a demo node. The names of `demo.rs`, with types
//! that have no values: the code that would use them cannot run.

use crate::config::{Settings, NO_DEMO};
use crate::sampler::Feeds;
use crate::source::nvml::NvmlSource;

use super::AppError;

pub(super) enum Node {}
pub(super) enum Services {}
pub(super) enum ProbeFeed {}

/// `Settings` built by hand (not resolved from flags) may still ask for the demo.
pub(super) fn prepare(settings: Settings) -> Result<(Settings, Option<Node>), AppError> {
    if settings.demo.enabled {
        return Err(AppError::Config(format!("--demo: {NO_DEMO}")));
    }
    Ok((settings, None))
}

pub(super) async fn start(
    node: &Node,
    _settings: &Settings,
    _source: Option<&mut NvmlSource>,
) -> Result<Services, AppError> {
    match *node {}
}

pub(super) fn api_url(services: &Services) -> String {
    match *services {}
}

pub(super) fn start_probe(
    node: &Node,
    _settings: &Settings,
    _feeds: &mut Feeds,
) -> Result<ProbeFeed, AppError> {
    match *node {}
}

pub(super) async fn stop(_services: Option<Services>, _node: Option<Node>) {}

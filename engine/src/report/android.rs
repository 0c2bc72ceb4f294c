//! What a report of an Android tombstone says beyond the frames: which libraries no file
//! described, by build-id, so that the team knows which file to upload (a system
//! library's from the device's system image, an app's unstripped `.so` from its build).
//! Their frames keep the names the device gave them.

use super::{Module, ModuleStatus, Thread, Warning};

/// Warnings `missing-build-id`: one per module with frames that no file describes (no
/// file with its build-id under `--symbols` or uploaded), naming the build-id.
pub fn missing_libraries(modules: &[Module], threads: &[Thread]) -> Vec<Warning> {
    modules
        .iter()
        .filter(|m| m.status == ModuleStatus::Missing)
        .filter_map(|m| {
            let frames = threads
                .iter()
                .flat_map(|t| &t.frames)
                .filter(|f| f.module_index == Some(m.index) && !f.inlined)
                .count();
            (frames > 0).then(|| Warning {
                code: "missing-build-id".into(),
                message: format!(
                    "no file with build-id {} for {}: its {frames} frame(s) keep the device's \
                     names; upload the unstripped library (POST /api/v1/binaries) or give it \
                     with --symbols",
                    m.build_id.as_deref().unwrap_or("unknown"),
                    m.path.as_deref().unwrap_or(&m.name),
                ),
                thread: None,
                module: Some(m.index),
            })
        })
        .collect()
}

//! Where a job's wall time goes: each step of the pipeline (claiming jobs, reading the
//! dump, gathering tables, the engine, serializing the report, storing results) runs in a
//! tracing span of its own and is timed into a histogram of its own, which `/metrics`
//! shows as `postmortem_job_step_seconds{step="…"}`.
//!
//! Claiming and storing are done for a batch of jobs at once: their histograms count
//! batches, not jobs. So does `wait`: the time a worker, done with a batch's jobs, waits
//! for the next batch's claim running beside them, or for a store when too many run,
//! the part of the queue and the store still on the path from one job to the next.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::prometheus::{Exposition, Histogram, Kind};

/// One step of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Leasing a batch of jobs from the queue (and failing the exhausted ones).
    Claim,
    /// Opening the dump and reading which modules it names.
    Read,
    /// Finding each module's tables: the uploads' index, then memory, the database or a
    /// build; and, beside them, the report's source bundles.
    Tables,
    /// Walking and symbolizing: the engine.
    Engine,
    /// The report to its stored JSON text and index terms.
    Serialize,
    /// Storing a batch of results, in one transaction.
    Store,
    /// After a batch's jobs, waiting for the claim running beside them, or for a store.
    Wait,
}

impl Step {
    /// Every step, in pipeline order.
    pub const ALL: [Step; 7] = [
        Step::Claim,
        Step::Read,
        Step::Tables,
        Step::Engine,
        Step::Serialize,
        Step::Store,
        Step::Wait,
    ];

    /// The step's name in `/metrics` and in the logs' spans.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Claim => "claim",
            Step::Read => "read",
            Step::Tables => "tables",
            Step::Engine => "engine",
            Step::Serialize => "serialize",
            Step::Store => "store",
            Step::Wait => "wait",
        }
    }
}

/// Upper bounds (seconds) of the step histograms: steps take from microseconds (a
/// cached table) to seconds (a build).
pub const STEP_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 10.0,
];

/// One step's histogram: cumulative counts per bucket of [`STEP_BUCKETS`], then +Inf.
#[derive(Debug, Default)]
struct StepHistogram {
    buckets: [AtomicU64; 14],
    sum_us: AtomicU64,
}

/// The histograms of every step.
#[derive(Debug, Default)]
pub struct StepMetrics {
    steps: [StepHistogram; 7],
}

impl StepMetrics {
    /// Counts one run of `step` that took `took`.
    pub fn observe(&self, step: Step, took: Duration) {
        let Some(h) = self.steps.get(step as usize) else {
            return;
        };
        let secs = took.as_secs_f64();
        for (i, le) in STEP_BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        h.buckets[STEP_BUCKETS.len()].fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        h.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Runs `f` in the step's span and times it.
    pub async fn timed<F: Future>(&self, step: Step, f: F) -> F::Output {
        let started = Instant::now();
        let out = f
            .instrument(tracing::info_span!("step", step = step.as_str()))
            .await;
        self.observe(step, started.elapsed());
        out
    }

    /// The histograms in Prometheus' text format.
    pub fn render(&self, out: &mut Exposition) {
        out.family(
            "postmortem_job_step_seconds",
            Kind::Histogram,
            "Time of each step of the job pipeline (claim, store and wait: per batch of jobs).",
        );
        for (step, h) in Step::ALL.iter().zip(&self.steps) {
            let counts: Vec<u64> = h
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
            let (bounded, all) = counts.split_at(STEP_BUCKETS.len());
            out.histogram(
                "postmortem_job_step_seconds",
                &[("step", step.as_str())],
                Histogram {
                    bounds: STEP_BUCKETS,
                    counts: bounded,
                    count: all.first().copied().unwrap_or(0),
                    sum: h.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_counts_in_its_own_histogram_and_buckets() {
        let m = StepMetrics::default();
        m.observe(Step::Engine, Duration::from_micros(300));
        m.observe(Step::Engine, Duration::from_millis(20));
        m.observe(Step::Store, Duration::from_secs(20));
        let mut out = Exposition::new();
        m.render(&mut out);
        let out = out.finish();
        for line in [
            "postmortem_job_step_seconds_bucket{step=\"engine\",le=\"0.00025\"} 0",
            "postmortem_job_step_seconds_bucket{step=\"engine\",le=\"0.0005\"} 1",
            "postmortem_job_step_seconds_bucket{step=\"engine\",le=\"0.025\"} 2",
            "postmortem_job_step_seconds_count{step=\"engine\"} 2",
            "postmortem_job_step_seconds_sum{step=\"engine\"} 0.0203",
            "postmortem_job_step_seconds_bucket{step=\"store\",le=\"10\"} 0",
            "postmortem_job_step_seconds_bucket{step=\"store\",le=\"+Inf\"} 1",
            "postmortem_job_step_seconds_count{step=\"claim\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
    }
}

//! Prometheus' text exposition format, written once: a metric family's `# HELP` and
//! `# TYPE` lines, samples with escaped label values, and histograms with their
//! cumulative buckets, `+Inf`, `_sum` and `_count`. `/metrics` (the server's
//! `api::health`) and the job-step histograms (`jobs::steps`) both write through it, so
//! the format's rules (label escaping, bucket order) live in one place.
//!
//! Format: <https://prometheus.io/docs/instrumenting/exposition_formats/>.

use std::fmt::{Display, Write as _};

/// What a metric family is, as its `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets with the process).
    Counter,
    /// Any value at the time of the scrape.
    Gauge,
    /// Cumulative buckets, a sum and a count.
    Histogram,
    /// A sum and a count.
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// A histogram's observations: cumulative counts for each upper bound, then the count
/// of every observation (`+Inf`) and their sum.
#[derive(Debug, Clone, Copy)]
pub struct Histogram<'a> {
    /// Upper bounds (`le`), ascending, paired with `counts` by position.
    pub bounds: &'a [f64],
    /// The cumulative count of each bound.
    pub counts: &'a [u64],
    /// Every observation.
    pub count: u64,
    /// The sum of the observations, in the histogram's unit.
    pub sum: f64,
}

/// The text of one scrape, written family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty scrape.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a metric family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
        self
    }

    /// One sample of `name` with `labels` (values escaped here).
    pub fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        value: impl Display,
    ) -> &mut Self {
        self.out.push_str(name);
        write_labels(&mut self.out, labels);
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// A histogram's samples under `name` (`_bucket`, `_sum`, `_count`), each with
    /// `labels` before `le`.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        h: Histogram<'_>,
    ) -> &mut Self {
        let bucket = format!("{name}_bucket");
        for (le, n) in h.bounds.iter().zip(h.counts) {
            let le = le.to_string();
            self.sample(&bucket, &with_le(labels, &le), n);
        }
        self.sample(&bucket, &with_le(labels, "+Inf"), h.count);
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count)
    }

    /// The scrape's text.
    pub fn finish(self) -> String {
        self.out
    }
}

fn with_le<'a>(labels: &[(&'a str, &'a str)], le: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut all = labels.to_vec();
    all.push(("le", le));
    all
}

fn write_labels(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (i, (key, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{key}=\"{}\"", escape_label(value));
    }
    out.push('}');
}

/// A label value's escapes: backslash, double quote and line feed.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A help text's escapes: backslash and line feed.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_histograms_end_with_inf_sum_and_count() {
        let mut e = Exposition::new();
        e.family("x_total", Kind::Counter, "Things.").sample(
            "x_total",
            &[("source", "a\"b\\c\nd")],
            3,
        );
        e.family("h_seconds", Kind::Histogram, "Time.").histogram(
            "h_seconds",
            &[("step", "engine")],
            Histogram {
                bounds: &[0.5, 1.0],
                counts: &[1, 2],
                count: 3,
                sum: 2.25,
            },
        );
        assert_eq!(
            e.finish(),
            "# HELP x_total Things.\n# TYPE x_total counter\n\
             x_total{source=\"a\\\"b\\\\c\\nd\"} 3\n\
             # HELP h_seconds Time.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{step=\"engine\",le=\"0.5\"} 1\n\
             h_seconds_bucket{step=\"engine\",le=\"1\"} 2\n\
             h_seconds_bucket{step=\"engine\",le=\"+Inf\"} 3\n\
             h_seconds_sum{step=\"engine\"} 2.25\n\
             h_seconds_count{step=\"engine\"} 3\n"
        );
    }
}

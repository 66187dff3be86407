//! Results: metrics, percentiles, the aligned text table and the JSON document.
use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Serialize;

/// Which way is good for a metric; the ratio column is always ours / baseline, so for
/// `Higher` metrics a ratio above 1 is better and for `Lower` ones below 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    /// A correctness count that must be zero (loss, reorder, errors); no ratio.
    Zero,
    /// Informational (sizes, counts); no ratio.
    Info,
}

/// One measured number of one scenario on one server.
#[derive(Debug, Clone)]
pub struct Metric {
    /// Mostly a literal; built at run time where it names one of several (a Redis node).
    pub name: Cow<'static, str>,
    pub unit: &'static str,
    pub value: f64,
    pub better: Better,
}

impl Metric {
    pub fn new(name: impl Into<Cow<'static, str>>, unit: &'static str, value: f64, better: Better) -> Self {
        Self { name: name.into(), unit, value, better }
    }
}

/// What a scenario measured on one server.
#[derive(Debug, Clone)]
pub struct Measured {
    pub metrics: Vec<Metric>,
    /// Remarks worth printing under the table (retries, skipped parts, caveats).
    pub notes: Vec<String>,
}

/// Per metric, the median over several runs of one scenario (their notes concatenated).
pub fn median(runs: Vec<Measured>) -> Option<Measured> {
    let first = runs.first()?.clone();
    let metrics = first
        .metrics
        .into_iter()
        .map(|metric| {
            let mut values: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.metrics.iter().find(|m| m.name == metric.name))
                .map(|m| m.value)
                .collect();
            values.sort_by(f64::total_cmp);
            let mid = values.len() / 2;
            let value =
                if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 };
            Metric { value, ..metric }
        })
        .collect();
    Some(Measured { metrics, notes: runs.into_iter().flat_map(|r| r.notes).collect() })
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: String,
    pub binding: String,
    pub params: String,
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub ours: Option<f64>,
    pub baseline: Option<f64>,
    /// ours / baseline.
    pub ratio: Option<f64>,
}

/// Joins one scenario's metrics from our server and (if measured) the baseline into rows.
pub fn rows(
    scenario: &str,
    binding: &str,
    params: &str,
    ours: Option<&Measured>,
    baseline: Option<&Measured>,
) -> Vec<Row> {
    let names: Vec<&Metric> = match (ours, baseline) {
        (Some(m), _) | (None, Some(m)) => m.metrics.iter().collect(),
        (None, None) => return Vec::new(),
    };
    let find = |m: Option<&Measured>, name: &str| {
        m.and_then(|m| m.metrics.iter().find(|x| x.name == name)).map(|x| x.value)
    };
    names
        .into_iter()
        .map(|metric| {
            let o = find(ours, &metric.name);
            let b = find(baseline, &metric.name);
            let ratio = match (metric.better, o, b) {
                (Better::Higher | Better::Lower, Some(o), Some(b)) if b > 0.0 => Some(o / b),
                _ => None,
            };
            Row {
                scenario: scenario.to_owned(),
                binding: binding.to_owned(),
                params: params.to_owned(),
                metric: metric.name.to_string(),
                unit: metric.unit.to_owned(),
                better: metric.better,
                ours: o,
                baseline: b,
                ratio,
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted samples (`q` in 0..=1).
pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

/// A number for the table: thousands separated when large, two decimals when small.
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    if value == value.trunc() && value.abs() < 1e15 || value.abs() >= 1000.0 {
        let rounded = value.round() as i64;
        let digits = rounded.unsigned_abs().to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        return if rounded < 0 { format!("-{out}") } else { out };
    }
    if value.abs() >= 100.0 { format!("{value:.0}") } else { format!("{value:.2}") }
}

/// The labels of the value columns: the server measured, what it is compared with, the ratio.
pub const COLUMNS: [&str; 3] = ["ours", "baseline", "ours/base"];

/// The aligned text table, its value columns labelled `columns` (see [`COLUMNS`]).
pub fn table_with(rows: &[Row], columns: [&str; 3]) -> String {
    let [ours, baseline, ratio] = columns;
    let header = ["scenario", "binding", "params", "metric", ours, baseline, ratio];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let arrow = match r.better {
                Better::Higher => " (↑)",
                Better::Lower => " (↓)",
                Better::Zero => " (=0)",
                Better::Info => "",
            };
            [
                r.scenario.clone(),
                r.binding.clone(),
                r.params.clone(),
                format!("{} [{}]{arrow}", r.metric, r.unit),
                r.ours.map(number).unwrap_or_else(|| "-".into()),
                r.baseline.map(number).unwrap_or_else(|| "-".into()),
                r.ratio.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w - cell.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if i >= 4 {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, &header.map(String::from));
    line(&mut out, &widths.map(|w| "-".repeat(w)));
    for row in &cells {
        line(&mut out, row);
    }
    out
}

/// The `--json` document.
#[derive(Debug, Serialize)]
pub struct Document {
    pub tool: &'static str,
    pub version: &'static str,
    pub command: Vec<String>,
    pub machine: Machine,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// What the rows' `ours`, `baseline` and `ratio` are (fleet mode: redis, memory, redis/mem).
    pub columns: [&'static str; 3],
}

/// What the numbers were measured on.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        Self { cpus, cpu_model, kernel }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&[7], 0.99), 7.0);
    }

    #[test]
    fn median_per_metric() {
        let run =
            |v: f64| Measured { metrics: vec![Metric::new("x", "u", v, Better::Higher)], notes: vec![] };
        let m = median(vec![run(3.0), run(1.0), run(2.0)]).unwrap();
        assert_eq!(m.metrics[0].value, 2.0);
        let m = median(vec![run(4.0), run(1.0)]).unwrap();
        assert_eq!(m.metrics[0].value, 2.5);
        assert!(median(Vec::new()).is_none());
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(47123.4), "47,123");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(4.567), "4.57");
        assert_eq!(number(250.4), "250");
    }
}

//! Shared harness: timing with medians, the result table, and its JSON file.

use serde::Serialize;
use std::time::Instant;

/// Milliseconds since `start`.
pub fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// The median of `values`: the middle one of an odd count, the mean of the two middle ones of
/// an even count. NaN when there are none, or when one is NaN (a failed sample is no figure,
/// and sorting it last would move the median onto a real one).
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    if values.is_empty() || values.iter().any(|value| value.is_nan()) {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let middle = values.len() / 2;
    if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 }
}

/// The nearest-rank `percent` (0–100) percentile of `values`: the smallest value with at least
/// `percent` % of the values at or below it (p99 of 100 values is the 99th, not the largest).
/// NaN when there are none, or when one is NaN.
pub fn percentile(mut values: Vec<f64>, percent: usize) -> f64 {
    assert!(percent <= 100, "a percentile is at most 100");
    if values.is_empty() || values.iter().any(|value| value.is_nan()) {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = (values.len() * percent).div_ceil(100).max(1);
    values[rank - 1]
}

/// Runs `operation` `batch` times per sample, `samples` times, and returns the median time of
/// one operation in nanoseconds.
pub fn median_ns(samples: usize, batch: usize, mut operation: impl FnMut()) -> f64 {
    operation(); // warm-up
    let times: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                operation();
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    median(times.into_iter())
}

/// How a measured value is compared with its target.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum Goal {
    /// Smaller is better: met when value <= target.
    AtMost(f64),
    /// Larger is better: met when value >= target.
    AtLeast(f64),
    /// At most `factor` times a peer's value measured in the same run (smaller is better).
    AtMostTimesPeer {
        /// The peer's name in the row's peers.
        peer: &'static str,
        /// Allowed factor.
        factor: f64,
    },
    /// At least `factor` times a peer's value measured in the same run (larger is better).
    AtLeastTimesPeer {
        /// The peer's name in the row's peers.
        peer: &'static str,
        /// Required factor.
        factor: f64,
    },
    /// At most `factor` times the fastest peer of the row, measured in the same run.
    AtMostTimesFastestPeer {
        /// Allowed factor.
        factor: f64,
    },
    /// At most `limit`, and at most `factor` times `peer` measured in the same run: both.
    AtMostAndTimesPeer {
        /// Absolute limit, in the row's unit.
        limit: f64,
        /// The peer's name in the row's peers.
        peer: &'static str,
        /// Allowed factor.
        factor: f64,
    },
    /// No target: reported for information.
    None,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub row: String,
    pub unit: String,
    pub tessera: f64,
    pub peers: serde_json::Map<String, serde_json::Value>,
    pub target: Option<String>,
    pub met: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct Table {
    pub table: String,
    pub machine: String,
    pub rows: Vec<Row>,
}

/// The value of `peer` among a row's peers.
fn peer_value(peers: &[(&str, f64)], peer: &str) -> f64 {
    peers.iter().find(|(name, _)| *name == peer).map(|(_, value)| *value).expect("the goal's peer is in the row")
}

/// Whether a verdict can rest on `figure`: a finite number above 0. NaN is a measurement that
/// failed, an infinity a division by a time that did not tick, and 0 a time or rate that
/// measured nothing: each would otherwise meet one direction of target or the other.
fn measured(figure: f64) -> bool {
    figure.is_finite() && figure > 0.0
}

impl Table {
    pub fn new(name: &str) -> Self {
        Table { table: name.to_owned(), machine: machine(), rows: Vec::new() }
    }

    /// Adds a row; `met` is computed here from the measured value and the goal: `None` (no
    /// verdict) when tessera's figure, or a peer's the goal compares with, is not
    /// [`measured`].
    pub fn row(&mut self, name: &str, unit: &str, tessera: f64, peers: &[(&str, f64)], goal: Goal) {
        for (at, (peer, _)) in peers.iter().enumerate() {
            assert!(!peers[..at].iter().any(|(earlier, _)| earlier == peer), "row {name:?} names peer {peer:?} twice");
        }
        let compared: Vec<f64> = match goal {
            Goal::AtMost(_) | Goal::AtLeast(_) | Goal::None => Vec::new(),
            Goal::AtMostTimesPeer { peer, .. } | Goal::AtLeastTimesPeer { peer, .. } | Goal::AtMostAndTimesPeer { peer, .. } => {
                vec![peer_value(peers, peer)]
            }
            // The fastest is known only if every peer was measured.
            Goal::AtMostTimesFastestPeer { .. } => peers.iter().map(|(_, value)| *value).collect(),
        };
        let verdict_possible = measured(tessera) && compared.iter().all(|figure| measured(*figure));
        let (target, met) = match goal {
            Goal::AtMost(limit) => (Some(format!("<= {}", round(limit))), Some(tessera <= limit)),
            Goal::AtLeast(limit) => (Some(format!(">= {}", round(limit))), Some(tessera >= limit)),
            Goal::AtMostTimesPeer { peer, factor } => {
                let base = peer_value(peers, peer);
                (Some(format!("<= {factor} x {peer} ({})", fmt(base * factor))), Some(tessera <= base * factor))
            }
            Goal::AtLeastTimesPeer { peer, factor } => {
                let base = peer_value(peers, peer);
                (Some(format!(">= {factor} x {peer} ({})", fmt(base * factor))), Some(tessera >= base * factor))
            }
            Goal::AtMostTimesFastestPeer { factor } => {
                let (peer, base) = peers.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1)).expect("the row has peers");
                (Some(format!("<= {factor} x fastest peer, {peer} ({})", fmt(base * factor))), Some(tessera <= base * factor))
            }
            Goal::AtMostAndTimesPeer { limit, peer, factor } => {
                let base = peer_value(peers, peer);
                let target = format!("<= {} and <= {factor} x {peer} ({})", round(limit), fmt(base * factor));
                (Some(target), Some(tessera <= limit && tessera <= base * factor))
            }
            Goal::None => (None, None),
        };
        let met = met.filter(|_| verdict_possible);
        let peers = peers.iter().map(|(name, value)| (name.to_string(), serde_json::json!(round(*value)))).collect();
        self.rows.push(Row { row: name.to_owned(), unit: unit.to_owned(), tessera: round(tessera), peers, target, met });
    }

    /// Prints the table and writes `target/tessera-bench/<table>.json`.
    pub fn finish(&self) -> std::io::Result<()> {
        println!("\n{} — {}\n", self.table, self.machine);
        println!("| row | unit | tessera | peers | target | met |");
        println!("|---|---|---|---|---|---|");
        for row in &self.rows {
            let peers: Vec<String> = row
                .peers
                .iter()
                .map(|(name, value)| {
                    let value = value.as_f64().unwrap_or(f64::NAN);
                    format!("{name} {} ({})", fmt(value), ratio(row.tessera, value))
                })
                .collect();
            let met = match row.met {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "—",
            };
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                row.row,
                row.unit,
                fmt(row.tessera),
                if peers.is_empty() { "—".to_owned() } else { peers.join("; ") },
                row.target.as_deref().unwrap_or("—"),
                met
            );
        }
        let dir = results_directory();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{}.json", self.table));
        std::fs::write(&path, serde_json::to_string_pretty(self)?)?;
        println!("\nwritten to {}", path.canonicalize().unwrap_or(path).display());
        Ok(())
    }
}

/// Where every table's JSON file is written: `target/tessera-bench/` in the workspace.
pub fn results_directory() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tessera-bench")
}

/// `value` to six significant digits, as the results file holds it: enough that `met`, which
/// is computed from the unrounded figures, follows from the written ones (a ratio of 1.3004
/// against "<= 1.3" is written 1.3004, not 1.3).
fn round(value: f64) -> f64 {
    if !value.is_finite() || value == 0.0 {
        return value;
    }
    let scale = 10f64.powi(5 - value.abs().log10().floor() as i32);
    (value * scale).round() / scale
}

fn fmt(value: f64) -> String {
    if value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// "peer is N× tessera's value".
fn ratio(tessera: f64, peer: f64) -> String {
    if tessera == 0.0 || !peer.is_finite() {
        return "—".into();
    }
    format!("{:.2}× tessera", peer / tessera)
}

/// CPU model, core count and OS, read from the machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| info.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{cpu}, {cores} cores, {}", std::env::consts::OS)
}

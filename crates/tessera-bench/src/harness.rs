//! Shared harness: timing with medians, the result table, and its JSON file.

use serde::Serialize;
use std::time::Instant;

/// Milliseconds since `start`.
pub fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// The median of `values` (the upper one of an even count); NaN when there are none.
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    percentile(values.collect(), 50)
}

/// The value at `percent` (0–100) of `values`' sorted order, by index `len * percent / 100`;
/// NaN when there are none.
pub fn percentile(mut values: Vec<f64>, percent: usize) -> f64 {
    assert!(percent <= 100, "a percentile is at most 100");
    values.sort_by(|a, b| a.total_cmp(b));
    let index = (values.len() * percent / 100).min(values.len().saturating_sub(1));
    values.get(index).copied().unwrap_or(f64::NAN)
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

impl Table {
    pub fn new(name: &str) -> Self {
        Table { table: name.to_owned(), machine: machine(), rows: Vec::new() }
    }

    /// Adds a row; `met` is computed here from the measured value and the goal.
    pub fn row(&mut self, name: &str, unit: &str, tessera: f64, peers: &[(&str, f64)], goal: Goal) {
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

fn round(value: f64) -> f64 {
    if value.abs() >= 100.0 { (value * 10.0).round() / 10.0 } else { (value * 1000.0).round() / 1000.0 }
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

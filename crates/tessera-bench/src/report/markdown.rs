//! `docs/benchmarks.md`: each table's rows as a markdown table, with its machine, its chart
//! and the seed figures its chart shows.

use super::results::ResultsTable;
use super::seed_figures::{SeedFigure, seed_figures_for};
use std::fmt::Write;

/// A figure as the report prints it: thousands grouped, three significant decimals below 10,
/// one below 1,000, none above.
///
/// # Example
/// ```
/// use tessera_bench::report::format_figure;
///
/// assert_eq!(format_figure(3548320.7), "3,548,321");
/// assert_eq!(format_figure(228.3), "228.3");
/// assert_eq!(format_figure(1.5), "1.500");
/// ```
pub fn format_figure(value: f64) -> String {
    if value.abs() >= 1000.0 {
        let digits = format!("{:.0}", value.abs());
        let mut grouped = String::new();
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        if value < 0.0 {
            grouped.insert(0, '-');
        }
        grouped
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// The peers of `table` in the order they first appear, for its columns.
///
/// # Example
/// ```
/// use tessera_bench::report::{peer_names, ResultsRow, ResultsTable};
///
/// let row = |peers: &[&str]| ResultsRow {
///     row: "r".to_owned(),
///     unit: "ms".to_owned(),
///     tessera: Some(1.0),
///     peers: peers.iter().map(|name| (name.to_string(), Some(1.0))).collect(),
///     target: None,
///     met: None,
/// };
/// let table = ResultsTable { table: "store".to_owned(), machine: "m".to_owned(), rows: vec![row(&["heed", "sqlite"]), row(&["sqlite", "lmdb"])] };
/// assert_eq!(peer_names(&table), ["heed", "sqlite", "lmdb"]);
/// ```
pub fn peer_names(table: &ResultsTable) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for row in &table.rows {
        for (name, _) in &row.peers {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    names
}

/// Text that goes in a table cell: `|` escaped, line breaks as spaces.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn figure_cell(figure: Option<f64>) -> String {
    figure.map(format_figure).unwrap_or_else(|| "—".to_owned())
}

/// One table's section: heading, machine, chart, rows, and the seed figures it cites.
///
/// `chart_link` is the chart's path relative to the markdown file.
///
/// # Example
/// ```
/// use tessera_bench::report::{markdown_section, ResultsRow, ResultsTable};
///
/// let table = ResultsTable {
///     table: "live".to_owned(),
///     machine: "AMD EPYC, 2 cores, linux".to_owned(),
///     rows: vec![ResultsRow {
///         row: "case 2".to_owned(),
///         unit: "ms".to_owned(),
///         tessera: Some(2.216),
///         peers: vec![("sqlite".to_owned(), Some(3.794))],
///         target: Some("<= 2".to_owned()),
///         met: Some(false),
///     }],
/// };
/// let section = markdown_section(&table, "bench/live.svg");
/// assert!(section.contains("| row | unit | tessera | sqlite | target | met |"));
/// assert!(section.contains("| case 2 | ms | 2.216 | 3.794 | <= 2 | **no** |"));
/// ```
pub fn markdown_section(table: &ResultsTable, chart_link: &str) -> String {
    let peers = peer_names(table);
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(text, "## `{}`\n", table.table);
    let _ = writeln!(text, "Machine: {}.\n", cell(&table.machine));
    let _ = writeln!(text, "![{}]({chart_link})\n", table.table);
    let mut header = vec!["row", "unit", "tessera"];
    header.extend(peers.iter().copied());
    header.extend(["target", "met"]);
    let header: Vec<String> = header.iter().map(|name| cell(name)).collect();
    let _ = writeln!(text, "| {} |", header.join(" | "));
    let _ = writeln!(text, "|{}", "---|".repeat(header.len()));
    for row in &table.rows {
        let mut cells = vec![cell(&row.row), cell(&row.unit), figure_cell(row.tessera)];
        for peer in &peers {
            let figure = row.peers.iter().find(|(name, _)| name == peer).and_then(|(_, figure)| *figure);
            cells.push(figure_cell(figure));
        }
        cells.push(row.target.as_deref().map(cell).unwrap_or_else(|| "—".to_owned()));
        cells.push(
            match row.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            }
            .to_owned(),
        );
        let _ = writeln!(text, "| {} |", cells.join(" | "));
    }
    let cited: Vec<&SeedFigure> = table.rows.iter().flat_map(|row| seed_figures_for(&table.table, &row.row)).collect();
    if !cited.is_empty() {
        let _ = writeln!(text, "\nThe chart's reference lines are the seed's own published figures (another machine):\n");
        for figure in cited {
            let unit = table.rows.iter().find(|row| row.row == figure.row).map(|row| row.unit.as_str()).unwrap_or("");
            let _ =
                writeln!(text, "- {}: {} {} {} (`{}`)", cell(figure.row), figure.system, format_figure(figure.value), unit, figure.source);
        }
    }
    text
}

/// The whole of `docs/benchmarks.md`: a preamble, then one section per table, each linking
/// its chart as `<chart_directory_link>/<table>.svg`.
///
/// # Example
/// ```
/// use tessera_bench::report::{markdown_document, ResultsRow, ResultsTable};
///
/// let row = ResultsRow { row: "r".to_owned(), unit: "ms".to_owned(), tessera: Some(1.0), peers: vec![], target: None, met: None };
/// let live = ResultsTable { table: "live".to_owned(), machine: "m".to_owned(), rows: vec![row] };
/// let document = markdown_document(&[live], "bench");
/// assert!(document.starts_with("# Benchmarks\n"));
/// assert!(document.contains("![live](bench/live.svg)"));
/// ```
pub fn markdown_document(tables: &[ResultsTable], chart_directory_link: &str) -> String {
    let mut text = String::from(
        "# Benchmarks\n\n\
         Generated by `cargo run --release -p tessera-bench -- report --from-json` from the \
         results files of the tables' last runs in `target/tessera-bench/` (without \
         `--from-json`, `report` runs every table first). Do not edit by hand; the README \
         explains the misses. Each \
         table is one subcommand, its peers measured in the same run on the machine named below \
         it. Each chart shows tessera beside each peer per row, on a logarithmic scale in the \
         row's own unit (compare bars within a row, not across rows); a black line marks the \
         seed's own published figure where the seed's text gives one in the same unit.\n\n",
    );
    for table in tables {
        text.push_str(&markdown_section(table, &format!("{chart_directory_link}/{}.svg", table.table)));
        text.push('\n');
    }
    text
}

//! The report's tests: results files in and out of shape, the markdown's cells, the charts'
//! bars, labels and reference lines, and the limits at their boundaries.

use super::*;
use std::path::Path;

/// A results file as the harness writes it (rows from the crud and documents tables).
const CRUD_JSON: &str = r#"{
  "table": "crud",
  "machine": "AMD EPYC, 2 cores, linux",
  "rows": [
    {"row": "insert 10000 (one transaction); Dflat 92.7 ms", "unit": "ms", "tessera": 7.874,
     "peers": {"native_db": 30.189, "sqlite": 11.92}, "target": "<= 0.6 x sqlite (7.152)", "met": false},
    {"row": "update 10000 individually (Buffered); Dflat 713 ms", "unit": "ms", "tessera": 28.253,
     "peers": {"sqlite": 155.9}, "target": "<= 0.6 x sqlite (93.5)", "met": true},
    {"row": "fetch priority > 2500, checksums not verified", "unit": "ms", "tessera": 3.164,
     "peers": {}, "target": null, "met": null},
    {"row": "scaling: get, per-object cost 100k / 1k", "unit": "ratio", "tessera": 1.282,
     "peers": {}, "target": "<= 1.3", "met": true}
  ]
}"#;

fn documents_json() -> String {
    let rows: Vec<String> = SEED_FIGURES
        .iter()
        .filter(|figure| figure.table == "documents")
        .map(|figure| {
            format!(r#"{{"row": "{}", "unit": "µs", "tessera": 1.7, "peers": {{"heed": 1.5}}, "target": null, "met": null}}"#, figure.row)
        })
        .chain([
            r#"{"row": "set (5 fields), absolute", "unit": "µs", "tessera": 1.7, "peers": {}, "target": "<= 5", "met": true}"#.to_owned()
        ])
        .collect();
    format!(r#"{{"table": "documents", "machine": "test machine", "rows": [{}]}}"#, rows.join(","))
}

fn write_results(directory: &Path, table: &str, json: &str) {
    std::fs::write(results_path(directory, table), json).unwrap();
}

fn read(json: &str, table: &str) -> Result<ResultsTable, ReportError> {
    let directory = tempfile::tempdir().unwrap();
    write_results(directory.path(), table, json);
    read_table(directory.path(), table)
}

fn row(name: &str, tessera: f64, peers: &[(&str, f64)]) -> ResultsRow {
    ResultsRow {
        row: name.to_owned(),
        unit: "ms".to_owned(),
        tessera: Some(tessera),
        peers: peers.iter().map(|(name, value)| (name.to_string(), Some(*value))).collect(),
        target: None,
        met: None,
    }
}

fn table(name: &str, rows: Vec<ResultsRow>) -> ResultsTable {
    ResultsTable { table: name.to_owned(), machine: "test".to_owned(), rows }
}

// --- reading -------------------------------------------------------------------------------

#[test]
fn a_results_file_reads_with_its_peers_in_order_and_nulls_kept() {
    let crud = read(CRUD_JSON, "crud").unwrap();
    assert_eq!(crud.machine, "AMD EPYC, 2 cores, linux");
    assert_eq!(crud.rows.len(), 4);
    assert_eq!(crud.rows[0].peers, vec![("native_db".to_owned(), Some(30.189)), ("sqlite".to_owned(), Some(11.92))]);
    assert_eq!(crud.rows[2].target, None);
    assert_eq!(crud.rows[2].met, None);
    let with_null = read(&CRUD_JSON.replace(r#""tessera": 3.164"#, r#""tessera": null"#), "crud").unwrap();
    assert_eq!(with_null.rows[2].tessera, None);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let directory = tempfile::tempdir().unwrap();
    let error = read_table(directory.path(), "live").unwrap_err();
    assert!(matches!(&error, ReportError::Missing { table, .. } if table == "live"), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&results_path(directory.path(), "live").display().to_string()), "{message}");
    assert!(message.contains("-- live"), "says how to make it: {message}");
}

#[test]
fn every_strict_prefix_of_a_results_file_is_malformed_and_names_the_file() {
    for length in 0..CRUD_JSON.len() {
        if !CRUD_JSON.is_char_boundary(length) {
            continue;
        }
        let error = read(&CRUD_JSON[..length], "crud").unwrap_err();
        assert!(matches!(error, ReportError::Malformed { .. }), "prefix of {length} bytes: {error:?}");
        assert!(error.to_string().contains("crud.json"), "{error}");
    }
}

#[test]
fn files_out_of_shape_are_refused_with_the_file_named() {
    let cases: [(&str, String); 7] = [
        ("a peer's figure is text", CRUD_JSON.replace("30.189", "\"fast\"")),
        ("a figure out of f64's range", CRUD_JSON.replace("7.874", "1e999")),
        ("a field is missing", CRUD_JSON.replace(r#""unit": "ratio", "#, "")),
        ("an unknown field", CRUD_JSON.replace(r#""machine""#, r#""extra": 1, "machine""#)),
        ("rows is not a list", r#"{"table": "crud", "machine": "m", "rows": {}}"#.to_owned()),
        ("not JSON", "table,row\ncrud,insert".to_owned()),
        ("empty", String::new()),
    ];
    for (case, json) in cases {
        let error = read(&json, "crud").unwrap_err();
        assert!(matches!(error, ReportError::Malformed { .. }), "{case}: {error:?}");
        assert!(error.to_string().contains("crud.json"), "{case}: {error}");
    }
}

#[test]
fn files_that_parse_but_cannot_be_reported_are_invalid() {
    let cases: [(&str, String, &str); 3] = [
        ("another table", CRUD_JSON.replace(r#""table": "crud""#, r#""table": "live""#), "holds the table `live`"),
        ("no rows", r#"{"table": "crud", "machine": "m", "rows": []}"#.to_owned(), "no rows"),
        ("a negative figure", CRUD_JSON.replace("11.92", "-11.92"), "sqlite's figure -11.92"),
    ];
    for (case, json, expected) in cases {
        let error = read(&json, "crud").unwrap_err();
        assert!(matches!(error, ReportError::Invalid { .. }), "{case}: {error:?}");
        let message = error.to_string();
        assert!(message.contains("crud.json") && message.contains(expected), "{case}: {message}");
    }
}

fn rows_json(rows_count: usize, peers_count: usize) -> String {
    let peers: Vec<String> = (0..peers_count).map(|index| format!(r#""peer{index}": 1.0"#)).collect();
    let row = format!(r#"{{"row": "r", "unit": "ms", "tessera": 1.0, "peers": {{{}}}, "target": null, "met": null}}"#, peers.join(","));
    format!(r#"{{"table": "store", "machine": "m", "rows": [{}]}}"#, vec![row; rows_count].join(","))
}

#[test]
fn rows_count_max_is_accepted_and_one_more_is_refused() {
    assert_eq!(read(&rows_json(ROWS_COUNT_MAX, 1), "store").unwrap().rows.len(), ROWS_COUNT_MAX);
    let error = read(&rows_json(ROWS_COUNT_MAX + 1, 1), "store").unwrap_err();
    assert!(error.to_string().contains(&format!("more than {ROWS_COUNT_MAX}")), "{error}");
}

#[test]
fn peers_count_max_is_accepted_and_one_more_is_refused() {
    assert_eq!(read(&rows_json(1, PEERS_COUNT_MAX), "store").unwrap().rows[0].peers.len(), PEERS_COUNT_MAX);
    let error = read(&rows_json(1, PEERS_COUNT_MAX + 1), "store").unwrap_err();
    assert!(error.to_string().contains(&format!("more than {PEERS_COUNT_MAX}")), "{error}");
}

// --- markdown ------------------------------------------------------------------------------

#[test]
fn the_markdown_table_has_a_column_per_peer_and_every_row() {
    let crud = read(CRUD_JSON, "crud").unwrap();
    let section = markdown_section(&crud, "bench/crud.svg");
    let lines: Vec<&str> = section.lines().collect();
    assert!(lines.contains(&"## `crud`"));
    assert!(lines.contains(&"Machine: AMD EPYC, 2 cores, linux."));
    assert!(lines.contains(&"![crud](bench/crud.svg)"));
    assert!(lines.contains(&"| row | unit | tessera | native_db | sqlite | target | met |"));
    assert!(lines.contains(&"|---|---|---|---|---|---|---|"));
    let expected_rows = [
        "| insert 10000 (one transaction); Dflat 92.7 ms | ms | 7.874 | 30.2 | 11.9 | <= 0.6 x sqlite (7.152) | **no** |",
        "| update 10000 individually (Buffered); Dflat 713 ms | ms | 28.3 | — | 155.9 | <= 0.6 x sqlite (93.5) | yes |",
        "| fetch priority > 2500, checksums not verified | ms | 3.164 | — | — | — | — |",
        "| scaling: get, per-object cost 100k / 1k | ratio | 1.282 | — | — | <= 1.3 | yes |",
    ];
    for expected in expected_rows {
        assert!(lines.contains(&expected), "missing {expected}\n{section}");
    }
    assert!(!section.contains("seed's own published figures"), "crud has no seed figure in the seed text");
}

#[test]
fn a_pipe_in_a_row_name_cannot_break_the_table() {
    let section = markdown_section(&table("live", vec![row("a | b", 1.0, &[])]), "x.svg");
    assert!(section.contains("| a \\| b | ms | 1.000 | — | — |"), "{section}");
}

#[test]
fn the_markdown_cites_each_seed_figure_with_its_file_and_line() {
    let documents = read(&documents_json(), "documents").unwrap();
    let section = markdown_section(&documents, "bench/documents.svg");
    assert!(section.contains("- set (5 fields): Documents 22.3 µs (`seeds/000_50793b6395dbdce5.txt:20`)"), "{section}");
    assert_eq!(section.matches("seeds/000_50793b6395dbdce5.txt:").count(), 6);
}

#[test]
fn figures_are_grouped_and_rounded_for_reading() {
    let cases = [
        (0.0, "0.000"),
        (1.5, "1.500"),
        (9.9994, "9.999"),
        (10.0, "10.0"),
        (999.94, "999.9"),
        (1000.0, "1,000"),
        (1_234_567.8, "1,234,568"),
        (-2500.0, "-2,500"),
    ];
    for (value, expected) in cases {
        assert_eq!(format_figure(value), expected, "{value}");
    }
}

// --- charts ----------------------------------------------------------------------------------

#[test]
fn the_chart_plan_has_a_bar_per_figure_and_skips_rows_of_tessera_alone() {
    let crud = read(CRUD_JSON, "crud").unwrap();
    let plan = ChartPlan::new(&crud);
    assert_eq!(plan.systems, ["tessera", "native_db", "sqlite"]);
    assert_eq!(plan.groups.len(), 2, "the two rows without peers are not charted");
    assert_eq!(plan.groups[0].bars.iter().map(|bar| bar.system_index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(plan.groups[1].bars.iter().map(|bar| bar.system_index).collect::<Vec<_>>(), [0, 2], "no native_db bar");
    assert_eq!(plan.bars_count(), 5);
    assert_eq!(plan.groups[1].bars[1].label, "155.9 ms");
    assert_eq!(plan.groups[0].title, "insert 10000 (one transaction); Dflat 92.7 ms (ms)");
}

#[test]
fn a_row_with_a_seed_figure_is_charted_even_without_a_peer() {
    let format = table("format", vec![row("open trusted", 16.0, &[]), row("look up [123].name", 32.6, &[("serde_json", 19.7)])]);
    let plan = ChartPlan::new(&format);
    assert_eq!(plan.groups.len(), 2);
    assert_eq!(plan.groups[0].references, [ReferenceLine { value: 600.0, label: "Fleece 600.0 ms".to_owned() }]);
    assert_eq!(plan.groups[1].references[0].value, 49.0);
}

/// Counts `needle` in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn the_svg_has_one_rectangle_per_bar_and_legend_entry_and_every_label() {
    let crud = read(CRUD_JSON, "crud").unwrap();
    let plan = ChartPlan::new(&crud);
    let svg = render_svg(&plan).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // The background, one swatch per system, one rectangle per bar.
    assert_eq!(count(&svg, "<rect"), 1 + plan.systems.len() + plan.bars_count());
    for group in &plan.groups {
        let title = group.title.replace('>', "&gt;");
        assert_eq!(count(&svg, &format!("\n{title}\n")), 1, "{title}");
        for bar in &group.bars {
            assert!(svg.contains(&format!("\n{}\n", bar.label)), "{}", bar.label);
        }
    }
    for system in &plan.systems {
        assert!(svg.contains(&format!("\n{system}\n")), "legend entry {system}");
    }
    assert_eq!(count(&svg, r#"stroke-width="2""#), 0, "no seed figure, no reference line");
}

#[test]
fn the_svg_draws_a_reference_line_per_seed_figure_and_one_in_the_legend() {
    let documents = read(&documents_json(), "documents").unwrap();
    let plan = ChartPlan::new(&documents);
    let references_count: usize = plan.groups.iter().map(|group| group.references.len()).sum();
    assert_eq!(references_count, 6);
    let svg = render_svg(&plan).unwrap();
    assert_eq!(count(&svg, r#"stroke-width="2""#), references_count + 1);
    assert!(svg.contains("\nDocuments 22.3 µs\n"));
    assert!(svg.contains("\nthe seed&apos;s published figure\n"));
}

#[test]
fn systems_count_max_is_drawn_and_one_more_is_refused() {
    let peers = |count: usize| -> Vec<ResultsRow> {
        (0..count).map(|index| row(&format!("r{index}"), 1.0, &[(&format!("peer{index}"), 2.0)])).collect()
    };
    assert!(render_svg(&ChartPlan::new(&table("store", peers(SYSTEMS_COUNT_MAX - 1)))).is_ok());
    let error = render_svg(&ChartPlan::new(&table("store", peers(SYSTEMS_COUNT_MAX)))).unwrap_err();
    assert!(error.contains(&format!("more than the {SYSTEMS_COUNT_MAX} colours")), "{error}");
}

#[test]
fn a_zero_figure_is_drawn_at_the_left_edge_not_refused() {
    let svg = render_svg(&ChartPlan::new(&table("store", vec![row("r", 0.0, &[("heed", 5.0)])]))).unwrap();
    assert!(svg.contains("\n0.000 ms\n"));
}

// --- the whole report ----------------------------------------------------------------------

fn options(results: &Path, docs: &Path, tables: &[&str]) -> ReportOptions {
    ReportOptions {
        results_directory: results.to_owned(),
        docs_directory: docs.to_owned(),
        tables: tables.iter().map(|name| name.to_string()).collect(),
    }
}

#[test]
fn the_report_writes_a_chart_per_table_and_the_markdown() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_results(results.path(), "crud", CRUD_JSON);
    write_results(results.path(), "documents", &documents_json());
    let files = write_report(&options(results.path(), docs.path(), &["documents", "crud"])).unwrap();
    assert_eq!(files.charts, [docs.path().join("bench/documents.svg"), docs.path().join("bench/crud.svg")]);
    for chart in &files.charts {
        assert!(std::fs::metadata(chart).unwrap().len() > 1000, "{}", chart.display());
    }
    let markdown = std::fs::read_to_string(&files.markdown).unwrap();
    assert!(markdown.starts_with("# Benchmarks\n"));
    assert!(markdown.find("## `documents`").unwrap() < markdown.find("## `crud`").unwrap(), "the tables' order");
    assert!(markdown.contains("![crud](bench/crud.svg)"));
}

#[test]
fn a_missing_table_fails_the_report_before_anything_is_written() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_results(results.path(), "crud", CRUD_JSON);
    let error = write_report(&options(results.path(), docs.path(), &["crud", "live"])).unwrap_err();
    assert!(error.to_string().contains("live.json"), "{error}");
    assert!(!docs.path().join("benchmarks.md").exists());
    assert!(!docs.path().join("bench/crud.svg").exists());
}

/// A results file as python/bench.py writes it (peers sorted by name, a row in µs).
const PYTHON_JSON: &str = r#"{
  "table": "python",
  "machine": "AMD EPYC, 2 cores, linux, Python 3.11.7",
  "rows": [
    {"row": "crud: insert 10000 (one transaction)", "unit": "ms", "tessera": 62.1,
     "peers": {"diskcache": 420.0, "lmdb": 150.0, "shelve": 490.0, "sqlite3": 85.0}, "target": "<= 0.5 x sqlite3 (42.5)", "met": false},
    {"row": "live: the 10-object commit alone (median)", "unit": "us", "tessera": 80.0, "peers": {}, "target": null, "met": null}
  ]
}"#;

#[test]
fn the_python_table_is_read_from_its_file_and_drawn() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_results(results.path(), "python", PYTHON_JSON);
    let files = write_report(&options(results.path(), docs.path(), &["python"])).unwrap();
    assert_eq!(files.charts, [docs.path().join("bench/python.svg")]);
    let markdown = std::fs::read_to_string(&files.markdown).unwrap();
    assert!(markdown.contains("## `python`") && markdown.contains("crud: insert 10000"), "{markdown}");
    assert!(std::fs::read_to_string(&files.charts[0]).unwrap().contains("sqlite3"));
}

#[test]
fn a_missing_python_table_says_which_program_writes_it() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let error = write_report(&options(results.path(), docs.path(), &["python"])).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("python.json") && message.contains("python python/bench.py"), "{message}");
}

#[test]
fn an_unknown_table_is_refused() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let error = write_report(&options(results.path(), docs.path(), &["crud", "speed"])).unwrap_err();
    assert!(matches!(&error, ReportError::UnknownTable { table } if table == "speed"), "{error:?}");
}

#[test]
fn a_renamed_row_cannot_silently_lose_its_seed_figure() {
    let (results, docs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_results(results.path(), "documents", &documents_json().replace("get (5 fields)", "get, five fields"));
    let error = write_report(&options(results.path(), docs.path(), &["documents"])).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("documents.json") && message.contains("no row `get (5 fields)`"), "{message}");
}

// --- the seed figures ----------------------------------------------------------------------

#[test]
fn every_seed_figure_is_positive_for_a_known_table_and_unique() {
    for (index, figure) in SEED_FIGURES.iter().enumerate() {
        assert!(TABLE_NAMES.contains(&figure.table), "{figure:?}");
        assert!(figure.value.is_finite() && figure.value > 0.0, "{figure:?}");
        assert!(figure.source.starts_with("seeds/0"), "{figure:?}");
        let duplicate = SEED_FIGURES[..index].iter().any(|other| other.table == figure.table && other.row == figure.row);
        assert!(!duplicate, "{figure:?}");
    }
}

#[test]
fn the_derived_fleece_figures_follow_from_the_seed_table() {
    let fleece = |row: &str| seed_figures_for("format", row).next().unwrap().value;
    // 911,920 / 1,303,317 bytes; 1,303,317 bytes in 6,400 µs; 911,920 bytes in 750 µs.
    assert!((fleece("size vs minified JSON") - 69.97).abs() < 0.01);
    assert!((fleece("JSON -> binary throughput") - 203.64).abs() < 0.01);
    assert!((fleece("validate untrusted") - 1.2159).abs() < 0.0001);
}

//! The seeds' own published figures, drawn as reference lines in the charts where a row
//! measures the same thing in the same unit. Only figures written in a seed's text are here;
//! the Dflat tables (seeds 001 and 002) publish theirs as chart images, whose numbers the seed
//! text does not carry, so the crud, live and store charts have none.

/// One published figure for one row of one table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedFigure {
    /// The benchmark table (`format`, `documents`, …).
    pub table: &'static str,
    /// The row's name, exactly as the harness writes it.
    pub row: &'static str,
    /// Whose figure it is, as the seed names it.
    pub system: &'static str,
    /// The figure, in the row's unit.
    pub value: f64,
    /// The seed file and line(s) it comes from.
    pub source: &'static str,
}

/// Fleece's 1000 people (seed 003, line 41): JSON 1,303,317 bytes, Fleece 911,920 bytes.
const FLEECE_JSON_BYTES: f64 = 1_303_317.0;
const FLEECE_BYTES: f64 = 911_920.0;

/// Every seed figure the charts show.
pub const SEED_FIGURES: &[SeedFigure] = &[
    // seeds/003_a28358c5b1519d06.txt, lines 41-45 (Fleece's "The Results" table).
    SeedFigure {
        table: "format",
        row: "size vs minified JSON",
        system: "Fleece",
        value: FLEECE_BYTES / FLEECE_JSON_BYTES * 100.0,
        source: "seeds/003_a28358c5b1519d06.txt:41",
    },
    // 1,303,317 bytes of JSON converted in 6,400 µs, in MB (1e6 bytes) per second as format.rs.
    SeedFigure {
        table: "format",
        row: "JSON -> binary throughput",
        system: "Fleece",
        value: FLEECE_JSON_BYTES / 6_400.0,
        source: "seeds/003_a28358c5b1519d06.txt:41-42",
    },
    // Parsing the JSON to Foundation objects (17,000 µs) against converting it (6,400 µs).
    SeedFigure {
        table: "format",
        row: "JSON -> binary speed-up over serde_json parse to Value",
        system: "Fleece",
        value: 17_000.0 / 6_400.0,
        source: "seeds/003_a28358c5b1519d06.txt:42-43",
    },
    // 911,920 bytes of Fleece validated in 750 µs, in bytes per ns (GB/s).
    SeedFigure {
        table: "format",
        row: "validate untrusted",
        system: "Fleece",
        value: FLEECE_BYTES / 750_000.0,
        source: "seeds/003_a28358c5b1519d06.txt:41,43",
    },
    // "Parse trusted (µs) … 0.6".
    SeedFigure { table: "format", row: "open trusted", system: "Fleece", value: 600.0, source: "seeds/003_a28358c5b1519d06.txt:44" },
    // "Look up one name (ns) 960 49".
    SeedFigure { table: "format", row: "look up [123].name", system: "Fleece", value: 49.0, source: "seeds/003_a28358c5b1519d06.txt:45" },
    // seeds/000_50793b6395dbdce5.txt, lines 20-25 (Documents on an iPhone simulator, µs).
    SeedFigure { table: "documents", row: "set (5 fields)", system: "Documents", value: 22.3, source: "seeds/000_50793b6395dbdce5.txt:20" },
    SeedFigure { table: "documents", row: "get (5 fields)", system: "Documents", value: 20.2, source: "seeds/000_50793b6395dbdce5.txt:21" },
    SeedFigure {
        table: "documents",
        row: "update {} (full get + set)",
        system: "Documents",
        value: 44.2,
        source: "seeds/000_50793b6395dbdce5.txt:22",
    },
    SeedFigure {
        table: "documents",
        row: "update_field (1 field)",
        system: "Documents",
        value: 3.9,
        source: "seeds/000_50793b6395dbdce5.txt:23",
    },
    SeedFigure {
        table: "documents",
        row: "delete (including a set)",
        system: "Documents",
        value: 23.5,
        source: "seeds/000_50793b6395dbdce5.txt:24",
    },
    SeedFigure {
        table: "documents",
        row: "field handle write",
        system: "Documents",
        value: 5.2,
        source: "seeds/000_50793b6395dbdce5.txt:25",
    },
    // seeds/002_384749778ba85ac8.txt, line 93: "When keys are "cold", … (0.0641s v.s. 0.205s)",
    // UserDefaults against WorkspaceDictionary (iPhone 13 Pro, line 83), in ms.
    SeedFigure {
        table: "dictionary",
        row: "read 40,000, cold (database reopened)",
        system: "Dflat WorkspaceDictionary",
        value: 205.0,
        source: "seeds/002_384749778ba85ac8.txt:93",
    },
];

/// The seed figures for `table`'s row `row`.
///
/// # Example
/// ```
/// use tessera_bench::report::seed_figures_for;
///
/// let fleece: Vec<_> = seed_figures_for("format", "look up [123].name").collect();
/// assert_eq!(fleece[0].value, 49.0);
/// assert_eq!(fleece[0].source, "seeds/003_a28358c5b1519d06.txt:45");
/// assert_eq!(seed_figures_for("crud", "insert 10000 (one transaction); Dflat 92.7 ms").count(), 0);
/// ```
pub fn seed_figures_for<'a>(table: &'a str, row: &'a str) -> impl Iterator<Item = &'static SeedFigure> + 'a {
    SEED_FIGURES.iter().filter(move |figure| figure.table == table && figure.row == row)
}

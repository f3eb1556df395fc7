//! Aligned tables for human output: columns padded to their widest cell, two spaces apart,
//! long cells cut with an ellipsis.

/// Widest a cell is shown, in characters.
pub const CELL_CHARS_MAX: usize = 60;

/// A table: a header row and rows of cells.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|title| (*title).to_owned()).collect(), rows: Vec::new() }
    }

    /// Adds a row (missing cells are empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells: Vec<String> = cells.into_iter().take(self.header.len()).map(cut).collect();
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as text, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|title| title.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (index, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if index + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A cell cut to [`CELL_CHARS_MAX`] characters, and on one line.
fn cut(cell: String) -> String {
    let cell = if cell.contains('\n') { cell.replace('\n', " ") } else { cell };
    if cell.chars().count() <= CELL_CHARS_MAX {
        return cell;
    }
    let mut cut: String = cell.chars().take(CELL_CHARS_MAX - 1).collect();
    cut.push('…');
    cut
}

/// Two-column "name  value" lines, aligned.
pub fn pairs(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    pairs.iter().map(|(name, value)| format!("{name:<width$}  {value}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_long_cells_are_cut() {
        let mut table = Table::new(&["name", "n"]);
        table.row(vec!["a".into(), "1".into()]);
        table.row(vec!["longer".into(), "x".repeat(100)]);
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name    n");
        assert_eq!(lines[1], "a       1");
        assert!(lines[2].ends_with('…'));
        assert_eq!(lines[2].chars().count(), 8 + CELL_CHARS_MAX);
    }
}

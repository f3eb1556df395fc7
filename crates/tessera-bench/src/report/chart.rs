//! One SVG chart per table with plotters: for each row that has a peer or a seed figure,
//! tessera's bar beside each peer's, on a logarithmic axis in the row's own unit, and the
//! seed's published figure as a black reference line across the row's bars.
//!
//! The layout (`ChartPlan`) is computed first and drawn second, so that what a chart shows can
//! be tested without reading SVG.

use super::markdown::{format_figure, peer_names};
use super::results::ResultsTable;
use super::seed_figures::seed_figures_for;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The chart's width in pixels.
pub const WIDTH_PX: u32 = 1000;
/// Height of one bar, and of a row's label line, in pixels.
const SLOT_PX: u32 = 18;
/// Space above the plot for the title, the machine and the legend, in pixels.
const HEADER_PX: u32 = 112;
/// Space below the plot for the axis and its caption, in pixels.
const FOOTER_PX: u32 = 56;
/// The width of one character of the legend's text, in pixels, an estimate for placing entries.
const LEGEND_CHARACTER_PX: i32 = 9;
/// The empty slots between two rows' groups.
const GAP_SLOTS: f64 = 0.6;

/// The machine line's colour.
const GREY: RGBColor = RGBColor(80, 80, 80);

/// tessera's colour, then each peer's in column order.
const COLOURS: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

/// Systems per chart, at most: tessera and one colour per peer.
pub const SYSTEMS_COUNT_MAX: usize = COLOURS.len();

/// One bar: a system's figure in one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Index into the chart's systems (0 is tessera), which picks the colour.
    pub system_index: usize,
    /// The figure, in the row's unit.
    pub value: f64,
    /// The text at the bar's end: the figure and the unit.
    pub label: String,
}

/// One seed figure drawn across a row's bars.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceLine {
    /// The figure, in the row's unit.
    pub value: f64,
    /// Whose figure and how much, as the line's label.
    pub label: String,
}

/// One row of the table as the chart draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct RowGroup {
    /// The row's name and unit.
    pub title: String,
    /// tessera's bar first, then the peers' in column order; rows without a figure have no bar.
    pub bars: Vec<Bar>,
    /// The seed figures for the row.
    pub references: Vec<ReferenceLine>,
}

/// What one chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartPlan {
    /// The table's name.
    pub table: String,
    /// The machine that measured it.
    pub machine: String,
    /// tessera, then the peers, in column order.
    pub systems: Vec<String>,
    /// The rows with at least one peer or seed figure beside tessera, in table order.
    pub groups: Vec<RowGroup>,
}

impl ChartPlan {
    /// Lays out `table`: a row is charted when it has a peer's figure or a seed figure (a row of
    /// tessera alone, such as a ratio or a scaling step, stays in the markdown table only).
    ///
    /// # Example
    /// ```
    /// use tessera_bench::report::{ChartPlan, ResultsRow, ResultsTable};
    ///
    /// let row = |name: &str, peers: Vec<(String, Option<f64>)>| ResultsRow {
    ///     row: name.to_owned(),
    ///     unit: "ms".to_owned(),
    ///     tessera: Some(1.0),
    ///     peers,
    ///     target: None,
    ///     met: None,
    /// };
    /// let table = ResultsTable {
    ///     table: "crud".to_owned(),
    ///     machine: "test".to_owned(),
    ///     rows: vec![row("insert", vec![("sqlite".to_owned(), Some(2.0))]), row("ratio", vec![])],
    /// };
    /// let plan = ChartPlan::new(&table);
    /// assert_eq!(plan.systems, ["tessera", "sqlite"]);
    /// assert_eq!(plan.groups.len(), 1);
    /// assert_eq!(plan.groups[0].bars.len(), 2);
    /// ```
    pub fn new(table: &ResultsTable) -> ChartPlan {
        let peers = peer_names(table);
        let mut systems = vec!["tessera".to_owned()];
        systems.extend(peers.iter().map(|name| name.to_string()));
        let mut groups = Vec::new();
        for row in &table.rows {
            let references: Vec<ReferenceLine> = seed_figures_for(&table.table, &row.row)
                .map(|figure| ReferenceLine {
                    value: figure.value,
                    label: format!("{} {} {}", figure.system, format_figure(figure.value), row.unit),
                })
                .collect();
            let has_peer = row.peers.iter().any(|(_, figure)| figure.is_some());
            if !has_peer && references.is_empty() {
                continue;
            }
            let mut bars = Vec::new();
            let figures = std::iter::once(row.tessera)
                .chain(peers.iter().map(|peer| row.peers.iter().find(|(name, _)| name == peer).and_then(|(_, figure)| *figure)));
            for (system_index, figure) in figures.enumerate() {
                if let Some(value) = figure {
                    bars.push(Bar { system_index, value, label: format!("{} {}", format_figure(value), row.unit) });
                }
            }
            groups.push(RowGroup { title: format!("{} ({})", row.row, row.unit), bars, references });
        }
        ChartPlan { table: table.table.clone(), machine: table.machine.clone(), systems, groups }
    }

    /// The number of bars in the chart.
    pub fn bars_count(&self) -> usize {
        self.groups.iter().map(|group| group.bars.len()).sum()
    }

    /// Every figure drawn on the axis: bars and reference lines.
    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.groups.iter().flat_map(|group| group.bars.iter().map(|bar| bar.value).chain(group.references.iter().map(|line| line.value)))
    }

    /// The axis's range: whole decades around the positive figures, one more decade on the
    /// right for the labels at the bars' ends.
    fn axis_range(&self) -> (f64, f64) {
        let positive = self.values().filter(|value| *value > 0.0);
        let (low, high) = positive.fold((f64::INFINITY, 0.0_f64), |(low, high), value| (low.min(value), high.max(value)));
        if !low.is_finite() {
            return (0.1, 10.0);
        }
        (10f64.powf(low.log10().floor()), 10f64.powf(high.log10().ceil() + 1.0))
    }

    /// Slots (bar heights) from the top of the plot to the bottom: per group, a slot for its
    /// title, one per bar and one per reference line's label, then a gap.
    fn slots_count(&self) -> f64 {
        self.groups.iter().map(|group| 1.0 + (group.bars.len() + group.references.len()) as f64 + GAP_SLOTS).sum::<f64>().max(1.0)
    }

    /// The chart's height in pixels.
    pub fn height_px(&self) -> u32 {
        HEADER_PX + FOOTER_PX + (self.slots_count() * SLOT_PX as f64).ceil() as u32
    }
}

/// Draws `plan` as an SVG document.
///
/// # Errors
/// plotters' error as text, when a drawing step fails.
///
/// # Example
/// ```
/// use tessera_bench::report::{render_svg, ChartPlan, ResultsRow, ResultsTable};
///
/// let table = ResultsTable {
///     table: "store".to_owned(),
///     machine: "test".to_owned(),
///     rows: vec![ResultsRow {
///         row: "range scan".to_owned(),
///         unit: "µs".to_owned(),
///         tessera: Some(24.4),
///         peers: vec![("heed".to_owned(), Some(9.2))],
///         target: None,
///         met: None,
///     }],
/// };
/// let svg = render_svg(&ChartPlan::new(&table)).unwrap();
/// assert!(svg.starts_with("<svg"));
/// assert!(svg.contains("range scan (µs)"));
/// ```
pub fn render_svg(plan: &ChartPlan) -> Result<String, String> {
    if plan.systems.len() > SYSTEMS_COUNT_MAX {
        return Err(format!("{} systems, more than the {SYSTEMS_COUNT_MAX} colours", plan.systems.len()));
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, plan.height_px())).into_drawing_area();
        root.fill(&WHITE).map_err(|error| error.to_string())?;
        let (header, plot) = root.split_vertically(HEADER_PX);
        draw_header(&header, plan).map_err(|error| error.to_string())?;
        draw_rows(&plot, plan).map_err(|error| error.to_string())?;
        root.present().map_err(|error| error.to_string())?;
    }
    Ok(svg)
}

/// An axis tick (a power of ten): `0.01`, `1`, `1,000`.
fn format_tick(value: f64) -> String {
    if value >= 1.0 { format_figure(value.round()).trim_end_matches(".000").trim_end_matches(".0").to_owned() } else { format!("{value}") }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn text_style(size: u32, colour: &'static RGBColor) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font()).color(colour).pos(Pos::new(HPos::Left, VPos::Center))
}

/// One entry of the legend.
enum LegendKey {
    /// A system's colour swatch.
    Swatch(RGBColor),
    /// The reference line's mark.
    Line,
}

/// Title, machine, and the legend: one swatch per system, then the reference line's mark when
/// the chart has one; entries wrap to a new line at the chart's width.
fn draw_header(area: &Area<'_>, plan: &ChartPlan) -> DrawResult {
    area.draw(&Text::new(format!("{}: tessera beside each peer, same run", plan.table), (16, 16), text_style(22, &BLACK)))?;
    let caption = format!("{}. Log scale in each row's own unit: compare bars within a row.", plan.machine);
    area.draw(&Text::new(caption, (16, 40), text_style(15, &GREY)))?;
    let mut entries: Vec<(LegendKey, &str)> =
        plan.systems.iter().enumerate().map(|(index, system)| (LegendKey::Swatch(COLOURS[index]), system.as_str())).collect();
    if plan.groups.iter().any(|group| !group.references.is_empty()) {
        entries.push((LegendKey::Line, "the seed's published figure"));
    }
    let (mut x, mut y) = (16, 66);
    for (key, name) in entries {
        let entry_px = 30 + LEGEND_CHARACTER_PX * name.chars().count() as i32;
        if x + entry_px > WIDTH_PX as i32 - 16 {
            (x, y) = (16, y + 20);
        }
        match key {
            LegendKey::Swatch(colour) => area.draw(&Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()))?,
            LegendKey::Line => area.draw(&PathElement::new(vec![(x + 6, y - 8), (x + 6, y + 8)], BLACK.stroke_width(2)))?,
        }
        area.draw(&Text::new(name.to_owned(), (x + 18, y), text_style(15, &BLACK)))?;
        x += entry_px;
    }
    Ok(())
}

/// The groups of bars, the reference lines, and the axis.
fn draw_rows(area: &Area<'_>, plan: &ChartPlan) -> DrawResult {
    let (low, high) = plan.axis_range();
    let slots = plan.slots_count();
    let mut chart = ChartBuilder::on(area)
        .margin_left(16)
        .margin_right(48)
        .x_label_area_size(FOOTER_PX - 8)
        .build_cartesian_2d((low..high).log_scale(), 0.0..slots)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_label_formatter(&|value| format_tick(*value))
        .x_desc("figure, in the row's unit (logarithmic)")
        .max_light_lines(0)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    // Slots count down from the top of the plot (`slots`) to its bottom (0).
    let mut top = slots;
    for group in &plan.groups {
        chart.plotting_area().draw(&Text::new(group.title.clone(), (low, top - 0.5), text_style(15, &BLACK)))?;
        let bars_top = top - 1.0;
        for (index, bar) in group.bars.iter().enumerate() {
            let (upper, lower) = (bars_top - index as f64 - 0.1, bars_top - index as f64 - 0.9);
            let end = bar.value.max(low);
            chart.plotting_area().draw(&Rectangle::new([(low, upper), (end, lower)], COLOURS[bar.system_index].filled()))?;
            let label = EmptyElement::at((end, (upper + lower) / 2.0)) + Text::new(bar.label.clone(), (4, 0), text_style(14, &BLACK));
            chart.plotting_area().draw(&label)?;
        }
        // Each reference line crosses the bars and ends in its own slot below them, beside its
        // label.
        let mut bottom = bars_top - group.bars.len() as f64;
        for line in &group.references {
            let x = line.value.max(low);
            let label_middle = bottom - 0.5;
            chart.plotting_area().draw(&PathElement::new(vec![(x, bars_top), (x, label_middle)], BLACK.stroke_width(2)))?;
            let label = EmptyElement::at((x, label_middle)) + Text::new(line.label.clone(), (6, 0), text_style(14, &BLACK));
            chart.plotting_area().draw(&label)?;
            bottom -= 1.0;
        }
        top = bottom - GAP_SLOTS;
    }
    Ok(())
}

//! Drawing figures with plotters, the same code for PNG and SVG.
//!
//! Text uses only the embedded font, never a system one: SVG measures it
//! through plotters' `ab_glyph` font table (see [`super::register_fonts`])
//! and stores it as text; PNG draws it with [`GlyphText`]. No fontconfig,
//! no freetype.

use std::path::Path;

use ab_glyph::FontRef;

use plotters::coord::ranged1d::{SegmentValue, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::text::GlyphText;

/// Width of every figure, pixels.
const WIDTH_PX: u32 = 1200;
/// Height of one panel (a figure stacks panels vertically), pixels.
const PANEL_HEIGHT_PX: u32 = 680;

const FONT: &str = "sans-serif";
const TITLE_PX: u32 = 28;
const DESC_PX: u32 = 22;
const LABEL_PX: u32 = 18;
/// Width of the strip right of a bar chart that holds its legend, pixels.
const BAR_LEGEND_PX: u32 = 140;

/// Distinguishable colours (Tableau 10), reused in turn.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Image formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
}

/// A chart image: panels stacked top to bottom.
#[derive(Debug, Clone)]
pub enum Figure {
    Lines(Vec<LineChart>),
    Bars(Vec<BarChart>),
}

/// Where a legend sits inside the plot area.
#[derive(Debug, Clone, Copy)]
pub enum Corner {
    UpperLeft,
    UpperRight,
    LowerRight,
}

/// How axis tick labels are written.
#[derive(Debug, Clone, Copy)]
pub enum Ticks {
    /// 1.2k, 35M, 0.25.
    Number,
    /// Whole numbers only (thread counts, seconds).
    Integer,
}

/// One line per series.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub x_log: bool,
    pub x_ticks: Ticks,
    /// Fixed y range; otherwise 0 to a little over the largest value.
    pub y_range: Option<(f64, f64)>,
    pub legend: Corner,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    /// The line, sorted by x.
    pub line: Vec<(f64, f64)>,
    /// Dots (each measurement, when the line joins averages).
    pub markers: Vec<(f64, f64)>,
    /// Stretches of x shaded in the series' colour (when its checkpoints
    /// ran), named in the legend.
    pub spans: Option<Spans>,
}

/// Shaded stretches of a series' x axis.
#[derive(Debug, Clone)]
pub struct Spans {
    /// What they are, for the legend ("checkpoints").
    pub what: String,
    /// `(from, to)` in x.
    pub ranges: Vec<(f64, f64)>,
}

/// Bars, one stack per category; or, `grouped`, one bar per layer side by
/// side in each category (values that do not add up, such as each
/// protocol's throughput).
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub categories: Vec<String>,
    /// The stack's layer names, bottom first (grouped: left first).
    pub layers: Vec<String>,
    /// `stacks[category][layer]`.
    pub stacks: Vec<Vec<f64>>,
    pub grouped: bool,
}

impl Figure {
    /// Show each name `from` as `to` (series, bar layers and categories).
    pub fn rename(&mut self, names: &[(String, String)]) {
        let fix = |s: &mut String| {
            if let Some((_, to)) = names.iter().find(|(from, _)| from == s) {
                *s = to.clone();
            }
        };
        match self {
            Figure::Lines(charts) => {
                for c in charts {
                    c.series.iter_mut().for_each(|s| fix(&mut s.label));
                }
            }
            Figure::Bars(charts) => {
                for c in charts {
                    c.layers.iter_mut().for_each(fix);
                    c.categories.iter_mut().for_each(fix);
                }
            }
        }
    }

    fn size(&self) -> (u32, u32) {
        let panels = match self {
            Figure::Lines(v) => v.len(),
            Figure::Bars(v) => v.len(),
        };
        (WIDTH_PX, PANEL_HEIGHT_PX * panels.max(1) as u32)
    }
}

/// Draw `fig` into `path` as `format`; bitmap text is drawn with `font`.
pub fn write(
    fig: &Figure,
    path: &Path,
    format: Format,
    font: &FontRef<'static>,
) -> Result<(), String> {
    let size = fig.size();
    let fail = |e: String| format!("cannot draw {}: {e}", path.display());
    match format {
        Format::Png => {
            let png = BitMapBackend::new(path, size);
            let root = GlyphText::new(png, font.clone()).into_drawing_area();
            draw(fig, &root).map_err(fail)?;
            root.present().map_err(|e| fail(e.to_string()))
        }
        Format::Svg => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw(fig, &root).map_err(fail)?;
            root.present().map_err(|e| fail(e.to_string()))
        }
    }
}

type DrawResult = Result<(), String>;

fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

fn draw<DB: DrawingBackend>(fig: &Figure, root: &DrawingArea<DB, Shift>) -> DrawResult {
    root.fill(&WHITE).map_err(err)?;
    match fig {
        Figure::Lines(panels) => {
            let areas = root.split_evenly((panels.len(), 1));
            for (c, area) in panels.iter().zip(&areas) {
                line_panel(c, area)?;
            }
        }
        Figure::Bars(panels) => {
            let areas = root.split_evenly((panels.len(), 1));
            for (c, area) in panels.iter().zip(&areas) {
                bar_panel(c, area)?;
            }
        }
    }
    Ok(())
}

fn line_panel<DB: DrawingBackend>(c: &LineChart, area: &DrawingArea<DB, Shift>) -> DrawResult {
    let pts = || {
        c.series
            .iter()
            .flat_map(|s| s.line.iter().chain(&s.markers))
    };
    let (mut x0, mut x1) = min_max(pts().map(|p| p.0)).unwrap_or((0.0, 1.0));
    if c.x_log {
        // Callers drop x ≤ 0; keep a sane range if nothing is left.
        x0 = x0.max(1e-3);
        x1 = x1.max(x0);
        if x1 / x0 < 10.0 {
            let mid = (x0 * x1).sqrt();
            (x0, x1) = (mid / 4.0, mid * 4.0);
        }
        // Room for the end markers.
        (x0, x1) = (x0 / 1.1, x1 * 1.1);
    } else {
        if x0 == x1 {
            (x0, x1) = (x0 - 1.0, x1 + 1.0);
        }
        // The axis begins where the data does (a little before, for the
        // first marker).
        let pad = (x1 - x0) * 0.03;
        (x0, x1) = (x0 - pad, x1 + pad);
    }
    let (y0, y1) = c.y_range.unwrap_or_else(|| {
        let top = pts().map(|p| p.1).fold(0.0, f64::max);
        (
            0.0,
            if top > 0.0 {
                top * headroom(c, area)
            } else {
                1.0
            },
        )
    });

    let mut b = ChartBuilder::on(area);
    b.caption(&c.title, (FONT, TITLE_PX))
        .margin(18)
        .x_label_area_size(64)
        .y_label_area_size(100);
    if c.x_log {
        let chart = b
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(err)?;
        lines_on(chart, c, x1 - x0, (y0, y1))
    } else {
        let chart = b.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?;
        lines_on(chart, c, x1 - x0, (y0, y1))
    }
}

/// How far above the highest value the y axis goes: 10%, and with the
/// legend in an upper corner, enough more that the legend's rows sit
/// above every line (it never covers data).
fn headroom<DB: DrawingBackend>(c: &LineChart, area: &DrawingArea<DB, Shift>) -> f64 {
    if matches!(c.legend, Corner::LowerRight) {
        return 1.1;
    }
    let rows = c.series.len()
        + c.series
            .iter()
            .filter(|s| s.spans.as_ref().is_some_and(|s| !s.ranges.is_empty()))
            .count();
    // The plotting area: the panel less its caption, margins and x labels.
    let plot_px = f64::from(area.dim_in_pixel().1) - f64::from(TITLE_PX) * 1.6 - 64.0 - 36.0;
    // The legend box: its margin, padding and a row per entry.
    let legend_px = 12.0 + 10.0 + rows as f64 * f64::from(LABEL_PX) * 1.45 + 12.0;
    let free = (1.0 - legend_px / plot_px.max(1.0)).clamp(0.3, 0.9);
    1.0 / free
}

fn lines_on<'a, DB, X>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    c: &LineChart,
    x_span: f64,
    (y0, y1): (f64, f64),
) -> DrawResult
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_fmt = |v: &f64| match c.x_ticks {
        // A tick between whole numbers gets no label (1.5 threads).
        Ticks::Integer if (v - v.round()).abs() > 1e-6 => String::new(),
        Ticks::Integer => format!("{v:.0}"),
        Ticks::Number => number(*v),
    };
    let y_fmt = |v: &f64| number(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(c.x_desc.as_str())
        .y_desc(c.y_desc.as_str())
        .axis_desc_style((FONT, DESC_PX))
        .label_style((FONT, LABEL_PX))
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.04))
        .max_light_lines(4)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt);
    if matches!(c.x_ticks, Ticks::Integer) && !c.x_log {
        // Few enough labels that plotters picks a whole-number step.
        mesh.x_labels((x_span.ceil() as usize).clamp(1, 10) + 1);
    }
    mesh.draw().map_err(err)?;

    // Shading first, so that every line is drawn over it.
    for (i, s) in c.series.iter().enumerate() {
        let Some(spans) = s.spans.as_ref().filter(|s| !s.ranges.is_empty()) else {
            continue;
        };
        let shade = PALETTE[i % PALETTE.len()].mix(0.18);
        chart
            .draw_series(
                spans
                    .ranges
                    .iter()
                    .map(|&(a, b)| Rectangle::new([(a, y0), (b, y1)], shade.filled())),
            )
            .map_err(err)?
            .label(format!("{}: {}", s.label, spans.what))
            .legend(move |(x, y)| Rectangle::new([(x, y - 7), (x + 24, y + 7)], shade.filled()));
    }
    for (i, s) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                s.line.iter().copied(),
                color.stroke_width(3),
            ))
            .map_err(err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], color.stroke_width(3)));
        chart
            .draw_series(s.markers.iter().map(|&p| Circle::new(p, 5, color.filled())))
            .map_err(err)?;
    }
    if !c.series.is_empty() {
        legend(&mut chart, c.legend)?;
    }
    Ok(())
}

fn bar_panel<DB: DrawingBackend>(c: &BarChart, area: &DrawingArea<DB, Shift>) -> DrawResult {
    let top = c
        .stacks
        .iter()
        .map(|s| match c.grouped {
            true => s.iter().copied().fold(0.0, f64::max),
            false => s.iter().sum::<f64>(),
        })
        .fold(100.0, f64::max);
    // The bars fill the plot's height: the legend gets a strip of its own.
    let (w, _) = area.dim_in_pixel();
    // Wide enough for the longest layer name (about 9 px a character).
    let longest = c
        .layers
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let legend_px = (longest * 9 + 44).clamp(BAR_LEGEND_PX, w / 3);
    let (area, side) = area.split_horizontally(w.saturating_sub(legend_px));
    // Segments over `0..n` are n + 1 (the range is taken inclusively), so
    // one per category is `0..categories - 1`.
    let slots = c.categories.len().max(1);
    let mut chart = ChartBuilder::on(&area)
        .caption(&c.title, (FONT, TITLE_PX))
        .margin(18)
        .margin_right(0)
        .x_label_area_size(64)
        .y_label_area_size(100)
        .build_cartesian_2d((0..slots - 1).into_segmented(), 0.0..top * 1.05)
        .map_err(err)?;
    let x_fmt = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => c.categories.get(*i).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    let y_fmt = |v: &f64| number(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.04))
        .max_light_lines(4)
        .x_labels(slots)
        .x_desc(c.x_desc.as_str())
        .y_desc(c.y_desc.as_str())
        .axis_desc_style((FONT, DESC_PX))
        .label_style((FONT, LABEL_PX))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .draw()
        .map_err(err)?;
    // Grouped: each category's width split among its layers, in pixels.
    let layers = c.layers.len().max(1);
    let slot_px = chart.plotting_area().dim_in_pixel().0 as usize / slots;
    let bar_px = slot_px.saturating_sub(28) / layers;
    for k in 0..c.layers.len() {
        let color = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(c.stacks.iter().enumerate().map(|(i, stack)| {
                let (bottom, value) = match c.grouped {
                    true => (0.0, stack[k]),
                    false => (stack[..k].iter().sum(), stack[k]),
                };
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), bottom),
                        (SegmentValue::Exact(i + 1), bottom + value),
                    ],
                    color.filled(),
                );
                if c.grouped {
                    let left = 14 + k * bar_px;
                    let right = slot_px.saturating_sub(left + bar_px);
                    r.set_margin(0, 0, left as u32, right as u32);
                } else {
                    r.set_margin(0, 0, 14, 14);
                }
                r
            }))
            .map_err(err)?;
    }
    // The legend's first row level with the plot's top edge.
    let first_y = chart.plotting_area().get_pixel_range().1.start - side.get_base_pixel().1;
    let font =
        TextStyle::from((FONT, LABEL_PX).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (k, layer) in c.layers.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let y = first_y + 12 + k as i32 * (LABEL_PX as i32 + 8);
        side.draw(&Rectangle::new([(12, y - 7), (28, y + 7)], color.filled()))
            .map_err(err)?;
        side.draw(&Text::new(layer.as_str(), (36, y), font.clone()))
            .map_err(err)?;
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    corner: Corner,
) -> DrawResult {
    let position = match corner {
        Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
        Corner::UpperRight => SeriesLabelPosition::UpperRight,
        Corner::LowerRight => SeriesLabelPosition::LowerRight,
    };
    chart
        .configure_series_labels()
        .position(position)
        .margin(12)
        .label_font((FONT, LABEL_PX))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .draw()
        .map_err(err)
}

fn min_max(it: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    it.filter(|v| v.is_finite()).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// A tick label: three significant digits, SI suffixes from a thousand up
/// (`950`, `1.2k`, `35M`, `0.25`).
pub fn number(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = scaled.abs();
    let decimals = if s == 0.0 || s >= 100.0 {
        0
    } else if s >= 10.0 {
        1
    } else if s >= 1.0 {
        2
    } else {
        // Enough to show three significant digits of a small fraction.
        (2 - s.log10().floor() as i32).clamp(0, 9) as usize
    };
    let mut t = format!("{scaled:.decimals$}");
    if t.contains('.') {
        t = t.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if t == "-0" {
        t = "0".into();
    }
    t + suffix
}

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(950.0), "950");
        assert_eq!(number(1200.0), "1.2k");
        assert_eq!(number(35_000_000.0), "35M");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(0.001234), "0.00123");
        assert_eq!(number(2.5e9), "2.5G");
        assert_eq!(number(-1500.0), "-1.5k");
    }
}

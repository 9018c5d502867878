//! The PNG report: latency over time (per-second p50 and p99 of filter and bind) above latency
//! histograms. Text needs a TrueType font, read at run time from a system path; without one the
//! chart is drawn without text. Pure Rust (plotters' bitmap backend): no system C libraries.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::report::Second;

/// Where a sans-serif font is looked for, first match wins.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
];

static FONT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Registers the first readable font of `paths` as "sans-serif", once per process. Returns the
/// font used, or None (then charts have no text).
pub fn load_font(paths: &[PathBuf]) -> Option<PathBuf> {
    FONT.get_or_init(|| {
        for p in paths {
            let Ok(bytes) = std::fs::read(p) else { continue };
            // plotters keeps fonts for the life of the process; one small leak per process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Some(p.clone());
            }
        }
        None
    })
    .clone()
}

/// The default font list, or `explicit` alone when given.
pub fn font_candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    match explicit {
        Some(p) => vec![p.to_owned()],
        None => FONT_PATHS.iter().map(PathBuf::from).collect(),
    }
}

/// Bars of a latency histogram: `bins` equal-width bins from the minimum to p99.9, in µs.
pub fn bars(h: &Histogram<u64>, bins: usize) -> (u64, u64, Vec<u64>) {
    if h.is_empty() || bins == 0 {
        return (0, 1, Vec::new());
    }
    let lo = h.min();
    let hi = h.value_at_quantile(0.999).max(lo + 1);
    let width = (hi - lo).div_ceil(bins as u64).max(1);
    let mut out = vec![0u64; bins];
    for v in h.iter_recorded() {
        let x = h.median_equivalent(v.value_iterated_to());
        if x > hi {
            continue;
        }
        let i = (x.saturating_sub(lo) / width) as usize;
        out[i.min(bins - 1)] += v.count_at_value();
    }
    (lo, width, out)
}

type Res = Result<(), String>;

/// A named, coloured line of (second, ms) points.
type Line<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// One latency histogram panel.
fn histogram_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    h: &Histogram<u64>,
    text: bool,
    color: RGBColor,
) -> Res {
    let (lo, width, counts) = bars(h, 60);
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let n = counts.len().max(1) as u32;
    let mut b = ChartBuilder::on(area);
    b.margin(12);
    if text {
        b.caption(title, ("sans-serif", 18)).x_label_area_size(36).y_label_area_size(56);
    }
    let mut chart = b.build_cartesian_2d((0u32..n).into_segmented(), 0u64..top + top / 10 + 1).map_err(e)?;
    if text {
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(6)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    format!("{:.2}", (lo + u64::from(*i) * width) as f64 / 1000.0)
                }
                SegmentValue::Last => String::new(),
            })
            .x_desc("latency (ms), up to p99.9")
            .y_desc("requests")
            .draw()
            .map_err(e)?;
    }
    chart
        .draw_series(
            plotters::series::Histogram::vertical(&chart)
                .style(color.filled())
                .margin(1)
                .data(counts.iter().enumerate().map(|(i, c)| (i as u32, *c))),
        )
        .map_err(e)?;
    Ok(())
}

/// Draws the PNG with the first font of `font` that loads; returns whether it has text.
pub fn draw(
    path: &Path,
    title: &str,
    timeline: &[Second],
    filter: &Histogram<u64>,
    bind: &Histogram<u64>,
    font: &[PathBuf],
) -> Result<bool, String> {
    let text = load_font(font).is_some();
    render(path, title, timeline, filter, bind, text)?;
    Ok(text)
}

/// Draws the PNG, with text only when `text` (a font is registered).
pub fn render(
    path: &Path,
    title: &str,
    timeline: &[Second],
    filter: &Histogram<u64>,
    bind: &Histogram<u64>,
    text: bool,
) -> Res {
    let root = BitMapBackend::new(path, (1280, 960)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, bottom) = root.split_vertically(480);
    let series: Vec<Line<'_>> = {
        let pts = |f: &dyn Fn(&Second) -> (u64, u64)| -> Vec<(f64, f64)> {
            timeline
                .iter()
                .filter_map(|s| {
                    let (n, v) = f(s);
                    (n > 0).then(|| (s.second as f64 + 0.5, v as f64 / 1000.0))
                })
                .collect()
        };
        vec![
            ("filter p50", RGBColor(31, 119, 180), pts(&|s| (s.filters, s.filter_p50_us))),
            ("filter p99", RGBColor(214, 39, 40), pts(&|s| (s.filters, s.filter_p99_us))),
            ("bind p50", RGBColor(44, 160, 44), pts(&|s| (s.binds, s.bind_p50_us))),
            ("bind p99", RGBColor(255, 127, 14), pts(&|s| (s.binds, s.bind_p99_us))),
        ]
        .into_iter()
        .filter(|(_, _, p)| !p.is_empty())
        .collect()
    };
    let xmax = timeline.len().max(1) as f64;
    let ymax = series.iter().flat_map(|(_, _, p)| p.iter().map(|(_, y)| *y)).fold(0.0f64, f64::max).max(0.001) * 1.1;
    let mut b = ChartBuilder::on(&top);
    b.margin(12);
    if text {
        b.caption(format!("{title}: latency per second"), ("sans-serif", 20))
            .x_label_area_size(36)
            .y_label_area_size(56);
    }
    let mut chart = b.build_cartesian_2d(0f64..xmax, 0f64..ymax).map_err(e)?;
    if text {
        chart.configure_mesh().x_desc("second of the run").y_desc("latency (ms)").draw().map_err(e)?;
    }
    for (name, color, pts) in &series {
        // Markers too: a run of a second or two has too few points for a visible line.
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled()))).map_err(e)?;
        let s = chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2))).map_err(e)?;
        if text {
            let c = *color;
            s.label(*name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
    }
    if text && !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(e)?;
    }
    if bind.is_empty() {
        histogram_panel(&bottom, "filter latency", filter, text, RGBColor(31, 119, 180))?;
    } else {
        let (l, r) = bottom.split_horizontally(640);
        histogram_panel(&l, "filter latency", filter, text, RGBColor(31, 119, 180))?;
        histogram_panel(&r, "bind latency", bind, text, RGBColor(44, 160, 44))?;
    }
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_cover_the_histogram_up_to_p999() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        for v in 1000..2000u64 {
            h.record(v).expect("in range");
        }
        h.record(50_000).expect("in range");
        let (lo, width, counts) = bars(&h, 10);
        assert_eq!(lo, 1000);
        assert!(width >= 100);
        assert_eq!(counts.len(), 10);
        let total: u64 = counts.iter().sum();
        assert!((995..=1000).contains(&total), "{total}: the outlier past p99.9 is left out");
        assert_eq!(bars(&Histogram::<u64>::new(2).expect("new"), 10).2, Vec::<u64>::new());
    }

    #[test]
    fn a_png_is_drawn_with_or_without_a_font() {
        let dir = std::env::temp_dir().join(format!("hami-loadtest-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        for v in 100..900u64 {
            h.record(v).expect("in range");
        }
        let t: Vec<Second> = (0..5)
            .map(|i| Second { second: i, filters: 10, filter_p50_us: 300, filter_p99_us: 800, ..Second::default() })
            .collect();
        let png = |p: &Path| std::fs::read(p).map(|b| b.starts_with(b"\x89PNG\r\n\x1a\n")).unwrap_or(false);
        let plain = dir.join("plain.png");
        render(&plain, "test", &t, &h, &Histogram::<u64>::new(2).expect("new"), false).expect("drawn without text");
        assert!(png(&plain));
        // The font (if any) is registered once per process.
        let with = dir.join("text.png");
        let text = draw(&with, "test", &t, &h, &h, &font_candidates(None)).expect("drawn");
        assert!(png(&with));
        assert_eq!(text, FONT_PATHS.iter().any(|p| Path::new(p).exists()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

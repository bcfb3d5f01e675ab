//! `redial simulate --plot FILE.svg`: two charts, one above the other, over the simulation's
//! time: the requests sent each second, and the jobs not yet ended. One line a run (with
//! `--compare`, two, in their own colours, named in a legend). A long simulation is drawn in at
//! most [`POINTS`] points: each the busiest second of its stretch, and the backlog at its end.

use std::fmt::Write;

/// The most points a line is drawn with.
const POINTS: usize = 800;

const WIDTH: f64 = 900.0;
const PANEL: f64 = 220.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const GAP: f64 = 60.0;
const COLOURS: [&str; 2] = ["#1f77b4", "#d62728"];

/// One run's series: its name, requests a second, backlog at each second's end.
pub struct Series<'a> {
    pub name: &'a str,
    pub per_second: Vec<u64>,
    pub backlog: Vec<u64>,
}

/// Each stretch's value: the largest for rates, the last for a level.
fn downsample(values: &[u64], len: usize, peak: bool) -> Vec<(usize, u64)> {
    if len == 0 {
        return Vec::new();
    }
    let stretch = len.div_ceil(POINTS).max(1);
    (0..len)
        .step_by(stretch)
        .map(|start| {
            let end = (start + stretch).min(len);
            let part = &values[start.min(values.len())..end.min(values.len())];
            let v = if peak {
                part.iter().max().copied().unwrap_or(0)
            } else {
                part.last().copied().unwrap_or(0)
            };
            (end - 1, v)
        })
        .collect()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A panel at `top`: its frame, title, the y axis's top value and the lines.
fn panel(
    out: &mut String,
    top: f64,
    title: &str,
    lines: &[(usize, Vec<(usize, u64)>)],
    seconds: usize,
) {
    let right = WIDTH - 30.0;
    let max = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|(_, v)| *v))
        .max()
        .unwrap_or(0)
        .max(1);
    let x = |s: usize| LEFT + (right - LEFT) * s as f64 / seconds.max(1) as f64;
    let y = |v: u64| top + PANEL - PANEL * v as f64 / max as f64;
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{w}" height="{PANEL}" fill="none" stroke="#999"/>
<text x="{LEFT}" y="{ty}" font-size="14">{title}</text>
<text x="{lx}" y="{top_label}" font-size="11" text-anchor="end">{max}</text>
<text x="{lx}" y="{bottom}" font-size="11" text-anchor="end">0</text>
"##,
        w = right - LEFT,
        ty = top - 8.0,
        lx = LEFT - 6.0,
        top_label = top + 10.0,
        bottom = top + PANEL,
        title = escape(title),
    );
    for (colour, points) in lines {
        let path: Vec<String> = points
            .iter()
            .map(|(s, v)| format!("{:.1},{:.1}", x(*s), y(*v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            COLOURS[*colour % COLOURS.len()],
            path.join(" ")
        );
    }
}

/// The whole picture.
pub fn svg(series: &[Series]) -> String {
    let seconds = series
        .iter()
        .map(|s| s.per_second.len().max(s.backlog.len()))
        .max()
        .unwrap_or(0)
        .max(1);
    let height = TOP + 2.0 * PANEL + GAP + 70.0;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    let rates: Vec<(usize, Vec<(usize, u64)>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (i, downsample(&s.per_second, seconds, true)))
        .collect();
    let backlogs: Vec<(usize, Vec<(usize, u64)>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (i, downsample(&s.backlog, seconds, false)))
        .collect();
    panel(&mut out, TOP, "requests a second", &rates, seconds);
    let second = TOP + PANEL + GAP;
    panel(&mut out, second, "jobs not yet ended", &backlogs, seconds);
    let axis = second + PANEL + 18.0;
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{axis}" font-size="11">0</text>
<text x="{r}" y="{axis}" font-size="11" text-anchor="end">{end} (virtual time)</text>"#,
        r = WIDTH - 30.0,
        end = redial_policy::Human(std::time::Duration::from_secs(seconds as u64)),
    );
    for (i, s) in series.iter().enumerate() {
        let y = axis + 20.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{LEFT}" y1="{y0}" x2="{x2}" y2="{y0}" stroke="{c}" stroke-width="3"/>
<text x="{tx}" y="{y}" font-size="12">{name}</text>"#,
            y0 = y - 4.0,
            x2 = LEFT + 24.0,
            c = COLOURS[i % COLOURS.len()],
            tx = LEFT + 30.0,
            name = escape(s.name),
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_is_drawn_in_at_most_its_points_keeping_peaks() {
        let mut rates = vec![1u64; 100_000];
        rates[54_321] = 900;
        let d = downsample(&rates, rates.len(), true);
        assert!(d.len() <= POINTS);
        assert_eq!(d.iter().map(|(_, v)| *v).max(), Some(900));
        assert_eq!(d.last().map(|(s, _)| *s), Some(99_999));
    }

    #[test]
    fn the_picture_names_each_run_and_escapes_it() {
        let s = svg(&[
            Series {
                name: "a<b>.toml",
                per_second: vec![3, 5, 2],
                backlog: vec![10, 5, 0],
            },
            Series {
                name: "c.toml",
                per_second: vec![1],
                backlog: vec![10],
            },
        ]);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a&lt;b&gt;.toml") && s.contains("c.toml"));
        assert_eq!(s.matches("<polyline").count(), 4);
    }
}

//! Which figures a result, or a set of runs overlaid, has (each described by
//! `report::result::figure`): per distribution with samples its percentiles and its histogram, per
//! entry with a series its series, then what each kind's view draws across its entries.

use crate::report::ResultFile;
use crate::report::export::{self, Loaded};
use crate::report::result::dist::{Dist, SeriesView};
use crate::report::result::figure::{
    Chart, Curves, DistId, Figure, Line, SeriesData, SeriesId, file_safe, unique_names,
};
use crate::report::views::Kind;

/// Every figure of each result: per distribution with samples its percentiles and its
/// histogram, per entry with a series its series, then each kind's own (the c2c heat
/// map). With several files, names are prefixed by the file's label. An error names the
/// file and the entry whose histogram does not decode.
pub fn result_figures(results: &[Loaded]) -> Result<Vec<Figure>, String> {
    let labels = export::file_prefixes(results);
    let mut out = Vec::new();
    for ((path, r), label) in results.iter().zip(labels) {
        let figures = file_figures(r).map_err(|e| format!("{}: {e}", path.display()))?;
        let prefix = match label.is_empty() {
            true => String::new(),
            false => format!("{}-", file_safe(&label)),
        };
        // As file-safe as the names: titles and file names say the same.
        let source = prefix.trim_end_matches('-');
        for mut f in figures {
            f.name.insert_str(0, &prefix);
            f.source = source.to_string();
            out.push(f);
        }
    }
    unique_names(out.iter_mut().map(|f| &mut f.name));
    Ok(out)
}

fn file_figures(r: &ResultFile) -> Result<Vec<Figure>, String> {
    let (dists, _) = export::distributions(r);
    figures_of(r, &dists.iter().collect::<Vec<_>>())
}

/// The figures of one result as [`result_figures`] has them, but of `dists` (some of
/// `r`'s distributions) alone: the histograms of the others are not decoded (the page
/// draws 4 of c2c's 18 336 pairs at 192 CPUs). Every series and kind's figure is kept.
pub fn figures_of(r: &ResultFile, dists: &[&Dist]) -> Result<Vec<Figure>, String> {
    let mut out = Vec::new();
    for d in dists {
        if let Some(curves) = Curves::of(d)? {
            let id = DistId::of(d);
            out.push(id.percentiles(vec![curves.percentiles]));
            out.push(id.histogram(vec![curves.bins]));
        }
    }
    for e in &r.probes {
        if let Some(s) = e.view().and_then(|v| v.series()) {
            out.push(series_figure(
                &s,
                vec![series_line(&s, String::new())],
                largest(&s),
            ));
        }
    }
    out.extend(Kind::ALL.iter().flat_map(|k| k.figures(r)));
    Ok(out)
}

/// The runs overlaid: for each distribution present in at least one run (matched by
/// probe, key and metric), its percentiles and its histogram with a labelled line per
/// run; then the series overlaid the same way (matched by probe and CPU), without the
/// largest events.
pub fn overlay_figures(runs: &[(String, &ResultFile)]) -> Result<Vec<Figure>, String> {
    let mut dists: Vec<(DistId, Vec<(String, Curves)>)> = Vec::new();
    for (label, r) in runs {
        for d in export::distributions(r).0 {
            let Some(curves) = Curves::of(&d).map_err(|e| format!("{label}: {e}"))? else {
                continue;
            };
            let id = DistId::of(&d);
            let at = find_or_push(&mut dists, |(i, _)| i.same(&id), || (id.clone(), vec![]));
            at.0.trusted &= id.trusted;
            at.1.push((label.clone(), curves));
        }
    }
    let mut out = Vec::new();
    for (id, curves) in dists {
        let (pct, bins) = curves
            .into_iter()
            .map(|(label, c)| (c.percentiles.labelled(&label), c.bins.labelled(&label)))
            .unzip();
        out.push(id.percentiles(pct));
        out.push(id.histogram(bins));
    }
    let mut series: Vec<(String, Vec<Line<SeriesData>>, SeriesView)> = Vec::new();
    for (label, r) in runs {
        for s in r.probes.iter().filter_map(|e| e.view()?.series()) {
            let key = series_name(&s);
            let at = find_or_push(
                &mut series,
                |(k, ..)| *k == key,
                || (key.clone(), vec![], s),
            );
            at.1.push(series_line(&s, label.clone()));
        }
    }
    out.extend(
        series
            .into_iter()
            .map(|(_, lines, s)| series_figure(&s, lines, vec![])),
    );
    unique_names(out.iter_mut().map(|f| &mut f.name));
    Ok(out)
}

fn find_or_push<T>(v: &mut Vec<T>, hit: impl Fn(&T) -> bool, new: impl FnOnce() -> T) -> &mut T {
    let i = match v.iter().position(hit) {
        Some(i) => i,
        None => {
            v.push(new());
            v.len() - 1
        }
    };
    &mut v[i]
}

fn series_name(s: &SeriesView) -> String {
    format!("{}-cpu{}-series", s.probe, s.cpu)
}

fn series_line(s: &SeriesView, label: String) -> Line<SeriesData> {
    Line {
        label,
        data: SeriesData {
            interval_ns: s.series.interval_ns,
            max_ns: s.series.max_ns.clone(),
            events: s.series.events.clone(),
            total_ns: s.series.total_ns.clone(),
        },
    }
}

fn largest(s: &SeriesView) -> Vec<(u64, u64)> {
    s.largest
        .iter()
        .map(|e| (e.start_ns, e.duration_ns))
        .collect()
}

fn series_figure(s: &SeriesView, lines: Vec<Line<SeriesData>>, largest: Vec<(u64, u64)>) -> Figure {
    Figure {
        name: file_safe(&series_name(s)),
        source: String::new(),
        chart: Chart::Series {
            id: SeriesId {
                probe: s.probe,
                cpu: s.cpu,
                gap: s.gap,
            },
            lines,
            largest,
        },
    }
}

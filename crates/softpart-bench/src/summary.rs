//! The short answer to a scenario's question: per load and policy, the few
//! figures that say whether groups kept to their homes and what CPU time
//! they got (locality or exclusivity, their memory on their homes' nodes
//! and the share of their accesses that are local, CPU time against eevdf,
//! cross-node moves, run delay, and each group's CPU time where groups have a
//! contract), each as median [min-max]. `run` and `report` print it;
//! `--full` prints every table (table.rs); `plot` draws the same figures.

use crate::scenario::Scenario;
use crate::table::{Cell, RunFigures};
use softpart_core::stats::Summary;
use std::fmt::Write;

/// A figure's values per run of a cell, given the eevdf cell at the same
/// load.
type Values = Box<dyn Fn(&Cell, Option<&Cell>) -> Vec<f64>>;

/// One summary figure: its heading, its values per run of a cell (given
/// the eevdf cell at the same load, for ratios), and how to print one.
pub struct Figure {
    pub title: String,
    values: Values,
    pub fmt: fn(f64) -> String,
}

impl Figure {
    fn new(
        title: impl Into<String>,
        fmt: fn(f64) -> String,
        values: impl Fn(&Cell, Option<&Cell>) -> Vec<f64> + 'static,
    ) -> Figure {
        Figure {
            title: title.into(),
            values: Box::new(values),
            fmt,
        }
    }

    /// Of one figure, for one cell: median [min-max] over its runs.
    pub fn summary(&self, cell: &Cell, eevdf: Option<&Cell>) -> Option<Summary> {
        Summary::of(&(self.values)(cell, eevdf))
    }
}

fn per_run(cell: &Cell, f: impl Fn(&RunFigures) -> Option<f64>) -> Vec<f64> {
    cell.runs.iter().filter_map(f).collect()
}

/// The figures the scenario's question needs, those with a value in some
/// cell.
pub fn figures(sc: &Scenario, policies: &[String], cells: &[Cell]) -> Vec<Figure> {
    let mut out = vec![
        Figure::new(
            "locality %",
            |x| format!("{x:.1}"),
            |c, _| per_run(c, |f| f.locality.map(|x| 100.0 * x)),
        ),
        Figure::new(
            "exclusivity %",
            |x| format!("{x:.1}"),
            |c, _| per_run(c, |f| f.exclusivity.map(|x| 100.0 * x)),
        ),
        Figure::new(
            "memory on home %",
            |x| format!("{x:.1}"),
            |c, _| per_run(c, |f| f.memory_on_home.map(|x| 100.0 * x)),
        ),
        Figure::new(
            "local access %",
            |x| format!("{x:.1}"),
            |c, _| per_run(c, |f| f.local_access.map(|x| 100.0 * x)),
        ),
    ];
    if policies.iter().any(|p| p == "eevdf") {
        // Each run against eevdf's median: the range is the runs'.
        out.push(Figure::new(
            "CPU time / eevdf",
            |x| format!("{x:.2}"),
            |c, e| {
                let base = e.and_then(|e| e.summary(|f| Some(f.granted)));
                match base {
                    Some(b) if b.median > 0.0 => per_run(c, |f| Some(f.granted / b.median)),
                    _ => vec![],
                }
            },
        ));
    } else {
        out.push(Figure::new(
            "CPU-s per s",
            |x| format!("{x:.2}"),
            |c, _| per_run(c, |f| Some(f.granted)),
        ));
    }
    out.push(Figure::new(
        "cross-node moves/s",
        |x| format!("{x:.1}"),
        |c, _| per_run(c, |f| Some(f.xnode_migrations_per_s)),
    ));
    out.push(Figure::new(
        "tasks waiting",
        |x| format!("{x:.2}"),
        |c, _| per_run(c, |f| Some(f.run_delay_sum)),
    ));
    if sc.sets_contract() {
        for g in sc.groups.iter().filter(|g| !sc.is_parent(g)) {
            let name = g.name.clone();
            out.push(Figure::new(
                format!("{name} CPU-s/s"),
                |x| format!("{x:.2}"),
                move |c, _| {
                    per_run(c, |f| {
                        f.group_cpu.iter().find(|(n, _)| *n == name).map(|x| x.1)
                    })
                },
            ));
        }
    }
    out.retain(|fig| {
        cells.iter().any(|c| {
            let e = eevdf_cell(cells, c.load);
            fig.summary(c, e).is_some()
        })
    });
    out
}

pub fn eevdf_cell(cells: &[Cell], load: u32) -> Option<&Cell> {
    cells.iter().find(|c| c.load == load && c.policy == "eevdf")
}

fn text(s: Option<Summary>, fmt: fn(f64) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 || s.min == s.max => fmt(s.median),
        Some(s) => format!("{} [{}-{}]", fmt(s.median), fmt(s.min), fmt(s.max)),
    }
}

/// The header's first two lines (what ran, where), the figures' legend,
/// then one row per load and policy.
pub fn render(sc: &Scenario, policies: &[String], cells: &[Cell], header: &str) -> String {
    let figs = figures(sc, policies, cells);
    let mut rows: Vec<Vec<String>> = vec![];
    let mut head = vec![sc.load_label.clone(), "policy".to_string()];
    head.extend(figs.iter().map(|f| f.title.clone()));
    rows.push(head);
    for &load in &sc.loads {
        for p in policies {
            let Some(cell) = cells.iter().find(|c| c.load == load && &c.policy == p) else {
                continue;
            };
            let e = eevdf_cell(cells, load);
            let mut row = vec![load.to_string(), p.clone()];
            row.extend(figs.iter().map(|f| text(f.summary(cell, e), f.fmt)));
            rows.push(row);
        }
    }
    let ncol = rows[0].len();
    let widths: Vec<usize> = (0..ncol)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in header.lines().take(3) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "locality: share of the homed groups' CPU time on their homes; exclusivity: of each \
         group's, in the node it used most; tasks waiting: run delay summed per s"
    );
    if figs.iter().any(|f| f.title == "local access %") {
        let _ = writeln!(
            out,
            "memory on home: share of the homed groups' anonymous and shared memory on their \
             homes' nodes; local access: per node, CPU-time share times memory share, summed"
        );
    }
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i < 2 {
                let _ = write!(line, "{c:<w$}  ", w = widths[i]);
            } else {
                let _ = write!(line, "{c:>w$}  ", w = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::{run, scenario};

    #[test]
    fn a_row_per_load_and_policy_with_medians_ranges_and_ratios() {
        let mut sc = scenario();
        sc.loads = vec![1, 2, 4];
        let policies: Vec<String> = ["eevdf", "pinned", "softpart"].map(String::from).into();
        let mut runs = vec![];
        for &load in &sc.loads {
            for p in &policies {
                for rep in 0..3u64 {
                    let home = 2_000_000_000 - 100_000_000 * rep;
                    let mut r = run(p, [home, 0, 0, 0, 2_000_000_000 - home, 0, 0, 0], 10 * rep);
                    (r.load, r.rep) = (load, rep as u32);
                    runs.push(r);
                }
            }
        }
        let refs: Vec<_> = runs.iter().collect();
        let cells = crate::table::cells(&refs, &sc, &sc.topo().unwrap(), &policies).unwrap();
        let text = render(&sc, &policies, &cells, "t — test\nkernel k\nwhen\n");
        let lines: Vec<&str> = text.lines().collect();
        // The header, the legend, the heading, 3 loads x 3 policies.
        assert_eq!(lines.len(), 3 + 1 + 1 + 9, "{text}");
        assert!(lines[4].contains("locality %") && lines[4].contains("CPU time / eevdf"));
        // Locality 100, 95, 90% over the three runs; CPU time the same as
        // eevdf's; cross-node moves 0, 5, 10 per s (2 s windows).
        let row = lines[5..]
            .iter()
            .find(|l| l.starts_with("2 ") && l.contains("softpart"));
        let row = row.unwrap();
        assert!(row.contains("95.0 [90.0-100.0]"), "{row}");
        assert!(row.contains("1.00"), "{row}");
        assert!(row.contains("5.0 [0.0-10.0]"), "{row}");
    }
}

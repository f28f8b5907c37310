//! Plain-text tables for terminals: right-aligned numbers, one header row.

use crate::stats::Summary;

pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A row of `label`, then n, mean, P50, P95, P99 and max of `s` (or dashes).
    pub fn summary_row(&mut self, label: &str, s: Option<&Summary>) {
        let mut cells = vec![label.to_string()];
        match s {
            Some(s) => {
                cells.push(s.n.to_string());
                cells.extend(
                    [s.mean, s.p50, s.p95, s.p99, s.max]
                        .iter()
                        .map(|v| fmt_num(*v)),
                );
            }
            None => cells.extend(std::iter::repeat_n("-".to_string(), 6)),
        }
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(cols) {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str("  ");
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Three significant figures at most, never scientific notation.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_missing_summaries_show_dashes() {
        let mut t = Table::new(&["metric", "n", "mean", "p50", "p95", "p99", "max"]);
        t.summary_row(
            "TTFT",
            Summary::from_samples(&[1.0, 2.0, 300.0], 0).as_ref(),
        );
        t.summary_row("TPOT", None);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("TTFT"));
        assert!(lines[1].ends_with("300"), "{s}");
        assert!(lines[2].ends_with('-'));
        assert_eq!(lines[0].len(), lines[1].len());
    }

    #[test]
    fn number_format() {
        assert_eq!(fmt_num(1234.4), "1234");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(0.1234), "0.12");
    }
}

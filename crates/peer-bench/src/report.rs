//! Markdown tables: per-round values, the median, and toolgraft's ratios to
//! raw rmcp and to tower-mcp (toolgraft / peer, on the medians).

use crate::systems::System;

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `p`-th percentile (0..=100) of sorted `nanos`, in µs.
pub fn percentile_us(sorted_nanos: &[u64], p: usize) -> f64 {
    if sorted_nanos.is_empty() {
        return f64::NAN;
    }
    let i = (sorted_nanos.len() * p / 100).min(sorted_nanos.len() - 1);
    sorted_nanos[i] as f64 / 1000.0
}

/// One row: a system in a group (a client count, a tool count), one value a round.
pub struct Row {
    /// What the row's group is (`1 client`, `1000 tools`, ...); ratios are taken
    /// within a group.
    pub group: String,
    /// The system's label (`toolgraft`, `toolgraft 4-layer`, `rmcp`, ...).
    pub label: String,
    /// The system.
    pub system: System,
    /// One value per round, in round order.
    pub values: Vec<f64>,
    /// A free note (errors, body kind); a column only if some row has one.
    pub note: String,
    /// Errors over every round (HTTP).
    pub errors: u64,
}

/// A table of `rows` with values in `unit`.
pub struct Table {
    /// The title (a heading line).
    pub title: String,
    /// The unit of the values.
    pub unit: String,
    /// The rows.
    pub rows: Vec<Row>,
}

impl Table {
    /// A table with no rows yet.
    pub fn new(title: impl Into<String>, unit: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            unit: unit.into(),
            rows: Vec::new(),
        }
    }

    /// The row of `label` in `group`, made if missing.
    pub fn row(&mut self, group: &str, label: &str, system: System) -> &mut Row {
        let i = match self
            .rows
            .iter()
            .position(|r| r.group == group && r.label == label)
        {
            Some(i) => i,
            None => {
                self.rows.push(Row {
                    group: group.to_owned(),
                    label: label.to_owned(),
                    system,
                    values: Vec::new(),
                    note: String::new(),
                    errors: 0,
                });
                self.rows.len() - 1
            }
        };
        &mut self.rows[i]
    }

    /// The table as markdown.
    pub fn render(&self) -> String {
        let rounds = self.rows.iter().map(|r| r.values.len()).max().unwrap_or(0);
        let notes = self.rows.iter().any(|r| !r.note.is_empty());
        let mut out = format!("### {} ({})\n\n| | system |", self.title, self.unit);
        let mut rule = String::from("|---|---|");
        for r in 0..rounds {
            out += &format!(" r{} |", r + 1);
            rule += "---:|";
        }
        out += " median | toolgraft/rmcp | toolgraft/tower-mcp |";
        rule += "---:|---:|---:|";
        if notes {
            out += " note |";
            rule += "---|";
        }
        out += "\n";
        out += &rule;
        out += "\n";
        for row in &self.rows {
            let m = median(&row.values);
            out += &format!("| {} | {} |", row.group, row.label);
            for r in 0..rounds {
                out += &format!(
                    " {} |",
                    row.values.get(r).map_or(String::new(), |v| num(*v))
                );
            }
            out += &format!(" **{}** |", num(m));
            for peer in [System::Rmcp, System::TowerMcp] {
                let ratio = (row.system == System::Toolgraft)
                    .then(|| self.peer_median(&row.group, peer))
                    .flatten()
                    .map_or(String::new(), |p| format!("{:.2}x", m / p));
                out += &format!(" {ratio} |");
            }
            if notes {
                out += &format!(" {} |", row.note);
            }
            out += "\n";
        }
        out
    }

    fn peer_median(&self, group: &str, peer: System) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.group == group && r.system == peer)
            .map(|r| median(&r.values))
    }
}

/// A number at a precision fit for its size.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".to_owned()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

//! The columns `mpio top` shows, shared by the live view and `--once`:
//! a map's row (its paths' total) and a path's row, as cells of text,
//! and the orders the rows can be sorted in.

use super::sample::Row;

/// The maps table's header.
pub const MAP_HEADER: [&str; 9] = [
    "MAP", "PATHS", "IOPS", "MB/s", "P50us", "P99us", "INFL", "ERR", "HEDGE",
];

/// The paths table's header.
pub const PATH_HEADER: [&str; 11] = [
    "PATH", "DM", "CHECK", "ACCESS", "IOPS", "MB/s", "P50us", "P99us", "INFL", "ERR", "HEDGE",
];

/// A map's cells; `up` of `paths` paths are active.
pub fn map_cells(total: &Row, up: usize, paths: usize) -> [String; 9] {
    let [iops, mb_per_s, p50, p99, in_flight, errors, hedged] = load_cells(total);
    [
        total.map.clone(),
        format!("{up}/{paths}"),
        iops,
        mb_per_s,
        p50,
        p99,
        in_flight,
        errors,
        hedged,
    ]
}

/// A path's cells.
pub fn path_cells(path: &Row) -> [String; 11] {
    let [iops, mb_per_s, p50, p99, in_flight, errors, hedged] = load_cells(path);
    [
        path.path.clone(),
        path.state.clone(),
        path.checker.clone(),
        short_access(&path.access).to_string(),
        iops,
        mb_per_s,
        p50,
        p99,
        in_flight,
        errors,
        hedged,
    ]
}

/// The load columns both tables end with: IOPS, MB/s, p50, p99, in
/// flight, errors, hedged reads.
fn load_cells(row: &Row) -> [String; 7] {
    [
        number(row.iops),
        number(row.mb_per_s),
        micros(row.p50_us),
        micros(row.p99_us),
        row.in_flight.to_string(),
        row.errors.to_string(),
        row.hedged.to_string(),
    ]
}

/// An access state in at most seven letters.
fn short_access(access: &str) -> &str {
    match access {
        "optimized" => "opt",
        "non-optimized" => "non-opt",
        "unavailable" => "unavail",
        "inaccessible" => "inacces",
        "transitioning" => "transit",
        other => other,
    }
}

/// A rate: whole above 100, one decimal below.
fn number(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn micros(value: Option<f64>) -> String {
    value.map_or("-".into(), number)
}

/// How rows are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// As the daemon lists them (maps by name, paths in table order).
    Listed,
    Iops,
    P99,
    Errors,
}

impl Order {
    /// The next order, for the `s` key.
    pub fn next(self) -> Order {
        match self {
            Order::Listed => Order::Iops,
            Order::Iops => Order::P99,
            Order::P99 => Order::Errors,
            Order::Errors => Order::Listed,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Order::Listed => "listed",
            Order::Iops => "IOPS",
            Order::P99 => "p99",
            Order::Errors => "errors",
        }
    }

    /// Sorts `items` by this order of the row `row` gives for each, the
    /// largest first (stable: ties keep the daemon's order).
    pub fn sort<T>(self, items: &mut [T], row: impl Fn(&T) -> &Row) {
        let key = |item: &T| {
            let row = row(item);
            match self {
                Order::Listed => 0.0,
                Order::Iops => row.iops,
                Order::P99 => row.p99_us.unwrap_or(0.0),
                Order::Errors => row.errors as f64,
            }
        };
        items.sort_by(|a, b| key(b).total_cmp(&key(a)));
    }
}

/// `rows` as text: left-aligned columns two spaces apart.
pub fn align<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let header = header.map(String::from);
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

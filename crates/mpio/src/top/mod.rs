//! `mpio top`: the daemon's maps and paths live, like `top` or
//! `iostat -x 1`: per map and per path the IOPS, MB/s, latency p50 and
//! p99, I/O in flight, errors and hedged reads of the last interval, with
//! each path's dm state, checker verdict and ALUA/ANA access state.
//!
//! It reads `show paths --json` from the control socket once per
//! interval (`sample.rs` turns two readings into rows; `table.rs` holds
//! the columns; `screen.rs` draws them with ratatui). Keys: Tab and
//! Shift-Tab (or the arrows) pick the map whose paths are shown, `s`
//! cycles the order (listed, IOPS, p99, errors), `q` or Esc quits.
//! `--once` prints one interval as plain text instead. A daemon that
//! cannot be reached, at the start or at any later reading, ends `mpio
//! top` with that error and a non-zero status (the terminal restored).

mod sample;
mod screen;
mod table;

use crate::control_cmd::ControlArgs;
use sample::{rows, Row, Sample};
use std::path::Path;
use std::time::{Duration, Instant};
use table::{align, map_cells, path_cells, Order, MAP_HEADER, PATH_HEADER};

/// Arguments of `mpio top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Seconds between readings (0.1 to 3600).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    interval: f64,
    /// Print one interval as plain text and exit.
    #[arg(long)]
    once: bool,
    /// The map whose paths are shown first (default: the first).
    #[arg(long)]
    map: Option<String>,
    #[command(flatten)]
    control: ControlArgs,
}

/// Runs `mpio top`.
pub fn main(args: &TopArgs) -> Result<(), String> {
    if !(0.1..=3600.0).contains(&args.interval) {
        return Err(format!(
            "--interval {}: not between 0.1 and 3600 seconds",
            args.interval
        ));
    }
    let interval = Duration::from_secs_f64(args.interval);
    let socket = args.control.socket();
    let first = read(&socket)?;
    if let Some(map) = &args.map {
        if !first.paths.iter().any(|path| &path.map == map) {
            return Err(format!("no map {map:?} in the daemon"));
        }
    }
    if args.once {
        std::thread::sleep(interval);
        let latest = read(&socket)?;
        print!("{}", plain(&rows(&first, &latest)));
        return Ok(());
    }
    let mut view = View {
        socket: &socket,
        interval,
        selected: args.map.clone(),
        order: Order::Listed,
    };
    let mut terminal = ratatui::try_init().map_err(|error| format!("the terminal: {error}"))?;
    let outcome = view.run(&mut terminal, first);
    ratatui::restore();
    outcome
}

/// One reading, its error said as the daemon's absence.
fn read(socket: &Path) -> Result<Sample, String> {
    Sample::take(socket).map_err(|error| format!("the daemon at {}: {error}", socket.display()))
}

/// `rows` as `--once` prints them: the maps, then every map's paths.
fn plain(rows: &[Row]) -> String {
    let maps: Vec<[String; 9]> = maps(rows)
        .map(|(total, paths)| {
            let up = paths.iter().filter(|path| path.state == "active").count();
            map_cells(total, up, paths.len())
        })
        .collect();
    let paths: Vec<[String; 11]> = rows
        .iter()
        .filter(|row| !row.path.is_empty())
        .map(|row| {
            let mut cells = path_cells(row);
            cells[0] = format!("{}/{}", row.map, row.path);
            cells
        })
        .collect();
    format!(
        "{}\n{}",
        align(MAP_HEADER, &maps),
        align(PATH_HEADER, &paths)
    )
}

/// Each map's total row and its paths' rows.
fn maps(rows: &[Row]) -> impl Iterator<Item = (&Row, &[Row])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let total = rows.get(at)?;
        let paths = rows[at + 1..]
            .iter()
            .take_while(|row| !row.path.is_empty())
            .count();
        let map = (total, &rows[at + 1..at + 1 + paths]);
        at += 1 + paths;
        Some(map)
    })
}

/// The live view's state.
struct View<'a> {
    socket: &'a Path,
    interval: Duration,
    /// The map whose paths are shown (`None`: the first).
    selected: Option<String>,
    order: Order,
}

impl View<'_> {
    /// Draws, reads every interval and answers keys until `q`, or until
    /// a reading fails.
    fn run(
        &mut self,
        terminal: &mut ratatui::DefaultTerminal,
        first: Sample,
    ) -> Result<(), String> {
        use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
        let mut before = first.clone();
        let mut shown = rows(&first, &first);
        let mut measured = false;
        let mut next = first.at + self.interval;
        loop {
            terminal
                .draw(|frame| screen::draw(frame, self, &shown, measured))
                .map_err(|error| format!("the terminal: {error}"))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait).map_err(|error| format!("the terminal: {error}"))? {
                if let Event::Key(key) =
                    event::read().map_err(|error| format!("the terminal: {error}"))?
                {
                    if key.kind != KeyEventKind::Press {
                        continue;
                    }
                    match key.code {
                        KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                            return Ok(())
                        }
                        KeyCode::Tab | KeyCode::Right | KeyCode::Down => self.step(&shown, 1),
                        KeyCode::BackTab | KeyCode::Left | KeyCode::Up => self.step(&shown, -1),
                        KeyCode::Char('s') => self.order = self.order.next(),
                        _ => {}
                    }
                }
                continue;
            }
            let latest = read(self.socket)?;
            shown = rows(&before, &latest);
            measured = true;
            next = latest.at + self.interval;
            before = latest;
        }
    }

    /// Moves the selection `by` maps in the shown order, wrapping.
    fn step(&mut self, rows: &[Row], by: isize) {
        let names = self.map_order(rows);
        let at = self.selected_in(&names);
        if names.is_empty() {
            return;
        }
        let count = names.len() as isize;
        let to = (at as isize + by).rem_euclid(count) as usize;
        self.selected = Some(names[to].clone());
    }

    /// Each map's total row and its paths' rows, in the shown order.
    fn ordered_maps<'r>(&self, rows: &'r [Row]) -> Vec<(&'r Row, &'r [Row])> {
        let mut maps: Vec<(&Row, &[Row])> = maps(rows).collect();
        self.order.sort(&mut maps, |(total, _)| total);
        maps
    }

    /// The maps' names in the shown order.
    fn map_order(&self, rows: &[Row]) -> Vec<String> {
        self.ordered_maps(rows)
            .into_iter()
            .map(|(total, _)| total.map.clone())
            .collect()
    }

    /// Where the selected map stands among `names` (the first when none
    /// is selected or it is gone).
    fn selected_in<T: AsRef<str>>(&self, names: &[T]) -> usize {
        self.selected
            .as_ref()
            .and_then(|selected| names.iter().position(|name| name.as_ref() == selected))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(map: &str, path: &str, iops: f64) -> Row {
        Row {
            map: map.into(),
            path: path.into(),
            state: if path.is_empty() { "map" } else { "active" }.into(),
            checker: "ready".into(),
            access: "optimized".into(),
            iops,
            mb_per_s: iops * 4096.0 / 1e6,
            p50_us: Some(12.5),
            p99_us: None,
            in_flight: 1,
            errors: 0,
            hedged: 0,
        }
    }

    #[test]
    fn once_prints_the_maps_then_every_path() {
        let rows = [
            row("m", "", 300.0),
            row("m", "a", 200.0),
            row("m", "b", 100.0),
            row("n", "", 0.0),
            row("n", "c", 0.0),
        ];
        let text = plain(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "MAP  PATHS  IOPS  MB/s  P50us  P99us  INFL  ERR  HEDGE"
        );
        assert_eq!(
            lines[1],
            "m    2/2    300   1.2   12.5   -      1     0    0"
        );
        assert_eq!(
            lines[2],
            "n    1/1    0.0   0.0   12.5   -      1     0    0"
        );
        assert!(lines[4].starts_with("PATH "), "{text}");
        assert!(lines[5].starts_with("m/a "), "{text}");
        assert!(lines[7].starts_with("n/c "), "{text}");
    }

    #[test]
    fn the_selection_follows_the_order_and_wraps() {
        let rows = [
            row("m", "", 100.0),
            row("m", "a", 100.0),
            row("n", "", 300.0),
            row("n", "c", 300.0),
        ];
        let socket = Path::new("/nonexistent");
        let mut view = View {
            socket,
            interval: Duration::from_secs(1),
            selected: None,
            order: Order::Listed,
        };
        view.step(&rows, 1);
        assert_eq!(view.selected.as_deref(), Some("n"));
        view.step(&rows, 1);
        assert_eq!(view.selected.as_deref(), Some("m"));
        view.order = Order::Iops;
        assert_eq!(view.map_order(&rows), ["n", "m"]);
        view.step(&rows, -1);
        assert_eq!(view.selected.as_deref(), Some("n"));
    }
}

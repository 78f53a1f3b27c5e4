//! The live view's screen: a title line, the maps (the selected one
//! highlighted, scrolled into view), the selected map's paths (failed
//! ones in red) and the keys, laid out to fit 80x24 and wider.

use super::sample::Row;
use super::table::{map_cells, path_cells, MAP_HEADER, PATH_HEADER};
use super::View;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Row as TableRow, Table, TableState};
use ratatui::Frame;

/// Column widths of the maps table and the paths table after the name,
/// which takes what is left of the line (one space between columns).
const MAP_WIDTHS: [u16; 8] = [5, 7, 6, 6, 6, 4, 3, 5];
const PATH_WIDTHS: [u16; 10] = [6, 7, 7, 7, 6, 6, 6, 4, 3, 5];

/// The most lines the maps table takes (its header included).
const MAP_LINES: u16 = 8;

/// Draws `rows` (`measured`: whether a whole interval lies behind them).
pub fn draw(frame: &mut Frame<'_>, view: &View<'_>, rows: &[Row], measured: bool) {
    let totals = view.ordered_maps(rows);
    let names: Vec<&str> = totals.iter().map(|(total, _)| total.map.as_str()).collect();
    let selected = view.selected_in(&names);
    let map_lines = (totals.len() as u16 + 1).clamp(2, MAP_LINES);
    let [title, map_area, paths_title, path_area, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(map_lines),
        Constraint::Length(1),
        Constraint::Min(2),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let state = if measured {
        ""
    } else {
        "  (first interval…)"
    };
    frame.render_widget(
        Line::from(format!(
            "mpio top  {}  every {:.1} s  order: {}{state}",
            view.socket.display(),
            view.interval.as_secs_f64(),
            view.order.label()
        ))
        .style(Style::new().add_modifier(Modifier::BOLD)),
        title,
    );

    let map_rows = totals.iter().map(|(total, paths)| {
        let up = paths.iter().filter(|path| path.state == "active").count();
        TableRow::new(map_cells(total, up, paths.len()))
    });
    let map_table = Table::new(map_rows, widths(&MAP_WIDTHS))
        .header(TableRow::new(MAP_HEADER).style(Style::new().add_modifier(Modifier::BOLD)))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut map_state = TableState::default().with_selected(Some(selected));
    frame.render_stateful_widget(map_table, map_area, &mut map_state);

    let Some((total, paths)) = totals.get(selected) else {
        frame.render_widget(Line::from("the daemon serves no map"), paths_title);
        return;
    };
    frame.render_widget(
        Line::from(format!("paths of {}", total.map))
            .style(Style::new().add_modifier(Modifier::BOLD)),
        paths_title,
    );
    let mut ordered: Vec<&Row> = paths.iter().collect();
    view.order.sort(&mut ordered, |path| path);
    let name_width = name_width(path_area.width, &PATH_WIDTHS);
    let path_rows = ordered.into_iter().map(|path| {
        let style = if path.state == "active" {
            Style::new()
        } else {
            Style::new().fg(Color::Red)
        };
        let mut cells = path_cells(path);
        cells[0] = tail(&cells[0], name_width);
        TableRow::new(cells).style(style)
    });
    let path_table = Table::new(path_rows, widths(&PATH_WIDTHS))
        .header(TableRow::new(PATH_HEADER).style(Style::new().add_modifier(Modifier::BOLD)));
    frame.render_widget(path_table, path_area);
    frame.render_widget(Line::from("Tab/arrows: map   s: order   q: quit"), keys);
}

/// The name column (what the others leave) and the others.
fn widths(others: &[u16]) -> Vec<Constraint> {
    std::iter::once(Constraint::Min(8))
        .chain(others.iter().copied().map(Constraint::Length))
        .collect()
}

/// What the name column gets of a line `width` wide.
fn name_width(width: u16, others: &[u16]) -> usize {
    let taken: u16 = others.iter().sum::<u16>() + others.len() as u16;
    usize::from(width.saturating_sub(taken).max(8))
}

/// `name` in `width` characters: its end, where paths to one device
/// differ (`...#a`, `...#b`), behind an ellipsis when it is longer.
fn tail(name: &str, width: usize) -> String {
    let count = name.chars().count();
    if count <= width {
        return name.to_string();
    }
    let kept: String = name.chars().skip(count - (width - 1)).collect();
    format!("…{kept}")
}

//! The kernel as the oracle for canonical table printing: every dm-multipath
//! feature word and combination (each in dm's order and reversed, edge
//! values, repeats, bad values), as Linux 6.12's dm printed each table back
//! or refused it (`tests/fixtures/dm_table_oracle.txt`, recorded in a QEMU
//! guest by `tests/fixtures/dm_table_oracle.sh`). mpio's canonical form must
//! print the same line, and refuse what dm refused.
#![cfg(not(loom))]

use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;

const FIXTURE: &str = include_str!("fixtures/dm_table_oracle.txt");

/// mpio's canonical print of `input`, or `None` if it refuses it.
fn canonical(input: &str) -> Option<String> {
    let table = Table::parse(input).ok()?;
    let canonical = table.canonical(&NumaTopology::default()).ok()?;
    Some(canonical.to_string())
}

#[test]
fn canonical_tables_print_as_the_kernel_prints_them() {
    let mut lines = FIXTURE.lines().filter(|line| !line.starts_with('#'));
    let mut checked = 0;
    let mut wrong = Vec::new();
    while let Some(input) = lines.next() {
        let input = input.strip_prefix("IN|").expect("an IN line");
        let answer = lines.next().expect("an OUT or ERR line after IN");
        let expected = match answer {
            "ERR" => None,
            out => Some(out.strip_prefix("OUT|").expect("OUT|table").to_string()),
        };
        let got = canonical(input);
        if got != expected {
            wrong.push(format!(
                "{input}\n  kernel: {expected:?}\n  mpio:   {got:?}"
            ));
        }
        checked += 1;
    }
    assert!(checked >= 130, "only {checked} cases in the fixture");
    assert!(
        wrong.is_empty(),
        "{} of {checked} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

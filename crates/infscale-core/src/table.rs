//! The one table writer behind every table the CLI prints, so that each figure stands under its
//! heading whatever the widths: every column is as wide as its widest cell (the heading
//! included), text is aligned left and numbers right, two spaces apart.
//!
//! A name too long for a column (a policy string runs to 90 characters) is shown by a short
//! name, and [`Names::key`] lists the full strings below the table, keyed by that name.

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: names, kinds, words.
    Left,
    /// Numbers, with or without their unit.
    Right,
}

/// A table: headings and rows of cells, rendered with [`Table::render`].
#[derive(Debug, Clone)]
pub struct Table {
    headings: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
    /// Whether the headings are printed (a key or a list of labelled lines has none).
    show_headings: bool,
}

/// The space between two columns.
const GAP: &str = "  ";

impl Table {
    /// A table with these columns, each a heading and how its cells are aligned.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Table {
        let (headings, aligns) = columns.into_iter().map(|(h, a)| (h.into(), a)).unzip();
        Table {
            headings,
            aligns,
            rows: Vec::new(),
            show_headings: true,
        }
    }

    /// A table of `aligns.len()` columns printed without a heading line.
    pub fn headless(aligns: &[Align]) -> Table {
        let mut t = Table::new(aligns.iter().map(|a| (String::new(), *a)));
        t.show_headings = false;
        t
    }

    /// Adds a column on the right (its cells empty in the rows already added).
    pub fn column(&mut self, heading: impl Into<String>, align: Align) {
        self.headings.push(heading.into());
        self.aligns.push(align);
    }

    /// Adds a row; missing cells are empty, cells beyond the columns are dropped.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Adds a cell at the end of the last row (for a column added after it).
    pub fn push_cell(&mut self, cell: impl Into<String>) {
        if let Some(last) = self.rows.last_mut() {
            last.push(cell.into());
        }
    }

    /// Sets the cell of row `row` (from 0) in column `col`, the cells before it empty if unset;
    /// nothing when there is no such row.
    pub fn set(&mut self, row: usize, col: usize, cell: impl Into<String>) {
        if let Some(r) = self.rows.get_mut(row) {
            if r.len() <= col {
                r.resize(col + 1, String::new());
            }
            r[col] = cell.into();
        }
    }

    /// Each column's width: its widest cell, the heading included when shown.
    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self
            .headings
            .iter()
            .map(|h| if self.show_headings { width(h) } else { 0 })
            .collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        widths
    }

    /// The lines of the table, each ending in a newline, with no trailing spaces.
    pub fn render(&self) -> String {
        let widths = self.widths();
        let mut out = String::new();
        let headings = self.show_headings.then_some(&self.headings);
        for row in headings.into_iter().chain(&self.rows) {
            let mut line = String::new();
            for (i, (w, align)) in widths.iter().zip(&self.aligns).enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                let pad = " ".repeat(w.saturating_sub(width(cell)));
                if i > 0 {
                    line.push_str(GAP);
                }
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The width of a cell on a terminal: its characters.
fn width(cell: &str) -> usize {
    cell.chars().count()
}

/// The longest name a table shows as itself; a longer one gets a short name.
pub const MAX_NAME: usize = 32;

/// Names as a table shows them: each itself when short, else a short name, with the key from
/// each short name to its full string.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    /// The name each row shows, in the order given.
    pub shown: Vec<String>,
    /// The short names given and the full strings they stand for, in order of first use.
    pub keyed: Vec<(String, String)>,
}

impl Names {
    /// Names for `full`: a name up to [`MAX_NAME`] characters is shown as itself; a longer one
    /// by its role in `roles` (pairs of short name and full string) when it has one, else by its
    /// number among the long ones (`#1`, `#2`, ...). The same full string gets the same name.
    pub fn of<'a>(full: impl IntoIterator<Item = &'a str>, roles: &[(&str, &str)]) -> Names {
        let mut names = Names::default();
        let mut numbered = 0;
        for name in full {
            if width(name) <= MAX_NAME {
                names.shown.push(name.to_owned());
                continue;
            }
            if let Some((short, _)) = names.keyed.iter().find(|(_, f)| f == name) {
                names.shown.push(short.clone());
                continue;
            }
            let short = match roles.iter().find(|(_, f)| *f == name) {
                Some((role, _)) => (*role).to_owned(),
                None => {
                    numbered += 1;
                    format!("#{numbered}")
                }
            };
            names.shown.push(short.clone());
            names.keyed.push((short, name.to_owned()));
        }
        names
    }

    /// Every name given its short name, whatever its length (a table whose rows are known by
    /// their role).
    pub fn always<'a>(full: impl IntoIterator<Item = &'a str>, short: &[String]) -> Names {
        let mut names = Names::default();
        for (name, s) in full.into_iter().zip(short) {
            names.shown.push(s.clone());
            if !names.keyed.iter().any(|(k, _)| k == s) {
                names.keyed.push((s.clone(), name.to_owned()));
            }
        }
        names
    }

    /// The lines below a table that give each short name's full string (none when no name was
    /// shortened).
    pub fn key(&self) -> String {
        let mut t = Table::headless(&[Align::Left, Align::Left]);
        for (short, full) in &self.keyed {
            t.row([format!("{short}:"), full.clone()]);
        }
        t.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut t = Table::new([("policy", Align::Left), ("miss %", Align::Right)]);
        t.row(["a-long-name", "0.3%"]);
        t.row(["b", "12.5%"]);
        assert_eq!(
            t.render(),
            "policy       miss %\na-long-name    0.3%\nb             12.5%\n"
        );
    }

    #[test]
    fn a_heading_wider_than_its_cells_sets_the_width_and_trailing_spaces_go() {
        let mut t = Table::new([("x", Align::Right), ("replica-min", Align::Right)]);
        t.row(["1", "2.0"]);
        t.row(["10"]);
        assert_eq!(t.render(), " x  replica-min\n 1          2.0\n10\n");
    }

    #[test]
    fn a_column_added_later_and_headless_tables() {
        let mut t = Table::new([("a", Align::Left)]);
        t.row(["one"]);
        t.column("b", Align::Right);
        t.push_cell("2");
        t.row(["two"]);
        t.set(1, 1, "3");
        t.set(9, 1, "none");
        assert_eq!(t.render(), "a    b\none  2\ntwo  3\n");
        let mut h = Table::headless(&[Align::Left, Align::Left]);
        h.row(["k:", "v"]);
        h.row(["long:", "w"]);
        assert_eq!(h.render(), "k:     v\nlong:  w\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut t = Table::new([("µ", Align::Right), ("b", Align::Left)]);
        t.row(["µµ", "x"]);
        assert_eq!(t.render(), " µ  b\nµµ  x\n");
    }

    #[test]
    fn long_names_get_their_role_or_a_number_and_a_key() {
        let long = "x".repeat(MAX_NAME + 1);
        let other = "y".repeat(MAX_NAME + 5);
        let n = Names::of(
            ["short", long.as_str(), other.as_str(), long.as_str()],
            &[("recommended", other.as_str())],
        );
        assert_eq!(n.shown, ["short", "#1", "recommended", "#1"]);
        assert_eq!(
            n.key(),
            format!("#1:           {long}\nrecommended:  {other}\n")
        );
        assert_eq!(Names::of(["a", "b"], &[]).key(), "");
    }

    #[test]
    fn names_by_role_whatever_their_length() {
        let n = Names::always(["q:1", "q:1"], &["demo".into(), "demo".into()]);
        assert_eq!(n.shown, ["demo", "demo"]);
        assert_eq!(n.keyed, [("demo".to_owned(), "q:1".to_owned())]);
    }
}

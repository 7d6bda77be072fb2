//! `--color`: whether what infscale writes carries terminal colour codes.
//!
//! Only the logs of `serve`, the activator and `emulate` are coloured (tracing's levels). A log
//! redirected to a file or collected from a container must not carry escape codes, so the
//! default colours only a terminal, and not even that when `NO_COLOR` is set (no-color.org).

use std::io::IsTerminal;
use std::sync::OnceLock;

/// When to colour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    Always,
    Never,
}

impl Color {
    /// Whether to colour a stream that is (or is not) a terminal, `NO_COLOR` given or not.
    pub fn enabled(self, terminal: bool, no_color: bool) -> bool {
        match self {
            Color::Auto => terminal && !no_color,
            Color::Always => true,
            Color::Never => false,
        }
    }
}

static CHOICE: OnceLock<Color> = OnceLock::new();

/// Records the command line's choice, once, before anything is written.
pub fn choose(color: Color) {
    let _ = CHOICE.set(color);
}

/// Whether the logs on stderr carry colour.
pub fn logs() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    CHOICE
        .get()
        .copied()
        .unwrap_or_default()
        .enabled(std::io::stderr().is_terminal(), no_color)
}

#[cfg(test)]
mod tests {
    use super::Color;

    #[test]
    fn auto_colours_only_a_terminal_without_no_color() {
        assert!(Color::Auto.enabled(true, false));
        assert!(!Color::Auto.enabled(false, false));
        assert!(!Color::Auto.enabled(true, true));
        assert!(Color::Always.enabled(false, true));
        assert!(!Color::Never.enabled(true, false));
    }
}

//! The manual pages: `jitterscope(1)` and one page per command (`jitterscope-noise(1)`,
//! …), as git and cargo have, made by clap_mangen from the very clap definitions that
//! `--help` prints, so that `man jitterscope-CMD` and `jitterscope help CMD` list the
//! same options. `jitterscope man [CMD]` prints one; `jitterscope man --dir DIR` writes
//! them all (scripts/build-deb packs them).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;

/// Why a page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ManualError {
    /// No command of that name has a page.
    #[error("no manual page for '{0}': the commands are {1}")]
    NoSuchCommand(String, String),
    /// Writing the page failed (stdout closed, the directory unwritable).
    #[error("{path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// One manual page: its name (`jitterscope-noise`) and its roff text.
pub struct Page {
    pub name: String,
    pub roff: Vec<u8>,
}

/// The command tree the pages are made from: clap's own, built (which names each
/// subcommand `jitterscope-CMD`), without clap's `help` subcommand, which has no page.
fn command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// The commands that have a page of their own, in the order `--help` lists them.
pub fn commands() -> Vec<String> {
    command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect()
}

/// The page of `sub` (None: `jitterscope(1)`).
pub fn page(sub: Option<&str>) -> Result<Page, ManualError> {
    let root = command();
    let Some(name) = sub else {
        return Ok(render(root.clone(), &root, false));
    };
    match root.find_subcommand(name).filter(|s| !s.is_hide_set()) {
        Some(cmd) => Ok(render(cmd.clone(), &root, true)),
        None => Err(ManualError::NoSuchCommand(
            name.to_string(),
            commands().join(", "),
        )),
    }
}

/// Every page: `jitterscope(1)` first, then one per command.
pub fn pages() -> Vec<Page> {
    let root = command();
    let mut out = vec![render(root.clone(), &root, false)];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.push(render(sub.clone(), &root, true));
    }
    out
}

/// The guide page (under docs/guide/) that holds a command's examples and figures:
/// `completions` and `man` share one.
pub fn guide_page(command: &str) -> String {
    match command {
        "man" => "completions.md".to_string(),
        _ => format!("{command}.md"),
    }
}

/// Writes every page into `dir` as NAME.1; their paths.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, ManualError> {
    let mut written = Vec::new();
    for page in pages() {
        let path = dir.join(format!("{}.1", page.name));
        std::fs::write(&path, &page.roff).map_err(|source| ManualError::Write {
            path: path.display().to_string(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Prints one page on stdout.
pub fn print(sub: Option<&str>) -> Result<(), ManualError> {
    let page = page(sub)?;
    std::io::stdout()
        .write_all(&page.roff)
        .map_err(|source| ManualError::Write {
            path: "stdout".into(),
            source,
        })
}

/// clap_mangen's page, then SEE ALSO: the top page for a command's page, and the guide
/// page that holds the command's examples and figures.
fn render(cmd: clap::Command, root: &clap::Command, is_sub: bool) -> Page {
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let mut roff = Vec::new();
    // Rendering into memory cannot fail.
    let _ = clap_mangen::Man::new(cmd.clone())
        .source(format!("jitterscope {}", crate::LONG_VERSION))
        .manual("jitterscope manual")
        .render(&mut roff);
    let guide = match is_sub {
        true => guide_page(cmd.get_name()),
        false => "README.md".to_string(),
    };
    let mut also = String::from(".SH \"SEE ALSO\"\n");
    if is_sub {
        also.push_str(&format!("\\fB{}\\fR(1), ", root.get_name()));
    }
    also.push_str(&format!(
        "\\fBjitterscope help\\fR [COMMAND]; the guide: \
         /usr/share/doc/jitterscope/docs/guide/{guide} (docs/guide/{guide} in the source)\n"
    ));
    roff.extend_from_slice(also.as_bytes());
    Page { name, roff }
}

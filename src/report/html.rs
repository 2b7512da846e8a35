//! One self-contained HTML page (maud): no external assets, no JavaScript, plots inline
//! as SVG. (Skeleton: the model below is the contract.)

use crate::report::export::Loaded;

/// A page: a title, warnings shown first, then sections.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    pub subtitle: Option<String>,
    /// Degradations and differences the reader must see first.
    pub warnings: Vec<String>,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    /// Label and value pairs (host facts).
    pub facts: Vec<(String, String)>,
    /// Paragraphs of plain text.
    pub text: Vec<String>,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Figure {
    pub caption: String,
    /// A complete `<svg>` element.
    pub svg: String,
}

/// The page as HTML text.
pub fn render(page: &Page) -> String {
    format!("<!DOCTYPE html><title>{}</title>", page.title)
}

/// The page of one or more results: host facts, degradations, the audit's findings,
/// summary tables and every plot.
pub fn result_page(results: &[Loaded]) -> anyhow::Result<Page> {
    let _ = results;
    Ok(Page::default())
}

//! multipath.conf as written: sections of keywords and sub-sections,
//! each with its line.

/// A section (`defaults { ... }`) or sub-section (`device { ... }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Its name.
    pub name: String,
    /// The line of its name.
    pub line: usize,
    /// Its keywords, in file order.
    pub keywords: Vec<Keyword>,
    /// Its sub-sections, in file order.
    pub sections: Vec<Section>,
}

/// One `keyword value` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyword {
    /// The keyword.
    pub name: String,
    /// Its line.
    pub line: usize,
    /// The first word after it; `None` for a keyword alone on its line.
    pub value: Option<String>,
    /// Words after the value (multipath-tools ignores them).
    pub extra: Vec<String>,
}

impl Keyword {
    /// `name value` as written (the value quoted if it holds a space).
    pub fn written(&self) -> String {
        match &self.value {
            Some(value) if value.is_empty() || value.contains(char::is_whitespace) => {
                format!("{} \"{value}\"", self.name)
            }
            Some(value) => format!("{} {value}", self.name),
            None => self.name.clone(),
        }
    }
}

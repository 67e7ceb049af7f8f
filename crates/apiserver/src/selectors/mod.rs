//! Label and field selectors with the real server's syntax and matching rules.

mod fields;
mod labels;

pub use fields::{FieldSelector, FieldTerm};
pub use labels::{LabelSelector, Op, Requirement};

/// The label key and value syntax, shared with metadata validation.
pub mod labels_syntax {
    pub use super::labels::{valid_label_key, valid_label_value};
}

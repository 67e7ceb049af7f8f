use std::fmt;

/// Why an object was left out of the model: the object, the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// `Kind/name`, or the file when the object could not be read at all.
    pub object: String,
    /// The JSON path of the offending field (`spec.podCIDRs[1]`), empty when not one field.
    pub field: String,
    pub message: String,
}

impl Issue {
    pub fn new(
        object: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Issue {
        Issue {
            object: object.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{} {}: {}", self.object, self.field, self.message)
        }
    }
}

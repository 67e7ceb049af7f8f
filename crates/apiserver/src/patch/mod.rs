//! The three patch formats clients send: JSON merge (RFC 7386), strategic merge (with the
//! resource table's merge keys and the `$patch`, `$retainKeys`, `$setElementOrder` and
//! `$deleteFromPrimitiveList` directives), and JSON patch (RFC 6902).

mod json_patch;
mod merge;
mod strategic;

pub use json_patch::apply_json_patch;
pub use merge::apply_merge_patch;
pub use strategic::{apply_strategic_merge_patch, MergeKeys};

/// The `Content-Type` of a PATCH request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

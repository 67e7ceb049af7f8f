//! Who holds a reservation: a CNI attachment, `(CNI_CONTAINERID, CNI_IFNAME)`.

use crate::error::StoreError;

/// The CNI attachment a reservation belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    pub container_id: String,
    pub ifname: String,
}

/// Container ids are bounded so that an owner's index file name fits the 255-byte limit
/// of file names; runtimes use 64 hex digits.
const MAX_CONTAINER_ID_LEN: usize = 200;
const MAX_IFNAME_LEN: usize = 15;

impl Owner {
    pub fn new(container_id: impl Into<String>, ifname: impl Into<String>) -> Owner {
        Owner {
            container_id: container_id.into(),
            ifname: ifname.into(),
        }
    }

    /// Checks the owner against the CNI spec's rules for `CNI_CONTAINERID` (an
    /// alphanumeric followed by alphanumerics, `_`, `.` or `-`) and `CNI_IFNAME` (at most
    /// 15 bytes; not `.` or `..`; no `/`, `:` or whitespace). These rules are what make
    /// `<containerId>@<ifname>` a safe, unambiguous file name.
    pub fn validate(&self) -> Result<(), StoreError> {
        let invalid = |reason: String| Err(StoreError::InvalidOwner { reason });
        let id = self.container_id.as_str();
        let id_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !id_ok {
            return invalid(format!(
                "container id {id:?} must start with a letter or digit and contain only letters, digits, '_', '.', '-'"
            ));
        }
        if id.len() > MAX_CONTAINER_ID_LEN {
            return invalid(format!(
                "container id is {} bytes, more than {MAX_CONTAINER_ID_LEN}",
                id.len()
            ));
        }
        let ifname = self.ifname.as_str();
        let ifname_ok = !ifname.is_empty()
            && ifname.len() <= MAX_IFNAME_LEN
            && ifname != "."
            && ifname != ".."
            && !ifname
                .chars()
                .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace());
        if !ifname_ok {
            return invalid(format!(
                "interface name {ifname:?} must be 1-{MAX_IFNAME_LEN} bytes, not '.' or '..', without '/', ':' or whitespace"
            ));
        }
        Ok(())
    }

    /// The owner's index file name: `<container id>@<ifname>`. Unambiguous because a valid
    /// container id never contains `@`; only meaningful for a validated owner.
    pub(crate) fn file_key(&self) -> String {
        format!("{}@{}", self.container_id, self.ifname)
    }

    /// The owner a [`Owner::file_key`] names, if it names a valid one.
    pub(crate) fn from_file_key(key: &str) -> Option<Owner> {
        let (container_id, ifname) = key.split_once('@')?;
        let owner = Owner::new(container_id, ifname);
        owner.validate().ok().map(|()| owner)
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.container_id, self.ifname)
    }
}

//! GC input: the attachments that are still valid (`cni.dev/valid-attachments`).

use serde_json::{json, Value};

use crate::json::{self, FieldResult, Obj};

/// The spec's key.
pub const VALID_ATTACHMENTS_KEY: &str = "cni.dev/valid-attachments";
/// The name libcni also sends, because an earlier spec text used it (containernetworking/cni#1101).
pub const LEGACY_ATTACHMENTS_KEY: &str = "cni.dev/attachments";

/// One still-valid attachment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GcAttachment {
    /// `CNI_CONTAINERID` given at ADD.
    pub container_id: String,
    /// `CNI_IFNAME` given at ADD.
    pub ifname: String,
}

impl GcAttachment {
    fn parse(obj: &Obj<'_>) -> FieldResult<Self> {
        Ok(GcAttachment {
            container_id: obj.req_str("containerID")?.to_owned(),
            ifname: obj.req_str("ifname")?.to_owned(),
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        json!({"containerID": self.container_id, "ifname": self.ifname})
    }
}

/// Reads the valid-attachment list from a config object.
///
/// `None` means the runtime sent no list at all: a GC implementation must then not treat every
/// attachment as stale (fail closed). libcni sends `null` when it has zero valid attachments,
/// so an explicit `null` is an empty list.
pub(crate) fn parse_valid_attachments(config: &Obj<'_>) -> FieldResult<Option<Vec<GcAttachment>>> {
    let key = [VALID_ATTACHMENTS_KEY, LEGACY_ATTACHMENTS_KEY]
        .into_iter()
        .find(|key| config.map.contains_key(*key));
    let Some(key) = key else {
        return Ok(None);
    };
    let Some(items) = config.opt_array(key)? else {
        return Ok(Some(Vec::new()));
    };
    let path = config.path_of(key);
    items
        .iter()
        .enumerate()
        .map(|(position, item)| GcAttachment::parse(&Obj::new(item, json::index(&path, position))?))
        .collect::<FieldResult<Vec<_>>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: Value) -> FieldResult<Option<Vec<GcAttachment>>> {
        parse_valid_attachments(&Obj::new(&value, "").unwrap())
    }

    #[test]
    fn absent_null_and_listed() {
        assert_eq!(read(json!({})).unwrap(), None);
        assert_eq!(
            read(json!({VALID_ATTACHMENTS_KEY: null})).unwrap(),
            Some(vec![])
        );
        let listed =
            read(json!({VALID_ATTACHMENTS_KEY: [{"containerID": "c1", "ifname": "eth0"}]}))
                .unwrap()
                .unwrap();
        assert_eq!(
            listed,
            vec![GcAttachment {
                container_id: "c1".into(),
                ifname: "eth0".into()
            }]
        );
        let legacy =
            read(json!({LEGACY_ATTACHMENTS_KEY: [{"containerID": "c2", "ifname": "net1"}]}))
                .unwrap()
                .unwrap();
        assert_eq!(legacy[0].container_id, "c2");
        assert_eq!(
            legacy[0].to_value(),
            json!({"containerID": "c2", "ifname": "net1"})
        );
    }

    #[test]
    fn malformed_lists_name_the_field() {
        for value in [
            json!({VALID_ATTACHMENTS_KEY: {}}),
            json!({VALID_ATTACHMENTS_KEY: [{"containerID": 1, "ifname": "eth0"}]}),
            json!({VALID_ATTACHMENTS_KEY: [{"containerID": "c"}]}),
            json!({VALID_ATTACHMENTS_KEY: ["c"]}),
        ] {
            let error = read(value).unwrap_err().into_cni(7);
            assert!(error.msg.contains(VALID_ATTACHMENTS_KEY), "{}", error.msg);
        }
    }
}

//! Create-only "review" kinds (`authentication.k8s.io/v1 tokenreviews`,
//! `authorization.k8s.io/v1 subjectaccessreviews`): a POST is answered, nothing is
//! stored. The default [`TableReviewer`] answers TokenReviews from the configured token
//! table and allows every SubjectAccessReview; a later RBAC stream plugs in its own.

use serde_json::{json, Value};

use crate::config::{Config, User};
use crate::error::ApiError;
use crate::resources::ResourceDef;

pub trait Reviewer: Send + Sync {
    /// Returns the review with its `status` filled.
    fn review(&self, def: &ResourceDef, body: Value, caller: &User) -> Result<Value, ApiError>;
}

pub struct TableReviewer {
    pub config: Config,
}

impl Reviewer for TableReviewer {
    fn review(
        &self,
        def: &ResourceDef,
        mut body: Value,
        _caller: &User,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} must be a JSON object",
                def.kind
            )));
        }
        match def.kind.as_str() {
            "TokenReview" => {
                let token = body["spec"]["token"].as_str().unwrap_or("");
                body["status"] = match self.config.tokens.get(token) {
                    Some(u) => {
                        json!({"authenticated": true, "user": {"username": u.name, "groups": u.groups}})
                    }
                    None => json!({"authenticated": false, "error": "invalid bearer token"}),
                };
            }
            "SubjectAccessReview" => {
                body["status"] =
                    json!({"allowed": true, "reason": "weft-apiserver allows every request"});
            }
            _ => {
                return Err(ApiError::method_not_allowed(format!(
                    "{} cannot be reviewed",
                    def.kind
                )))
            }
        }
        body["apiVersion"] = json!(def.api_version());
        body["kind"] = json!(def.kind);
        if !body["metadata"].is_object() {
            body["metadata"] = json!({});
        }
        body["metadata"]["creationTimestamp"] = Value::Null;
        Ok(body)
    }
}

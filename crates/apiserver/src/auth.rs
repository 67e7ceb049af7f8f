//! Authentication (bearer tokens from the configured table, an optional anonymous user)
//! and the authorization hook a later RBAC stream plugs into.

use crate::config::{Config, User};
use crate::error::{ApiError, Reason};
use crate::recorder::Attributes;

pub fn authenticate(config: &Config, authorization: Option<&str>) -> Result<User, ApiError> {
    let unauthorized = || ApiError::new(Reason::Unauthorized, "Unauthorized");
    match authorization {
        Some(h) => {
            let token = h
                .strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
                .map(str::trim)
                .ok_or_else(unauthorized)?;
            config.tokens.get(token).cloned().ok_or_else(unauthorized)
        }
        None => match &config.anonymous_user {
            Some(name) => Ok(User {
                name: name.clone(),
                groups: vec!["system:unauthenticated".into()],
            }),
            None => Err(unauthorized()),
        },
    }
}

/// Decides whether `user` may make the request. The default allows everything.
pub trait Authorizer: Send + Sync {
    fn allowed(&self, user: &User, attrs: &Attributes) -> bool;
}

pub struct AllowAll;

impl Authorizer for AllowAll {
    fn allowed(&self, _user: &User, _attrs: &Attributes) -> bool {
        true
    }
}

/// 403 in the real server's words.
pub fn forbidden(user: &User, a: &Attributes) -> ApiError {
    let message = if a.resource.is_empty() {
        format!(
            "forbidden: User \"{}\" cannot {} path \"{}\"",
            user.name, a.verb, a.path
        )
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let mut m = format!(
            "{} is forbidden: User \"{}\" cannot {} resource \"{}\" in API group \"{}\"",
            crate::error::qualified(&a.api_group, &resource),
            user.name,
            a.verb,
            resource,
            a.api_group
        );
        if !a.namespace.is_empty() {
            m.push_str(&format!(" in the namespace \"{}\"", a.namespace));
        } else {
            m.push_str(" at the cluster scope");
        }
        m
    };
    ApiError::new(Reason::Forbidden, message)
}

//! [`FileHydrator`]: per-user schemas from a JSON file read once, at construction.
//!
//! The file maps tool names to users to parameter schemas; `"*"` is any user without an entry of
//! their own: `{"SALESFORCE_CREATE_LEAD": {"alice@example.com": {..}, "*": {..}}}`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::Value;

use crate::{HydrateError, HydratedSchema, HydrationRequest, Hydrator};

/// The user key matching every user without an entry of their own.
const ANY_USER: &str = "*";

/// Schemas from a JSON file; useful for demos, tests and orgs whose custom fields rarely change.
#[derive(Debug)]
pub struct FileHydrator {
    path: PathBuf,
    tools: HashMap<String, HashMap<String, HydratedSchema>>,
}

impl FileHydrator {
    /// Reads and checks the file; every schema must be an object schema.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, HydrateError> {
        let path = path.into();
        let text = std::fs::read(&path)
            .map_err(|e| HydrateError::Config(format!("cannot read {}: {e}", path.display())))?;
        let raw: HashMap<String, HashMap<String, Value>> = serde_json::from_slice(&text)
            .map_err(|e| {
                HydrateError::Config(format!(
                    "{}: expected {{\"<tool>\": {{\"<user id>\" or \"*\": <parameters schema>}}}}: {e}",
                    path.display()
                ))
            })?;
        let mut tools = HashMap::with_capacity(raw.len());
        for (tool, users) in raw {
            let mut schemas = HashMap::with_capacity(users.len());
            for (user, parameters) in users {
                let schema = HydratedSchema::from_value(&parameters, None).map_err(|issue| {
                    HydrateError::Config(format!(
                        "{}: {tool}.{user}: not an object schema: {issue}",
                        path.display()
                    ))
                })?;
                schemas.insert(user, schema);
            }
            tools.insert(tool, schemas);
        }
        Ok(Self { path, tools })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema of `tool` for `user`: theirs, else the `"*"` one, else none.
    pub fn lookup(&self, tool: &str, user: &str) -> Option<&HydratedSchema> {
        let users = self.tools.get(tool)?;
        users.get(user).or_else(|| users.get(ANY_USER))
    }
}

#[async_trait]
impl Hydrator for FileHydrator {
    async fn hydrate(
        &self,
        req: &HydrationRequest,
    ) -> Result<Option<HydratedSchema>, HydrateError> {
        Ok(self.lookup(&req.tool, &req.user_id).cloned())
    }
}

//! `FileHydrator`: exact user, then `"*"`, then nothing; and the shipped demo file.

use std::collections::HashMap;
use std::path::PathBuf;

use agentsearch_hydrate::{FileHydrator, Hydrator};
use serde_json::{Value, json};

use crate::support::{request, unique_project};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn file_hydrator_prefers_the_exact_user_then_the_star() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hydration.json");
    let alice = json!({"type": "object", "properties": {"Region__c": {"type": "string"}}});
    let anyone = json!({"type": "object", "properties": {"Tier__c": {"type": "string"}}});
    let file = json!({
        "SALESFORCE_CREATE_LEAD": {"alice@example.com": alice, "*": anyone},
        "SALESFORCE_CREATE_ACCOUNT": {"alice@example.com": alice},
    });
    std::fs::write(&path, file.to_string()).unwrap();
    let hydrator = FileHydrator::open(&path).unwrap();
    let project = unique_project();

    let schema_of = |answer: Option<agentsearch_hydrate::HydratedSchema>| {
        answer.map(|s| serde_json::from_str::<Value>(&s.parameters_json).unwrap())
    };
    let lead = "SALESFORCE_CREATE_LEAD";
    let account = "SALESFORCE_CREATE_ACCOUNT";
    let answer = hydrator
        .hydrate(&request(&project, "alice@example.com", lead))
        .await
        .unwrap();
    assert_eq!(schema_of(answer), Some(alice.clone()));
    let answer = hydrator
        .hydrate(&request(&project, "bob@example.com", lead))
        .await
        .unwrap();
    assert_eq!(schema_of(answer), Some(anyone));
    let answer = hydrator
        .hydrate(&request(&project, "alice@example.com", account))
        .await
        .unwrap();
    assert_eq!(schema_of(answer), Some(alice));
    let answer = hydrator
        .hydrate(&request(&project, "bob@example.com", account))
        .await
        .unwrap();
    assert_eq!(answer, None);
    let answer = hydrator
        .hydrate(&request(&project, "alice@example.com", "OTHER"))
        .await
        .unwrap();
    assert_eq!(answer, None);
}

#[test]
fn file_hydrator_rejects_bad_files_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hydration.json");
    std::fs::write(&path, r#"{"T": {"bob": {"type": "string"}}}"#).unwrap();
    let err = FileHydrator::open(&path).unwrap_err().to_string();
    assert!(err.contains("T.bob: not an object schema"), "{err}");

    std::fs::write(&path, r#"["not", "a", "map"]"#).unwrap();
    let err = FileHydrator::open(&path).unwrap_err().to_string();
    assert!(err.contains("expected {\"<tool>\""), "{err}");

    let err = FileHydrator::open(dir.path().join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read"), "{err}");
}

/// Every schema of `demo/hydration.json` is the catalog's static schema of that tool plus custom
/// (`__c`) fields: the static properties are kept unchanged.
#[test]
fn demo_hydration_file_extends_the_catalog_schemas() {
    let root = workspace_root();
    let hydrator = FileHydrator::open(root.join("demo/hydration.json")).unwrap();
    let catalog: HashMap<String, Value> = std::fs::read_to_string(root.join("demo/catalog.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let tool: Value = serde_json::from_str(line).unwrap();
            (tool["name"].as_str().unwrap().to_string(), tool)
        })
        .collect();
    let file: HashMap<String, HashMap<String, Value>> =
        serde_json::from_str(&std::fs::read_to_string(root.join("demo/hydration.json")).unwrap())
            .unwrap();
    assert!(file.len() >= 2);
    for (tool, users) in &file {
        let entry = &catalog[tool.as_str()];
        assert_eq!(entry["integration"], "salesforce", "{tool}");
        let static_schema = &entry["parameters"];
        assert!(
            users.contains_key("alice@example.com") && users.contains_key("*"),
            "{tool}"
        );
        for (user, schema) in users {
            assert!(hydrator.lookup(tool, user).is_some());
            let properties = schema["properties"].as_object().unwrap();
            let static_properties = static_schema["properties"].as_object().unwrap();
            for (name, property) in static_properties {
                assert_eq!(properties.get(name), Some(property), "{tool}.{user}.{name}");
            }
            let custom: Vec<&String> = properties
                .keys()
                .filter(|name| !static_properties.contains_key(*name))
                .collect();
            assert!(!custom.is_empty(), "{tool}.{user}: no custom fields");
            assert!(
                custom.iter().all(|name| name.ends_with("__c")),
                "{tool}.{user}: {custom:?}"
            );
            for required in static_schema["required"].as_array().unwrap() {
                assert!(
                    schema["required"].as_array().unwrap().contains(required),
                    "{tool}.{user}"
                );
            }
            assert_eq!(
                schema["additionalProperties"],
                static_schema["additionalProperties"]
            );
        }
    }
}

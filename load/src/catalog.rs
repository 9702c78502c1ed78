//! A synthetic, reproducible tool catalog and matching queries: integrations named after made-up
//! apps, tools as verb + object over a vocabulary of business nouns, descriptions and parameters
//! assembled from templates.

use agentsearch_proto::v1 as pb;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

const VERBS: &[(&str, &str)] = &[
    ("list", "read"),
    ("get", "read"),
    ("search", "read"),
    ("find", "read"),
    ("export", "read"),
    ("create", "write"),
    ("update", "write"),
    ("archive", "write"),
    ("assign", "write"),
    ("merge", "write"),
    ("delete", "delete"),
    ("purge", "delete"),
    ("send", "send"),
    ("notify", "send"),
    ("share", "send"),
    ("sync", "unknown"),
];
const OBJECTS: &[&str] = &[
    "invoice",
    "customer",
    "contact",
    "deal",
    "ticket",
    "message",
    "channel",
    "file",
    "folder",
    "event",
    "meeting",
    "issue",
    "pull request",
    "branch",
    "order",
    "product",
    "refund",
    "payment",
    "subscription",
    "report",
    "dashboard",
    "task",
    "project",
    "comment",
    "note",
    "lead",
    "account",
    "campaign",
    "template",
    "webhook",
    "user",
    "team",
    "label",
    "milestone",
    "document",
    "page",
    "record",
    "shipment",
    "quote",
    "expense",
];
const QUALIFIERS: &[&str] = &[
    "by id",
    "for a date range",
    "with filters",
    "in bulk",
    "for the current user",
    "by email address",
    "in a workspace",
    "with attachments",
    "from a template",
    "by status",
    "with pagination",
    "by owner",
];
const CATEGORIES: &[&str] = &[
    "messaging",
    "email",
    "crm",
    "ticketing",
    "code_hosting",
    "storage",
    "calendar",
    "payments",
    "accounting",
    "marketing",
];
const SYLLABLES: &[&str] = &[
    "zen", "flo", "qua", "dri", "mo", "tix", "lum", "pa", "ver", "ko", "ra", "nex", "bli", "tor",
    "sa", "vo",
];
const PARAMS: &[&str] = &[
    "id",
    "name",
    "email",
    "status",
    "owner",
    "amount",
    "currency",
    "due_date",
    "start",
    "end",
    "limit",
    "cursor",
    "query",
    "title",
    "body",
    "priority",
    "tags",
    "folder_id",
    "channel_id",
    "notes",
];

pub struct Generator {
    integrations: Vec<(String, &'static str)>,
}

impl Generator {
    pub fn new(rng: &mut StdRng, count: usize) -> Self {
        let mut integrations = Vec::with_capacity(count);
        let mut seen = std::collections::HashSet::new();
        while integrations.len() < count {
            let parts = rng.random_range(2..=3);
            let name: String = (0..parts)
                .map(|_| *SYLLABLES.choose(rng).expect("non-empty"))
                .collect();
            let name = if seen.contains(&name) {
                format!("{name}{}", integrations.len())
            } else {
                name
            };
            seen.insert(name.clone());
            integrations.push((name, *CATEGORIES.choose(rng).expect("non-empty")));
        }
        Self { integrations }
    }

    pub fn tools(&self, rng: &mut StdRng, count: usize) -> Vec<pb::ToolDefinition> {
        let mut names = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let (integration, category) = &self.integrations[out.len() % self.integrations.len()];
            let (verb, effect) = *VERBS.choose(rng).expect("non-empty");
            let object = *OBJECTS.choose(rng).expect("non-empty");
            let qualifier = *QUALIFIERS.choose(rng).expect("non-empty");
            let mut name =
                format!("{}_{}_{}", integration, verb, object.replace(' ', "_")).to_uppercase();
            if !names.insert(name.clone()) {
                name = format!("{name}_{}", out.len());
                names.insert(name.clone());
            }
            let description = format!(
                "{} {} {} in {}. Returns the {} and its metadata; use it when the user asks to {} a {}.",
                capitalize(verb),
                if verb.ends_with('s') { "the" } else { "a" },
                object,
                integration,
                object,
                verb,
                object
            ) + &format!(" Works {qualifier}.");
            let n_params = rng.random_range(1..=6);
            let mut props = serde_json::Map::new();
            for p in PARAMS.choose_multiple(rng, n_params) {
                props.insert(
                    (*p).to_string(),
                    serde_json::json!({"type": if *p == "limit" || *p == "amount" { "integer" } else { "string" }, "description": format!("The {} of the {object}.", p.replace('_', " "))}),
                );
            }
            let parameters = serde_json::json!({"type": "object", "properties": props});
            out.push(pb::ToolDefinition {
                name,
                integration: integration.clone(),
                category: category.to_string(),
                side_effect: effect.to_string(),
                description,
                parameters_json: parameters.to_string(),
            });
        }
        out
    }

    /// A natural-language task mentioning an app some of the time.
    pub fn query(&self, rng: &mut StdRng) -> String {
        let (verb, _) = *VERBS.choose(rng).expect("non-empty");
        let object = *OBJECTS.choose(rng).expect("non-empty");
        let qualifier = *QUALIFIERS.choose(rng).expect("non-empty");
        if rng.random_bool(0.5) {
            let (integration, _) = self.integrations.choose(rng).expect("non-empty");
            format!("{verb} a {object} in {integration} {qualifier}")
        } else {
            format!("I need to {verb} the {object} {qualifier}")
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

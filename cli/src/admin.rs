//! `agentsearch admin`: operator commands over a router's REST API (`/admin/...`): where every
//! integration and sync is and how healthy its replicas are, draining and replacing shards,
//! rebalancing. Run it next to a router (e.g. `kubectl exec` into a router pod): a token is sent
//! over plain http to a loopback address only.

use agentsearch_router::agent::mcp::{Backend, Call, Remote};
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Args, Debug)]
pub struct AdminArgs {
    /// A router's REST address.
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:8080",
        env = "AGENTSEARCH_HTTP"
    )]
    pub http: String,
    /// The deployment's static token (`auth.token`), if it has one.
    #[arg(long, global = true, env = "AGENTSEARCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Shards, their replicas and health; with --keys every integration and sync; moves in
    /// progress; keys whose only replica was lost.
    Placements {
        /// One line per integration and sync, with the state of each replica.
        #[arg(long)]
        keys: bool,
        /// Print the JSON response.
        #[arg(long)]
        json: bool,
    },
    /// Empty a shard before removing it: no new placements, its replicas move to other shards
    /// (copied from a healthy replica) while reads and writes go on. Also replaces a shard that
    /// is gone for good.
    Drain {
        /// The shard's id (see `admin placements`).
        shard_id: String,
        /// Its data is gone: do not copy from it; keys it held alone are placed elsewhere empty
        /// and reported lost, to be written again.
        #[arg(long)]
        lost: bool,
    },
    /// Stop draining a shard: it takes new placements again (moves already under way finish).
    Undrain { shard_id: String },
    /// Move replicas from the most to the least loaded shards until they differ by one at most.
    Rebalance {
        /// Print the moves without making them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Forget the reports of lost keys (once their content was written again).
    ClearLost,
}

pub async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let remote = Remote::new(&args.http, args.token.is_some()).map_err(anyhow::Error::msg)?;
    let authorization = args.token.as_ref().map(|t| format!("Bearer {t}"));
    let call = |method: http::Method, path: String, body: Option<Value>| Call {
        method,
        path,
        authorization: authorization.clone(),
        body,
        host: None,
        origin: None,
    };
    match args.command {
        AdminCommand::Placements { keys, json } => {
            let view = send(
                &remote,
                call(http::Method::GET, "/admin/placements".into(), None),
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&view)?);
            } else {
                print!("{}", render_placements(&view, keys));
            }
        }
        AdminCommand::Drain { shard_id, lost } => {
            let body = serde_json::json!({"shardId": shard_id, "lost": lost});
            let view = send(
                &remote,
                call(http::Method::POST, "/admin/drains".into(), Some(body)),
            )
            .await?;
            println!(
                "draining {shard_id}{}: {} replicas to move; follow with `agentsearch admin placements`",
                if lost { " (data declared lost)" } else { "" },
                view["replicasLeft"]
            );
        }
        AdminCommand::Undrain { shard_id } => {
            let path = format!("/admin/drains/{}", encode(&shard_id));
            send(&remote, call(http::Method::DELETE, path, None)).await?;
            println!("{shard_id} takes new placements again");
        }
        AdminCommand::Rebalance { dry_run } => {
            let body = serde_json::json!({"dryRun": dry_run});
            let answer = send(
                &remote,
                call(http::Method::POST, "/admin/rebalance".into(), Some(body)),
            )
            .await?;
            let moves = answer["moves"].as_array().cloned().unwrap_or_default();
            for m in &moves {
                println!(
                    "{} {} {}: {} -> {}",
                    str_of(&m["projectId"]),
                    str_of(&m["kind"]),
                    str_of(&m["key"]),
                    str_of(&m["from"]),
                    str_of(&m["to"])
                );
            }
            println!(
                "{} moves {}",
                moves.len(),
                if dry_run {
                    "planned (dry run)"
                } else {
                    "recorded"
                }
            );
        }
        AdminCommand::ClearLost => {
            let answer = send(
                &remote,
                call(http::Method::DELETE, "/admin/lost".into(), None),
            )
            .await?;
            println!("{} lost-key reports cleared", answer["cleared"]);
        }
    }
    Ok(())
}

async fn send(remote: &Remote, call: Call) -> anyhow::Result<Value> {
    let (status, body) = remote.send(call).await.map_err(anyhow::Error::msg)?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let message = body["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| body.to_string());
    anyhow::bail!("{status}: {message}")
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Percent-encodes a path segment.
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The placements view as text tables.
pub fn render_placements(view: &Value, keys: bool) -> String {
    let mut out = String::new();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    out.push_str(&format!(
        "{:<38} {:<28} {:<10} {:<9} {:>8} {:>6} {:>5} {:>5}\n",
        "SHARD", "ADDRESS", "STATE", "REACHABLE", "REPLICAS", "STALE", "IN", "OUT"
    ));
    for s in list(&view["shards"]) {
        let state = if s["lost"].as_bool() == Some(true) {
            format!("{} (lost)", str_of(&s["state"]))
        } else {
            str_of(&s["state"])
        };
        out.push_str(&format!(
            "{:<38} {:<28} {:<10} {:<9} {:>8} {:>6} {:>5} {:>5}\n",
            str_of(&s["shardId"]),
            str_of(&s["address"]),
            state,
            if s["reachable"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            },
            s["replicas"],
            s["stale"],
            s["movingIn"],
            s["movingOut"]
        ));
    }
    let all_keys = list(&view["keys"]);
    let degraded = all_keys
        .iter()
        .filter(|k| {
            list(&k["replicas"])
                .iter()
                .any(|r| r["state"].as_str() != Some("healthy"))
        })
        .count();
    out.push_str(&format!(
        "\n{} integrations and syncs, {} with a replica that is not healthy\n",
        all_keys.len(),
        degraded
    ));
    if keys {
        out.push('\n');
        for k in &all_keys {
            let replicas: Vec<String> = list(&k["replicas"])
                .iter()
                .map(|r| format!("{}={}", str_of(&r["shardId"]), str_of(&r["state"])))
                .collect();
            out.push_str(&format!(
                "{} {} {}: {}\n",
                str_of(&k["projectId"]),
                str_of(&k["kind"]),
                str_of(&k["key"]),
                replicas.join(" ")
            ));
        }
    }
    let moves = list(&view["moves"]);
    if !moves.is_empty() {
        out.push_str(&format!("\n{} moves in progress\n", moves.len()));
        for m in &moves {
            out.push_str(&format!(
                "{} {} {}: {} -> {} ({}, {})\n",
                str_of(&m["projectId"]),
                str_of(&m["kind"]),
                str_of(&m["key"]),
                str_of(&m["from"]),
                str_of(&m["to"]),
                str_of(&m["reason"]),
                str_of(&m["step"])
            ));
        }
    }
    let lost = list(&view["lost"]);
    if !lost.is_empty() {
        out.push_str(&format!(
            "\n{} keys lost their only replica; write their content again (catalog load, record \
             upserts), then `agentsearch admin clear-lost`:\n",
            lost.len()
        ));
        for l in &lost {
            out.push_str(&format!(
                "{} {} {} (was on {})\n",
                str_of(&l["projectId"]),
                str_of(&l["kind"]),
                str_of(&l["key"]),
                str_of(&l["shardId"])
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Value {
        serde_json::json!({
            "shards": [
                {"shardId": "s-1", "address": "10.0.0.1:7001", "state": "serving", "reachable": true,
                 "replicas": 3, "stale": 0, "movingIn": 0, "movingOut": 1},
                {"shardId": "s-2", "address": "10.0.0.2:7001", "state": "draining", "lost": true,
                 "reachable": false, "replicas": 1, "stale": 1, "movingIn": 0, "movingOut": 1}
            ],
            "keys": [
                {"projectId": "p", "kind": "integration", "key": "gmail",
                 "replicas": [{"shardId": "s-1", "state": "healthy"}, {"shardId": "s-2", "state": "unreachable"}]},
                {"projectId": "p", "kind": "sync", "key": "sync-9",
                 "replicas": [{"shardId": "s-1", "state": "healthy"}]}
            ],
            "moves": [
                {"projectId": "p", "kind": "integration", "key": "gmail", "from": "s-2", "to": "s-3",
                 "reason": "drain", "step": "joining"}
            ],
            "lost": [
                {"projectId": "p", "kind": "sync", "key": "sync-7", "shardId": "s-2"}
            ]
        })
    }

    #[test]
    fn placements_render_shards_health_moves_and_lost_keys() {
        let text = render_placements(&view(), false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("SHARD"), "{text}");
        assert!(
            lines[1].starts_with("s-1") && lines[1].contains("serving") && lines[1].contains("yes"),
            "{text}"
        );
        assert!(
            lines[2].contains("draining (lost)") && lines[2].contains(" no "),
            "{text}"
        );
        assert!(
            text.contains("2 integrations and syncs, 1 with a replica that is not healthy"),
            "{text}"
        );
        assert!(!text.contains("gmail: s-1=healthy"), "{text}");
        assert!(
            text.contains("1 moves in progress\np integration gmail: s-2 -> s-3 (drain, joining)")
        );
        assert!(text.contains("1 keys lost their only replica"), "{text}");
        assert!(text.contains("p sync sync-7 (was on s-2)"), "{text}");
    }

    #[test]
    fn placements_with_keys_list_every_replica_state() {
        let text = render_placements(&view(), true);
        assert!(
            text.contains("p integration gmail: s-1=healthy s-2=unreachable\n"),
            "{text}"
        );
        assert!(text.contains("p sync sync-9: s-1=healthy\n"), "{text}");
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(encode("shard-1.a_b~"), "shard-1.a_b~");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }
}

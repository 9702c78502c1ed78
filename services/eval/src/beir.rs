//! The BEIR dataset layout: `corpus.jsonl` (`{_id, title, text, metadata}`), `queries.jsonl`
//! (`{_id, text}`) and `qrels/<split>.tsv` (`query-id<TAB>corpus-id<TAB>score` after a header).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::metrics::Judgments;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

#[derive(Clone, Debug, Deserialize)]
pub struct Doc {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub metadata: serde_json::Value,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Query {
    #[serde(rename = "_id")]
    pub id: String,
    pub text: String,
}

/// A dataset split: the corpus, the queries judged in the split (file order) and their judgments.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    pub split: String,
    pub corpus: Vec<Doc>,
    pub queries: Vec<Query>,
    pub qrels: HashMap<String, Judgments>,
}

impl Dataset {
    /// Loads `dir` for `split`; only queries with judgments in the split are kept.
    pub fn load(dir: &Path, split: &str) -> Result<Dataset, DatasetError> {
        let corpus: Vec<Doc> = read_jsonl(&dir.join("corpus.jsonl"))?;
        let qrels = read_qrels(&dir.join("qrels").join(format!("{split}.tsv")))?;
        let queries: Vec<Query> = read_jsonl::<Query>(&dir.join("queries.jsonl"))?
            .into_iter()
            .filter(|q| qrels.contains_key(&q.id))
            .collect();
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().to_string(),
        );
        Ok(Dataset {
            name,
            split: split.to_string(),
            corpus,
            queries,
            qrels,
        })
    }
}

fn read(path: &Path) -> Result<String, DatasetError> {
    std::fs::read_to_string(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, DatasetError> {
    read(path)?
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| DatasetError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

fn read_qrels(path: &Path) -> Result<HashMap<String, Judgments>, DatasetError> {
    let mut qrels: HashMap<String, Judgments> = HashMap::new();
    for (i, line) in read(path)?.lines().enumerate() {
        if line.trim().is_empty() || (i == 0 && line.starts_with("query-id")) {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let parse_error = |message: String| DatasetError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let [query, doc, score] = fields[..] else {
            return Err(parse_error(format!(
                "expected 3 tab-separated fields, got {}",
                fields.len()
            )));
        };
        let score: i64 = score
            .trim()
            .parse()
            .map_err(|_| parse_error(format!("score `{score}` is not an integer")))?;
        qrels
            .entry(query.to_string())
            .or_default()
            .insert(doc.to_string(), score.max(0) as u32);
    }
    Ok(qrels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_a_split_and_reports_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("qrels")).unwrap();
        std::fs::write(
            dir.path().join("corpus.jsonl"),
            "{\"_id\":\"d1\",\"title\":\"T\",\"text\":\"x\",\"metadata\":{}}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("queries.jsonl"),
            "{\"_id\":\"q1\",\"text\":\"a\"}\n{\"_id\":\"q2\",\"text\":\"b\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("qrels/test.tsv"),
            "query-id\tcorpus-id\tscore\nq2\td1\t1\n",
        )
        .unwrap();
        let d = Dataset::load(dir.path(), "test").unwrap();
        assert_eq!(d.corpus.len(), 1);
        assert_eq!(d.queries.len(), 1);
        assert_eq!(d.queries[0].id, "q2");
        assert_eq!(d.qrels["q2"]["d1"], 1);
        std::fs::write(
            dir.path().join("qrels/test.tsv"),
            "query-id\tcorpus-id\tscore\nq2\td1\n",
        )
        .unwrap();
        let err = Dataset::load(dir.path(), "test").unwrap_err().to_string();
        assert!(err.contains("test.tsv:2"), "{err}");
        assert!(Dataset::load(dir.path(), "nope").is_err());
    }
}

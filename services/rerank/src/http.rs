//! [`HttpReranker`]: asks a text-embeddings-inference (TEI) rerank endpoint.
//!
//! Request: `POST url` with `{"query": "..", "texts": [".."]}`. Answer: 200 with
//! `[{"index": i, "score": s}, ..]` in any order (other fields, such as `text`, are ignored), each
//! index of the texts exactly once. Another status, a refused or broken connection is
//! [`RerankError::Unavailable`]; an answer that is not that list, or not one finite score per
//! text, is [`RerankError::Malformed`]. `http://` or `https://` (rustls, the system's roots).

use std::time::Duration;

use agentsearch_hydrate::outbound::{self, BodyError, HttpClient};
use async_trait::async_trait;
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};

use crate::{RerankError, Reranker, Result};

/// Largest answer read from the reranker (TEI answers about 40 bytes per text).
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// Bytes of an error answer read to quote in the error, and the characters quoted.
const ERROR_BODY_BYTES: usize = 16 << 10;
const ERROR_BODY_CHARS: usize = 200;

/// A text-embeddings-inference rerank endpoint reached over HTTP or HTTPS, with keep-alive
/// connections.
pub struct HttpReranker {
    url: Uri,
    timeout: Duration,
    client: HttpClient,
}

/// Texts per request: text-embeddings-inference refuses more than its `max_client_batch_size`,
/// 32 unless its operator raised it. Larger lists go as several requests at once.
pub const TEXTS_PER_REQUEST: usize = 32;

#[derive(Serialize)]
struct RerankRequest<'a> {
    query: &'a str,
    texts: &'a [String],
    /// Texts longer than the model's input are cut rather than refused.
    truncate: bool,
}

/// One entry of TEI's answer.
#[derive(Deserialize)]
struct Ranked {
    index: usize,
    score: f64,
}

impl HttpReranker {
    /// A reranker at `url`, the endpoint's full URL (`http://tei:8080/rerank`). Every call,
    /// connection and TLS handshake included, takes at most `default_timeout`, or the shorter
    /// timeout the call is given (the caller's remaining deadline).
    pub fn new(url: &str, default_timeout: Duration) -> Result<Self> {
        let uri = outbound::endpoint(url).map_err(RerankError::Config)?;
        let client = outbound::client(None).map_err(RerankError::Config)?;
        Ok(Self {
            url: uri,
            timeout: default_timeout,
            client,
        })
    }

    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// The longest any call takes.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn call(&self, body: Vec<u8>, texts: usize) -> Result<Vec<f32>> {
        let user_agent = concat!("agentsearch-rerank/", env!("CARGO_PKG_VERSION"));
        let request = outbound::json_post(&self.url, user_agent, body)
            .map_err(|e| RerankError::Config(format!("request: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| RerankError::Unavailable(outbound::describe(&e)))?;
        let status = response.status();
        if status != StatusCode::OK {
            let quoted = outbound::read_body(response.into_body(), ERROR_BODY_BYTES)
                .await
                .map(|body| quote(&body))
                .unwrap_or_default();
            return Err(RerankError::Unavailable(format!(
                "answered HTTP {}{quoted}",
                status.as_u16()
            )));
        }
        let body = outbound::read_body(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge(_) => RerankError::Malformed(e.to_string()),
                BodyError::Failed(_) => RerankError::Unavailable(e.to_string()),
            })?;
        parse_answer(&body, texts)
    }
}

#[async_trait]
impl Reranker for HttpReranker {
    fn name(&self) -> &str {
        "http"
    }

    async fn rerank(&self, query: &str, texts: &[String], timeout: Duration) -> Result<Vec<f32>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let calls = texts.chunks(TEXTS_PER_REQUEST).map(|chunk| async move {
            let body = serde_json::to_vec(&RerankRequest {
                query,
                texts: chunk,
                truncate: true,
            })
            .map_err(|e| RerankError::Config(format!("request body: {e}")))?;
            self.call(body, chunk.len()).await
        });
        let answers = tokio::time::timeout(
            timeout.min(self.timeout),
            futures::future::try_join_all(calls),
        )
        .await
        .map_err(|_| RerankError::Timeout)??;
        Ok(answers.into_iter().flatten().collect())
    }
}

/// `: <the start of an error answer>`, or nothing when it is empty.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let mut quoted: String = text.chars().take(ERROR_BODY_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push_str("...");
    }
    format!(": {quoted}")
}

/// The scores of TEI's answer for `texts` texts, in input order.
fn parse_answer(body: &[u8], texts: usize) -> Result<Vec<f32>> {
    let ranked: Vec<Ranked> = serde_json::from_slice(body).map_err(|e| {
        RerankError::Malformed(format!("not a list of {{\"index\", \"score\"}}: {e}"))
    })?;
    let mut scores: Vec<Option<f32>> = vec![None; texts];
    for Ranked { index, score } in ranked {
        let slot = scores.get_mut(index).ok_or_else(|| {
            RerankError::Malformed(format!("index {index} is out of range for {texts} texts"))
        })?;
        let narrowed = score as f32;
        if !narrowed.is_finite() {
            return Err(RerankError::Malformed(format!(
                "the score of index {index} is not a finite f32: {score}"
            )));
        }
        if slot.replace(narrowed).is_some() {
            return Err(RerankError::Malformed(format!(
                "index {index} is scored twice"
            )));
        }
    }
    let missing: Vec<usize> = (0..texts).filter(|&i| scores[i].is_none()).collect();
    if let Some(first) = missing.first() {
        return Err(RerankError::Malformed(format!(
            "{} of {texts} texts have no score (the first: index {first})",
            missing.len()
        )));
    }
    Ok(scores.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::post;
    use axum::{Json, Router};
    use serde_json::{Value, json};

    use super::*;

    const LONG: Duration = Duration::from_secs(10);

    /// The last request body the test server received.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Option<Value>>>);

    /// TEI's answer to `body`: each text scored by its length / 10, in reverse input order, with
    /// the `text` field TEI adds when asked.
    fn answer(body: &Value) -> Value {
        let texts = body["texts"].as_array().cloned().unwrap_or_default();
        let ranked: Vec<Value> = texts
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| {
                let text = t.as_str().unwrap_or_default();
                json!({"index": i, "score": text.len() as f64 / 10.0, "text": text})
            })
            .collect();
        Value::Array(ranked)
    }

    async fn good(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
        let ranked = answer(&body);
        if let Ok(mut last) = seen.0.lock() {
            *last = Some(body);
        }
        Json(ranked)
    }

    async fn slow(Json(body): Json<Value>) -> Json<Value> {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Json(answer(&body))
    }

    async fn failing() -> impl IntoResponse {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":"backend crashed","error_type":"backend"}"#,
        )
    }

    /// Answers `[{"index": 0, "score": 0.5}, ...]` for the indices `0..n` edited by `edit`.
    fn edited(
        edit: fn(Vec<Value>) -> Value,
    ) -> impl Fn(Json<Value>) -> std::future::Ready<Json<Value>> + Clone {
        move |Json(body): Json<Value>| {
            let n = body["texts"].as_array().map_or(0, Vec::len);
            let ranked = (0..n).map(|i| json!({"index": i, "score": 0.5})).collect();
            std::future::ready(Json(edit(ranked)))
        }
    }

    /// A TEI stand-in on 127.0.0.1:0; its base URL and what it saw.
    async fn start() -> (String, Seen) {
        let seen = Seen::default();
        let app = Router::new()
            .route("/rerank", post(good))
            .route("/slow", post(slow))
            .route("/fail", post(failing))
            .route("/html", post(|| async { "<html>rerank</html>" }))
            .route(
                "/out-of-range",
                post(edited(|mut r| {
                    r[0] = json!({"index": 99, "score": 0.5});
                    Value::Array(r)
                })),
            )
            .route(
                "/missing",
                post(edited(|mut r| {
                    r.pop();
                    Value::Array(r)
                })),
            )
            .route(
                "/duplicate",
                post(edited(|mut r| {
                    r[1] = json!({"index": 0, "score": 0.7});
                    Value::Array(r)
                })),
            )
            .route(
                "/huge-score",
                post(edited(|mut r| {
                    r[0] = json!({"index": 0, "score": 1e39});
                    Value::Array(r)
                })),
            )
            .route(
                "/string-score",
                post(edited(|mut r| {
                    r[0] = json!({"index": 0, "score": "high"});
                    Value::Array(r)
                })),
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        (format!("http://{addr}"), seen)
    }

    fn texts() -> Vec<String> {
        ["a", "bbb", "cc", "dddd"].map(String::from).to_vec()
    }

    #[tokio::test]
    async fn shuffled_answers_come_back_in_input_order() {
        let (base, seen) = start().await;
        let reranker = HttpReranker::new(&format!("{base}/rerank"), LONG).unwrap();
        assert_eq!(reranker.name(), "http");
        let scores = reranker.rerank("q", &texts(), LONG).await.unwrap();
        assert_eq!(scores, vec![0.1, 0.3, 0.2, 0.4]);
        let body = seen.0.lock().unwrap().clone().unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["query", "texts", "truncate"]);
        assert_eq!(
            body,
            json!({"query": "q", "texts": ["a", "bbb", "cc", "dddd"], "truncate": true})
        );
        // More texts than one request takes: several requests, scores in input order.
        let many: Vec<String> = (0..70).map(|i| "x".repeat(i + 1)).collect();
        let scores = reranker.rerank("q", &many, LONG).await.unwrap();
        let expected: Vec<f32> = (0..70).map(|i| (i + 1) as f32 / 10.0).collect();
        assert_eq!(scores, expected);
        let last = seen.0.lock().unwrap().clone().unwrap();
        assert!(last["texts"].as_array().unwrap().len() <= TEXTS_PER_REQUEST);
        // No texts: no call.
        *seen.0.lock().unwrap() = None;
        assert!(reranker.rerank("q", &[], LONG).await.unwrap().is_empty());
        assert!(seen.0.lock().unwrap().is_none());
    }

    #[tokio::test]
    async fn a_slow_reranker_times_out() {
        let (base, _) = start().await;
        let url = format!("{base}/slow");
        let short = Duration::from_millis(200);
        // The call's timeout, then the reranker's, is the shorter.
        for (default, call) in [(LONG, short), (short, LONG)] {
            let reranker = HttpReranker::new(&url, default).unwrap();
            let started = std::time::Instant::now();
            let err = reranker.rerank("q", &texts(), call).await.unwrap_err();
            assert!(matches!(err, RerankError::Timeout), "{err}");
            assert!(started.elapsed() < Duration::from_secs(3));
        }
    }

    #[tokio::test]
    async fn errors_and_refusals_are_unavailable() {
        let (base, _) = start().await;
        let reranker = HttpReranker::new(&format!("{base}/fail"), LONG).unwrap();
        let err = reranker.rerank("q", &texts(), LONG).await.unwrap_err();
        assert!(matches!(err, RerankError::Unavailable(_)), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("500") && text.contains("backend crashed"),
            "{text}"
        );

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let refused = HttpReranker::new(&format!("http://127.0.0.1:{port}/rerank"), LONG).unwrap();
        let err = refused.rerank("q", &texts(), LONG).await.unwrap_err();
        assert!(matches!(err, RerankError::Unavailable(_)), "{err}");
    }

    #[tokio::test]
    async fn unusable_answers_are_malformed() {
        let (base, _) = start().await;
        for (path, expect) in [
            ("html", "not a list"),
            ("out-of-range", "index 99 is out of range for 4 texts"),
            ("missing", "1 of 4 texts have no score (the first: index 3)"),
            ("duplicate", "index 0 is scored twice"),
            ("huge-score", "not a finite f32"),
            ("string-score", "not a list"),
        ] {
            let reranker = HttpReranker::new(&format!("{base}/{path}"), LONG).unwrap();
            let err = reranker.rerank("q", &texts(), LONG).await.unwrap_err();
            assert!(matches!(err, RerankError::Malformed(_)), "{path}: {err}");
            assert!(err.to_string().contains(expect), "{path}: {err}");
        }
    }

    #[test]
    fn only_http_and_https_urls_are_accepted() {
        let ok = HttpReranker::new("https://tei.example.com/rerank", LONG).unwrap();
        assert_eq!(ok.url().scheme_str(), Some("https"));
        assert_eq!(ok.timeout(), LONG);
        for bad in ["ftp://x/rerank", "not a url", "http:///rerank"] {
            let err = HttpReranker::new(bad, LONG).err().unwrap();
            assert!(matches!(err, RerankError::Config(_)), "{bad}: {err}");
        }
    }

    #[test]
    fn answers_are_checked_without_a_server() {
        let body = br#"[{"index": 1, "score": -2.5, "text": "x"}, {"index": 0, "score": 3}]"#;
        assert_eq!(parse_answer(body, 2).unwrap(), vec![3.0, -2.5]);
        assert!(parse_answer(b"[]", 0).unwrap().is_empty());
        assert!(matches!(
            parse_answer(br#"[{"index": -1, "score": 1}]"#, 1),
            Err(RerankError::Malformed(_))
        ));
        assert!(matches!(
            parse_answer(br#"[{"index": 0, "score": null}]"#, 1),
            Err(RerankError::Malformed(_))
        ));
        assert!(matches!(
            parse_answer(br#"{"index": 0, "score": 1}"#, 1),
            Err(RerankError::Malformed(_))
        ));
    }
}

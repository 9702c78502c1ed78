//! A synthetic, reproducible content set for the context-search scenario: records of several
//! syncs, split into segments that carry precomputed vectors (the bring-your-own-embeddings path,
//! since embedding a million passages with MiniLM on a few cores takes hours), ACLs with realistic
//! spreads, group memberships, and users to search as.
//!
//! Text: each segment is a run of words drawn from a Zipf-like vocabulary, biased to its record's
//! topic, so postings lists have the skew of real text. Vectors: each topic has a random unit
//! centroid; a segment's vector is its topic's centroid plus Gaussian noise, normalised, so the
//! vectors are clustered like real embeddings (the dense scan costs the same as with model
//! vectors; the scores mean nothing, the queries are embedded by the server's model).

use agentsearch_proto::v1 as pb;
use rand::Rng;
use rand::rngs::StdRng;

pub const DIM: usize = 384;
const VOCABULARY: usize = 5000;
const TOPICS: usize = 256;
/// Words of a segment.
const SEGMENT_WORDS: usize = 60;

pub struct Content {
    /// `vocabulary[i]` is the i-th most frequent word.
    vocabulary: Vec<String>,
    centroids: Vec<Vec<f32>>,
    /// Cumulative Zipf weights over the vocabulary.
    zipf: Vec<f64>,
    pub users: Vec<String>,
    pub groups: usize,
    pub domain: String,
}

/// Who may read a record: the spread the scenario draws from.
fn acl(rng: &mut StdRng, content: &Content) -> pb::Acl {
    let roll = rng.random_range(0..100);
    let mut acl = pb::Acl::default();
    match roll {
        0..40 => acl.domains.push(content.domain.clone()),
        40..70 => {
            for _ in 0..rng.random_range(1..=3) {
                acl.groups
                    .push(format!("g{}", rng.random_range(0..content.groups)));
            }
        }
        70..90 => {
            for _ in 0..rng.random_range(1..=5) {
                acl.users
                    .push(content.users[rng.random_range(0..content.users.len())].clone());
            }
        }
        _ => acl.anyone = true,
    }
    acl
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in &mut v {
        *x /= norm;
    }
    v
}

fn gaussian(rng: &mut StdRng) -> f32 {
    // Box-Muller.
    let u1: f32 = rng.random_range(f32::EPSILON..1.0);
    let u2: f32 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

impl Content {
    pub fn new(rng: &mut StdRng, users: usize, groups: usize) -> Self {
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ren", "tor", "va", "si", "del", "quo", "bra", "nu", "pel", "zan",
            "fi", "gor", "hal", "ix", "jun", "ost", "wex",
        ];
        let mut vocabulary = Vec::with_capacity(VOCABULARY);
        let mut seen = std::collections::HashSet::new();
        while vocabulary.len() < VOCABULARY {
            let n = rng.random_range(2..=4);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
                .collect();
            if seen.insert(word.clone()) {
                vocabulary.push(word);
            }
        }
        let mut total = 0.0;
        let zipf = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        let centroids = (0..TOPICS)
            .map(|_| unit((0..DIM).map(|_| gaussian(rng)).collect()))
            .collect();
        Content {
            vocabulary,
            centroids,
            zipf,
            users: (0..users)
                .map(|i| format!("user{i}@corp.example"))
                .collect(),
            groups,
            domain: "corp.example".into(),
        }
    }

    fn word(&self, rng: &mut StdRng) -> &str {
        let total = *self.zipf.last().expect("vocabulary");
        let x = rng.random_range(0.0..total);
        let i = self.zipf.partition_point(|c| *c < x);
        &self.vocabulary[i.min(VOCABULARY - 1)]
    }

    /// A query of two or three words, the way a user would type a few keywords.
    pub fn query(&self, rng: &mut StdRng) -> String {
        let n = rng.random_range(2..=3);
        (0..n)
            .map(|_| {
                // Skip the most frequent words, as a user types content words.
                let i = rng.random_range(20..2000);
                self.vocabulary[i].clone()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Record `n` of a sync with `segments` segments.
    pub fn record(&self, rng: &mut StdRng, n: usize, segments: usize) -> pb::RecordInput {
        let topic = rng.random_range(0..TOPICS);
        // Topic words: a band of the vocabulary this record favours.
        let band = 50 + topic * 15;
        let segments = (0..segments)
            .map(|_| {
                let text: Vec<&str> = (0..SEGMENT_WORDS)
                    .map(|_| {
                        if rng.random_range(0..4) == 0 {
                            &self.vocabulary[band + rng.random_range(0..15)]
                        } else {
                            self.word(rng)
                        }
                    })
                    .collect();
                let vector = unit(
                    self.centroids[topic]
                        .iter()
                        .map(|c| c + 0.06 * gaussian(rng))
                        .collect(),
                );
                pb::SegmentInput {
                    text: text.join(" "),
                    vector,
                }
            })
            .collect();
        pb::RecordInput {
            id: format!("rec-{n}"),
            display_name: Some(format!(
                "{} {}",
                self.vocabulary[band],
                self.vocabulary[band + 1]
            )),
            text: None,
            mime: "text/plain".into(),
            modified_at: Some("2026-06-01T12:00:00Z".into()),
            acl: Some(acl(rng, self)),
            segments,
            created_at: None,
            author: None,
            url: None,
            path: None,
            metadata_json: None,
        }
    }

    /// Group memberships: every user is in about three of the groups.
    pub fn groups(&self, rng: &mut StdRng) -> Vec<pb::Group> {
        let mut members: Vec<Vec<String>> = vec![Vec::new(); self.groups];
        for user in &self.users {
            for _ in 0..3 {
                members[rng.random_range(0..self.groups)].push(user.clone());
            }
        }
        members
            .into_iter()
            .enumerate()
            .map(|(i, members)| pb::Group {
                id: format!("g{i}"),
                members,
            })
            .collect()
    }
}

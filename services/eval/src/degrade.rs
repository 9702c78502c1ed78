//! Reproducible weakening of one retriever, for stress tests of fusion (`agentsearch eval
//! --degrade`): a hybrid ranking should not fall below its better retriever when the other one is
//! made worse on purpose.
//!
//! - **lexical** at level `p`: each word of the text BM25 searches is replaced, with probability
//!   `p`, by a word drawn uniformly from the corpus vocabulary, so BM25 matches words the user did
//!   not mean;
//! - **dense** at level `p`: the same replacement in the text the embedding model reads (the
//!   lexical retriever still sees the original), so the vector stands for a query the user did
//!   not ask;
//! - **dense-rotate** at level `p`: the query vector itself is rotated by `p x 90` degrees towards
//!   a random direction orthogonal to it, so at 1 it is pure noise. Every cosine falls by
//!   construction, which flatters a fusion that trusts high cosines; the word replacement above is
//!   the fairer test.
//!
//! Every draw comes from a generator seeded by the query id, the retriever and the level, so a run
//! is repeatable and each query is weakened independently of the others and of the run's order.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Which retriever to weaken, and how much (0 = not at all, 1 = pure noise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Degrade {
    pub retriever: Retriever,
    pub level: f64,
    /// Rotate the query vector instead of replacing words (dense only).
    pub rotate: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retriever {
    Lexical,
    Dense,
}

impl fmt::Display for Degrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match (self.retriever, self.rotate) {
            (Retriever::Lexical, _) => "lexical",
            (Retriever::Dense, false) => "dense",
            (Retriever::Dense, true) => "dense-rotate",
        };
        write!(f, "{name}={}", self.level)
    }
}

impl FromStr for Degrade {
    type Err = String;

    /// `lexical=LEVEL`, `dense=LEVEL` or `dense-rotate=LEVEL`, LEVEL in 0..=1.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, level) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected lexical=LEVEL or dense=LEVEL"))?;
        let (retriever, rotate) = match name.trim() {
            "lexical" => (Retriever::Lexical, false),
            "dense" => (Retriever::Dense, false),
            "dense-rotate" => (Retriever::Dense, true),
            other => {
                return Err(format!(
                    "`{other}`: expected lexical, dense or dense-rotate"
                ));
            }
        };
        let level: f64 = level
            .trim()
            .parse()
            .map_err(|_| format!("`{level}`: the level must be a number from 0 to 1"))?;
        if !(0.0..=1.0).contains(&level) {
            return Err(format!("{level}: the level must be from 0 to 1"));
        }
        Ok(Self {
            retriever,
            level,
            rotate,
        })
    }
}

impl Degrade {
    /// The generator for one query.
    fn rng(&self, query_id: &str) -> SplitMix64 {
        let tag = match self.retriever {
            Retriever::Lexical => 1u64,
            Retriever::Dense => 2,
        };
        SplitMix64(fnv1a(query_id.as_bytes()) ^ tag.rotate_left(56) ^ self.level.to_bits())
    }

    /// The query text `retriever` sees (BM25 searches it, the embedding model reads it):
    /// unchanged unless that retriever is degraded by word replacement.
    pub fn text(
        &self,
        retriever: Retriever,
        query_id: &str,
        text: &str,
        vocabulary: &Vocabulary,
    ) -> String {
        if self.retriever != retriever
            || self.rotate
            || self.level == 0.0
            || vocabulary.0.is_empty()
        {
            return text.to_string();
        }
        let mut rng = self.rng(query_id);
        text.split_whitespace()
            .map(|word| {
                if rng.unit() < self.level {
                    let i = (rng.next() % vocabulary.0.len() as u64) as usize;
                    vocabulary.0[i].as_str()
                } else {
                    word
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The query vector the dense retriever sees (unit length in, unit length out): unchanged
    /// unless dense is degraded by rotation.
    pub fn vector(&self, query_id: &str, vector: &[f32]) -> Vec<f32> {
        if self.retriever != Retriever::Dense
            || !self.rotate
            || self.level == 0.0
            || vector.is_empty()
        {
            return vector.to_vec();
        }
        let mut rng = self.rng(query_id);
        let v: Vec<f64> = vector.iter().map(|&x| f64::from(x)).collect();
        let v = unit(&v);
        // A random direction (isotropic Gaussian), made orthogonal to v.
        let mut u: Vec<f64> = (0..v.len()).map(|_| rng.gaussian()).collect();
        let along: f64 = u.iter().zip(&v).map(|(a, b)| a * b).sum();
        for (a, b) in u.iter_mut().zip(&v) {
            *a -= along * b;
        }
        let u = unit(&u);
        let angle = self.level * std::f64::consts::FRAC_PI_2;
        let (sin, cos) = angle.sin_cos();
        let out: Vec<f64> = v.iter().zip(&u).map(|(a, b)| cos * a + sin * b).collect();
        unit(&out).into_iter().map(|x| x as f32).collect()
    }
}

/// The distinct words of a corpus (lowercase, letters and digits), sorted: what a lexical
/// degrade draws replacement words from.
#[derive(Clone, Debug, Default)]
pub struct Vocabulary(Vec<String>);

impl Vocabulary {
    pub fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut words = BTreeSet::new();
        for text in texts {
            for word in text.split(|c: char| !c.is_alphanumeric()) {
                if word.chars().count() >= 3 {
                    words.insert(word.to_lowercase());
                }
            }
        }
        Self(words.into_iter().collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn unit(v: &[f64]) -> Vec<f64> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter().map(|x| x / norm).collect()
    } else {
        v.to_vec()
    }
}

/// Which half of a split a query falls in, fixed by its id: `true` for about half of any set of
/// queries (the half whose feedback is fed in a feedback evaluation).
pub fn in_first_half(query_id: &str) -> bool {
    SplitMix64(fnv1a(query_id.as_bytes())).next() & 1 == 0
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64 (Steele, Lea and Flood, 2014): small, fast, and the same on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    #[test]
    fn halves_are_fixed_and_about_even() {
        let ids: Vec<String> = (0..2000).map(|i| format!("q{i}")).collect();
        let first = ids.iter().filter(|id| in_first_half(id)).count();
        assert!((900..=1100).contains(&first), "{first}");
        assert!(ids.iter().all(|id| in_first_half(id) == in_first_half(id)));
    }

    #[test]
    fn parses_and_refuses() {
        let d: Degrade = "dense=0.5".parse().unwrap();
        assert_eq!(d.retriever, Retriever::Dense);
        assert_eq!(d.level, 0.5);
        assert!(!d.rotate);
        assert_eq!(d.to_string(), "dense=0.5");
        let d: Degrade = "dense-rotate=0.25".parse().unwrap();
        assert!(d.rotate);
        assert_eq!(d.to_string(), "dense-rotate=0.25");
        assert!("lexical-rotate=0.25".parse::<Degrade>().is_err());
        assert!("lexical=1".parse::<Degrade>().is_ok());
        assert!("lexical=1.5".parse::<Degrade>().is_err());
        assert!("sparse=0.5".parse::<Degrade>().is_err());
        assert!("dense".parse::<Degrade>().is_err());
        assert!("dense=x".parse::<Degrade>().is_err());
    }

    #[test]
    fn the_rotation_has_the_level_s_angle_and_is_repeatable() {
        let v: Vec<f32> = (0..384)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
            .collect();
        let norm = dot(&v, &v).sqrt() as f32;
        let v: Vec<f32> = v.iter().map(|x| x / norm).collect();
        for level in [0.0, 0.25, 0.5, 1.0] {
            let d = Degrade {
                retriever: Retriever::Dense,
                level,
                rotate: true,
            };
            let out = d.vector("q1", &v);
            assert!((dot(&out, &out) - 1.0).abs() < 1e-5);
            let expected = (level * std::f64::consts::FRAC_PI_2).cos();
            assert!((dot(&out, &v) - expected).abs() < 1e-5, "level {level}");
            assert_eq!(out, d.vector("q1", &v));
        }
        let d = Degrade {
            retriever: Retriever::Dense,
            level: 0.5,
            rotate: true,
        };
        assert_ne!(d.vector("q1", &v), d.vector("q2", &v));
        // A lexical degrade leaves the vector alone, and a rotation every text.
        let lexical = Degrade {
            retriever: Retriever::Lexical,
            level: 0.5,
            rotate: false,
        };
        assert_eq!(lexical.vector("q1", &v), v);
        let vocabulary = Vocabulary::from_texts(["alpha beta gamma"]);
        for retriever in [Retriever::Lexical, Retriever::Dense] {
            assert_eq!(
                d.text(retriever, "q1", "send an email", &vocabulary),
                "send an email"
            );
        }
    }

    #[test]
    fn words_are_replaced_at_about_the_level_s_rate() {
        let vocabulary = Vocabulary::from_texts(["Alpha, beta; gamma delta epsilon zeta."]);
        assert_eq!(vocabulary.len(), 6);
        let text = vec!["word"; 1000].join(" ");
        for (retriever, level) in [
            (Retriever::Lexical, 0.0),
            (Retriever::Lexical, 0.3),
            (Retriever::Dense, 0.3),
            (Retriever::Lexical, 1.0),
        ] {
            let d = Degrade {
                retriever,
                level,
                rotate: false,
            };
            let out = d.text(retriever, "q7", &text, &vocabulary);
            assert_eq!(out, d.text(retriever, "q7", &text, &vocabulary));
            // Only the degraded retriever's text changes.
            let other = match retriever {
                Retriever::Lexical => Retriever::Dense,
                Retriever::Dense => Retriever::Lexical,
            };
            assert_eq!(d.text(other, "q7", &text, &vocabulary), text);
            let words: Vec<&str> = out.split(' ').collect();
            assert_eq!(words.len(), 1000);
            let replaced = words.iter().filter(|w| **w != "word").count() as f64 / 1000.0;
            assert!((replaced - level).abs() < 0.05, "level {level}: {replaced}");
        }
    }
}

//! Which compilation of the vector kernels this process runs (the encoder's forward pass, the
//! tool index's inner products): the widest the CPU has, detected once at run time so that one
//! binary serves every x86-64 machine, or a narrower one named by `AGENTSEARCH_KERNELS` to compare
//! builds on the same machine.

use std::sync::OnceLock;

/// One compilation of the kernels, narrowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Build {
    /// Plain multiplies and adds, for any CPU.
    Portable,
    /// Fused multiply-adds on 256-bit vectors (AVX and FMA).
    Fma256,
    /// 512-bit vectors (AVX-512F, with AVX, AVX2, FMA and F16C).
    Avx512,
}

impl Build {
    /// Every build, narrowest first.
    pub const ALL: [Build; 3] = [Build::Portable, Build::Fma256, Build::Avx512];

    /// The name `AGENTSEARCH_KERNELS` takes.
    pub fn name(self) -> &'static str {
        match self {
            Build::Portable => "portable",
            Build::Fma256 => "fma256",
            Build::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run the build.
    pub fn supported(self) -> bool {
        match self {
            Build::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Build::Fma256 => {
                std::is_x86_feature_detected!("avx") && std::is_x86_feature_detected!("fma")
            }
            // Code generated for `avx512f` may also use AVX2 and F16C (the feature implies them),
            // so they are checked too: every AVX-512 CPU has them, but a hypervisor may hide some.
            #[cfg(target_arch = "x86_64")]
            Build::Avx512 => {
                Build::Fma256.supported()
                    && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("f16c")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// Whether this CPU converts IEEE half precision to f32 by instruction (F16C, with AVX).
pub fn half_conversion() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The widest build this CPU runs.
pub fn widest() -> Build {
    Build::ALL
        .into_iter()
        .rev()
        .find(|b| b.supported())
        .unwrap_or(Build::Portable)
}

/// The build this process runs: [`widest`], or a narrower one named by the environment variable
/// `AGENTSEARCH_KERNELS` (`avx512`, `fma256`, `portable`). Decided once per process; a name the CPU
/// cannot run, or an unknown one, gives the widest (with a warning).
pub fn build() -> Build {
    static CHOSEN: OnceLock<Build> = OnceLock::new();
    *CHOSEN.get_or_init(|| choose(std::env::var("AGENTSEARCH_KERNELS").ok().as_deref()))
}

fn choose(asked: Option<&str>) -> Build {
    let widest = widest();
    let Some(asked) = asked.filter(|a| !a.is_empty()) else {
        return widest;
    };
    match Build::ALL.into_iter().find(|b| b.name() == asked) {
        Some(b) if b <= widest => b,
        _ => {
            tracing::warn!(
                asked,
                running = widest.name(),
                "AGENTSEARCH_KERNELS names no build this CPU runs"
            );
            widest
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_build_is_taken_only_where_the_cpu_runs_it() {
        assert_eq!(choose(None), widest());
        assert_eq!(choose(Some("")), widest());
        assert_eq!(choose(Some("portable")), Build::Portable);
        assert_eq!(choose(Some("sse9")), widest());
        for b in Build::ALL {
            let got = choose(Some(b.name()));
            if b.supported() {
                assert_eq!(got, b);
            } else {
                assert_eq!(got, widest());
            }
        }
        assert!(Build::Portable.supported());
    }
}

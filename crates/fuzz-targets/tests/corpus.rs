//! The committed fuzz corpus (`fuzz/corpus/<target>/*`, seeds and whatever the fuzzer
//! kept) replayed through the target bodies: a regression shows here, on stable Rust,
//! without cargo-fuzz.

use std::path::PathBuf;

#[test]
fn every_committed_corpus_input_passes_its_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, target) in corral_fuzz_targets::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(
            !inputs.is_empty(),
            "no corpus for {name} in {}",
            dir.display()
        );
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} fails on {}", input.display());
        }
    }
}

/// The HTTP target reaches the route: a seed with the token is answered as the real
/// endpoint answers it, pipelined requests included.
#[test]
fn the_http_target_reaches_the_mcp_route() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/http_request");
    let answer = |name: &str| {
        let data = std::fs::read(corpus.join(name)).unwrap();
        String::from_utf8_lossy(&corral_fuzz_targets::http_exchange(&data)).into_owned()
    };
    let init = answer("initialize");
    assert!(init.starts_with("HTTP/1.1 200 "), "{init}");
    assert!(
        init.to_ascii_lowercase().contains("mcp-session-id: "),
        "{init}"
    );
    let two = answer("initialize_then_pipelined_list");
    assert_eq!(two.matches("HTTP/1.1 ").count(), 2, "{two}");
    let overflow = answer("chunk_size_overflow_authorized");
    assert!(
        overflow.is_empty() || overflow.starts_with("HTTP/1.1 400 "),
        "{overflow}"
    );
}

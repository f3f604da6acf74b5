#![no_main]
// The body, its input format and its invariants: corral_fuzz_targets::www_authenticate.
libfuzzer_sys::fuzz_target!(|data: &[u8]| corral_fuzz_targets::www_authenticate(data));

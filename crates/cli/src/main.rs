// mimalloc instead of glibc's malloc: a forwarded call makes a dozen small allocations,
// and glibc spent ≈ 20% of the gateway's CPU on them (with `malloc_consolidate` run on
// every allocation of a spawned request task). BENCHMARKS.md, "Issue 8 follow-up".
// Linux only: macOS's libmalloc is not glibc's, and mimalloc's C would need Apple's SDK to
// check the Apple targets on Linux (scripts/apple-check.sh).
#[cfg(target_os = "linux")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    corral::run()
}

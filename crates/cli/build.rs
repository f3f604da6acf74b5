//! Puts the commit a binary was built from into `corral --version` (`CORRAL_COMMIT`):
//! `$CORRAL_BUILD_COMMIT` when set (a packager building from a tarball), else git's
//! abbreviated HEAD and its date, else "unknown commit". A change of HEAD (a commit, a
//! checkout) reruns this script; nothing else does, so builds stay incremental.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CORRAL_BUILD_COMMIT");
    let commit = match std::env::var("CORRAL_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown commit".to_owned()),
    };
    println!("cargo:rustc-env=CORRAL_COMMIT={commit}");
}

/// `d8aaf21c1a2b 2026-12-07` for HEAD, with the files that name HEAD's commit watched.
fn from_git() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
    };
    let described = git(&["log", "-1", "--format=%h %cs", "--abbrev=12"])?;
    // HEAD, the branch it names, and packed-refs (where a branch may live instead).
    // A path is watched only if it exists: cargo reruns a script whose watched path is
    // missing on every build.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    Some(described)
}

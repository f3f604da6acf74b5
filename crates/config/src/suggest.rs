//! "Did you mean …?" for misspelt keys (and, in `corral call`, tool names).
//!
//! A plain Levenshtein distance over a handful of short keys; small enough that a
//! dependency (and a lockfile change) would cost more than it saves.

/// The known key closest to `key`, if it is close enough to be a plausible typo:
/// the same apart from case, or at most a third of its characters (at least one)
/// off.
pub fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    if let Some(same) = known.iter().find(|k| k.eq_ignore_ascii_case(key)) {
        return Some(same);
    }
    let limit = (key.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_keys_only() {
        let known = ["command", "args", "cwd", "call_timeout"];
        assert_eq!(closest("comand", &known), Some("command"));
        assert_eq!(closest("Args", &known), Some("args"));
        assert_eq!(closest("call_timout", &known), Some("call_timeout"));
        assert_eq!(closest("banana", &known), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}

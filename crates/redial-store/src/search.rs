//! Search's rules, written once for both stores: the terms a job is indexed under (its key and
//! tags), their buckets and bloom filters, and the words of a dead job's reason with the ranges
//! a search's words cover.

/// The `job_terms` index is kept by bucket of 1,024 consecutive jobs (`seq >> 10`), then by
/// term: an insert writes next to the inserts before it, where an index by term alone (keys are
/// random UUIDs) would write a page at a random place for every job, and SQLite would write each
/// to its WAL. Measured with `redial-bench --only search-cost`, an index by term alone cost
/// SQLite's batched enqueue 60% of its rate. A search probes each bucket of the jobs' range: a
/// thousand point reads at a million jobs. The SQL of both stores spells it `seq >> 10`.
pub const TERM_BUCKET_BITS: u32 = 10;

/// The `job_terms` bucket of the job of `seq` ([`TERM_BUCKET_BITS`]).
pub fn term_bucket(seq: i64) -> i64 {
    seq >> TERM_BUCKET_BITS
}

/// The hash functions of a block's bloom filter ([`term_bloom`]).
pub const BLOOM_HASHES: i64 = 7;

/// Bits of a block's bloom filter per term it holds: with [`BLOOM_HASHES`] hashes, about one
/// block in a hundred answers "maybe" for a term it does not hold.
const BLOOM_BITS_PER_TERM: usize = 10;

/// The two base hashes of `term` for a bloom filter (FNV-1a, 64 bits, split in two 31-bit
/// halves, the second odd): its `i`th bit is `(h1 + i * h2) mod bits`. Stable across versions
/// and machines: blocks written by one Redial are read by the next. Small enough that a store's
/// SQL computes `h1 + 6 * h2` in a 64-bit integer.
pub fn term_hashes(term: &str) -> (i64, i64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in term.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (
        (h & 0x7fff_ffff) as i64,
        (((h >> 32) & 0x7fff_ffff) | 1) as i64,
    )
}

/// The bloom filter of a block of `terms` (the terms of the jobs one insert put in a block,
/// `job_term_blocks`): [`BLOOM_BITS_PER_TERM`] bits per term (at least 64), bit `n` being bit
/// `n % 8` (lowest first) of byte `n / 8`, as PostgreSQL's `get_bit` on a `bytea` reads it.
pub fn term_bloom(terms: &[String]) -> Vec<u8> {
    let bytes = (terms.len() * BLOOM_BITS_PER_TERM).div_ceil(8).max(8);
    let bits = (bytes * 8) as i64;
    let mut out = vec![0u8; bytes];
    for t in terms {
        let (h1, h2) = term_hashes(t);
        for i in 0..BLOOM_HASHES {
            let n = (h1 + i * h2) % bits;
            out[(n / 8) as usize] |= 1 << (n % 8);
        }
    }
    out
}

/// [`term_bloom`] with a byte (0 or 1) per bit, bit `n` being byte `n`: SQLite has no function
/// that reads a bit, but `substr` of a blob reads a byte where it is.
pub fn term_bloom_bytes(terms: &[String]) -> Vec<u8> {
    let bits = term_bloom(terms);
    (0..bits.len() * 8)
        .map(|n| (bits[n / 8] >> (n % 8)) & 1)
        .collect()
}

/// Whether the bloom filter `bloom` ([`term_bloom`]) may hold `term`.
pub fn bloom_may_hold(bloom: &[u8], term: &str) -> bool {
    let bits = (bloom.len() * 8) as i64;
    if bits == 0 {
        return false;
    }
    let (h1, h2) = term_hashes(term);
    (0..BLOOM_HASHES).all(|i| {
        let n = (h1 + i * h2) % bits;
        bloom[(n / 8) as usize] & (1 << (n % 8)) != 0
    })
}

/// A job's idempotency key as a term of the `job_terms` index.
pub fn key_term(key: &str) -> String {
    format!("k:{key}")
}

/// A job's tag as a term of the `job_terms` index.
pub fn tag_term(tag: &str) -> String {
    format!("t:{tag}")
}

/// What a job puts in the `job_terms` index when it is inserted: its idempotency key and its
/// tags (each once), from which a search by key or tag is answered without a scan.
pub fn job_terms(key: Option<&str>, tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = key.map(key_term).into_iter().collect();
    for t in tags {
        let term = tag_term(t);
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

/// The longest word the `dead_words` index keeps, in characters: a longer one is cut there
/// (and a search's word too, so that they still meet).
pub const MAX_WORD_CHARS: usize = 40;

/// The words of a dead job's reason, as the `dead_words` index keeps them and a search by
/// reason text asks for them: lower-cased runs of letters and digits, each cut at
/// [`MAX_WORD_CHARS`], each once, in the order they first appear. "HTTP 404: Not Found" gives
/// `http`, `404`, `not`, `found`.
pub fn reason_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let word: String = run
            .chars()
            .flat_map(char::to_lowercase)
            .take(MAX_WORD_CHARS)
            .collect();
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// A search's words, the one likely to match the fewest dead letters first (words with a digit,
/// then longer words: `timeout 30012` reads the few jobs with `30012` and checks each for
/// `timeout`, not the other way round). A store reads them in this order where it cannot tell.
pub fn likely_rarest_first(words: &[String]) -> Vec<String> {
    let mut out = words.to_vec();
    out.sort_by_key(|w| {
        (
            !w.chars().any(|c| c.is_ascii_digit()),
            std::cmp::Reverse(w.chars().count()),
        )
    });
    out
}

/// The condition on `seq` for a search's `words` ([`SqlValue::Words`]): each word a range of
/// `dead_words` (every word it starts, [`word_range`]), the jobs of the first word's range (the
/// likeliest rarest, [`likely_rarest_first`]) checked for the others by seq. `bind` takes each
/// bound of the ranges in turn and answers its placeholder (`?3`, `$3`); `join` is how the store
/// joins the ranges (SQLite `CROSS JOIN`, which keeps the order given; PostgreSQL `,`, whose
/// planner orders them by its statistics).
pub fn words_condition(
    words: &[String],
    mut bind: impl FnMut(String) -> String,
    join: &str,
) -> String {
    let mut from_clause = Vec::with_capacity(words.len());
    let mut wheres = Vec::with_capacity(words.len() * 2);
    for (i, w) in words.iter().enumerate() {
        let (from, to) = word_range(w);
        let (from, to) = (bind(from), bind(to));
        from_clause.push(format!("dead_words w{i}"));
        wheres.push(format!("w{i}.word >= {from} AND w{i}.word < {to}"));
        if i > 0 {
            wheres.push(format!("w{i}.seq = w0.seq"));
        }
    }
    format!(
        " AND seq IN (SELECT w0.seq FROM {} WHERE {})",
        from_clause.join(join),
        wheres.join(" AND ")
    )
}

/// The range of `dead_words.word` a search's `word` covers, as `(from, to)` with
/// `from <= word < to` in byte order: every word that starts with it.
pub fn word_range(word: &str) -> (String, String) {
    (word.to_owned(), format!("{word}{}", char::MAX))
}

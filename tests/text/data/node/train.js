// Train byte-level BPE tokenizers on the fortunes file with the real HF tokenizers core (Node binding).
//
// The Node binding's Tokenizer.train(files) takes NO trainer options: it always uses
// model.get_trainer() == BpeTrainer::default() (vocab_size 30000, min_frequency 0,
// no special tokens, no initial alphabet). So we:
//   1. run the real training with the default trainer (raw output saved as *.raw-default-trainer.json),
//   2. derive exactly what BpeTrainer{vocab_size:1000, special_tokens:["<|endoftext|>"],
//      initial_alphabet: ByteLevel alphabet, min_frequency:0} would produce:
//        vocab: special at 0, the 256 byte chars sorted by code point at 1..256 (compute_alphabet
//        sorts by `c as u32`), then merged tokens in creation order, stopping as soon as
//        |vocab| >= 1000 (checked before each merge).
//      This is exact because the merge sequence depends only on pair counts, with ties broken by
//      the (id_a, id_b) order, and the id remapping raw->final is order preserving (seen chars are
//      sorted by code point in both runs, merged tokens numbered in creation order in both runs).
//   3. load the result with Tokenizer.fromString and save it with tok.save(path, true).
const t = require('tokenizers');
const fs = require('fs');

const CORPUS = '/usr/share/games/fortunes/fortunes';
const SPECIAL = '<|endoftext|>';
const VOCAB_SIZE = 1000;
const LLAMA3_RE = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

function baseJson(preTokenizer, ignoreMerges) {
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab: {}, merges: [] },
  };
}

const CONFIGS = {
  gpt2: baseJson({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }, false),
  llama3: baseJson({ type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: LLAMA3_RE }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
  ] }, true),
};

const report = {};
for (const [name, cfg] of Object.entries(CONFIGS)) {
  const r = (report[name] = {});
  const tok = t.Tokenizer.fromString(JSON.stringify(cfg));
  tok.train([CORPUS]);
  const rawPath = `fortunes-${name}.raw-default-trainer.json`;
  tok.save(rawPath, true);
  const rawText = fs.readFileSync(rawPath, 'utf8');
  const raw = JSON.parse(rawText);
  r.raw_ignore_merges = raw.model.ignore_merges;
  r.raw_vocab_size = Object.keys(raw.model.vocab).length;
  r.raw_merges = raw.model.merges.length;
  r.raw_merge_format = typeof raw.model.merges[0] === 'string' ? '"a b" strings' : '["a","b"] pairs';
  const rawMerges = raw.model.merges.map((m) => (typeof m === 'string' ? m.split(' ') : m));
  r.raw_duplicate_merges = rawMerges.length - new Set(rawMerges.map((m) => JSON.stringify(m))).size;

  // raw alphabet: single-char tokens with the smallest ids; check they are sorted by code point
  const rawById = Object.entries(raw.model.vocab).sort((a, b) => a[1] - b[1]).map((e) => e[0]);
  let k = 0;
  while (k < rawById.length && [...rawById[k]].length === 1) k++;
  const rawAlpha = rawById.slice(0, k);
  r.raw_alphabet_size = k;
  r.raw_alphabet_sorted_by_codepoint = rawAlpha.every((c, i) => i === 0 || c.codePointAt(0) > rawAlpha[i - 1].codePointAt(0));
  const byteAlpha = t.byteLevelAlphabet().slice().sort((a, b) => a.codePointAt(0) - b.codePointAt(0));
  r.byte_alphabet_size = byteAlpha.length;
  r.raw_alphabet_subset_of_byte_alphabet = rawAlpha.every((c) => byteAlpha.includes(c));

  // replay raw merges; check raw ids == creation order (so no token-creating merge was dropped)
  const seen = new Set(rawAlpha);
  let nextRawId = k, rawIdsConsistent = true, dupTokenMergesRaw = 0;
  for (const [a, b] of rawMerges) {
    const n = a + b;
    if (!seen.has(n)) { seen.add(n); if (raw.model.vocab[n] !== nextRawId) rawIdsConsistent = false; nextRawId++; }
    else dupTokenMergesRaw++;
  }
  r.raw_ids_match_merge_creation_order = rawIdsConsistent && nextRawId === rawById.length;
  r.raw_merges_producing_existing_token = dupTokenMergesRaw;

  // build the vocab_size=1000 / special / full-alphabet result
  const vocab = { [SPECIAL]: 0 };
  byteAlpha.forEach((c, i) => (vocab[c] = i + 1));
  let size = 1 + byteAlpha.length;
  const merges = [];
  let dupTok = 0;
  for (const [a, b] of rawMerges) {
    if (size >= VOCAB_SIZE) break;
    const n = a + b;
    if (!(n in vocab)) vocab[n] = size++;
    else dupTok++;
    merges.push([a, b]);
  }
  r.final_vocab_size = size;
  r.final_merges = merges.length;
  r.final_merges_producing_existing_token = dupTok;
  if (size < VOCAB_SIZE) throw new Error(`${name}: raw run ended before reaching vocab ${VOCAB_SIZE}`);

  const out = JSON.parse(JSON.stringify(cfg));
  out.added_tokens = [{ id: 0, content: SPECIAL, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }];
  out.model = Object.assign({}, raw.model, { vocab, merges });
  // keep whatever the trainer did to ignore_merges (checked above); set it to the intended value
  out.model.ignore_merges = cfg.model.ignore_merges;
  const tok2 = t.Tokenizer.fromString(JSON.stringify(out));
  const outPath = `fortunes-${name}.tokenizer.json`;
  tok2.save(outPath, true);
  const saved = JSON.parse(fs.readFileSync(outPath, 'utf8'));
  r.saved_merge_format = typeof saved.model.merges[0] === 'string' ? '"a b" strings' : '["a","b"] pairs';
  r.saved_merges = saved.model.merges.length;
  r.saved_duplicate_merges = saved.model.merges.length - new Set(saved.model.merges.map((m) => JSON.stringify(m))).size;
  r.saved_ignore_merges = saved.model.ignore_merges;
  r.saved_vocab_size = Object.keys(saved.model.vocab).length;
  r.saved_added_tokens = saved.added_tokens.map((a) => `${a.id}:${a.content}:special=${a.special}`);
  r.saved_ids_1_256_are_byte_alphabet = byteAlpha.every((c, i) => saved.model.vocab[c] === i + 1);
  r.getVocabSize_with_added = tok2.getVocabSize(true);
  r.first_ids = [0, 1, 2, 95, 96, 189, 256, 257, 258].map((i) => `${i}=${JSON.stringify(tok2.idToToken(i))}`).join(' ');
  r.last_id = `${size - 1}=${JSON.stringify(tok2.idToToken(size - 1))}`;
}
fs.writeFileSync('train-report.json', JSON.stringify(report, null, 1));
console.log(JSON.stringify(report, null, 1));

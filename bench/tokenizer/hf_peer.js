// The peer of bench/tokenizer.sh: Hugging Face tokenizers (its Rust core, through the Node
// binding, the only build of it this machine can install offline) encoding the same file with
// the same tokenizer.json, and training with its default BpeTrainer (the Node binding takes no
// trainer options: vocabulary 30,000, no special tokens, no initial alphabet).
// Usage: node hf_peer.js encode TOKENIZER.json TEXT   |   node hf_peer.js train PRE(gpt2|llama3) TEXT
const path = process.env.TOKENIZERS_NODE;
const t = require(path);
const fs = require('fs');
(async () => {
  const [mode, a, b] = process.argv.slice(2);
  if (mode === 'encode') {
    const tok = t.Tokenizer.fromFile(a);
    const text = fs.readFileSync(b, 'utf8');
    // Line batches, as a user encodes a corpus with encodeBatch (one string of 100 MB would
    // be one sequential encode).
    const lines = text.split(/(?<=\n)/);
    const batch = 10000;
    const t0 = process.hrtime.bigint();
    let n = 0;
    for (let i = 0; i < lines.length; i += batch) {
      const out = await tok.encodeBatch(lines.slice(i, i + batch), false);
      for (const e of out) n += e.getIds().length;
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`hf_encode_s=${s.toFixed(2)} tokens=${n}`);
  } else {
    const byteLevel = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: a === 'gpt2'};
    const pre = a === 'gpt2' ? byteLevel : {type: 'Sequence', pretokenizers: [
      {type: 'Split', pattern: {Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, behavior: 'Isolated', invert: false},
      byteLevel]};
    const j = {version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: pre,
               post_processor: null, decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
               model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
                       fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: {}, merges: []}};
    const tok = t.Tokenizer.fromString(JSON.stringify(j));
    const t0 = process.hrtime.bigint();
    tok.train([b]);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`hf_train_s=${s.toFixed(2)} vocab=${tok.getVocabSize()}`);
  }
})();

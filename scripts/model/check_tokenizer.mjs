// Loads scripts/model/tokenizer.json with a third-party reader of the Hugging Face format (the npm
// package @lenml/tokenizers, a tokenizer-only fork of transformers.js that scripts/setup.sh
// installs into .cache/npm) and checks that it encodes scripts/model/tokenizer_check.json's texts
// to the trainer's ids: evidence, without transformers, that the file reads as Hugging Face
// tokenizers read it.
//
//   node scripts/model/check_tokenizer.mjs
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const mod = await import(pathToFileURL(root + "/.cache/npm/node_modules/@lenml/tokenizers/dist/main.mjs").href);
const tok = mod.TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(root + "/scripts/model/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(root + "/scripts/model/tokenizer_config.json", "utf8")),
});
const check = JSON.parse(readFileSync(root + "/scripts/model/tokenizer_check.json", "utf8"));
let bad = 0;
for (const c of check.cases) {
  const ids = tok.encode(c.text, { add_special_tokens: false });
  const same = ids.length === c.ids.length && ids.every((v, i) => v === c.ids[i]);
  if (!same) { bad++; console.log("differs:", c.source, ids.length, c.ids.length); }
}
console.log(bad ? `${bad} cases differ` : `all ${check.cases.length} cases encode as the trainer encoded them`);
process.exit(bad ? 1 : 0);


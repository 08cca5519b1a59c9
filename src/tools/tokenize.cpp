// `deltallm tokenize`: text on stdin -> token ids on stdout (comma separated, the form
// `run --prompt-ids` takes), or one token per line with its piece.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/common.h"
#include "tools/default_model.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct TokenizeArgs {
    std::string model;
    bool show_pieces = false;
    bool no_special = false;
    bool no_parse_special = false;
};

std::string escaped(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\'')
            out += "\\'";
        else if (c == '\\')
            out += "\\\\";
        else if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += (char)c;  // UTF-8 bytes pass through (a split character shows as is)
    }
    return out;
}

int tokenize(const TokenizeArgs& a) {
    // Only the tokenizer is needed: read the vocabulary without loading the model.
    std::unique_ptr<tokenizer::Tokenizer> tok;
    if (a.model.empty()) {
        std::fprintf(stderr,
                     "deltallm: no model given (-m): using the built-in model's vocabulary\n");
        std::vector<uint8_t> image = default_model_image();
        gguf::File f = gguf::File::parse(image.data(), image.size(), "built-in model");
        tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Vocab::from_gguf(f));
    } else {
        gguf::File f = gguf::File::open(a.model);
        tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Vocab::from_gguf(f));
    }
    std::string text{std::istreambuf_iterator<char>(std::cin), {}};
    std::vector<int32_t> ids = tok->encode(text, !a.no_special, !a.no_parse_special);
    if (a.show_pieces) {
        for (int32_t id : ids) std::printf("%d\t'%s'\n", id, escaped(tok->token_text(id)).c_str());
    } else {
        for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ",%d" : "%d", ids[i]);
        std::printf("\n");
    }
    std::fprintf(stderr, "deltallm: %zu tokens\n", ids.size());
    return 0;
}

Registrar reg("tokenize", "text on stdin -> token ids on stdout", [](CLI::App& app) -> Run {
    auto a = std::make_shared<TokenizeArgs>();
    app.add_option("-m,--model", a->model, "GGUF model file (default: the built-in model)");
    app.add_flag("--show-pieces", a->show_pieces, "one token per line with the text it stands for");
    app.add_flag("--no-special", a->no_special, "do not add the beginning-of-text token");
    app.add_flag("--no-parse-special", a->no_parse_special,
                 "treat control-token text such as <|im_start|> as plain text");
    return [a] { return tokenize(*a); };
});

}  // namespace

}  // namespace dl::tools

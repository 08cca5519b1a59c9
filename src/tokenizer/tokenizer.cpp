// The tokenizer proper: lookup tables built once from a Vocab, special-token splitting, byte-level
// BPE (merges by rank within pre-tokenized pieces) and SentencePiece BPE (merges by piece score,
// byte fallback), and turning ids back into bytes.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"

namespace dl::tokenizer {

namespace {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// (left id, right id) -> (rank, merged id), open addressing: the BPE inner loop does one lookup
// per candidate pair, so this stays a flat array probe.
class MergeTable {
  public:
    struct Entry {
        uint64_t key = kEmpty;
        int32_t rank = 0;
        int32_t merged = 0;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};

    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        slots_.assign(cap, Entry{});
        mask_ = cap - 1;
    }
    static uint64_t key(int32_t l, int32_t r) {
        return (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
    }
    // Keeps the first (best-ranked) entry when a pair repeats.
    void insert(int32_t l, int32_t r, int32_t rank, int32_t merged) {
        const uint64_t k = key(l, r);
        for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Entry{k, rank, merged};
                return;
            }
        }
    }
    const Entry* find(int32_t l, int32_t r) const {
        if (slots_.empty()) return nullptr;
        const uint64_t k = key(l, r);
        for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return &slots_[i];
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

  private:
    static size_t hash(uint64_t k) {  // splitmix64's finalizer: every input bit reaches the mask
        k ^= k >> 30;
        k *= 0xbf58476d1ce4e5b9ULL;
        k ^= k >> 27;
        k *= 0x94d049bb133111ebULL;
        k ^= k >> 31;
        return static_cast<size_t>(k);
    }
    std::vector<Entry> slots_;
    size_t mask_ = 0;
};

bool is_special_type(TokenType t) {
    return t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN;
}

// Control tokens that end a turn in the chat formats we know, beyond the ids the file names.
constexpr std::array<std::string_view, 9> kEndOfTurnTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>",      "<|end_of_text|>", "<|return|>",
};

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Per-thread memo of the BPE result of recent short pieces: text repeats its words, and a hit
// skips the merge loop, whose table (megabytes for a real vocabulary) costs a cache miss per
// lookup. It belongs to one tokenizer at a time (by serial number, never reused).
struct PieceCache {
    uint64_t owner = 0;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
    static constexpr size_t kMaxPiece = 32;
    static constexpr size_t kMaxEntries = 1 << 16;
};

std::atomic<uint64_t> g_tokenizer_serial{0};

}  // namespace

struct Tokenizer::Impl {
    uint64_t serial = ++g_tokenizer_serial;
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id;
    std::vector<std::string> pieces;  // bytes of each token
    std::vector<uint8_t> control;     // per id: CONTROL or UNKNOWN

    struct Special {
        std::string text;
        int32_t id;
        bool control;  // needs parse_special to be matched
    };
    std::vector<Special> specials;                      // longest first
    std::array<std::vector<uint32_t>, 256> by_first{};  // indices into specials

    // Byte-level BPE.
    std::unique_ptr<PreTokenizer> pre;
    bool nfc = false;  // the family's reference normalizes text to NFC first
    MergeTable merges;
    // BPE: the token of each byte's alphabet character; SPM: the <0xNN> token. -1 when absent.
    std::array<int32_t, 256> byte_token{};

    // SentencePiece: which tokens merges may produce.
    std::vector<uint8_t> spm_piece;

    void bpe_piece(const Vocab& v, std::string_view piece, std::vector<int32_t>& out) const;
    void spm_fragment(const Vocab& v, std::string_view text, bool prefix_space,
                      std::vector<int32_t>& out) const;
    void push_byte(const Vocab& v, uint8_t b, std::vector<int32_t>& out) const {
        if (byte_token[b] >= 0) {
            out.push_back(byte_token[b]);
        } else if (v.unk >= 0) {
            out.push_back(v.unk);
        }
    }
};

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), impl_(std::make_unique<Impl>()) {
    Vocab& v = vocab_;
    const size_t n = v.tokens.size();
    if (n == 0) fail("the tokenizer vocabulary is empty");
    if (n > size_t(INT32_MAX)) fail("the tokenizer vocabulary has too many tokens ({})", n);
    if (v.types.empty()) v.types.assign(n, TokenType::NORMAL);
    if (v.types.size() != n) {
        fail("tokenizer.ggml.token_type has {} entries for {} tokens", v.types.size(), n);
    }
    if (!v.scores.empty() && v.scores.size() != n) {
        fail("tokenizer.ggml.scores has {} entries for {} tokens", v.scores.size(), n);
    }
    for (auto [name, id] : {std::pair<const char*, int32_t*>{"bos", &v.bos},
                            {"eos", &v.eos},
                            {"eot", &v.eot},
                            {"eom", &v.eom},
                            {"unknown", &v.unk},
                            {"padding", &v.pad},
                            {"seperator", &v.sep}}) {
        if (*id < -1 || *id >= int64_t(n)) {
            fail("tokenizer.ggml.{}_token_id is {}, outside the vocabulary of {} tokens", name, *id,
                 n);
        }
    }

    Impl& im = *impl_;
    im.token_to_id.reserve(n);
    im.pieces.resize(n);
    im.control.assign(n, 0);
    const auto& alphabet = utf8::byte_alphabet();
    for (size_t i = 0; i < n; ++i) {
        const std::string& t = v.tokens[i];
        const TokenType type = v.types[i];
        // Later duplicates never win, as in the files' own converters.
        im.token_to_id.emplace(t, int32_t(i));
        im.control[i] = type == TokenType::CONTROL || type == TokenType::UNKNOWN;
        if (is_special_type(type)) {
            im.pieces[i] = t;
        } else if (v.kind == VocabKind::BPE) {
            im.pieces[i] = alphabet.decode(t);
        } else if (type == TokenType::BYTE) {
            unsigned b = 0;
            if (t.size() == 6 && std::sscanf(t.c_str(), "<0x%2X>", &b) == 1) {
                im.pieces[i] = std::string(1, char(b));
            } else {
                im.pieces[i] = t;
            }
        } else {
            std::string s;
            for (size_t p = 0; p < t.size();) {
                if (t.compare(p, kSpmSpace.size(), kSpmSpace) == 0) {
                    s += ' ';
                    p += kSpmSpace.size();
                } else {
                    s += t[p++];
                }
            }
            im.pieces[i] = std::move(s);
        }
    }

    // Tokens matched in the text before any splitting: longest first, so that "<|im_start|>"
    // wins over a shorter token that is its prefix.
    for (size_t i = 0; i < n; ++i) {
        if (is_special_type(v.types[i]) && !v.tokens[i].empty()) {
            im.specials.push_back({v.tokens[i], int32_t(i), v.types[i] != TokenType::USER_DEFINED});
        }
    }
    std::stable_sort(im.specials.begin(), im.specials.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
    for (size_t i = 0; i < im.specials.size(); ++i) {
        im.by_first[uint8_t(im.specials[i].text[0])].push_back(uint32_t(i));
    }

    im.byte_token.fill(-1);
    if (v.kind == VocabKind::BPE) {
        im.pre = PreTokenizer::for_name(v.pre);
        im.nfc = pre_uses_nfc(v.pre);
        for (int b = 0; b < 256; ++b) {
            auto it = im.token_to_id.find(alphabet.byte_to_utf8[b]);
            if (it != im.token_to_id.end()) im.byte_token[b] = it->second;
        }
        im.merges.reserve(v.merges.size());
        std::string joined;
        for (size_t r = 0; r < v.merges.size(); ++r) {
            const std::string& m = v.merges[r];
            // The separator is the first space after the first character: a piece may itself
            // start with a space in vocabularies that store raw text.
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) fail("tokenizer.ggml.merges[{}] '{}' has no space", r, m);
            std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
            auto li = im.token_to_id.find(left), ri = im.token_to_id.find(right);
            joined.assign(left);
            joined += right;
            auto mi = im.token_to_id.find(joined);
            // A merge whose parts or result are not tokens can never apply; skip it.
            if (li == im.token_to_id.end() || ri == im.token_to_id.end() ||
                mi == im.token_to_id.end()) {
                continue;
            }
            im.merges.insert(li->second, ri->second, int32_t(r), mi->second);
        }
    } else {
        char name[8];
        for (int b = 0; b < 256; ++b) {
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            auto it = im.token_to_id.find(std::string_view(name, 6));
            if (it != im.token_to_id.end()) im.byte_token[b] = it->second;
        }
        if (v.scores.empty()) v.scores.assign(n, 0.0f);
        im.spm_piece.assign(n, 0);
        for (size_t i = 0; i < n; ++i) {
            const TokenType t = v.types[i];
            im.spm_piece[i] =
                t == TokenType::NORMAL || t == TokenType::USER_DEFINED || t == TokenType::UNDEFINED;
        }
    }

    for (int32_t id : {v.eos, v.eot, v.eom}) {
        if (id >= 0) eog_.push_back(id);
    }
    for (size_t i = 0; i < n; ++i) {
        if (v.types[i] != TokenType::CONTROL) continue;
        for (auto t : kEndOfTurnTexts) {
            if (v.tokens[i] == t) eog_.push_back(int32_t(i));
        }
    }
    std::sort(eog_.begin(), eog_.end());
    eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::Impl::bpe_piece(const Vocab& v, std::string_view piece,
                                std::vector<int32_t>& out) const {
    const size_t n = piece.size();
    if (n == 0) return;
    if (pre->ignore_merges) {
        auto it = token_to_id.find(utf8::byte_alphabet().encode(piece));
        if (it != token_to_id.end()) {
            out.push_back(it->second);
            return;
        }
    }
    if (n == 1) {
        push_byte(v, uint8_t(piece[0]), out);
        return;
    }

    // Symbols start as one byte token each and merge leftwards; the queue holds candidate pairs
    // ordered by merge rank, then position (the leftmost of equal ranks merges first, as in the
    // reference implementations). Entries that went stale are skipped when popped.
    struct Sym {
        int32_t id, prev, next;
    };
    struct Cand {
        int32_t rank, left, lid, rid;
        bool operator<(const Cand& o) const {  // the heap pops the largest
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    // Scratch reused across pieces and calls (per thread: encode() may run concurrently).
    thread_local std::vector<Sym> syms;
    thread_local std::vector<Cand> heap;
    syms.resize(n);
    for (size_t i = 0; i < n; ++i) {
        syms[i] =
            Sym{byte_token[uint8_t(piece[i])], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
    }
    heap.clear();
    auto consider = [&](int32_t l) {
        if (l < 0) return;
        const int32_t r = syms[l].next;
        if (r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
        if (const auto* e = merges.find(syms[l].id, syms[r].id)) {
            heap.push_back(Cand{e->rank, l, syms[l].id, syms[r].id});
            std::push_heap(heap.begin(), heap.end());
        }
    };
    for (int32_t i = 0; i + 1 < int32_t(n); ++i) consider(i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end());
        const Cand c = heap.back();
        heap.pop_back();
        Sym& l = syms[c.left];
        if (l.id != c.lid || l.next < 0) continue;
        Sym& r = syms[l.next];
        if (r.id != c.rid) continue;
        l.id = merges.find(c.lid, c.rid)->merged;
        r.id = -2;  // merged away
        l.next = r.next;
        if (l.next >= 0) syms[l.next].prev = c.left;
        consider(l.prev);
        consider(c.left);
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        if (syms[i].id >= 0) {
            out.push_back(syms[i].id);
        } else if (v.unk >= 0) {
            out.push_back(v.unk);  // a byte the vocabulary cannot spell
        }
    }
}

void Tokenizer::Impl::spm_fragment(const Vocab& v, std::string_view text, bool prefix_space,
                                   std::vector<int32_t>& out) const {
    // SentencePiece sees spaces as U+2581 and (optionally) a leading one.
    std::string buf;
    buf.reserve(text.size() + 16);
    if (prefix_space) buf += kSpmSpace;
    for (char c : text) {
        if (c == ' ') {
            buf += kSpmSpace;
        } else {
            buf += c;
        }
    }
    struct Sym {
        int32_t start, len, prev, next;
    };
    std::vector<Sym> syms;
    const auto* s = reinterpret_cast<const uint8_t*>(buf.data());
    for (size_t i = 0; i < buf.size();) {
        size_t len = utf8::char_len(s + i, buf.size() - i);
        if (len == 0) len = 1;  // an invalid byte stands alone and falls back to its byte token
        const int32_t k = int32_t(syms.size());
        syms.push_back(Sym{int32_t(i), int32_t(len), k - 1, -1});
        if (k > 0) syms[k - 1].next = k;
        i += len;
    }
    auto lookup = [&](int32_t start, int32_t len) -> int32_t {
        auto it = token_to_id.find(std::string_view(buf.data() + start, size_t(len)));
        if (it == token_to_id.end() || !spm_piece[it->second]) return -1;
        return it->second;
    };
    struct Cand {
        float score;
        int32_t left, right, len;
        bool operator<(const Cand& o) const {  // best score first, then leftmost
            return score != o.score ? score < o.score : left > o.left;
        }
    };
    std::priority_queue<Cand> heap;
    auto consider = [&](int32_t l) {
        if (l < 0) return;
        const int32_t r = syms[l].next;
        if (r < 0) return;
        const int32_t len = syms[l].len + syms[r].len;
        const int32_t id = lookup(syms[l].start, len);
        if (id >= 0) heap.push(Cand{v.scores[id], l, r, len});
    };
    for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) consider(i);
    while (!heap.empty()) {
        const Cand c = heap.top();
        heap.pop();
        Sym& l = syms[c.left];
        Sym& r = syms[c.right];
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (l.next >= 0) syms[l.next].prev = c.left;
        consider(l.prev);
        consider(c.left);
    }
    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
        const int32_t id = lookup(syms[i].start, syms[i].len);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (int32_t b = 0; b < syms[i].len; ++b)
            push_byte(v, uint8_t(buf[syms[i].start + b]), out);
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
    const Impl& im = *impl_;
    const Vocab& v = vocab_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && v.add_bos && v.bos >= 0) out.push_back(v.bos);

    std::vector<std::string_view> pieces;
    bool prev_special = true;  // SPM's dummy prefix goes at the start and after special tokens
    std::string normalized;
    auto raw = [&](std::string_view frag) {
        if (frag.empty()) return;
        if (v.kind == VocabKind::BPE) {
            // As the reference does: special tokens are split off first, then each fragment
            // between them is normalized.
            if (im.nfc) {
                normalized = to_nfc(frag);
                frag = normalized;
            }
            pieces.clear();
            im.pre->split(frag, pieces);
            thread_local PieceCache cache;
            if (cache.owner != im.serial) {
                cache.map.clear();
                cache.owner = im.serial;
            }
            for (auto p : pieces) {
                if (p.size() > PieceCache::kMaxPiece) {
                    im.bpe_piece(v, p, out);
                    continue;
                }
                if (auto it = cache.map.find(p); it != cache.map.end()) {
                    out.insert(out.end(), it->second.begin(), it->second.end());
                    continue;
                }
                const size_t first = out.size();
                im.bpe_piece(v, p, out);
                if (cache.map.size() >= PieceCache::kMaxEntries) cache.map.clear();
                cache.map.emplace(std::string(p),
                                  std::vector<int32_t>(out.begin() + first, out.end()));
            }
        } else {
            im.spm_fragment(v, frag, v.add_space_prefix && prev_special, out);
        }
        prev_special = false;
    };

    size_t frag_start = 0;
    for (size_t i = 0; i < text.size();) {
        const auto& cands = im.by_first[uint8_t(text[i])];
        const Impl::Special* hit = nullptr;
        for (uint32_t c : cands) {
            const auto& s = im.specials[c];
            if (s.control && !parse_special) continue;
            if (text.size() - i >= s.text.size() &&
                std::memcmp(text.data() + i, s.text.data(), s.text.size()) == 0) {
                hit = &s;
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        raw(text.substr(frag_start, i - frag_start));
        out.push_back(hit->id);
        prev_special = true;
        i += hit->text.size();
        frag_start = i;
    }
    raw(text.substr(frag_start));

    if (add_special && v.add_eos && v.eos >= 0) out.push_back(v.eos);
    return out;
}

std::string Tokenizer::token_text(int32_t id) const {
    if (id < 0 || id >= n_vocab()) return {};
    return impl_->pieces[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    bool at_start = vocab_.kind == VocabKind::SPM && vocab_.add_space_prefix;
    for (int32_t id : ids) {
        if (id < 0 || id >= n_vocab()) continue;
        const std::string& p = impl_->pieces[id];
        if (at_start && !impl_->control[id]) {
            at_start = false;
            if (!p.empty() && p[0] == ' ') {
                out.append(p, 1);
                continue;
            }
        }
        out += p;
    }
    return out;
}

bool Tokenizer::is_eog(int32_t id) const {
    return std::binary_search(eog_.begin(), eog_.end(), id);
}

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && impl_->control[id];
}

int32_t Tokenizer::find_token(std::string_view text) const {
    auto it = impl_->token_to_id.find(text);
    return it == impl_->token_to_id.end() ? -1 : it->second;
}

std::vector<std::string> pre_tokenize(std::string_view pre, std::string_view text) {
    auto p = PreTokenizer::for_name(pre);
    std::vector<std::string_view> pieces;
    p->split(text, pieces);
    return {pieces.begin(), pieces.end()};
}

}  // namespace dl::tokenizer

// The prefix cache (see prefix_cache.h). Entries are few (each is a whole session's state), so a
// lookup scans them against the prompt's prefix hashes: one pass over the prompt, one comparison
// per entry, and a full token comparison only where a hash matches.
#include "engine/prefix_cache.h"

#include <algorithm>
#include <chrono>

namespace dl {

std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens) {
    std::vector<uint64_t> h(tokens.size() + 1);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    h[0] = x;
    for (size_t i = 0; i < tokens.size(); ++i) {
        // splitmix64 of the running hash and the token: each prefix's hash depends on all of it.
        x ^= static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull +
             (x << 6) + (x >> 2);
        uint64_t z = x + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        x = z ^ (z >> 31);
        h[i + 1] = x;
    }
    return h;
}

PrefixCache::PrefixCache(Executor& executor, uint64_t byte_budget, uint64_t host_budget)
    : executor_(executor), budget_(byte_budget), host_budget_(host_budget) {}

void PrefixCache::put(std::span<const int32_t> tokens, const SessionState& session, bool waypoint,
                      int64_t prompt_tokens) {
    if (tokens.empty() || budget_ == 0 || (int64_t)tokens.size() != session.n_past) return;
    const uint64_t hash = prefix_hashes(tokens).back();
    for (Entry& e : entries_)
        if (e.hash == hash &&
            std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) {
            e.last_used = ++clock_;
            return;
        }
    std::unique_ptr<SessionSnapshot> snap = executor_.snapshot(session);
    if (!snap || snap->bytes > budget_) return;
    evict_to(budget_ - snap->bytes);
    bytes_ += snap->bytes;
    entries_.push_back(
        {std::vector<int32_t>(tokens.begin(), tokens.end()), hash, std::move(snap), ++clock_,
         waypoint,
         prompt_tokens < 0 ? tokens.size() : std::min(tokens.size(), (size_t)prompt_tokens)});
}

size_t PrefixCache::longest_prefix(std::span<const int32_t> tokens, int64_t max_tokens) const {
    size_t best = entries_.size();
    const int64_t n = std::min<int64_t>((int64_t)tokens.size(), max_tokens);
    if (entries_.empty() || n <= 0) return best;
    const std::vector<uint64_t> h = prefix_hashes(tokens.first((size_t)n));
    for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry& e = entries_[i];
        const int64_t len = (int64_t)e.tokens.size();
        if (len > n || (best < entries_.size() && len <= (int64_t)entries_[best].tokens.size()) ||
            h[(size_t)len] != e.hash)
            continue;
        if (std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) best = i;
    }
    return best;
}

int64_t PrefixCache::cached(std::span<const int32_t> tokens, int64_t max_tokens) const {
    const size_t i = longest_prefix(tokens, max_tokens);
    return i < entries_.size() ? (int64_t)entries_[i].tokens.size() : 0;
}

int64_t PrefixCache::restore(std::span<const int32_t> tokens, int64_t max_tokens,
                             SessionState& session) {
    const size_t i = longest_prefix(tokens, max_tokens);
    if (i == entries_.size()) return 0;
    Entry* best = &entries_[i];
    if (!executor_.restore(session, *best->snapshot)) return 0;
    best->last_used = ++clock_;
    best->waypoint = false;  // it served a prompt: kept as any other entry
    ++hits_;
    return (int64_t)best->tokens.size();
}

int64_t PrefixCache::longest_shared(std::span<const int32_t> tokens) const {
    size_t best = 0;
    for (const Entry& e : entries_) {
        const size_t n = std::min(e.prompt_tokens, tokens.size());
        if (n <= best) continue;
        best = std::max(
            best,
            (size_t)(std::mismatch(e.tokens.begin(), e.tokens.begin() + n, tokens.begin()).first -
                     e.tokens.begin()));
    }
    return (int64_t)best;
}

// The least recently used entry of those `which` picks (end() when none).
template <typename Which>
std::vector<PrefixCache::Entry>::iterator PrefixCache::least_recent(Which which) {
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (which(*it) && (best == entries_.end() || it->last_used < best->last_used)) best = it;
    return best;
}

// The least recently used entry, on the device (spilled false) or in host memory.
std::vector<PrefixCache::Entry>::iterator PrefixCache::oldest(bool spilled) {
    return least_recent([&](const Entry& e) { return e.snapshot->spilled == spilled; });
}

// Drops the least recently used waypoint in the executor's memory, if any.
bool PrefixCache::drop_waypoint() {
    auto it = least_recent([](const Entry& e) { return e.waypoint && !e.snapshot->spilled; });
    if (it == entries_.end()) return false;
    bytes_ -= it->snapshot->bytes;
    entries_.erase(it);
    return true;
}

// An entry of the executor's memory to host memory where the host budget has room, else gone.
// (A spilled snapshot's bytes are those of its host copy, which holds its KV rows as well.)
void PrefixCache::move_out(std::vector<Entry>::iterator it) {
    bytes_ -= it->snapshot->bytes;
    const auto t0 = std::chrono::steady_clock::now();
    if (host_budget_ > 0 && executor_.spill(*it->snapshot)) {
        host_bytes_ += it->snapshot->bytes;
        ++spills_;
        spill_seconds_ +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
        entries_.erase(it);
    }
}

bool PrefixCache::shed() {
    if (drop_waypoint()) return true;
    auto it = oldest(false);
    if (it == entries_.end()) return false;
    move_out(it);
    evict_to(bytes_);  // the host budget
    return true;
}

void PrefixCache::evict_to(uint64_t budget) {
    while (bytes_ > budget && drop_waypoint()) {
    }
    while (bytes_ > budget) {
        auto it = oldest(false);
        if (it == entries_.end()) break;
        move_out(it);
    }
    while (host_bytes_ > host_budget_) {
        auto it = oldest(true);
        if (it == entries_.end()) break;
        host_bytes_ -= it->snapshot->bytes;
        entries_.erase(it);
    }
}

}  // namespace dl

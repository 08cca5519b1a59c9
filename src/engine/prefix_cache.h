// The prefix cache: snapshots of sessions (Executor::snapshot) keyed by the tokens they hold, so
// that a prompt which begins with an earlier prompt or conversation starts from its state instead
// of prefilling it again. A snapshot holds every layer's state at one position, the attention KV
// rows and the recurrent (DeltaNet, conv) state together, which is what a hybrid model needs: its
// recurrent layers cannot be rewound, so a prefix is reusable only where a snapshot was taken,
// and the KV rows alone would continue from the wrong recurrent state.
//
// A lookup takes the longest cached prefix of the prompt: each entry's tokens are compared in full
// on a hash match, so a hash collision can never reuse the wrong state. Entries live under a byte
// budget in the executor's own memory (a device's, for the Vulkan driver); past it the least
// recently used move to host memory (Executor::spill) under a second budget, and past that they
// go.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "executor/executor.h"

namespace dl {

class PrefixCache {
  public:
    // host_budget: bytes of snapshots spilled to host memory (0: none are spilled).
    PrefixCache(Executor& executor, uint64_t byte_budget, uint64_t host_budget = 0);

    // Keeps a snapshot of `session`, whose tokens are `tokens` (session.n_past of them). Does
    // nothing when an entry for the same tokens exists (it becomes the most recent), or when the
    // snapshot is larger than the whole budget. waypoint: taken only because a prompt's chunk
    // passed a multiple of the snapshot interval, not at the end of a prompt, turn or generation,
    // nor where two prompts parted; until
    // a lookup restores it, such an entry is the first to go when room is needed, dropped rather
    // than moved to host memory (it serves only another prompt that shares that beginning, and
    // a prompt's waypoints would otherwise push out the ends the next turns of chats need).
    // prompt_tokens: how many of the tokens came from a prompt (the rest were generated; -1: all).
    void put(std::span<const int32_t> tokens, const SessionState& session, bool waypoint = false,
             int64_t prompt_tokens = -1);
    // Restores into `session` the longest cached prefix of `tokens` no longer than max_tokens and
    // returns its length; 0 when none matches (the session is then untouched).
    int64_t restore(std::span<const int32_t> tokens, int64_t max_tokens, SessionState& session);
    // The length restore() would give, without restoring anything.
    int64_t cached(std::span<const int32_t> tokens, int64_t max_tokens) const;
    // The longest beginning `tokens` shares with any entry's prompt tokens (whether or not a
    // snapshot ends there): where this prompt parts from one seen before. (Past a prompt, an
    // entry holds what a model generated, which the next turn of that conversation renders again
    // and may tokenize otherwise; parting there is no point another prompt shares.)
    int64_t longest_shared(std::span<const int32_t> tokens) const;

    // Moves the least recently used entry of the executor's memory to host memory, or drops it,
    // so that the executor gets its memory back (a paged KV cache's blocks it held); false when
    // none is left there.
    bool shed();

    uint64_t bytes() const { return bytes_; }            // in the executor's memory
    uint64_t host_bytes() const { return host_bytes_; }  // spilled to host memory
    size_t entries() const { return entries_.size(); }
    uint64_t hits() const { return hits_; }
    // Snapshots moved to host memory (Executor::spill), and the time the moves took.
    uint64_t spills() const { return spills_; }
    double spill_seconds() const { return spill_seconds_; }

  private:
    struct Entry {
        std::vector<int32_t> tokens;
        uint64_t hash = 0;
        std::unique_ptr<SessionSnapshot> snapshot;
        uint64_t last_used = 0;
        bool waypoint = false;     // put(..., waypoint) and never restored since
        size_t prompt_tokens = 0;  // of tokens, those from a prompt
    };
    // Spills or drops the least recently used entries of the executor's memory until `budget`
    // bytes are left there, then drops spilled ones past the host budget.
    void evict_to(uint64_t budget);
    // The index of the longest entry whose tokens begin `tokens` and number at most max_tokens
    // (entries_.size(): none).
    size_t longest_prefix(std::span<const int32_t> tokens, int64_t max_tokens) const;
    template <typename Which>
    std::vector<Entry>::iterator least_recent(Which which);
    std::vector<Entry>::iterator oldest(bool spilled);
    bool drop_waypoint();
    void move_out(std::vector<Entry>::iterator it);

    Executor& executor_;
    uint64_t budget_, host_budget_;
    uint64_t bytes_ = 0, host_bytes_ = 0;
    uint64_t clock_ = 0;
    uint64_t hits_ = 0;
    uint64_t spills_ = 0;
    double spill_seconds_ = 0;
    std::vector<Entry> entries_;
};

// The chained hash of the first n tokens, for every n (hashes[n], hashes[0] the empty prefix).
std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens);

}  // namespace dl

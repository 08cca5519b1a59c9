// The per-request event queue and token-to-text stream (see generation.h).
#include "server/generation.h"

namespace dl::server {

GenerationSink EventQueue::sink(std::shared_ptr<EventQueue> self) {
    return [self](const GenerationEvent& ev) {
        std::lock_guard lock(self->mutex_);
        self->events_.push_back(ev);
        self->cv_.notify_one();
        return !self->stop_;
    };
}

std::optional<GenerationEvent> EventQueue::pop(std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
    GenerationEvent ev = std::move(events_.front());
    events_.pop_front();
    return ev;
}

void EventQueue::stop() {
    std::lock_guard lock(mutex_);
    stop_ = true;
}

TextStream::TextStream(const tokenizer::Tokenizer& tok, std::vector<std::string> stops,
                       bool hide_eog)
    : tok_(tok), decoder_(tok), stop_(std::move(stops)), hide_eog_(hide_eog) {}

std::string TextStream::push(int32_t token) {
    if (stop_.stopped()) return {};
    if (hide_eog_ && tok_.is_eog(token)) return {};
    const std::string text = decoder_.push(token);
    decoded_ += text.size();
    std::string out = stop_.push(text);
    released_ += out.size();
    return out;
}

std::string TextStream::finish() {
    std::string out;
    if (!stop_.stopped()) {
        const std::string text = decoder_.flush();
        decoded_ += text.size();
        out = stop_.push(text);
    }
    out += stop_.flush();
    released_ += out.size();
    return out;
}

}  // namespace dl::server

// The per-role GPU times of --profile (see driver.h Profile).
#include "vulkan/driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dl::vk {

void Profile::add(const std::string& phase, int64_t tokens,
                  const std::vector<std::pair<std::string, double>>& times) {
    Phase& p = phases[phase];
    if (times.size() == 1 && times[0].first == CommandList::kWhole) {
        p.whole_tokens += tokens;
        p.whole_ms += times[0].second;
        return;
    }
    p.tokens += tokens;
    for (const auto& [role, ms] : times) p.ms[role] += ms;
}

std::string Profile::report() const {
    std::string out;
    for (const auto& [name, p] : phases) {
        double total = 0;
        for (const auto& [role, ms] : p.ms) total += ms;
        out += fmt::format(
            "vulkan profile, {}: {} tokens timed a stage at a time, {:.3f} ms on the device "
            "({:.1f} us a token)\n",
            name, p.tokens, total, p.tokens ? 1e3 * total / p.tokens : 0.0);
        if (p.whole_tokens > 0 && p.tokens > 0) {
            const double whole = 1e3 * p.whole_ms / p.whole_tokens;
            out += fmt::format(
                "  timed whole, without a timestamp a stage: {} tokens, {:.1f} us a token on the "
                "device (the stages' timestamps add {:.1f} us a token to the table below)\n",
                p.whole_tokens, whole, 1e3 * total / p.tokens - whole);
        }
        std::vector<std::pair<double, std::string>> rows;
        for (const auto& [role, ms] : p.ms) rows.push_back({ms, role});
        std::sort(rows.rbegin(), rows.rend());
        for (const auto& [ms, role] : rows)
            out += fmt::format("  {:<12} {:10.3f} ms {:5.1f}% {:9.2f} us/token\n", role, ms,
                               total > 0 ? 100 * ms / total : 0.0,
                               p.tokens ? 1e3 * ms / p.tokens : 0.0);
    }
    return out;
}

std::string Profile::line(const std::vector<std::pair<std::string, double>>& times) {
    std::map<std::string, double> by_role;
    double total = 0;
    for (const auto& [role, ms] : times) {
        by_role[role] += ms;
        total += ms;
    }
    std::vector<std::pair<double, std::string>> rows;
    for (const auto& [role, ms] : by_role) rows.push_back({ms, role});
    std::sort(rows.rbegin(), rows.rend());
    std::string out = fmt::format("{:.3f} ms:", total);
    for (size_t i = 0; i < rows.size() && i < 8; ++i)
        out += fmt::format(" {} {:.3f};", rows[i].second, rows[i].first);
    return out;
}

}  // namespace dl::vk

// Describing a token command's plan (see token_plan.h).
#include "vulkan/token_plan.h"

#include <fmt/format.h>

namespace dl::vk {

const char* kind_name(TokenDispatch::Kind k) {
    using K = TokenDispatch::Kind;
    switch (k) {
        case K::embed:
            return "embed";
        case K::rms_norm:
            return "rms_norm";
        case K::gemv:
            return "gemv";
        case K::gemv_normed:
            return "gemv_normed";
        case K::gemv_fused:
            return "gemv_fused";
        case K::gemv_gated:
            return "gemv_gated";
        case K::gemv_swiglu:
            return "gemv_swiglu";
        case K::swiglu:
            return "swiglu";
        case K::moe_route:
            return "moe_route";
        case K::moe_router:
            return "moe_router";
        case K::gemv_experts:
            return "gemv_experts";
        case K::shared_expert_add:
            return "shared_expert_add";
        case K::deltanet_step:
            return "deltanet_step";
        case K::attention:
            return "attention";
        case K::sample:
            return "sample";
    }
    return "?";
}

size_t TokenPlan::n_dispatches() const {
    size_t n = 0;
    for (const TokenStage& s : stages) n += s.dispatches.size();
    return n;
}

namespace {

std::string describe(const TokenDispatch& d) {
    using K = TokenDispatch::Kind;
    std::string out = kind_name(d.kind);
    if (d.layer >= 0) out += fmt::format(" blk.{}", d.layer);
    if (d.m.first)
        out += fmt::format(" {}[{}x{} slab {} +{}:{}]", d.m.first->name, d.m.rows, d.m.cols,
                           d.m.slab, d.m.offset, d.m.bytes);
    switch (d.kind) {
        case K::gemv:
        case K::gemv_normed:
        case K::gemv_fused:
        case K::gemv_gated:
        case K::gemv_swiglu:
        case K::rms_norm:
            out += fmt::format(" x@{} y@{}{}", d.x_off, d.y_off,
                               d.y == TokenOutput::act           ? ""
                               : d.y == TokenOutput::host_logits ? " (host logits)"
                                                                 : " (device logits)");
            break;
        default:
            break;
    }
    if (d.accumulate) out += " +=";
    if (d.share != 1.f) out += fmt::format(" share {:.4f}", d.share);
    if (d.norm) out += fmt::format(" norm {}", d.norm->name);
    if (d.q8) {
        if (d.q8->x_q8) out += " x:q8";
        if (d.q8->out_off != Kernels::kNone) out += fmt::format(" out:q8@{}", d.q8->out_off);
        if (d.q8->out_norm) out += fmt::format(" times {}", d.q8->out_norm->name);
    }
    if (d.kind == K::gemv_swiglu) out += fmt::format(" g+{} u+{}", d.g_off, d.u_off);
    if (d.kind == K::moe_route) out += fmt::format(" x@{} route@{}", d.x_off, d.y_off);
    if (d.kind == K::moe_router)
        out += fmt::format(" x@{} logits@{} route@{}", d.x_off, d.u_off, d.y_off);
    if (d.kind == K::gemv_experts)
        out += fmt::format(" {} of {} rows from {} x@{}{} route@{} y@{}{}", d.experts.k,
                           d.experts.expert_rows, d.experts.first_row, d.experts.x_off,
                           d.experts.x_per_slot ? " a slot" : "", d.experts.route_off,
                           d.experts.y_off, d.experts.sum ? " weighted sum" : "");
    if (d.kind == K::shared_expert_add)
        out += fmt::format(" x@{} shared@{} h@{}{}", d.x_off, d.u_off, d.y_off,
                           d.next_norm ? " then norm " + d.next_norm->name : "");
    if (d.kind == K::gemv_gated)
        out += fmt::format(" gated(ss@{} head {} groups {})", d.gated.ss_off, d.gated.head,
                           d.gated.groups);
    if (d.kind == K::deltanet_step)
        out += fmt::format(" y@{}{}{}", d.deltanet.y_off,
                           d.deltanet.ss_off != Kernels::kNone ? " sums of squares" : "",
                           d.deltanet.round_y ? " y:q8" : "");
    if (d.kind == K::attention)
        out +=
            fmt::format(" ctx {} heads/group {}{}{}", d.attention.n_ctx, d.attention.heads_a_group,
                        d.attention.round_off != Kernels::kNone ? " o:q8" : "",
                        d.prepare_after ? " (+short form)" : "");
    return out;
}

}  // namespace

std::string TokenPlan::describe() const {
    std::string out;
    for (const TokenStage& s : stages) {
        out += s.role;
        out += s.to_host ? " (to host):" : ":";
        for (const TokenDispatch& d : s.dispatches) {
            out += ' ';
            out += vk::describe(d);
            out += ';';
        }
        out += "\n";
    }
    return out;
}

}  // namespace dl::vk

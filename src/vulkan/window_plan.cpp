// Describing a window command's plan (see window_plan.h).
#include "vulkan/window_plan.h"

#include <fmt/format.h>

namespace dl::vk {

namespace {

const char* kind_name(WindowItem::Kind k) {
    using K = WindowItem::Kind;
    switch (k) {
        case K::expand:
            return "expand";
        case K::gemm:
            return "gemm";
        case K::embed:
            return "embed";
        case K::rms_norm:
            return "rms_norm";
        case K::f16_copy:
            return "f16_copy";
        case K::round_rows:
            return "round_rows";
        case K::deltanet_rows:
            return "deltanet_rows";
        case K::attention_rows:
            return "attention_rows";
        case K::swiglu:
            return "swiglu";
        case K::moe_route:
            return "moe_route";
        case K::moe_sort:
            return "moe_sort";
        case K::gemv_experts:
            return "gemv_experts";
        case K::gemm_experts:
            return "gemm_experts";
        case K::gemm_experts_sorted:
            return "gemm_experts_sorted";
        case K::moe_gather:
            return "moe_gather";
        case K::copy_row:
            return "copy_row";
        case K::moe_sum:
            return "moe_sum";
        case K::shared_expert_add:
            return "shared_expert_add";
        case K::head_gemv:
            return "head_gemv";
        case K::deltanet_batch:
            return "deltanet_batch";
        case K::attention_batch:
            return "attention_batch";
        case K::sample_batch:
            return "sample_batch";
        case K::logits_to_host:
            return "logits_to_host";
        case K::barrier:
            return "barrier";
        case K::stage_end:
            return "stage";
        case K::mark_end:
            return "stage (not counted)";
        case K::host_end:
            return "stage to host";
    }
    return "?";
}

}  // namespace

std::string WindowPlan::describe() const {
    std::string out;
    for (const WindowItem& i : items) {
        out += kind_name(i.kind);
        if (!i.role.empty()) out += fmt::format(" '{}'", i.role);
        if (i.layer >= 0) out += fmt::format(" blk.{}", i.layer);
        if (i.kind == WindowItem::Kind::deltanet_batch)
            out += fmt::format(" rows {}", i.deltanet.rows);
        if (i.kind == WindowItem::Kind::attention_batch)
            out += fmt::format(" rows {}", i.attention.a.rows);
        if (i.kind == WindowItem::Kind::sample_batch) out += fmt::format(" rows {}", i.n);
        if ((i.kind == WindowItem::Kind::gemm || i.kind == WindowItem::Kind::deltanet_rows ||
             i.kind == WindowItem::Kind::attention_rows) &&
            i.rows > 0)
            out += fmt::format(" rows {}..{}", i.first_row, i.first_row + i.rows);
        if (i.t) out += fmt::format(" {}", i.t->name);
        if (i.kind == WindowItem::Kind::gemm || i.kind == WindowItem::Kind::rms_norm ||
            i.kind == WindowItem::Kind::f16_copy || i.kind == WindowItem::Kind::round_rows ||
            i.kind == WindowItem::Kind::head_gemv)
            out += fmt::format(" x@{} y@{}{}", i.x_off, i.y_off, i.to_logits ? " (logits)" : "");
        if (i.kind == WindowItem::Kind::round_rows && i.u_off != Kernels::kNone)
            out += fmt::format(" (the SwiGLU with ups@{})", i.u_off);
        if (i.f16_out) out += i.to_pairs16 ? " and its f16 copy (pairs)" : " and its f16 copy";
        if (i.inv_off != Kernels::kNone) out += fmt::format(" positions@{}", i.inv_off);
        if (i.accumulate) out += " +=";
        if (i.w16.range > 0) out += fmt::format(" f16@{}:{}", i.w16.offset, i.w16.range);
        if (i.stage_rows) out += fmt::format(" stage rows {}", i.stage_rows);
        if (i.split.parts.range > 0)
            out += fmt::format(" split@{}:{}", i.split.parts.offset, i.split.parts.range);
        out += '\n';
    }
    return out;
}

}  // namespace dl::vk

// The choice of a mixture-of-experts router from one row's logits, for moe_route.comp (a row a
// workgroup) and moe_router.comp (the last workgroup of the router's GEMV): route_row(row, base,
// t), called by every thread t of the workgroup, reads the n_expert logits x[base ..] and writes
// route[route_off + row · 2k ..]: the k largest (the lower index first on a tie, as torch.topk
// orders them) as expert ids (uints) in ascending order, then their softmax probabilities over
// all experts renormalised to sum to one (floats) in the same order, so the experts' outputs are
// summed in the order the CPU chain sums them (cpu/forward_experts.cpp). k is at most 32.
//
// Three forms (FORM, a specialization constant):
// 2, ranks (both builds, n_expert up to RANK_MAX, k up to RANK_K): every expert's rank in its
//    group of 32 consecutive ids, then each group's best k ranked against all groups' best k;
//    three barriers in all, no chain of rounds.
// 1, merged lists (SUBGROUP): each subgroup chooses its own k in k rounds of subgroup maxima and
//    one subgroup merges the lists in k more.
// 0, rounds: k rounds of an argmax over the workgroup, each reduced through shared memory as
//    (value, index) pairs (SUBGROUP: a subgroup's maximum, then one pass over the subgroups'
//    winners; else a shared tree); a chosen expert drops out of the next rounds.
// The includer declares WG (threads, a power of two), the buffers x (float) and route (uint),
// and p.n_expert, p.k, p.route_off.

layout(constant_id = 2) const uint FORM = 2;
const uint KMAX = 32u;
shared float best_v[WG];
shared uint best_i[WG];
shared float sum_part[WG];
shared uint chosen[KMAX];
shared float chosen_v[KMAX];  // their logits, as the rounds found them

// The better of two (value, index) pairs: the larger value, the lower index on a tie.
bool better(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

// The argmax over the workgroup of each thread's (v, i); the result in best_v[0], best_i[0].
void argmax(float v, uint i, uint t) {
    best_v[t] = v;
    best_i[t] = i;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s && better(best_v[t + s], best_i[t + s], best_v[t], best_i[t])) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        barrier();
    }
}

// Thread 0 weighs the k experts of chosen[] (summed in the order they were chosen, as the CPU
// chain sums them), sorts them by id and writes them renormalised. Their logits come from
// chosen_v[], not memory: k loads one after another on one thread were most of the choice's
// time.
void write_route(uint row, uint base, float mx, float sum_all, uint t) {
    if (t == 0u) {
        float w[KMAX];
        float sum = 0.0;
        for (uint j = 0; j < p.k; ++j) {
            w[j] = exp(chosen_v[j] - mx) / sum_all;
            sum += w[j];
        }
        for (uint a = 1u; a < p.k; ++a) {
            uint id = chosen[a];
            float wa = w[a];
            uint b = a;
            for (; b > 0u && chosen[b - 1u] > id; --b) {
                chosen[b] = chosen[b - 1u];
                w[b] = w[b - 1u];
            }
            chosen[b] = id;
            w[b] = wa;
        }
        uint o = p.route_off + row * 2u * p.k;
        for (uint j = 0; j < p.k; ++j) {
            route[o + j] = chosen[j];
            route[o + p.k + j] = floatBitsToUint(w[j] / sum);
        }
    }
}

// FORM 2: ranks. An expert that k others of its group beat has k better experts already, so
// the k best overall are among the groups' k best (the candidates), and a candidate's rank
// among the candidates is its place in the choice. The rounds' forms wait on k chains of
// reductions one after another (on an H100 the merged lists' choice of 8 of 256 took 10.2 us
// alone, the router's GEMV 6.3); here each thread scans 32 values, then a candidate the
// candidates. NaN logits rank as -inf, so the order is total and every place is filled.
// Experts and k at most RANK_MAX and RANK_K (the launcher checks): with the other forms' arrays
// the workgroup's shared memory stays under the 32 KB some devices give.
const uint GROUP = 32u;
const uint RANK_MAX = 512u;
const uint RANK_K = 8u;
shared float rank_v[RANK_MAX];
shared float rank_cv[RANK_MAX / GROUP * RANK_K];  // group g's candidates at g · k + their rank
shared uint rank_ci[RANK_MAX / GROUP * RANK_K];
shared float group_top[RANK_MAX / GROUP];  // each group's largest logit (-inf: all are -inf)
shared float group_exp[RANK_MAX / GROUP];  // and its sum of exp(logit - that)

void route_row_rank(uint row, uint base, uint t) {
    const float NEG = uintBitsToFloat(0xff800000u);
    const uint n = p.n_expert, k = p.k, ng = (n + GROUP - 1u) / GROUP, nc = ng * k;
    for (uint e = t; e < n; e += WG) {
        const float v = x[base + e];
        rank_v[e] = isnan(v) ? NEG : v;
    }
    for (uint c = t; c < nc; c += WG) rank_ci[c] = 0xffffffffu;
    barrier();
    for (uint e = t; e < n; e += WG) {
        const float v = rank_v[e];
        const uint g = e / GROUP, g0 = g * GROUP, g1 = min(g0 + GROUP, n);
        uint r = 0u;
        float s = 0.0;  // the group's exp(logit - v): its sum of exponentials where v is its top
        for (uint j = g0; j < g1; ++j) {
            const float u = rank_v[j];
            r += better(u, j, v, e) ? 1u : 0u;
            s += exp(u - v);
        }
        if (r < k) {
            rank_cv[g * k + r] = v;
            rank_ci[g * k + r] = e;
        }
        if (r == 0u) {
            group_top[g] = v;
            group_exp[g] = v == NEG ? 0.0 : s;
        }
    }
    barrier();
    for (uint c = t; c < nc; c += WG) {
        const uint e = rank_ci[c];
        if (e == 0xffffffffu) continue;
        const float v = rank_cv[c];
        uint r = 0u;
        for (uint d = 0u; d < nc; ++d)
            r += rank_ci[d] != 0xffffffffu && better(rank_cv[d], rank_ci[d], v, e) ? 1u : 0u;
        if (r < k) {
            chosen[r] = e;
            chosen_v[r] = v;
        }
    }
    barrier();  // chosen[] written
    const float mx = chosen_v[0];
    float sum_all = 0.0;
    if (t == 0u)
        for (uint g = 0u; g < ng; ++g)
            if (group_top[g] != NEG) sum_all += group_exp[g] * exp(group_top[g] - mx);
    write_route(row, base, mx, sum_all, t);
}

#if defined(SUBGROUP)
// FORM 1: merged lists.
const uint PER = 4u;       // experts a thread holds (n_expert <= PER · WG: the launcher checks)
shared float sg_v[2][WG];  // each subgroup's winner of a round, two rounds apart
shared uint sg_i[2][WG];
shared float sg_sum[WG];

// The best (v, i) of the subgroup's lanes (the larger value, the lower index on a tie; an index
// of 0xffffffff offers nothing); every lane gets it.
void subgroup_best(float v, uint i, out float best, out uint best_index) {
    best = subgroupMax(i == 0xffffffffu ? uintBitsToFloat(0xff800000u) : v);
    best_index = subgroupMin(i != 0xffffffffu && v == best ? i : 0xffffffffu);
}

// This thread's best expert not chosen yet (t + j · WG where live[j]): (bv, bi), bi 0xffffffff
// where it has none.
void lane_best(float v[PER], bool live[PER], uint t, out float bv, out uint bi) {
    bv = 0.0;
    bi = 0xffffffffu;
    [[unroll]] for (uint j = 0; j < PER; ++j)
        if (live[j] && (bi == 0xffffffffu || better(v[j], t + j * WG, bv, bi))) {
            bv = v[j];
            bi = t + j * WG;
        }
}

// The workgroup's best (v, i) (the larger value, the lower index on a tie; an index of
// 0xffffffff offers nothing), through buffer b of the subgroups' winners; every thread gets it.
void argmax_sg(float v, uint i, uint b, out float best, out uint best_index) {
    float m;
    uint mi;
    subgroup_best(v, i, m, mi);
    if (subgroupElect()) {
        sg_v[b][gl_SubgroupID] = m;
        sg_i[b][gl_SubgroupID] = mi;
    }
    barrier();
    best = uintBitsToFloat(0xff800000u);
    best_index = 0xffffffffu;
    for (uint g = 0; g < gl_NumSubgroups; ++g)
        if (sg_i[b][g] != 0xffffffffu &&
            (best_index == 0xffffffffu || better(sg_v[b][g], sg_i[b][g], best, best_index))) {
            best = sg_v[b][g];
            best_index = sg_i[b][g];
        }
}

const uint MAXSG = WG / 4u;          // subgroups at most (of 4 lanes or more)
shared float cand_v[MAXSG * KMAX];  // subgroup g's choice, best first, at g · k ..
shared uint cand_i[MAXSG * KMAX];
shared float sg_top[MAXSG];  // each subgroup's largest logit (-inf: it holds none)
shared float sg_exp[MAXSG];  // and its sum of exp(logit - that)
shared uint head[MAXSG];     // the merge's next candidate of each list

void route_row_merge(uint row, uint base, uint t) {
    const float NEG = uintBitsToFloat(0xff800000u);
    const uint sg = gl_SubgroupID, ns = gl_NumSubgroups, lane = gl_SubgroupInvocationID;
    float v[PER];
    bool live[PER];
    [[unroll]] for (uint j = 0; j < PER; ++j) {
        live[j] = t + j * WG < p.n_expert;
        v[j] = live[j] ? x[base + t + j * WG] : 0.0;
    }
    // This subgroup's k best, in order, and its softmax terms against its own largest logit.
    float top = NEG;
    for (uint r = 0; r < p.k; ++r) {
        float bv, w;
        uint bi, id;
        lane_best(v, live, t, bv, bi);
        subgroup_best(bv, bi, w, id);
        if (r == 0u && id != 0xffffffffu) top = w;
        [[unroll]] for (uint j = 0; j < PER; ++j)
            if (t + j * WG == id) live[j] = false;
        if (subgroupElect()) {
            cand_v[sg * p.k + r] = w;
            cand_i[sg * p.k + r] = id;
        }
    }
    float s = 0.0;
    [[unroll]] for (uint j = 0; j < PER; ++j)
        if (t + j * WG < p.n_expert) s += exp(v[j] - top);
    s = subgroupAdd(s);
    if (subgroupElect()) {
        sg_top[sg] = top;
        sg_exp[sg] = s;
        head[sg] = 0u;
    }
    barrier();
    if (sg != 0u) return;

    // The merge: lane l keeps the heads of lists l, l + subgroup size, ...; each round the best
    // head is chosen and its list moves on.
    float mx = NEG;
    for (uint r = 0; r < p.k; ++r) {
        float bv = 0.0;
        uint bi = 0xffffffffu, bq = 0u;
        for (uint q = lane; q < ns; q += gl_SubgroupSize) {
            if (head[q] >= p.k) continue;
            const uint c = q * p.k + head[q];
            if (cand_i[c] != 0xffffffffu &&
                (bi == 0xffffffffu || better(cand_v[c], cand_i[c], bv, bi))) {
                bv = cand_v[c];
                bi = cand_i[c];
                bq = q;
            }
        }
        float w;
        uint id;
        subgroup_best(bv, bi, w, id);
        if (bi == id && id != 0xffffffffu) head[bq] += 1u;
        if (r == 0u) mx = w;
        if (subgroupElect()) {
            chosen[r] = id;
            chosen_v[r] = w;
        }
    }
    float sum_all = 0.0;
    for (uint g = 0; g < ns; ++g)
        if (sg_top[g] != NEG) sum_all += sg_exp[g] * exp(sg_top[g] - mx);
    // (chosen[] was written by this subgroup's elected lane, which writes the route.)
    subgroupMemoryBarrierShared();
    write_route(row, base, mx, sum_all, subgroupElect() ? 0u : 1u);
}

void route_row_rounds(uint row, uint base, uint t) {
    float v[PER];
    bool live[PER];  // this thread's expert t + j · WG exists and is not chosen yet
    [[unroll]] for (uint j = 0; j < PER; ++j) {
        uint e = t + j * WG;
        live[j] = e < p.n_expert;
        v[j] = live[j] ? x[base + e] : 0.0;
    }
    float local_max, mx;
    uint local_arg, unused;
    lane_best(v, live, t, local_max, local_arg);
    argmax_sg(local_max, local_arg, 0u, mx, unused);
    float s = 0.0;
    [[unroll]] for (uint j = 0; j < PER; ++j)
        if (live[j]) s += exp(v[j] - mx);
    s = subgroupAdd(s);
    if (subgroupElect()) sg_sum[gl_SubgroupID] = s;
    barrier();
    float sum_all = 0.0;
    for (uint g = 0; g < gl_NumSubgroups; ++g) sum_all += sg_sum[g];

    // k rounds: each thread offers its best expert not chosen yet, buffers alternating so that
    // a round's writes never meet the previous round's reads.
    for (uint r = 0; r < p.k; ++r) {
        float bv, w;
        uint bi, id;
        lane_best(v, live, t, bv, bi);
        argmax_sg(bv, bi, (r + 1u) & 1u, w, id);
        [[unroll]] for (uint j = 0; j < PER; ++j)
            if (t + j * WG == id) live[j] = false;
        if (t == 0u) {
            chosen[r] = id;
            chosen_v[r] = w;
        }
    }
    barrier();  // chosen[] written
    write_route(row, base, mx, sum_all, t);
}
#else
void route_row_rounds(uint row, uint base, uint t) {
    const float NEG = uintBitsToFloat(0xff800000u);  // -inf: below every finite logit

    // The row's maximum and the softmax's normaliser (which cancels in the renormalisation but
    // rounds the weights as the reference's does).
    float m = NEG;
    for (uint e = t; e < p.n_expert; e += WG) m = max(m, x[base + e]);
    argmax(m, 0u, t);
    float mx = best_v[0];
    barrier();
    float s = 0.0;
    for (uint e = t; e < p.n_expert; e += WG) s += exp(x[base + e] - mx);
    sum_part[t] = s;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (t < h) sum_part[t] += sum_part[t + h];
        barrier();
    }
    float sum_all = sum_part[0];

    // k rounds: each thread offers its best expert not chosen yet.
    for (uint j = 0; j < p.k; ++j) {
        float v = NEG;
        uint vi = 0xffffffffu;
        for (uint e = t; e < p.n_expert; e += WG) {
            bool taken = false;
            for (uint c = 0; c < j; ++c) taken = taken || chosen[c] == e;
            float xe = x[base + e];
            if (!taken && (vi == 0xffffffffu || better(xe, e, v, vi))) {
                v = xe;
                vi = e;
            }
        }
        argmax(v, vi, t);
        if (t == 0u) {
            chosen[j] = best_i[0];
            chosen_v[j] = best_v[0];
        }
        barrier();
    }

    write_route(row, base, mx, sum_all, t);
}
#endif

void route_row(uint row, uint base, uint t) {
    if (FORM == 2u) {
        route_row_rank(row, base, t);
        return;
    }
#if defined(SUBGROUP)
    if (FORM == 1u) {
        route_row_merge(row, base, t);
        return;
    }
#endif
    route_row_rounds(row, base, t);
}

// C = A·Wᵀ for prefill-style products: A is [M, K] (F16, row-major, the activations of a window),
// W is [N, K] (F16, row-major, a weight matrix as GGUF stores it), C is [M, N] (F32). One
// workgroup computes one 16×16 tile of C. Variants (VARIANT_* define):
//   scalar       one thread per output element, any device;
//   nv_coopmat   GL_NV_cooperative_matrix, one subgroup per workgroup;
//   khr_coopmat  GL_KHR_cooperative_matrix, one subgroup per workgroup;
//   nv_coopmat2  GL_NV_cooperative_matrix2 tensor loads, which clamp at the matrix edges.
// The coopmat variants need M, N, K multiples of 16 except nv_coopmat2 (its loads and stores
// clamp at the edges: stores past the matrix are dropped); the host declines others.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if defined(VARIANT_NV_COOPMAT)
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#elif defined(VARIANT_KHR_COOPMAT) || defined(VARIANT_NV_COOPMAT2)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#if defined(VARIANT_NV_COOPMAT2)
#extension GL_NV_cooperative_matrix2 : require
#endif

#if defined(VARIANT_SCALAR)
layout(local_size_x = 16, local_size_y = 16) in;
#else
layout(local_size_x_id = 0) in;  // the device's subgroup size
#endif

layout(std430, binding = 0) readonly buffer A { float16_t a[]; };
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };

layout(push_constant) uniform Push {
    uint M, N, K;
} p;

void main() {
    uint m0 = gl_WorkGroupID.y * 16u, n0 = gl_WorkGroupID.x * 16u;
#if defined(VARIANT_SCALAR)
    uint m = m0 + gl_LocalInvocationID.y, n = n0 + gl_LocalInvocationID.x;
    if (m >= p.M || n >= p.N) return;
    float s = 0.0;
    for (uint k = 0; k < p.K; ++k) s += float(a[m * p.K + k]) * float(w[n * p.K + k]);
    c[m * p.N + n] = s;
#elif defined(VARIANT_NV_COOPMAT)
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    for (uint k = 0; k < p.K; k += 16u) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ta, tb;
        coopMatLoadNV(ta, a, m0 * p.K + k, p.K, false);
        coopMatLoadNV(tb, w, n0 * p.K + k, p.K, true);  // Wᵀ tile: W rows read column-major
        acc = coopMatMulAddNV(ta, tb, acc);
    }
    coopMatStoreNV(acc, c, m0 * p.N + n0, p.N, false);
#elif defined(VARIANT_KHR_COOPMAT)
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    for (uint k = 0; k < p.K; k += 16u) {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta;
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb;
        coopMatLoad(ta, a, m0 * p.K + k, p.K, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(tb, w, n0 * p.K + k, p.K, gl_CooperativeMatrixLayoutColumnMajor);
        acc = coopMatMulAdd(ta, tb, acc);
    }
    coopMatStore(acc, c, m0 * p.N + n0, p.N, gl_CooperativeMatrixLayoutRowMajor);
#elif defined(VARIANT_NV_COOPMAT2)
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lc = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    la = setTensorLayoutDimensionNV(la, p.M, p.K);
    lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
    lc = setTensorLayoutDimensionNV(lc, p.M, p.N);
    tensorViewNV<2, false, 1, 0> transpose = createTensorViewNV(2, false, 1, 0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    for (uint k = 0; k < p.K; k += 16u) {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta;
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb;
        coopMatLoadTensorNV(ta, a, 0, sliceTensorLayoutNV(la, m0, 16, k, 16));
        coopMatLoadTensorNV(tb, w, 0, sliceTensorLayoutNV(lw, n0, 16, k, 16), transpose);
        acc = coopMatMulAdd(ta, tb, acc);
    }
    coopMatStoreTensorNV(acc, c, 0, sliceTensorLayoutNV(lc, m0, 16, n0, 16));
#endif
}

# The Vulkan resident driver: compiles the GLSL compute shaders under src/vulkan/shaders to SPIR-V
# with glslc, validates every module with spirv-val, and embeds them in the binary as word arrays.
#
# Kernel variants: "scalar" runs on any Vulkan 1.2 device (lavapipe in CI); "nv_coopmat",
# "khr_coopmat" and "nv_coopmat2" use cooperative matrices and are built only when the glslc in
# use knows their GLSL extension (probed at configure time). scripts/setup.d/vulkan.sh fetches a
# newer glslc (Debian 13's) into .tools/trixie; it is preferred when present, together with that
# release's spirv-val and Vulkan headers.

# Only the headers are needed at build time: the loader is opened at run time (src/vulkan/loader.cpp),
# so the binary starts on machines without Vulkan and serves on the CPU there.

set(_vk_trixie ${PROJECT_SOURCE_DIR}/.tools/trixie)
set(_vk_runner ${PROJECT_SOURCE_DIR}/scripts/vk/trixie)
set(DELTALLM_GLSLC "" CACHE STRING "glslc command to use (empty: trixie's when set up, else the system's)")
if(DELTALLM_GLSLC)
  set(_vk_glslc ${DELTALLM_GLSLC})
  find_program(_vk_spirv_val_sys spirv-val REQUIRED)
  set(_vk_spirv_val ${_vk_spirv_val_sys})
elseif(EXISTS ${_vk_trixie}/usr/bin/glslc)
  set(_vk_glslc ${_vk_runner} glslc)
  set(_vk_spirv_val ${_vk_runner} spirv-val)
else()
  find_program(_vk_glslc_sys glslc REQUIRED)
  find_program(_vk_spirv_val_sys spirv-val REQUIRED)
  set(_vk_glslc ${_vk_glslc_sys})
  set(_vk_spirv_val ${_vk_spirv_val_sys})
endif()
# Newer headers know the KHR cooperative matrix and NV cooperative matrix 2 structures; the code
# compiles without them (those features then read as absent).
if(EXISTS ${_vk_trixie}/usr/include/vulkan/vulkan_core.h)
  set(_vk_include ${_vk_trixie}/usr/include)
else()
  find_path(_vk_include_sys vulkan/vulkan.h REQUIRED)
  set(_vk_include ${_vk_include_sys})
endif()
execute_process(COMMAND ${_vk_glslc} --version OUTPUT_VARIABLE _vk_glslc_version ERROR_QUIET)
string(REGEX MATCH "^[^\n]*" _vk_glslc_version "${_vk_glslc_version}")
message(STATUS "Vulkan: glslc '${_vk_glslc}' (${_vk_glslc_version}), headers ${_vk_include}")

# Which cooperative-matrix variants this glslc can build: compile one tiny shader per extension.
set(_vk_probe_dir ${CMAKE_BINARY_DIR}/vk_probe)
file(MAKE_DIRECTORY ${_vk_probe_dir})
set(_vk_probe_nv_coopmat [=[
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { float16_t d[]; };
void main() { fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> m; coopMatLoadNV(m, d, 0, 16, false); coopMatStoreNV(m, d, 256, 16, false); }
]=])
set(_vk_probe_khr_coopmat [=[
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { float16_t d[]; };
void main() { coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m; coopMatLoad(m, d, 0, 16, gl_CooperativeMatrixLayoutRowMajor); coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c; coopMatStore(c, d, 256, 16, gl_CooperativeMatrixLayoutRowMajor); }
]=])
set(_vk_probe_nv_coopmat2 [=[
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { float16_t d[]; };
void main() { tensorLayoutNV<2> t = createTensorLayoutNV(2); t = setTensorLayoutDimensionNV(t, 16, 16); coopmat<float16_t, gl_ScopeWorkgroup, 16, 16, gl_MatrixUseA> m; coopMatLoadTensorNV(m, d, 0, t); }
]=])
set(DELTALLM_VK_VARIANTS scalar)
foreach(v nv_coopmat khr_coopmat nv_coopmat2)
  file(WRITE ${_vk_probe_dir}/${v}.comp "${_vk_probe_${v}}")
  execute_process(COMMAND ${_vk_glslc} --target-env=vulkan1.3 -o ${_vk_probe_dir}/${v}.spv ${_vk_probe_dir}/${v}.comp
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(_rc EQUAL 0)
    list(APPEND DELTALLM_VK_VARIANTS ${v})
  endif()
endforeach()
message(STATUS "Vulkan: shader variants built: ${DELTALLM_VK_VARIANTS}")
# The GEMVs over x rounded to bytes use GL_EXT_integer_dot_product, which older glslc lack.
file(WRITE ${_vk_probe_dir}/integer_dot.comp [=[
#version 450
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { int d[]; };
void main() { d[0] = dotPacked4x8EXT(d[1], d[2]); }
]=])
execute_process(COMMAND ${_vk_glslc} --target-env=vulkan1.2 -o ${_vk_probe_dir}/integer_dot.spv ${_vk_probe_dir}/integer_dot.comp
                RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
set(DELTALLM_VK_INTEGER_DOT OFF)
if(_rc EQUAL 0)
  set(DELTALLM_VK_INTEGER_DOT ON)
endif()
message(STATUS "Vulkan: integer dot product GEMVs built: ${DELTALLM_VK_INTEGER_DOT}")

# Every GLSL extension a shader requires is probed once with the compiler in use (an empty
# shader that requires it), so a module whose compiler lacks one of its extensions is left out
# of the build instead of failing it; the driver asks for modules by name (find_module) and
# takes another path where one is absent. GL_EXT_integer_dot_product counts as known only when
# the probe above compiled a product with it (a compiler may know the name but not the
# signature the GEMVs use).
set_property(GLOBAL PROPERTY _vk_ext_GL_EXT_integer_dot_product ${DELTALLM_VK_INTEGER_DOT})
function(dl_vk_extension_known ext out)
  get_property(known GLOBAL PROPERTY _vk_ext_${ext} SET)
  if(NOT known)
    file(WRITE ${_vk_probe_dir}/ext_${ext}.comp
         "#version 450\n#extension ${ext} : require\nlayout(local_size_x = 1) in;\nvoid main() {}\n")
    execute_process(COMMAND ${_vk_glslc} --target-env=vulkan1.3 -o ${_vk_probe_dir}/ext_${ext}.spv
                            ${_vk_probe_dir}/ext_${ext}.comp
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    set(ok OFF)
    if(rc EQUAL 0)
      set(ok ON)
    endif()
    set_property(GLOBAL PROPERTY _vk_ext_${ext} ${ok})
    if(NOT ok)
      message(STATUS "Vulkan: this glslc lacks ${ext}")
    endif()
  endif()
  get_property(ok GLOBAL PROPERTY _vk_ext_${ext})
  set(${out} ${ok} PARENT_SCOPE)
endfunction()

# The extensions a shader source and the headers it includes require, in any branch of their
# #if blocks (a superset of what one set of defines needs).
function(dl_vk_listed_extensions source out)
  set(todo ${_vk_src}/${source})
  set(seen)
  set(exts)
  while(todo)
    list(POP_FRONT todo f)
    if(f IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${f})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*(extension|include)")
    foreach(l IN LISTS lines)
      if(l MATCHES "#[ \t]*extension[ \t]+([A-Za-z0-9_]+)[ \t]*:[ \t]*require")
        list(APPEND exts ${CMAKE_MATCH_1})
      elseif(l MATCHES "#[ \t]*include[ \t]+\"([^\"]+)\"")
        list(APPEND todo ${_vk_src}/${CMAKE_MATCH_1})
      endif()
    endforeach()
  endwhile()
  list(REMOVE_DUPLICATES exts)
  set(${out} ${exts} PARENT_SCOPE)
endfunction()

# The extensions among `listed` that the compiler lacks and that the shader needs with these
# defines: only when one is lacking is the source preprocessed (glslc -E) to see which of its
# #extension lines survive, so a build with a compiler that knows everything pays nothing.
function(dl_vk_missing_extensions source dflags listed out)
  set(missing)
  foreach(e IN LISTS listed)
    dl_vk_extension_known(${e} ok)
    if(NOT ok)
      list(APPEND missing ${e})
    endif()
  endforeach()
  if(missing)
    execute_process(COMMAND ${_vk_glslc} -E -I ${_vk_src} ${dflags} ${_vk_src}/${source}
                    OUTPUT_VARIABLE pre ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      set(active)
      foreach(e IN LISTS missing)
        if(pre MATCHES "#[ \t]*extension[ \t]+${e}[ \t]*:[ \t]*require")
          list(APPEND active ${e})
        endif()
      endforeach()
      set(missing ${active})
    endif()
  endif()
  set(${out} ${missing} PARENT_SCOPE)
endfunction()

# The shader table: NAME SOURCE [DEFINES d1 d2 ...] [VARIANTS v1 v2 ...]. A shader with VARIANTS
# is built once per listed variant that the compiler supports (named NAME@variant, compiled with
# -DVARIANT_<VARIANT>=1); one without is scalar-only and named NAME.
set(_vk_src ${PROJECT_SOURCE_DIR}/src/vulkan/shaders)
set(_vk_out ${CMAKE_BINARY_DIR}/vk_spirv)
file(MAKE_DIRECTORY ${_vk_out})
set(_vk_spv_files)
set(_vk_spv_names)
file(GLOB _vk_headers CONFIGURE_DEPENDS ${_vk_src}/*.glsl)

function(dl_vk_compile name source env defines)
  set(spv ${_vk_out}/${name}.spv)
  set(dflags)
  foreach(d ${defines})
    list(APPEND dflags -D${d})
  endforeach()
  dl_vk_listed_extensions(${source} listed)
  dl_vk_missing_extensions(${source} "${dflags}" "${listed}" missing)
  if(missing)
    set_property(GLOBAL APPEND PROPERTY _vk_skipped "${name} (${missing})")
    return()
  endif()
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${_vk_glslc} --target-env=${env} -O -I ${_vk_src} ${dflags} -o ${spv}.tmp ${_vk_src}/${source}
    COMMAND ${_vk_spirv_val} --target-env ${env} ${spv}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${spv}.tmp ${spv}
    DEPENDS ${_vk_src}/${source} ${_vk_headers}
    COMMENT "SPIR-V ${name}"
    VERBATIM)
  set(_vk_spv_files ${_vk_spv_files} ${spv} PARENT_SCOPE)
  set(_vk_spv_names ${_vk_spv_names} ${name} PARENT_SCOPE)
endfunction()

function(dl_vk_shader name source)
  cmake_parse_arguments(A "" "" "DEFINES;VARIANTS" ${ARGN})
  if(NOT A_VARIANTS)
    dl_vk_compile(${name} ${source} vulkan1.2 "${A_DEFINES}")
  else()
    foreach(v ${A_VARIANTS})
      if(NOT v IN_LIST DELTALLM_VK_VARIANTS)
        continue()
      endif()
      string(TOUPPER ${v} V)
      set(env vulkan1.3)
      if(v STREQUAL "scalar")
        set(env vulkan1.2)
      endif()
      dl_vk_compile(${name}@${v} ${source} ${env} "${A_DEFINES};VARIANT_${V}=1")
    endforeach()
  endif()
  set(_vk_spv_files ${_vk_spv_files} PARENT_SCOPE)
  set(_vk_spv_names ${_vk_spv_names} PARENT_SCOPE)
endfunction()

# GEMV over weights in their GGUF block formats: one shader per format, and a _sg variant that
# reduces with subgroup arithmetic.
foreach(t f32 f16 q4_0 q8_0 q4_k q5_k q6_k)
  string(TOUPPER ${t} T)
  dl_vk_shader(gemv_${t} gemv.comp DEFINES WTYPE_${T}=1)
  dl_vk_shader(gemv_${t}_sg gemv.comp DEFINES WTYPE_${T}=1 SUBGROUP=1)
  dl_vk_shader(get_rows_${t} get_rows.comp DEFINES WTYPE_${T}=1)
  # The same slice products over a batch of up to 8 vectors (see gemv_batch.comp).
  dl_vk_shader(gemv_batch_${t} gemv_batch.comp DEFINES WTYPE_${T}=1)
  dl_vk_shader(gemv_batch_${t}_sg gemv_batch.comp DEFINES WTYPE_${T}=1 SUBGROUP=1)
  # ... over the chosen experts of a mixture-of-experts layer (EXPERTS).
  dl_vk_shader(gemv_experts_${t} gemv_batch.comp DEFINES WTYPE_${T}=1 EXPERTS=1)
  dl_vk_shader(gemv_experts_${t}_sg gemv_batch.comp DEFINES WTYPE_${T}=1 EXPERTS=1 SUBGROUP=1)
endforeach()
# The decode fusions of the same GEMV (see gemv.comp): an RMSNorm epilogue of the accumulated
# residual stream (_norm), the FFN gate and up pair with the SwiGLU (_swiglu).
foreach(t f32 f16 q4_0 q8_0 q4_k q5_k q6_k)
  string(TOUPPER ${t} T)
  dl_vk_shader(gemv_${t}_norm gemv.comp DEFINES WTYPE_${T}=1 NORM_EPILOGUE=1)
  dl_vk_shader(gemv_${t}_norm_sg gemv.comp DEFINES WTYPE_${T}=1 NORM_EPILOGUE=1 SUBGROUP=1)
  dl_vk_shader(gemv_${t}_swiglu gemv.comp DEFINES WTYPE_${T}=1 SWIGLU_PAIR=1)
  dl_vk_shader(gemv_${t}_swiglu_sg gemv.comp DEFINES WTYPE_${T}=1 SWIGLU_PAIR=1 SUBGROUP=1)
endforeach()
# The block formats again over x rounded to bytes (_i8, integer dot products; see gemv.comp),
# plain, with the RMSNorm epilogue, as the SwiGLU pair, both of the last two over x before its
# RMSNorm (_nin), and plain over a DeltaNet step's output before its gated RMSNorm (_gin).
if(DELTALLM_VK_INTEGER_DOT)
  foreach(t q4_0 q8_0 q4_k q5_k q6_k)
    string(TOUPPER ${t} T)
    foreach(fuse "" _norm _swiglu _nin _swiglu_nin _gin)
      set(_defs WTYPE_${T}=1 X_INT8=1)
      if(fuse STREQUAL "_norm")
        list(APPEND _defs NORM_EPILOGUE=1)
      elseif(fuse MATCHES "_swiglu")
        list(APPEND _defs SWIGLU_PAIR=1)
      endif()
      if(fuse MATCHES "_nin")
        list(APPEND _defs NORM_IN=1)
      elseif(fuse STREQUAL "_gin")
        list(APPEND _defs GATED_IN=1)
      endif()
      dl_vk_shader(gemv_${t}${fuse}_i8 gemv.comp DEFINES ${_defs})
      dl_vk_shader(gemv_${t}${fuse}_i8_sg gemv.comp DEFINES ${_defs} SUBGROUP=1)
    endforeach()
    # The batched GEMV over its vectors rounded to bytes (round_rows), plain and over experts.
    dl_vk_shader(gemv_batch_${t}_i8 gemv_batch.comp DEFINES WTYPE_${T}=1 X_INT8=1)
    dl_vk_shader(gemv_batch_${t}_i8_sg gemv_batch.comp DEFINES WTYPE_${T}=1 X_INT8=1 SUBGROUP=1)
    dl_vk_shader(gemv_experts_${t}_i8 gemv_batch.comp DEFINES WTYPE_${T}=1 X_INT8=1 EXPERTS=1)
    dl_vk_shader(gemv_experts_${t}_i8_sg gemv_batch.comp
                 DEFINES WTYPE_${T}=1 X_INT8=1 EXPERTS=1 SUBGROUP=1)
  endforeach()
  dl_vk_shader(round_rows round_rows.comp)
  dl_vk_shader(round_rows_swiglu round_rows.comp DEFINES SWIGLU=1)
endif()
# Prefill GEMM tiles over the same formats: scalar, on KHR cooperative matrices, and on NV
# cooperative matrix 2 block loads.
foreach(t f32 f16 q4_0 q8_0 q4_k q5_k q6_k)
  string(TOUPPER ${t} T)
  dl_vk_shader(gemm_${t} gemm.comp DEFINES WTYPE_${T}=1 VARIANTS scalar)
  dl_vk_shader(gemm_${t} gemm_coopmat.comp DEFINES WTYPE_${T}=1 VARIANTS khr_coopmat)
  dl_vk_shader(gemm_${t} gemm_cm2.comp DEFINES WTYPE_${T}=1 VARIANTS nv_coopmat2)
  dl_vk_shader(gemm_${t}_split gemm_cm2.comp DEFINES WTYPE_${T}=1 SPLIT_K=1 VARIANTS nv_coopmat2)
  dl_vk_shader(dequant_f16_${t} dequant_f16.comp DEFINES WTYPE_${T}=1)
endforeach()
# (Q4_K and Q6_K by 64 values a thread, 128 bytes written)
dl_vk_shader(dequant_f16_q4k dequant_f16_q4k.comp)
dl_vk_shader(dequant_f16_q6k dequant_f16_q6k.comp)
# The skinny GEMM of few rows over the K-quants the device holds in tiles of rows.
foreach(t q4_k q6_k)
  string(TOUPPER ${t} T)
  dl_vk_shader(gemm_skinny_${t} gemm_skinny.comp DEFINES WTYPE_${T}=1 VARIANTS khr_coopmat)
  # The same over a window's expert pairs grouped by expert (gemm_experts' contract).
  dl_vk_shader(gemm_skinny_${t}_experts gemm_skinny.comp DEFINES WTYPE_${T}=1 EXPERTS=1
               VARIANTS khr_coopmat)
  # And as NV cooperative matrix 2 tiles over the pairs' inputs gathered in the experts' order.
  dl_vk_shader(gemm_experts_cm2_${t} gemm_experts_cm2.comp DEFINES WTYPE_${T}=1
               VARIANTS nv_coopmat2)
endforeach()
# (and over the stacks expanded to F16)
dl_vk_shader(gemm_experts_cm2_f16 gemm_experts_cm2.comp DEFINES WTYPE_F16=1 VARIANTS nv_coopmat2)
# The expert GEMMs of a prefill window as grouped tiles: scalar, and on KHR cooperative matrices.
foreach(t f32 f16 q4_0 q8_0 q4_k q5_k q6_k)
  string(TOUPPER ${t} T)
  dl_vk_shader(gemm_experts_${t} gemm_experts.comp DEFINES WTYPE_${T}=1 VARIANTS scalar khr_coopmat)
endforeach()
# F16 accumulators in the NV tiles over F16 weights: the GEMM speed report's experiment.
dl_vk_shader(gemm_f16_acc16 gemm_cm2.comp DEFINES WTYPE_F16=1 ACC_F16=1 VARIANTS nv_coopmat2)
dl_vk_shader(f16_copy f16_copy.comp)
dl_vk_shader(deltanet_step deltanet_step.comp)
dl_vk_shader(deltanet_step_sg deltanet_step.comp DEFINES SUBGROUP=1)
dl_vk_shader(deltanet_conv deltanet_conv.comp)
dl_vk_shader(deltanet_gates deltanet_gates.comp)
dl_vk_shader(deltanet_ring deltanet_ring.comp)
# The windowed scan: without subgroup operations (one thread a value column), with clustered
# adds, with xor shuffles.
dl_vk_shader(deltanet_scan deltanet_scan.comp)
dl_vk_shader(deltanet_scan_cl deltanet_scan.comp DEFINES SCAN_CLUSTERED=1)
dl_vk_shader(deltanet_scan_sh deltanet_scan.comp DEFINES SCAN_SHUFFLE=1)
# The chunked (WY) form of the same scan: every chunk's WY factors at once, then the walk over
# the chunks with the state on chip.
dl_vk_shader(deltanet_wy deltanet_wy.comp)
dl_vk_shader(deltanet_chunk deltanet_chunk.comp)
dl_vk_shader(gated_norm gated_norm.comp)
dl_vk_shader(attn_prep_rows attn_prep_rows.comp)
# Window attention: scores from queries in shared memory, or summed over subgroup lanes (_sh).
dl_vk_shader(attn_window attn_window.comp)
dl_vk_shader(attn_window_sh attn_window.comp DEFINES SCORE_SHUFFLE=1)
# The same on NV cooperative matrix 2 (both products on tensor cores, the softmax on matrices).
dl_vk_shader(attn_window_cm2 attn_window_cm2.comp VARIANTS nv_coopmat2)
# And on KHR cooperative matrices (both products on the matrix units, the softmax on threads).
dl_vk_shader(attn_window_cm attn_window_cm.comp VARIANTS khr_coopmat)
dl_vk_shader(attn_decode attn_decode.comp)
dl_vk_shader(rms_norm rms_norm.comp)
dl_vk_shader(swiglu swiglu.comp)
# The same writing their rows' F16 copy too, for the GEMM tiles after them.
dl_vk_shader(rms_norm_f16 rms_norm.comp DEFINES F16_OUT=1)
dl_vk_shader(swiglu_f16 swiglu.comp DEFINES F16_OUT=1)
dl_vk_shader(moe_route moe_route.comp)
dl_vk_shader(moe_route_sg moe_route.comp DEFINES SUBGROUP=1)
dl_vk_shader(moe_router moe_router.comp)
dl_vk_shader(moe_router_sg moe_router.comp DEFINES SUBGROUP=1)
dl_vk_shader(shared_expert_add shared_expert_add.comp)
dl_vk_shader(moe_sort moe_sort.comp)
dl_vk_shader(moe_sum moe_sum.comp)
dl_vk_shader(moe_gather moe_gather.comp)
dl_vk_shader(argmax argmax.comp)
# The streaming read probe of bench's decode floor.
dl_vk_shader(stream_read stream_read.comp)
# The stage speed report's chain of dependent rounds without weights.
dl_vk_shader(stage_chain stage_chain.comp)
# The GEMV speed report's Q4_K GEMV over rows held in tiles.
dl_vk_shader(gemv_tile_q4_k gemv_tile.comp DEFINES WTYPE_Q4_K=1)
dl_vk_shader(gemv_tile_q6_k gemv_tile.comp DEFINES WTYPE_Q6_K=1)
dl_vk_shader(sample sample.comp)
# Sampling over a large vocabulary: each chunk's candidates, then the choice among them.
dl_vk_shader(sample_chunks sample_chunks.comp)
dl_vk_shader(sample_cand sample.comp DEFINES CANDIDATES=1)
dl_vk_shader(matmul_f16 matmul_f16.comp VARIANTS scalar nv_coopmat khr_coopmat nv_coopmat2)

get_property(_vk_skipped GLOBAL PROPERTY _vk_skipped)
if(_vk_skipped)
  list(LENGTH _vk_skipped _n)
  string(REPLACE ";" ", " _vk_skipped "${_vk_skipped}")
  message(STATUS "Vulkan: ${_n} modules left out, their extensions unknown to this glslc: ${_vk_skipped}")
endif()

# Embed: one generated .cpp holding every module as a uint32_t array plus a name table.
set(_vk_embed_cpp ${CMAKE_BINARY_DIR}/vk_spirv/spirv_table.cpp)
add_custom_command(
  OUTPUT ${_vk_embed_cpp}
  COMMAND ${CMAKE_COMMAND} "-DOUT=${_vk_embed_cpp}" "-DNAMES=${_vk_spv_names}" "-DFILES=${_vk_spv_files}"
          "-DVARIANTS=${DELTALLM_VK_VARIANTS}" "-DGLSLC_VERSION=${_vk_glslc_version}"
          -P ${PROJECT_SOURCE_DIR}/scripts/vk/embed_spirv.cmake
  DEPENDS ${_vk_spv_files} ${PROJECT_SOURCE_DIR}/scripts/vk/embed_spirv.cmake
  COMMENT "Embedding SPIR-V modules"
  VERBATIM)

# Every module compiled and embedded, and nothing else: what the build with the system's glslc
# checks in CI (scripts/test.sh) without compiling the driver's C++ twice.
add_custom_target(deltallm_vk_shaders DEPENDS ${_vk_embed_cpp})

file(GLOB _vk_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/vulkan/*.cpp)
add_library(deltallm_vulkan STATIC ${_vk_sources} ${_vk_embed_cpp})
target_include_directories(deltallm_vulkan PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_include_directories(deltallm_vulkan SYSTEM PUBLIC ${_vk_include})
target_compile_options(deltallm_vulkan PRIVATE ${DELTALLM_WARNINGS})
target_link_libraries(deltallm_vulkan PUBLIC deltallm_lib ${CMAKE_DL_LIBS})
target_compile_definitions(deltallm_vulkan PUBLIC DELTALLM_HAVE_VULKAN=1)
set(DELTALLM_HAVE_VULKAN ON)

# The deltallm executable is declared after this file is included: link it at the end of the
# directory.
# Linked whole: the driver registers itself with the engine from a static initialiser.
cmake_language(DEFER CALL target_link_libraries deltallm PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,deltallm_vulkan>")
cmake_language(DEFER CALL target_compile_definitions deltallm PRIVATE DELTALLM_HAVE_VULKAN=1)
